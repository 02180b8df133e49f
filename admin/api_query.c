/*
 * api_query.c - the admin API's query strings: every parameter decoded by
 * one reader (adm_api_query_each), flags read from it, and the check the
 * dispatch runs before any handler against the parameters an endpoint
 * takes: one it does not take, one given twice or a flag that is not 1,
 * true, 0 or false is a 400 naming it.
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

/* <n> bytes at <s>, %-decoded ('+' is a space, as in forms); NULL on OOM. */
static char *query_decode(const char *s, size_t n)
{
    char *raw = strndup(s, n), *out = raw ? evhttp_uridecode(raw, 1, NULL) : NULL;

    free(raw);
    return out;
}

/* Calls <fn>(<arg>, key, value) on each parameter of the query <q> (NULL:
 * none), both decoded, the value NULL when the parameter is bare (?a).
 * Empty pieces (a&&b, a trailing &) name nothing and are skipped. Stops at
 * the first nonzero return of <fn> and returns it; -1 out of memory. Every
 * reader of a query goes through here, so that what is checked is what is
 * used. */
int adm_api_query_each(const char *q, int (*fn)(void *arg, const char *key, const char *val),
                       void *arg)
{
    for (; q && *q; q += strcspn(q, "&") + (q[strcspn(q, "&")] == '&')) {
        size_t n = strcspn(q, "&"), kl = strcspn(q, "=&");
        char *key, *val = NULL;
        int rc;

        if (!n)
            continue;
        key = query_decode(q, kl);
        if (!key || (kl < n && !(val = query_decode(q + kl + 1, n - kl - 1)))) {
            free(key);
            return -1;
        }
        rc = fn(arg, key, val);
        free(key);
        free(val);
        if (rc)
            return rc;
    }
    return 0;
}

struct query_flag_ctx {
    const char *name;
    int on;
};

static int query_flag_one(void *arg, const char *key, const char *val)
{
    struct query_flag_ctx *c = arg;

    if (strcmp(key, c->name) == 0)
        c->on = val && (strcmp(val, "1") == 0 || strcmp(val, "true") == 0);
    return 0;
}

/* The flag <name> in <query>, already checked by adm_api_query_check(): 1 for 1
 * or true, 0 for 0, false or absent, -1 out of memory. */
int adm_api_query_flag(const char *query, const char *name)
{
    struct query_flag_ctx c = {name, 0};

    return adm_api_query_each(query, query_flag_one, &c) < 0 ? -1 : c.on;
}

/* Makes every byte of <s> outside printable ASCII a '?', so that a string
 * made of what a client sent is valid JSON. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

/* A query parameter refused: 400 naming it (<name>, changed), with <why>
 * (changed). */
static void query_refused(struct adm_api *api, struct adm_req *req, char *name, char *why)
{
    printable(name);
    printable(why);
    adm_api_reply_error(
        api, req, 400, why,
        json_pack("[{s:s,s:s,s:s}]", "path", "", "parameter", name, "message", why));
}

/* Why the parameter <key> (value <val>, NULL when bare) is refused by <e>
 * (<seen> counts each known one), into <why>; 0 when it is fine. */
static int query_refusal(const struct endpoint *e, unsigned char *seen, const char *key,
                         const char *val, char *why, size_t cap)
{
    const struct qparam *p;

    for (p = e->query; p->name && strcmp(p->name, key) != 0; p++)
        ;
    if (!p->name) {
        size_t o =
            (size_t)snprintf(why, cap, "unknown query parameter %.64s (this endpoint takes", key);
        if (!e->query[0].name)
            o += (size_t)snprintf(why + o, cap - o, " none");
        for (const struct qparam *k = e->query; k->name && o < cap; k++)
            o += (size_t)snprintf(why + o, cap - o, "%s %s", k == e->query ? "" : ",", k->name);
        if (o < cap)
            snprintf(why + o, cap - o, ")");
        return -1;
    }
    if (seen[p - e->query]++) {
        snprintf(why, cap, "query parameter %s given twice", key);
        return -1;
    }
    if (p->kind == QP_FLAG && (!val || (strcmp(val, "1") && strcmp(val, "true") &&
                                        strcmp(val, "0") && strcmp(val, "false")))) {
        if (val)
            snprintf(why, cap, "query parameter %s takes 1, true, 0 or false, not \"%.64s\"", key,
                     val);
        else
            snprintf(why, cap, "query parameter %s takes 1, true, 0 or false, and has no value",
                     key);
        return -1;
    }
    return 0;
}

struct query_check_ctx {
    const struct endpoint *e;
    unsigned char seen[8]; /* per known parameter: how often given */
    char key[80], why[320];
};

static int query_check_one(void *arg, const char *key, const char *val)
{
    struct query_check_ctx *c = arg;

    if (!query_refusal(c->e, c->seen, key, val, c->why, sizeof(c->why)))
        return 0;
    snprintf(c->key, sizeof(c->key), "%s", key);
    return 1;
}

/* Checks the query of <req> against what <e> takes: every parameter known,
 * none twice, flags 1, true, 0 or false. 0 ok; -1 with the answer sent. */
int adm_api_query_check(struct adm_api *api, struct adm_req *req, const struct endpoint *e)
{
    struct query_check_ctx c = {.e = e};
    int rc = adm_api_query_each(adm_req_query(req), query_check_one, &c);

    if (rc < 0)
        adm_api_send_oom(req);
    else if (rc > 0)
        query_refused(api, req, c.key, c.why);
    return rc ? -1 : 0;
}

/*
 * route_diff.c - switchyard-route --diff OLD.json NEW.json: the requests
 * of stdin replayed against the routes of two Switchyard configs, grouped
 * by where they went from and to, as the admin API's dry runs group the
 * live sample (router/diff.c). A line is "METHOD HOST PATH[?QUERY]" (HOST
 * '-' for none) or a line of Switchyard's JSON access log (its method,
 * host and path; the path is the normalized one, without the query).
 */
#define _POSIX_C_SOURCE 200809L
#include "router/diff_json.h"
#include "router/route_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* The request lines of <in>, one at a time. */
struct line_iter {
    FILE *in;
    char *line;
    size_t cap;
    json_t *rec;    /* the access-log record the request points into */
    size_t skipped; /* lines that are neither form */
};

/* The length of host <h> without its port, as the gateway routes it: the
 * access log's host is the Host field as sent ("example.com:8080",
 * "[::1]:8443"); the router is given the name alone (brackets kept). */
static size_t host_name_len(const char *h, size_t n)
{
    const char *end = h[0] == '[' ? memchr(h, ']', n) : NULL;

    if (end)
        return (size_t)(end - h) + 1;
    end = h[0] == '[' ? NULL : memchr(h, ':', n);
    return end ? (size_t)(end - h) : n;
}

/* A JSON access-log line <s> into <q> (pointing into it->rec). */
static int from_log(struct line_iter *it, const char *s, struct rt_diff_req *q)
{
    json_t *m, *h, *p;

    json_decref(it->rec);
    it->rec = json_loads(s, 0, NULL);
    m = json_object_get(it->rec, "method");
    h = json_object_get(it->rec, "host");
    p = json_object_get(it->rec, "path");
    if (!json_is_string(m) || !json_is_string(p) || (h && !json_is_string(h) && !json_is_null(h)))
        return -1;
    q->method = json_string_value(m);
    q->mlen = json_string_length(m);
    q->host = json_is_string(h) ? json_string_value(h) : "";
    q->hlen = json_is_string(h) ? host_name_len(q->host, json_string_length(h)) : 0;
    q->path = json_string_value(p);
    q->plen = strcspn(q->path, "?"); /* a path is never given a query; to be sure */
    return 0;
}

/* "METHOD HOST PATH[?QUERY]" in <s> (cut up in place) into <q>. */
static int from_words(char *s, struct rt_diff_req *q)
{
    char *save = NULL, *m = strtok_r(s, " \t\r\n", &save), *h = strtok_r(NULL, " \t\r\n", &save);
    char *p = strtok_r(NULL, " \t\r\n", &save);

    if (!m || !h || !p || strtok_r(NULL, " \t\r\n", &save))
        return -1;
    if (strcmp(h, "-") == 0)
        h = "";
    *q = (struct rt_diff_req){m, h, p, strlen(m), host_name_len(h, strlen(h)), strcspn(p, "?")};
    return 0;
}

static int next_line(void *arg, struct rt_diff_req *q)
{
    struct line_iter *it = arg;

    while (getline(&it->line, &it->cap, it->in) != -1) {
        char *s = it->line + strspn(it->line, " \t");
        if (*s == '\0' || *s == '\n' || *s == '\r' || *s == '#')
            continue;
        if ((*s == '{' ? from_log(it, s, q) : from_words(s, q)) == 0)
            return 1;
        it->skipped++;
    }
    return 0;
}

int route_diff_main(const char *old_path, const char *new_path, FILE *in, route_config_make_fn make,
                    void (*udata_free)(void *udata))
{
    rt_table *a = route_config_load(old_path, make, udata_free), *b = NULL;
    struct line_iter it = {.in = in};
    struct rt_diff d;
    json_t *o;
    int rc = 1;

    if (!a || !(b = route_config_load(new_path, make, udata_free)))
        goto out;
    if (rt_diff_run(a, b, next_line, &it, NULL, NULL, &d) < 0) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    o = json_pack("{s:I,s:I,s:I,s:o}", "sampled", (json_int_t)d.sampled, "unchanged",
                  (json_int_t)d.unchanged, "skipped", (json_int_t)it.skipped, "changed",
                  rt_diff_groups_json(d.changed, d.nchanged));
    rt_diff_clear(&d);
    if (o && json_dumpf(o, stdout, JSON_INDENT(2)) == 0 && putchar('\n') != EOF)
        rc = it.skipped ? 1 : 0;
    json_decref(o);
out:
    free(it.line);
    json_decref(it.rec);
    rt_table_free(a);
    rt_table_free(b);
    return rc;
}

/*
 * regex.c - the regexps of {name:regexp} parameters, with PCRE2.
 *
 * A regexp is compiled once, when the first route naming it at one tree
 * position is inserted, anchored at both ends (it must match the whole
 * value of the parameter) and JIT-compiled when the platform allows. Nodes
 * of every version holding it share it by reference count; only the writer
 * touches the count.
 *
 * Matching needs PCRE2 match data. A thread that looks up owns an rt_ctx,
 * created in advance (the gateway's workers make one each), so a lookup
 * allocates nothing; the match limit bounds the work one regexp may do on
 * one segment (a hostile path cannot make a lookup backtrack for long).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "router/router_int.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* Steps of the matcher a regexp may take on one segment (PCRE2's own
 * default is ten million). */
#define RT_RX_MATCH_LIMIT 100000

#define RT_RX_FLAGS (PCRE2_ANCHORED | PCRE2_ENDANCHORED)

struct rt_regex {
    uint32_t refs;
    uint16_t len;
    pcre2_code *code;
    char src[]; /* not NUL-terminated */
};

struct rt_ctx {
    pcre2_match_data *md;
    pcre2_match_context *mc;
};

int rt_regex_check(const char *src, size_t len, size_t *erroff, char *msg, size_t cap)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)src, len, RT_RX_FLAGS, &code, &off, NULL);

    if (re) {
        pcre2_code_free(re);
        return 0;
    }
    *erroff = off;
    if (pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, cap) < 0 && cap)
        msg[0] = '\0';
    return -1;
}

struct rt_regex *rt_regex_new(const char *src, size_t len)
{
    struct rt_regex *re = calloc(1, sizeof(*re) + len);
    int code;
    PCRE2_SIZE off;

    if (!re)
        return NULL;
    re->code = pcre2_compile((PCRE2_SPTR)src, len, RT_RX_FLAGS, &code, &off, NULL);
    if (!re->code) {
        free(re);
        return NULL;
    }
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE); /* else the interpreter */
    re->refs = 1;
    re->len = (uint16_t)len;
    memcpy(re->src, src, len);
    return re;
}

void rt_regex_retain(struct rt_regex *re)
{
    re->refs++;
}

void rt_regex_release(struct rt_regex *re)
{
    if (!re || --re->refs > 0)
        return;
    pcre2_code_free(re->code);
    free(re);
}

int rt_regex_is(const struct rt_regex *re, const char *src, size_t len)
{
    return re->len == len && memcmp(re->src, src, len) == 0;
}

int rt_regex_match(const struct rt_regex *re, rt_ctx *ctx, const char *v, size_t len)
{
    return pcre2_match(re->code, (PCRE2_SPTR)v, len, 0, 0, ctx->md, ctx->mc) >= 0;
}

rt_ctx *rt_ctx_new(void)
{
    rt_ctx *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    /* one pair of offsets: a lookup asks whether it matched, never where */
    c->md = pcre2_match_data_create(1, NULL);
    c->mc = pcre2_match_context_create(NULL);
    if (!c->md || !c->mc) {
        rt_ctx_free(c);
        return NULL;
    }
    pcre2_set_match_limit(c->mc, RT_RX_MATCH_LIMIT);
    return c;
}

void rt_ctx_free(rt_ctx *c)
{
    if (!c)
        return;
    pcre2_match_data_free(c->md);
    pcre2_match_context_free(c->mc);
    free(c);
}

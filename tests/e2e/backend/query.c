/*
 * query.c - the request's query string as a script: parsing it into a
 * struct tb_plan, percent-decoding, and JSON string escaping for the echo.
 *
 * Parameters are looked up by their raw name; values are percent-decoded
 * ('+' is not a space). Unknown parameters are ignored so that tests may add
 * their own markers; a repeated parameter other than h= keeps its last value.
 */
#include "backend_int.h"

#include <event2/buffer.h>

#include <stdio.h>
#include <string.h>

/* Names of the modes, indexed by enum tb_mode. */
static const char *const tb_mode_names[] = {
    [TB_M_ECHO] = "echo",       [TB_M_HEADERS] = "headers", [TB_M_FIXED] = "fixed",
    [TB_M_CHUNKED] = "chunked", [TB_M_CLOSE] = "close",     [TB_M_1XX] = "1xx",
    [TB_M_STATUS] = "status",   [TB_M_CUTOFF] = "cutoff",   [TB_M_GARBAGE] = "garbage",
    [TB_M_NEVER] = "never",     [TB_M_RESET] = "reset",     [TB_M_RAW] = "raw",
};

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decoded byte at <src>[i] (a %XX escape or a literal) and its encoded length. */
static unsigned char pct_at(const char *src, size_t n, size_t i, size_t *enc)
{
    if (src[i] == '%' && i + 2 < n) {
        int hi = hexval((unsigned char)src[i + 1]), lo = hexval((unsigned char)src[i + 2]);
        if (hi >= 0 && lo >= 0) {
            *enc = 3;
            return (unsigned char)(hi << 4 | lo);
        }
    }
    *enc = 1;
    return (unsigned char)src[i];
}

int tb_pct_decode_add(struct evbuffer *out, const char *src, size_t n)
{
    size_t run = 0; /* start of the pending literal run */
    size_t i = 0;

    while (i < n) {
        size_t enc;
        unsigned char c = pct_at(src, n, i, &enc);

        if (enc == 1) {
            i++;
            continue;
        }
        if (i > run && evbuffer_add(out, src + run, i - run) < 0)
            return -1;
        if (evbuffer_add(out, &c, 1) < 0)
            return -1;
        i += enc;
        run = i;
    }
    if (n > run && evbuffer_add(out, src + run, n - run) < 0)
        return -1;
    return 0;
}

long tb_pct_find_colon(const char *src, size_t n, size_t *enc_len)
{
    for (size_t i = 0; i < n;) {
        size_t enc;
        unsigned char c = pct_at(src, n, i, &enc);

        if (c == ':') {
            *enc_len = enc;
            return (long)i;
        }
        i += enc;
    }
    return -1;
}

/* Decode <src>/<n> into <dst> (<cap> bytes, NUL-terminated). -1 if too long. */
static int pct_decode_small(char *dst, size_t cap, const char *src, size_t n)
{
    size_t o = 0;

    for (size_t i = 0; i < n;) {
        size_t enc;
        unsigned char c = pct_at(src, n, i, &enc);

        if (o + 1 >= cap)
            return -1;
        dst[o++] = (char)c;
        i += enc;
    }
    dst[o] = '\0';
    return 0;
}

int tb_query_next(const char *q, size_t len, size_t *pos, const char **key, size_t *klen,
                  const char **val, size_t *vlen)
{
    while (*pos < len) {
        size_t start = *pos, end = start, eq;

        while (end < len && q[end] != '&')
            end++;
        *pos = end < len ? end + 1 : end;
        if (end == start)
            continue; /* "&&" */
        for (eq = start; eq < end && q[eq] != '='; eq++)
            ;
        *key = q + start;
        *klen = eq - start;
        if (eq < end) {
            *val = q + eq + 1;
            *vlen = end - eq - 1;
        } else {
            *val = q + end;
            *vlen = 0;
        }
        return 1;
    }
    return 0;
}

static bool key_is(const char *k, size_t klen, const char *lit)
{
    return klen == strlen(lit) && memcmp(k, lit, klen) == 0;
}

/* Parse a decimal uint64 (digits only, no sign, at most 19 digits). */
static int parse_u64(const char *s, uint64_t *v)
{
    size_t n = strlen(s);

    if (n == 0 || n > 19)
        return -1;
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        *v = *v * 10 + (uint64_t)(s[i] - '0');
    }
    return 0;
}

/* Table of the numeric parameters: name, where it goes, accepted range. */
struct tb_num_param {
    const char *name;
    size_t off; /* offsetof(struct tb_plan, ...) of a uint64_t */
    uint64_t min, max;
};

static const struct tb_num_param tb_num_params[] = {
    {"size", offsetof(struct tb_plan, size), 0, UINT64_C(1) << 62},
    {"chunk", offsetof(struct tb_plan, chunk), 1, UINT64_C(1) << 62},
    {"after", offsetof(struct tb_plan, after), 0, UINT64_C(1) << 62},
    {"delay_ms", offsetof(struct tb_plan, delay_ms), 0, UINT64_C(86400000)},
    {"chunk_delay_ms", offsetof(struct tb_plan, chunk_delay_ms), 0, UINT64_C(86400000)},
};

/* Flags: name, where it goes (a bool), value stored for "1" (for "0" the opposite). */
struct tb_flag_param {
    const char *name;
    size_t off;
    bool on;
};

static const struct tb_flag_param tb_flag_params[] = {
    {"close", offsetof(struct tb_plan, close), true},
    {"continue", offsetof(struct tb_plan, no_continue), false},
    {"hold", offsetof(struct tb_plan, hold), true},
};

int tb_plan_parse(struct tb_plan *plan, const char *q, size_t len, char *err, size_t errlen)
{
    const char *k, *v;
    size_t klen, vlen, pos = 0;
    bool has_size = false, has_after = false;
    char dec[64];

    memset(plan, 0, sizeof(*plan));
    plan->status = 200;
    plan->interim = 103;
    plan->chunk = 16384;
    while (tb_query_next(q, len, &pos, &k, &klen, &v, &vlen)) {
        bool known = false;

        if (key_is(k, klen, "h")) {
            size_t enc;
            long colon = tb_pct_find_colon(v, vlen, &enc);

            if (colon <= 0) {
                snprintf(err, errlen, "h=%.*s: want Name:Value", (int)(vlen > 64 ? 64 : vlen), v);
                return -1;
            }
            continue;
        }
        if (key_is(k, klen, "data"))
            continue; /* mode=raw reads it when answering */
        if (pct_decode_small(dec, sizeof(dec), v, vlen) < 0) {
            /* Only h= and data= may be long; other values are short tokens. */
            for (size_t i = 0; i < sizeof(tb_num_params) / sizeof(tb_num_params[0]); i++)
                known |= key_is(k, klen, tb_num_params[i].name);
            known |=
                key_is(k, klen, "mode") || key_is(k, klen, "status") || key_is(k, klen, "interim");
            for (size_t i = 0; i < sizeof(tb_flag_params) / sizeof(tb_flag_params[0]); i++)
                known |= key_is(k, klen, tb_flag_params[i].name);
            if (!known)
                continue;
            snprintf(err, errlen, "%.*s: value too long", (int)(klen > 32 ? 32 : klen), k);
            return -1;
        }
        if (key_is(k, klen, "mode")) {
            size_t m;

            for (m = 0; m < sizeof(tb_mode_names) / sizeof(tb_mode_names[0]); m++)
                if (strcmp(dec, tb_mode_names[m]) == 0)
                    break;
            if (m == sizeof(tb_mode_names) / sizeof(tb_mode_names[0])) {
                snprintf(err, errlen, "mode=%s: unknown mode", dec);
                return -1;
            }
            plan->mode = (enum tb_mode)m;
            continue;
        }
        if (key_is(k, klen, "status") || key_is(k, klen, "interim")) {
            bool final = key_is(k, klen, "status");
            uint64_t s;

            if (parse_u64(dec, &s) < 0 || (final && (s < 200 || s > 999)) ||
                (!final && (s < 100 || s > 199 || s == 101))) {
                snprintf(err, errlen, "%s=%s: want %s", final ? "status" : "interim", dec,
                         final ? "200..999" : "100 or 102..199");
                return -1;
            }
            if (final)
                plan->status = (int)s;
            else
                plan->interim = (int)s;
            continue;
        }
        for (size_t i = 0; i < sizeof(tb_num_params) / sizeof(tb_num_params[0]); i++) {
            const struct tb_num_param *np = &tb_num_params[i];
            uint64_t n;

            if (!key_is(k, klen, np->name))
                continue;
            if (parse_u64(dec, &n) < 0 || n < np->min || n > np->max) {
                snprintf(err, errlen, "%s=%s: want an integer in %llu..%llu", np->name, dec,
                         (unsigned long long)np->min, (unsigned long long)np->max);
                return -1;
            }
            *(uint64_t *)(void *)((char *)plan + np->off) = n;
            has_size |= np->off == offsetof(struct tb_plan, size);
            has_after |= np->off == offsetof(struct tb_plan, after);
            known = true;
        }
        for (size_t i = 0; !known && i < sizeof(tb_flag_params) / sizeof(tb_flag_params[0]); i++) {
            const struct tb_flag_param *fp = &tb_flag_params[i];

            if (!key_is(k, klen, fp->name))
                continue;
            if (strcmp(dec, "0") != 0 && strcmp(dec, "1") != 0) {
                snprintf(err, errlen, "%s=%s: want 0 or 1", fp->name, dec);
                return -1;
            }
            *(bool *)((char *)plan + fp->off) = dec[0] == '1' ? fp->on : !fp->on;
            known = true;
        }
    }
    if (plan->mode == TB_M_CUTOFF) {
        if (!has_size)
            plan->size = 1024;
        if (!has_after)
            plan->after = plan->size / 2;
        if (plan->after >= plan->size) {
            snprintf(err, errlen, "mode=cutoff: want after < size");
            return -1;
        }
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at <s> (<n> bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len;

    if (s[0] < 0xC2 || s[0] > 0xF4)
        return 0;
    len = s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    if (n < len)
        return 0;
    cp = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int tb_json_str(struct evbuffer *out, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0, i = 0;
    char esc[8];

    if (evbuffer_add(out, "\"", 1) < 0)
        return -1;
    while (i < n) {
        size_t ulen = 1;
        const char *e = NULL;

        if (s[i] == '"')
            e = "\\\"";
        else if (s[i] == '\\')
            e = "\\\\";
        else if (s[i] == '\n')
            e = "\\n";
        else if (s[i] == '\r')
            e = "\\r";
        else if (s[i] == '\t')
            e = "\\t";
        else if (s[i] < 0x20 || (s[i] >= 0x80 && (ulen = utf8_len(s + i, n - i)) == 0)) {
            snprintf(esc, sizeof(esc), "\\u%04x", s[i]);
            e = esc;
            ulen = 1;
        }
        if (!e) {
            i += ulen;
            continue;
        }
        if (i > run && evbuffer_add(out, s + run, i - run) < 0)
            return -1;
        if (evbuffer_add(out, e, strlen(e)) < 0)
            return -1;
        i++;
        run = i;
    }
    if (n > run && evbuffer_add(out, s + run, n - run) < 0)
        return -1;
    return evbuffer_add(out, "\"", 1);
}

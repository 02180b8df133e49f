/*
 * pattern.c - parsing and validating route patterns into shape keys.
 *
 * A pattern is "/path" or "host/path". Parsing checks every rule of
 * router/SEMANTICS.md and reports the first violation with its byte offset;
 * a valid pattern becomes two shape keys (host, path) in which parameters
 * and catch-alls are single marker bytes, plus the positions of the names.
 */
#include "router/router_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rt_err_set(struct rt_error *err, enum rt_errcode code, size_t off, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return;
    err->code = code;
    err->offset = off;
    err->other = NULL;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
}

/* RFC 9110 tchar. */
static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int rt_method_is_token(const char *m, size_t len)
{
    if (len == 0 || len > 32)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!is_tchar((unsigned char)m[i]))
            return 0;
    return 1;
}

uint64_t rt_known_method_bit(const char *m, size_t len)
{
    /* byte compares, no calls: this runs for every request */
    switch (len) {
    case 3:
        if (m[0] == 'G' && m[1] == 'E' && m[2] == 'T')
            return RT_M_GET;
        if (m[0] == 'P' && m[1] == 'U' && m[2] == 'T')
            return RT_M_PUT;
        break;
    case 4:
        if (m[0] == 'P' && m[1] == 'O' && m[2] == 'S' && m[3] == 'T')
            return RT_M_POST;
        if (m[0] == 'H' && m[1] == 'E' && m[2] == 'A' && m[3] == 'D')
            return RT_M_HEAD;
        break;
    case 5:
        if (memcmp(m, "PATCH", 5) == 0)
            return RT_M_PATCH;
        if (memcmp(m, "TRACE", 5) == 0)
            return RT_M_TRACE;
        break;
    case 6:
        if (memcmp(m, "DELETE", 6) == 0)
            return RT_M_DELETE;
        break;
    case 7:
        if (memcmp(m, "OPTIONS", 7) == 0)
            return RT_M_OPTIONS;
        if (memcmp(m, "CONNECT", 7) == 0)
            return RT_M_CONNECT;
        break;
    default:
        break;
    }
    return 0;
}

/* fox's rule: a name is any text without its delimiters ('{' '}' '/' '*',
 * and ':' which starts a regexp), so "{$1}" is a name. */
static int is_name_char(unsigned char c)
{
    return c != '\0' && c != '{' && c != '}' && c != '/' && c != '*' && c != ':';
}

/* Lower case only: hosts match case-insensitively, so a pattern is written
 * in lower case (fox refuses "API.example.com" rather than folding it). */
static int is_label_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

static int all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

/* Reads the regexp of "{name:regexp}" starting at s[i] (just past ':') up
 * to the '}' that closes the parameter: braces nest ("{3}"), a backslash
 * escapes the next byte. Returns the index of that '}', or 0 with <err>
 * filled: an unterminated or empty regexp, a byte outside 0x21-0x7E, or one
 * PCRE2 refuses (the offset is then the fault's, in the pattern). */
static size_t parse_regexp(const char *s, size_t i, size_t brace, struct rt_error *err)
{
    size_t j = i, depth = 0, erroff;
    char msg[96];

    for (;; j++) {
        unsigned char c = (unsigned char)s[j];
        if (c == '\0') {
            rt_err_set(err, RT_EINVAL, brace, "offset %zu: unterminated '{'", brace);
            return 0;
        }
        if (c < 0x21 || c > 0x7e) {
            rt_err_set(err, RT_EINVAL, j, "offset %zu: character 0x%02x is not allowed in a regexp",
                       j, c);
            return 0;
        }
        if (c == '\\' && s[j + 1]) {
            j++;
        } else if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (depth == 0)
                break;
            depth--;
        }
    }
    if (j == i) {
        rt_err_set(err, RT_EINVAL, i, "offset %zu: empty regexp", i);
        return 0;
    }
    if (rt_regex_check(s + i, j - i, &erroff, msg, sizeof(msg)) < 0) {
        rt_err_set(err, RT_EINVAL, i + erroff, "offset %zu: invalid regexp: %s", i + erroff, msg);
        return 0;
    }
    return j;
}

/* Reads "{name}" or "{name:regexp}" at s[i] == '{'. Records the name, sets
 * *rx and *rxlen to the regexp (length 0: none) and returns the index just
 * past '}', or 0 with <err> filled. */
static size_t parse_name(const char *s, size_t i, struct rt_pat *p, size_t *rx, size_t *rxlen,
                         struct rt_error *err)
{
    size_t start = i + 1, j = start, name_end;

    *rx = *rxlen = 0;
    while (s[j] && is_name_char((unsigned char)s[j]))
        j++;
    if (s[j] == '\0' || s[j] == '/') { /* a name never crosses a '/' */
        rt_err_set(err, RT_EINVAL, i, "offset %zu: unterminated '{'", i);
        return 0;
    }
    name_end = j;
    if (s[j] == ':' && j > start) {
        *rx = j + 1;
        if (!(j = parse_regexp(s, j + 1, i, err)))
            return 0;
        *rxlen = j - *rx;
    }
    if (s[j] != '}') {
        rt_err_set(err, RT_EINVAL, j,
                   "offset %zu: invalid character '%c' in parameter name (not allowed: { } / * :)",
                   j, s[j]);
        return 0;
    }
    if (name_end == start) {
        rt_err_set(err, RT_EINVAL, i, "offset %zu: empty parameter name", i);
        return 0;
    }
    for (size_t k = 0; k < p->nparams; k++) {
        if (p->names[k].len == name_end - start &&
            memcmp(s + p->names[k].off, s + start, name_end - start) == 0) {
            rt_err_set(err, RT_EINVAL, start, "offset %zu: duplicate parameter name '%.*s'", start,
                       (int)(name_end - start), s + start);
            return 0;
        }
    }
    if (p->nparams == RT_MAX_PARAMS) {
        rt_err_set(err, RT_ELIMIT, i, "offset %zu: more than %d parameters", i, RT_MAX_PARAMS);
        return 0;
    }
    p->names[p->nparams].off = (uint16_t)start;
    p->names[p->nparams].len = (uint16_t)(name_end - start);
    p->nparams++;
    return j + 1;
}

/* Parses the host part s[0..end). */
static int parse_host(const char *s, size_t end, struct rt_pat *p, struct rt_error *err)
{
    size_t i = 0, o = 0;

    if (end > RT_HOST_MAX) {
        rt_err_set(err, RT_EINVAL, 0, "offset 0: host longer than %d bytes", RT_HOST_MAX);
        return -1;
    }
    while (i < end) {
        size_t lstart = i;
        int param = 0;

        while (i < end && s[i] != '.') {
            unsigned char c = (unsigned char)s[i];
            if (c == '{') {
                size_t rx, rxlen, k = parse_name(s, i, p, &rx, &rxlen, err);
                if (!k)
                    return -1;
                if (rxlen) {
                    rt_err_set(err, RT_EINVAL, rx, "offset %zu: no regexp in a host", rx);
                    return -1;
                }
                if (k > end) {
                    rt_err_set(err, RT_EINVAL, i, "offset %zu: unterminated '{'", i);
                    return -1;
                }
                if (k < end && s[k] != '.') {
                    rt_err_set(err, RT_EINVAL, k, "offset %zu: a host parameter must end its label",
                               k);
                    return -1;
                }
                p->host[o++] = RT_MARK_PARAM;
                i = k;
                param = 1;
                break;
            }
            if (c == '*') { /* the catch-all label: "*{any}.example.com" */
                size_t rx, rxlen, k;
                if (i != 0 || s[i + 1] != '{') {
                    rt_err_set(err, RT_EINVAL, i,
                               "offset %zu: a catch-all label '*{name}' must be the whole first "
                               "label of a host",
                               i);
                    return -1;
                }
                if (!(k = parse_name(s, i + 1, p, &rx, &rxlen, err)))
                    return -1;
                if (rxlen) {
                    rt_err_set(err, RT_EINVAL, rx, "offset %zu: no regexp in a host", rx);
                    return -1;
                }
                if (k >= end || s[k] != '.') {
                    rt_err_set(err, RT_EINVAL, k,
                               "offset %zu: a catch-all label must be followed by '.' and a label",
                               k);
                    return -1;
                }
                p->host[o++] = RT_MARK_CATCHALL;
                i = k;
                param = 1;
                break;
            }
            if (c == ':') {
                rt_err_set(err, RT_EINVAL, i, "offset %zu: a host pattern takes no port", i);
                return -1;
            }
            if (c >= 'A' && c <= 'Z') {
                rt_err_set(err, RT_EINVAL, i,
                           "offset %zu: bad hostname label (upper case: write hosts in lower case)",
                           i);
                return -1;
            }
            if (!is_label_char(c)) {
                rt_err_set(err, RT_EINVAL, i, "offset %zu: bad hostname label (character 0x%02x)",
                           i, c);
                return -1;
            }
            p->host[o++] = (char)c;
            i++;
        }
        if (i == lstart) {
            rt_err_set(err, RT_EINVAL, i, "offset %zu: bad hostname label (empty)", i);
            return -1;
        }
        if (!param && (s[lstart] == '-' || s[i - 1] == '-')) {
            rt_err_set(err, RT_EINVAL, lstart,
                       "offset %zu: bad hostname label (starts or ends with '-')", lstart);
            return -1;
        }
        if (i - lstart > 63) {
            rt_err_set(err, RT_EINVAL, lstart,
                       "offset %zu: bad hostname label (longer than 63 bytes)", lstart);
            return -1;
        }
        if (i == end && !param && all_digits(s + lstart, i - lstart)) {
            rt_err_set(err, RT_EINVAL, lstart,
                       "offset %zu: bad hostname label (the last label is all digits)", lstart);
            return -1;
        }
        if (i < end) { /* at '.' */
            if (i + 1 == end) {
                rt_err_set(err, RT_EINVAL, i, "offset %zu: bad hostname label (trailing dot)", i);
                return -1;
            }
            p->host[o++] = '.';
            i++;
        }
    }
    p->hlen = o;
    p->host[o] = '\0';
    return 0;
}

/* Parses the path part starting at s[i] == '/'. */
static int parse_path(const char *s, size_t i, struct rt_pat *p, struct rt_error *err)
{
    size_t o = 0;
    int after_catchall = 0; /* the segment before ended with a catch-all */

    while (s[i]) {
        /* at the '/' starting a segment */
        p->path[o++] = '/';
        i++;
        /* fox refuses two catch-alls with only a '/' between them: which
         * share of the path each takes would be anybody's guess */
        if (after_catchall && s[i] == '*' && s[i + 1] == '{') {
            rt_err_set(err, RT_EINVAL, i,
                       "offset %zu: a catch-all right after a catch-all ('*{a}/*{b}'): put "
                       "static text between them",
                       i);
            return -1;
        }
        after_catchall = 0;
        if (s[i] == '/') {
            rt_err_set(err, RT_EINVAL, i, "offset %zu: empty path segment ('//')", i);
            return -1;
        }
        if (s[i] == '.' && (s[i + 1] == '/' || s[i + 1] == '\0' ||
                            (s[i + 1] == '.' && (s[i + 2] == '/' || s[i + 2] == '\0')))) {
            rt_err_set(err, RT_EINVAL, i, "offset %zu: '.' and '..' segments are not allowed", i);
            return -1;
        }
        while (s[i] && s[i] != '/') {
            unsigned char c = (unsigned char)s[i];
            if (c == '{') {
                size_t rx, rxlen, k = parse_name(s, i, p, &rx, &rxlen, err);
                if (!k)
                    return -1;
                if (s[k] != '\0' && s[k] != '/') {
                    rt_err_set(err, RT_EINVAL, k, "offset %zu: a parameter must end its segment",
                               k);
                    return -1;
                }
                if (rxlen) {
                    p->path[o++] = RT_MARK_REGEXP;
                    memcpy(p->path + o, s + rx, rxlen);
                    o += rxlen;
                    p->path[o++] = RT_MARK_REGEXP_END;
                } else {
                    p->path[o++] = RT_MARK_PARAM;
                }
                i = k;
                break;
            }
            if (c == '*') {
                if (s[i + 1] != '{') {
                    rt_err_set(err, RT_EINVAL, i,
                               "offset %zu: '*' must start a catch-all '*{name}'", i);
                    return -1;
                }
                size_t rx, rxlen, k = parse_name(s, i + 1, p, &rx, &rxlen, err);
                if (!k)
                    return -1;
                if (rxlen) {
                    rt_err_set(err, RT_EINVAL, rx, "offset %zu: a catch-all takes no regexp", rx);
                    return -1;
                }
                /* at the end: a suffix catch-all; before a '/': an infix one,
                 * whose node the suffix one shares (table.c) */
                if (s[k] != '\0' && s[k] != '/') {
                    rt_err_set(err, RT_EINVAL, k, "offset %zu: a catch-all must end its segment",
                               k);
                    return -1;
                }
                p->path[o++] = RT_MARK_CATCHALL;
                after_catchall = 1;
                i = k;
                break;
            }
            if (c == '}') {
                rt_err_set(err, RT_EINVAL, i, "offset %zu: '}' without '{'", i);
                return -1;
            }
            if (c < 0x21 || c > 0x7e || c == '?' || c == '#') {
                rt_err_set(err, RT_EINVAL, i,
                           "offset %zu: character 0x%02x is not allowed in a path pattern", i, c);
                return -1;
            }
            p->path[o++] = (char)c;
            i++;
        }
    }
    p->plen = o;
    p->path[o] = '\0';
    return 0;
}

/* Parses <pattern> into <p>. 0, or -1 with <err> filled. */
int rt_pat_parse(const char *pattern, struct rt_pat *p, struct rt_error *err)
{
    size_t len, slash;
    const char *sl;

    if (!pattern) {
        rt_err_set(err, RT_EINVAL, 0, "offset 0: no pattern");
        return -1;
    }
    len = strlen(pattern);
    if (len > RT_MAX_PATTERN) {
        rt_err_set(err, RT_EINVAL, RT_MAX_PATTERN, "offset %d: pattern longer than %d bytes",
                   RT_MAX_PATTERN, RT_MAX_PATTERN);
        return -1;
    }
    p->nparams = 0;
    p->hlen = 0;
    p->host[0] = '\0';
    if (len == 0) {
        rt_err_set(err, RT_EINVAL, 0, "offset 0: empty pattern");
        return -1;
    }
    sl = strchr(pattern, '/');
    if (!sl) {
        rt_err_set(err, RT_EINVAL, len, "offset %zu: a pattern needs a path starting with '/'",
                   len);
        return -1;
    }
    slash = (size_t)(sl - pattern);
    if (slash > 0 && parse_host(pattern, slash, p, err) < 0)
        return -1;
    return parse_path(pattern, slash, p, err);
}

int rt_pattern_check(const char *pattern, struct rt_error *err)
{
    struct rt_pat p;

    if (err) {
        err->code = RT_OK;
        err->msg[0] = '\0';
    }
    return rt_pat_parse(pattern, &p, err);
}

int rt_pattern_param(const char *pattern, size_t i, size_t *off, size_t *len)
{
    struct rt_pat p;

    if (rt_pat_parse(pattern, &p, NULL) < 0 || i >= p.nparams)
        return -1;
    *off = p.names[i].off;
    *len = p.names[i].len;
    return 0;
}

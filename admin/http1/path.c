/*
 * admin/http1/path.c - path normalization (see path.h): one pass that
 * decodes what RFC 3986 says is safe to decode, removes dot segments and
 * merges slashes, with a fast path for a path that is already normal; what
 * router.escaped_slashes makes of a path a backend may read differently;
 * and whether a path climbs above its root once a backend decodes it.
 */
#include "admin/http1/path.h"

#include <stdbool.h>
#include <string.h>

#include "admin/http1/token.h"

/* Byte classes for h1_path_normalize's fast path. */
enum { PC_PLAIN = 0, PC_STOP, PC_SLASH, PC_DOT };
#define S PC_STOP
#define L PC_SLASH
#define D PC_DOT
static const unsigned char path_class[256] = {
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, 0, 0, 0, 0, S, 0, 0, 0, 0, 0, 0, 0, 0, D, L, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, S, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
};
#undef S
#undef L
#undef D

int h1_path_normalize(const char *in, size_t len, char *out, size_t cap, unsigned opts,
                      unsigned *found, size_t *outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    const bool decode = (opts & H1_PATH_DECODE_SLASHES) != 0;
    size_t i = 1, o = 0;

    *found = 0;
    if (len == 0) {
        if (cap < 2)
            return -1;
        out[0] = '/';
        out[1] = '\0';
        *outlen = 1;
        return 0;
    }
    if (in[0] != '/' || cap < len + 1)
        return -1;

    /* Fast path, the common case: no escape, no backslash, no dot segment,
     * no empty segment, only bytes the slow path would keep: the path is
     * its own normal form, and holds nothing to report. */
    {
        size_t k = 1;
        unsigned prev = PC_SLASH; /* in[0] */
        for (; k < len; k++) {
            unsigned cl = path_class[(unsigned char)in[k]];
            if (cl != PC_PLAIN && (cl == PC_STOP || prev == PC_SLASH))
                break; /* an escape, '\', a byte to refuse, "//" or "/." */
            prev = cl;
        }
        if (k == len) {
            memcpy(out, in, len);
            out[len] = '\0';
            *outlen = len;
            return 0;
        }
    }

    /*
     * out[0..o) is the result so far, as "/seg/seg". Each input segment is
     * decoded into out[o+1..w) (never past what was read: escapes only
     * shrink) and then kept, dropped or used to pop the previous segment.
     * A segment ends at '/' (<sep> 1), with H1_PATH_DECODE_SLASHES also at
     * '\' (1) or "%2F", "%5C" (3), or at the end (0).
     */
    for (;;) {
        size_t seg = o + 1, w = seg, sep = 0, n;

        while (i < len) {
            unsigned char c = (unsigned char)in[i];

            if (c == '/') {
                sep = 1;
                break;
            }
            if (c == '%') {
                int hi, lo, v;

                if (len - i < 3)
                    return -1;
                hi = h1_hex_value((unsigned char)in[i + 1]);
                lo = h1_hex_value((unsigned char)in[i + 2]);
                if (hi < 0 || lo < 0)
                    return -1;
                v = hi << 4 | lo;
                if (v < 0x20 || v == 0x7f)
                    return -1; /* "%00", "%0D%0A": no resource is named so */
                if (v == '/' || v == '\\') {
                    *found |= H1_PATH_SLASH_ESCAPE;
                    if (decode) {
                        sep = 3;
                        break;
                    }
                }
                if (h1_is_unreserved((unsigned char)v)) {
                    out[w++] = (char)v;
                } else {
                    out[w++] = '%';
                    out[w++] = hex[hi];
                    out[w++] = hex[lo];
                }
                i += 3;
            } else {
                if (c <= 0x20 || c >= 0x7f)
                    return -1; /* raw CTL, SP or non-ASCII: never in a valid path */
                if (c == '\\') {
                    *found |= H1_PATH_SLASH_ESCAPE;
                    if (decode) {
                        sep = 1;
                        break;
                    }
                }
                out[w++] = (char)c;
                i++;
            }
        }
        n = w - seg;

        if (n == 1 && out[seg] == '.') {
            /* "." goes; a final one leaves the directory: "/a/." -> "/a/" */
            if (!sep)
                out[o++] = '/';
        } else if (n == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            /* ".." removes the previous segment, never more than the root */
            size_t end = o;
            while (o > 0 && out[o - 1] != '/')
                o--;
            /* one whose name is empty ("", ";x") a backend that merges
             * slashes or drops ";params" first never sees: its ".." goes
             * one segment higher than ours ("/a/;x/.." is "/" to it) */
            if (o > 0 && (o == end || out[o] == ';'))
                *found |= H1_PATH_POPS_EMPTY;
            if (o > 0)
                o--;
            if (!sep)
                out[o++] = '/';
        } else if (n == 0 && (opts & H1_PATH_MERGE_SLASHES) && sep) {
            /* an empty segment inside "//": merged away */
        } else {
            /* ".;x" and "..;x" are dot segments to a servlet container,
             * which drops a segment's parameters before it resolves them */
            if (n >= 2 && out[seg] == '.' &&
                (out[seg + 1] == ';' || (n >= 3 && out[seg + 1] == '.' && out[seg + 2] == ';')))
                *found |= H1_PATH_DOT_PARAMS;
            out[o] = '/';
            o = w;
        }
        if (!sep)
            break;
        i += sep;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    *outlen = o;
    return 0;
}

int h1_path_route(const char *in, size_t len, char *out, size_t cap, unsigned opts,
                  enum h1_escaped_slashes mode, unsigned *found, size_t *outlen)
{
    if (h1_path_normalize(in, len, out, cap, opts & ~H1_PATH_DECODE_SLASHES, found, outlen) < 0)
        return -1;
    if (*found == 0 || mode == H1_SLASHES_KEEP)
        return 0;
    if (mode == H1_SLASHES_REJECT)
        return -2;
    if (h1_path_normalize(in, len, out, cap, opts | H1_PATH_DECODE_SLASHES, found, outlen) < 0)
        return -1;
    /* with the slashes decoded, a "..;x" may only now begin a segment, and
     * a ".." only now follow an empty one */
    return (*found & (H1_PATH_DOT_PARAMS | H1_PATH_POPS_EMPTY)) ? -2 : 0;
}

/* The segment that ended in <c>, as the most lenient backend reads it. */
static void climb_segment(struct h1_climb *c)
{
    if (c->name == 2 && c->head[0] == '.' && c->head[1] == '.') {
        if (c->depth == 0)
            c->up = 1;
        else
            c->depth--;
    } else if (c->name > 1 || (c->name == 1 && c->head[0] != '.')) {
        c->depth++;
    }
    c->name = 0;
    c->params = 0;
}

/* One byte of a segment: its name ends at its first ';'. */
static void climb_byte(struct h1_climb *c, char b)
{
    if (c->params)
        return;
    if (b == ';') {
        c->params = 1;
        return;
    }
    if (c->name < 2)
        c->head[c->name] = b;
    c->name++;
}

/* The bytes of an escape held back that turned out no separator. */
static void climb_flush(struct h1_climb *c)
{
    if (c->pend > 0)
        climb_byte(c, '%');
    if (c->pend > 1)
        climb_byte(c, c->pendc);
    c->pend = 0;
}

void h1_climb_init(struct h1_climb *c)
{
    memset(c, 0, sizeof(*c));
}

void h1_climb_feed(struct h1_climb *c, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char b = p[i];

        if (c->pend == 1 && (b == '2' || b == '5')) {
            c->pend = 2;
            c->pendc = b;
            continue;
        }
        if (c->pend == 2 &&
            ((c->pendc == '2' && (b | 0x20) == 'f') || (c->pendc == '5' && (b | 0x20) == 'c'))) {
            c->pend = 0;
            climb_segment(c); /* "%2F", "%5C" */
            continue;
        }
        climb_flush(c);
        if (b == '/' || b == '\\')
            climb_segment(c);
        else if (b == '%')
            c->pend = 1;
        else
            climb_byte(c, b);
    }
}

int h1_climb_end(struct h1_climb *c)
{
    climb_flush(c);
    climb_segment(c);
    return c->up;
}

int h1_path_climbs(const char *p, size_t n)
{
    struct h1_climb c;

    h1_climb_init(&c);
    h1_climb_feed(&c, p, n);
    return h1_climb_end(&c);
}

/*
 * admin/http1/path.c - path normalization (see path.h): one pass that
 * decodes what RFC 3986 says is safe to decode, removes dot segments and
 * merges slashes, with a fast path for a path that is already normal.
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
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
    S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S, S,
};
#undef S
#undef L
#undef D

int h1_path_normalize(const char *in, size_t len, char *out, size_t cap, int merge_slashes,
                      size_t *outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 1, o = 0;

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

    /* Fast path, the common case: no escape, no dot segment, no empty
     * segment, only bytes the slow path would keep: the path is its own
     * normal form. */
    {
        size_t k = 1;
        unsigned prev = PC_SLASH; /* in[0] */
        for (; k < len; k++) {
            unsigned cl = path_class[(unsigned char)in[k]];
            if (cl != PC_PLAIN && (cl == PC_STOP || prev == PC_SLASH))
                break; /* an escape, a byte to refuse, "//" or "/." */
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
     */
    for (;;) {
        size_t seg = o + 1, w = seg;
        bool last;

        while (i < len && in[i] != '/') {
            unsigned char c = (unsigned char)in[i];

            if (c == '%') {
                int hi, lo, v;

                if (len - i < 3)
                    return -1;
                hi = h1_hex_value((unsigned char)in[i + 1]);
                lo = h1_hex_value((unsigned char)in[i + 2]);
                if (hi < 0 || lo < 0)
                    return -1;
                v = hi << 4 | lo;
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
                out[w++] = (char)c;
                i++;
            }
        }
        last = i >= len;

        if (w - seg == 1 && out[seg] == '.') {
            /* "." goes; a final one leaves the directory: "/a/." -> "/a/" */
            if (last)
                out[o++] = '/';
        } else if (w - seg == 2 && out[seg] == '.' && out[seg + 1] == '.') {
            /* ".." removes the previous segment, never more than the root */
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            if (last)
                out[o++] = '/';
        } else if (w == seg && merge_slashes && !last) {
            /* an empty segment inside "//": merged away */
        } else {
            out[o] = '/';
            o = w;
        }
        if (last)
            break;
        i++; /* the '/' that ended this segment */
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    *outlen = o;
    return 0;
}

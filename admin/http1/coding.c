/*
 * coding.c - the content codings' names and level ranges (coding.h).
 */
#include "admin/http1/coding.h"
#include "admin/http1/token.h"

/* brotli's 10 and 11 are offline qualities: a hundred times slower, and
 * 3.4 and 5.7 MB a stream even with a 2^16 window */
const struct h1_coding_info h1_codings[H1_CODING_COUNT] = {
    [H1_CODING_IDENTITY] = {"identity", 0, 0, 0},
    [H1_CODING_GZIP] = {"gzip", 1, 9, 6},
    [H1_CODING_BR] = {"br", 0, 9, 4},
    [H1_CODING_ZSTD] = {"zstd", 1, 19, 3},
};

int h1_coding_from_name(const char *s, size_t n)
{
    for (int c = 0; c < H1_CODING_COUNT; c++)
        if (h1_ci_eq(s, n, h1_codings[c].name))
            return c;
    if (h1_ci_eq(s, n, "x-gzip")) /* RFC 9110 8.4.1.3 */
        return H1_CODING_GZIP;
    return -1;
}

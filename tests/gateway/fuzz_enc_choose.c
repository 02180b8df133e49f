/*
 * tests/gateway/fuzz_enc_choose.c - fuzz target of Accept-Encoding
 * negotiation (gateway/encoding.c: gw_enc_choose()): the input is a field
 * value, held in a buffer of exactly its size (so that the sanitizers see
 * any read past it), and the answer must be identity or one of the
 * server's codings, and the one a second, plainer reading of RFC 9110
 * 12.5.3 here gives: every element split off by hand, its coding a token,
 * its q the last "q=" parameter, "0" ["." 0*3DIGIT] or "1" ["." 0*3"0"];
 * the highest q over zero wins, the server's order breaks ties, an
 * identity named higher wins over them all.
 *
 * Input: byte 0 picks the server's order (bits 0-4: one of the orders
 * and subsets of zstd, br, gzip); the rest is the field value.
 *
 * Built as a libFuzzer target with SY_FUZZ=ON (clang), and linked with
 * fuzz_replay.c as a plain program that replays enc_choose_corpus/ plus
 * mutations of it (run by ctest).
 */
#include "gateway/encoding.h"

#include <stdlib.h>
#include <string.h>

#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* byte 0 is the server's order, not field bytes */
const size_t fuzz_prefix = 1;

static const enum gw_coding orders[][3] = {
    {GW_ENC_ZSTD, GW_ENC_BR, GW_ENC_GZIP},
    {GW_ENC_GZIP, GW_ENC_BR, GW_ENC_ZSTD},
    {GW_ENC_BR, GW_ENC_ZSTD, GW_ENC_GZIP},
    {GW_ENC_GZIP, GW_ENC_ZSTD, GW_ENC_BR},
};

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, const char **e)
{
    while (*s < *e && is_ows(**s))
        (*s)++;
    while (*e > *s && is_ows((*e)[-1]))
        (*e)--;
}

static int is_token(const char *s, const char *e)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (s == e)
        return 0;
    for (; s < e; s++) {
        unsigned char c = (unsigned char)*s;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c && strchr(extra, c))))
            return 0;
    }
    return 1;
}

/* RFC 9110's qvalue in thousandths, or -1. */
static int qvalue(const char *s, const char *e)
{
    size_t n = (size_t)(e - s);
    int q = 0;

    if (n == 0 || n > 5 || (s[0] != '0' && s[0] != '1') || (n > 1 && s[1] != '.'))
        return -1;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || (s[0] == '1' && s[i] != '0'))
            return -1;
        q += (s[i] - '0') * (i == 2 ? 100 : i == 3 ? 10 : 1);
    }
    return s[0] == '1' ? 1000 : q;
}

/* The coding named <s>..<e> (ASCII case folded by hand), or -2. */
static int coding_of(const char *s, const char *e)
{
    static const char *const names[] = {"identity", "gzip", "br", "zstd", "x-gzip"};
    size_t n = (size_t)(e - s);

    for (int c = 0; c < 5; c++) {
        size_t i = 0;
        if (strlen(names[c]) != n)
            continue;
        while (i < n && (s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]) == names[c][i])
            i++;
        if (i == n)
            return c == 4 ? GW_ENC_GZIP : c;
    }
    return -2;
}

static enum gw_coding reference(const char *v, size_t n, const enum gw_coding *order, size_t no)
{
    int q[GW_ENC_COUNT] = {-1, -1, -1, -1}, star = -1, best_q = 0;
    enum gw_coding best = GW_ENC_IDENTITY;
    const char *p = v, *end = v + n;

    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *ee = comma ? comma : end, *cs = p, *ce;
        int qq = 1000, ok = 1, c;
        ce = memchr(cs, ';', (size_t)(ee - cs));
        if (!ce)
            ce = ee;
        trim(&cs, &ce);
        ok = is_token(cs, ce);
        for (const char *s = memchr(p, ';', (size_t)(ee - p)); ok && s;) {
            const char *ps = s + 1, *pe = memchr(ps, ';', (size_t)(ee - ps));
            s = pe;
            if (!pe)
                pe = ee;
            trim(&ps, &pe);
            if (pe - ps >= 2 && (ps[0] | 0x20) == 'q' && ps[1] == '=')
                ok = (qq = qvalue(ps + 2, pe)) >= 0;
        }
        if (ok) {
            if (ce - cs == 1 && *cs == '*') {
                if (star < 0)
                    star = qq;
            } else if ((c = coding_of(cs, ce)) >= 0 && q[c] < 0) {
                q[c] = qq;
            }
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    for (size_t i = 0; i < no; i++) {
        int qv = q[order[i]] >= 0 ? q[order[i]] : star;
        if (qv > best_q) {
            best_q = qv;
            best = order[i];
        }
    }
    if (best != GW_ENC_IDENTITY && q[GW_ENC_IDENTITY] > best_q)
        return GW_ENC_IDENTITY;
    return best;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const enum gw_coding *order;
    size_t norder, n;
    enum gw_coding got;
    char *v;

    if (size < 1)
        return 0;
    order = orders[data[0] & 3];
    norder = 1 + (size_t)((data[0] >> 2) % 3);
    n = size - 1;
    v = malloc(n ? n : 1);
    CHECK(v != NULL);
    memcpy(v, data + 1, n);
    got = gw_enc_choose(v, n, order, norder);
    CHECK(got == GW_ENC_IDENTITY || got == order[0] || (norder > 1 && got == order[1]) ||
          (norder > 2 && got == order[2]));
    CHECK(got == reference(v, n, order, norder));
    /* the media-type matcher over the same bytes, for the sanitizers */
    {
        static const char *const types[] = {"text/*", "application/json", "*/*"};
        (void)gw_enc_type_match(types, 1 + (data[0] >> 5) % 3, (struct h1_slice){v, n});
    }
    free(v);
    return 0;
}

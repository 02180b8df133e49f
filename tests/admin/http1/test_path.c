/*
 * tests/admin/http1/test_path.c - unit tests of admin/http1/path.c: the
 * normalization table (decoding, dot segments, merged slashes, decoded
 * slashes), what it reports finding, every input it refuses, what each
 * router.escaped_slashes mode makes of a path (h1_path_route), and which
 * strip_prefix results climb above their root (h1_path_climbs). Then the
 * one-pass normalizer against a plain oracle written from the contract
 * (split, decode, resolve: one step at a time) over many random paths, and
 * the property the modes exist for: what a backend that decodes "%2F",
 * "%5C", '\' and drops a dot segment's ";params" makes of the path that goes
 * upstream is the path the router saw.
 */
#include "admin/http1/path.h"
#include "admin/http1/token.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MERGE H1_PATH_MERGE_SLASHES
#define DECODE H1_PATH_DECODE_SLASHES
#define SLASH H1_PATH_SLASH_ESCAPE
#define DOTP H1_PATH_DOT_PARAMS
#define POPE H1_PATH_POPS_EMPTY

static void norm_found(const char *in, unsigned opts, const char *want, unsigned want_found)
{
    char out[256];
    size_t outlen = 12345, n = strlen(in);
    unsigned found = 99;

    ck_assert_msg(h1_path_normalize(in, n, out, n + 2, opts, &found, &outlen) == 0,
                  "rejected \"%s\"", in);
    ck_assert_msg(strcmp(out, want) == 0, "\"%s\" (opts %u) -> \"%s\", want \"%s\"", in, opts, out,
                  want);
    ck_assert_uint_eq(outlen, strlen(want));
    ck_assert(outlen <= n || n == 0);
    ck_assert_msg(found == want_found, "\"%s\" (opts %u): found %u, want %u", in, opts, found,
                  want_found);
}

static void norm_ok(const char *in, unsigned opts, const char *want)
{
    norm_found(in, opts, want, 0);
}

START_TEST(norm_table)
{
    norm_ok("/a/./b/../c", MERGE, "/a/c");
    norm_ok("/a//b", MERGE, "/a/b");
    norm_ok("/a//b", 0, "/a//b");
    /* %41 is 'A'; %2f stays encoded (upper-cased) and is no separator, so
     * "A%2F.." is one ordinary segment after decoding %2e%2E */
    norm_found("/%41%2f%2e%2E/x", MERGE, "/A%2F../x", SLASH);
    norm_ok("/..", MERGE, "/");
    norm_ok("/../..", MERGE, "/");
    norm_ok("/a/%2e%2e/b", MERGE, "/b");
    norm_ok("/a/.%2E/b", MERGE, "/b");
    norm_ok("/a/%2E/b", MERGE, "/a/b");
    norm_ok("/", MERGE, "/");
    norm_ok("", MERGE, "/");
    norm_ok("//", MERGE, "/");
    norm_ok("//", 0, "//");
    norm_ok("/a/.", MERGE, "/a/");
    norm_ok("/a/..", MERGE, "/");
    norm_ok("/a/b/..", MERGE, "/a/");
    norm_ok("/a/b/../", MERGE, "/a/");
    norm_ok("/a/b/../../../c", MERGE, "/c");
    norm_ok("/./a", MERGE, "/a");
    norm_ok("/a/", MERGE, "/a/");
    norm_ok("/a//", MERGE, "/a/");
    norm_ok("/a//", 0, "/a//");
    norm_ok("//a///b//", MERGE, "/a/b/");
    norm_ok("//a///b//", 0, "//a///b//");
    norm_found("/a//../b", 0, "/a/b", POPE);
    norm_ok("/a//../b", MERGE, "/b");
    norm_ok("/.a/..b/.../a.", MERGE, "/.a/..b/.../a.");
    norm_ok("/%7e%5F%2d%2E%30%7A", MERGE, "/~_-.0z");
    norm_found("/%3a%3A%2f%2F%25%ff%20%80", MERGE, "/%3A%3A%2F%2F%25%FF%20%80", SLASH);
    norm_found("/a%2F..%2Fb", MERGE, "/a%2F..%2Fb", SLASH);
    norm_found("/a/..%2f", MERGE, "/a/..%2F", SLASH);
    norm_found("/%2e%2e%2f", MERGE, "/..%2F", SLASH);
    norm_ok("/a/b/c/./../../g", MERGE, "/a/g");
    norm_ok("/mid/content=5/../6", MERGE, "/mid/6");
    norm_ok("/a;v=1/b;p", MERGE, "/a;v=1/b;p");
    norm_ok("/a;x/../b", MERGE, "/b");
}
END_TEST

/* Escaped slashes, backslashes and "..;" segments: reported, and with
 * H1_PATH_DECODE_SLASHES taken for '/'. */
START_TEST(norm_slashes)
{
    /* kept: reported, not separators */
    norm_found("/api/..%2fsecret/x", MERGE, "/api/..%2Fsecret/x", SLASH);
    norm_found("/api/..%5csecret/x", MERGE, "/api/..%5Csecret/x", SLASH);
    norm_found("/api/..\\secret/x", MERGE, "/api/..\\secret/x", SLASH);
    norm_found("/a\\b", MERGE, "/a\\b", SLASH);
    norm_found("/api/..;/secret/x", MERGE, "/api/..;/secret/x", DOTP);
    norm_found("/api/.;x/secret", MERGE, "/api/.;x/secret", DOTP);
    norm_found("/api/%2e%2e;x/y", MERGE, "/api/..;x/y", DOTP);
    norm_found("/..;/..%2f", MERGE, "/..;/..%2F", SLASH | DOTP);
    /* not dot segments with parameters */
    norm_ok("/a;/b", MERGE, "/a;/b");
    norm_ok("/...;/b", MERGE, "/...;/b");
    norm_ok("/x.;/b", MERGE, "/x.;/b");
    norm_ok("/..%3B/b", MERGE, "/..%3B/b");
    norm_ok("/;/b", MERGE, "/;/b");
    /* a ".." that removes a segment a backend drops before it resolves
     * dot segments: its ".." removes the one before ("/api" here) */
    norm_found("/api/;x/../secret/a", MERGE, "/api/secret/a", POPE);
    norm_found("/api/;/../secret/a", MERGE, "/api/secret/a", POPE);
    norm_found("/api/;x/%2e%2E/secret", MERGE, "/api/secret", POPE);
    norm_found("/api//../secret", 0, "/api/secret", POPE);
    norm_found("/a/;x/..", MERGE, "/a/", POPE);
    norm_found("/;x/../a", MERGE, "/a", POPE);
    /* not so: the popped segment has a name, or merging took the empty one */
    norm_ok("/api//../secret", MERGE, "/secret");
    norm_ok("/api/a;x/../b", MERGE, "/api/b");
    norm_ok("/api/;x/b", MERGE, "/api/;x/b");
    norm_ok("/api/;x/./b", MERGE, "/api/;x/b");

    /* decoded: separators, then dot segments resolve */
    norm_found("/api/..%2fsecret/x", MERGE | DECODE, "/secret/x", SLASH);
    norm_found("/api/..%2Fsecret/x", DECODE, "/secret/x", SLASH);
    norm_found("/api/..%5Csecret/x", MERGE | DECODE, "/secret/x", SLASH);
    norm_found("/api/..\\secret/x", MERGE | DECODE, "/secret/x", SLASH);
    norm_found("/s/..%2f..%2fsecret", MERGE | DECODE, "/secret", SLASH);
    norm_found("/admin%2Fusers", MERGE | DECODE, "/admin/users", SLASH);
    norm_found("/a%2F%2Fb", MERGE | DECODE, "/a/b", SLASH);
    norm_found("/a%2F%2Fb", DECODE, "/a//b", SLASH);
    norm_found("/a%2F", MERGE | DECODE, "/a/", SLASH);
    norm_found("/a/..%2F", MERGE | DECODE, "/", SLASH);
    norm_found("/a%2F.", MERGE | DECODE, "/a/", SLASH);
    norm_found("/a%2F..;x/b", MERGE | DECODE, "/a/..;x/b", SLASH | DOTP);
    norm_found("/%252F", MERGE | DECODE, "/%252F", 0); /* one decoding only */
    norm_ok("/plain/path", MERGE | DECODE, "/plain/path");
}
END_TEST

START_TEST(norm_errors)
{
    static const char *const bad[] = {
        "/%",      "/%G1",     "/%4",     "/a%zz", "/%%41", "/a/%",  "/%4/",         "a",
        "a/b",     "*",        "/a b",    "/a\tb", "/\x01", "/\x7f", "/caf\xc3\xa9", "/%00",
        "/a%00",   "/%00/b",   "/%0d%0a", "/%0A",  "/%1f",  "/%7F",  "/a/%09/b",     "/%01x",
        "/%2e%00", "/..%00/x", "%2F",
    };
    char out[64];
    size_t k, outlen;
    unsigned found, o;

    for (o = 0; o < 4; o++)
        for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
            ck_assert_msg(h1_path_normalize(bad[k], strlen(bad[k]), out, sizeof(out), o, &found,
                                            &outlen) == -1,
                          "accepted \"%s\" (opts %u)", bad[k], o);
    /* too small an output */
    ck_assert_int_eq(h1_path_normalize("/abc", 4, out, 4, MERGE, &found, &outlen), -1);
    ck_assert_int_eq(h1_path_normalize("", 0, out, 1, MERGE, &found, &outlen), -1);
    ck_assert_int_eq(h1_path_normalize("/abc", 4, out, 5, MERGE, &found, &outlen), 0);
    ck_assert_int_eq(h1_path_normalize("/a\0b", 4, out, sizeof(out), MERGE, &found, &outlen), -1);
}
END_TEST

START_TEST(norm_fast_path_is_identity)
{
    /* a path that is its own normal form comes back byte for byte */
    static const char *const same[] = {"/",   "/a",      "/a/b/c",         "/a-b_c~d.e",
                                       "/a/", "/x.y/z.", "/v1/users/{id}", "/a;b=c/d,e"};
    char out[64];
    size_t k, outlen;
    unsigned found;

    for (k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
        ck_assert_int_eq(
            h1_path_normalize(same[k], strlen(same[k]), out, sizeof(out), MERGE, &found, &outlen),
            0);
        ck_assert_str_eq(out, same[k]);
        ck_assert_uint_eq(outlen, strlen(same[k]));
        ck_assert_uint_eq(found, 0);
    }
}
END_TEST

/* h1_path_route(): rc, and the path when 0. */
static void route_is(const char *in, enum h1_escaped_slashes mode, int want_rc, const char *want)
{
    char out[256];
    size_t outlen = 0, n = strlen(in);
    unsigned found;
    int rc = h1_path_route(in, n, out, sizeof(out), MERGE, mode, &found, &outlen);

    ck_assert_msg(rc == want_rc, "\"%s\" (mode %d): %d, want %d", in, (int)mode, rc, want_rc);
    if (rc == 0)
        ck_assert_msg(strcmp(out, want) == 0 && outlen == strlen(want),
                      "\"%s\" (mode %d) -> \"%s\", want \"%s\"", in, (int)mode, out, want);
}

START_TEST(route_modes)
{
    static const enum h1_escaped_slashes all[] = {H1_SLASHES_REJECT, H1_SLASHES_DECODE,
                                                  H1_SLASHES_KEEP};

    for (size_t m = 0; m < 3; m++) {
        /* nothing to report: the same path under every mode */
        route_is("/api/x/../y", all[m], 0, "/api/y");
        route_is("/a;v=1/%7e", all[m], 0, "/a;v=1/~");
        /* refused under every mode */
        route_is("/a%00", all[m], -1, "");
        route_is("/a%zz", all[m], -1, "");
    }
    /* the repros */
    route_is("/api/..%2fsecret/x", H1_SLASHES_REJECT, -2, "");
    route_is("/api/..%2fsecret/x", H1_SLASHES_DECODE, 0, "/secret/x");
    route_is("/api/..%2fsecret/x", H1_SLASHES_KEEP, 0, "/api/..%2Fsecret/x");
    route_is("/api/..%5csecret/x", H1_SLASHES_REJECT, -2, "");
    route_is("/api/..%5csecret/x", H1_SLASHES_DECODE, 0, "/secret/x");
    route_is("/api/..%5csecret/x", H1_SLASHES_KEEP, 0, "/api/..%5Csecret/x");
    route_is("/api/..\\secret/x", H1_SLASHES_REJECT, -2, "");
    route_is("/api/..\\secret/x", H1_SLASHES_DECODE, 0, "/secret/x");
    route_is("/api/..;/secret/x", H1_SLASHES_REJECT, -2, "");
    route_is("/api/..;/secret/x", H1_SLASHES_DECODE, -2, "");
    route_is("/api/..;/secret/x", H1_SLASHES_KEEP, 0, "/api/..;/secret/x");
    route_is("/s/..%2f..%2fsecret", H1_SLASHES_DECODE, 0, "/secret");
    /* a "..;" that only decoding makes a segment */
    route_is("/a%2F..;x/b", H1_SLASHES_DECODE, -2, "");
    route_is("/a%2F..;x/b", H1_SLASHES_KEEP, 0, "/a%2F..;x/b");
    /* a ".." after a segment with no name but ";params" */
    route_is("/api/;x/../secret/a", H1_SLASHES_REJECT, -2, "");
    route_is("/api/;/../secret/a", H1_SLASHES_DECODE, -2, "");
    route_is("/api/;x/../secret/a", H1_SLASHES_KEEP, 0, "/api/secret/a");
    route_is("/api%2F;x%2F..%2Fsecret", H1_SLASHES_DECODE, -2, ""); /* only once decoded */
    route_is("/api/;x/secret/a", H1_SLASHES_REJECT, 0, "/api/;x/secret/a");
    {
        /* router.merge_slashes false: the empty segment is one */
        char out[64];
        size_t ol;
        unsigned f;
        ck_assert_int_eq(
            h1_path_route("/api//../secret", 15, out, sizeof(out), 0, H1_SLASHES_REJECT, &f, &ol),
            -2);
        ck_assert_int_eq(
            h1_path_route("/api//../secret", 15, out, sizeof(out), 0, H1_SLASHES_DECODE, &f, &ol),
            -2);
        ck_assert_int_eq(
            h1_path_route("/api//secret", 12, out, sizeof(out), 0, H1_SLASHES_REJECT, &f, &ol), 0);
    }
    /* an escaped slash without any dot: a deny route on /admin/ still sees it */
    route_is("/admin%2Fusers", H1_SLASHES_REJECT, -2, "");
    route_is("/admin%2Fusers", H1_SLASHES_DECODE, 0, "/admin/users");
}
END_TEST

START_TEST(climbs)
{
    static const char *const up[] = {
        "/..%2F..%2Fsecret",
        "/..%2fsecret",
        "/..%5Cx",
        "/..%5cx",
        "/..\\x",
        "/..;x/y",
        "/..;",
        "/.%2F..%2Fx",
        "/a%2F..%2F..%2Fx",
        "/a/..%2F..",
        "..%2Fx",
        "/.;/..;/x",
        "/a;p/..;q/..;r",
        "/%2F..%2Fx",
        "//..%2F",
    };
    static const char *const down[] = {
        "/",         "",          "/x",      "/..foo", "/...%2Fx",     "/a%2F..%2Fx",
        "/a/..%2Fb", "/.x/..%2F", "/a%2F..", "/a;..",  "/x%2E%2E%2Fy", "/a/b%2F..%2F..",
    };

    for (size_t k = 0; k < sizeof(up) / sizeof(up[0]); k++)
        ck_assert_msg(h1_path_climbs(up[k], strlen(up[k])), "\"%s\" does not climb", up[k]);
    for (size_t k = 0; k < sizeof(down) / sizeof(down[0]); k++)
        ck_assert_msg(!h1_path_climbs(down[k], strlen(down[k])), "\"%s\" climbs", down[k]);
}
END_TEST

/* ---- the oracle: the contract in path.h, one plain step at a time ---- */

#define OMAX 512

/* byte classes: token.c's, which test_token.c checks for all 256 bytes */
static int ohex(char c)
{
    return h1_hex_value((unsigned char)c);
}

struct osegs {
    char seg[OMAX][OMAX];
    size_t n;
};

/* Step 1: split <in> into decoded segments, the way the contract reads it. */
static int osplit(const char *in, size_t len, unsigned opts, struct osegs *s, unsigned *found)
{
    size_t i = 1, w = 0;

    *found = 0;
    s->n = 0;
    if (len == 0) {
        s->seg[s->n++][0] = '\0';
        return 0;
    }
    if (in[0] != '/')
        return -1;
    for (;;) {
        int brk = 0;
        if (i == len) {
            s->seg[s->n][w] = '\0';
            s->n++;
            return 0;
        }
        if (in[i] == '/') {
            brk = 1;
            i++;
        } else if (in[i] == '%') {
            int hi, lo, v;
            if (len - i < 3 || (hi = ohex(in[i + 1])) < 0 || (lo = ohex(in[i + 2])) < 0)
                return -1;
            v = hi * 16 + lo;
            if (v < 32 || v == 127)
                return -1;
            if (v == '/' || v == '\\') {
                *found |= SLASH;
                brk = (opts & DECODE) != 0;
            }
            if (!brk) {
                if (h1_is_unreserved((unsigned char)v)) {
                    s->seg[s->n][w++] = (char)v;
                } else {
                    s->seg[s->n][w++] = '%';
                    s->seg[s->n][w++] = "0123456789ABCDEF"[v >> 4];
                    s->seg[s->n][w++] = "0123456789ABCDEF"[v & 15];
                }
            }
            i += 3;
        } else {
            unsigned char c = (unsigned char)in[i];
            if (c <= 32 || c >= 127)
                return -1;
            if (c == '\\') {
                *found |= SLASH;
                brk = (opts & DECODE) != 0;
            }
            if (!brk)
                s->seg[s->n][w++] = (char)c;
            i++;
        }
        if (brk) {
            s->seg[s->n][w] = '\0';
            s->n++;
            w = 0;
        }
    }
}

/* The whole contract: split, report, merge, remove dot segments, join. */
static int onormalize(const char *in, size_t len, unsigned opts, char *out, unsigned *found)
{
    static struct osegs s;
    static char stack[OMAX][OMAX];
    size_t top = 0, k;

    if (osplit(in, len, opts, &s, found) < 0)
        return -1;
    for (k = 0; k < s.n; k++)
        if (!strncmp(s.seg[k], ".;", 2) || !strncmp(s.seg[k], "..;", 3))
            *found |= DOTP;
    for (k = 0; k < s.n; k++) {
        const char *g = s.seg[k];
        int last = k + 1 == s.n;
        if ((opts & MERGE) && !last && g[0] == '\0')
            continue;
        if (!strcmp(g, ".") || !strcmp(g, "..")) {
            if (g[1] == '.' && top > 0) {
                /* a segment a backend drops first: "" or only ";params" */
                if (stack[top - 1][0] == '\0' || stack[top - 1][0] == ';')
                    *found |= POPE;
                top--;
            }
            if (last)
                stack[top++][0] = '\0';
            continue;
        }
        strcpy(stack[top++], g);
    }
    out[0] = '\0';
    for (k = 0; k < top; k++) {
        strcat(out, "/");
        strcat(out, stack[k]);
    }
    if (top == 0)
        strcpy(out, "/");
    return 0;
}

/* h1_path_route() by the contract. */
static int oroute(const char *in, size_t len, unsigned opts, enum h1_escaped_slashes mode,
                  char *out)
{
    unsigned found;

    if (onormalize(in, len, opts, out, &found) < 0)
        return -1;
    if (!found || mode == H1_SLASHES_KEEP)
        return 0;
    if (mode == H1_SLASHES_REJECT)
        return -2;
    onormalize(in, len, opts | DECODE, out, &found);
    return (found & (DOTP | POPE)) ? -2 : 0;
}

/* What a lenient backend resolves <in> to: "%2F", "%5C", '\' are '/',
 * every segment's ";params" go (Tomcat), slashes merge, then the rest as
 * the contract says. */
static int obackend(const char *in, char *out)
{
    static char tmp[4 * OMAX];
    size_t i, w = 0, n = strlen(in);
    unsigned found;

    for (i = 0; i < n; i++) {
        if (in[i] == '%' && i + 2 < n && ohex(in[i + 1]) >= 0 && ohex(in[i + 2]) >= 0 &&
            (ohex(in[i + 1]) * 16 + ohex(in[i + 2]) == '/' ||
             ohex(in[i + 1]) * 16 + ohex(in[i + 2]) == '\\')) {
            tmp[w++] = '/';
            i += 2;
        } else {
            tmp[w++] = in[i] == '\\' ? '/' : in[i];
        }
    }
    tmp[w] = '\0';
    /* every segment (after unreserved decoding) loses its params */
    {
        static struct osegs s;
        static char joined[4 * OMAX];
        size_t k;
        if (osplit(tmp, w, 0, &s, &found) < 0)
            return -1;
        joined[0] = '\0';
        for (k = 0; k < s.n; k++) {
            char *g = s.seg[k], *semi = strchr(g, ';');
            if (semi)
                *semi = '\0';
            strcat(joined, "/");
            strcat(joined, g);
        }
        return onormalize(joined, strlen(joined), MERGE, out, &found);
    }
}

/* The routed path <in> (normalized: no escaped slash, no dot segment) as
 * a lenient backend names it, segment for segment: each segment without its
 * ";params", empty ones but the last dropped. No dot segment is resolved. */
static void ostrip(const char *in, char *out)
{
    static char tmp[4 * OMAX];
    char *save = NULL, *g;
    size_t n = strlen(in);
    int trailing = n > 1 && (in[n - 1] == '/' || strrchr(in, '/')[1] == ';');

    strcpy(tmp, in);
    out[0] = '\0';
    for (g = strtok_r(tmp, "/", &save); g; g = strtok_r(NULL, "/", &save)) {
        char *semi = strchr(g, ';');
        if (semi)
            *semi = '\0';
        if (g[0] == '\0')
            continue;
        strcat(out, "/");
        strcat(out, g);
    }
    if (out[0] == '\0' || trailing)
        strcat(out, "/");
}

/* ck_assert_msg() for loops of many checks: Check records each passed
 * assertion with a write to its pipe, which would make them slow. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random path from pieces the normalizer treats specially, now and then
 * one it refuses. */
static size_t random_path(char *buf, size_t cap)
{
    static const char *const good[] = {
        "/",   "/",   "/",   "//",  ".",   "..",  ".",   "..",  "a",  "b",
        "%2e", "%2E", "%2f", "%2F", "%5c", "%5C", "\\",  ";",   ";x", "%41",
        "%7e", "%20", "%3B", "%25", "~",   "-",   "%ff", "/;x", "/;", ";v=1",
    };
    static const char *const bad[] = {"%00", "%0a", "%7F", "%", "%g1", "%4", " ", "\x01", "\x80"};
    size_t len = 0, k, cnt = next() % 14;

    if (next() % 50 != 0)
        buf[len++] = '/'; /* mostly a valid start */
    for (k = 0; k < cnt; k++) {
        const char *p = next() % 60 ? good[next() % (sizeof(good) / sizeof(good[0]))]
                                    : bad[next() % (sizeof(bad) / sizeof(bad[0]))];
        size_t pl = strlen(p);
        if (len + pl + 1 > cap)
            break;
        memcpy(buf + len, p, pl);
        len += pl;
    }
    buf[len] = '\0';
    return len;
}

START_TEST(oracle_agrees)
{
    static const unsigned optset[] = {0, MERGE, DECODE, MERGE | DECODE};
    char in[200], got[256], want[OMAX * 2];
    size_t k, o, gotlen, n;
    unsigned gf, wf;
    unsigned long compared = 0, accepted = 0;

    for (k = 0; k < 200000; k++) {
        n = random_path(in, sizeof(in));
        for (o = 0; o < 4; o++) {
            int grc = h1_path_normalize(in, n, got, sizeof(got), optset[o], &gf, &gotlen);
            int wrc = onormalize(in, n, optset[o], want, &wf);
            EXPECT(grc == wrc, "\"%s\" (opts %u): rc %d, oracle %d", in, optset[o], grc, wrc);
            compared++;
            if (grc < 0)
                continue;
            accepted++;
            EXPECT(strcmp(got, want) == 0 && gotlen == strlen(want),
                   "\"%s\" (opts %u): \"%s\", oracle \"%s\"", in, optset[o], got, want);
            EXPECT(gf == wf, "\"%s\" (opts %u): found %u, oracle %u", in, optset[o], gf, wf);
        }
    }
    /* the inputs reach both sides of every branch */
    ck_assert_uint_gt(accepted, compared / 4);
    ck_assert_uint_lt(accepted, compared);
}
END_TEST

START_TEST(modes_agree_with_the_backend)
{
    static const enum h1_escaped_slashes safe[] = {H1_SLASHES_REJECT, H1_SLASHES_DECODE};
    static const unsigned optset[] = {MERGE, 0}; /* router.merge_slashes */
    char in[200], routed[256], want[OMAX * 2], seen[OMAX * 2], named[OMAX * 2];
    size_t k, m, o, n, rlen;
    unsigned found, refused = 0, decoded = 0, popped = 0;

    for (k = 0; k < 200000; k++) {
        n = random_path(in, sizeof(in));
        for (o = 0; o < 2; o++)
            for (m = 0; m < 3; m++) {
                enum h1_escaped_slashes mode = m < 2 ? safe[m] : H1_SLASHES_KEEP;
                unsigned opts = optset[o];
                int rc = h1_path_route(in, n, routed, sizeof(routed), opts, mode, &found, &rlen);
                int orc = oroute(in, n, opts, mode, want);
                EXPECT(rc == orc, "\"%s\" (mode %zu, opts %u): %d, oracle %d", in, m, opts, rc,
                       orc);
                if (rc < 0) {
                    refused += rc == -2;
                    continue;
                }
                EXPECT(strcmp(routed, want) == 0, "\"%s\": \"%s\", oracle \"%s\"", in, routed,
                       want);
                if (mode == H1_SLASHES_KEEP) {
                    popped += (found & POPE) != 0;
                    continue;
                }
                /* what goes upstream: the target as received, or the decoded
                 * path (gw_forward_head); a backend that drops ";params" and
                 * merges slashes before it resolves dot segments reads it as
                 * the routed path, segment for segment, less the params and
                 * empty segments it drops */
                decoded += (found & SLASH) != 0;
                ostrip(routed, named);
                EXPECT(obackend((found & SLASH) ? routed : in, seen) == 0,
                       "\"%s\": no backend reading", in);
                EXPECT(strcmp(seen, named) == 0,
                       "\"%s\" (mode %zu, opts %u): routed as \"%s\" (\"%s\"), a backend reads "
                       "\"%s\"",
                       in, m, opts, routed, named, seen);
                EXPECT(obackend(routed, seen) == 0 && strcmp(seen, named) == 0,
                       "\"%s\": the routed \"%s\" reads \"%s\"", in, routed, seen);
                /* nothing left a backend reads otherwise, and nothing climbs */
                EXPECT(!h1_path_climbs(routed, rlen), "\"%s\" climbs", routed);
                /* normalizing the routed path again changes nothing */
                {
                    char again[256];
                    size_t alen;
                    EXPECT(h1_path_route(routed, rlen, again, sizeof(again), opts, mode, &found,
                                         &alen) == 0 &&
                               strcmp(again, routed) == 0,
                           "\"%s\" normalized again is \"%s\"", routed, again);
                }
            }
    }
    ck_assert_uint_gt(refused, 1000);
    ck_assert_uint_gt(decoded, 1000);
    ck_assert_uint_gt(popped, 1000); /* the inputs reach the new refusal */
}
END_TEST

/* h1_path_climbs() against a plain reading: separators replaced, split,
 * ";params" cut, a depth counted. */
static int oclimbs(const char *p)
{
    char tmp[OMAX * 2], *save = NULL, *seg;
    size_t i, w = 0, n = strlen(p);
    long depth = 0;

    for (i = 0; i < n; i++) {
        if (p[i] == '%' && i + 2 < n &&
            ((p[i + 1] == '2' && (p[i + 2] == 'f' || p[i + 2] == 'F')) ||
             (p[i + 1] == '5' && (p[i + 2] == 'c' || p[i + 2] == 'C')))) {
            tmp[w++] = '/';
            i += 2;
        } else {
            tmp[w++] = p[i] == '\\' ? '/' : p[i];
        }
    }
    tmp[w] = '\0';
    for (seg = strtok_r(tmp, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        char *semi = strchr(seg, ';');
        if (semi)
            *semi = '\0';
        if (!strcmp(seg, "..")) {
            if (--depth < 0)
                return 1;
        } else if (seg[0] != '\0' && strcmp(seg, ".") != 0) {
            depth++;
        }
    }
    return 0;
}

START_TEST(climbs_oracle)
{
    char in[200];
    unsigned long up = 0;

    for (size_t k = 0; k < 200000; k++) {
        size_t n = random_path(in, sizeof(in));
        int got = h1_path_climbs(in, n);
        EXPECT(got == oclimbs(in), "\"%s\": %d", in, got);
        {
            /* fed in random pieces (a rewrite's parts): the same answer */
            struct h1_climb c;
            size_t at = 0;
            h1_climb_init(&c);
            while (at < n) {
                size_t piece = 1 + next() % 4;
                piece = piece < n - at ? piece : n - at;
                h1_climb_feed(&c, in + at, piece);
                at += piece;
            }
            EXPECT(h1_climb_end(&c) == got, "\"%s\" in pieces: %d", in, !got);
        }
        up += (unsigned long)got;
    }
    ck_assert_uint_gt(up, 1000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http1_path");
    TCase *tc = tcase_create("normalize");
    TCase *to = tcase_create("oracle");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, norm_table);
    tcase_add_test(tc, norm_slashes);
    tcase_add_test(tc, norm_errors);
    tcase_add_test(tc, norm_fast_path_is_identity);
    tcase_add_test(tc, route_modes);
    tcase_add_test(tc, climbs);
    suite_add_tcase(s, tc);
    tcase_add_test(to, oracle_agrees);
    tcase_add_test(to, modes_agree_with_the_backend);
    tcase_add_test(to, climbs_oracle);
    tcase_set_timeout(to, 120);
    suite_add_tcase(s, to);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/*
 * test_encoding.c - gateway/encoding.c's pure parts: Accept-Encoding
 * negotiation against a table of fields (RFC 9110 12.5.3: q-values, "*",
 * identity, the server's order on ties, case, malformed elements), which
 * responses may be compressed, and the head a compressed response goes out
 * with. The streaming encoders are test_encoder.c's.
 */
#include "gateway/encoding.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum gw_coding all3[] = {GW_ENC_ZSTD, GW_ENC_BR, GW_ENC_GZIP};

START_TEST(names_and_levels)
{
    ck_assert_str_eq(gw_enc_name(GW_ENC_GZIP), "gzip");
    ck_assert_str_eq(gw_enc_name(GW_ENC_BR), "br");
    ck_assert_str_eq(gw_enc_name(GW_ENC_ZSTD), "zstd");
    ck_assert_int_eq(gw_enc_from_name("ZStd", 4), GW_ENC_ZSTD);
    ck_assert_int_eq(gw_enc_from_name("x-gzip", 6), GW_ENC_GZIP);
    ck_assert_int_eq(gw_enc_from_name("deflate", 7), -1);
    ck_assert_int_eq(gw_enc_from_name("gzi", 3), -1);
    ck_assert(gw_enc_level_ok(GW_ENC_GZIP, 1) && gw_enc_level_ok(GW_ENC_GZIP, 9));
    ck_assert(!gw_enc_level_ok(GW_ENC_GZIP, 0) && !gw_enc_level_ok(GW_ENC_GZIP, 10));
    ck_assert(gw_enc_level_ok(GW_ENC_BR, 0) && gw_enc_level_ok(GW_ENC_BR, 9));
    ck_assert(!gw_enc_level_ok(GW_ENC_BR, -1) && !gw_enc_level_ok(GW_ENC_BR, 10));
    ck_assert(gw_enc_level_ok(GW_ENC_ZSTD, 1) && gw_enc_level_ok(GW_ENC_ZSTD, 19));
    ck_assert(!gw_enc_level_ok(GW_ENC_ZSTD, 0) && !gw_enc_level_ok(GW_ENC_ZSTD, 20));
    ck_assert(!gw_enc_level_ok(GW_ENC_IDENTITY, 0));
    ck_assert(!gw_enc_level_ok((enum gw_coding)7, 1));
    ck_assert_int_eq(gw_enc_default_level(GW_ENC_GZIP), 6);
    ck_assert_int_eq(gw_enc_default_level(GW_ENC_BR), 4);
    ck_assert_int_eq(gw_enc_default_level(GW_ENC_ZSTD), 3);
}
END_TEST

/* One negotiation: an Accept-Encoding value (NULL: no field) and the coding
 * the server's order zstd, br, gzip gives it. */
struct choose_case {
    const char *ae;
    enum gw_coding want;
};

static const struct choose_case choose_cases[] = {
    {NULL, GW_ENC_IDENTITY},                  /* no field: as sent */
    {"", GW_ENC_IDENTITY},                    /* an empty one: identity only */
    {"gzip", GW_ENC_GZIP},                    /* */
    {"GZip", GW_ENC_GZIP},                    /* case-insensitive */
    {"x-gzip", GW_ENC_GZIP},                  /* the old name */
    {"gzip, deflate, br", GW_ENC_BR},         /* browsers: our order on the tie */
    {"gzip, deflate, br, zstd", GW_ENC_ZSTD}, /* */
    {"br;q=0.5, gzip", GW_ENC_GZIP},          /* the higher q */
    {"br;q=0.5, gzip;q=0.5", GW_ENC_BR},      /* tie: our order */
    {"gzip;q=0.5, br;q=0.5, zstd;q=0.4", GW_ENC_BR},
    {"br;q=0.9, zstd;q=0.8, gzip;q=1", GW_ENC_GZIP},
    {"*", GW_ENC_ZSTD},                        /* anything: our first */
    {"*;q=0", GW_ENC_IDENTITY},                /* nothing coded */
    {"*, zstd;q=0", GW_ENC_BR},                /* all but zstd */
    {"zstd;q=0, *", GW_ENC_BR},                /* order of elements does not matter */
    {"*;q=0.1, gzip", GW_ENC_GZIP},            /* named beats "*" */
    {"*;q=0.5, gzip;q=0.2", GW_ENC_ZSTD},      /* "*" beats a lower named one */
    {"gzip;q=0", GW_ENC_IDENTITY},             /* refused */
    {"gzip;q=0.000", GW_ENC_IDENTITY},         /* refused, spelt long */
    {"gzip;q=0, *", GW_ENC_ZSTD},              /* */
    {"identity", GW_ENC_IDENTITY},             /* */
    {"identity;q=0", GW_ENC_IDENTITY},         /* nothing acceptable: still identity */
    {"identity;q=0, gzip", GW_ENC_GZIP},       /* */
    {"gzip;q=0.5, identity", GW_ENC_IDENTITY}, /* identity named higher */
    {"gzip, identity;q=0.5", GW_ENC_GZIP},     /* */
    {"gzip, identity", GW_ENC_GZIP},           /* a tie goes to compression */
    {"gzip;q=1.0", GW_ENC_GZIP},               /* */
    {"gzip;q=1.000", GW_ENC_GZIP},             /* */
    {"gzip;q=0.001", GW_ENC_GZIP},             /* the least acceptable */
    {"gzip;Q=0.5, br;q=0.4", GW_ENC_GZIP},     /* "Q" */
    {"gzip ; q=0.5 , br ;q=0.6", GW_ENC_BR},   /* OWS around ';' and ',' */
    {"gzip;q=0.8;level=1", GW_ENC_GZIP},       /* other parameters ignored */
    {",,, gzip ,,", GW_ENC_GZIP},              /* empty elements */
    {"deflate, compress", GW_ENC_IDENTITY},    /* codings we do not make */
    {"gzip, gzip;q=0", GW_ENC_GZIP},           /* the first mention counts */
    /* malformed elements are skipped, the rest still counts */
    {"gzip;q=1.001", GW_ENC_IDENTITY},
    {"gzip;q=2", GW_ENC_IDENTITY},
    {"gzip;q=-1", GW_ENC_IDENTITY},
    {"gzip;q=0.5000", GW_ENC_IDENTITY},
    {"gzip;q=", GW_ENC_IDENTITY},
    {"gzip;q=.5", GW_ENC_IDENTITY},
    {"gzip;q=0,5", GW_ENC_IDENTITY}, /* "0" then the element "5" */
    {"gzip;q=abc, br", GW_ENC_BR},
    {"gz ip, br;q=0.1", GW_ENC_BR},
    {"gzip\x01, zstd;q=0.2", GW_ENC_ZSTD},
    {";q=1, gzip;q=0.3", GW_ENC_GZIP},
    {"\"gzip\"", GW_ENC_IDENTITY},
    {"gzip;q=0.5 br", GW_ENC_IDENTITY}, /* no comma: one bad q */
    {"br;", GW_ENC_BR},                 /* an empty parameter */
};

START_TEST(choose_table)
{
    for (size_t i = 0; i < sizeof(choose_cases) / sizeof(choose_cases[0]); i++) {
        const struct choose_case *t = &choose_cases[i];
        enum gw_coding got =
            gw_enc_choose(t->ae, t->ae ? strlen(t->ae) : 0, all3, sizeof(all3) / sizeof(all3[0]));
        ck_assert_msg(got == t->want, "Accept-Encoding \"%s\": got %s, want %s",
                      t->ae ? t->ae : "(none)", gw_enc_name(got), gw_enc_name(t->want));
    }
}
END_TEST

START_TEST(choose_server_order)
{
    static const enum gw_coding gz[] = {GW_ENC_GZIP}, gz_first[] = {GW_ENC_GZIP, GW_ENC_ZSTD};
    static const enum gw_coding odd[] = {GW_ENC_IDENTITY, (enum gw_coding)9, GW_ENC_BR};

    ck_assert_int_eq(gw_enc_choose("br, zstd", 8, gz, 1), GW_ENC_IDENTITY);
    ck_assert_int_eq(gw_enc_choose("*", 1, gz, 1), GW_ENC_GZIP);
    ck_assert_int_eq(gw_enc_choose("zstd, gzip", 10, gz_first, 2), GW_ENC_GZIP);
    ck_assert_int_eq(gw_enc_choose("zstd, gzip;q=0.9", 16, gz_first, 2), GW_ENC_ZSTD);
    ck_assert_int_eq(gw_enc_choose("gzip", 4, gz, 0), GW_ENC_IDENTITY);
    /* identity or a bad value in the order is passed over */
    ck_assert_int_eq(gw_enc_choose("gzip, br", 8, odd, 3), GW_ENC_BR);
    /* the length is honoured: nothing read past it */
    ck_assert_int_eq(gw_enc_choose("gzip, br", 4, all3, 3), GW_ENC_GZIP);
}
END_TEST

/* Several Accept-Encoding fields are one list; other fields do not count. */
START_TEST(choose_fields)
{
    const struct h1_header two[] = {{{"Accept-Encoding", 15}, {"gzip;q=0.5", 10}},
                                    {{"X-Accept-Encoding", 17}, {"zstd", 4}},
                                    {{"accept-encoding", 15}, {"br;q=0.6, gzip", 14}}};
    const struct h1_header empty[] = {{{"Accept-Encoding", 15}, {NULL, 0}}};
    const struct h1_header other[] = {{{"Accept", 6}, {"*/*", 3}}};

    ck_assert_int_eq(gw_enc_choose_fields(two, 3, all3, 3), GW_ENC_BR); /* gzip's first: 0.5 */
    ck_assert_int_eq(gw_enc_choose_fields(two, 1, all3, 3), GW_ENC_GZIP);
    ck_assert_int_eq(gw_enc_choose_fields(empty, 1, all3, 3), GW_ENC_IDENTITY);
    ck_assert_int_eq(gw_enc_choose_fields(other, 1, all3, 3), GW_ENC_IDENTITY);
    ck_assert_int_eq(gw_enc_choose_fields(NULL, 0, all3, 3), GW_ENC_IDENTITY);
}
END_TEST

/* A field value a thousand elements long, and one of a single huge token. */
START_TEST(choose_long)
{
    size_t cap = 64 * 1024, n = 0;
    char *v = malloc(cap);

    ck_assert_ptr_nonnull(v);
    while (n + 32 < cap)
        n += (size_t)snprintf(v + n, cap - n, "c%zu;q=0.%zu, ", n, n % 10);
    n += (size_t)snprintf(v + n, cap - n, "br;q=0.01");
    ck_assert_int_eq(gw_enc_choose(v, n, all3, 3), GW_ENC_BR);
    memset(v, 'a', cap);
    ck_assert_int_eq(gw_enc_choose(v, cap, all3, 3), GW_ENC_IDENTITY);
    free(v);
}
END_TEST

/* ---- eligibility ---- */

static const char *const types[] = {"text/*", "application/json", "IMAGE/SVG+XML"};

static struct gw_enc_rules rules(void)
{
    struct gw_enc_rules r = {
        .order = {GW_ENC_ZSTD, GW_ENC_BR, GW_ENC_GZIP},
        .ncodings = 3,
        .level = {0, 6, 4, 3},
        .types = types,
        .ntypes = 3,
        .min_length = 1024,
    };
    return r;
}

#define H(n, v)                                                                                    \
    {                                                                                              \
        {n, sizeof(n) - 1},                                                                        \
        {                                                                                          \
            v, sizeof(v) - 1                                                                       \
        }                                                                                          \
    }

START_TEST(type_patterns)
{
    static const struct {
        const char *ct;
        bool want;
    } t[] = {
        {"text/html", true},
        {"text/html; charset=utf-8", true},
        {"TEXT/Plain;charset=\"x\"", true},
        {"text/", false},
        {"text", false},
        {"textual/html", false},
        {"application/json", true},
        {"application/json ; charset=utf-8", true},
        {"Application/JSON", true},
        {"application/jsonp", false},
        {"application/json+x", false},
        {"image/svg+xml", true},
        {"image/png", false},
        {"", false},
        {";charset=utf-8", false},
    };
    static const char *const any[] = {"*/*"};

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct h1_slice ct = {t[i].ct, strlen(t[i].ct)};
        ck_assert_msg(gw_enc_type_match(types, 3, ct) == t[i].want, "%s", t[i].ct);
    }
    ck_assert(gw_enc_type_match(any, 1, (struct h1_slice){"image/png", 9}));
    ck_assert(!gw_enc_type_match(any, 1, (struct h1_slice){"", 0}));
    ck_assert(!gw_enc_type_match(NULL, 0, (struct h1_slice){"text/html", 9}));
    ck_assert(!gw_enc_type_match(types, 3, (struct h1_slice){NULL, 0}));
}
END_TEST

START_TEST(eligible_cases)
{
    struct gw_enc_rules r = rules();
    const struct h1_header ok[] = {H("Content-Type", "text/html"), H("Content-Length", "5000")};
    const struct h1_header chunked[] = {H("content-type", "application/json; charset=utf-8  ")};
    const struct h1_header short_[] = {H("Content-Type", "text/html"), H("Content-Length", "1023")};
    const struct h1_header exact[] = {H("Content-Type", "text/html"), H("Content-Length", "1024")};
    const struct h1_header badlen[] = {H("Content-Type", "text/html"), H("Content-Length", "1x")};
    const struct h1_header png[] = {H("Content-Type", "image/png")};
    const struct h1_header notype[] = {H("Content-Length", "5000")};
    const struct h1_header enc[] = {H("Content-Type", "text/html"), H("Content-Encoding", "gzip")};
    const struct h1_header encid[] = {H("Content-Type", "text/html"),
                                      H("content-encoding", "identity")};
    const struct h1_header nt[] = {H("Content-Type", "text/html"),
                                   H("Cache-Control", "public, No-Transform")};
    const struct h1_header nt2[] = {H("Cache-Control", "max-age=5"), H("Content-Type", "text/css"),
                                    H("Cache-Control", "no-transform")};
    const struct h1_header cc[] = {H("Content-Type", "text/html"),
                                   H("Cache-Control", "no-store, no-transformer")};
    const struct h1_header range[] = {H("Content-Type", "text/html"),
                                      H("Content-Range", "bytes 0-9/100")};
    const struct h1_header twotypes[] = {H("Content-Type", "image/png"),
                                         H("Content-Type", "text/html")};

    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, ok, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 404, ok, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 500, ok, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, chunked, 1), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, true, 200, ok, 2), GW_ENC_SKIP_HEAD);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 204, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 205, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 206, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 304, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 101, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 103, ok, 2), GW_ENC_SKIP_STATUS);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, short_, 2), GW_ENC_SKIP_SHORT);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, exact, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, badlen, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, png, 1), GW_ENC_SKIP_TYPE);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, notype, 1), GW_ENC_SKIP_TYPE);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, enc, 2), GW_ENC_SKIP_ENCODED);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, encid, 2), GW_ENC_SKIP_ENCODED);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, nt, 2), GW_ENC_SKIP_NO_TRANSFORM);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, nt2, 3), GW_ENC_SKIP_NO_TRANSFORM);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, cc, 2), GW_ENC_OK);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, range, 2), GW_ENC_SKIP_RANGE);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, twotypes, 2), GW_ENC_SKIP_TYPE);
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, NULL, 0), GW_ENC_SKIP_TYPE);
    r.min_length = 0;
    ck_assert_int_eq(gw_enc_eligible(&r, false, 200, short_, 2), GW_ENC_OK);
}
END_TEST

/* ---- the head's edits ---- */

/* Whether <out>[0..<n>) holds the field <name>: <value> (exact bytes). */
static bool has(const struct h1_header *out, size_t n, const char *name, const char *value)
{
    for (size_t i = 0; i < n; i++)
        if (h1_ci_eq(out[i].name.ptr, out[i].name.len, name) && out[i].value.len == strlen(value) &&
            !memcmp(out[i].value.ptr, value, out[i].value.len))
            return true;
    return false;
}

static size_t count(const struct h1_header *out, size_t n, const char *name)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += h1_ci_eq(out[i].name.ptr, out[i].name.len, name);
    return k;
}

START_TEST(edit_head_full)
{
    const struct h1_header in[] = {
        H("Content-Type", "text/html"),
        H("Content-Length", "5000"),
        H("ETag", "\"abc\" "),
        H("Vary", "Origin"),
        H("Accept-Ranges", "bytes"),
        H("vary", " Cookie"),
        H("Content-Digest", "sha-256=:x=:"),
        H("X-Other", "1"),
    };
    struct h1_header out[10];
    char scratch[128];
    size_t n = 0;

    ck_assert_int_eq(gw_enc_edit_head(in, 8, GW_ENC_GZIP, out, 10, scratch, sizeof(scratch), &n),
                     0);
    ck_assert_uint_eq(n, 5);
    ck_assert(has(out, n, "content-type", "text/html"));
    ck_assert(has(out, n, "etag", "W/\"abc\""));
    ck_assert(has(out, n, "vary", "Origin, Cookie, Accept-Encoding"));
    ck_assert(has(out, n, "x-other", "1"));
    ck_assert(has(out, n, "content-encoding", "gzip"));
    ck_assert_uint_eq(count(out, n, "vary"), 1);
    ck_assert_uint_eq(count(out, n, "content-length"), 0);
    ck_assert_uint_eq(count(out, n, "accept-ranges"), 0);
    ck_assert_uint_eq(count(out, n, "content-digest"), 0);
    /* the merged Vary sits where the first one was */
    ck_assert(h1_ci_eq(out[2].name.ptr, out[2].name.len, "vary"));
}
END_TEST

START_TEST(edit_head_cases)
{
    const struct h1_header weak[] = {H("ETag", "W/\"abc\""), H("Content-Type", "text/plain")};
    const struct h1_header star[] = {H("Vary", "*"), H("Vary", "Origin")};
    const struct h1_header has_ae[] = {H("Vary", "Origin, accept-encoding")};
    const struct h1_header none[] = {H("Content-Type", "text/plain")};
    const struct h1_header empty_vary[] = {H("Vary", ""), H("ETag", "\"\"")};
    const struct h1_header strong[] = {H("ETag", "\"abcdef\"")};
    struct h1_header out[8];
    char scratch[64];
    size_t n;

    ck_assert_int_eq(gw_enc_edit_head(weak, 2, GW_ENC_BR, out, 8, scratch, 64, &n), 0);
    ck_assert_uint_eq(n, 4);
    ck_assert(has(out, n, "etag", "W/\"abc\""));
    ck_assert(has(out, n, "vary", "Accept-Encoding"));
    ck_assert(has(out, n, "content-encoding", "br"));

    ck_assert_int_eq(gw_enc_edit_head(star, 2, GW_ENC_ZSTD, out, 8, scratch, 64, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert(has(out, n, "vary", "*") && has(out, n, "vary", "Origin"));
    ck_assert(has(out, n, "content-encoding", "zstd"));

    ck_assert_int_eq(gw_enc_edit_head(has_ae, 1, GW_ENC_GZIP, out, 8, scratch, 64, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert(has(out, n, "vary", "Origin, accept-encoding"));

    ck_assert_int_eq(gw_enc_edit_head(empty_vary, 2, GW_ENC_GZIP, out, 8, scratch, 64, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert(has(out, n, "vary", "Accept-Encoding"));
    ck_assert(has(out, n, "etag", "W/\"\""));

    {
        /* fields whose value is absent (ptr NULL) read as empty ones */
        const struct h1_header nulls[] = {
            {{"Vary", 4}, {NULL, 0}}, {{"ETag", 4}, {NULL, 0}}, {{"Content-Type", 12}, {NULL, 0}}};
        struct gw_enc_rules r = rules();
        ck_assert_int_eq(gw_enc_edit_head(nulls, 3, GW_ENC_GZIP, out, 8, scratch, 64, &n), 0);
        ck_assert(has(out, n, "vary", "Accept-Encoding"));
        ck_assert_int_eq(gw_enc_eligible(&r, false, 200, nulls, 3), GW_ENC_SKIP_TYPE);
    }
    ck_assert_int_eq(gw_enc_edit_head(NULL, 0, GW_ENC_GZIP, out, 2, scratch, 64, &n), 0);
    ck_assert_uint_eq(n, 2);

    /* too little room anywhere: -1 */
    ck_assert_int_eq(gw_enc_edit_head(none, 1, GW_ENC_GZIP, out, 2, scratch, 64, &n), -1);
    ck_assert_int_eq(gw_enc_edit_head(none, 1, GW_ENC_GZIP, out, 3, scratch, 10, &n), -1);
    ck_assert_int_eq(gw_enc_edit_head(strong, 1, GW_ENC_GZIP, out, 8, scratch, 17, &n), -1);
    ck_assert_int_eq(gw_enc_edit_head(strong, 1, GW_ENC_GZIP, out, 8, scratch, 25, &n), 0);
    ck_assert_int_eq(gw_enc_edit_head(none, 1, GW_ENC_IDENTITY, out, 8, scratch, 64, &n), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gateway_encoding");
    TCase *tc = tcase_create("encoding");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, names_and_levels);
    tcase_add_test(tc, choose_table);
    tcase_add_test(tc, choose_server_order);
    tcase_add_test(tc, choose_fields);
    tcase_add_test(tc, choose_long);
    tcase_add_test(tc, type_patterns);
    tcase_add_test(tc, eligible_cases);
    tcase_add_test(tc, edit_head_full);
    tcase_add_test(tc, edit_head_cases);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * test_jwks_fetch.c - the JWKS URL fetcher (admin/jwks_fetch.c) against a
 * real HTTPS server on 127.0.0.1 (jwks_server.py, Python's http.server in
 * ssl with a certificate made by the openssl CLI): the first fetch, a
 * changed document, an unchanged one (confirmed, no new set), a broken document and
 * a 404 that keep the last good set, a body over the bound, a server too
 * slow for the timeout, a certificate not trusted; and which URLs pass.
 */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "admin/jwks_fetch.h"
#include "admin/jwks_save.h"
#include "jwks_server.h"

/* Two oct keys (32 bytes each) for HS256. */
#define KEY_A                                                                                      \
    "{\"kty\": \"oct\", \"kid\": \"a\", \"k\": \"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}"
#define KEY_B                                                                                      \
    "{\"kty\": \"oct\", \"kid\": \"b\", \"k\": \"ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA\"}"

/* What the callback saw. */
struct seen {
    struct event_base *base;
    int sets, errors, same;
    size_t count; /* keys in the last set */
    char err[512];
    int want_sets, want_errors; /* break the loop once reached */
};

static void on_fetch(void *arg, struct adm_jwks *set, const char *err)
{
    struct seen *s = arg;

    if (set) {
        s->sets++;
        s->count = adm_jwks_count(set);
    } else if (err) {
        s->errors++;
        snprintf(s->err, sizeof(s->err), "%s", err);
    } else {
        s->same++;
    }
    if (s->sets >= s->want_sets && s->errors >= s->want_errors)
        event_base_loopbreak(s->base);
}

/* Runs the loop until <s> has seen <sets> sets and <errors> errors in all,
 * or <ms> have passed. */
static void run_until(struct seen *s, int sets, int errors, unsigned ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    s->want_sets = sets;
    s->want_errors = errors;
    event_base_loopexit(s->base, &tv);
    event_base_dispatch(s->base);
}

static SSL_CTX *client_ctx(int trust)
{
    char ca[512];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    ck_assert_ptr_nonnull(ctx);
    snprintf(ca, sizeof(ca), "%s/cert.pem", jwks_dir);
    if (trust)
        ck_assert_int_eq(SSL_CTX_load_verify_locations(ctx, ca, NULL), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

static struct adm_jwks_fetch *fetcher(struct seen *s, SSL_CTX *ctx, const char *path,
                                      unsigned timeout_ms, size_t max)
{
    char url[256], err[256];
    struct adm_jwks_fetch_conf c = {.base = s->base,
                                    .ssl_ctx = ctx,
                                    .url = url,
                                    .refresh_ms = 200,
                                    .retry_ms = 100,
                                    .timeout_ms = timeout_ms,
                                    .max_bytes = max,
                                    .cb = on_fetch,
                                    .arg = s};
    struct adm_jwks_fetch *f;

    snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", jwks_port, path);
    f = adm_jwks_fetch_new(&c, err, sizeof(err));
    ck_assert_msg(f, "%s", err);
    return f;
}

START_TEST(refresh_keeps_the_last_good_set)
{
    struct seen s = {.base = event_base_new()};
    SSL_CTX *ctx = client_ctx(1);
    struct adm_jwks_fetch *f;

    jwks_serve("jwks.json", "{\"keys\": [" KEY_A "]}");
    f = fetcher(&s, ctx, "/jwks.json", 2000, 0);
    ck_assert_ptr_null(adm_jwks_fetch_current(f));
    run_until(&s, 1, 0, 10000);
    ck_assert_int_eq(s.sets, 1);
    ck_assert_uint_eq(s.count, 1);
    /* the same document, refreshed every 200 ms for a second: confirmed,
     * never a new set */
    run_until(&s, 99, 99, 1000);
    ck_assert_int_eq(s.sets, 1);
    ck_assert_int_eq(s.errors, 0);
    ck_assert_int_ge(s.same, 2);
    /* a changed document */
    jwks_serve("jwks.json", "{\"keys\": [" KEY_A ", " KEY_B "]}");
    run_until(&s, 2, 0, 10000);
    ck_assert_int_eq(s.sets, 2);
    ck_assert_uint_eq(s.count, 2);
    /* a broken one: reported, the set kept */
    jwks_serve("jwks.json", "{\"keys\": [");
    run_until(&s, 2, 1, 10000);
    ck_assert_int_eq(s.errors, 1);
    ck_assert_msg(strstr(s.err, "/jwks.json: line 1"), "%s", s.err);
    ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(f)), 2);
    /* gone: the same */
    jwks_serve("jwks.json", NULL);
    run_until(&s, 2, 2, 10000);
    ck_assert_msg(strstr(s.err, "HTTP status 404"), "%s", s.err);
    ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(f)), 2);
    /* back, changed */
    jwks_serve("jwks.json", "{\"keys\": [" KEY_B "]}");
    run_until(&s, 3, 2, 10000);
    ck_assert_int_eq(s.sets, 3);
    ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(f)), 1);
    adm_jwks_fetch_free(f);
    SSL_CTX_free(ctx);
    event_base_free(s.base);
}
END_TEST

START_TEST(bounds_and_trust)
{
    struct seen s = {.base = event_base_new()};
    SSL_CTX *ctx = client_ctx(1), *untrusting = client_ctx(0);
    struct adm_jwks_fetch *f;

    jwks_serve("big.json", "{\"keys\": [" KEY_A ", " KEY_B "]}");
    f = fetcher(&s, ctx, "/big.json", 2000, 100);
    run_until(&s, 0, 1, 10000);
    ck_assert_msg(strstr(s.err, "answer too large"), "%s", s.err);
    ck_assert_ptr_null(adm_jwks_fetch_current(f));
    adm_jwks_fetch_free(f);

    s.errors = 0;
    f = fetcher(&s, ctx, "/slow", 300, 0);
    run_until(&s, 0, 1, 10000);
    ck_assert_msg(strstr(s.err, "timed out"), "%s", s.err);
    adm_jwks_fetch_free(f);

    s.errors = 0;
    f = fetcher(&s, untrusting, "/big.json", 2000, 0);
    run_until(&s, 0, 1, 10000);
    ck_assert_msg(strstr(s.err, "certificate verify failed"), "%s", s.err);
    ck_assert_int_eq(s.sets, 0);
    adm_jwks_fetch_free(f);

    /* nobody listening */
    s.errors = 0;
    {
        char err[256];
        struct adm_jwks_fetch_conf c = {.base = s.base,
                                        .ssl_ctx = ctx,
                                        .url = "https://127.0.0.1:1/jwks.json",
                                        .timeout_ms = 2000,
                                        .cb = on_fetch,
                                        .arg = &s};
        f = adm_jwks_fetch_new(&c, err, sizeof(err));
        ck_assert_ptr_nonnull(f);
        run_until(&s, 0, 1, 10000);
        ck_assert_msg(strstr(s.err, "https://127.0.0.1:1/jwks.json: "), "%s", s.err);
        adm_jwks_fetch_free(f);
    }
    SSL_CTX_free(ctx);
    SSL_CTX_free(untrusting);
    event_base_free(s.base);
}
END_TEST

/* What an upgrade carries: the last good document, taken by a new fetcher
 * before its first fetch; the same bytes fetched then publish nothing. A
 * seed never replaces a set, nor takes what does not parse. */
START_TEST(seeded_from_a_carried_document)
{
    struct seen s = {.base = event_base_new()};
    SSL_CTX *ctx = client_ctx(1);
    struct adm_jwks_fetch *f, *g;
    const char *doc;
    char err[256];
    size_t len;

    jwks_serve("seed.json", "{\"keys\": [" KEY_A ", " KEY_B "]}");
    f = fetcher(&s, ctx, "/seed.json", 2000, 0);
    ck_assert_ptr_null(adm_jwks_fetch_doc(f, &len));
    run_until(&s, 1, 0, 10000);
    ck_assert_int_eq(s.sets, 1);
    doc = adm_jwks_fetch_doc(f, &len);
    ck_assert_ptr_nonnull(doc);
    ck_assert_uint_eq(len, strlen("{\"keys\": [" KEY_A ", " KEY_B "]}"));

    g = fetcher(&s, ctx, "/seed.json", 2000, 0);
    ck_assert_int_eq(adm_jwks_fetch_seed(g, "{\"keys\": [", 11, 0, err, sizeof(err)), -1);
    ck_assert_ptr_null(adm_jwks_fetch_current(g));
    ck_assert_int_eq(adm_jwks_fetch_seed(g, doc, len, 0, err, sizeof(err)), 1);
    ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(g)), 2);
    ck_assert_int_eq(adm_jwks_fetch_seed(g, doc, len, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(adm_jwks_fetch_seed(g, doc, len, 1, err, sizeof(err)), 0);
    adm_jwks_fetch_free(f);
    s.sets = s.same = 0;
    for (int i = 0; i < 100 && !s.same && !s.sets && !s.errors; i++)
        run_until(&s, 99, 99, 100); /* g's first fetch: the same bytes */
    ck_assert_int_eq(s.sets, 0);
    ck_assert_int_eq(s.errors, 0);
    ck_assert_int_eq(s.same, 1);
    /* another document replaces the set only when asked to */
    {
        const char *one = "{\"keys\": [" KEY_A "]}";
        ck_assert_int_eq(adm_jwks_fetch_seed(g, one, strlen(one), 0, err, sizeof(err)), 0);
        ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(g)), 2);
        ck_assert_int_eq(adm_jwks_fetch_seed(g, one, strlen(one), 1, err, sizeof(err)), 1);
        ck_assert_uint_eq(adm_jwks_count(adm_jwks_fetch_current(g)), 1);
    }
    adm_jwks_fetch_free(g);

    SSL_CTX_free(ctx);
    event_base_free(s.base);
}
END_TEST

/* A shorter refresh asked of a fetcher before its first fetch (a second
 * policy sharing the URL) does not put that fetch off: it still comes at
 * once, not a refresh later. */
START_TEST(a_shorter_refresh_keeps_the_first_fetch)
{
    struct seen s = {.base = event_base_new()};
    SSL_CTX *ctx = client_ctx(1);
    struct adm_jwks_fetch *f;
    char url[256], err[256];
    struct adm_jwks_fetch_conf c = {.base = s.base,
                                    .ssl_ctx = ctx,
                                    .url = url,
                                    .refresh_ms = 60000,
                                    .timeout_ms = 5000,
                                    .cb = on_fetch,
                                    .arg = &s};

    jwks_serve("soon.json", "{\"keys\": [" KEY_A "]}");
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/soon.json", jwks_port);
    f = adm_jwks_fetch_new(&c, err, sizeof(err));
    ck_assert_msg(f, "%s", err);
    adm_jwks_fetch_tune(f, 30000, 5000);
    run_until(&s, 1, 0, 10000); /* not 30 s */
    ck_assert_int_eq(s.sets, 1);
    adm_jwks_fetch_free(f);
    SSL_CTX_free(ctx);
    event_base_free(s.base);
}
END_TEST

/* jwks_save.c: a set saved, read back by its key only, touched, and
 * forgotten; a file of another key or broken is not used, and says why. */
START_TEST(saved_in_the_state_directory)
{
    char dir[] = "/tmp/sy-jwks-save-XXXXXX", why[512], path[600], *doc;
    const char *text = "{\"keys\": [" KEY_A "]}";
    double age = -1;
    size_t len = 0;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_ptr_null(adm_jwks_saved(dir, "https://a/j system", &len, &age, why, sizeof(why)));
    ck_assert_str_eq(why, ""); /* simply none */
    ck_assert_int_eq(adm_jwks_save_touch(dir, "https://a/j system"), -1);
    ck_assert_int_eq(adm_jwks_save(dir, "https://a/j system", "https://a/j", text, strlen(text), 0,
                                   why, sizeof(why)),
                     0);
    ck_assert_int_eq(adm_jwks_save_touch(dir, "https://a/j system"), 0);
    doc = adm_jwks_saved(dir, "https://a/j system", &len, &age, why, sizeof(why));
    ck_assert_ptr_nonnull(doc);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert(!memcmp(doc, text, len));
    ck_assert(age >= 0 && age < 60);
    free(doc);
    /* a set fetched an hour ago (an upgrade carried it) keeps its age */
    ck_assert_int_eq(adm_jwks_save(dir, "aged", "u", text, strlen(text), 3600, why, sizeof(why)),
                     0);
    free(adm_jwks_saved(dir, "aged", &len, &age, why, sizeof(why)));
    ck_assert_msg(age >= 3590 && age < 3700, "%f", age);
    adm_jwks_save_forget(dir, "aged");
    /* another CA's fetcher of the same URL has a file of its own */
    ck_assert_ptr_null(adm_jwks_saved(dir, "https://a/j 0123abcd", &len, &age, why, sizeof(why)));
    ck_assert_str_eq(why, "");
    adm_jwks_save_forget(dir, "https://a/j system");
    ck_assert_ptr_null(adm_jwks_saved(dir, "https://a/j system", &len, &age, why, sizeof(why)));
    /* a broken file is named, not used */
    ck_assert_int_eq(adm_jwks_save(dir, "k", "u", text, strlen(text), 0, why, sizeof(why)), 0);
    snprintf(path, sizeof(path), "%s/jwks-", dir);
    {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "for f in %s/jwks-*.json; do printf '{' > \"$f\"; done", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_ptr_null(adm_jwks_saved(dir, "k", &len, &age, why, sizeof(why)));
    ck_assert_msg(strstr(why, path), "%s", why);
    adm_jwks_save_forget(dir, "k");
    ck_assert_int_eq(rmdir(dir), 0); /* nothing left behind, no .tmp */
}
END_TEST

START_TEST(urls)
{
    static const char *const good[] = {"https://id.example/.well-known/jwks.json",
                                       "https://id.example:8443/jwks",
                                       "https://[::1]:8443/j",
                                       "https://id.example",
                                       "https://id.example?tenant=1",
                                       "HTTPS://id.example/x?y=z"};
    static const char *const bad[] = {"http://id.example/jwks",
                                      "https:///jwks",
                                      "https://user@id.example/j",
                                      "https://id.example:0/",
                                      "https://h:70000/",
                                      "https://h:x/",
                                      "https://h/a b",
                                      "https://h/x#frag",
                                      "https://[::1/j",
                                      "id.example/jwks",
                                      "",
                                      "https://h/\x01",
                                      "https://id.example\r\nX-Evil: 1/j",
                                      "https://id example/j",
                                      "https://[::1\n]/j",
                                      "https://h\x7f/",
                                      "https://[foo]/j",
                                      "https://id.example./j",
                                      "https://h\xc3\xa9/j"};
    char err[256];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ck_assert_msg(adm_jwks_url_check(good[i], err, sizeof(err)) == 0, "%s: %s", good[i], err);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_msg(adm_jwks_url_check(bad[i], err, sizeof(err)) < 0, "%s", bad[i]);
        ck_assert(err[0]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jwks_fetch");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, refresh_keeps_the_last_good_set);
    tcase_add_test(tc, bounds_and_trust);
    tcase_add_test(tc, seeded_from_a_carried_document);
    tcase_add_test(tc, saved_in_the_state_directory);
    tcase_add_test(tc, a_shorter_refresh_keeps_the_first_fetch);
    tcase_add_test(tc, urls);
    suite_add_tcase(s, tc);
    return jwks_run(s);
}

/*
 * test_jwks_remote.c - the jwt policies' remote key sets (admin/jwks_remote.c)
 * against jwks_server.py, with worker threads, for ASan and TSan (label
 * "concurrency"): the admin thread (this one) runs the loop that fetches
 * a JWKS rewritten between two key sets, publishing each new set into the
 * policy state, while worker threads pin the snapshot, load the state's
 * set and verify tokens with their own caches as gateway/policy_jwt.c
 * does, acknowledging between "requests". Every set must be freed only
 * once no worker uses it, every worker must see both keys pass, and in
 * the end everything is freed. Also: a second snapshot of a changed
 * policy gets the running fetcher's set at once; the last policy gone,
 * the fetcher stops. Bounded in count and time.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdatomic.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "admin/jwks_remote.h"
#include "admin/policy_types.h"
#include "admin/snapshot.h"
#include "b64u.h"
#include "jwks_server.h"

#define NW 3
#define ROTATIONS 6

/* The two oct keys of test_jwks_fetch.c: the secrets are their k values
 * decoded. */
#define SECRET_A "0123456789abcdef0123456789abcdef"
#define SECRET_B "fedcba9876543210fedcba9876543210"
#define SET_A                                                                                      \
    "{\"keys\": [{\"kty\": \"oct\", \"kid\": \"a\", \"k\": "                                       \
    "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}]}"
#define SET_B                                                                                      \
    "{\"keys\": [{\"kty\": \"oct\", \"kid\": \"b\", \"k\": "                                       \
    "\"ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA\"}]}"

static struct adm_swap sw;
static struct event_base *base;
static char tok_a[512], tok_b[512];
static atomic_int stop;
static atomic_ulong passed[NW][2], bad;
static int new_sets, stopped;

/* An HS256 token of key <kid> signed with <secret>, into <out>. */
static void sign(const char *kid, const char *secret, char *out)
{
    static const char claims[] = "{\"sub\":\"w\",\"exp\":4102444800}";
    char head[128], body[128], sig[64], hj[64];
    unsigned char mac[32];
    unsigned maclen = 0;

    snprintf(hj, sizeof(hj), "{\"alg\":\"HS256\",\"kid\":\"%s\"}", kid);
    b64u((const unsigned char *)hj, strlen(hj), head);
    b64u((const unsigned char *)claims, sizeof(claims) - 1, body);
    sprintf(out, "%s.%s", head, body);
    HMAC(EVP_sha256(), secret, 32, (const unsigned char *)out, strlen(out), mac, &maclen);
    b64u(mac, maclen, sig);
    sprintf(out + strlen(out), ".%s", sig);
}

static void on_log(void *arg, int warn, const char *line)
{
    (void)arg;
    (void)warn;
    new_sets += strstr(line, ": a new key set of ") != NULL;
    stopped += strstr(line, ": no policy names it any more") != NULL;
}

static struct adm_snapshot *build(const char *refresh)
{
    char doc[2048];
    struct adm_errors e;
    struct adm_config *cfg;
    struct adm_snapshot *s;

    snprintf(doc, sizeof(doc),
             "{\"listeners\": [{\"address\": \"127.0.0.1:1\"}], \"policies\": {\"t\": {\"type\": "
             "\"jwt\", \"jwks_url\": \"https://127.0.0.1:%u/rot.json\", \"jwks_ca_file\": "
             "\"%s/cert.pem\", \"jwks_refresh_s\": %s, \"algorithms\": [\"HS256\"]}}, "
             "\"routes\": [{\"id\": \"r\", \"path\": \"/x\", \"response\": {\"body\": \"x\"}, "
             "\"policies\": [\"t\"]}]}",
             jwks_port, jwks_dir, refresh);
    adm_errors_init(&e);
    cfg = adm_config_parse(doc, strlen(doc), &e);
    ck_assert_msg(cfg, "%s: %s", e.n ? e.v[0].path : "", e.n ? e.v[0].msg : "");
    s = adm_snapshot_build(cfg, atomic_load(&sw.current), NW, &e);
    ck_assert_ptr_nonnull(s);
    adm_errors_clear(&e);
    return s;
}

/* A worker: gw_req_start's pin, gateway/policy_jwt.c's load and verify. */
static void *worker(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    struct adm_jwt_claims claims;
    unsigned long n = 0;

    while (!atomic_load(&stop) && n < 50000000) {
        struct adm_snapshot *s = adm_swap_pin(&sw, w);
        const struct adm_spolicy *p = s->policies[0];
        const struct adm_jwt_conf *c = p->conf;
        struct adm_jwt_state *st = p->state;
        const struct adm_jwks *set = atomic_load_explicit(&st->keys, memory_order_acquire);
        const char *tok = n % 2 ? tok_b : tok_a, *why;

        if (n % 2048 == 0) { /* now and then a slow step: longer than the admin's tick */
            struct timespec ms150 = {0, 150000000};
            nanosleep(&ms150, NULL);
        }
        if (!st->cache[w])
            st->cache[w] = adm_jwt_cache_new(ADM_JWT_CACHE_SLOTS);
        switch (adm_jwt_verify_cached(st->cache[w], set, &c->opts, tok, strlen(tok), time(NULL),
                                      &claims, &why)) {
        case ADM_JWT_OK:
            atomic_fetch_add(&passed[w][n % 2], 1);
            break;
        case ADM_JWT_NO_KEY: /* the other key's set, or none yet */
            break;
        default:
            atomic_fetch_add(&bad, 1);
        }
        adm_swap_unpin(s, w);
        if (++n % 8 == 0)
            adm_swap_ack(&sw, w); /* between requests */
    }
    return NULL;
}

/* Runs the loop until <cond> holds or <ms> have passed. */
static int run_until(int (*cond)(void), unsigned ms)
{
    for (unsigned t = 0; t < ms && !cond(); t += 20) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    return cond();
}

static int want_sets;
static int sets_reached(void)
{
    return new_sets >= want_sets;
}

static int every_worker_passed_both(void)
{
    for (unsigned w = 0; w < NW; w++)
        if (!atomic_load(&passed[w][0]) || !atomic_load(&passed[w][1]))
            return 0;
    return 1;
}

static int stopped_once(void)
{
    return stopped == 1;
}

START_TEST(sets_published_under_workers)
{
    struct adm_rjwks_hooks hooks = {on_log, NULL, NULL};
    pthread_t th[NW];
    struct adm_snapshot *s;
    const struct adm_jwt_state *st;

    base = event_base_new();
    ck_assert_int_eq(adm_swap_init(&sw, NW, NULL, NULL), 0);
    ck_assert_int_eq(adm_rjwks_start(base, &sw, &hooks), 0);
    sign("a", SECRET_A, tok_a);
    sign("b", SECRET_B, tok_b);
    jwks_serve("rot.json", SET_A);
    adm_swap_publish(&sw, build("1"));
    st = atomic_load(&sw.current)->policies[0]->state;
    ck_assert_ptr_null(atomic_load(&st->keys)); /* nothing fetched yet */
    for (unsigned w = 0; w < NW; w++)
        ck_assert_int_eq(pthread_create(&th[w], NULL, worker, (void *)(uintptr_t)w), 0);
    /* each rotation published under the workers' feet */
    for (int i = 1; i <= ROTATIONS; i++) {
        want_sets = i;
        ck_assert_msg(run_until(sets_reached, 15000), "rotation %d: %d sets", i, new_sets);
        jwks_serve("rot.json", i % 2 ? SET_B : SET_A);
        adm_swap_reclaim(&sw);
    }
    ck_assert_msg(run_until(every_worker_passed_both, 15000),
                  "a worker never passed both: %lu %lu / %lu %lu / %lu %lu, bad %lu",
                  atomic_load(&passed[0][0]), atomic_load(&passed[0][1]),
                  atomic_load(&passed[1][0]), atomic_load(&passed[1][1]),
                  atomic_load(&passed[2][0]), atomic_load(&passed[2][1]), atomic_load(&bad));
    ck_assert_uint_eq(atomic_load(&bad), 0);

    /* a changed policy on the same URL and CA: the running fetcher's set
     * at once, before any fetch */
    s = build("2");
    st = s->policies[0]->state;
    ck_assert_ptr_nonnull(atomic_load(&st->keys));
    adm_swap_publish(&sw, s);
    ck_assert_int_eq(stopped, 0);
    atomic_store(&stop, 1);
    for (unsigned w = 0; w < NW; w++)
        pthread_join(th[w], NULL);
    for (unsigned w = 0; w < NW; w++)
        adm_swap_ack(&sw, w);
    adm_swap_reclaim(&sw); /* the first snapshot's policy goes: the fetcher stays */
    ck_assert_int_eq(stopped, 0);
    adm_swap_destroy(&sw); /* the last one: the fetcher stops */
    ck_assert(run_until(stopped_once, 1000));
    adm_rjwks_stop(); /* the sets it retired, freed */
    event_base_free(base);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jwks_remote");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sets_published_under_workers);
    suite_add_tcase(s, tc);
    return jwks_run(s);
}

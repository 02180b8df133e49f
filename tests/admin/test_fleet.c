/*
 * test_fleet.c - admin/fleet.c: the fleet's objects (reset, apply and
 * their difference counts, dup, get), the composed document, every error
 * of a key that cannot be placed, the blame of the validator's errors on
 * the keys (RFC 6901 escapes too), the state directory's round trip, and
 * a reset and compose of 10,000 routes (timed, printed, not asserted).
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin/config.h"
#include "admin/fleet.h"

#define P "/sy/"

/* A kv of C strings (<v> NULL: a delete). */
static struct adm_etcd_kv kv(const char *k, const char *v, int64_t mod)
{
    return (struct adm_etcd_kv){.key = k,
                                .keylen = strlen(k),
                                .value = v,
                                .vallen = v ? strlen(v) : 0,
                                .mod_revision = mod};
}

static json_t *node_doc(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    ck_assert_msg(j != NULL, "%s", je.text);
    return j;
}

static const char node_plain[] =
    "{\"listeners\": [{\"address\": \"127.0.0.1:8080\"}], "
    "\"fleet\": {\"etcd\": {\"endpoints\": [\"http://127.0.0.1:2379\"], "
    "\"prefix\": \"" P "\"}}}";

static const char node_tls[] =
    "{\"listeners\": [{\"address\": \"127.0.0.1:8443\", \"tls\": {\"certificates\": \"fleet\"}},"
    " {\"address\": \"127.0.0.1:8444\", \"tls\": {\"certificates\": [], \"ticket_secret\": "
    "\"own\"}},"
    " {\"address\": \"127.0.0.1:8080\"}]}";

/* The error at <path> containing <needle>, or a failure listing them all. */
static void has_error(const struct adm_errors *e, const char *path, const char *needle)
{
    for (size_t i = 0; i < e->n; i++)
        if (!strcmp(e->v[i].path, path) && strstr(e->v[i].msg, needle))
            return;
    char *all = adm_errors_format(e);
    ck_abort_msg("no error at %s with \"%s\"; got:\n%s", path, needle, all);
}

/* Composes <f> with <node>, which must fail with an error at <path>. */
static void compose_fails(const struct adm_fleet *f, const char *node, const char *path,
                          const char *needle)
{
    struct adm_errors e;
    json_t *n = node_doc(node), *doc;

    adm_errors_init(&e);
    doc = adm_fleet_compose(f, n, &e);
    ck_assert_ptr_null(doc);
    has_error(&e, path, needle);
    adm_errors_clear(&e);
    json_decref(n);
}

static json_t *compose_ok(const struct adm_fleet *f, const char *node)
{
    struct adm_errors e;
    json_t *n = node_doc(node), *doc;

    adm_errors_init(&e);
    doc = adm_fleet_compose(f, n, &e);
    if (!doc)
        ck_abort_msg("compose failed:\n%s", adm_errors_format(&e));
    ck_assert_uint_eq(e.n, 0);
    json_decref(n);
    return doc;
}

static const char up_a[] = "{\"servers\": [{\"address\": \"127.0.0.1:9001\"}]}";

START_TEST(reset_apply_counts)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {kv(P "routes/b", "{\"path\": \"/b\", \"upstream\": \"a\"}", 5),
                                kv(P "upstreams/a", up_a, 3),
                                kv(P "routes/a", "{\"path\": \"/a\", \"upstream\": \"a\"}", 4)};
    size_t len;
    int64_t mod;

    ck_assert_int_eq(adm_fleet_revision(f), 0);
    ck_assert_int_eq(adm_fleet_reset(f, 7, kvs, 3), 3);
    ck_assert_int_eq(adm_fleet_revision(f), 7);
    ck_assert_uint_eq(adm_fleet_count(f), 3);
    ck_assert_str_eq(adm_fleet_get(f, P "upstreams/a", &len, &mod), up_a);
    ck_assert_uint_eq(len, strlen(up_a));
    ck_assert_int_eq(mod, 3);
    ck_assert_ptr_null(adm_fleet_get(f, P "upstreams/zz", &len, &mod));
    ck_assert_int_eq(mod, 0);

    /* the same read again: no difference, the newer mod_revision taken */
    kvs[1].mod_revision = 6;
    ck_assert_int_eq(adm_fleet_reset(f, 8, kvs, 3), 0);
    adm_fleet_get(f, P "upstreams/a", NULL, &mod);
    ck_assert_int_eq(mod, 6);
    /* one changed, one gone, one new: 3 */
    struct adm_etcd_kv kvs2[] = {kv(P "routes/b", "{\"path\": \"/bb\", \"upstream\": \"a\"}", 9),
                                 kv(P "upstreams/a", up_a, 6),
                                 kv(P "routes/c", "{\"path\": \"/c\"}", 9)};
    ck_assert_int_eq(adm_fleet_reset(f, 9, kvs2, 3), 3);
    ck_assert_ptr_null(adm_fleet_get(f, P "routes/a", NULL, NULL));

    /* apply: a put of the same value, a delete of an absent key: nothing */
    struct adm_etcd_kv ev1[] = {kv(P "upstreams/a", up_a, 10), kv(P "routes/none", NULL, 10)};
    ck_assert_int_eq(adm_fleet_apply(f, 10, ev1, 2), 0);
    ck_assert_int_eq(adm_fleet_revision(f), 10);
    adm_fleet_get(f, P "upstreams/a", NULL, &mod);
    ck_assert_int_eq(mod, 10);
    /* a change, a new key, a delete */
    struct adm_etcd_kv ev2[] = {kv(P "routes/c", "{\"path\": \"/cc\"}", 11),
                                kv(P "routes/d", "{\"path\": \"/d\"}", 11),
                                kv(P "routes/b", NULL, 11)};
    ck_assert_int_eq(adm_fleet_apply(f, 11, ev2, 3), 3);
    ck_assert_uint_eq(adm_fleet_count(f), 3);
    ck_assert_str_eq(adm_fleet_get(f, P "routes/c", NULL, NULL), "{\"path\": \"/cc\"}");
    /* a key put then deleted in one revision */
    struct adm_etcd_kv ev3[] = {kv(P "routes/e", "{\"path\": \"/e\"}", 12),
                                kv(P "routes/e", NULL, 12)};
    ck_assert_int_eq(adm_fleet_apply(f, 12, ev3, 2), 2);
    ck_assert_ptr_null(adm_fleet_get(f, P "routes/e", NULL, NULL));

    /* duplicates in a reset: the later wins */
    struct adm_etcd_kv dup[] = {kv(P "routes/x", "{\"path\": \"/1\"}", 1),
                                kv(P "routes/x", "{\"path\": \"/2\"}", 2)};
    ck_assert_int_eq(adm_fleet_reset(f, 13, dup, 2), 4); /* 3 gone, 1 new */
    ck_assert_str_eq(adm_fleet_get(f, P "routes/x", NULL, NULL), "{\"path\": \"/2\"}");
    ck_assert_int_eq(adm_fleet_reset(f, 14, NULL, 0), 1);
    ck_assert_uint_eq(adm_fleet_count(f), 0);
    adm_fleet_free(f);
    adm_fleet_free(NULL);
}
END_TEST

START_TEST(dup_is_independent)
{
    struct adm_fleet *f = adm_fleet_new(P), *d;
    struct adm_etcd_kv kvs[] = {kv(P "upstreams/a", up_a, 3),
                                kv(P "routes/r", "{\"path\": \"/\"}", 4)};
    struct adm_etcd_kv ev[] = {kv(P "routes/r", NULL, 5)};

    adm_fleet_reset(f, 4, kvs, 2);
    d = adm_fleet_dup(f);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(adm_fleet_apply(f, 5, ev, 1), 1);
    ck_assert_int_eq(adm_fleet_revision(d), 4);
    ck_assert_ptr_nonnull(adm_fleet_get(d, P "routes/r", NULL, NULL));
    adm_fleet_free(f);
    json_t *doc = compose_ok(d, node_plain);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "routes")), 1);
    json_decref(doc);
    adm_fleet_free(d);
}
END_TEST

START_TEST(compose_output)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {
        kv(P "routes/z", "{\"path\": \"/z\", \"upstream\": \"a\"}", 1),
        kv(P "routes/a", "{\"id\": \"a\", \"path\": \"/a\", \"upstream\": \"a\"}", 1),
        kv(P "upstreams/a", "{\"name\": \"a\", \"servers\": [{\"address\": \"127.0.0.1:9001\"}]}",
           1),
        kv(P "upstreams/b.2", up_a, 1),
    };
    struct adm_errors e;
    struct adm_config *cfg;
    json_t *doc, *r, *u;

    adm_fleet_reset(f, 2, kvs, 4);
    doc = compose_ok(f, node_plain);
    r = json_object_get(doc, "routes");
    ck_assert_uint_eq(json_array_size(r), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(r, 0), "id")), "a");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(r, 1), "id")), "z");
    u = json_object_get(doc, "upstreams");
    ck_assert_uint_eq(json_object_size(u), 2);
    ck_assert_ptr_null(json_object_get(json_object_get(u, "a"), "name"));
    ck_assert_ptr_nonnull(json_object_get(u, "b.2"));
    ck_assert_ptr_nonnull(json_object_get(doc, "fleet"));
    /* what the validator makes of it */
    adm_errors_init(&e);
    cfg = adm_config_from_json(doc, &e);
    if (!cfg)
        ck_abort_msg("%s", adm_errors_format(&e));
    ck_assert_uint_eq(cfg->nroutes, 2);
    ck_assert_ptr_nonnull(cfg->fleet);
    ck_assert_str_eq(cfg->fleet->prefix, P);
    adm_config_free(cfg);
    json_decref(doc);

    /* an empty fleet: no routes, no upstreams */
    adm_fleet_reset(f, 3, NULL, 0);
    doc = compose_ok(f, node_plain);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "routes")), 0);
    ck_assert_uint_eq(json_object_size(json_object_get(doc, "upstreams")), 0);
    json_decref(doc);
    adm_fleet_free(f);
}
END_TEST

/* policies/NAME: the composed "policies", validated with the routes that
 * name them; a bad one blamed on its key; a node file's own refused. */
START_TEST(compose_policies)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {
        kv(P "routes/r", "{\"path\": \"/r\", \"upstream\": \"a\", \"policies\": [\"lim\"]}", 1),
        kv(P "upstreams/a", up_a, 1),
        kv(P "policies/lim", "{\"type\": \"rate_limit\", \"rate\": 5}", 1),
    };
    struct adm_errors e, out;
    struct adm_config *cfg;
    json_t *doc, *n;

    adm_fleet_reset(f, 2, kvs, 3);
    doc = compose_ok(f, node_plain);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "policies"), "lim"));
    adm_errors_init(&e);
    cfg = adm_config_from_json(doc, &e);
    if (!cfg)
        ck_abort_msg("%s", adm_errors_format(&e));
    ck_assert_uint_eq(cfg->npolicies, 1);
    ck_assert_uint_eq(cfg->routes[0].npolicies, 1);
    adm_config_free(cfg);
    json_decref(doc);

    /* a bad policy: the validator's path becomes the key */
    kvs[2] = kv(P "policies/lim", "{\"type\": \"rate_limit\", \"rate\": 0}", 3);
    adm_fleet_reset(f, 3, kvs, 3);
    doc = compose_ok(f, node_plain);
    adm_errors_init(&e);
    adm_errors_init(&out);
    ck_assert_ptr_null(adm_config_from_json(doc, &e));
    n = node_doc(node_plain);
    adm_fleet_blame(f, n, &e, &out);
    has_error(&out, P "policies/lim", "/rate: ");
    adm_errors_clear(&e);
    adm_errors_clear(&out);
    json_decref(n);
    json_decref(doc);

    compose_fails(f,
                  "{\"listeners\": [{\"address\": \"127.0.0.1:8080\"}], \"policies\": "
                  "{\"x\": {\"type\": \"cors\", \"origins\": [\"*\"]}}}",
                  "/policies", "the policies live in etcd");
    adm_fleet_free(f);
}
END_TEST

static const char secret[] = "0123456789abcdef0123456789abcdef-x";

START_TEST(compose_certificates_and_ticket)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {
        kv(P "certificates/b", "{\"cert_pem\": \"B\", \"key_pem\": \"KB\"}", 1),
        kv(P "certificates/a",
           "{\"cert_pem\": \"A\", \"key_pem\": \"KA\", \"hosts\": [\"a.example\"]}", 1),
        kv(P "tls/ticket_secret", secret, 1),
    };
    json_t *doc, *l0, *l1, *l2, *certs;

    /* no certificates yet: an empty array, no secret */
    doc = compose_ok(f, node_tls);
    l0 = json_object_get(json_array_get(json_object_get(doc, "listeners"), 0), "tls");
    ck_assert(json_is_array(json_object_get(l0, "certificates")));
    ck_assert_uint_eq(json_array_size(json_object_get(l0, "certificates")), 0);
    ck_assert_ptr_null(json_object_get(l0, "ticket_secret"));
    json_decref(doc);

    adm_fleet_reset(f, 2, kvs, 3);
    doc = compose_ok(f, node_tls);
    l0 = json_object_get(json_array_get(json_object_get(doc, "listeners"), 0), "tls");
    l1 = json_object_get(json_array_get(json_object_get(doc, "listeners"), 1), "tls");
    l2 = json_array_get(json_object_get(doc, "listeners"), 2);
    certs = json_object_get(l0, "certificates");
    ck_assert_uint_eq(json_array_size(certs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(certs, 0), "cert_pem")), "A");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(certs, 1), "cert_pem")), "B");
    ck_assert_str_eq(json_string_value(json_object_get(l0, "ticket_secret")), secret);
    /* a listener's own secret and certificates stay; a plain one gets none */
    ck_assert_str_eq(json_string_value(json_object_get(l1, "ticket_secret")), "own");
    ck_assert_uint_eq(json_array_size(json_object_get(l1, "certificates")), 0);
    ck_assert_ptr_null(json_object_get(l2, "tls"));
    json_decref(doc);
    adm_fleet_free(f);
}
END_TEST

/* A fleet of the one key <k> with <v>; composing it fails at <k>. */
static void key_fails(const char *k, const char *v, size_t vlen, const char *needle)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv one = {.key = k, .keylen = strlen(k), .value = v, .vallen = vlen};

    ck_assert_int_eq(adm_fleet_reset(f, 1, &one, 1), 1);
    compose_fails(f, node_plain, k, needle);
    adm_fleet_free(f);
}

#define KEY_FAILS(k, v, needle) key_fails((k), (v), strlen(v), (needle))

START_TEST(key_errors)
{
    static const char layout[] = "not a fleet object: expected upstreams/NAME, routes/ID, "
                                 "policies/NAME, certificates/NAME or tls/ticket_secret";

    KEY_FAILS(P "other/x", "{}", layout);
    KEY_FAILS(P "routes", "{}", layout);
    KEY_FAILS(P "tls/ticket_secretX", secret, layout);
    KEY_FAILS(P, "{}", layout);
    KEY_FAILS("/elsewhere/routes/a", "{}", "not under the fleet's prefix \"/sy/\"");
    KEY_FAILS(P "routes/", "{}", "invalid route id \"\"");
    KEY_FAILS(P "routes/a/b", "{}", "invalid route id \"a/b\"");
    KEY_FAILS(P "upstreams/", up_a, "invalid upstream name \"\"");
    KEY_FAILS(P "upstreams/a:b", up_a, "invalid upstream name \"a:b\"");
    KEY_FAILS(P "certificates/x y", "{}", "invalid certificate name \"x y\"");
    KEY_FAILS(P "routes/a", "{\"path\": ", "not JSON: line 1, column 9");
    KEY_FAILS(P "routes/a", "{\"path\": \"/\",\n \"path\": \"/x\"}", "not JSON: line 2");
    KEY_FAILS(P "routes/a", "", "the value is empty: expected a JSON object");
    KEY_FAILS(P "routes/a", "  \n", "the value is white space");
    KEY_FAILS(P "routes/a", "[1]", "expected a JSON object, got an array");
    KEY_FAILS(P "upstreams/a", "\"x\"", "expected a JSON object, got a string");
    KEY_FAILS(P "routes/a", "{\"id\": \"b\", \"path\": \"/\"}",
              "the route's \"id\" \"b\" differs from the key's id \"a\"");
    KEY_FAILS(P "routes/a", "{\"id\": 1}", "the route's \"id\" must be the key's id \"a\"");
    KEY_FAILS(P "upstreams/a", "{\"name\": \"b\"}",
              "the \"name\" in the value differs from the key's name \"a\"");
    KEY_FAILS(P "certificates/c", "{\"cert\": \"/etc/c.pem\", \"key_pem\": \"k\"}",
              "a fleet certificate is inline");
    KEY_FAILS(P "tls/ticket_secret", "short", "at least 32 bytes (got 5)");
    key_fails(P "tls/ticket_secret", "0123456789abcdef0123456789abcdef\0", 33, "without NUL");
    KEY_FAILS(P "tls/ticket_secret", "0123456789abcdef0123456789abcdef\xff", "must be UTF-8 text");
}
END_TEST

START_TEST(errors_of_every_key_and_the_node)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {kv(P "routes/a", "nope", 1), kv(P "routes/b", "{}", 1),
                                kv(P "junk", "{}", 1)};
    struct adm_errors e;
    json_t *n = node_doc("{\"listeners\": [], \"routes\": [{\"id\": \"x\"}], "
                         "\"upstreams\": {\"u\": {}}}");

    adm_fleet_reset(f, 1, kvs, 3);
    adm_errors_init(&e);
    ck_assert_ptr_null(adm_fleet_compose(f, n, &e));
    ck_assert_uint_eq(e.n, 4);
    has_error(&e, "/routes",
              "on a fleet node the routes live in etcd, one key each: /sy/routes/ID");
    has_error(&e, "/routes", "etcdctl put /sy/routes/ID");
    has_error(&e, "/upstreams", "/sy/upstreams/NAME");
    has_error(&e, P "routes/a", "not JSON");
    has_error(&e, P "junk", "not a fleet object");
    adm_errors_clear(&e);
    json_decref(n);

    /* empty ones (a template's) are no conflict */
    n = node_doc("{\"listeners\": [], \"routes\": [], \"upstreams\": {}}");
    ck_assert_ptr_null(adm_fleet_compose(f, n, &e));
    ck_assert_uint_eq(e.n, 2);
    adm_errors_clear(&e);
    json_decref(n);

    n = json_array();
    ck_assert_ptr_null(adm_fleet_compose(f, n, &e));
    has_error(&e, "", "must be a JSON object, got an array");
    adm_errors_clear(&e);
    json_decref(n);
    adm_fleet_free(f);
}
END_TEST

/* Blames the one error <path>: <msg> on <f> composed with <node>. */
static void blamed(const struct adm_fleet *f, const char *node, const char *path, const char *msg,
                   const char *want_path, const char *want_msg)
{
    struct adm_errors in, out;
    json_t *n = node_doc(node);

    adm_errors_init(&in);
    adm_errors_init(&out);
    adm_errors_add(&in, path, "%s", msg);
    adm_fleet_blame(f, n, &in, &out);
    ck_assert_uint_eq(out.n, 1);
    ck_assert_str_eq(out.v[0].path, want_path);
    ck_assert_str_eq(out.v[0].msg, want_msg);
    adm_errors_clear(&in);
    adm_errors_clear(&out);
    json_decref(n);
}

START_TEST(blame_paths)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {
        kv(P "routes/r1", "{}", 1),          kv(P "routes/r0", "{}", 1),
        kv(P "upstreams/a~b/c", "{}", 1),    kv(P "upstreams/u", "{}", 1),
        kv(P "certificates/c0", "{}", 1),    kv(P "certificates/c1", "{}", 1),
        kv(P "tls/ticket_secret", secret, 1)};

    adm_fleet_reset(f, 1, kvs, 7);
    blamed(f, node_plain, "/routes/1/upstream", "unknown upstream \"x\"", P "routes/r1",
           "/upstream: unknown upstream \"x\"");
    blamed(f, node_plain, "/routes/0", "m", P "routes/r0", "m");
    blamed(f, node_plain, "/routes/2/path", "m", "/routes/2/path", "m"); /* no such route */
    blamed(f, node_plain, "/routes/01/path", "m", "/routes/01/path", "m");
    blamed(f, node_plain, "/routes", "too many", "/routes", "too many");
    blamed(f, node_plain, "/upstreams/u/servers/0/address", "bad", P "upstreams/u",
           "/servers/0/address: bad");
    blamed(f, node_plain, "/upstreams/a~0b~1c/keepalive", "bad", P "upstreams/a~b/c",
           "/keepalive: bad");
    blamed(f, node_plain, "/upstreams/nope/x", "bad", "/upstreams/nope/x", "bad");
    blamed(f, node_plain, "/workers", "bad", "/workers", "bad");
    /* listener 0 says "fleet", listener 1 has its own certificates and secret */
    blamed(f, node_tls, "/listeners/0/tls/certificates/1/hosts/0", "bad", P "certificates/c1",
           "/hosts/0: bad");
    blamed(f, node_tls, "/listeners/0/tls/certificates/0", "bad", P "certificates/c0", "bad");
    blamed(f, node_tls, "/listeners/0/tls/certificates", "empty", "/listeners/0/tls/certificates",
           "empty");
    blamed(f, node_tls, "/listeners/1/tls/certificates/0/cert_pem", "bad",
           "/listeners/1/tls/certificates/0/cert_pem", "bad");
    blamed(f, node_tls, "/listeners/0/tls/ticket_secret", "weak", P "tls/ticket_secret", "weak");
    blamed(f, node_tls, "/listeners/1/tls/ticket_secret", "weak", "/listeners/1/tls/ticket_secret",
           "weak");
    blamed(f, node_tls, "/listeners/0/address", "bad", "/listeners/0/address", "bad");
    blamed(f, node_tls, "/listeners/9/tls/certificates/0", "bad", "/listeners/9/tls/certificates/0",
           "bad");
    adm_fleet_free(f);
}
END_TEST

/* The validator's own errors on a composed document, blamed. */
START_TEST(blame_validator)
{
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv kvs[] = {kv(P "routes/a", "{\"path\": \"/a\", \"upstream\": \"a\"}", 1),
                                kv(P "routes/b", "{\"path\": \"/b\", \"upstream\": \"nope\"}", 1),
                                kv(P "upstreams/a", "{\"servers\": [], \"keepalive\": 1}", 1)};
    struct adm_errors e, out;
    json_t *doc, *n = node_doc(node_plain);

    adm_fleet_reset(f, 1, kvs, 3);
    doc = compose_ok(f, node_plain);
    adm_errors_init(&e);
    adm_errors_init(&out);
    ck_assert_ptr_null(adm_config_from_json(doc, &e));
    adm_fleet_blame(f, n, &e, &out);
    ck_assert_uint_eq(out.n, e.n);
    has_error(&out, P "routes/b", "/upstream: unknown upstream \"nope\"");
    has_error(&out, P "upstreams/a", "/servers: ");
    adm_errors_clear(&e);
    adm_errors_clear(&out);
    json_decref(doc);
    json_decref(n);
    adm_fleet_free(f);
}
END_TEST

START_TEST(save_load_round_trip)
{
    struct adm_fleet *f = adm_fleet_new(P), *g = adm_fleet_new(P);
    static const char nul_secret[] = "0123456789abcdef\0000123456789abcdef";
    struct adm_etcd_kv kvs[] = {kv(P "routes/a", "{\"path\": \"/\"}", 3),
                                kv(P "upstreams/u", up_a, 9),
                                {.key = P "tls/ticket_secret",
                                 .keylen = strlen(P "tls/ticket_secret"),
                                 .value = nul_secret,
                                 .vallen = sizeof(nul_secret) - 1,
                                 .mod_revision = 4},
                                {.key = P "bin\xff", .keylen = 8, .value = "v", .vallen = 1}};
    struct adm_errors e;
    json_t *saved, *again;
    char *text;
    size_t len;
    int64_t mod;

    adm_fleet_reset(f, 12, kvs, 4);
    saved = adm_fleet_save(f);
    ck_assert_ptr_nonnull(saved);
    ck_assert_str_eq(json_string_value(json_object_get(saved, "revision")), "12");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(saved, "kvs"), P "upstreams/u"), "mod")),
                     "9");
    ck_assert_uint_eq(json_array_size(json_object_get(saved, "kvs_base64")), 2);
    /* through text, as the state directory holds it */
    text = json_dumps(saved, JSON_COMPACT);
    json_decref(saved);
    saved = json_loads(text, 0, NULL);
    free(text);
    adm_errors_init(&e);
    ck_assert_int_eq(adm_fleet_load(g, saved, &e), 0);
    ck_assert_int_eq(adm_fleet_revision(g), 12);
    ck_assert_uint_eq(adm_fleet_count(g), 4);
    const char *v = adm_fleet_get(g, P "tls/ticket_secret", &len, &mod);
    ck_assert_uint_eq(len, sizeof(nul_secret) - 1);
    ck_assert_mem_eq(v, nul_secret, len);
    ck_assert_int_eq(mod, 4);
    again = adm_fleet_save(g);
    ck_assert(json_equal(saved, again));
    json_decref(again);
    json_decref(saved);

    /* not a saved fleet */
    saved = json_pack("{s:s}", "revision", "x");
    ck_assert_int_eq(adm_fleet_load(g, saved, &e), -1);
    has_error(&e, "", "not a saved fleet");
    json_decref(saved);
    saved = json_pack("{s:s,s:{s:{s:i}}}", "revision", "1", "kvs", P "routes/a", "value", 1);
    ck_assert_int_eq(adm_fleet_load(g, saved, &e), -1);
    has_error(&e, "/kvs", P "routes/a: expected");
    json_decref(saved);
    saved = json_pack("{s:s,s:{},s:[{s:s,s:s,s:s}]}", "revision", "1", "kvs", "kvs_base64", "key",
                      "***", "value", "", "mod", "1");
    ck_assert_int_eq(adm_fleet_load(g, saved, &e), -1);
    has_error(&e, "/kvs_base64", "entry 0");
    json_decref(saved);
    adm_errors_clear(&e);
    adm_fleet_free(f);
    adm_fleet_free(g);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(ten_thousand_routes)
{
    enum { N = 10000 };
    struct adm_fleet *f = adm_fleet_new(P);
    struct adm_etcd_kv *kvs = calloc(N + 1, sizeof(*kvs));
    char(*keys)[64] = calloc(N, 64), (*vals)[128] = calloc(N, 128);
    double t0, t1, t2, t3, t4;
    struct adm_etcd_kv ev;
    json_t *doc;
    long d;

    ck_assert(kvs && keys && vals);
    for (size_t i = 0; i < N; i++) { /* etcd's order is not relied on */
        size_t k = (i * 7919) % N;
        snprintf(keys[i], 64, P "routes/r%05zu", k);
        snprintf(vals[i], 128, "{\"path\": \"/r/%zu/{id}\", \"upstream\": \"a\"}", k);
        kvs[i] = kv(keys[i], vals[i], (int64_t)i + 2);
    }
    kvs[N] = kv(P "upstreams/a", up_a, 1);
    t0 = now_s();
    ck_assert_int_eq(adm_fleet_reset(f, N + 2, kvs, N + 1), N + 1);
    t1 = now_s();
    doc = compose_ok(f, node_plain);
    t2 = now_s();
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "routes")), N);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(doc, "routes"), 0), "id")),
        "r00000");
    json_decref(doc);
    /* a compaction's re-read with one change */
    snprintf(vals[5], 128, "{\"path\": \"/changed\", \"upstream\": \"a\"}");
    kvs[5].vallen = strlen(vals[5]);
    t3 = now_s();
    d = adm_fleet_reset(f, N + 3, kvs, N + 1);
    t4 = now_s();
    ck_assert_int_eq(d, 1);
    /* one event */
    ev = kv(P "routes/r00001", "{\"path\": \"/one\"}", N + 4);
    ck_assert_int_eq(adm_fleet_apply(f, N + 4, &ev, 1), 1);
    printf("fleet of %d routes: reset %.1f ms, compose %.1f ms, re-read with one change %.1f ms\n",
           N, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t4 - t3) * 1e3);
    adm_fleet_free(f);
    free(kvs);
    free(keys);
    free(vals);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fleet");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reset_apply_counts);
    tcase_add_test(tc, dup_is_independent);
    tcase_add_test(tc, compose_output);
    tcase_add_test(tc, compose_policies);
    tcase_add_test(tc, compose_certificates_and_ticket);
    tcase_add_test(tc, key_errors);
    tcase_add_test(tc, errors_of_every_key_and_the_node);
    tcase_add_test(tc, blame_paths);
    tcase_add_test(tc, blame_validator);
    tcase_add_test(tc, save_load_round_trip);
    tcase_add_test(tc, ten_thousand_routes);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * config_fleet.c - the "fleet" section: how a fleet node reaches etcd
 * (endpoints, the prefix of the fleet's keys, TLS and auth, timeouts) and
 * how long an API write waits for its revision (admin/fleet.h's struct
 * adm_fleet_cfg). Files are read here, at parse time, as tls_config.c
 * reads a listener's: a config that names an unreadable CA, certificate,
 * key or password file is refused before it runs. The whole section is
 * restart-only (config_lifecycle.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "admin/config_int.h"
#include "admin/fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#define MAX_ENDPOINTS 32
#define MAX_PASSWORD 1024
#define MAX_PREFIX 256
#define MAX_PEM (1u << 20)

/* One endpoint: http:// or https://, a host and a port, nothing else. */
static void endpoint(struct adm_cf *x, const json_t *v, char **slot)
{
    const char *s = adm_cf_str(x, v, 1);
    struct adm_origin o;
    char why[128];
    struct adm_cf_qbuf q;

    if (!s)
        return;
    if (strncasecmp(s, "http://", 7) && strncasecmp(s, "https://", 8))
        adm_cf_err(x, "invalid endpoint %s: write http://HOST:PORT or https://HOST:PORT",
                   adm_cf_quote(&q, s));
    else if (adm_origin_parse(&o, s, why, sizeof(why)) < 0)
        adm_cf_err(x, "invalid endpoint %s: %s", adm_cf_quote(&q, s), why);
    else if (!o.port)
        adm_cf_err(x,
                   "invalid endpoint %s: the port is required (etcd's client port is "
                   "usually 2379)",
                   adm_cf_quote(&q, s));
    else
        *slot = adm_cf_strdup(x, s);
}

static void etcd_endpoints(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;
    size_t n;

    if (!adm_cf_want_array(x, v))
        return;
    if (!(n = json_array_size(v)) || n > MAX_ENDPOINTS) {
        adm_cf_err(x, "expected 1..%d endpoints, got %zu", MAX_ENDPOINTS, n);
        return;
    }
    if (!(c->endpoints = adm_cf_calloc(x, n, sizeof(*c->endpoints))))
        return;
    c->nendpoints = n;
    for (size_t i = 0; i < n; i++) {
        size_t mark = adm_cf_push_index(x, i);
        endpoint(x, json_array_get(v, i), &c->endpoints[i]);
        adm_cf_pop(x, mark);
    }
}

static void etcd_prefix(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;
    const char *s = adm_cf_str(x, v, 1);
    size_t n;
    struct adm_cf_qbuf q;

    if (!s)
        return;
    n = strlen(s);
    if (n < 2 || s[0] != '/' || s[n - 1] != '/' || n > MAX_PREFIX) {
        adm_cf_err(x,
                   "invalid prefix %s: it starts and ends with '/' (\"/switchyard/\"), "
                   "at most %d bytes",
                   adm_cf_quote(&q, s), MAX_PREFIX);
        return;
    }
    free(c->prefix);
    c->prefix = adm_cf_strdup(x, s);
}

/* What a PEM file must hold. */
enum pem_kind { PEM_CERT, PEM_KEY };

/* The first <kind> in the PEM file <path>, named by member <key> of the
 * object at the current path: an X509 or an EVP_PKEY that the caller
 * frees, or NULL after reporting. The etcd client loads the file again
 * when it starts; reading it here tells the operator now. */
static void *pem_file(struct adm_cf *x, const char *key, const char *path, enum pem_kind kind)
{
    char why[8400], *buf;
    size_t len;
    void *out = NULL;
    BIO *b;

    if (!(buf = adm_read_small_file(path, MAX_PEM, &len, why, sizeof(why)))) {
        adm_cf_err_key(x, key, "%s", why);
        return NULL;
    }
    if (!(b = BIO_new_mem_buf(buf, (int)len))) {
        x->nomem = 1;
        free(buf);
        return NULL;
    }
    out = kind == PEM_KEY ? (void *)PEM_read_bio_PrivateKey(b, NULL, NULL, NULL)
                          : (void *)PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    OPENSSL_cleanse(buf, len);
    free(buf);
    if (!out)
        adm_cf_err_key(x, key, "%s holds no PEM %s", path,
                       kind == PEM_KEY ? "private key" : "certificate");
    return out;
}

static const struct adm_cf_field tls_fields[] = {
    {.key = "ca_file", .kind = FK_PATH, .off = offsetof(struct adm_fleet_cfg, ca_file)},
    {.key = "cert_file", .kind = FK_PATH, .off = offsetof(struct adm_fleet_cfg, cert_file)},
    {.key = "key_file", .kind = FK_PATH, .off = offsetof(struct adm_fleet_cfg, key_file)},
};

/* etcd's TLS: a CA (none: the system's), and a client certificate with
 * its key, both or neither. */
static void etcd_tls(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;
    X509 *ca = NULL, *cert = NULL;
    EVP_PKEY *pkey = NULL;

    if (!adm_cf_want_object(x, v))
        return;
    adm_cf_fields(x, v, tls_fields, NFIELDS(tls_fields), c);
    if (c->ca_file)
        ca = pem_file(x, "ca_file", c->ca_file, PEM_CERT);
    if (c->cert_file)
        cert = pem_file(x, "cert_file", c->cert_file, PEM_CERT);
    if (c->key_file)
        pkey = pem_file(x, "key_file", c->key_file, PEM_KEY);
    if (!json_object_get(v, "cert_file") != !json_object_get(v, "key_file"))
        adm_cf_err_key(x, json_object_get(v, "cert_file") ? "key_file" : "cert_file",
                       "missing: a client certificate needs both cert_file and key_file");
    else if (cert && pkey && X509_check_private_key(cert, pkey) != 1)
        adm_cf_err_key(x, "key_file", "is not the key of %s", c->cert_file);
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(pkey);
}

static void etcd_username(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;
    const char *s = adm_cf_str(x, v, 1);

    if (s) {
        free(c->username);
        c->username = adm_cf_strdup(x, s);
    }
}

/* The password: the file's bytes less one trailing newline (and its CR). */
static void etcd_password_file(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;
    char why[8400], *buf;
    size_t n;

    free(c->password_file);
    if (!(c->password_file = adm_cf_pathname(x, v)))
        return;
    if (!(buf = adm_read_small_file(c->password_file, MAX_PASSWORD + 2, &n, why, sizeof(why)))) {
        adm_cf_err(x, "%s", why);
        return;
    }
    if (n && buf[n - 1] == '\n')
        buf[--n] = '\0';
    if (n && buf[n - 1] == '\r')
        buf[--n] = '\0';
    if (n > MAX_PASSWORD)
        adm_cf_err(x, "%s: a password of more than %d bytes", c->password_file, MAX_PASSWORD);
    else if (!n)
        adm_cf_err(x, "%s is empty: it holds the etcd user's password", c->password_file);
    else if (strlen(buf) != n)
        adm_cf_err(x, "%s holds a NUL byte", c->password_file);
    else
        c->password = adm_cf_strdup(x, buf);
    OPENSSL_cleanse(buf, n);
    free(buf);
}

static const struct adm_cf_field etcd_fields[] = {
    {.key = "endpoints", .kind = FK_FN, .flags = F_REQUIRED, .fn = etcd_endpoints},
    {.key = "prefix", .kind = FK_FN, .fn = etcd_prefix},
    {.key = "tls", .kind = FK_FN, .fn = etcd_tls},
    {.key = "username", .kind = FK_FN, .fn = etcd_username},
    {.key = "password_file", .kind = FK_FN, .fn = etcd_password_file},
    {.key = "dial_timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_fleet_cfg, dial_timeout_ms),
     .min = 1,
     .max = 600000},
    {.key = "request_timeout_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_fleet_cfg, request_timeout_ms),
     .min = 1,
     .max = 600000},
    {.key = "watch_idle_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_fleet_cfg, watch_idle_ms),
     .min = 100,
     .max = 3600000},
};

static int any_https(const struct adm_fleet_cfg *c)
{
    for (size_t i = 0; i < c->nendpoints; i++)
        if (c->endpoints[i] && !strncasecmp(c->endpoints[i], "https://", 8))
            return 1;
    return 0;
}

static void fleet_etcd(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_fleet_cfg *c = target;

    if (!adm_cf_want_object(x, v))
        return;
    adm_cf_fields(x, v, etcd_fields, NFIELDS(etcd_fields), c);
    if (json_object_get(v, "tls") && c->nendpoints && !any_https(c))
        adm_cf_err_key(x, "tls", "only https:// endpoints use TLS: these are all http://");
    if (json_object_get(v, "username") && !json_object_get(v, "password_file"))
        adm_cf_err_key(x, "password_file", "missing: a username needs its password_file");
    else if (!json_object_get(v, "username") && json_object_get(v, "password_file"))
        adm_cf_err_key(x, "username", "missing: a password_file needs its username");
}

static const struct adm_cf_field fleet_fields[] = {
    {.key = "etcd", .kind = FK_FN, .flags = F_REQUIRED, .fn = fleet_etcd},
    {.key = "write_wait_ms",
     .kind = FK_UINT,
     .off = offsetof(struct adm_fleet_cfg, write_wait_ms),
     .min = 1,
     .max = 600000},
};

void adm_cf_fleet(struct adm_cf *x, const json_t *v, void *target)
{
    struct adm_config *cfg = target;
    struct adm_fleet_cfg *c;

    if (!adm_cf_want_object(x, v))
        return;
    if (!(c = cfg->fleet = adm_cf_calloc(x, 1, sizeof(*c))))
        return;
    c->dial_timeout_ms = 2000;
    c->request_timeout_ms = 5000;
    c->watch_idle_ms = 10000;
    c->write_wait_ms = 5000;
    adm_cf_fields(x, v, fleet_fields, NFIELDS(fleet_fields), c);
    if (!c->prefix)
        c->prefix = adm_cf_strdup(x, "/switchyard/");
}

void adm_fleet_cfg_free(struct adm_fleet_cfg *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nendpoints; i++)
        free(c->endpoints[i]);
    free(c->endpoints);
    free(c->prefix);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->username);
    free(c->password_file);
    if (c->password) /* not left in freed memory */
        OPENSSL_cleanse(c->password, strlen(c->password));
    free(c->password);
    free(c);
}

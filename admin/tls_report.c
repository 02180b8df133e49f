/*
 * tls_report.c - what the admin API says about TLS: the certificates of
 * GET /certificates and the TLS lines of /metrics (certificate expiry,
 * handshakes by version and resumption, failures by reason), and the
 * classification of a failed handshake that the gateway counts by.
 */
#define _DEFAULT_SOURCE

#include "admin/tls.h"
#include "admin/api.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static const char *const fail_names[ADM_TLS_NFAIL] = {
    [ADM_TLS_FAIL_PROTOCOL] = "protocol_version",
    [ADM_TLS_FAIL_CIPHER] = "no_shared_cipher",
    [ADM_TLS_FAIL_NO_CLIENT_CERT] = "no_client_certificate",
    [ADM_TLS_FAIL_CLIENT_CERT] = "bad_client_certificate",
    [ADM_TLS_FAIL_ALPN] = "no_application_protocol",
    [ADM_TLS_FAIL_NOT_TLS] = "not_tls",
    [ADM_TLS_FAIL_CLOSED] = "closed",
    [ADM_TLS_FAIL_TIMEOUT] = "timeout",
    [ADM_TLS_FAIL_OTHER] = "other",
};

const char *adm_tls_fail_name(enum adm_tls_fail f)
{
    return f < ADM_TLS_NFAIL ? fail_names[f] : "other";
}

const char *adm_tls_version_name(enum adm_tls_version v)
{
    return v == ADM_TLS_V13 ? "TLSv1.3" : "TLSv1.2";
}

enum adm_tls_version adm_tls_version_of(int version)
{
    return version == TLS1_3_VERSION ? ADM_TLS_V13 : ADM_TLS_V12;
}

/* OpenSSL's reason codes, by what an operator would do about them. */
static const struct {
    int reason;
    enum adm_tls_fail fail;
} reasons[] = {
    {SSL_R_UNSUPPORTED_PROTOCOL, ADM_TLS_FAIL_PROTOCOL},
    {SSL_R_VERSION_TOO_LOW, ADM_TLS_FAIL_PROTOCOL},
    {SSL_R_NO_PROTOCOLS_AVAILABLE, ADM_TLS_FAIL_PROTOCOL},
    {SSL_R_NO_SHARED_CIPHER, ADM_TLS_FAIL_CIPHER},
    {SSL_R_NO_SHARED_GROUPS, ADM_TLS_FAIL_CIPHER},
    {SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS, ADM_TLS_FAIL_CIPHER},
    {SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM, ADM_TLS_FAIL_CIPHER},
    {SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE, ADM_TLS_FAIL_NO_CLIENT_CERT},
    {SSL_R_CERTIFICATE_VERIFY_FAILED, ADM_TLS_FAIL_CLIENT_CERT},
    {SSL_R_NO_APPLICATION_PROTOCOL, ADM_TLS_FAIL_ALPN},
    {SSL_R_HTTP_REQUEST, ADM_TLS_FAIL_NOT_TLS},
    {SSL_R_HTTPS_PROXY_REQUEST, ADM_TLS_FAIL_NOT_TLS},
    {SSL_R_WRONG_VERSION_NUMBER, ADM_TLS_FAIL_NOT_TLS},
    {SSL_R_UNEXPECTED_EOF_WHILE_READING, ADM_TLS_FAIL_CLOSED},
};

enum adm_tls_fail adm_tls_fail_of(unsigned long err, int ssl_error)
{
    if (!err)
        return ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN
                   ? ADM_TLS_FAIL_CLOSED
                   : ADM_TLS_FAIL_OTHER;
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (ERR_GET_REASON(err) == reasons[i].reason)
            return reasons[i].fail;
    return ADM_TLS_FAIL_OTHER;
}

static json_t *strings(char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static void rfc3339(int64_t t, char *buf, size_t cap)
{
    time_t tt = (time_t)t;
    struct tm tm;
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
}

static json_t *cert_json(const struct adm_listener *l, size_t index, const struct adm_tls_cert *c)
{
    char fp[65], na[32];

    for (int i = 0; i < 32; i++)
        snprintf(fp + 2 * i, 3, "%02x", c->sha256[i]);
    rfc3339(c->not_after, na, sizeof(na));
    return json_pack("{s:s,s:I,s:o,s:b,s:o,s:s,s:s,s:s,s:I,s:s,s:i,s:s,s:s?}", "listener",
                     l->addr.text, "index", (json_int_t)index, "hosts",
                     strings(c->hosts, c->nhosts), "default", c->nhosts == 0, "names",
                     strings(c->names, c->nnames), "subject", c->subject ? c->subject : "",
                     "issuer", c->issuer ? c->issuer : "", "not_after", na, "not_after_unix",
                     (json_int_t)c->not_after, "key_type", adm_tls_key_name(c->key_type),
                     "key_bits", (int)c->key_bits, "sha256", fp, "file", c->cert_file);
}

json_t *adm_tls_certificates_json(const struct adm_config *cfg)
{
    json_t *all = json_array();

    for (size_t i = 0; all && i < cfg->nlisteners; i++) {
        const struct adm_tls_listener *t = cfg->listeners[i].tls;
        for (size_t k = 0; t && k < t->ncerts; k++) {
            json_t *c = cert_json(&cfg->listeners[i], k, &t->certs[k]);
            if (!c || json_array_append_new(all, c) < 0) {
                json_decref(all);
                return NULL;
            }
        }
    }
    return all ? json_pack("{s:o}", "certificates", all) : NULL;
}

/* The names a certificate is listed under: its hosts, or for a default
 * certificate the names it carries. */
static char *const *listed(const struct adm_tls_cert *c, size_t *n)
{
    *n = c->nhosts ? c->nhosts : c->nnames;
    return c->nhosts ? c->hosts : c->names;
}

static int serves(const struct adm_tls_cert *c, const char *name)
{
    size_t n;
    char *const *v = listed(c, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], name))
            return 1;
    return 0;
}

/* The earliest expiry among the certificates serving <name> on <t>. */
static int64_t expiry_of(const struct adm_tls_listener *t, const char *name)
{
    int64_t best = 0;
    for (size_t k = 0; k < t->ncerts; k++)
        if (serves(&t->certs[k], name) && (!best || t->certs[k].not_after < best))
            best = t->certs[k].not_after;
    return best;
}

/* One line per (listener, name): a default certificate under the names it
 * carries, an RSA and an ECDSA certificate for one name as the earlier of
 * the two. */
static void expiry_lines(struct evbuffer *b, const struct adm_listener *l)
{
    const struct adm_tls_listener *t = l->tls;
    for (size_t k = 0; k < t->ncerts; k++) {
        size_t n;
        char *const *v = listed(&t->certs[k], &n);
        for (size_t i = 0; i < n; i++) {
            int seen = 0; /* printed already for an earlier certificate */
            for (size_t j = 0; j < k && !seen; j++)
                seen = serves(&t->certs[j], v[i]);
            if (!seen)
                evbuffer_add_printf(b,
                                    "switchyard_tls_certificate_expiry_timestamp_seconds{listener="
                                    "\"%s\",name=\"%s\"} %lld\n",
                                    l->addr.text, v[i], (long long)expiry_of(t, v[i]));
        }
    }
}

void adm_tls_metrics(struct evbuffer *b, const struct adm_config *cfg,
                     const struct adm_gw_stats *gs)
{
    evbuffer_add_printf(b, "# HELP switchyard_tls_certificate_expiry_timestamp_seconds When a "
                           "listener certificate expires (Unix time), by listener and name.\n"
                           "# TYPE switchyard_tls_certificate_expiry_timestamp_seconds gauge\n");
    for (size_t i = 0; i < cfg->nlisteners; i++)
        if (cfg->listeners[i].tls)
            expiry_lines(b, &cfg->listeners[i]);
    evbuffer_add_printf(b, "# HELP switchyard_tls_handshakes_total Completed client TLS "
                           "handshakes, by version and whether the session was resumed.\n"
                           "# TYPE switchyard_tls_handshakes_total counter\n");
    for (int v = 0; v < ADM_TLS_NVERSIONS; v++)
        for (int r = 0; r < 2; r++)
            evbuffer_add_printf(b,
                                "switchyard_tls_handshakes_total{version=\"%s\",resumed=\"%s\"} "
                                "%llu\n",
                                adm_tls_version_name((enum adm_tls_version)v), r ? "true" : "false",
                                (unsigned long long)gs->tls_handshakes[v][r]);
    evbuffer_add_printf(b, "# HELP switchyard_tls_handshake_failures_total Failed client TLS "
                           "handshakes, by reason.\n"
                           "# TYPE switchyard_tls_handshake_failures_total counter\n");
    for (int f = 0; f < ADM_TLS_NFAIL; f++)
        evbuffer_add_printf(b, "switchyard_tls_handshake_failures_total{reason=\"%s\"} %llu\n",
                            adm_tls_fail_name((enum adm_tls_fail)f),
                            (unsigned long long)gs->tls_failures[f]);
}

/*
 * tls_ctx.c - the OpenSSL contexts of a snapshot: one server SSL_CTX per TLS
 * listener, shared by every worker, and a client SSL_CTX per TLS upstream.
 *
 * Built on the admin thread when a snapshot is built; a listener whose TLS
 * definition is unchanged keeps its context (snapshot.c compares identities),
 * so its ticket keys survive the push.
 *
 * On the handshake path (the workers) nothing here takes a lock of its own or
 * writes memory another worker reads:
 * - certificates are grouped by name at build time; the client-hello
 *   callback reads the SNI, finds the group (exact name by binary search,
 *   then the one-label wildcard, then the default) and installs that group's
 *   RSA and ECDSA certificates on the connection; OpenSSL then serves the one
 *   the client's signature algorithms allow, ECDSA first (server preference).
 *   The group's session id context is set too: it is a digest of the
 *   listener's client_auth settings and of the group's certificates, so that
 *   a session never resumes across a client-authentication boundary
 *   (nginx's CVE-2025-23419);
 * - ALPN selects from the listener's protocols, h2 first (RFC 9113 9.2's
 *   TLS 1.2 cipher rules permitting), then http/1.1 and http/1.0: a context
 *   is built for one set of protocols, so a push that changes them builds
 *   a new context (keeping the old one's ticket keys) and only connections
 *   accepted after it see the change;
 * - there is no session cache (SSL_SESS_CACHE_OFF): resumption is by
 *   tickets only, for TLS 1.2 and 1.3;
 * - ticket keys are derived from a per-context master secret and the
 *   rotation period number (HMAC-SHA256), so every worker computes the same
 *   keys without sharing mutable state; each worker caches the keys it
 *   derived in thread-local slots. A ticket sealed in period p opens in p and
 *   p+1 (then it is renewed), and never after. The master is random, unless
 *   the listener has a ticket_secret: then it derives from the secret and the
 *   client_auth settings (master_from_secret()), so that every node and
 *   process of a fleet with that secret opens the others' tickets, since
 *   periods are wall-clock time;
 * - a listener without certificates (a fleet node before the fleet has any)
 *   completes no handshake: every client hello gets unrecognized_name, as
 *   with nginx's ssl_reject_handshake.
 */
#define _DEFAULT_SOURCE

#include "admin/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* Mozilla's "intermediate" profile (v5.7) */
#define CIPHERS_TLS12                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"                                   \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
#define CIPHERS_TLS13 "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define GROUPS "X25519:P-256:P-384"

/* What a listener's ALPN selects, in preference order: the first of these
 * that the listener's protocols allow and the client offers (the server's
 * preference, as nginx, HAProxy and h2o pick, whatever the client's order).
 * A listener with h1 whose client offers none of them goes on without ALPN
 * (RFC 7301 allows it; nginx does so too), and the client speaks HTTP/1.x as
 * it would without ALPN: `curl -0` offers http/1.0 alone. A listener without
 * h1 (["h2"]) has nothing to fall back to: a client that offers no h2 it
 * may have, or no ALPN at all, gets RFC 7301's fatal no_application_protocol
 * alert, which names the problem at the handshake instead of HTTP/1.1 bytes
 * meeting an HTTP/2 connection. */
static const struct {
    const char *name;
    unsigned char len;
    unsigned proto; /* ADM_PROTO_* */
} alpn_select[] = {
    {"h2", 2, ADM_PROTO_H2},
    {"http/1.1", 8, ADM_PROTO_H1},
    {"http/1.0", 8, ADM_PROTO_H1},
};

/* What an upstream connection offers (wire format): HTTP/1.1, or h2 alone
 * for a pool of protocol "h2", which has no HTTP/1.1 to fall back to (a
 * server that selects nothing fails the connection, not the request's
 * bytes). */
static const unsigned char alpn_offer_h1[] = "\x08http/1.1";
static const unsigned char alpn_offer_h2[] = "\x02h2";

#define MAX_NAME 253

/* ---- once per process ---- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -1;
static int ctx_idx = -1, ssl_idx = -1, alpn_idx = -1;
static EVP_CIPHER *ticket_cipher; /* AES-256-CBC, fetched once */
static char ticket_digest[] = "SHA256";

static void free_ctx_data(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp);

static void init_run(void)
{
    ctx_idx = SSL_CTX_get_ex_new_index(0, "switchyard tls ctx", NULL, NULL, free_ctx_data);
    ssl_idx = SSL_get_ex_new_index(0, "switchyard tls group", NULL, NULL, NULL);
    alpn_idx = SSL_get_ex_new_index(0, "switchyard h2 refused by cipher", NULL, NULL, NULL);
    ticket_cipher = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
    init_rc = ctx_idx >= 0 && ssl_idx >= 0 && alpn_idx >= 0 && ticket_cipher ? 0 : -1;
}

int adm_tls_init(void)
{
    pthread_once(&init_once, init_run);
    return init_rc;
}

/* ---- the context ---- */

struct gcert {
    X509 *x509;
    EVP_PKEY *pkey;
    STACK_OF(X509) * chain;
};

/* The certificates of one name: at most one per key type. */
struct group {
    char *name;        /* "api.example.com", "*.example.com", or NULL for the default */
    struct gcert c[2]; /* by enum adm_tls_key; x509 NULL when absent */
    unsigned char sid[SSL_MAX_SID_CTX_LENGTH];
};

/* A name -> group entry; the wildcard table holds "example.com" for
 * "*.example.com". */
struct nref {
    const char *name;
    int group;
};

struct adm_tls_ctx {
    SSL_CTX *ssl;
    unsigned char id[ADM_TLS_ID_LEN];
    uint64_t uid; /* unique per context: the key of the workers' ticket-key caches */
    struct group *groups;
    size_t ngroups;
    struct nref *exact, *wild;
    size_t nexact, nwild;
    int dflt; /* group for an unknown or absent SNI, -1: none */
    int client_auth;
    unsigned protocols; /* the listener's ADM_PROTO_* bits: what ALPN may select */
    unsigned rotation_s;
    unsigned char master[32]; /* ticket keys derive from it */
};

static _Atomic uint64_t next_uid = 1;

static void group_clear(struct group *g)
{
    free(g->name);
    for (int k = 0; k < 2; k++) {
        X509_free(g->c[k].x509);
        EVP_PKEY_free(g->c[k].pkey);
        sk_X509_pop_free(g->c[k].chain, X509_free);
    }
}

static void ctx_data_free(struct adm_tls_ctx *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->ngroups; i++)
        group_clear(&c->groups[i]);
    free(c->groups);
    free(c->exact);
    free(c->wild);
    OPENSSL_cleanse(c->master, sizeof(c->master));
    free(c);
}

/* The context's data goes with its SSL_CTX, whichever holder lets go last:
 * a snapshot, or a connection still open after every snapshot moved on. */
static void free_ctx_data(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                          void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    ctx_data_free(ptr);
}

static int nref_cmp(const void *a, const void *b)
{
    return strcmp(((const struct nref *)a)->name, ((const struct nref *)b)->name);
}

static int group_find(const struct adm_tls_ctx *c, const char *name)
{
    for (size_t i = 0; i < c->ngroups; i++)
        if ((!name && !c->groups[i].name) ||
            (name && c->groups[i].name && !strcmp(name, c->groups[i].name)))
            return (int)i;
    return -1;
}

/* Adds <cert> to the group of <name> (NULL: the default), creating it. */
static int group_add(struct adm_tls_ctx *c, const char *name, const struct adm_tls_cert *cert)
{
    int g = group_find(c, name);
    struct gcert *gc;

    if (g < 0) {
        struct group *v = realloc(c->groups, (c->ngroups + 1) * sizeof(*v));
        if (!v)
            return -1;
        c->groups = v;
        memset(&v[c->ngroups], 0, sizeof(v[0]));
        if (name && !(v[c->ngroups].name = strdup(name)))
            return -1;
        g = (int)c->ngroups++;
    }
    gc = &c->groups[g].c[cert->key_type];
    if (gc->x509) /* the validator refuses this; keep the first */
        return 0;
    if (!(gc->chain = X509_chain_up_ref(cert->chain)))
        return -1;
    X509_up_ref(cert->x509);
    gc->x509 = cert->x509;
    EVP_PKEY_up_ref(cert->pkey);
    gc->pkey = cert->pkey;
    return 0;
}

/* The session id context of group <g>: client_auth settings and CAs, and
 * the group's certificates. */
static int group_sid(const struct adm_tls_listener *t, struct group *g)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char buf[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    int mode = (int)t->client_mode, ok;

    ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
         EVP_DigestUpdate(md, "switchyard sid", 14) && EVP_DigestUpdate(md, &mode, sizeof(mode));
    for (int i = 0; ok && t->client_cas && i < sk_X509_num(t->client_cas); i++)
        ok = X509_digest(sk_X509_value(t->client_cas, i), EVP_sha256(), buf, &n) &&
             EVP_DigestUpdate(md, buf, n);
    for (int k = 0; ok && k < 2; k++)
        if (g->c[k].x509)
            ok = X509_digest(g->c[k].x509, EVP_sha256(), buf, &n) && EVP_DigestUpdate(md, buf, n);
    ok = ok && EVP_DigestFinal_ex(md, buf, &n) && n >= sizeof(g->sid);
    if (ok)
        memcpy(g->sid, buf, sizeof(g->sid));
    EVP_MD_CTX_free(md);
    return ok ? 0 : -1;
}

static int index_names(struct adm_tls_ctx *c)
{
    c->exact = calloc(c->ngroups ? c->ngroups : 1, sizeof(*c->exact));
    c->wild = calloc(c->ngroups ? c->ngroups : 1, sizeof(*c->wild));
    if (!c->exact || !c->wild)
        return -1;
    c->dflt = group_find(c, NULL);
    for (size_t i = 0; i < c->ngroups; i++) {
        const char *n = c->groups[i].name;
        if (!n)
            continue;
        if (n[0] == '*')
            c->wild[c->nwild++] = (struct nref){n + 2, (int)i};
        else
            c->exact[c->nexact++] = (struct nref){n, (int)i};
    }
    /* without a default certificate the first one serves unknown names */
    if (c->dflt < 0 && c->ngroups)
        c->dflt = 0;
    qsort(c->exact, c->nexact, sizeof(*c->exact), nref_cmp);
    qsort(c->wild, c->nwild, sizeof(*c->wild), nref_cmp);
    return 0;
}

static int lookup(const struct nref *v, size_t n, const char *name)
{
    struct nref key = {name, 0};
    const struct nref *r = n ? bsearch(&key, v, n, sizeof(*v), nref_cmp) : NULL;
    return r ? r->group : -1;
}

int adm_tls_ctx_group(const struct adm_tls_ctx *c, const char *host, size_t len)
{
    char low[MAX_NAME + 1];
    const char *dot;
    int g;

    if (len && host[len - 1] == '.') /* a fully qualified "example.com." */
        len--;
    if (!len || len > MAX_NAME)
        return c->dflt;
    for (size_t i = 0; i < len; i++)
        low[i] = (host[i] >= 'A' && host[i] <= 'Z') ? (char)(host[i] - 'A' + 'a') : host[i];
    low[len] = '\0';
    if ((g = lookup(c->exact, c->nexact, low)) >= 0)
        return g;
    if ((dot = memchr(low, '.', len)) && dot != low &&
        (g = lookup(c->wild, c->nwild, dot + 1)) >= 0)
        return g;
    return c->dflt;
}

/* ---- handshake callbacks (workers) ---- */

/* The host_name of a server_name extension body, or NULL. */
static const char *sni_name(const unsigned char *p, size_t len, size_t *nlen)
{
    size_t list, n;

    if (len < 5)
        return NULL;
    list = (size_t)p[0] << 8 | p[1];
    if (list + 2 != len || p[2] != TLSEXT_NAMETYPE_host_name)
        return NULL;
    n = (size_t)p[3] << 8 | p[4];
    if (n + 5 > len || !n)
        return NULL;
    *nlen = n;
    return (const char *)p + 5;
}

static int client_hello_cb(SSL *ssl, int *al, void *arg)
{
    const struct adm_tls_ctx *c = arg;
    const unsigned char *ext;
    const char *name;
    size_t len, nlen = 0;
    int g = c->dflt;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &len) &&
        (name = sni_name(ext, len, &nlen)))
        g = adm_tls_ctx_group(c, name, nlen);
    if (g < 0) { /* no default and no match, or no certificate at all */
        *al = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* without h1 a client must negotiate h2 (alpn_cb); one that offers no
     * ALPN at all gets the same alert, counted as an ALPN failure */
    if (!(c->protocols & ADM_PROTO_H1) &&
        !SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &ext,
                                   &len)) {
        ERR_raise(ERR_LIB_SSL, SSL_R_NO_APPLICATION_PROTOCOL);
        *al = SSL_AD_NO_APPLICATION_PROTOCOL;
        return SSL_CLIENT_HELLO_ERROR;
    }
    const struct group *grp = &c->groups[g];
    for (int k = 0; k < 2; k++) {
        const struct gcert *gc = &grp->c[k];
        if (gc->x509 && SSL_use_cert_and_key(ssl, gc->x509, gc->pkey, gc->chain, 1) != 1)
            goto fail;
    }
    if (SSL_set_session_id_context(ssl, grp->sid, sizeof(grp->sid)) != 1)
        goto fail;
    SSL_set_ex_data(ssl, ssl_idx, (void *)(intptr_t)(g + 1));
    return SSL_CLIENT_HELLO_SUCCESS;
fail:
    *al = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
}

/* Whether h2 may run over the handshake of <ssl> (RFC 9113 9.2): TLS 1.3
 * always; TLS 1.2 only with an ephemeral key exchange (ECDHE, DHE) and an
 * AEAD cipher (GCM, CHACHA20-POLY1305, CCM), which is what the block list of
 * 9.2.2 leaves. Called from the ALPN callback, when the version and the
 * cipher are chosen but not yet current (SSL_get_pending_cipher). */
static int h2_cipher_ok(const SSL *ssl)
{
    const SSL_CIPHER *ci;
    int kx;

    if (SSL_version(ssl) >= TLS1_3_VERSION)
        return 1;
    if (!(ci = SSL_get_pending_cipher(ssl)))
        return 0;
    kx = SSL_CIPHER_get_kx_nid(ci);
    return (kx == NID_kx_ecdhe || kx == NID_kx_dhe || kx == NID_kx_ecdhe_psk ||
            kx == NID_kx_dhe_psk) &&
           SSL_CIPHER_is_aead(ci);
}

/* Whether the client's list <in> (<inlen> bytes, wire format: OpenSSL
 * checked its framing) names <name> (<len> bytes). */
static int alpn_offered(const unsigned char *in, unsigned inlen, const char *name, unsigned len)
{
    for (unsigned p = 0; p < inlen; p += 1u + in[p]) {
        if (p + 1u + in[p] > inlen)
            break;
        if (in[p] == len && !memcmp(in + p + 1, name, len))
            return 1;
    }
    return 0;
}

/* The first protocol of alpn_select that the listener's protocols allow
 * and the client offers; h2 only when the cipher allows it (else the next
 * one, and adm_tls_h2_refused_by_cipher() says why). With nothing
 * selected: no ALPN at all (SSL_TLSEXT_ERR_NOACK) on a listener with h1,
 * the fatal no_application_protocol on one without. */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    const struct adm_tls_ctx *c = arg;

    for (size_t i = 0; i < sizeof(alpn_select) / sizeof(alpn_select[0]); i++) {
        if (!(c->protocols & alpn_select[i].proto) ||
            !alpn_offered(in, inlen, alpn_select[i].name, alpn_select[i].len))
            continue;
        if (alpn_select[i].proto == ADM_PROTO_H2 && !h2_cipher_ok(ssl)) {
            SSL_set_ex_data(ssl, alpn_idx, (void *)1);
            continue;
        }
        *out = (const unsigned char *)alpn_select[i].name;
        *outlen = alpn_select[i].len;
        return SSL_TLSEXT_ERR_OK;
    }
    return c->protocols & ADM_PROTO_H1 ? SSL_TLSEXT_ERR_NOACK : SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* The ticket keys of one rotation period. */
struct tkey {
    uint64_t uid, period;
    unsigned char name[16];
    unsigned char aes[32];
    unsigned char mac[32];
};

#define TKEY_SLOTS 8
static _Thread_local struct tkey tkeys[TKEY_SLOTS];

static int derive(const struct adm_tls_ctx *c, uint64_t period, char what, unsigned char *out,
                  size_t n)
{
    unsigned char msg[9], md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;

    msg[0] = (unsigned char)what;
    for (int i = 0; i < 8; i++)
        msg[1 + i] = (unsigned char)(period >> (8 * i));
    if (!HMAC(EVP_sha256(), c->master, sizeof(c->master), msg, sizeof(msg), md, &mdlen) ||
        mdlen < n)
        return -1;
    memcpy(out, md, n);
    OPENSSL_cleanse(md, sizeof(md));
    return 0;
}

/* The keys of <period>, from this worker's cache or derived into it. */
static const struct tkey *tkey_get(const struct adm_tls_ctx *c, uint64_t period)
{
    struct tkey *k = &tkeys[(c->uid * 2 + period) % TKEY_SLOTS];

    if (k->uid == c->uid && k->period == period)
        return k;
    k->uid = 0;
    if (derive(c, period, 'n', k->name, sizeof(k->name)) < 0 ||
        derive(c, period, 'a', k->aes, sizeof(k->aes)) < 0 ||
        derive(c, period, 'm', k->mac, sizeof(k->mac)) < 0)
        return NULL;
    k->uid = c->uid;
    k->period = period;
    return k;
}

static int ticket_mac(EVP_MAC_CTX *hctx, const struct tkey *k)
{
    OSSL_PARAM params[3];

    params[0] =
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, (void *)k->mac, sizeof(k->mac));
    params[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, ticket_digest, 0);
    params[2] = OSSL_PARAM_construct_end();
    return EVP_MAC_CTX_set_params(hctx, params);
}

static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH],
                     EVP_CIPHER_CTX *cctx, EVP_MAC_CTX *hctx, int enc)
{
    const struct adm_tls_ctx *c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_idx);
    uint64_t period = (uint64_t)time(NULL) / c->rotation_s;
    const struct tkey *k;

    if (enc) {
        if (!(k = tkey_get(c, period)) || RAND_bytes(iv, 16) != 1 ||
            !EVP_EncryptInit_ex2(cctx, ticket_cipher, k->aes, iv, NULL) || !ticket_mac(hctx, k))
            return -1;
        memcpy(name, k->name, 16);
        return 1;
    }
    for (uint64_t back = 0; back < 2 && back <= period; back++) {
        if (!(k = tkey_get(c, period - back)))
            return -1;
        if (memcmp(name, k->name, 16))
            continue;
        if (!ticket_mac(hctx, k) || !EVP_DecryptInit_ex2(cctx, ticket_cipher, k->aes, iv, NULL))
            return -1;
        return back ? 2 : 1; /* a previous period's ticket is renewed */
    }
    return 0; /* unknown or expired key: a full handshake */
}

/* ---- building ---- */

/* The label of master_from_secret(): a new derivation gets a new label. */
#define TICKET_MASTER_LABEL "switchyard ticket master v1"

static int digest_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

/* The SHA-256 of the set <cas>: of their SHA-256 fingerprints in sorted
 * order, so that a bundle written in another order is the same set. */
static int ca_set_digest(const STACK_OF(X509) * cas, unsigned char out[32])
{
    int n = sk_X509_num(cas);
    unsigned char(*fps)[32] = calloc(n > 0 ? (size_t)n : 1, sizeof(*fps));
    unsigned len = 0;
    int ok = fps != NULL;

    for (int i = 0; ok && i < n; i++)
        ok = X509_digest(sk_X509_value(cas, i), EVP_sha256(), fps[i], &len) && len == 32;
    if (ok) {
        qsort(fps, (size_t)n, sizeof(*fps), digest_cmp);
        ok = EVP_Digest(fps, (size_t)n * sizeof(*fps), out, &len, EVP_sha256(), NULL) && len == 32;
    }
    free(fps);
    return ok ? 0 : -1;
}

/* The ticket master of a listener with a ticket_secret:
 * HMAC-SHA256(key = the secret, TICKET_MASTER_LABEL | a byte for the
 * client_auth mode | with client auth, the SHA-256 of the client CA set).
 * Nodes with the same secret and client_auth share it; a listener with other
 * client_auth settings gets another, so that a session never crosses a
 * client-authentication boundary (the session id context says the same
 * within one context). The mode bytes are part of the format: 0 off, 1
 * require, 2 optional. */
static int master_from_secret(const struct adm_tls_listener *t, unsigned char out[32])
{
    unsigned char msg[sizeof(TICKET_MASTER_LABEL) - 1 + 1 + 32];
    size_t n = sizeof(TICKET_MASTER_LABEL) - 1;
    unsigned len = 0;

    memcpy(msg, TICKET_MASTER_LABEL, n);
    msg[n++] = t->client_mode == ADM_TLS_CLIENT_REQUIRE    ? 1
               : t->client_mode == ADM_TLS_CLIENT_OPTIONAL ? 2
                                                           : 0;
    if (t->client_mode != ADM_TLS_CLIENT_OFF) {
        if (ca_set_digest(t->client_cas, msg + n) < 0)
            return -1;
        n += 32;
    }
    if (!HMAC(EVP_sha256(), t->ticket_secret, (int)strlen(t->ticket_secret), msg, n, out, &len) ||
        len != 32)
        return -1;
    return 0;
}

/* The master secret of a new context: from the ticket_secret, or random. */
static int ticket_master(const struct adm_tls_listener *t, unsigned char out[32])
{
    if (t->ticket_secret)
        return master_from_secret(t, out);
    return RAND_priv_bytes(out, 32) == 1 ? 0 : -1;
}

static int set_client_auth(SSL_CTX *ssl, const struct adm_tls_listener *t)
{
    X509_STORE *store = SSL_CTX_get_cert_store(ssl);
    STACK_OF(X509_NAME) *names = sk_X509_NAME_new_null();

    if (!names)
        return -1;
    for (int i = 0; i < sk_X509_num(t->client_cas); i++) {
        X509 *ca = sk_X509_value(t->client_cas, i);
        X509_NAME *n = X509_NAME_dup(X509_get_subject_name(ca));
        if (!X509_STORE_add_cert(store, ca) || !n || !sk_X509_NAME_push(names, n)) {
            X509_NAME_free(n);
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            return -1;
        }
    }
    SSL_CTX_set_client_CA_list(ssl, names);
    SSL_CTX_set_verify(
        ssl,
        SSL_VERIFY_PEER |
            (t->client_mode == ADM_TLS_CLIENT_REQUIRE ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        NULL);
    return 0;
}

/* The settings every context of ours shares. */
static int common_settings(SSL_CTX *ssl, int min_version)
{
    SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return SSL_CTX_set_min_proto_version(ssl, min_version) == 1 &&
                   SSL_CTX_set_max_proto_version(ssl, TLS1_3_VERSION) == 1 &&
                   SSL_CTX_set_cipher_list(ssl, CIPHERS_TLS12) == 1 &&
                   SSL_CTX_set_ciphersuites(ssl, CIPHERS_TLS13) == 1 &&
                   SSL_CTX_set1_groups_list(ssl, GROUPS) == 1
               ? 0
               : -1;
}

static const char *fail_reason(char *why, size_t cap, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(why, cap, "%s%s%s", what, r ? ": " : "", r ? r : "");
    ERR_clear_error();
    return why;
}

struct adm_tls_ctx *adm_tls_ctx_new(const struct adm_tls_listener *t, unsigned protocols, char *why,
                                    size_t cap)
{
    struct adm_tls_ctx *c;
    SSL_CTX *ssl;

    if (adm_tls_init() < 0) {
        fail_reason(why, cap, "OpenSSL lacks AES-256-CBC");
        return NULL;
    }
    if (!(c = calloc(1, sizeof(*c)))) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    memcpy(c->id, t->id, sizeof(c->id));
    c->uid = atomic_fetch_add(&next_uid, 1);
    c->rotation_s = t->ticket_rotation_s ? t->ticket_rotation_s : 43200;
    c->client_auth = t->client_mode != ADM_TLS_CLIENT_OFF;
    c->protocols = protocols;
    for (size_t i = 0; i < t->ncerts; i++) {
        const struct adm_tls_cert *cert = &t->certs[i];
        if (!cert->nhosts && group_add(c, NULL, cert) < 0)
            goto fail_data;
        for (size_t h = 0; h < cert->nhosts; h++)
            if (group_add(c, cert->hosts[h], cert) < 0)
                goto fail_data;
    }
    for (size_t i = 0; i < c->ngroups; i++)
        if (group_sid(t, &c->groups[i]) < 0)
            goto fail_data;
    if (index_names(c) < 0 || ticket_master(t, c->master) < 0)
        goto fail_data;

    if (!(ssl = SSL_CTX_new(TLS_server_method()))) {
        fail_reason(why, cap, "cannot create an SSL_CTX");
        ctx_data_free(c);
        return NULL;
    }
    /* from here on the SSL_CTX owns <c> */
    if (!SSL_CTX_set_ex_data(ssl, ctx_idx, c)) {
        ctx_data_free(c);
        SSL_CTX_free(ssl);
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    c->ssl = ssl;
    if (common_settings(ssl, t->min_version) < 0)
        goto fail_ssl;
    SSL_CTX_set_dh_auto(ssl, 1);
    SSL_CTX_set_client_hello_cb(ssl, client_hello_cb, c);
    SSL_CTX_set_alpn_select_cb(ssl, alpn_cb, c);
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
    if (c->dflt >= 0 && SSL_CTX_set_session_id_context(ssl, c->groups[c->dflt].sid,
                                                       sizeof(c->groups[c->dflt].sid)) != 1)
        goto fail_ssl;
    if (t->session_tickets) {
        SSL_CTX_set_timeout(ssl, (long)c->rotation_s * 2);
        if (SSL_CTX_set_tlsext_ticket_key_evp_cb(ssl, ticket_cb) != 1)
            goto fail_ssl;
    } else {
        SSL_CTX_set_options(ssl, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ssl, 0);
    }
    if (c->client_auth && set_client_auth(ssl, t) < 0)
        goto fail_ssl;
    return c;
fail_ssl:
    fail_reason(why, cap, "cannot set up the SSL_CTX");
    SSL_CTX_free(ssl); /* frees <c> too */
    return NULL;
fail_data:
    ctx_data_free(c);
    snprintf(why, cap, "out of memory");
    return NULL;
}

struct adm_tls_ctx *adm_tls_ctx_ref(struct adm_tls_ctx *c)
{
    SSL_CTX_up_ref(c->ssl);
    return c;
}

void adm_tls_ctx_unref(struct adm_tls_ctx *c)
{
    if (c)
        SSL_CTX_free(c->ssl);
}

SSL_CTX *adm_tls_ctx_ssl(const struct adm_tls_ctx *c)
{
    return c->ssl;
}

const unsigned char *adm_tls_ctx_id(const struct adm_tls_ctx *c)
{
    return c->id;
}

int adm_tls_ctx_client_auth(const struct adm_tls_ctx *c)
{
    return c->client_auth;
}

unsigned adm_tls_ctx_protocols(const struct adm_tls_ctx *c)
{
    return c->protocols;
}

void adm_tls_ctx_share_tickets(struct adm_tls_ctx *c, const struct adm_tls_ctx *from)
{
    memcpy(c->master, from->master, sizeof(c->master));
}

void adm_tls_ctx_ticket_master(const struct adm_tls_ctx *c, unsigned char out[32])
{
    memcpy(out, c->master, sizeof(c->master));
}

void adm_tls_ctx_set_ticket_master(struct adm_tls_ctx *c, const unsigned char in[32])
{
    memcpy(c->master, in, sizeof(c->master));
}

int adm_tls_alpn_is_h2(const SSL *ssl)
{
    const unsigned char *p;
    unsigned len = 0;

    SSL_get0_alpn_selected(ssl, &p, &len);
    return len == 2 && !memcmp(p, "h2", 2);
}

int adm_tls_h2_refused_by_cipher(const SSL *ssl)
{
    return SSL_get_ex_data(ssl, alpn_idx) != NULL;
}

int adm_tls_ssl_group(const SSL *ssl)
{
    return (int)(intptr_t)SSL_get_ex_data(ssl, ssl_idx) - 1;
}

const struct adm_tls_ctx *adm_tls_ssl_ctx(const SSL *ssl)
{
    return SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ctx_idx);
}

/* ---- upstreams ---- */

SSL_CTX *adm_tls_client_ctx_new(const struct adm_tls_upstream *t, int h2, char *why, size_t cap)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_client_method());
    const unsigned char *offer = h2 ? alpn_offer_h2 : alpn_offer_h1;
    unsigned offer_len = h2 ? sizeof(alpn_offer_h2) - 1 : sizeof(alpn_offer_h1) - 1;

    if (!ssl) {
        fail_reason(why, cap, "cannot create an SSL_CTX");
        return NULL;
    }
    if (common_settings(ssl, TLS1_2_VERSION) < 0 ||
        SSL_CTX_set_alpn_protos(ssl, offer, offer_len) != 0)
        goto fail;
    SSL_CTX_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* sessions are kept by the gateway, one per worker and server */
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    if (t->verify) {
        SSL_CTX_set_verify(ssl, SSL_VERIFY_PEER, NULL);
        if (t->cas) {
            X509_STORE *store = SSL_CTX_get_cert_store(ssl);
            for (int i = 0; i < sk_X509_num(t->cas); i++)
                if (!X509_STORE_add_cert(store, sk_X509_value(t->cas, i)))
                    goto fail;
        } else if (SSL_CTX_set_default_verify_paths(ssl) != 1) {
            goto fail;
        }
    } else {
        SSL_CTX_set_verify(ssl, SSL_VERIFY_NONE, NULL);
    }
    return ssl;
fail:
    fail_reason(why, cap, "cannot set up the upstream SSL_CTX");
    SSL_CTX_free(ssl);
    return NULL;
}

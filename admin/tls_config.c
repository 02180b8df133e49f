/*
 * tls_config.c - the "tls" objects of listeners and upstreams: parsing and
 * validation.
 *
 * config.c hands each "tls" value here with its JSON pointer. Everything a
 * handshake would trip over is found now, at push time, and reported at the
 * pointer of the value at fault: unreadable or unparsable files (cert, key,
 * ca_file), inline PEM that does not parse, a key that does not match its
 * certificate, an expired certificate, a host its certificate does not cover,
 * a second default certificate, two certificates of one key type for one
 * name, a TLS version below 1.2, a ticket_secret too short or set with
 * tickets off. An empty "certificates" is refused too, except on a fleet
 * node (ADM_TLS_FLEET_NODE), whose certificates come from the fleet and may
 * not exist yet. The parsed OpenSSL objects stay with the result, so that
 * the context builder (tls_ctx.c) and GET /certificates use them as they
 * are.
 *
 * Each result carries an identity (struct adm_tls_listener.id): the SHA-256
 * of every setting (the ticket_secret too) and of the bytes of every
 * certificate, key and CA file, never of a file's name. A push whose
 * listener TLS is the same by that measure keeps its SSL_CTX; a certificate
 * file rewritten in place is a change.
 */
#define _DEFAULT_SOURCE

#include "admin/tls.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define MAX_PEM (1u << 20) /* one certificate, key or CA file */
#define MAX_HOST 253

/* ------------------------------------------------------------------------ */
/* the parse context: errors at JSON pointers under the "tls" value         */

struct tx {
    struct adm_errors *errs;
    char path[1024];
    size_t plen;
    int nerr;
    int nomem;
    unsigned flags; /* ADM_TLS_FLEET_NODE */
};

/* Appends "/<key>" (RFC 6901 escaped) or "/<index>"; returns the mark for
 * pop(). A path that would not fit is cut, never overflowed. */
static size_t push_key(struct tx *t, const char *key)
{
    size_t mark = t->plen;
    char *p = t->path + t->plen, *end = t->path + sizeof(t->path) - 3;

    *p++ = '/';
    for (; *key && p < end; key++) {
        if (*key == '~' || *key == '/') {
            *p++ = '~';
            *p++ = *key == '~' ? '0' : '1';
        } else {
            *p++ = *key;
        }
    }
    *p = '\0';
    t->plen = (size_t)(p - t->path);
    return mark;
}

static size_t push_index(struct tx *t, size_t i)
{
    size_t mark = t->plen;
    int n = snprintf(t->path + t->plen, sizeof(t->path) - t->plen, "/%zu", i);
    if (n > 0)
        t->plen += (size_t)n < sizeof(t->path) - t->plen ? (size_t)n : 0;
    t->path[t->plen] = '\0';
    return mark;
}

static void pop(struct tx *t, size_t mark)
{
    t->plen = mark;
    t->path[mark] = '\0';
}

ADM_PRINTF(2, 3) static void err(struct tx *t, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    t->nerr++;
    if (adm_errors_add(t->errs, t->path, "%s", msg) < 0)
        t->nomem = 1;
}

ADM_PRINTF(3, 4) static void err_key(struct tx *t, const char *key, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t mark = push_key(t, key);
    err(t, "%s", msg);
    pop(t, mark);
}

static char *xstrdup(struct tx *t, const char *s)
{
    char *d = strdup(s);
    if (!d)
        t->nomem = 1;
    return d;
}

/* OpenSSL's reason for the last failure, into <buf>; the error queue is
 * emptied, so that it never leaks into a later call on this thread. */
static const char *ssl_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, cap, "%s", r ? r : fallback);
    ERR_clear_error();
    return buf;
}

/* Reports members of <obj> not in <keys>. */
static void check_keys(struct tx *t, const json_t *obj, const char *const *keys, size_t n)
{
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (i < n && strcmp(keys[i], key))
            i++;
        if (i == n) {
            size_t mark = push_key(t, key);
            err(t, "unknown key");
            pop(t, mark);
        }
    }
}

static int want_object(struct tx *t, const json_t *v)
{
    if (json_is_object(v))
        return 1;
    err(t, "expected an object");
    return 0;
}

/* The non-empty string member <key> of <obj>, NULL when absent or (after
 * reporting) not one. */
static const char *get_str(struct tx *t, const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return NULL;
    if (!json_is_string(v) || !json_string_length(v) ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        err_key(t, key, "expected a non-empty string without NUL characters");
        return NULL;
    }
    return json_string_value(v);
}

/* A boolean member, <dflt> when absent. */
static int get_bool(struct tx *t, const json_t *obj, const char *key, int dflt)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return dflt;
    if (!json_is_boolean(v)) {
        err_key(t, key, "expected a boolean");
        return dflt;
    }
    return json_is_true(v);
}

/* ------------------------------------------------------------------------ */
/* files, PEM and certificates                                              */

/* The bytes of <path> (at most MAX_PEM, NUL-terminated), or NULL with the
 * reason in <why>. The caller frees them. */
static char *read_file(const char *path, size_t *len, char *why, size_t cap)
{
    return adm_read_small_file(path, MAX_PEM, len, why, cap);
}

/* The bytes of a file member <fkey> or an inline member <ikey> of <obj>,
 * exactly one of them required; reported at the member's path. *<file> gets
 * a copy of the file name (NULL inline); *<at> the key used. NULL when
 * missing or unreadable. */
static char *get_pem(struct tx *t, const json_t *obj, const char *fkey, const char *ikey,
                     char **file, const char **at, size_t *len)
{
    const char *f = get_str(t, obj, fkey), *s = get_str(t, obj, ikey);
    char why[600];
    char *buf;

    *file = NULL;
    *at = f ? fkey : ikey;
    if (json_object_get(obj, fkey) && json_object_get(obj, ikey)) {
        err_key(t, ikey, "give either \"%s\" or \"%s\", not both", fkey, ikey);
        return NULL;
    }
    if (!f && !s) {
        if (!json_object_get(obj, fkey) && !json_object_get(obj, ikey))
            err_key(t, fkey, "missing (required: \"%s\" or \"%s\")", fkey, ikey);
        return NULL;
    }
    if (s) {
        *len = strlen(s);
        if (!(buf = xstrdup(t, s)))
            return NULL;
        return buf;
    }
    if (!(buf = read_file(f, len, why, sizeof(why)))) {
        err_key(t, fkey, "%s", why);
        return NULL;
    }
    if (!(*file = xstrdup(t, f))) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Every certificate in <pem>: the first into the result, the others into
 * *<rest> (NULL when <rest> is NULL: then they are dropped... never used so).
 * NULL with the reason in <why>. */
static X509 *parse_certs(const char *pem, size_t len, STACK_OF(X509) * *rest, char *why, size_t cap)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    X509 *first = NULL, *x;

    *rest = NULL;
    if (!b) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    first = PEM_read_bio_X509(b, NULL, NULL, NULL);
    if (!first) {
        ssl_reason(why, cap, "no certificate");
        snprintf(why + strlen(why), cap - strlen(why), " (no PEM certificate could be read)");
        goto out;
    }
    if (!(*rest = sk_X509_new_null()))
        goto fail;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        if (!sk_X509_push(*rest, x)) {
            X509_free(x);
            goto fail;
        }
    }
    /* the end of the input is the only acceptable way to stop */
    if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE) {
        ssl_reason(why, cap, "a bad certificate after the first");
        goto fail_quiet;
    }
    ERR_clear_error();
    goto out;
fail:
    snprintf(why, cap, "out of memory");
fail_quiet:
    sk_X509_pop_free(*rest, X509_free);
    *rest = NULL;
    X509_free(first);
    first = NULL;
out:
    BIO_free(b);
    return first;
}

/* No passphrase prompts: an encrypted key is a parse error. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

static EVP_PKEY *parse_key(const char *pem, size_t len, char *why, size_t cap)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *k;

    if (!b) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    k = PEM_read_bio_PrivateKey(b, NULL, no_password, NULL);
    if (!k) {
        ssl_reason(why, cap, "no key");
        snprintf(why + strlen(why), cap - strlen(why),
                 " (no PEM private key could be read; encrypted keys are not supported)");
    }
    BIO_free(b);
    return k;
}

static char *name_line(struct tx *t, const X509_NAME *n)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *s = NULL;
    long len;

    if (!b) {
        t->nomem = 1;
        return NULL;
    }
    X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253);
    len = BIO_get_mem_data(b, &data);
    if ((s = malloc((size_t)len + 1))) {
        memcpy(s, data, (size_t)len);
        s[len] = '\0';
    } else {
        t->nomem = 1;
    }
    BIO_free(b);
    return s;
}

static int add_name(struct tx *t, struct adm_tls_cert *c, const char *s, size_t len)
{
    char **v = realloc(c->names, (c->nnames + 1) * sizeof(*v));
    if (!v) {
        t->nomem = 1;
        return -1;
    }
    c->names = v;
    if (!(v[c->nnames] = strndup(s, len))) {
        t->nomem = 1;
        return -1;
    }
    for (char *p = v[c->nnames]; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    c->nnames++;
    return 0;
}

/* The DNS names of the certificate: its subjectAltName entries, else its
 * common name (what X509_check_host() falls back to as well). */
static void collect_names(struct tx *t, struct adm_tls_cert *c)
{
    GENERAL_NAMES *gens = X509_get_ext_d2i(c->x509, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; gens && i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
        if (g->type == GEN_DNS)
            add_name(t, c, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
                     (size_t)ASN1_STRING_length(g->d.dNSName));
    }
    GENERAL_NAMES_free(gens);
    if (c->nnames)
        return;
    const X509_NAME *subj = X509_get_subject_name(c->x509);
    int idx = X509_NAME_get_index_by_NID(subj, NID_commonName, -1);
    if (idx >= 0) {
        const ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, idx));
        add_name(t, c, (const char *)ASN1_STRING_get0_data(cn), (size_t)ASN1_STRING_length(cn));
    }
}

/* 1 when the certificate serves <host>: an exact name through OpenSSL's own
 * matching (wildcards included), a "*.x" host only through the same "*.x"
 * name. */
static int covers(const struct adm_tls_cert *c, const char *host)
{
    if (host[0] == '*') {
        for (size_t i = 0; i < c->nnames; i++)
            if (!strcasecmp(c->names[i], host))
                return 1;
        return 0;
    }
    return X509_check_host(c->x509, host, strlen(host), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
                           NULL) == 1;
}

/* ------------------------------------------------------------------------ */
/* identities                                                               */

static void id_add(EVP_MD_CTX *md, const void *p, size_t len)
{
    uint64_t n = len;
    EVP_DigestUpdate(md, &n, sizeof(n));
    EVP_DigestUpdate(md, p, len);
}

static void id_add_str(EVP_MD_CTX *md, const char *s)
{
    id_add(md, s ? s : "", s ? strlen(s) + 1 : 0);
}

static void id_add_int(EVP_MD_CTX *md, long long v)
{
    id_add(md, &v, sizeof(v));
}

/* ------------------------------------------------------------------------ */
/* hosts                                                                    */

static int valid_hostname(const char *h)
{
    size_t n = strlen(h), label = 0;
    if (!n || n > MAX_HOST || h[0] == '.' || h[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = h[i];
        if (ch == '.') {
            if (!label || h[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-'))
            return 0;
        if ((ch == '-' && !label) || ++label > 63)
            return 0;
    }
    return h[n - 1] != '-';
}

static void cert_hosts(struct tx *t, const json_t *v, struct adm_tls_cert *c)
{
    if (!json_is_array(v) || !json_array_size(v)) {
        err(t, "expected a non-empty array of host names (leave it out for the default "
               "certificate)");
        return;
    }
    if (!(c->hosts = calloc(json_array_size(v), sizeof(*c->hosts)))) {
        t->nomem = 1;
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        size_t mark = push_index(t, i);
        const char *s = json_string_value(json_array_get(v, i));
        char low[MAX_HOST + 3];
        size_t n = s ? strlen(s) : 0;
        if (!s || n > MAX_HOST + 2) {
            err(t, "expected a host name");
            pop(t, mark);
            continue;
        }
        for (size_t k = 0; k <= n; k++)
            low[k] = (s[k] >= 'A' && s[k] <= 'Z') ? (char)(s[k] - 'A' + 'a') : s[k];
        if (!valid_hostname(!strncmp(low, "*.", 2) ? low + 2 : low))
            err(t, "invalid host name \"%s\" (a name, or \"*.\" and a name for one label)", s);
        else if ((c->hosts[c->nhosts] = xstrdup(t, low)))
            c->nhosts++;
        pop(t, mark);
    }
}

/* ------------------------------------------------------------------------ */
/* one certificate                                                          */

static void cert_free(struct adm_tls_cert *c)
{
    free(c->cert_file);
    free(c->key_file);
    for (size_t i = 0; i < c->nhosts; i++)
        free(c->hosts[i]);
    free(c->hosts);
    X509_free(c->x509);
    sk_X509_pop_free(c->chain, X509_free);
    EVP_PKEY_free(c->pkey);
    free(c->subject);
    free(c->issuer);
    for (size_t i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->names);
}

static int64_t asn1_unix(const ASN1_TIME *at)
{
    struct tm tm;
    if (!ASN1_TIME_to_tm(at, &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

/* What a certificate says about itself, once parsed. */
static void cert_describe(struct tx *t, struct adm_tls_cert *c)
{
    unsigned n = 0;
    c->key_bits = (unsigned)EVP_PKEY_get_bits(c->pkey);
    c->not_after = asn1_unix(X509_get0_notAfter(c->x509));
    c->subject = name_line(t, X509_get_subject_name(c->x509));
    c->issuer = name_line(t, X509_get_issuer_name(c->x509));
    if (!X509_digest(c->x509, EVP_sha256(), c->sha256, &n))
        t->nomem = 1;
    collect_names(t, c);
}

static void parse_cert(struct tx *t, const json_t *v, struct adm_tls_cert *c, EVP_MD_CTX *md)
{
    static const char *const keys[] = {"cert", "key", "cert_pem", "key_pem", "hosts"};
    char why[600];
    const char *cat, *kat;
    size_t clen = 0, klen = 0;
    char *cpem, *kpem;
    int bad = t->nerr;

    if (!want_object(t, v))
        return;
    check_keys(t, v, keys, sizeof(keys) / sizeof(keys[0]));
    if (json_object_get(v, "hosts")) {
        size_t mark = push_key(t, "hosts");
        cert_hosts(t, json_object_get(v, "hosts"), c);
        pop(t, mark);
    }
    cpem = get_pem(t, v, "cert", "cert_pem", &c->cert_file, &cat, &clen);
    kpem = get_pem(t, v, "key", "key_pem", &c->key_file, &kat, &klen);
    if (kpem && strcmp(kpem, ADM_TLS_REDACTED) == 0) {
        /* PUT /config restores it before this (tls_redact.c) */
        err_key(t, kat,
                "\"%s\" is what GET /config shows instead of a key: push the key itself, "
                "or push it over PUT /config while the live config has this certificate",
                ADM_TLS_REDACTED);
        free(kpem);
        kpem = NULL;
    }
    if (cpem && !(c->x509 = parse_certs(cpem, clen, &c->chain, why, sizeof(why))))
        err_key(t, cat, "cannot parse the certificate: %s", why);
    if (kpem && !(c->pkey = parse_key(kpem, klen, why, sizeof(why))))
        err_key(t, kat, "cannot parse the key: %s", why);
    if (c->pkey) {
        int id = EVP_PKEY_get_base_id(c->pkey);
        if (id == EVP_PKEY_RSA)
            c->key_type = ADM_TLS_KEY_RSA;
        else if (id == EVP_PKEY_EC)
            c->key_type = ADM_TLS_KEY_ECDSA;
        else
            err_key(t, kat, "unsupported key type (use an RSA or ECDSA key)");
    }
    if (c->x509 && c->pkey && t->nerr == bad) {
        if (X509_check_private_key(c->x509, c->pkey) != 1) {
            ERR_clear_error();
            err_key(t, kat, "the key does not match the certificate in \"%s\"", cat);
        } else if (X509_cmp_current_time(X509_get0_notAfter(c->x509)) <= 0) {
            char date[64];
            time_t na = (time_t)asn1_unix(X509_get0_notAfter(c->x509));
            struct tm tm;
            strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&na, &tm));
            err_key(t, cat, "the certificate expired on %s", date);
        }
    }
    if (c->x509 && t->nerr == bad) {
        cert_describe(t, c);
        for (size_t i = 0; i < c->nhosts; i++) {
            if (covers(c, c->hosts[i]))
                continue;
            size_t m1 = push_key(t, "hosts"), m2 = push_index(t, i);
            err(t, "the certificate does not cover \"%s\" (its names: %s%s)", c->hosts[i],
                c->nnames ? c->names[0] : "none", c->nnames > 1 ? ", ..." : "");
            pop(t, m2);
            pop(t, m1);
        }
    }
    if (cpem && kpem) {
        id_add(md, cpem, clen);
        id_add(md, kpem, klen);
        id_add_int(md, (long long)c->nhosts);
        for (size_t i = 0; i < c->nhosts; i++)
            id_add_str(md, c->hosts[i]);
    }
    free(cpem);
    if (kpem)
        OPENSSL_cleanse(kpem, klen);
    free(kpem);
}

/* Two certificates of one key type may not serve one name, and only one may
 * be the default. */
static void check_overlaps(struct tx *t, const struct adm_tls_listener *l, size_t mark_list)
{
    for (size_t i = 0; i < l->ncerts; i++) {
        const struct adm_tls_cert *c = &l->certs[i];
        if (!c->x509 || !c->pkey)
            continue;
        for (size_t j = 0; j < i; j++) {
            const struct adm_tls_cert *o = &l->certs[j];
            if (!o->x509 || !o->pkey)
                continue;
            size_t m = push_index(t, i);
            if (!c->nhosts && !o->nhosts) {
                err(t,
                    "a second default certificate (no \"hosts\"; the default is "
                    "%.*s/%zu)",
                    (int)mark_list, t->path, j);
            } else {
                for (size_t a = 0; a < c->nhosts; a++)
                    for (size_t b = 0; b < o->nhosts; b++)
                        if (c->key_type == o->key_type && !strcmp(c->hosts[a], o->hosts[b]))
                            err_key(t, "hosts", "\"%s\" has two %s certificates (also %.*s/%zu)",
                                    c->hosts[a], adm_tls_key_name(c->key_type), (int)mark_list,
                                    t->path, j);
            }
            pop(t, m);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* CA bundles                                                               */

/* Every certificate of the CA file member <key>; NULL after reporting. */
static STACK_OF(X509) *
    parse_ca(struct tx *t, const json_t *obj, const char *key, char **file, EVP_MD_CTX *md)
{
    const char *f = get_str(t, obj, key);
    STACK_OF(X509) *rest = NULL, *all = NULL;
    char why[600];
    size_t len = 0;
    char *pem;
    X509 *first;

    if (!f)
        return NULL;
    if (!(*file = xstrdup(t, f)))
        return NULL;
    if (!(pem = read_file(f, &len, why, sizeof(why)))) {
        err_key(t, key, "%s", why);
        return NULL;
    }
    id_add(md, pem, len);
    first = parse_certs(pem, len, &rest, why, sizeof(why));
    free(pem);
    if (!first) {
        err_key(t, key, "cannot parse the CA certificates: %s", why);
        return NULL;
    }
    if (sk_X509_insert(rest, first, 0) <= 0) {
        X509_free(first);
        sk_X509_pop_free(rest, X509_free);
        t->nomem = 1;
        return NULL;
    }
    all = rest;
    return all;
}

/* ------------------------------------------------------------------------ */
/* listeners[].tls                                                          */

static void parse_client_auth(struct tx *t, const json_t *v, struct adm_tls_listener *l,
                              EVP_MD_CTX *md)
{
    static const char *const keys[] = {"ca_file", "mode"};
    const char *mode;

    if (!want_object(t, v))
        return;
    check_keys(t, v, keys, 2);
    l->client_mode = ADM_TLS_CLIENT_REQUIRE;
    if ((mode = get_str(t, v, "mode"))) {
        if (!strcmp(mode, "optional"))
            l->client_mode = ADM_TLS_CLIENT_OPTIONAL;
        else if (strcmp(mode, "require"))
            err_key(t, "mode", "invalid value \"%s\" (expected \"require\" or \"optional\")", mode);
    }
    if (!json_object_get(v, "ca_file"))
        err_key(t, "ca_file", "missing (required)");
    l->client_cas = parse_ca(t, v, "ca_file", &l->client_ca_file, md);
}

/* The listener's ticket_secret <v>: a string that every node of a fleet
 * shares, so that their ticket keys are the same (tls_ctx.c derives them).
 * Read after session_tickets: with tickets off a secret is a contradiction,
 * refused rather than ignored. Only its bytes enter the identity, so a
 * push that changes it alone builds a new context. */
static void parse_ticket_secret(struct tx *t, const json_t *v, struct adm_tls_listener *l,
                                EVP_MD_CTX *md)
{
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);

    if (!s || strlen(s) != len) {
        err(t, "expected a string of at least %d bytes without NUL characters",
            ADM_TLS_TICKET_SECRET_MIN);
    } else if (!strcmp(s, ADM_TLS_REDACTED)) {
        /* PUT /config restores it before this (tls_redact.c) */
        err(t,
            "\"%s\" is what GET /config shows instead of the secret: push the secret itself, "
            "or push it over PUT /config while the live listener of this address has one",
            ADM_TLS_REDACTED);
    } else if (len < ADM_TLS_TICKET_SECRET_MIN) {
        err(t, "too short: %zu bytes, at least %d (make one with `openssl rand -base64 48`)", len,
            ADM_TLS_TICKET_SECRET_MIN);
    } else if (!l->session_tickets) {
        err(t, "set while session_tickets is false: without tickets there is nothing to derive "
               "from it (remove one of the two)");
    } else if ((l->ticket_secret = xstrdup(t, s))) {
        id_add_str(md, "ticket_secret");
        id_add(md, s, len);
    }
}

static void parse_listener(struct tx *t, const json_t *v, struct adm_tls_listener *l,
                           EVP_MD_CTX *md)
{
    static const char *const keys[] = {"certificates",      "min_version",   "session_tickets",
                                       "ticket_rotation_s", "ticket_secret", "client_auth"};
    const json_t *certs = json_object_get(v, "certificates"), *rot;
    const char *mv;

    l->min_version = TLS1_2_VERSION;
    l->session_tickets = 1;
    l->ticket_rotation_s = 43200;
    if (!want_object(t, v))
        return;
    check_keys(t, v, keys, sizeof(keys) / sizeof(keys[0]));
    if ((mv = get_str(t, v, "min_version"))) {
        if (!strcmp(mv, "1.3"))
            l->min_version = TLS1_3_VERSION;
        else if (!strcmp(mv, "1.0") || !strcmp(mv, "1.1"))
            err_key(t, "min_version", "TLS %s is not supported: the minimum is \"1.2\"", mv);
        else if (strcmp(mv, "1.2"))
            err_key(t, "min_version", "invalid value \"%s\" (expected \"1.2\" or \"1.3\")", mv);
    }
    l->session_tickets = get_bool(t, v, "session_tickets", 1);
    if ((rot = json_object_get(v, "ticket_rotation_s"))) {
        json_int_t s = json_integer_value(rot);
        if (!json_is_integer(rot) || s < 1 || s > 604800)
            err_key(t, "ticket_rotation_s", "expected an integer between 1 and 604800");
        else
            l->ticket_rotation_s = (unsigned)s;
    }
    id_add_int(md, l->min_version);
    id_add_int(md, l->session_tickets);
    id_add_int(md, l->ticket_rotation_s);
    if (json_object_get(v, "ticket_secret")) {
        size_t mark = push_key(t, "ticket_secret");
        parse_ticket_secret(t, json_object_get(v, "ticket_secret"), l, md);
        pop(t, mark);
    }
    if (json_object_get(v, "client_auth")) {
        size_t mark = push_key(t, "client_auth");
        parse_client_auth(t, json_object_get(v, "client_auth"), l, md);
        pop(t, mark);
    }
    id_add_int(md, l->client_mode);

    size_t mark = push_key(t, "certificates");
    if (!certs) {
        err(t, "missing (required)");
    } else if (!json_is_array(certs) ||
               (!json_array_size(certs) && !(t->flags & ADM_TLS_FLEET_NODE))) {
        err(t, "expected a non-empty array of certificates");
    } else if (!json_array_size(certs)) {
        /* a fleet node before the fleet has certificates: a listener that
         * refuses every handshake (tls_ctx.c), not a config error */
    } else if (!(l->certs = calloc(json_array_size(certs), sizeof(*l->certs)))) {
        t->nomem = 1;
    } else {
        l->ncerts = json_array_size(certs);
        for (size_t i = 0; i < l->ncerts; i++) {
            size_t m = push_index(t, i);
            parse_cert(t, json_array_get(certs, i), &l->certs[i], md);
            pop(t, m);
        }
        check_overlaps(t, l, t->plen);
    }
    pop(t, mark);
}

/* Runs <parse> on a fresh <tx> rooted at <path>, and the identity digest
 * around it. */
static int run(const char *path, unsigned flags, struct adm_errors *errs, void *out,
               unsigned char *id, void (*parse)(struct tx *, const json_t *, void *, EVP_MD_CTX *),
               const json_t *v)
{
    struct tx t;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned n = 0;

    memset(&t, 0, sizeof(t));
    t.errs = errs;
    t.flags = flags;
    snprintf(t.path, sizeof(t.path), "%s", path);
    t.plen = strlen(t.path);
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(md);
        return -1;
    }
    parse(&t, v, out, md);
    if (!EVP_DigestFinal_ex(md, id, &n))
        t.nomem = 1;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    return t.nomem ? -1 : t.nerr;
}

static void listener_cb(struct tx *t, const json_t *v, void *out, EVP_MD_CTX *md)
{
    parse_listener(t, v, out, md);
}

int adm_tls_listener_parse(const json_t *v, const char *path, unsigned flags,
                           struct adm_errors *errs, struct adm_tls_listener **out)
{
    struct adm_tls_listener *l = calloc(1, sizeof(*l));
    int rc;

    *out = NULL;
    if (!l)
        return -1;
    rc = run(path, flags, errs, l, l->id, listener_cb, v);
    if (rc)
        adm_tls_listener_free(l);
    else
        *out = l;
    return rc;
}

void adm_tls_listener_free(struct adm_tls_listener *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncerts; i++)
        cert_free(&t->certs[i]);
    free(t->certs);
    free(t->client_ca_file);
    sk_X509_pop_free(t->client_cas, X509_free);
    if (t->ticket_secret)
        OPENSSL_cleanse(t->ticket_secret, strlen(t->ticket_secret));
    free(t->ticket_secret);
    free(t);
}

/* ------------------------------------------------------------------------ */
/* upstreams.NAME.tls                                                       */

static void upstream_cb(struct tx *t, const json_t *v, void *out, EVP_MD_CTX *md)
{
    static const char *const keys[] = {"verify", "ca_file", "server_name"};
    struct adm_tls_upstream *u = out;
    const char *sn;

    u->verify = 1;
    if (!want_object(t, v))
        return;
    check_keys(t, v, keys, 3);
    u->verify = get_bool(t, v, "verify", 1);
    if ((sn = get_str(t, v, "server_name"))) {
        char low[MAX_HOST + 1];
        size_t n = strlen(sn);
        for (size_t k = 0; k <= n && k <= MAX_HOST; k++)
            low[k] = (sn[k] >= 'A' && sn[k] <= 'Z') ? (char)(sn[k] - 'A' + 'a') : sn[k];
        if (n > MAX_HOST || !valid_hostname(low))
            err_key(t, "server_name", "invalid host name \"%s\"", sn);
        else
            u->server_name = xstrdup(t, low);
    }
    id_add_int(md, u->verify);
    id_add_str(md, u->server_name);
    u->cas = parse_ca(t, v, "ca_file", &u->ca_file, md);
}

int adm_tls_upstream_parse(const json_t *v, const char *path, struct adm_errors *errs,
                           struct adm_tls_upstream **out)
{
    struct adm_tls_upstream *u = calloc(1, sizeof(*u));
    int rc;

    *out = NULL;
    if (!u)
        return -1;
    rc = run(path, 0, errs, u, u->id, upstream_cb, v);
    if (rc)
        adm_tls_upstream_free(u);
    else
        *out = u;
    return rc;
}

void adm_tls_upstream_free(struct adm_tls_upstream *t)
{
    if (!t)
        return;
    free(t->ca_file);
    sk_X509_pop_free(t->cas, X509_free);
    free(t->server_name);
    free(t);
}

const char *adm_tls_key_name(enum adm_tls_key k)
{
    return k == ADM_TLS_KEY_ECDSA ? "ECDSA" : "RSA";
}

/* ------------------------------------------------------------------------ */
/* comparing configs                                                        */

/* 1 when the "tls" object <t> names a file. */
static int tls_names_file(const json_t *t)
{
    const json_t *c;
    size_t i;

    if (json_object_get(t, "ca_file") ||
        json_object_get(json_object_get(t, "client_auth"), "ca_file"))
        return 1;
    json_array_foreach(json_object_get(t, "certificates"), i,
                       c) if (json_object_get(c, "cert") || json_object_get(c, "key")) return 1;
    return 0;
}

int adm_tls_doc_reads_files(const json_t *doc)
{
    const json_t *v;
    const char *name;
    size_t i;

    json_array_foreach(json_object_get(doc, "listeners"), i,
                       v) if (tls_names_file(json_object_get(v, "tls"))) return 1;
    json_object_foreach((json_t *)json_object_get(doc, "upstreams"), name,
                        v) if (tls_names_file(json_object_get(v, "tls"))) return 1;
    return 0;
}

static int same_id(const unsigned char *a, const unsigned char *b)
{
    return (!a && !b) || (a && b && !memcmp(a, b, ADM_TLS_ID_LEN));
}

int adm_tls_same(const struct adm_config *a, const struct adm_config *b)
{
    if (a->nlisteners != b->nlisteners || a->nupstreams != b->nupstreams)
        return 0;
    for (size_t i = 0; i < a->nlisteners; i++) {
        const struct adm_tls_listener *x = a->listeners[i].tls, *y = b->listeners[i].tls;
        if (!same_id(x ? x->id : NULL, y ? y->id : NULL))
            return 0;
    }
    for (size_t i = 0; i < a->nupstreams; i++) {
        const struct adm_tls_upstream *x = a->upstreams[i].tls;
        const struct adm_upstream *o = adm_config_upstream(b, a->upstreams[i].name);
        if (!o || !same_id(x ? x->id : NULL, o->tls ? o->tls->id : NULL))
            return 0;
    }
    return 1;
}

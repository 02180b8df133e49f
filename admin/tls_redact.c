/*
 * tls_redact.c - private keys and ticket secrets never leave through the
 * admin API.
 *
 * GET /config answers the live document with every inline listener key
 * (listeners[].tls.certificates[].key_pem) and every listener's
 * ticket_secret (listeners[].tls.ticket_secret) replaced by
 * ADM_TLS_REDACTED, the marker Envoy's config_dump writes for its
 * sensitive fields. A key given as a file ("key") is a path, not a secret,
 * and is shown as written.
 *
 * So that the GET's output can be edited and pushed back, a PUT /config
 * whose key_pem reads the marker keeps the live key of that certificate:
 * the one whose cert_pem is the same in the live document, on any listener
 * (a key belongs to its certificate, not to a position in the list). A
 * ticket_secret that reads the marker keeps the live secret of the listener
 * with the same address (a secret belongs to its listener, whose address
 * names it). A marker with no such certificate or listener (a new or
 * changed cert_pem, a new address, a listener that had no secret) is
 * refused at its JSON path. Anywhere else (a -c file, --check, SIGHUP) the
 * marker is neither a key nor a secret and the parser refuses it
 * (tls_config.c).
 */
#include "admin/tls.h"

#include <stdio.h>
#include <string.h>

/* listeners[i].tls of <doc>, or NULL. */
static json_t *tls_of(const json_t *doc, size_t i)
{
    return json_object_get(json_array_get(json_object_get(doc, "listeners"), i), "tls");
}

/* listeners[i].tls.certificates of <doc>, or NULL. */
static json_t *certs_of(const json_t *doc, size_t i)
{
    return json_object_get(tls_of(doc, i), "certificates");
}

static int is_marker(const json_t *v)
{
    return json_is_string(v) && strcmp(json_string_value(v), ADM_TLS_REDACTED) == 0;
}

/* Replaces the string member <key> of <obj>, when it has one, by the
 * marker; -1 on out of memory. */
static int redact_member(json_t *obj, const char *key)
{
    if (!json_is_string(json_object_get(obj, key)))
        return 0;
    return json_object_set_new(obj, key, json_string(ADM_TLS_REDACTED));
}

json_t *adm_tls_redact(const json_t *doc)
{
    /* once per generation (GET /config's bytes are cached): a deep copy is
     * simpler than sharing all but the path down to each key */
    json_t *out = json_deep_copy(doc), *certs, *c;
    size_t i, k;

    for (i = 0; out && i < json_array_size(json_object_get(out, "listeners")); i++) {
        if (redact_member(tls_of(out, i), "ticket_secret") < 0)
            goto fail;
        certs = certs_of(out, i);
        json_array_foreach(certs, k, c)
        {
            if (redact_member(c, "key_pem") < 0)
                goto fail;
        }
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* The live key_pem of the certificate whose cert_pem is <cert> in <live>,
 * or NULL. */
static json_t *live_key(const json_t *live, const char *cert)
{
    const json_t *certs, *c;
    size_t i, k;

    for (i = 0; i < json_array_size(json_object_get(live, "listeners")); i++) {
        certs = certs_of(live, i);
        json_array_foreach(certs, k, c)
        {
            json_t *key = json_object_get(c, "key_pem");
            const char *pem = json_string_value(json_object_get(c, "cert_pem"));
            if (pem && strcmp(pem, cert) == 0 && json_is_string(key) && !is_marker(key))
                return key;
        }
    }
    return NULL;
}

/* The live ticket_secret of the listener whose address is <addr> in
 * <live>, or NULL. */
static json_t *live_secret(const json_t *live, const char *addr)
{
    const json_t *l;
    size_t i;

    json_array_foreach(json_object_get(live, "listeners"), i, l)
    {
        const char *a = json_string_value(json_object_get(l, "address"));
        json_t *s = json_object_get(json_object_get(l, "tls"), "ticket_secret");
        if (a && strcmp(a, addr) == 0 && json_is_string(s) && !is_marker(s))
            return s;
    }
    return NULL;
}

/* Restores listener <i>'s ticket_secret marker, if it has one. 1 restored,
 * 0 nothing to do, -1 out of memory, -2 no live secret (reported). */
static int unredact_secret(json_t *doc, size_t i, const json_t *live, struct adm_errors *errs)
{
    json_t *tls = tls_of(doc, i), *secret;
    const char *addr;
    char path[128];

    if (!json_is_object(tls) || !is_marker(json_object_get(tls, "ticket_secret")))
        return 0;
    addr = json_string_value(
        json_object_get(json_array_get(json_object_get(doc, "listeners"), i), "address"));
    if (addr && live && (secret = live_secret(live, addr)))
        return json_object_set(tls, "ticket_secret", secret) < 0 ? -1 : 1;
    snprintf(path, sizeof(path), "/listeners/%zu/tls/ticket_secret", i);
    adm_errors_add(errs, path,
                   "\"%s\" keeps the live ticket_secret of the listener with the same address, "
                   "and the live config has no such listener with a secret: send the secret",
                   ADM_TLS_REDACTED);
    return -2;
}

int adm_tls_unredact(json_t *doc, const json_t *live, struct adm_errors *errs)
{
    json_t *certs, *c, *key;
    size_t i, k;
    int n = 0, bad = 0, rc;

    for (i = 0; i < json_array_size(json_object_get(doc, "listeners")); i++) {
        if ((rc = unredact_secret(doc, i, live, errs)) == -1)
            return -1;
        n += rc == 1;
        bad |= rc == -2;
        certs = certs_of(doc, i);
        json_array_foreach(certs, k, c)
        {
            const char *cert = json_string_value(json_object_get(c, "cert_pem"));
            if (!json_is_object(c) || !is_marker(json_object_get(c, "key_pem")))
                continue;
            if (cert && live && (key = live_key(live, cert))) {
                if (json_object_set(c, "key_pem", key) < 0)
                    return -1;
                n++;
                continue;
            }
            char path[128];
            snprintf(path, sizeof(path), "/listeners/%zu/tls/certificates/%zu/key_pem", i, k);
            adm_errors_add(errs, path,
                           "\"%s\" keeps the live key of the certificate with the same "
                           "cert_pem, and the live config has no such certificate: send the key",
                           ADM_TLS_REDACTED);
            bad = 1;
        }
    }
    return bad ? -1 : n;
}

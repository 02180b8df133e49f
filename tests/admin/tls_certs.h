/*
 * tls_certs.h - certificates for the TLS unit tests, made with the openssl
 * command-line tool at test time in a fresh temporary directory:
 *   ca.pem/ca.key           a CA (ECDSA P-256)
 *   ec.pem/ec.key           ECDSA P-256 for api.example.com, signed by the CA
 *   rsa.pem/rsa.key         RSA 2048 for api.example.com, signed by the CA
 *   wild.pem/wild.key       ECDSA for *.w.example.com
 *   dflt.pem/dflt.key       ECDSA for default.example.com (the default)
 *   other.key               a key that matches none of them
 *   expired.pem/expired.key self-signed, expired yesterday
 *   client.pem/client.key   a client certificate (CN=client-1) from the CA
 *   garbage.pem             not PEM at all
 */
#ifndef SY_TESTS_TLS_CERTS_H
#define SY_TESTS_TLS_CERTS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tls_dir[256];

static const char tls_script[] =
    "set -e; cd \"$1\"; O='openssl'; Q='-nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256';\n"
    "$O req -x509 $Q -keyout ca.key -out ca.pem -subj /CN=Test-CA -days 30 "
    "  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=keyCertSign,cRLSign;\n"
    "leaf() { n=$1; san=$2; shift 2; $O req -new \"$@\" -keyout $n.key -out $n.csr -subj "
    "\"/CN=$n\";\n"
    "  printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n' \"$san\" > $n.ext;\n"
    "  $O x509 -req -in $n.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile $n.ext "
    "    -out $n.pem; }\n"
    "leaf ec DNS:api.example.com $Q\n"
    "leaf rsa DNS:api.example.com -nodes -newkey rsa:2048\n"
    "leaf wild 'DNS:*.w.example.com' $Q\n"
    "leaf dflt DNS:default.example.com $Q\n"
    "leaf client email:client@example.com $Q\n"
    "$O genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out other.key\n"
    "$O req -new $Q -keyout expired.key -out expired.csr -subj /CN=old.example.com\n"
    "$O x509 -req -in expired.csr -signkey expired.key -days -1 -out expired.pem\n"
    "echo 'not a certificate' > garbage.pem\n";

/* Makes the certificates once per process; the directory's path. */
static const char *tls_certs(void)
{
    char cmd[sizeof(tls_script) + 600];

    if (tls_dir[0])
        return tls_dir;
    snprintf(tls_dir, sizeof(tls_dir), "/tmp/sy-tls-test-XXXXXX");
    /* called from main() before the tests fork: no ck_assert here */
    FILE *f = NULL;
    if (mkdtemp(tls_dir)) {
        snprintf(cmd, sizeof(cmd), "%s/gen.sh", tls_dir);
        f = fopen(cmd, "w");
    }
    if (!f) {
        perror("tls_certs");
        exit(EXIT_FAILURE);
    }
    fputs(tls_script, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "sh %s/gen.sh %s >%s/gen.log 2>&1", tls_dir, tls_dir, tls_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "openssl failed: see %s/gen.log\n", tls_dir);
        exit(EXIT_FAILURE);
    }
    return tls_dir;
}

/* "<dir>/<name>" in a static ring of buffers (a few at a time). */
static inline const char *tls_file(const char *name)
{
    static char buf[8][512];
    static unsigned n;
    char *b = buf[n++ % 8];
    snprintf(b, sizeof(buf[0]), "%s/%s", tls_certs(), name);
    return b;
}

static void tls_certs_cleanup(void)
{
    char cmd[600];
    if (!tls_dir[0])
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tls_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tls_dir);
}

#endif

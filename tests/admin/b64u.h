/*
 * b64u.h - unpadded base64url into a caller's buffer, for the tests that
 * sign tokens themselves (test_policy.c, test_jwks_remote.c).
 */
#ifndef SY_TESTS_ADMIN_B64U_H
#define SY_TESTS_ADMIN_B64U_H

#include <stddef.h>

#include <openssl/evp.h>

/* base64url without padding of <n> bytes at <in> into <out> (room for
 * 4 * (n + 2) / 3 + 1 bytes). */
static void b64u(const unsigned char *in, size_t n, char *out)
{
    int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);

    while (len && out[len - 1] == '=')
        len--;
    out[len] = '\0';
    for (char *p = out; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
}

#endif /* SY_TESTS_ADMIN_B64U_H */

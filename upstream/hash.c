/*
 * hash.c - hashing request keys for the hash balancer, and the 64-bit
 * finalizer the rest of upstream/ seeds its generators with. FNV-1a over
 * the bytes, then murmur3's fmix64 so that every input bit reaches every
 * output bit (Maglev takes the hash modulo a prime).
 */
#include "upstream/up_int.h"

uint64_t up_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

uint64_t up_hash(const void *key, size_t len)
{
    const unsigned char *b = key;
    uint64_t h = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return up_mix64(h);
}

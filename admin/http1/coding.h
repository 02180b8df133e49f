/*
 * coding.h - the content codings Switchyard produces (issue 27's compress
 * policy): their names and the levels each takes. A table with no
 * compression library behind it, so that the config (admin/) checks a
 * policy against the very names and ranges the encoders
 * (gateway/encoding.c) use.
 */
#ifndef SY_ADMIN_HTTP1_CODING_H
#define SY_ADMIN_HTTP1_CODING_H

#include <stddef.h>

enum h1_coding {
    H1_CODING_IDENTITY = 0,
    H1_CODING_GZIP,
    H1_CODING_BR,
    H1_CODING_ZSTD,
    H1_CODING_COUNT,
};

struct h1_coding_info {
    const char *name; /* the Content-Encoding token and the config's name */
    int level_min, level_max, level_def;
};

/* Indexed by enum h1_coding: gzip 1-9 (6), br 0-9 (4), zstd 1-19 (3). */
extern const struct h1_coding_info h1_codings[H1_CODING_COUNT];

/* The coding named <s>[0..<n>) (case-insensitive; "x-gzip" is gzip), or -1. */
int h1_coding_from_name(const char *s, size_t n);

#endif

/*
 * compress_bench.c - CPU per MB and ratio of gateway/encoding.c's encoders,
 * and of zlib called as nginx's gzip filter calls it (deflateInit2 with
 * level, windowBits 16+15, memLevel 8; output in 4 KiB buffers,
 * gzip_buffers' default): the same bodies, the same 16 KiB pieces as the
 * gateway reads them.
 *
 *   compress_bench [-r ROUNDS] [-t SECONDS] FILE...
 *       for each file, each coding at its default level, gzip at 1 and 9,
 *       and "nginx-zlib" at 6: ratio, ns/MB (median of ROUNDS rounds, each
 *       repeating the body for about SECONDS of this thread's CPU time, so
 *       that other processes on a shared machine count less), MB/s, peak
 *       bytes. Markdown.
 *   compress_bench --once CODING LEVEL N FILE
 *       compresses FILE N times and prints the output size: for callgrind,
 *       where two values of N cancel start-up (loadtest/compress).
 *
 * CODING: gzip, br, zstd, or nginx-zlib.
 */
#define _POSIX_C_SOURCE 200809L
#include "gateway/encoding.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#define PIECE 16384
#define NGX_BUF 4096
#define NGINX_ZLIB (-1)

/* This thread's CPU time, in ns. */
static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p;
    long len;

    if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
        fprintf(stderr, "compress_bench: cannot read %s\n", path);
        exit(2);
    }
    p = malloc((size_t)len + 1);
    if (!p || fread(p, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "compress_bench: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* zlib as ngx_http_gzip_filter_module drives it: the body as it comes,
 * output into fixed buffers, Z_FINISH at the end. Returns the output size. */
static size_t nginx_zlib(int level, const unsigned char *in, size_t n)
{
    unsigned char buf[NGX_BUF];
    size_t out = 0, off = 0;
    z_stream z;
    int rc;

    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, level, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        exit(3);
    do {
        size_t piece = n - off < PIECE ? n - off : PIECE;
        int flush = off + piece == n ? Z_FINISH : Z_NO_FLUSH;
        z.next_in = (Bytef *)(uintptr_t)(in + off);
        z.avail_in = (uInt)piece;
        off += piece;
        do {
            z.next_out = buf;
            z.avail_out = sizeof(buf);
            rc = deflate(&z, flush);
            out += sizeof(buf) - z.avail_out;
        } while (z.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    } while (off < n);
    deflateEnd(&z);
    return out;
}

/* One body through our encoder of <c> at <level>, in PIECE-byte writes;
 * the output drained as a connection would. Returns the output size. */
static size_t ours(enum gw_coding c, int level, const unsigned char *in, size_t n, size_t *peak)
{
    struct gw_encoder *e = gw_encoder_new(c, level, n);
    struct evbuffer *out = evbuffer_new();
    size_t total = 0;

    if (!e || !out)
        exit(3);
    for (size_t off = 0; off < n; off += PIECE) {
        if (gw_encoder_write(e, in + off, n - off < PIECE ? n - off : PIECE, out) < 0)
            exit(4);
        total += evbuffer_get_length(out);
        evbuffer_drain(out, evbuffer_get_length(out));
    }
    if (gw_encoder_finish(e, out) < 0)
        exit(4);
    total += evbuffer_get_length(out);
    if (peak)
        *peak = gw_encoder_mem_peak(e);
    gw_encoder_free(e);
    evbuffer_free(out);
    return total;
}

static size_t one(int c, int level, const unsigned char *in, size_t n, size_t *peak)
{
    if (c == NGINX_ZLIB) {
        if (peak)
            *peak = 0;
        return nginx_zlib(level, in, n);
    }
    return ours((enum gw_coding)c, level, in, n, peak);
}

static int by_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int coding_of(const char *s)
{
    if (!strcmp(s, "nginx-zlib"))
        return NGINX_ZLIB;
    return gw_enc_from_name(s, strlen(s));
}

int main(int argc, char **argv)
{
    static const struct {
        int c, level;
    } runs[] = {
        {GW_ENC_GZIP, 1}, {GW_ENC_GZIP, 6}, {NGINX_ZLIB, 6},  {GW_ENC_GZIP, 9},
        {GW_ENC_BR, 4},   {GW_ENC_BR, 6},   {GW_ENC_ZSTD, 3}, {GW_ENC_ZSTD, 9},
    };
    int rounds = 5, a = 1;
    double secs = 0.5;

    if (argc == 6 && !strcmp(argv[1], "--once")) {
        int c = coding_of(argv[2]), level = atoi(argv[3]), reps = atoi(argv[4]);
        size_t n, z = 0;
        unsigned char *in = slurp(argv[5], &n);
        if (c == GW_ENC_IDENTITY || c < NGINX_ZLIB)
            return 2;
        for (int i = 0; i < reps; i++)
            z = one(c, level, in, n, NULL);
        printf("%zu %zu\n", n, z);
        free(in);
        return 0;
    }
    for (; a + 1 < argc && argv[a][0] == '-'; a += 2) {
        if (!strcmp(argv[a], "-r"))
            rounds = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-t"))
            secs = atof(argv[a + 1]);
    }
    if (a >= argc || rounds < 1 || rounds > 99) {
        fprintf(stderr, "usage: compress_bench [-r ROUNDS] [-t SECONDS] FILE...\n"
                        "       compress_bench --once CODING LEVEL N FILE\n");
        return 2;
    }
    printf("| body | coding | level | ratio (out/in) | ns/MB (median) | MB/s | peak bytes |\n"
           "|---|---|---:|---:|---:|---:|---:|\n");
    for (; a < argc; a++) {
        size_t n;
        unsigned char *in = slurp(argv[a], &n);
        const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
            double ns[99];
            size_t z = 0, peak = 0;
            for (int k = 0; k < rounds; k++) {
                double t0 = now_ns(), t;
                long reps = 0;
                do {
                    z = one(runs[r].c, runs[r].level, in, n, &peak);
                    reps++;
                    t = now_ns();
                } while (t - t0 < secs * 1e9);
                ns[k] = (t - t0) / reps / ((double)n / 1e6);
            }
            qsort(ns, (size_t)rounds, sizeof(ns[0]), by_double);
            char pk[32] = "-";
            if (runs[r].c != NGINX_ZLIB)
                snprintf(pk, sizeof(pk), "%zu", peak);
            printf("| %s | %s | %d | %.3f | %.0f | %.1f | %s |\n", name,
                   runs[r].c == NGINX_ZLIB ? "nginx-zlib" : gw_enc_name(runs[r].c), runs[r].level,
                   (double)z / (double)n, ns[rounds / 2], 1e3 / (ns[rounds / 2] / 1e6), pk);
        }
        free(in);
    }
    return 0;
}

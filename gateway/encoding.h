/*
 * gateway/encoding.h - response compression (issue 27's `compress` policy):
 * which coding a client gets (Accept-Encoding), whether a response may be
 * compressed at all, the head fields that change when it is, and a
 * streaming encoder for gzip (zlib), br (libbrotli) and zstd (libzstd).
 *
 * Pure: no I/O, no logging, no globals. The encoder appends what it
 * produces to a caller's evbuffer; everything else works over the
 * h1_header / h1_slice views the gateway already holds (admin/http1/token.h)
 * and never allocates.
 *
 * Use, per response:
 *   c = gw_enc_choose_fields(req_hdr, nreq_hdr, rules->order, rules->ncodings);
 *   if (c != GW_ENC_IDENTITY && gw_enc_eligible(rules, is_head, status, hdr, n) == GW_ENC_OK)
 *       gw_enc_edit_head(hdr, n, c, out, cap, scratch, sizeof(scratch), &nout);
 *       e = gw_encoder_new(c, rules->level[c], content_length_or_0);
 *       per body piece: gw_encoder_write(e, piece, len, out_buf);
 *       when the upstream has nothing more for now: gw_encoder_flush(e, out_buf);
 *       at the body's end: gw_encoder_finish(e, out_buf); gw_encoder_free(e);
 */
#ifndef SY_GATEWAY_ENCODING_H
#define SY_GATEWAY_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/http1/token.h"

struct evbuffer;

/* The content codings we produce. IDENTITY is "leave the body alone". */
enum gw_coding { GW_ENC_IDENTITY = 0, GW_ENC_GZIP, GW_ENC_BR, GW_ENC_ZSTD, GW_ENC_COUNT };

/* "identity", "gzip", "br", "zstd": the Content-Encoding token and the
 * config's name. */
const char *gw_enc_name(enum gw_coding c);
/* The coding named <s>[0..<n>) (case-insensitive; "x-gzip" is gzip), or -1. */
int gw_enc_from_name(const char *s, size_t n);
/* Levels each coding takes: gzip 1-9, br 0-9, zstd 1-19 (the config
 * refuses others). gw_enc_default_level(): gzip 6, br 4, zstd 3. */
bool gw_enc_level_ok(enum gw_coding c, int level);
int gw_enc_default_level(enum gw_coding c);

/*
 * The coding for a request whose Accept-Encoding value is <v>[0..<n>)
 * (<v> NULL: no such field, which gets identity), among the <norder>
 * codings of <order>, the server's preference first (RFC 9110 12.5.3):
 * the highest q-value wins; "*" gives its q to codings not named; q=0
 * refuses; equal q-values go to the server's order; codings are compared
 * ignoring case; a malformed element (bad token, bad q) is skipped. When
 * nothing in <order> is acceptable the answer is GW_ENC_IDENTITY (even if
 * identity itself was refused: sending it unencoded is what servers do).
 */
enum gw_coding gw_enc_choose(const char *v, size_t n, const enum gw_coding *order, size_t norder);
/* The same over a request's fields <hdr>[0..<n>): every Accept-Encoding
 * field read as one list (RFC 9110 5.3); none at all gets identity. */
enum gw_coding gw_enc_choose_fields(const struct h1_header *hdr, size_t n,
                                    const enum gw_coding *order, size_t norder);

/* A compress policy's settings; the strings are borrowed (the config's). */
struct gw_enc_rules {
    enum gw_coding order[GW_ENC_COUNT]; /* the server's preference */
    size_t ncodings;
    int level[GW_ENC_COUNT];  /* by coding */
    const char *const *types; /* media types or "type/ *" wildcards (no space), any case */
    size_t ntypes;
    uint64_t min_length; /* a known Content-Length below it is sent as is */
};

/* Why a response is not compressed (gw_enc_eligible()), or GW_ENC_OK. */
enum gw_enc_verdict {
    GW_ENC_OK = 0,
    GW_ENC_SKIP_HEAD,         /* a HEAD request */
    GW_ENC_SKIP_STATUS,       /* 1xx, 204, 304, 206 */
    GW_ENC_SKIP_RANGE,        /* Content-Range present */
    GW_ENC_SKIP_ENCODED,      /* Content-Encoding present (any value) */
    GW_ENC_SKIP_NO_TRANSFORM, /* Cache-Control: no-transform */
    GW_ENC_SKIP_TYPE,         /* no Content-Type, or one no pattern matches */
    GW_ENC_SKIP_SHORT,        /* Content-Length below min_length */
};

/*
 * Whether a response with <status> and fields <hdr>[0..<n>) (values
 * trimmed or not) to a request that was HEAD if <head> may be compressed
 * under <rules>. Patterns match the media type only (parameters ignored,
 * case-insensitive); "type/ *" (no space) matches every subtype of type.
 */
enum gw_enc_verdict gw_enc_eligible(const struct gw_enc_rules *rules, bool head, int status,
                                    const struct h1_header *hdr, size_t n);
/* Whether the Content-Type value <ct> matches one of <types>[0..<ntypes>). */
bool gw_enc_type_match(const char *const *types, size_t ntypes, struct h1_slice ct);

/* Room gw_enc_edit_head() needs beyond the fields it is given. */
#define GW_ENC_EXTRA_FIELDS 2

/*
 * The fields of <in>[0..<n>) as they go out with a body in coding <c>,
 * into <out> (room for <cap> >= n + GW_ENC_EXTRA_FIELDS), count in
 * *<nout>: Content-Length, Accept-Ranges and Content-Digest dropped (the
 * body changes and goes chunked on HTTP/1.1, unsized on HTTP/2);
 * "Content-Encoding: <c>" added; the Vary fields merged into one that
 * holds Accept-Encoding (unless one says "*"); a strong ETag weakened
 * (W/"..."). New values are written into <scratch> (<scratch_len> bytes),
 * which, like <in>'s bytes, must outlive <out>. 0, or -1 when <cap> or
 * <scratch> is too small (nothing usable in <out>).
 */
int gw_enc_edit_head(const struct h1_header *in, size_t n, enum gw_coding c, struct h1_header *out,
                     size_t cap, char *scratch, size_t scratch_len, size_t *nout);

/*
 * The streaming encoder: one per compressing response. Memory is bounded
 * by coding (zlib's window and memLevel, brotli's LGWIN, zstd's windowLog
 * and tables fixed low, and lower still for a small known size); every
 * byte the library allocates is counted, and a stream over GW_ENC_MEM_MAX
 * fails (zlib and zstd are refused the allocation; libbrotli, which
 * exits on a refusal, is failed after the call that went over). Peaks
 * measured on 1 MiB of text (test_encoder.c prints them): gzip 261 KiB at
 * every level; br 170 KiB (q0-1), 1.0 MiB (q2-3), 1.8 MiB (q4-8),
 * 2.5 MiB (q9); zstd 1.1 MiB (1), 1.8 MiB (3), 2.8 MiB (18-19).
 */
#define GW_ENC_MEM_MAX (3u << 20)

struct gw_encoder;

/* A new encoder for <c> (not IDENTITY) at <level> (gw_enc_level_ok()),
 * for a body of <size_hint> bytes (0: unknown). NULL when out of memory
 * or for a bad coding or level. */
struct gw_encoder *gw_encoder_new(enum gw_coding c, int level, uint64_t size_hint);
/* The same with a cap of <mem_max> library bytes instead of GW_ENC_MEM_MAX. */
struct gw_encoder *gw_encoder_new_capped(enum gw_coding c, int level, uint64_t size_hint,
                                         size_t mem_max);
/* Compresses <in>[0..<len>), appending to <out> whatever the library
 * emits (it may hold some back until a flush). 0, or -1: the library
 * failed, went over GW_ENC_MEM_MAX, or <out> could not grow; the
 * encoder then fails every later call. */
int gw_encoder_write(struct gw_encoder *e, const void *in, size_t len, struct evbuffer *out);
/* Appends everything held back so far, decodable by the client as it
 * arrives; the policy: call it whenever the upstream has nothing more for
 * now (a streamed response, SSE), so nothing waits on the next piece. */
int gw_encoder_flush(struct gw_encoder *e, struct evbuffer *out);
/* Ends the stream (the gzip trailer, brotli's last block, zstd's epilogue),
 * appending to <out>. No write after it. */
int gw_encoder_finish(struct gw_encoder *e, struct evbuffer *out);
/* Bytes the encoder holds now, its own struct included. */
size_t gw_encoder_mem(const struct gw_encoder *e);
/* Largest gw_encoder_mem() seen over the encoder's life. */
size_t gw_encoder_mem_peak(const struct gw_encoder *e);
/* Frees <e>; NULL is fine. */
void gw_encoder_free(struct gw_encoder *e);

#endif /* SY_GATEWAY_ENCODING_H */

/*
 * encoding.c - response compression: Accept-Encoding negotiation (RFC 9110
 * 12.5.3), the eligibility of a response and its head's edits, and the
 * streaming encoders over zlib, libbrotli and libzstd (encoding.h says how
 * they are used).
 *
 * Each encoder's memory is bounded twice: by the parameters (zlib's 32 KiB
 * window with memLevel 8, nginx's default; zstd's window at 2^18 and its
 * tables at 2^17 entries; brotli's window at 2^16, see BR_LGWIN_MAX; all
 * smaller for a small known body; input handed to the library 16 KiB at a
 * time), and by a counting allocator every library allocation goes
 * through. For zlib and zstd it refuses past the encoder's cap, which they
 * report as an error. libbrotli 1.0.9 (Debian 12) is built to exit() when
 * an allocation fails (its default BROTLI_ENCODER_EXIT_ON_OOM), so for
 * brotli the allocator only counts, and a stream found over its cap after
 * a call is failed there (tests/gateway/test_encoder.c measures every
 * level against GW_ENC_MEM_MAX). libzstd's custom allocator and
 * ZSTD_getCParams() are in its "static linking only" section; Debian's
 * libzstd.so exports both.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "gateway/encoding.h"
#include "admin/http1/coding.h"

#include <limits.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <event2/buffer.h>
#include <zlib.h>
#include <zstd.h>

/* ---- names and levels ---- */

_Static_assert((int)GW_ENC_COUNT == (int)H1_CODING_COUNT, "the codings of admin/http1/coding.h");

const char *gw_enc_name(enum gw_coding c)
{
    return (unsigned)c < GW_ENC_COUNT ? h1_codings[c].name : "?";
}

int gw_enc_from_name(const char *s, size_t n)
{
    return h1_coding_from_name(s, n);
}

bool gw_enc_level_ok(enum gw_coding c, int level)
{
    return (unsigned)c < GW_ENC_COUNT && c != GW_ENC_IDENTITY && level >= h1_codings[c].level_min &&
           level <= h1_codings[c].level_max;
}

int gw_enc_default_level(enum gw_coding c)
{
    return (unsigned)c < GW_ENC_COUNT ? h1_codings[c].level_def : 0;
}

/* ---- negotiation ---- */

/* RFC 9110 12.4.2's qvalue, in thousandths: "0" ["." 0*3DIGIT] or "1"
 * ["." 0*3"0"]. -1 when <s> is not one. */
static int parse_qvalue(struct h1_slice s)
{
    int q, scale = 100;

    if (s.len == 0 || (s.ptr[0] != '0' && s.ptr[0] != '1'))
        return -1;
    q = (s.ptr[0] - '0') * 1000;
    if (s.len == 1)
        return q;
    if (s.ptr[1] != '.' || s.len > 5)
        return -1;
    for (size_t i = 2; i < s.len; i++, scale /= 10) {
        if (!h1_is_digit((unsigned char)s.ptr[i]))
            return -1;
        q += (s.ptr[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* Splits one Accept-Encoding element into its coding and q (thousandths,
 * 1000 when absent). Parameters other than q are ignored. false for a
 * malformed element, which the caller skips. */
static bool parse_element(struct h1_slice el, struct h1_slice *coding, int *q)
{
    const char *semi = memchr(el.ptr, ';', el.len);
    struct h1_slice rest;

    coding->ptr = el.ptr;
    coding->len = semi ? (size_t)(semi - el.ptr) : el.len;
    h1_trim_ows(coding);
    if (!h1_is_token(coding->ptr, coding->len))
        return false;
    *q = 1000;
    while (semi) {
        struct h1_slice p;
        rest.ptr = semi + 1;
        rest.len = el.len - (size_t)(rest.ptr - el.ptr);
        semi = memchr(rest.ptr, ';', rest.len);
        p.ptr = rest.ptr;
        p.len = semi ? (size_t)(semi - rest.ptr) : rest.len;
        h1_trim_ows(&p);
        if (p.len >= 2 && h1_lower((unsigned char)p.ptr[0]) == 'q' && p.ptr[1] == '=') {
            *q = parse_qvalue((struct h1_slice){p.ptr + 2, p.len - 2});
            if (*q < 0)
                return false;
        }
    }
    return true;
}

/* What one Accept-Encoding value says: q by coding (-1: not named; the
 * first mention counts) and "*"'s, added to what earlier fields said. */
struct accept {
    int q[GW_ENC_COUNT];
    int star;
    bool seen; /* a field was there */
};

static void accept_read(struct accept *a, const char *v, size_t n)
{
    struct h1_slice el, coding;
    size_t pos = 0;
    int c, qv;

    a->seen = true;
    while (h1_list_next((struct h1_slice){v, n}, &pos, &el)) {
        if (!el.len || !parse_element(el, &coding, &qv))
            continue;
        if (coding.len == 1 && coding.ptr[0] == '*') {
            if (a->star < 0)
                a->star = qv;
        } else if ((c = gw_enc_from_name(coding.ptr, coding.len)) >= 0 && a->q[c] < 0) {
            a->q[c] = qv;
        }
    }
}

static enum gw_coding accept_decide(const struct accept *a, const enum gw_coding *order,
                                    size_t norder)
{
    enum gw_coding best = GW_ENC_IDENTITY;
    int best_q = 0;

    if (!a->seen)
        return GW_ENC_IDENTITY;
    for (size_t i = 0; i < norder; i++) {
        int c = order[i], qv;
        if ((unsigned)c >= GW_ENC_COUNT || c == GW_ENC_IDENTITY)
            continue;
        qv = a->q[c] >= 0 ? a->q[c] : a->star;
        if (qv > best_q) { /* strictly: a tie keeps the server's earlier choice */
            best_q = qv;
            best = (enum gw_coding)c;
        }
    }
    /* identity named above the best coding wins ("gzip;q=0.5, identity") */
    if (best != GW_ENC_IDENTITY && a->q[GW_ENC_IDENTITY] > best_q)
        return GW_ENC_IDENTITY;
    return best;
}

enum gw_coding gw_enc_choose(const char *v, size_t n, const enum gw_coding *order, size_t norder)
{
    struct accept a = {{-1, -1, -1, -1}, -1, false};

    if (v)
        accept_read(&a, v, n);
    return accept_decide(&a, order, norder);
}

enum gw_coding gw_enc_choose_fields(const struct h1_header *hdr, size_t n,
                                    const enum gw_coding *order, size_t norder)
{
    struct accept a = {{-1, -1, -1, -1}, -1, false};

    for (size_t i = 0; i < n; i++)
        if (h1_name_is(&hdr[i].name, "accept-encoding"))
            accept_read(&a, hdr[i].value.ptr ? hdr[i].value.ptr : "", hdr[i].value.len);
    return accept_decide(&a, order, norder);
}

/* ---- eligibility ---- */

/* The value of field <h>, trimmed (the response parser leaves trailing OWS). */
static struct h1_slice value_of(const struct h1_header *h)
{
    struct h1_slice v = h->value;

    if (!v.ptr) /* an absent value reads as an empty one */
        v = (struct h1_slice){"", 0};
    h1_trim_ows(&v);
    return v;
}

/* Whether the list value <v> holds the element <lit> (lower case). */
static bool list_has(struct h1_slice v, const char *lit)
{
    struct h1_slice el;
    size_t pos = 0;

    while (h1_list_next(v, &pos, &el))
        if (h1_ci_eq(el.ptr, el.len, lit))
            return true;
    return false;
}

/* Do <a> and <b> agree on their first <n> bytes, ignoring ASCII case? */
static bool ci_same(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (h1_lower((unsigned char)a[i]) != h1_lower((unsigned char)b[i]))
            return false;
    return true;
}

bool gw_enc_type_match(const char *const *types, size_t ntypes, struct h1_slice ct)
{
    const char *semi = ct.len ? memchr(ct.ptr, ';', ct.len) : NULL;

    if (semi)
        ct.len = (size_t)(semi - ct.ptr);
    h1_trim_ows(&ct);
    if (!ct.len)
        return false;
    for (size_t i = 0; i < ntypes; i++) {
        const char *p = types[i];
        size_t pl = strlen(p);
        if (pl >= 1 && p[pl - 1] == '*' && (pl == 1 || p[pl - 2] == '/')) {
            pl--; /* "type/ *": the prefix "type/"; "*" or "* / *": everything */
            if (pl == 0 || (pl == 2 && p[0] == '*'))
                return true;
            if (ct.len > pl && ci_same(ct.ptr, p, pl))
                return true;
        } else if (ct.len == pl && ci_same(ct.ptr, p, pl)) {
            return true;
        }
    }
    return false;
}

/* A Content-Length value as a number, or -1 when it is not 1*DIGIT. */
static int64_t parse_length(struct h1_slice v)
{
    int64_t n = 0;

    if (!v.len || v.len > 18)
        return -1;
    for (size_t i = 0; i < v.len; i++) {
        if (!h1_is_digit((unsigned char)v.ptr[i]))
            return -1;
        n = n * 10 + (v.ptr[i] - '0');
    }
    return n;
}

enum gw_enc_verdict gw_enc_eligible(const struct gw_enc_rules *rules, bool head, int status,
                                    const struct h1_header *hdr, size_t n)
{
    const struct h1_header *ct = NULL;
    int64_t len = -1;

    if (head)
        return GW_ENC_SKIP_HEAD;
    if (status < 200 || status == 204 || status == 205 || status == 206 || status == 304)
        return GW_ENC_SKIP_STATUS;
    for (size_t i = 0; i < n; i++) {
        const struct h1_slice *name = &hdr[i].name;
        if (h1_name_is(name, "content-range"))
            return GW_ENC_SKIP_RANGE;
        if (h1_name_is(name, "content-encoding"))
            return GW_ENC_SKIP_ENCODED;
        if (h1_name_is(name, "cache-control") && list_has(value_of(&hdr[i]), "no-transform"))
            return GW_ENC_SKIP_NO_TRANSFORM;
        if (h1_name_is(name, "content-type") && !ct)
            ct = &hdr[i];
        else if (h1_name_is(name, "content-length"))
            len = parse_length(value_of(&hdr[i]));
    }
    if (!ct || !gw_enc_type_match(rules->types, rules->ntypes, value_of(ct)))
        return GW_ENC_SKIP_TYPE;
    if (len >= 0 && (uint64_t)len < rules->min_length)
        return GW_ENC_SKIP_SHORT;
    return GW_ENC_OK;
}

/* ---- the head's edits ---- */

/* Fields that describe the body as the upstream sent it, which compression
 * changes: its length, ranges of it, and digests of it. */
static bool dropped_field(const struct h1_slice *name)
{
    return h1_name_is(name, "content-length") || h1_name_is(name, "accept-ranges") ||
           h1_name_is(name, "content-digest") || h1_name_is(name, "repr-digest") ||
           h1_name_is(name, "content-md5");
}

/* A bump allocator over the caller's scratch bytes. */
struct scratch {
    char *p;
    size_t left;
};

static char *scratch_put(struct scratch *s, const char *b, size_t n)
{
    char *at = s->p;

    if (n > s->left)
        return NULL;
    memcpy(at, b, n);
    s->p += n;
    s->left -= n;
    return at;
}

/* The one Vary value that holds every element of the Vary fields of
 * <in>[0..<n>) and Accept-Encoding, in <*out>: unchanged (NULL ptr) when
 * one already says "*" or Accept-Encoding. -1 when <s> is too small. */
static int merged_vary(const struct h1_header *in, size_t n, struct scratch *s,
                       struct h1_slice *out)
{
    static const char ae[] = "Accept-Encoding";
    out->ptr = NULL;
    out->len = 0;
    for (size_t i = 0; i < n; i++) {
        struct h1_slice v = value_of(&in[i]);
        if (!h1_name_is(&in[i].name, "vary"))
            continue;
        if (list_has(v, "*") || list_has(v, "accept-encoding"))
            return 0;
    }
    out->ptr = s->p;
    for (size_t i = 0; i < n; i++) {
        struct h1_slice v = value_of(&in[i]);
        if (!h1_name_is(&in[i].name, "vary") || !v.len)
            continue;
        if (!scratch_put(s, v.ptr, v.len) || !scratch_put(s, ", ", 2))
            return -1;
    }
    if (!scratch_put(s, ae, sizeof(ae) - 1))
        return -1;
    out->len = (size_t)(s->p - out->ptr);
    return 0;
}

int gw_enc_edit_head(const struct h1_header *in, size_t n, enum gw_coding c, struct h1_header *out,
                     size_t cap, char *scratch, size_t scratch_len, size_t *nout)
{
    static const struct h1_slice ce = {"Content-Encoding", 16}, vary = {"Vary", 4};
    struct scratch s = {scratch, scratch_len};
    struct h1_slice merged;
    bool vary_done = false;
    size_t k = 0;

    if ((unsigned)c >= GW_ENC_COUNT || c == GW_ENC_IDENTITY || cap < n + GW_ENC_EXTRA_FIELDS)
        return -1;
    if (merged_vary(in, n, &s, &merged) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        struct h1_header h = in[i];
        struct h1_slice v = value_of(&h);
        if (dropped_field(&h.name))
            continue;
        if (merged.ptr && h1_name_is(&h.name, "vary")) {
            if (vary_done)
                continue;
            h.value = merged; /* where the first Vary was */
            vary_done = true;
        } else if (h1_name_is(&h.name, "etag") && v.len && v.ptr[0] == '"') {
            char *w = scratch_put(&s, "W/", 2);
            if (!w || !scratch_put(&s, v.ptr, v.len))
                return -1;
            h.value = (struct h1_slice){w, v.len + 2};
        }
        out[k++] = h;
    }
    if (merged.ptr && !vary_done)
        out[k++] = (struct h1_header){vary, merged};
    out[k++] = (struct h1_header){ce, {h1_codings[c].name, strlen(h1_codings[c].name)}};
    *nout = k;
    return 0;
}

/* ---- the streaming encoders ---- */

/*
 * The window bounds (log2 bytes) and zstd's table bounds: the memory of
 * one stream. Brotli's is 16, not 18-22: past 16, libbrotli 1.0.9 picks
 * for qualities 5-9 the H5/H6 hashers sized by quality (10 MB at q7, 37 MB
 * at q9) and for q4 3.7 MB, where 16 keeps every quality up to 8 under
 * 1.8 MB and q9 at 2.5 MB with ratios within 1% on 1 MiB of text and JSON
 * (better at q4: its H40 hasher).
 */
#define BR_LGWIN_MAX 16
#define ZSTD_WLOG_MAX 18
#define ZSTD_HLOG_MAX 17
#define ZSTD_CLOG_MAX 17
#define GZ_WBITS_MAX 15
#define GZ_MEMLEVEL 8
/* Bytes reserved in <out> at a time, and given to the library at a time
 * (libbrotli takes a first call's input as its size hint when it has none,
 * and picks a far larger hasher for a large one). */
#define OUT_CHUNK 16384
#define IN_CHUNK 16384
/* libbrotli picks its H54 hasher (5.6 MB at q4) for a hint of 1 MiB or more. */
#define BR_HINT_MAX ((1u << 20) - 1)

enum op { OP_PROCESS, OP_FLUSH, OP_FINISH };

struct gw_encoder {
    enum gw_coding coding;
    bool failed, finished;
    size_t mem, peak, mem_max; /* library bytes now, at most, allowed */
    union {
        z_stream z;
        BrotliEncoderState *br;
        ZSTD_CCtx *zs;
    } u;
};

/* Each allocation carries its size ahead of it, for the count. */
struct block {
    alignas(max_align_t) size_t size;
};

static void *count_alloc(void *opaque, size_t size)
{
    struct gw_encoder *e = opaque;
    struct block *b;

    /* brotli cannot take a refusal (see the top of this file) */
    if (e->coding != GW_ENC_BR && size > e->mem_max - e->mem)
        return NULL;
    if (size > SIZE_MAX - sizeof(*b))
        return NULL;
    b = malloc(sizeof(*b) + size);
    if (!b)
        return NULL;
    b->size = size;
    e->mem += size;
    if (e->mem > e->peak)
        e->peak = e->mem;
    return b + 1;
}

static void count_free(void *opaque, void *p)
{
    struct gw_encoder *e = opaque;
    struct block *b;

    if (!p)
        return;
    b = (struct block *)p - 1;
    e->mem -= b->size;
    free(b);
}

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    if (size && items > SIZE_MAX / size)
        return NULL;
    return count_alloc(opaque, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
    count_free(opaque, p);
}

/* The smallest log2 window in [lo, hi] that holds <hint> bytes (hi when
 * the size is unknown): a small body needs no large window. */
static int window_for(uint64_t hint, int lo, int hi)
{
    int w = lo;

    if (!hint)
        return hi;
    while (w < hi && ((uint64_t)1 << w) < hint)
        w++;
    return w;
}

static int gz_init(struct gw_encoder *e, int level, uint64_t hint)
{
    /* zlib's deflate needs a window of at least 2^9 for gzip */
    int wbits = window_for(hint, 9, GZ_WBITS_MAX);
    int memlevel = wbits - 7 < GZ_MEMLEVEL ? (wbits - 7 < 1 ? 1 : wbits - 7) : GZ_MEMLEVEL;

    e->u.z.zalloc = z_alloc;
    e->u.z.zfree = z_free;
    e->u.z.opaque = e;
    /* 16 + wbits: a gzip header and trailer around the deflate stream */
    return deflateInit2(&e->u.z, level, Z_DEFLATED, 16 + wbits, memlevel, Z_DEFAULT_STRATEGY) ==
                   Z_OK
               ? 0
               : -1;
}

static int br_init(struct gw_encoder *e, int level, uint64_t hint)
{
    e->u.br = BrotliEncoderCreateInstance(count_alloc, count_free, e);
    if (!e->u.br)
        return -1;
    BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_QUALITY, (uint32_t)level);
    BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_LGWIN,
                              (uint32_t)window_for(hint, BROTLI_MIN_WINDOW_BITS, BR_LGWIN_MAX));
    if (hint)
        BrotliEncoderSetParameter(e->u.br, BROTLI_PARAM_SIZE_HINT,
                                  hint > BR_HINT_MAX ? BR_HINT_MAX : (uint32_t)hint);
    return 0;
}

static int zs_init(struct gw_encoder *e, int level, uint64_t hint)
{
    ZSTD_customMem cm = {count_alloc, count_free, e};
    ZSTD_compressionParameters cp =
        ZSTD_getCParams(level, hint ? hint : ZSTD_CONTENTSIZE_UNKNOWN, 0);
    unsigned wlog = cp.windowLog < ZSTD_WLOG_MAX ? cp.windowLog : ZSTD_WLOG_MAX;

    e->u.zs = ZSTD_createCCtx_advanced(cm);
    if (!e->u.zs)
        return -1;
    /* the level's parameters, then its window and tables held down */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(e->u.zs, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(e->u.zs, ZSTD_c_windowLog, (int)wlog)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(
            e->u.zs, ZSTD_c_hashLog,
            (int)(cp.hashLog < ZSTD_HLOG_MAX ? cp.hashLog : ZSTD_HLOG_MAX))) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(
            e->u.zs, ZSTD_c_chainLog,
            (int)(cp.chainLog < ZSTD_CLOG_MAX ? cp.chainLog : ZSTD_CLOG_MAX))))
        return -1;
    return 0;
}

struct gw_encoder *gw_encoder_new_capped(enum gw_coding c, int level, uint64_t size_hint,
                                         size_t mem_max)
{
    struct gw_encoder *e;
    int rc;

    if (!gw_enc_level_ok(c, level))
        return NULL;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->coding = c;
    e->mem_max = mem_max;
    if (c == GW_ENC_GZIP)
        rc = gz_init(e, level, size_hint);
    else if (c == GW_ENC_BR)
        rc = br_init(e, level, size_hint);
    else
        rc = zs_init(e, level, size_hint);
    if (rc < 0)
        goto fail_init;
    return e;

fail_init:
    if (c == GW_ENC_BR || c == GW_ENC_ZSTD) /* a gzip stream that failed init holds nothing */
        gw_encoder_free(e);
    else
        free(e);
    return NULL;
}

struct gw_encoder *gw_encoder_new(enum gw_coding c, int level, uint64_t size_hint)
{
    return gw_encoder_new_capped(c, level, size_hint, GW_ENC_MEM_MAX);
}

/*
 * One call into the library: consumes from *<in> (*<in_left> bytes), produces into
 * <dst> (*<dst_left> bytes). *<done> is set when nothing more comes of <op> for
 * now (all input taken, and for a flush or a finish all output given).
 * -1 when the library failed.
 */
static int gz_step(struct gw_encoder *e, enum op op, const uint8_t **in, size_t *in_left,
                   uint8_t *dst, size_t *dst_left, bool *done)
{
    static const int flush[] = {Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH};
    z_stream *z = &e->u.z;
    uInt take = *in_left > (1u << 30) ? (1u << 30) : (uInt)*in_left;
    int rc;

    z->next_in = (Bytef *)(uintptr_t)*in;
    z->avail_in = take;
    z->next_out = dst;
    z->avail_out = (uInt)*dst_left;
    rc = deflate(z, take < *in_left ? Z_NO_FLUSH : flush[op]);
    *in += take - z->avail_in;
    *in_left -= take - z->avail_in;
    *dst_left = z->avail_out;
    if (rc == Z_STREAM_ERROR)
        return -1;
    /* Z_BUF_ERROR is "no progress possible": nothing was pending */
    if (op == OP_FINISH)
        *done = rc == Z_STREAM_END;
    else
        *done = *in_left == 0 && z->avail_out != 0;
    return 0;
}

static int br_step(struct gw_encoder *e, enum op op, const uint8_t **in, size_t *in_left,
                   uint8_t *dst, size_t *dst_left, bool *done)
{
    static const BrotliEncoderOperation bop[] = {BROTLI_OPERATION_PROCESS, BROTLI_OPERATION_FLUSH,
                                                 BROTLI_OPERATION_FINISH};

    if (!BrotliEncoderCompressStream(e->u.br, bop[op], in_left, in, dst_left, &dst, NULL))
        return -1;
    if (op == OP_FINISH)
        *done = BrotliEncoderIsFinished(e->u.br);
    else
        *done = *in_left == 0 && !BrotliEncoderHasMoreOutput(e->u.br);
    return 0;
}

static int zs_step(struct gw_encoder *e, enum op op, const uint8_t **in, size_t *in_left,
                   uint8_t *dst, size_t *dst_left, bool *done)
{
    static const ZSTD_EndDirective zop[] = {ZSTD_e_continue, ZSTD_e_flush, ZSTD_e_end};
    ZSTD_inBuffer ib = {*in, *in_left, 0};
    ZSTD_outBuffer ob = {dst, *dst_left, 0};
    size_t rc = ZSTD_compressStream2(e->u.zs, &ob, &ib, zop[op]);

    if (ZSTD_isError(rc))
        return -1;
    *in += ib.pos;
    *in_left -= ib.pos;
    *dst_left -= ob.pos;
    if (op == OP_PROCESS)
        *done = *in_left == 0 && ob.pos < ob.size;
    else
        *done = rc == 0;
    return 0;
}

/* Runs <op> over <in>[0..<len>) until the library has nothing more to
 * give for it, appending its output to <out>. */
static int run(struct gw_encoder *e, enum op op, const void *in, size_t len, struct evbuffer *out)
{
    const uint8_t *p = in;
    bool done = false;

    if (e->failed || e->finished)
        goto fail;
    while (!done) {
        struct evbuffer_iovec iov;
        size_t left, take = len < IN_CHUNK ? len : IN_CHUNK, rest = len - take;
        enum op now = rest ? OP_PROCESS : op; /* flush or finish with the last piece */
        int rc;
        if (evbuffer_reserve_space(out, OUT_CHUNK, &iov, 1) < 1)
            goto fail;
        left = iov.iov_len > UINT_MAX ? UINT_MAX : iov.iov_len;
        iov.iov_len = left;
        if (e->coding == GW_ENC_GZIP)
            rc = gz_step(e, now, &p, &take, iov.iov_base, &left, &done);
        else if (e->coding == GW_ENC_BR)
            rc = br_step(e, now, &p, &take, iov.iov_base, &left, &done);
        else
            rc = zs_step(e, now, &p, &take, iov.iov_base, &left, &done);
        len = rest + take;
        done = done && !rest;
        iov.iov_len -= left;
        if (evbuffer_commit_space(out, &iov, 1) < 0 || rc < 0 || e->mem > e->mem_max)
            goto fail;
    }
    if (op == OP_FINISH)
        e->finished = true;
    return 0;

fail:
    e->failed = true;
    return -1;
}

int gw_encoder_write(struct gw_encoder *e, const void *in, size_t len, struct evbuffer *out)
{
    if (!len)
        return e->failed || e->finished ? -1 : 0;
    return run(e, OP_PROCESS, in, len, out);
}

int gw_encoder_flush(struct gw_encoder *e, struct evbuffer *out)
{
    return run(e, OP_FLUSH, NULL, 0, out);
}

int gw_encoder_finish(struct gw_encoder *e, struct evbuffer *out)
{
    return run(e, OP_FINISH, NULL, 0, out);
}

size_t gw_encoder_mem(const struct gw_encoder *e)
{
    return sizeof(*e) + e->mem;
}

size_t gw_encoder_mem_peak(const struct gw_encoder *e)
{
    return sizeof(*e) + e->peak;
}

void gw_encoder_free(struct gw_encoder *e)
{
    if (!e)
        return;
    if (e->coding == GW_ENC_GZIP)
        deflateEnd(&e->u.z);
    else if (e->coding == GW_ENC_BR)
        BrotliEncoderDestroyInstance(e->u.br);
    else
        ZSTD_freeCCtx(e->u.zs);
    free(e);
}

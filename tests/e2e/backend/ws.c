/*
 * ws.c - the WebSocket side of the test backend (RFC 6455), after a 101.
 *
 * Every client frame is mirrored: a data frame (text, binary, continuation)
 * comes back unmasked with the same opcode, FIN bit and length, its payload
 * streamed through as it arrives, so fragmentation is preserved and no message
 * is ever buffered whole. Ping gets a pong with the same payload, close gets a
 * close with the same payload; pong is ignored. A protocol violation (unmasked
 * frame, RSV bits, unknown opcode, bad fragmentation, long control frame) is
 * answered with close 1002.
 */
#include "backend_int.h"

#include <event2/buffer.h>

#include <string.h>

#define TB_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void tb_ws_init(struct tb_ws *ws)
{
    memset(ws, 0, sizeof(*ws));
    ws->in_header = true;
}

int tb_ws_accept_key(const char *key, size_t klen, char acc[29])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = -1;

    if (!ctx)
        return -1;
    if (EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) == 1 && EVP_DigestUpdate(ctx, key, klen) == 1 &&
        EVP_DigestUpdate(ctx, TB_WS_GUID, sizeof(TB_WS_GUID) - 1) == 1 &&
        EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 20) {
        EVP_EncodeBlock((unsigned char *)acc, md, 20); /* 28 chars + NUL */
        rc = 0;
    }
    EVP_MD_CTX_free(ctx);
    return rc;
}

/* Queue a frame header: FIN + <opcode>, unmasked, <len> payload bytes. */
static int put_header(struct evbuffer *out, bool fin, uint8_t opcode, uint64_t len)
{
    uint8_t h[10];
    size_t n = 2;

    h[0] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (len < 126) {
        h[1] = (uint8_t)len;
    } else if (len <= 0xFFFF) {
        h[1] = 126;
        h[2] = (uint8_t)(len >> 8);
        h[3] = (uint8_t)len;
        n = 4;
    } else {
        h[1] = 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        n = 10;
    }
    return evbuffer_add(out, h, n);
}

/* Queue close frame with status <code> and no reason. */
static int put_close(struct evbuffer *out, uint16_t code)
{
    uint8_t p[2] = {(uint8_t)(code >> 8), (uint8_t)code};

    if (put_header(out, true, 0x8, 2) < 0)
        return -1;
    return evbuffer_add(out, p, 2);
}

/* Parse and validate the header at the front of <in>. Returns 1 when a frame
 * has been started, 0 when more bytes are needed, -1 on a protocol error. */
static int read_header(struct tb_ws *ws, struct evbuffer *in, struct evbuffer *out)
{
    uint8_t h[14];
    size_t have = evbuffer_get_length(in), need;
    uint64_t len;
    uint8_t op, l7;
    bool control;

    if (have < 2)
        return 0;
    evbuffer_copyout(in, h, have < sizeof(h) ? have : sizeof(h));
    op = h[0] & 0x0F;
    l7 = h[1] & 0x7F;
    need = 2 + (l7 == 126 ? 2 : l7 == 127 ? 8 : 0) + 4;
    if ((h[0] & 0x70) || !(h[1] & 0x80))
        return -1; /* RSV bits without an extension, or unmasked client frame */
    if (have < need)
        return 0;
    if (l7 == 126) {
        len = (uint64_t)h[2] << 8 | h[3];
    } else if (l7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | h[2 + i];
        if (len >> 63)
            return -1;
    } else {
        len = l7;
    }
    control = op & 0x8;
    if (control ? (op > 0xA || !(h[0] & 0x80) || len > 125)
                : (op > 0x2 || (op == 0) != ws->fragmented))
        return -1;
    memcpy(ws->mask, h + need - 4, 4);
    ws->mpos = 0;
    ws->opcode = op;
    ws->fin = h[0] & 0x80;
    ws->left = len;
    ws->ctl_len = 0;
    ws->in_header = false;
    evbuffer_drain(in, need);
    if (!control) {
        ws->fragmented = !ws->fin;
        if (put_header(out, ws->fin, op, len) < 0)
            return -2;
    }
    return 1;
}

/* Move payload bytes from <in> to <out> (data) or ws->ctl (control), unmasking. */
static int pump_payload(struct tb_ws *ws, struct evbuffer *in, struct evbuffer *out)
{
    uint8_t tmp[16384];

    while (ws->left > 0 && evbuffer_get_length(out) < TB_OUT_HIGH) {
        size_t want = ws->left < sizeof(tmp) ? (size_t)ws->left : sizeof(tmp);
        int n = evbuffer_remove(in, tmp, want);

        if (n <= 0)
            break;
        for (int i = 0; i < n; i++)
            tmp[i] ^= ws->mask[ws->mpos++ & 3];
        if (ws->opcode & 0x8) {
            memcpy(ws->ctl + ws->ctl_len, tmp, (size_t)n);
            ws->ctl_len = (uint8_t)(ws->ctl_len + n);
        } else if (evbuffer_add(out, tmp, (size_t)n) < 0) {
            return -1;
        }
        ws->left -= (uint64_t)n;
    }
    return 0;
}

enum tb_ws_result tb_ws_process(struct tb_ws *ws, struct evbuffer *in, struct evbuffer *out)
{
    while (evbuffer_get_length(out) < TB_OUT_HIGH) {
        if (ws->in_header) {
            int r = read_header(ws, in, out);

            if (r == 0)
                return TB_WS_MORE;
            if (r == -2)
                return TB_WS_ERROR;
            if (r < 0)
                return put_close(out, 1002) < 0 ? TB_WS_ERROR : TB_WS_CLOSE;
        }
        if (pump_payload(ws, in, out) < 0)
            return TB_WS_ERROR;
        if (ws->left > 0)
            return TB_WS_MORE; /* input dry or output full */
        ws->in_header = true;
        if (ws->opcode == 0x9 || ws->opcode == 0x8) {
            uint8_t reply = ws->opcode == 0x9 ? 0xA : 0x8;

            if (put_header(out, true, reply, ws->ctl_len) < 0 ||
                evbuffer_add(out, ws->ctl, ws->ctl_len) < 0)
                return TB_WS_ERROR;
            if (ws->opcode == 0x8)
                return TB_WS_CLOSE;
        }
    }
    return TB_WS_MORE;
}

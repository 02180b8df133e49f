/*
 * admin/http1/forwarded.h - the syntax of the fields that carry a client's
 * address through proxies: RFC 7239 Forwarded elements (pairs, tokens,
 * quoted strings, the "for" parameter) and node names (IPv4, IPv6 in
 * brackets, ports, obfuscated identifiers), also as X-Forwarded-For writes
 * them. Which of the addresses to believe is the gateway's business
 * (gateway/clientip.c). Pure: no allocation, no state.
 */
#ifndef SY_ADMIN_HTTP1_FORWARDED_H
#define SY_ADMIN_HTTP1_FORWARDED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "admin/http1/token.h"

/* The longest "for" value h1_forwarded_next() unquotes into a caller's
 * buffer: "[" IPv6 "]:" port fits with room to spare. */
#define H1_FWD_VALUE_MAX 64

/* One element of a Forwarded field (RFC 7239 4): its "for" value. */
enum h1_fwd_elem {
    H1_FWD_FOR,     /* *for holds the value, unquoted */
    H1_FWD_NO_FOR,  /* a valid element without "for" */
    H1_FWD_INVALID, /* a syntax error: the rest of the field is this element */
};

/*
 * Parses the next element of the Forwarded field value <v> from *<pos>
 * (start at 0) and advances *<pos> past it and its comma. A quoted value is
 * unescaped into <buf> (H1_FWD_VALUE_MAX bytes) and *for points there;
 * a token value points into <v>. A "for" given twice, a value longer than
 * the buffer, or any syntax error is H1_FWD_INVALID, and then *<pos> is
 * past the end: what follows a syntax error cannot be split reliably.
 * Returns false when the field is done; empty elements ("a,,b") are
 * skipped.
 */
bool h1_forwarded_next(struct h1_slice v, size_t *pos, enum h1_fwd_elem *kind,
                       struct h1_slice *for_value, char *buf);

/*
 * The address a node name <s>[0..<n>) names (RFC 7239 6): "192.0.2.60",
 * "192.0.2.60:4711", "[2001:db8::17]", "[2001:db8::17]:4711", a port
 * obfuscated as "_name", and bare IPv6 as X-Forwarded-For often carries it.
 * Fills *<out> (AF_INET or AF_INET6, port 0) and returns 0; -1 for
 * "unknown", an obfuscated identifier ("_hidden") or anything else that is
 * not an address.
 */
int h1_node_addr(const char *s, size_t n, struct sockaddr_storage *out);

#endif /* SY_ADMIN_HTTP1_FORWARDED_H */

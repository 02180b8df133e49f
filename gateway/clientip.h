/*
 * clientip.h - the client's address as the config's client_ip derives it
 * (clientip.c): the peer's, or the rightmost untrusted hop of
 * X-Forwarded-For or Forwarded, or one header's from a trusted peer. It is
 * what the access log shows, what X-Real-IP carries upstream and what a
 * pool's hash on client_ip hashes.
 */
#ifndef SY_GATEWAY_CLIENTIP_H
#define SY_GATEWAY_CLIENTIP_H

#include <stddef.h>
#include <sys/socket.h>

#include "admin/config.h"
#include "admin/http1/request.h"

/* Derives the client address of request <rq> from peer <peer> under <ci>,
 * whose proxies are <trusted>[0..<ntrusted>) (ci->trusted, or
 * trusted_proxies when ci has none). Returns 1 with the address in *<out>
 * (port 0) when it is not the peer's, 0 when it is. Pure.
 * - peer: always the peer.
 * - x_forwarded_for, forwarded: the peer, then the list from the right
 *   (every field of it in order, one list); trusted hops are skipped and
 *   the first untrusted one is the client. A hop that is not an address
 *   ("unknown", "_hidden", garbage) ends the walk: the client is the
 *   trusted hop to its right. All hops trusted: the leftmost.
 * - header:NAME: its address when the peer is trusted and the request has
 *   exactly one such field holding one address; else the peer. */
int gw_cip_derive(const struct adm_client_ip *ci, const struct adm_cidr *trusted, size_t ntrusted,
                  const struct h1_request *rq, const struct sockaddr *peer,
                  struct sockaddr_storage *out);

struct gw_req;

/* The client address of <c>'s current request as text (its length in
 * *<len>): derived once per request under the listener's client_ip, else
 * the config's; the peer's address when neither is set, or before a
 * request head is complete. Valid until the request is done. */
const char *gw_client_ip_text(struct gw_req *r, size_t *len);

/* The same address as bytes (4 for IPv4, 16 for IPv6; an IPv4-mapped
 * peer is 16), for hashing: a pool's "hash_key": "client_ip". */
const unsigned char *gw_client_ip(struct gw_req *r, size_t *len);

/* Whether <c>'s request is under a client_ip (so X-Real-IP goes up). */
const struct adm_client_ip *gw_client_ip_config(struct gw_req *r);

#endif

/*
 * tunnel.h - a request that became a tunnel after its 101 (tunnel.c).
 */
#ifndef SY_GATEWAY_TUNNEL_H
#define SY_GATEWAY_TUNNEL_H

#include "gateway/conn.h"

/* After the 101 went to the client: the request is counted (its line waits
 * for the close), its snapshot released, and bytes go both ways. */
void gw_tunnel_start(struct gw_req *r);
/* A tunnel's bytes from the client up, with backpressure (the client's
 * read callback). */
void gw_tunnel_up(struct gw_req *r);
/* The client's output drained: the upstream is read again. */
void gw_tunnel_drained(struct gw_req *r);
/* An upgrade's drain deadline: the upstream is let go, a WebSocket's
 * client gets a close frame (1001, going away) after what it still has to
 * get, and the connection closes once that is out. */
void gw_tunnel_going_away(struct gw_req *r);

#endif

/*
 * hashkey.h - the hash balancer's key of a request (hashkey.c).
 */
#ifndef SY_GATEWAY_HASHKEY_H
#define SY_GATEWAY_HASHKEY_H

#include "gateway/conn.h"

/* up_hash() of the key that upstream <u> (balance "hash") balances request
 * <c> on: hash_key client_ip, header:NAME, cookie:NAME or path. A missing
 * header or cookie is the empty key. */
uint64_t gw_hashkey(struct gw_req *r, const struct adm_upstream *u);

#endif

/*
 * gateway/request.h - the gateway's names for the request parser and the
 * HTTP primitives of admin/http1/, where they live (see request.h, token.h,
 * path.h and status.h there).
 *
 * Transitional: the gateway's files are being split while the primitives
 * moved, and these aliases let both happen at once without either editing
 * the other's lines. New code says h1_ directly; once no file uses a gw_
 * name below, this header goes.
 */
#ifndef SY_GATEWAY_REQUEST_H
#define SY_GATEWAY_REQUEST_H

#include "admin/http1/path.h"
#include "admin/http1/request.h"
#include "admin/http1/status.h"
#include "admin/http1/token.h"

#define gw_slice h1_slice
#define gw_header h1_header
#define gw_request h1_request
#define gw_req_parser h1_req_parser
#define gw_req_limits h1_req_limits
#define gw_req_body_cb h1_req_body_cb
#define gw_body_kind h1_body_kind
#define gw_target_form h1_target_form

#define GW_REQ_ERROR H1_REQ_ERROR
#define GW_REQ_AGAIN H1_REQ_AGAIN
#define GW_REQ_HEAD H1_REQ_HEAD
#define GW_REQ_DONE H1_REQ_DONE
#define GW_REQ_MAX_CONN_TOKENS H1_REQ_MAX_CONN_TOKENS
#define GW_METHOD_OTHER H1_METHOD_OTHER
#define GW_BODY_NONE H1_BODY_NONE
#define GW_BODY_LENGTH H1_BODY_LENGTH
#define GW_BODY_CHUNKED H1_BODY_CHUNKED
#define GW_TARGET_ORIGIN H1_TARGET_ORIGIN
#define GW_TARGET_ABSOLUTE H1_TARGET_ABSOLUTE
#define GW_TARGET_AUTHORITY H1_TARGET_AUTHORITY
#define GW_TARGET_ASTERISK H1_TARGET_ASTERISK

#define gw_req_limits_default h1_req_limits_default
#define gw_req_parser_init h1_req_parser_init
#define gw_req_reset h1_req_reset
#define gw_req_parser_free h1_req_parser_free
#define gw_req_feed_head h1_req_feed_head
#define gw_req_confirm h1_req_confirm
#define gw_req_feed_body h1_req_feed_body
#define gw_request_header h1_request_header
#define gw_path_normalize h1_path_normalize
#define gw_status_reason h1_status_reason

#endif /* SY_GATEWAY_REQUEST_H */

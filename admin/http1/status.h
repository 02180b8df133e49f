/*
 * admin/http1/status.h - the reason phrases of HTTP status codes, one table
 * for every response Switchyard writes itself: the gateway's local answers,
 * configured direct responses and redirects, and the admin API.
 */
#ifndef SY_ADMIN_HTTP1_STATUS_H
#define SY_ADMIN_HTTP1_STATUS_H

/* The reason phrase of <status> as RFC 9110 15 (and RFC 6585, 7725, 8297
 * for 103, 428, 429, 431, 451, 511) names it: "Content Too Large",
 * "Misdirected Request", "Not Implemented". "Unknown" for a code none of
 * them registers (a reason phrase carries no meaning, RFC 9112 4). The
 * string is static. */
const char *h1_status_reason(int status);

#endif /* SY_ADMIN_HTTP1_STATUS_H */

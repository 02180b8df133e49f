/*
 * admin/http1/status.c - the reason-phrase table (see status.h), indexed by
 * status code so that a lookup is one load.
 */
#include "admin/http1/status.h"

#include <stddef.h>

#define R(code, text) [(code)-100] = (text)

static const char *const reasons[500] = {
    R(100, "Continue"),
    R(101, "Switching Protocols"),
    R(103, "Early Hints"),
    R(200, "OK"),
    R(201, "Created"),
    R(202, "Accepted"),
    R(203, "Non-Authoritative Information"),
    R(204, "No Content"),
    R(205, "Reset Content"),
    R(206, "Partial Content"),
    R(300, "Multiple Choices"),
    R(301, "Moved Permanently"),
    R(302, "Found"),
    R(303, "See Other"),
    R(304, "Not Modified"),
    R(305, "Use Proxy"),
    R(307, "Temporary Redirect"),
    R(308, "Permanent Redirect"),
    R(400, "Bad Request"),
    R(401, "Unauthorized"),
    R(402, "Payment Required"),
    R(403, "Forbidden"),
    R(404, "Not Found"),
    R(405, "Method Not Allowed"),
    R(406, "Not Acceptable"),
    R(407, "Proxy Authentication Required"),
    R(408, "Request Timeout"),
    R(409, "Conflict"),
    R(410, "Gone"),
    R(411, "Length Required"),
    R(412, "Precondition Failed"),
    R(413, "Content Too Large"),
    R(414, "URI Too Long"),
    R(415, "Unsupported Media Type"),
    R(416, "Range Not Satisfiable"),
    R(417, "Expectation Failed"),
    R(421, "Misdirected Request"),
    R(422, "Unprocessable Content"),
    R(426, "Upgrade Required"),
    R(428, "Precondition Required"),
    R(429, "Too Many Requests"),
    R(431, "Request Header Fields Too Large"),
    R(451, "Unavailable For Legal Reasons"),
    R(500, "Internal Server Error"),
    R(501, "Not Implemented"),
    R(502, "Bad Gateway"),
    R(503, "Service Unavailable"),
    R(504, "Gateway Timeout"),
    R(505, "HTTP Version Not Supported"),
    R(511, "Network Authentication Required"),
};

#undef R

const char *h1_status_reason(int status)
{
    const char *r = status >= 100 && status < 600 ? reasons[status - 100] : NULL;

    return r != NULL ? r : "Unknown";
}

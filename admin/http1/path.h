/*
 * admin/http1/path.h - the normal form of a request path, the one the
 * router sees: the gateway normalizes every request's path with it, and the
 * admin API's /routes/match the path it is asked about, so both agree on
 * which route a request hits.
 */
#ifndef SY_ADMIN_HTTP1_PATH_H
#define SY_ADMIN_HTTP1_PATH_H

#include <stddef.h>

/*
 * Normalizes the path <in>[0..<len>) into <out> (<cap> bytes; <in> and <out>
 * must not overlap) and NUL-terminates it; *outlen gets its length:
 * - percent-escapes of unreserved characters (ALPHA DIGIT - . _ ~) are
 *   decoded; every other escape is kept with upper-case hex ("%2f" -> "%2F"),
 *   so an encoded '/' is never a separator;
 * - dot segments are removed (RFC 3986 5.2.4) after that decoding, so
 *   "%2e%2E" is "..", and ".." at the root stays at the root;
 * - with <merge_slashes>, runs of '/' become one.
 * <in> must be empty (result "/") or start with '/'. The result starts with
 * '/' and is never longer than <in> (except "" -> "/"). Returns 0, or -1 for
 * an invalid escape ('%' not followed by two hex digits), a raw byte outside
 * 0x21-0x7E, an <in> not starting with '/', or <cap> < <len> + 1 (2 for an
 * empty <in>).
 */
int h1_path_normalize(const char *in, size_t len, char *out, size_t cap, int merge_slashes,
                      size_t *outlen);

#endif /* SY_ADMIN_HTTP1_PATH_H */

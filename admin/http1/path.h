/*
 * admin/http1/path.h - the normal form of a request path, the one the
 * router sees: the gateway normalizes every request's path with it, and the
 * admin API's /routes/match the path it is asked about, so both agree on
 * which route a request hits. What a backend may read differently from the
 * router (an escaped slash, a backslash, "..;") is reported, and
 * router.escaped_slashes (h1_path_route()) decides what becomes of it.
 */
#ifndef SY_ADMIN_HTTP1_PATH_H
#define SY_ADMIN_HTTP1_PATH_H

#include <stddef.h>

/* h1_path_normalize()'s <opts>. */
#define H1_PATH_MERGE_SLASHES 1u  /* runs of '/' become one */
#define H1_PATH_DECODE_SLASHES 2u /* "%2F", "%5C" and '\' separate segments, as '/' */

/* What h1_path_normalize() found, in *found: what a backend may read
 * differently from the router. */
#define H1_PATH_SLASH_ESCAPE 1u /* "%2F" or "%5C" (any case), or a raw '\' */
#define H1_PATH_DOT_PARAMS 2u   /* a segment "." or ".." with ";parameters": "..;x" */
/* a ".." that removes a segment whose name (what precedes its first ';') is
 * empty: "/a/;x/..", "/a/;/..", "/a//.." unmerged. A backend that drops
 * ";params" and merges slashes first removes the segment before it. */
#define H1_PATH_POPS_EMPTY 4u

/*
 * Normalizes the path <in>[0..<len>) into <out> (<cap> bytes; <in> and <out>
 * must not overlap) and NUL-terminates it; *outlen gets its length:
 * - percent-escapes of unreserved characters (ALPHA DIGIT - . _ ~) are
 *   decoded; every other escape is kept with upper-case hex ("%2f" -> "%2F"),
 *   so an encoded '/' is never a separator, unless <opts> has
 *   H1_PATH_DECODE_SLASHES: then "%2F", "%5C" and a raw '\' each become '/';
 * - dot segments are removed (RFC 3986 5.2.4) after that decoding, so
 *   "%2e%2E" is "..", and ".." at the root stays at the root;
 * - with H1_PATH_MERGE_SLASHES in <opts>, runs of '/' become one.
 * *found gets the H1_PATH_* flags of what the path holds (decoded or not).
 * <in> must be empty (result "/") or start with '/'. The result starts with
 * '/' and is never longer than <in> (except "" -> "/"). Returns 0, or -1 for
 * an invalid escape ('%' not followed by two hex digits), an escaped control
 * character ("%00" to "%1F", "%7F": nginx refuses "%00" alike), a raw byte
 * outside 0x21-0x7E, an <in> not starting with '/', or <cap> < <len> + 1 (2
 * for an empty <in>).
 */
int h1_path_normalize(const char *in, size_t len, char *out, size_t cap, unsigned opts,
                      unsigned *found, size_t *outlen);

/* router.escaped_slashes: what becomes of a path with an escaped slash or
 * backslash, a dot segment with parameters ("..;"), or a ".." after a
 * segment with no name ("/a/;x/.."), all of which a backend may resolve to
 * another path than the router saw (Envoy's
 * path_with_escaped_slashes_action). */
enum h1_escaped_slashes {
    H1_SLASHES_REJECT, /* 400 (the default) */
    H1_SLASHES_DECODE, /* "%2F", "%5C", '\' are separators; "..;", ";x/.." are 400 */
    H1_SLASHES_KEEP,   /* kept as they are: "%2F" is no separator */
};

/*
 * The path the router sees under <mode>: h1_path_normalize() with <opts>,
 * and when that finds anything (*found): H1_SLASHES_REJECT refuses it;
 * H1_SLASHES_DECODE normalizes it again with H1_PATH_DECODE_SLASHES and
 * refuses a dot segment with parameters or a ".." that removes a segment
 * with no name; H1_SLASHES_KEEP keeps it. Returns 0, -1 as
 * h1_path_normalize(), or -2 for a path <mode> refuses.
 */
int h1_path_route(const char *in, size_t len, char *out, size_t cap, unsigned opts,
                  enum h1_escaped_slashes mode, unsigned *found, size_t *outlen);

/*
 * Whether the normalized path <p>[0..<n>) (with or without its leading
 * '/') climbs above its root when read as the most lenient backend reads it:
 * "%2F", "%5C" and '\' taken for '/', a segment's ";parameters" dropped
 * ("/..%2Fx", "/a%2F..%2F..", "/..;x/y"). A strip_prefix or rewrite result
 * that does is never sent upstream.
 */
int h1_path_climbs(const char *p, size_t n);

/* h1_path_climbs() over a path given in pieces (a rewrite's parts and
 * parameters): h1_climb_init(), h1_climb_feed() each piece in order, and
 * h1_climb_end() says whether their concatenation climbs. */
struct h1_climb {
    size_t depth;         /* segments below the root */
    size_t name;          /* bytes of the current segment's name (before its ';') */
    char head[2];         /* the name's first two bytes */
    char pendc;           /* with pend 2: the escape's first hex digit, '2' or '5' */
    unsigned char pend;   /* bytes of a possible "%2F" or "%5C" held back */
    unsigned char params; /* in the current segment's ";params" */
    unsigned char up;     /* it climbed */
};
void h1_climb_init(struct h1_climb *c);
void h1_climb_feed(struct h1_climb *c, const char *p, size_t n);
int h1_climb_end(struct h1_climb *c);

#endif /* SY_ADMIN_HTTP1_PATH_H */

/*
 * errors.h - error lists: what a validator found, each error with the JSON
 * pointer (RFC 6901) of the value it is about. The config parser fills them,
 * the admin API answers them as JSON, the gateway logs them one a line.
 * Nothing here prints.
 */
#ifndef SY_ADMIN_ERRORS_H
#define SY_ADMIN_ERRORS_H

#include <stdarg.h>
#include <stddef.h>

#include <jansson.h>

#if defined(__GNUC__)
#define ADM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ADM_PRINTF(f, a)
#endif

struct adm_error {
    char *path; /* JSON pointer of the offending value; "" = the whole document */
    char *msg;  /* one human sentence, no trailing newline */
};

/* At most ADM_ERRORS_MAX errors are kept; further ones are only counted in
 * <dropped>. A zeroed struct is an empty list. */
#define ADM_ERRORS_MAX 1000
struct adm_errors {
    struct adm_error *v;
    size_t n, cap;
    size_t dropped; /* errors beyond ADM_ERRORS_MAX */
    int nomem;      /* an allocation failed: the list may be incomplete */
};

void adm_errors_init(struct adm_errors *e);
/* Frees every entry and empties <e> (which stays usable). NULL is a no-op. */
void adm_errors_clear(struct adm_errors *e);
/* Appends one error (path copied). 0, or -1 on out of memory (e->nomem set). */
int adm_errors_add(struct adm_errors *e, const char *path, const char *fmt, ...) ADM_PRINTF(3, 4);
/* adm_errors_add() with a va_list. */
int adm_errors_vadd(struct adm_errors *e, const char *path, const char *fmt, va_list ap)
    ADM_PRINTF(3, 0);
/* Formats one error as "<path>: <msg>", or just "<msg>" when the path is ""
 * (the document itself: syntax errors, I/O errors). snprintf semantics:
 * returns the length needed, <buf> always NUL-terminated when cap > 0. */
size_t adm_error_format(const struct adm_error *e, char *buf, size_t cap);
/* Every error formatted as above, one per line, each ending in '\n', plus a
 * "... and N more errors" line when some were dropped. The caller frees the
 * result with free(). NULL on out of memory. */
char *adm_errors_format(const struct adm_errors *e);
/* [{"path": "...", "message": "..."}, ...] for the admin API (new reference;
 * NULL on out of memory). */
json_t *adm_errors_json(const struct adm_errors *e);

#endif

/*
 * file_replace.h - a small file of the state directory written whole: to
 * <path>.tmp.XXXXXX (mkstemp: writers at once never share one), fsync'd,
 * renamed over <path>, the directory fsync'd (file_replace.c). A reader
 * finds the old bytes or the new, never a mix; a failure leaves the old.
 * Used for what a restart takes back without the network: fleet.json
 * (fleet_sync.c) and a jwks_url's last good set (jwks_save.c).
 */
#ifndef SY_ADMIN_FILE_REPLACE_H
#define SY_ADMIN_FILE_REPLACE_H

#include <stddef.h>

/* <n> bytes of <p> as the whole of <path> (mode 0600): 0, or -1 with
 * errno set and no temporary file left behind. */
int adm_file_replace(const char *path, const char *p, size_t n);

#endif /* SY_ADMIN_FILE_REPLACE_H */

/*
 * file_replace.c - a file written whole and renamed into place
 * (file_replace.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "admin/file_replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int adm_file_replace(const char *path, const char *p, size_t n)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 12), *dir, *slash;
    int fd, e, dfd;

    if (!tmp) {
        errno = ENOMEM;
        return -1;
    }
    /* a name of its own: an upgrade's two processes may write at once */
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    if ((fd = mkstemp(tmp)) < 0) { /* 0600 */
        free(tmp);
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (write_all(fd, p, n) == 0 && fsync(fd) == 0 && close(fd) == 0) {
        fd = -1;
        if (rename(tmp, path) == 0) {
            /* the rename itself made durable, as config.json's */
            if ((dir = strdup(path)) && (slash = strrchr(dir, '/'))) {
                *slash = '\0';
                if ((dfd = open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
                    fsync(dfd);
                    close(dfd);
                }
            }
            free(dir);
            free(tmp);
            return 0;
        }
    }
    e = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    errno = e;
    return -1;
}

/*
 * bench_common.c - the --listen parser and the atomic file writer that the
 * benchmark upstreams share (see bench_common.h).
 */
#include "loadtest/upstream/bench_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bench_parse_listen(const char *arg, struct sockaddr_in *sin)
{
    static const char prefix[] = "127.0.0.1:";
    char *end;
    long port;

    if (strncmp(arg, prefix, sizeof(prefix) - 1) != 0)
        return -1;
    errno = 0;
    port = strtol(arg + sizeof(prefix) - 1, &end, 10);
    if (errno || *end || end == arg + sizeof(prefix) - 1 || port < 0 || port > 65535)
        return -1;
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons((unsigned short)port);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return 0;
}

int bench_write_file(const char *path, const char *text)
{
    char tmp[4096];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
        return -1;
    f = fopen(tmp, "w");
    if (!f)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0)
        goto fail_unlink;
    if (rename(tmp, path) < 0)
        goto fail_unlink;
    return 0;

fail_unlink:
    unlink(tmp);
    return -1;
}

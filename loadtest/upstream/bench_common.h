/*
 * bench_common.h - what the benchmark upstreams (bench_upstream, bench_grpc)
 * share: their --listen argument and the files they tell a script through.
 */
#ifndef SY_LOADTEST_BENCH_COMMON_H
#define SY_LOADTEST_BENCH_COMMON_H

#include <netinet/in.h>

/* Parses "127.0.0.1:PORT" (PORT 0..65535) into <sin>. Returns 0, or -1 for
 * anything else: these servers are for loopback benchmarks only. */
int bench_parse_listen(const char *arg, struct sockaddr_in *sin);

/* Writes <text> to <path> through a temporary file and rename(), so that a
 * reader polling for the file never sees it half written. Returns 0 or -1
 * (errno set). */
int bench_write_file(const char *path, const char *text);

#endif

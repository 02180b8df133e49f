/*
 * jwks_server.h - jwks_server.py for the C tests of the JWKS URL
 * (test_jwks_fetch.c, test_jwks_remote.c): a directory with a certificate
 * for IP 127.0.0.1 made by the openssl CLI, and the HTTPS server on it,
 * once per test process. Static functions: each test includes it once.
 */
#ifndef SY_TESTS_ADMIN_JWKS_SERVER_H
#define SY_TESTS_ADMIN_JWKS_SERVER_H

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SY_TEST_DIR
#define SY_TEST_DIR "tests/admin"
#endif

/* The served directory is <jwks_dir>/www; the certificate <jwks_dir>/cert.pem. */
static char jwks_dir[256];
static unsigned jwks_port;
static pid_t jwks_pid;

/* Serves <text> as <name> (whole or not at all: the server may be reading
 * it); NULL removes it (a 404). */
static void jwks_serve(const char *name, const char *text)
{
    char path[512], tmp[520];
    FILE *f;

    snprintf(path, sizeof(path), "%s/www/%s", jwks_dir, name);
    if (!text) {
        unlink(path);
        return;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

/* The certificate, the directory and the server; exits the process when
 * they cannot be had. */
static void jwks_server_start(void)
{
    char cmd[1024], portfile[300], buf[16];
    FILE *f;

    snprintf(jwks_dir, sizeof(jwks_dir), "/tmp/sy-jwks-test-XXXXXX");
    if (!mkdtemp(jwks_dir))
        exit(EXIT_FAILURE);
    snprintf(cmd, sizeof(cmd),
             "cd %s && mkdir www && openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 -days 2 >gen.log 2>&1",
             jwks_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "openssl failed: see %s/gen.log\n", jwks_dir);
        exit(EXIT_FAILURE);
    }
    snprintf(portfile, sizeof(portfile), "%s/port", jwks_dir);
    jwks_pid = fork();
    if (jwks_pid == 0) {
        char cert[300], key[300], www[300];
        snprintf(cert, sizeof(cert), "%s/cert.pem", jwks_dir);
        snprintf(key, sizeof(key), "%s/key.pem", jwks_dir);
        snprintf(www, sizeof(www), "%s/www", jwks_dir);
        execl("/usr/bin/python3", "python3", SY_TEST_DIR "/jwks_server.py", cert, key, www,
              portfile, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !jwks_port; i++) { /* 10 s at most */
        struct timespec ms50 = {0, 50000000};
        if ((f = fopen(portfile, "r"))) {
            if (fgets(buf, sizeof(buf), f))
                jwks_port = (unsigned)atoi(buf);
            fclose(f);
        }
        if (!jwks_port)
            nanosleep(&ms50, NULL);
    }
    if (!jwks_port) {
        fprintf(stderr, "jwks_server.py did not start\n");
        kill(jwks_pid, SIGTERM);
        exit(EXIT_FAILURE);
    }
}

/* Stops the server and removes the directory. */
static void jwks_server_stop(void)
{
    char cmd[300];

    kill(jwks_pid, SIGTERM);
    waitpid(jwks_pid, NULL, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", jwks_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", jwks_dir);
}

/* Runs suite <s> (taken) between the server's start and stop: the exit
 * status of the test's main(). */
static int jwks_run(Suite *s)
{
    SRunner *sr;
    int failed;

    signal(SIGPIPE, SIG_IGN);
    jwks_server_start();
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    jwks_server_stop();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* SY_TESTS_ADMIN_JWKS_SERVER_H */

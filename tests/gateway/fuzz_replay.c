/*
 * tests/gateway/fuzz_replay.c - runs a libFuzzer target without libFuzzer:
 * every file of the corpus directories named on the command line, then
 * fixed-seed mutations of them (flip, insert, delete, duplicate, splice).
 * Linked with a harness that defines LLVMFuzzerTestOneInput() and
 * fuzz_prefix, the number of leading bytes of its inputs that are settings
 * rather than data (splices keep them). Run by ctest.
 */
#define _POSIX_C_SOURCE 200809L /* dirent, stat */

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/gateway/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const size_t fuzz_prefix;

#define MAX_FILES 512
#define MAX_INPUT 65536
#define MUTATIONS 200000

static char *files[MAX_FILES];
static size_t file_len[MAX_FILES];
static size_t nfiles;
static const char *prog = "fuzz replay";

static void load(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    if (f == NULL || nfiles == MAX_FILES) {
        if (f != NULL)
            fclose(f);
        return;
    }
    buf = malloc(MAX_INPUT);
    CHECK(buf != NULL);
    n = fread(buf, 1, MAX_INPUT, f);
    fclose(f);
    files[nfiles] = buf;
    file_len[nfiles++] = n;
}

static void load_arg(const char *path)
{
    struct stat st;
    DIR *dir;
    struct dirent *e;
    char full[4096];

    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: cannot stat %s\n", prog, path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        load(path);
        return;
    }
    dir = opendir(path);
    CHECK(dir != NULL);
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
            load(full);
    }
    closedir(dir);
}

int main(int argc, char **argv)
{
    static uint8_t buf[MAX_INPUT * 2];
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    size_t k, runs = 0;
    int a;

    prog = argv[0];
    for (a = 1; a < argc; a++)
        load_arg(argv[a]);
    if (nfiles == 0) {
        fprintf(stderr, "%s: no corpus files\n", prog);
        return 2;
    }
    for (k = 0; k < nfiles; k++, runs++)
        LLVMFuzzerTestOneInput((const uint8_t *)files[k], file_len[k]);

    /* Mutations: flip, insert, delete, duplicate and splice bytes. */
    for (k = 0; k < MUTATIONS; k++, runs++) {
        size_t f = (size_t)(rng_next(&rng) % nfiles), n = file_len[f], m, edits, e;

        memcpy(buf, files[f], n);
        edits = 1 + (size_t)(rng_next(&rng) % 4);
        for (e = 0; e < edits && n > 0; e++) {
            uint64_t r = rng_next(&rng);
            size_t at = (size_t)((r >> 8) % n);

            switch (r & 7) {
            case 0:
            case 1:
                buf[at] = (uint8_t)(r >> 32);
                break;
            case 2:
                buf[at] = (uint8_t) "\r\n :;,\t\"%/.0aF\x7f\x80"[(r >> 32) % 17];
                break;
            case 3:
                if (n < MAX_INPUT) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = (uint8_t) "\r\n :;,\t\"%/.0aF"[(r >> 32) % 15];
                    n++;
                }
                break;
            case 4:
                m = 1 + (size_t)((r >> 32) % 8);
                if (m > n - at)
                    m = n - at;
                memmove(buf + at, buf + at + m, n - at - m);
                n -= m;
                break;
            case 5:
                m = 1 + (size_t)((r >> 32) % 32);
                if (m > n - at)
                    m = n - at;
                if (n + m <= MAX_INPUT) {
                    memmove(buf + at + m, buf + at, n - at);
                    n += m;
                }
                break;
            case 6: {
                size_t g = (size_t)((r >> 16) % nfiles), gl = file_len[g];

                if (gl > fuzz_prefix && at + (gl - fuzz_prefix) <= MAX_INPUT) {
                    memcpy(buf + at, files[g] + fuzz_prefix, gl - fuzz_prefix);
                    n = at + (gl - fuzz_prefix);
                }
                break;
            }
            default:
                n = at;
                break;
            }
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    printf("%s: %zu corpus files, %zu runs, all invariants held\n", prog, nfiles, runs);
    return 0;
}

/* Usage: foreign_arena [DIR]: with DIR, also raise SIGUSR2 and wait until the report
 * EBB_REPORT_SIGNAL=USR2 writes (DIR/report.PID.txt) is there; prints "signal report
 * seen" (or FAIL after 20 s).
 *
 * A second allocator in the process, as LMDB-style C libraries carry: the program maps
 * a 320 MiB arena itself and carves records out of it, while malloc (ebb, preloaded)
 * serves ~24 MiB beside it. The retention report must name the arena as memory ebb
 * does not own, by its address range.
 *
 * Prints "ebb=yes|no", the arena's range as "arena=START-END" (hex), the report as
 * JSON on one line ("retention={...}"), and "done". EBB_REPORT (if set) writes the
 * report again at exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ebb.h"

#define MiB ((size_t)1 << 20)

/* The arena: a bump allocator over one mapping, never given back. */
struct arena {
    char *base;
    size_t size, used;
};

static void *arena_alloc(struct arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (a->used + n > a->size)
        return NULL;
    void *p = a->base + a->used;
    a->used += n;
    return p;
}

int main(int argc, char **argv) {
    size_t (*retention_json)(char *, size_t) =
        (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "ebb_retention_json");
    printf("ebb=%s\n", retention_json ? "yes" : "no");

    struct arena a = {0};
    a.size = 320 * MiB;
    a.base = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a.base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    /* 300 MiB of records, written (so resident). */
    for (size_t i = 0; i < 300 * MiB / 4096; i++) {
        char *record = arena_alloc(&a, 4096);
        memset(record, (int)(i & 0xff) | 1, 4096);
    }
    /* Beside it, blocks from malloc: 24 MiB in 1000-byte blocks, one in two freed. */
    enum { BLOCKS = 24 * 1024 };
    static void *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(1000);
        memset(blocks[i], 7, 1000);
    }
    for (int i = 0; i < BLOCKS; i += 2) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
    printf("arena=%lx-%lx\n", (unsigned long)(uintptr_t)a.base,
           (unsigned long)(uintptr_t)(a.base + a.size));
    if (retention_json) {
        static char buf[1 << 16];
        size_t n = retention_json(buf, sizeof buf);
        if (n >= sizeof buf) {
            printf("FAIL report of %zu bytes does not fit\n", n);
            return 1;
        }
        printf("retention=%s\n", buf);
    }
    if (argc > 1) {
        char path[4096];
        snprintf(path, sizeof path, "%s/report.%d.txt", argv[1], (int)getpid());
        raise(SIGUSR2);
        struct stat st;
        int waited = 0;
        while ((stat(path, &st) != 0 || st.st_size == 0) && waited < 2000) {
            usleep(10000);
            waited++;
        }
        if (waited == 2000) {
            printf("FAIL no report at %s after a signal\n", path);
            return 1;
        }
        printf("signal report seen\n");
    }
    printf("done\n");
    fflush(stdout);
    return 0;
}

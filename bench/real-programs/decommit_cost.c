/* What giving memory back costs the thread that does it (the purger), per GiB, by how
 * the memory is backed and how it is given back (docs/MEMORY.md, "What a purge costs
 * the kernel"):
 *   0: 4 KiB pages, MADV_DONTNEED in runs of RUN KiB;
 *   1: transparent huge pages (MADV_HUGEPAGE before the first touch), MADV_DONTNEED in
 *      runs of RUN KiB (a run smaller than 2 MiB splits the huge page first);
 *   2: 4 KiB pages, MADV_FREE in runs of RUN KiB (lazy: RSS stays until reclaim).
 * Each round maps SIZE MiB, writes every 4 KiB page, then gives it all back; the time
 * given is the calling thread's CPU (CLOCK_THREAD_CPUTIME_ID) for the give-back only,
 * the faults' cost beside it.
 *
 *   gcc -O2 -o decommit_cost decommit_cost.c && ./decommit_cost SIZE_MIB MODE RUN_KIB ROUNDS
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_FREE
#define MADV_FREE 8
#endif

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* AnonHugePages of this process, KiB. */
static long huge_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "AnonHugePages:", 14) == 0) kib = atol(line + 14);
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s SIZE_MIB MODE(0-2) RUN_KIB ROUNDS\n", argv[0]);
        return 2;
    }
    size_t size = (size_t)atol(argv[1]) << 20, run = (size_t)atol(argv[3]) << 10;
    int mode = atoi(argv[2]), rounds = atoi(argv[4]);
    const size_t align = 2UL << 20;
    double give = 0, fault = 0;
    long huge = 0;
    for (int r = 0; r < rounds; r++) {
        char *raw = mmap(NULL, size + align, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        char *p = (char *)(((unsigned long)raw + align - 1) & ~(align - 1));
        madvise(p, size, mode == 1 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        double t0 = cpu();
        for (size_t i = 0; i < size; i += 4096) p[i] = 1;
        fault += cpu() - t0;
        huge += huge_kib();
        t0 = cpu();
        for (size_t off = 0; off < size; off += run) {
            size_t len = size - off < run ? size - off : run;
            if (madvise(p + off, len, mode == 2 ? MADV_FREE : MADV_DONTNEED) != 0) {
                perror("madvise");
                return 1;
            }
        }
        give += cpu() - t0;
        munmap(raw, size + align);
    }
    double gib = (double)size * rounds / (1UL << 30);
    printf("mode %d run %zu KiB: give back %.1f ms/GiB, faults %.1f ms/GiB, huge pages %.0f%%\n",
           mode, run >> 10, give * 1e3 / gib, fault * 1e3 / gib,
           100.0 * huge / rounds / (size >> 10));
    return 0;
}

/* The cost of faulting memory in, per 2 MiB, four ways (docs/REAL-PROGRAMS.md "Dense
 * growth on by default"): 0: 512 faults of 4 KiB; 1: as ebb's dense growth does
 * (MADV_HUGEPAGE, one write, MADV_NOHUGEPAGE: one huge-page fault); 2: advised and left
 * so; 3: MADV_POPULATE_WRITE. Every 4 KiB page is then written.
 *
 *   gcc -O2 -o huge_fault_cost huge_fault_cost.c && ./huge_fault_cost UNITS MODE
 *
 * On a VM with free page reporting (virtio-balloon, /sys/module/page_reporting), a huge
 * page the host has taken back is slow to fault in again: run mode 1 after a few
 * seconds idle, then again at once. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define UNIT (2UL << 20)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s UNITS MODE(0-3)\n", argv[0]);
        return 2;
    }
    int units = atoi(argv[1]), mode = atoi(argv[2]);
    size_t size = (size_t)units * UNIT + UNIT;
    char *map = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return 1;
    char *base = (char *)(((unsigned long)map + UNIT - 1) & ~(UNIT - 1));
    double t0 = now();
    for (int i = 0; i < units; i++) {
        char *u = base + (size_t)i * UNIT;
        if (mode == 1 || mode == 2) {
            madvise(u, UNIT, MADV_HUGEPAGE);
            u[0] = 0;
            if (mode == 1) madvise(u, UNIT, MADV_NOHUGEPAGE);
        } else if (mode == 3) {
            madvise(u, UNIT, MADV_POPULATE_WRITE);
        }
        for (size_t at = 0; at < UNIT; at += 4096) u[at] = 1;
    }
    printf("mode %d: %d units, %.3f ms per 2 MiB\n", mode, units, (now() - t0) * 1e3 / units);
    return 0;
}

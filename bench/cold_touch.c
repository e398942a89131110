/* cold_touch: what one load costs on memory nobody touched for a while (the purger's
 * walks read heaps, descriptors and free lists that their threads left seconds ago).
 *
 * Touches N=1000 OS pages STRIDE bytes apart, then 4 times: sleeps SLEEP_US, reads one
 * line of each page (a different line each round) and reads them again at once.
 * Prints the TSC cycles per page of both reads. x86-64 (rdtsc).
 *
 *   cc -O2 -o /tmp/cold_touch bench/cold_touch.c
 *   for stride in 4096 8392704; do for us in 0 100000 1000000; do
 *     /tmp/cold_touch $stride $us; done; done
 *
 * Stop 40 on this 2-core VM (docs/MEMORY.md, "Stop 40"): 22-27 cycles a page with no
 * sleep; after 1 s, 1,500-2,000 at strides of 4-512 KiB and 7,000-88,000 at 2-8 MiB
 * strides (a page-table page each), varying from run to run. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <x86intrin.h>

int main(int argc, char **argv) {
    const int n = 1000;
    size_t stride = argc > 1 ? strtoul(argv[1], NULL, 10) : 4096;
    int sleep_us = argc > 2 ? atoi(argv[2]) : 1000000;
    if (stride < 4096) stride = 4096;
    char *base = mmap(NULL, stride * n + 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return 1;
    for (int i = 0; i < n; i++) base[i * stride] = 1;
    for (int round = 0; round < 4; round++) {
        usleep(sleep_us);
        size_t line = 64 * (size_t)(round + 1);
        volatile long sum = 0;
        unsigned long t0 = __rdtsc();
        for (int i = 0; i < n; i++) sum += base[i * stride + line];
        unsigned long t1 = __rdtsc();
        for (int i = 0; i < n; i++) sum += base[i * stride + line];
        unsigned long t2 = __rdtsc();
        printf("stride %zu sleep %d us: cold %lu cycles/page, again at once %lu\n", stride,
               sleep_us, (t1 - t0) / n, (t2 - t1) / n);
    }
    return 0;
}

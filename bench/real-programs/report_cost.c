/* What one retention report costs (`ebb run --breakdown` asks for one per interval,
 * `ebb report PID` for one): MIB MiB of SIZE-byte blocks, every other one freed, then
 * the mean wall time of 5 reports (`ebb_retention_json`: ebb's memory walked with
 * mincore and /proc/self/pagemap, /proc/self/smaps read). README, "Compare allocators
 * on your program".
 *
 *   cargo build --release -p ebb-capi
 *   gcc -O2 -Iinclude -o /tmp/report_cost bench/real-programs/report_cost.c \
 *       -Ltarget/release -lebb -Wl,-rpath,$PWD/target/release
 *   /tmp/report_cost 100 64 && /tmp/report_cost 1000 64 && /tmp/report_cost 1000 4096
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "ebb.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: report_cost MIB BLOCK_BYTES\n");
        return 2;
    }
    size_t mib = strtoul(argv[1], NULL, 10), size = strtoul(argv[2], NULL, 10);
    size_t n = (mib << 20) / size;
    char **blocks = malloc(n * sizeof *blocks);
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        blocks[i][0] = 1;
    }
    for (size_t i = 0; i < n; i += 2)
        free(blocks[i]);
    static char report[1 << 20];
    const int reports = 5;
    double start = now();
    for (int i = 0; i < reports; i++)
        ebb_retention_json(report, sizeof report);
    printf("%zu MiB of %zu B blocks, every other one freed: %.2f ms a report\n", mib, size,
           (now() - start) / reports * 1e3);
    return 0;
}

// What ebb's background purger costs a single-threaded program's system calls
// (docs/REAL-PROGRAMS.md, "The purger leaves the descriptor table"): frees enough to
// start the purger, then N write()s of 41 bytes to /dev/null or to FILE; prints the
// thread count and the CPU time per call. Run it preloaded with each library:
//
//   gcc -O2 -o /tmp/purger_tax bench/real-programs/purger_tax.c
//   LD_PRELOAD=target/release/libebb.so /tmp/purger_tax 2000000
//   LD_PRELOAD=target/release/libebb.so /tmp/purger_tax 1000000 /tmp/x
//   /tmp/purger_tax 2000000                                   # glibc: one thread
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int threads(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    int n = 0;
    while (status && fgets(line, sizeof line, status))
        if (!strncmp(line, "Threads:", 8)) n = atoi(line + 8);
    if (status) fclose(status);
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s N [FILE]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    // Small blocks over many pages, then a huge block, all freed: work for the purger.
    enum { SMALL = 20000 };
    static char *small[SMALL];
    for (int i = 0; i < SMALL; i++) memset(small[i] = malloc(256), 1, 256);
    for (int i = 0; i < SMALL; i++) free(small[i]);
    char *huge = malloc(64 << 20);
    memset(huge, 1, 64 << 20);
    free(huge);
    usleep(20000);
    int fd = argc > 2 ? open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644)
                      : open("/dev/null", O_WRONLY);
    if (fd < 0) return 1;
    char buf[48] = "0123456789012345678901234567890123456789\n";
    int before = threads();
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (long i = 0; i < n; i++)
        if (write(fd, buf, 41) != 41) return 1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    printf("threads=%d %.1f ns/write\n", before,
           ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}

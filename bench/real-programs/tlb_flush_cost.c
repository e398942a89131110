// What a background thread's madvise(MADV_DONTNEED) costs it while another thread of
// the process runs (docs/REAL-PROGRAMS.md, "The purger's CPU on jq"): the kernel must
// flush the TLB of every core the process runs on and waits for each to answer. One
// thread fills RUNS x CHUNK bytes and gives them back a run per call, while a second
// thread either spins over its own memory (`running`) or sleeps; prints the calling
// thread's CPU time per call.
//
//   gcc -O2 -pthread -o /tmp/tlb_flush_cost bench/real-programs/tlb_flush_cost.c
//   /tmp/tlb_flush_cost sleeping 655360; /tmp/tlb_flush_cost running 655360
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { RUNS = 200 };

static volatile int stop;
static int spin;

static double thread_cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *other(void *arg) {
    (void)arg;
    char *own = malloc(1 << 20);
    memset(own, 0, 1 << 20);
    while (!stop) {
        if (spin)
            for (int i = 0; i < (1 << 20); i += 64)
                own[i]++;
        else
            usleep(1000);
    }
    free(own);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s running|sleeping CHUNK_BYTES\n", argv[0]);
        return 2;
    }
    spin = strcmp(argv[1], "running") == 0;
    size_t chunk = strtoul(argv[2], NULL, 0);
    pthread_t t;
    pthread_create(&t, NULL, other, NULL);
    char *p = mmap(NULL, chunk * RUNS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    madvise(p, chunk * RUNS, MADV_NOHUGEPAGE);
    memset(p, 1, chunk * RUNS);
    usleep(10000);
    double t0 = thread_cpu_ms();
    for (int i = 0; i < RUNS; i++)
        madvise(p + i * chunk, chunk, MADV_DONTNEED);
    double t1 = thread_cpu_ms();
    stop = 1;
    pthread_join(t, NULL);
    printf("other thread %s, %zu KiB a call: %.1f us of CPU per madvise\n", argv[1],
           chunk >> 10, (t1 - t0) * 1e3 / RUNS);
    return 0;
}

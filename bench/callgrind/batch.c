/* batch SIZE BLOCKS THREADS [ROUNDS]: the many-then-free-many phase of the `sweep`
 * workload for one size. Each of THREADS threads (0: the main thread alone) allocates
 * BLOCKS blocks of SIZE bytes in batches of up to 1,000 (at most 64 MiB at once),
 * writing the first and last byte of each, and frees each batch in the order it was
 * allocated. Prints the wall time of each round in ms (ROUNDS rounds, default 5; new
 * threads each round).
 *
 *   gcc -O2 -pthread -o /tmp/batch bench/callgrind/batch.c
 *   LD_PRELOAD=target/release/libebb.so /tmp/batch 1024 400000 2
 *   LD_PRELOAD=target/release/libebb.so valgrind --tool=callgrind /tmp/batch 1024 100000 0 2
 *
 * docs/BENCHMARKS.md, "A batch freed by its own thread", uses it to time a thread that
 * frees what it just allocated, on one thread and on two at once. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static size_t size_arg, blocks_arg;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static inline uint64_t touch(volatile unsigned char *p, size_t size, unsigned char v) {
    p[0] = v;
    p[size - 1] = v;
    return p[0];
}

static void *batches(void *out) {
    size_t size = size_arg, blocks = blocks_arg;
    size_t batch = ((size_t)64 << 20) / size;
    if (batch < 1) batch = 1;
    if (batch > 1000) batch = 1000;
    void **ptrs = malloc(sizeof(void *) * batch);
    if (!ptrs) abort();
    uint64_t h = 0;
    for (size_t done = 0; done < blocks;) {
        size_t n = blocks - done < batch ? blocks - done : batch;
        for (size_t i = 0; i < n; i++) {
            ptrs[i] = malloc(size);
            if (!ptrs[i]) abort();
            h += touch(ptrs[i], size, (unsigned char)i);
        }
        for (size_t i = 0; i < n; i++) free(ptrs[i]);
        done += n;
    }
    free(ptrs);
    *(uint64_t *)out = h;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: batch SIZE BLOCKS THREADS [ROUNDS]\n");
        return 2;
    }
    size_arg = strtoull(argv[1], NULL, 0);
    blocks_arg = strtoull(argv[2], NULL, 0);
    int threads = atoi(argv[3]);
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    if (size_arg == 0 || threads < 0 || threads > 64) return 2;
    uint64_t h[64];
    pthread_t tid[64];
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ms();
        if (threads == 0) {
            batches(&h[0]);
        } else {
            for (int i = 0; i < threads; i++) pthread_create(&tid[i], NULL, batches, &h[i]);
            for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
        }
        printf("%.1f ", now_ms() - t0);
    }
    printf("\n");
    return 0;
}

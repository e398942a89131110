/* bigmt: 4 threads, each replacing buffers of 0.6-30 MiB in 6 slots at random (a third of
 * them calloc'd, the rest malloc'd), every 4 KiB page written and checked before the
 * buffer is freed: a service that builds big responses, images or index segments on a
 * worker pool. The sizes cross ebb's large/huge line (16 MiB) and the 4 MiB above which
 * a large block never makes a segment. usage: bigmt [scale] */
#include "common.h"
#include <pthread.h>

enum { THREADS = 4, SLOTS = 6, PAGE = 4096 };

typedef struct {
    size_t steps;
    uint64_t seed;
    uint64_t checksum;
} job_t;

static size_t buffer_size(rng_t *r) {
    switch (rng_below(r, 4)) {
    case 0: return rng_range(r, 1, 4) << 20;
    case 1: return rng_range(r, 4, 15) << 20;
    case 2: return rng_range(r, 16, 29) << 20;
    default: return ((size_t)600 << 10) + rng_below(r, (size_t)3 << 20);
    }
}

static void *worker(void *arg) {
    job_t *job = arg;
    rng_t r;
    rng_seed(&r, job->seed);
    unsigned char *slot[SLOTS] = {0};
    size_t size[SLOTS] = {0};
    unsigned char tag[SLOTS] = {0};
    uint64_t h = 0;
    for (size_t step = 0; step < job->steps; step++) {
        size_t k = rng_below(&r, SLOTS);
        if (slot[k]) {
            for (size_t i = 0; i < size[k]; i += PAGE) {
                if (slot[k][i] != (unsigned char)(tag[k] + i / PAGE)) {
                    fprintf(stderr, "bigmt: buffer changed at %zu\n", i);
                    abort();
                }
            }
            h = mix(h, slot[k][0]);
            free(slot[k]);
        }
        size_t n = buffer_size(&r);
        int zeroed = rng_below(&r, 3) == 0;
        unsigned char *b = zeroed ? calloc(1, n) : xmalloc(n);
        if (!b) {
            fprintf(stderr, "bigmt: out of memory (%zu bytes)\n", n);
            abort();
        }
        if (zeroed) {
            for (size_t i = 0; i < n; i += PAGE) {
                if (b[i]) {
                    fprintf(stderr, "bigmt: calloc'd buffer not zero at %zu\n", i);
                    abort();
                }
            }
        }
        tag[k] = (unsigned char)rng_next(&r);
        for (size_t i = 0; i < n; i += PAGE) b[i] = (unsigned char)(tag[k] + i / PAGE);
        slot[k] = b;
        size[k] = n;
    }
    for (int k = 0; k < SLOTS; k++) free(slot[k]);
    job->checksum = h;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t steps = scaled(1000, scale, SLOTS);
    job_t jobs[THREADS];
    pthread_t threads[THREADS];
    double t0 = now_ms();
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (job_t){steps, 1000 + (uint64_t)t, 0};
        pthread_create(&threads[t], NULL, worker, &jobs[t]);
    }
    uint64_t h = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        h = mix(h, jobs[t].checksum);
    }
    report("c-bigmt", scale, THREADS, now_ms() - t0, h, "");
    return 0;
}

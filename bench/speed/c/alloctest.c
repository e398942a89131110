/* alloctest: independent threads replacing random slots of a working set (after
 * node-dot-cpp's alloc-test, run by mimalloc-bench at 1 and 2 threads). Each thread owns
 * 16384 slots; per step it frees a random slot's block and puts a new one there, of a
 * size drawn from a skewed mix (most 8-128 B, some 128 B-2 KiB, 1 in 64 up to 32 KiB),
 * writing its first and last bytes. No block crosses threads. THREADS (1 here; 2 in
 * alloctest2.c, which includes this file) threads run at once.
 * usage: alloctest [scale] */
#include "common.h"

#ifndef THREADS
#define THREADS 1
#endif
#ifndef NAME
#define NAME "c-alloctest"
#endif

enum { SLOTS = 16384 };

static size_t steps;

typedef struct {
    int id;
    uint64_t sum;
} worker_t;

static size_t pick_size(rng_t *r) {
    uint64_t x = rng_next(r);
    unsigned bucket = (unsigned)(x & 63);
    if (bucket == 0) return rng_range(r, 2048, 32768);
    if (bucket < 12) return rng_range(r, 129, 2048);
    return rng_range(r, 8, 128);
}

static void *work(void *arg) {
    worker_t *w = arg;
    rng_t r;
    rng_seed(&r, 0xa11c + (uint64_t)w->id);
    unsigned char **slot = calloc(SLOTS, sizeof *slot);
    size_t *len = calloc(SLOTS, sizeof *len);
    if (!slot || !len) abort();
    uint64_t sum = 0;
    for (size_t i = 0; i < steps; i++) {
        size_t k = rng_below(&r, SLOTS);
        if (slot[k]) {
            sum = mix(sum, slot[k][0] + slot[k][len[k] - 1]);
            free(slot[k]);
        }
        size_t n = pick_size(&r);
        unsigned char *p = xmalloc(n);
        p[0] = (unsigned char)i;
        p[n - 1] = (unsigned char)(i >> 8);
        slot[k] = p;
        len[k] = n;
    }
    for (size_t k = 0; k < SLOTS; k++) free(slot[k]);
    free(slot);
    free(len);
    w->sum = sum;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    steps = scaled(20000000 / THREADS, scale, 1000);
    worker_t w[THREADS];
    double t0 = now_ms();
    for (int i = 0; i < THREADS; i++) w[i].id = i;
    run_threads(THREADS, work, w, sizeof w[0]);
    uint64_t sum = 0;
    for (int i = 0; i < THREADS; i++) sum = mix(sum, w[i].sum);
    report(NAME, scale, THREADS, now_ms() - t0, sum, "");
    return 0;
}

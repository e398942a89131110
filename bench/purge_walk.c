/* purge_walk: the cost of the purge of free blocks inside pages that keep survivors,
 * alone (no program running beside it, no timing against the purge delay).
 *
 * A thread allocates N blocks of MIN..MAX-1 B (default 16-127) and exits, so its pages are abandoned; the
 * main thread frees all but every 20th in random order (remote frees: the blocks'
 * link words are written on the main thread's core), takes those frees in
 * (`ebb_collect(false)`), then times `ebb_collect(true)`, which purges at once what
 * the purger would after the purge delay: the hole walks of every page with survivors
 * (`span/holes.rs`, `span/warm.rs`) and their `madvise` calls.
 *
 *   cc -O2 -pthread -o /tmp/purge_walk bench/purge_walk.c -Ltarget/release -lebb \
 *      -Wl,-rpath,$PWD/target/release
 *   for lib in /tmp/libebb-base.so target/release/libebb.so; do
 *     EBB_BACKGROUND=0 LD_PRELOAD=$lib /tmp/purge_walk 4000000; done
 *   (bigger blocks: /tmp/purge_walk 600000 128 1024)
 *   (idle first, as the purger's pages are after the purge delay: /tmp/purge_walk 4000000 16 128 1000,
 *   the last argument in ms: on a VM, memory left alone for a second can cost thousands
 *   of cycles a page on its first touch, bench/cold_touch.c)
 *
 * EBB_BACKGROUND=0 keeps the purger thread out, so all of it runs on the timed thread
 * (CPU = wall). Prints "collect cpu X ms wall Y ms". */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void ebb_collect(bool force);

static size_t count, min_size = 16, max_size = 128, idle_ms;
static void **blocks;
static uint64_t rng = 88172645463325252ull;

static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *build(void *arg) {
    (void)arg;
    for (size_t i = 0; i < count; i++) {
        blocks[i] = malloc(min_size + next() % (max_size - min_size));
        if (!blocks[i]) abort();
        ((char *)blocks[i])[0] = 1;
    }
    return NULL;
}

static double seconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    count = argc > 1 ? strtoul(argv[1], NULL, 10) : 4000000;
    if (argc > 3) {
        min_size = strtoul(argv[2], NULL, 10);
        max_size = strtoul(argv[3], NULL, 10);
        if (max_size <= min_size) abort();
    }
    if (argc > 4) idle_ms = strtoul(argv[4], NULL, 10);
    blocks = malloc(count * sizeof *blocks);
    if (!blocks) abort();
    pthread_t t;
    pthread_create(&t, NULL, build, NULL);
    pthread_join(t, NULL);
    for (size_t i = count - 1; i > 0; i--) {
        size_t j = next() % (i + 1);
        void *x = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = x;
    }
    for (size_t i = 0; i < count; i++)
        if (i % 20) free(blocks[i]);
    ebb_collect(false);
    if (idle_ms) usleep(idle_ms * 1000);
    double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID), wall = seconds(CLOCK_MONOTONIC);
    ebb_collect(true);
    printf("collect cpu %.1f ms wall %.1f ms\n", (seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu) * 1e3,
           (seconds(CLOCK_MONOTONIC) - wall) * 1e3);
    return 0;
}

/* Blocks that outlive their thread, and threads that only free.
 *
 * 1. Waves of threads each allocate blocks of every tier (small to huge), fill them and
 *    exit with the blocks live. Later threads — some that allocate themselves, some
 *    that never call malloc at all — check and free them, and the main thread frees
 *    the rest.
 * 2. A thread that never allocates frees blocks that the main thread allocated while
 *    the main thread keeps allocating (remote frees into live pages).
 * Prints "ebb=yes|no", one "ok ..." line per check and "done"; exits non-zero on any
 * failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebb.h"

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                           \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            fflush(stdout);                                                          \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

enum { WAVES = 4, PER_WAVE = 6, BLOCKS = 1500 };
enum { MAKERS = WAVES * PER_WAVE };

static unsigned char *blocks[MAKERS][BLOCKS];
static size_t sizes[MAKERS][BLOCKS];
static int (*ebb_stats_fn)(ebb_stats_t *);

static unsigned char pattern(size_t t, size_t i) { return (unsigned char)(t * 29 + i * 7 + 1); }

static size_t size_for(size_t t, size_t i) {
    size_t k = (t * 131 + i * 17) % 1000;
    if (i == 7)
        return (size_t)20 << 20; /* one huge block per thread */
    if (k < 10)
        return 600000 + k * 1000; /* large */
    if (k < 100)
        return 1025 + k * 700; /* medium */
    return k % 300 + 1;
}

/* Fill the whole first 4 KiB and the last byte (large blocks would be slow to fill). */
static void fill(size_t t, size_t i) {
    size_t n = sizes[t][i];
    memset(blocks[t][i], pattern(t, i), n < 4096 ? n : 4096);
    blocks[t][i][n - 1] = pattern(t, i);
}

static bool intact(size_t t, size_t i) {
    size_t n = sizes[t][i];
    const unsigned char *p = blocks[t][i];
    for (size_t j = 0; j < (n < 4096 ? n : 4096); j++)
        if (p[j] != pattern(t, i))
            return false;
    return p[n - 1] == pattern(t, i);
}

static void *maker(void *arg) {
    size_t t = (size_t)(uintptr_t)arg;
    for (size_t i = 0; i < BLOCKS; i++) {
        sizes[t][i] = size_for(t, i);
        blocks[t][i] = malloc(sizes[t][i]);
        if (blocks[t][i] == NULL)
            return NULL;
        fill(t, i);
    }
    /* Free some of our own, so the pages this thread leaves behind are partly free. */
    for (size_t i = 0; i < BLOCKS; i += 5) {
        free(blocks[t][i]);
        blocks[t][i] = NULL;
    }
    return (void *)1; /* exit with the rest still live */
}

struct freer_job {
    size_t first, count; /* makers whose blocks to free */
    size_t parity;       /* free the blocks with i % 2 == parity */
    bool allocates;      /* also allocate (and free) blocks of its own */
    long bad;
};

/* Never calls malloc unless job->allocates (no stdio either). */
static void *freer(void *arg) {
    struct freer_job *job = arg;
    void *mine[256];
    size_t n_mine = 0;
    for (size_t t = job->first; t < job->first + job->count; t++) {
        for (size_t i = job->parity; i < BLOCKS; i += 2) {
            if (blocks[t][i] == NULL)
                continue;
            if (!intact(t, i))
                job->bad++;
            free(blocks[t][i]);
            blocks[t][i] = NULL;
            if (job->allocates && n_mine < 256) {
                mine[n_mine] = malloc(i % 700 + 1);
                memset(mine[n_mine], 0x5A, i % 700 + 1);
                n_mine++;
            }
        }
    }
    for (size_t k = 0; k < n_mine; k++)
        free(mine[k]);
    return NULL;
}

static ebb_stats_t stats_now(void) {
    ebb_stats_t s;
    memset(&s, 0, sizeof s);
    if (ebb_stats_fn != NULL)
        CHECK(ebb_stats_fn(&s) == 0, "ebb_stats");
    return s;
}

struct remote_job {
    void **slots;
    size_t count;
    volatile int *handed; /* number of slots the main thread has filled */
    long freed;
};

static void *remote_freer(void *arg) {
    struct remote_job *job = arg;
    size_t next = 0;
    while (next < job->count) {
        int handed = __atomic_load_n(job->handed, __ATOMIC_ACQUIRE);
        while (next < (size_t)handed) {
            free(job->slots[next]);
            next++;
            job->freed++;
        }
        if (next < job->count && (size_t)handed == next)
            sched_yield();
    }
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    *(void **)&ebb_stats_fn = dlsym(RTLD_DEFAULT, "ebb_stats");
    printf("ebb=%s\n", ebb_stats_fn != NULL ? "yes" : "no");
    ebb_stats_t s0 = stats_now();

    for (size_t w = 0; w < WAVES; w++) {
        pthread_t th[PER_WAVE];
        for (size_t k = 0; k < PER_WAVE; k++)
            CHECK(pthread_create(&th[k], NULL, maker, (void *)(uintptr_t)(w * PER_WAVE + k)) == 0,
                  "pthread_create");
        for (size_t k = 0; k < PER_WAVE; k++) {
            void *r;
            CHECK(pthread_join(th[k], &r) == 0 && r != NULL, "maker thread failed");
        }
        if (w == 0)
            continue;
        /* Threads of the next wave free half of the previous wave's blocks: even
         * blocks by threads that never allocate, odd ones by threads that do. */
        size_t prev = (w - 1) * PER_WAVE;
        struct freer_job jobs[2] = {{prev, PER_WAVE, 0, false, 0}, {prev, PER_WAVE, 1, true, 0}};
        pthread_t f[2];
        for (int k = 0; k < 2; k++)
            CHECK(pthread_create(&f[k], NULL, freer, &jobs[k]) == 0, "pthread_create");
        for (int k = 0; k < 2; k++) {
            CHECK(pthread_join(f[k], NULL) == 0, "pthread_join");
            CHECK(jobs[k].bad == 0, "%ld blocks of exited threads were corrupted", jobs[k].bad);
        }
    }
    ebb_stats_t s1 = stats_now();
    if (ebb_stats_fn != NULL) {
        CHECK(s1.threads_created >= s0.threads_created + MAKERS, "threads_created %llu -> %llu",
              (unsigned long long)s0.threads_created, (unsigned long long)s1.threads_created);
        CHECK(s1.threads <= 2, "%llu heaps still live after every thread exited",
              (unsigned long long)s1.threads);
        CHECK(s1.huge_allocs >= s0.huge_allocs + MAKERS, "huge_allocs");
    }
    printf("ok threads that exited with live blocks: blocks freed by threads that never "
           "allocate and by threads that do\n");

    /* The main thread frees everything left, checking contents. */
    long bad = 0, freed = 0;
    for (size_t t = 0; t < MAKERS; t++)
        for (size_t i = 0; i < BLOCKS; i++)
            if (blocks[t][i] != NULL) {
                if (!intact(t, i))
                    bad++;
                free(blocks[t][i]);
                blocks[t][i] = NULL;
                freed++;
            }
    CHECK(bad == 0, "%ld blocks corrupted", bad);
    CHECK(freed > 0, "nothing left to free");
    printf("ok the main thread frees the remaining blocks of exited threads\n");

    /* The freed memory is reusable: allocate the same again in new threads. */
    for (size_t w = 0; w < 2; w++) {
        pthread_t th[PER_WAVE];
        for (size_t k = 0; k < PER_WAVE; k++)
            CHECK(pthread_create(&th[k], NULL, maker, (void *)(uintptr_t)k) == 0, "pthread_create");
        for (size_t k = 0; k < PER_WAVE; k++) {
            void *r;
            CHECK(pthread_join(th[k], &r) == 0 && r != NULL, "maker thread failed");
        }
        for (size_t k = 0; k < PER_WAVE; k++)
            for (size_t i = 0; i < BLOCKS; i++)
                if (blocks[k][i] != NULL) {
                    CHECK(intact(k, i), "block corrupted");
                    free(blocks[k][i]);
                    blocks[k][i] = NULL;
                }
    }
    if (ebb_stats_fn != NULL) {
        ebb_stats_t s2 = stats_now();
        /* Without reuse, every round would have needed new segments. */
        CHECK(s2.segments <= s1.segments + 4, "segments %llu -> %llu",
              (unsigned long long)s1.segments, (unsigned long long)s2.segments);
    }
    printf("ok memory freed across threads is reused by new threads\n");

    /* Remote frees while the owner keeps allocating: a thread that never allocates
     * frees the main thread's blocks as they are handed over. */
    enum { HAND = 200000 };
    static void *slots[HAND];
    static volatile int handed;
    struct remote_job job = {slots, HAND, &handed, 0};
    pthread_t rf;
    CHECK(pthread_create(&rf, NULL, remote_freer, &job) == 0, "pthread_create");
    for (int k = 0; k < HAND; k++) {
        size_t n = (size_t)(k % 97) * 8 + 1;
        slots[k] = malloc(n);
        CHECK(slots[k] != NULL, "malloc");
        memset(slots[k], 0x77, n);
        __atomic_store_n(&handed, k + 1, __ATOMIC_RELEASE);
    }
    CHECK(pthread_join(rf, NULL) == 0, "pthread_join");
    CHECK(job.freed == HAND, "freed %ld", job.freed);
    printf("ok a thread that never allocates frees %d blocks the main thread keeps "
           "allocating\n",
           HAND);
    if (ebb_stats_fn != NULL) {
        ebb_stats_t s3 = stats_now();
        CHECK(s3.invalid_frees == s0.invalid_frees, "invalid frees reported");
    }
    printf("done\n");
    return 0;
}

/* fork from a multi-threaded process: 4 threads hammer malloc/free while the main
 * thread forks 20 times. Each child checks and frees blocks the parent (main thread
 * and the other threads) allocated before the fork, allocates and frees a lot itself,
 * also from a new thread, and exits 0. The parent waits for every child.
 * Prints "ebb=yes|no", "children ok: 20" and "done"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebb.h"

enum { THREADS = 4, FORKS = 20, GIFTS = 64, PARENT_BLOCKS = 200 };

static atomic_bool stop;
static atomic_int gifts_ready;
/* Blocks each hammer thread allocated and keeps alive (untouched) for the children. */
static unsigned char *gifts[THREADS][GIFTS];
static size_t gift_size[THREADS][GIFTS];

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static unsigned char pattern(unsigned owner, size_t i, size_t j) {
    return (unsigned char)(owner * 53u + i * 11u + j);
}

/* The first 4 KiB of a block, then every 4093rd byte and the last one (filling and
 * checking all of the 20 MiB blocks in every child would be slow). */
static size_t next_offset(size_t j, size_t n) {
    if (j + 1 < 4096 || j + 1 == n)
        return j + 1;
    return j + 4093 < n ? j + 4093 : n - 1;
}

static void fill(unsigned char *p, size_t n, unsigned owner, size_t i) {
    for (size_t j = 0; j < n; j = next_offset(j, n))
        p[j] = pattern(owner, i, j);
}

static bool verify(const unsigned char *p, size_t n, unsigned owner, size_t i) {
    for (size_t j = 0; j < n; j = next_offset(j, n))
        if (p[j] != pattern(owner, i, j))
            return false;
    return true;
}

static size_t pick_size(uint64_t *s) {
    uint64_t r = next_rand(s);
    if (r % 64 == 0)
        return 600000 + r % 400000; /* large */
    if (r % 8 == 0)
        return r % 70000;
    return r % 1024;
}

/* Allocate, write, free, with a window of live blocks. Returns false on corruption. */
static bool churn(uint64_t seed, long ops) {
    enum { WINDOW = 128 };
    unsigned char *live[WINDOW] = {0};
    size_t size[WINDOW] = {0};
    uint64_t s = seed | 1;
    bool good = true;
    for (long k = 0; k < ops; k++) {
        size_t i = next_rand(&s) % WINDOW;
        if (live[i] != NULL) {
            if (size[i] > 0 && (live[i][0] != (unsigned char)i ||
                                live[i][size[i] - 1] != (unsigned char)i))
                good = false;
            free(live[i]);
        }
        size[i] = pick_size(&s);
        live[i] = malloc(size[i]);
        if (live[i] == NULL)
            return false;
        /* Touch the start and the end (writing whole large blocks would be slow). */
        memset(live[i], (int)i, size[i] < 256 ? size[i] : 256);
        if (size[i] > 0)
            live[i][size[i] - 1] = (unsigned char)i;
    }
    for (size_t i = 0; i < WINDOW; i++)
        free(live[i]);
    return good;
}

static void *hammer(void *arg) {
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t s = 0x1234567ull * (id + 1);
    for (size_t i = 0; i < GIFTS; i++) {
        gift_size[id][i] = pick_size(&s);
        gifts[id][i] = malloc(gift_size[id][i]);
        if (gifts[id][i] == NULL)
            abort();
        fill(gifts[id][i], gift_size[id][i], id + 1, i);
    }
    atomic_fetch_add(&gifts_ready, 1);
    while (!atomic_load(&stop))
        if (!churn(next_rand(&s), 2000)) {
            fprintf(stderr, "hammer thread %u: corrupted block\n", id);
            abort();
        }
    return NULL;
}

static void *child_thread(void *arg) {
    return churn((uint64_t)(uintptr_t)arg, 10000) ? (void *)1 : NULL;
}

/* In the child (POSIX allows only async-signal-safe calls after fork in a
 * multi-threaded process; glibc's malloc, and a replacement like ebb, support malloc
 * there too, which is what this checks). */
static int child(int round, unsigned char **parent_blocks, size_t *parent_size) {
    alarm(60); /* a deadlock in the child ends it with SIGALRM instead of hanging */
    for (size_t i = 0; i < PARENT_BLOCKS; i++) {
        if (!verify(parent_blocks[i], parent_size[i], 0, i))
            return 10;
        free(parent_blocks[i]);
    }
    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < GIFTS; i++) {
            if (!verify(gifts[t][i], gift_size[t][i], t + 1, i))
                return 11;
            free(gifts[t][i]);
        }
    if (!churn((uint64_t)round * 7919 + 1, 10000))
        return 12;
    pthread_t t;
    void *result = NULL;
    if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)(round + 99)) != 0)
        return 13;
    if (pthread_join(t, &result) != 0 || result == NULL)
        return 14;
    int (*stats)(ebb_stats_t *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "ebb_stats");
    if (stats != NULL) {
        ebb_stats_t s;
        if (stats(&s) != 0 || s.allocated == 0)
            return 15;
    }
    return 0;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(120);
    printf("ebb=%s\n", dlsym(RTLD_DEFAULT, "ebb_stats") != NULL ? "yes" : "no");

    static unsigned char *parent_blocks[PARENT_BLOCKS];
    static size_t parent_size[PARENT_BLOCKS];
    uint64_t s = 42;
    for (size_t i = 0; i < PARENT_BLOCKS; i++) {
        parent_size[i] = i % 50 == 0 ? (size_t)20 << 20 : pick_size(&s);
        parent_blocks[i] = malloc(parent_size[i]);
        if (parent_blocks[i] == NULL)
            return 1;
        fill(parent_blocks[i], parent_size[i], 0, i);
    }

    pthread_t threads[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        if (pthread_create(&threads[t], NULL, hammer, (void *)(uintptr_t)t) != 0)
            return 1;
    while (atomic_load(&gifts_ready) < THREADS)
        sched_yield();

    pid_t pids[FORKS];
    for (int round = 0; round < FORKS; round++) {
        /* The main thread allocates between forks too. */
        if (!churn((uint64_t)round + 1000, 500))
            return 2;
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            _exit(child(round, parent_blocks, parent_size));
        pids[round] = pid;
    }
    int good = 0;
    for (int round = 0; round < FORKS; round++) {
        int status;
        if (waitpid(pids[round], &status, 0) != pids[round]) {
            perror("waitpid");
            return 1;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            good++;
        else if (WIFEXITED(status))
            printf("child %d exited with %d\n", round, WEXITSTATUS(status));
        else
            printf("child %d killed by signal %d\n", round, WTERMSIG(status));
    }
    atomic_store(&stop, true);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    for (size_t i = 0; i < PARENT_BLOCKS; i++) {
        if (!verify(parent_blocks[i], parent_size[i], 0, i))
            return 3;
        free(parent_blocks[i]);
    }
    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < GIFTS; i++) {
            if (!verify(gifts[t][i], gift_size[t][i], t + 1, i))
                return 3;
            free(gifts[t][i]);
        }
    printf("children ok: %d\n", good);
    if (good != FORKS)
        return 4;
    printf("done\n");
    return 0;
}

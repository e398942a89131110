/* First-class heaps through the C API (ebb_heap_*, reached with dlsym: the program is
 * not linked against libebb, it runs under LD_PRELOAD). Prints "ebb=yes", one "ok ..."
 * line per check, and exits non-zero at the first failed check. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ebb.h"

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                        \
            printf(__VA_ARGS__);                                                  \
            printf("\n");                                                         \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

#define FN(name) static __typeof__(&name) p_##name;
FN(ebb_heap_new)
FN(ebb_heap_malloc)
FN(ebb_heap_calloc)
FN(ebb_heap_realloc)
FN(ebb_heap_malloc_aligned)
FN(ebb_heap_destroy)
FN(ebb_heap_delete)
FN(ebb_heap_collect)
FN(ebb_heap_stats)
FN(ebb_stats)
FN(ebb_collect)
#define LOAD(name) p_##name = (__typeof__(p_##name))dlsym(RTLD_DEFAULT, #name)

#define COUNT 100000
static void *blocks[COUNT];

static void *free_odd(void *arg) {
    (void)arg;
    for (int i = 1; i < COUNT; i += 2)
        free(blocks[i]);
    return NULL;
}

static void *misuse(void *heap) {
    for (int i = 0; i < 100000; i++)
        p_ebb_heap_malloc(heap, 32);
    return NULL;
}

static uint64_t committed(void) {
    ebb_stats_t s;
    p_ebb_stats(&s);
    return s.committed;
}

int main(void) {
    LOAD(ebb_heap_new); LOAD(ebb_heap_malloc); LOAD(ebb_heap_calloc);
    LOAD(ebb_heap_realloc); LOAD(ebb_heap_malloc_aligned); LOAD(ebb_heap_destroy);
    LOAD(ebb_heap_delete); LOAD(ebb_heap_collect); LOAD(ebb_heap_stats);
    LOAD(ebb_stats); LOAD(ebb_collect);
    int have = p_ebb_heap_new && p_ebb_heap_malloc && p_ebb_heap_calloc &&
               p_ebb_heap_realloc && p_ebb_heap_malloc_aligned && p_ebb_heap_destroy &&
               p_ebb_heap_delete && p_ebb_heap_collect && p_ebb_heap_stats && p_ebb_stats;
    printf("ebb=%s\n", have ? "yes" : "no");
    if (!have)
        return 1;

    /* Allocation, alignment, calloc, realloc, stats. */
    ebb_heap_t *heap = p_ebb_heap_new();
    CHECK(heap != NULL, "ebb_heap_new");
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = p_ebb_heap_malloc(heap, 24 + i % 100);
        CHECK(blocks[i] != NULL && (uintptr_t)blocks[i] % 16 == 0, "malloc %d", i);
        memset(blocks[i], i & 0xff, 24);
    }
    unsigned char *z = p_ebb_heap_calloc(heap, 1000, 3);
    for (int i = 0; i < 3000; i++)
        CHECK(z[i] == 0, "calloc byte %d", i);
    CHECK(p_ebb_heap_calloc(heap, SIZE_MAX / 2, 3) == NULL, "calloc overflow");
    void *a = p_ebb_heap_malloc_aligned(heap, 4096, 100);
    CHECK(a != NULL && (uintptr_t)a % 4096 == 0, "aligned %p", a);
    CHECK(p_ebb_heap_malloc_aligned(heap, 48, 100) == NULL, "alignment not a power of two");
    char *r = p_ebb_heap_malloc(heap, 10);
    strcpy(r, "123456789");
    r = p_ebb_heap_realloc(heap, r, 100000);
    CHECK(r != NULL && strcmp(r, "123456789") == 0, "realloc keeps contents");
    r = p_ebb_heap_realloc(heap, r, 2000000);
    CHECK(r != NULL && strcmp(r, "123456789") == 0, "realloc to a large block");
    ebb_heap_stats_t hs;
    CHECK(p_ebb_heap_stats(heap, &hs) == 0, "stats");
    CHECK(hs.live_blocks == COUNT + 3 && hs.large_blocks == 1, "live %llu large %llu",
          (unsigned long long)hs.live_blocks, (unsigned long long)hs.large_blocks);
    printf("ok alloc calloc aligned realloc stats\n");

    /* Another thread frees half the blocks with the ordinary free. */
    pthread_t t;
    pthread_create(&t, NULL, free_odd, NULL);
    pthread_join(t, NULL);
    p_ebb_heap_collect(heap);
    p_ebb_heap_stats(heap, &hs);
    CHECK(hs.live_blocks == COUNT / 2 + 3, "after remote frees: %llu",
          (unsigned long long)hs.live_blocks);
    for (int i = 0; i < COUNT; i += 2)
        CHECK(((unsigned char *)blocks[i])[23] == (i & 0xff), "block %d intact", i);
    printf("ok remote frees\n");

    /* Destroy gives everything back. */
    p_ebb_collect(true);
    for (int i = 0; i < COUNT; i++)
        blocks[i] = p_ebb_heap_malloc(heap, 1000);
    uint64_t peak = committed();
    p_ebb_heap_destroy(heap);
    p_ebb_collect(true);
    uint64_t after = committed();
    CHECK(after + 90 * 1000 * 1000 < peak, "committed %llu after destroy, peak %llu",
          (unsigned long long)after, (unsigned long long)peak);
    printf("ok destroy\n");

    /* Delete hands blocks over: still valid, freed later by anyone. */
    heap = p_ebb_heap_new();
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = p_ebb_heap_malloc(heap, 40);
        memset(blocks[i], i & 0xff, 40);
    }
    p_ebb_heap_delete(heap);
    void *other[1000];
    for (int i = 0; i < 1000; i++)
        other[i] = malloc(40), memset(other[i], 0xee, 40);
    for (int i = 0; i < COUNT; i++)
        CHECK(((unsigned char *)blocks[i])[39] == (i & 0xff), "block %d after delete", i);
    for (int i = 0; i < COUNT; i++)
        free(blocks[i]);
    for (int i = 0; i < 1000; i++)
        free(other[i]);
    printf("ok delete\n");

    /* Allocating from another thread's heap aborts. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(2); /* the message is expected */
        ebb_heap_t *mine = p_ebb_heap_new();
        pthread_create(&t, NULL, misuse, mine);
        pthread_join(t, NULL);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %d", status);
    printf("ok misuse aborts\n");
    return 0;
}

/* Invalid frees, for ebb's check mode (EBB_CHECK=1) and its always-on foreign-pointer
 * check. Meant to run under ebb only (it frees pointers that glibc would abort on).
 *
 * Usage: check SCENARIO
 *   stack        free of a stack address
 *   global       free of the address of a global (outside every ebb region)
 *   interior     free of malloc(64) + 8
 *   double       free of the same small block twice
 *   double_large free of the same 1 MiB block twice
 *   double_huge  free of the same 40 MiB block twice
 *   double_owned_elsewhere  free twice of a block whose page another (live) thread owns
 *   never_allocated  free of a block start in a live page that was never handed out
 *   realloc_foreign  realloc of the address of a global
 * Prints "start", then "ptr=<the bad pointer>" before the bad call (for a double free:
 * before the first free), then (if the process goes on)
 * "invalid_frees=<ebb's counter>", checks the allocator still works and prints
 * "continued"; exits 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ebb.h"

#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"

static char global_buffer[256];

static void *__attribute__((noinline)) opaque_ptr(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

static uint64_t invalid_frees(void) {
    int (*stats)(ebb_stats_t *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "ebb_stats");
    if (stats == NULL) {
        printf("ebb is not loaded\n");
        exit(2);
    }
    ebb_stats_t s;
    stats(&s);
    return s.invalid_frees;
}

/* A thread that allocates a block and stays alive (owning the block's page) until told
 * to finish. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static void *shared_block;
static int finish;

static void *owner_thread(void *arg) {
    (void)arg;
    void *keep = malloc(96); /* keeps the page in use after the block goes */
    pthread_mutex_lock(&lock);
    shared_block = malloc(96);
    memset(shared_block, 4, 96);
    pthread_cond_broadcast(&cond);
    while (!finish)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    free(keep);
    return NULL;
}

static void announce(void *p) {
    printf("ptr=%p\n", p);
    fflush(stdout);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: check SCENARIO\n");
        return 2;
    }
    const char *what = argv[1];
    /* Warm up: the stdout buffer and ebb's background purger thread (started by the
     * first freed span) allocate; done now, they cannot reuse a block freed below
     * before its second free. */
    printf("start\n");
    free(opaque_ptr(malloc(1 << 20)));
    uint64_t before = invalid_frees();
    /* Keep a neighbour alive so the small blocks' page stays in use. */
    void *neighbour = malloc(64);
    char stack_buffer[64];
    memset(stack_buffer, 1, sizeof stack_buffer);

    if (strcmp(what, "stack") == 0) {
        void *p = opaque_ptr(stack_buffer);
        announce(p);
        free(p);
    } else if (strcmp(what, "global") == 0) {
        void *p = opaque_ptr(global_buffer);
        announce(p);
        free(p);
    } else if (strcmp(what, "interior") == 0) {
        char *block = malloc(64);
        void *p = opaque_ptr(block + 8);
        announce(p);
        free(p);
        free(block); /* the block itself is still live and freeable */
    } else if (strcmp(what, "double") == 0) {
        void *p = opaque_ptr(malloc(64));
        memset(p, 2, 64);
        announce(p);
        free(p);
        free(p);
    } else if (strcmp(what, "double_large") == 0) {
        void *p = opaque_ptr(malloc(1 << 20));
        memset(p, 2, 1 << 20);
        announce(p);
        free(p);
        free(p);
    } else if (strcmp(what, "double_huge") == 0) {
        void *p = opaque_ptr(malloc(40 << 20));
        memset(p, 2, 1 << 20);
        announce(p);
        free(p);
        free(p);
    } else if (strcmp(what, "double_owned_elsewhere") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, owner_thread, NULL);
        pthread_mutex_lock(&lock);
        while (shared_block == NULL)
            pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        void *p = opaque_ptr(shared_block);
        announce(p);
        free(p);
        free(p);
        pthread_mutex_lock(&lock);
        finish = 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        pthread_join(t, NULL);
    } else if (strcmp(what, "never_allocated") == 0) {
        /* Two blocks of one class from a fresh page are neighbours; the block after the
         * second was carved or is about to be, but never handed out. */
        char *a = malloc(4000);
        char *b = malloc(4000);
        void *p = opaque_ptr(b + (b - a));
        announce(p);
        free(p);
        free(a);
        free(b);
    } else if (strcmp(what, "realloc_foreign") == 0) {
        void *p = opaque_ptr(global_buffer);
        announce(p);
        void *q = realloc(p, 100);
        if (q != NULL) {
            printf("realloc of a foreign pointer returned %p\n", q);
            return 1;
        }
    } else {
        fprintf(stderr, "unknown scenario %s\n", what);
        return 2;
    }

    printf("invalid_frees=%llu\n", (unsigned long long)(invalid_frees() - before));
    /* The allocator still works. */
    for (int i = 0; i < 10000; i++) {
        void *q = malloc((size_t)(i % 2000) + 1);
        if (q == NULL)
            return 1;
        memset(q, 3, (size_t)(i % 2000) + 1);
        free(q);
    }
    free(neighbour);
    printf("continued\n");
    return 0;
}

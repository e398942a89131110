/* A small C library for the override test: it allocates and frees through plain
 * malloc/free, always in pthreads of its own, so a Rust program that enables ebb's
 * `override` feature can check that C code and Rust share one allocator.
 *
 * Block i of a set is filled with clib_pattern(seed, i, j) at offset j (the Rust side
 * computes the same bytes). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

unsigned char clib_pattern(unsigned seed, size_t i, size_t j) {
    return (unsigned char)(seed + i * 31u + j * 7u);
}

struct job {
    void **blocks;
    const size_t *sizes;
    size_t count;
    unsigned seed;
    int verify;
    long result;
};

static void *alloc_thread(void *arg) {
    struct job *job = arg;
    job->result = 0;
    for (size_t i = 0; i < job->count; i++) {
        unsigned char *p = malloc(job->sizes[i]);
        job->blocks[i] = p;
        if (p == NULL) {
            job->result = -1;
            continue;
        }
        for (size_t j = 0; j < job->sizes[i]; j++)
            p[j] = clib_pattern(job->seed, i, j);
    }
    return NULL;
}

static void *free_thread(void *arg) {
    struct job *job = arg;
    job->result = 0;
    for (size_t i = 0; i < job->count; i++) {
        const unsigned char *p = job->blocks[i];
        if (job->verify) {
            for (size_t j = 0; j < job->sizes[i]; j++) {
                if (p[j] != clib_pattern(job->seed, i, j)) {
                    job->result++;
                    break;
                }
            }
        }
        free(job->blocks[i]);
        job->blocks[i] = NULL;
    }
    return NULL;
}

static long run(void *(*fn)(void *), struct job *job) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, fn, job) != 0)
        return -1;
    if (pthread_join(thread, NULL) != 0)
        return -1;
    return job->result;
}

/* In a new pthread: blocks[i] = malloc(sizes[i]), filled with the pattern of `seed`.
 * 0 on success, -1 if a malloc (that block is then NULL) or the thread failed. */
int clib_alloc_in_thread(void **blocks, const size_t *sizes, size_t count, unsigned seed) {
    struct job job = {blocks, sizes, count, seed, 0, 0};
    return (int)run(alloc_thread, &job);
}

/* In a new pthread: check each block against the pattern of `seed` (if `verify`), then
 * free it and set blocks[i] to NULL. Returns how many blocks differed from the pattern,
 * or -1 if the thread could not run. */
long clib_free_in_thread(void **blocks, const size_t *sizes, size_t count, unsigned seed,
                         int verify) {
    struct job job = {blocks, sizes, count, seed, verify, 0};
    return run(free_thread, &job);
}

struct dup_job {
    const char *src;
    char *copy;
};

static void *dup_thread(void *arg) {
    struct dup_job *job = arg;
    job->copy = strdup(job->src);
    return NULL;
}

/* strdup (which allocates inside libc) called in a new pthread. NULL on failure. */
char *clib_strdup_in_thread(const char *s) {
    struct dup_job job = {s, NULL};
    pthread_t thread;
    if (pthread_create(&thread, NULL, dup_thread, &job) != 0)
        return NULL;
    pthread_join(thread, NULL);
    return job.copy;
}

/* The address of malloc as this C code was linked against it. */
void *clib_malloc_address(void) {
    return (void *)&malloc;
}

/* An allocation site of the C library for the heap profiler's test: `count` blocks of
 * `size` bytes, each freed at once. */
__attribute__((noinline)) void clib_alloc_site(size_t count, size_t size) {
    for (size_t i = 0; i < count; i++) {
        char *volatile p = malloc(size);
        p[0] = (char)i;
        free(p);
    }
}

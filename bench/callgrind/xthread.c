/* xthread N SIZE: thread A mallocs N blocks of SIZE bytes, then (after A has finished
 * allocating) thread B frees them all, in free_loop. scripts/callgrind.sh runs it under
 * valgrind --tool=callgrind --toggle-collect=free_loop, so the total counts only the
 * instructions of B's frees (plus the loop): divided by N, the cost of one cross-thread
 * free. Thread A stays alive until B is done, so its heap is not abandoned meanwhile. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long n;
static size_t size;
static void **blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: A allocated; 2: B freed */

static void wait_for(int s) {
    pthread_mutex_lock(&lock);
    while (stage < s)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void advance(int s) {
    pthread_mutex_lock(&lock);
    stage = s;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void *thread_a(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        if (!blocks[i])
            abort();
    }
    advance(1);
    wait_for(2);
    return NULL;
}

__attribute__((noinline)) void free_loop(void **b, long count) {
    for (long i = 0; i < count; i++)
        free(b[i]);
}

static void *thread_b(void *arg) {
    (void)arg;
    wait_for(1);
    free_loop(blocks, n);
    advance(2);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: xthread N SIZE\n");
        return 2;
    }
    n = atol(argv[1]);
    size = (size_t)atol(argv[2]);
    blocks = calloc((size_t)n, sizeof *blocks);
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, NULL);
    pthread_create(&b, NULL, thread_b, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    free(blocks);
    return 0;
}

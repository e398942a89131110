/* larson: server-style cross-thread traffic, in C (after Larson and Krishnan).
 * 2 x cores threads in a ring, each with 4000 slots of random sizes 8..1000 B; per round
 * a thread replaces 2000 random slots, then hands 1000 objects to the next thread (which
 * frees them) and frees the batch it receives from the previous one.
 * usage: larson [scale] */
#include "common.h"
#include <pthread.h>

enum { SLOTS = 4000, HANDOFF = 1000, OPS = 2000, MAILBOX = 2 };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void **queue[MAILBOX];
    int head, len;
} mailbox_t;

static int nthreads;
static size_t rounds;
static mailbox_t *boxes;

static void send_batch(mailbox_t *m, void **batch) {
    pthread_mutex_lock(&m->lock);
    while (m->len == MAILBOX) pthread_cond_wait(&m->cond, &m->lock);
    m->queue[(m->head + m->len) % MAILBOX] = batch;
    m->len++;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

static void **recv_batch(mailbox_t *m) {
    pthread_mutex_lock(&m->lock);
    while (m->len == 0) pthread_cond_wait(&m->cond, &m->lock);
    void **b = m->queue[m->head];
    m->head = (m->head + 1) % MAILBOX;
    m->len--;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    return b;
}

static void *new_obj(rng_t *r) {
    size_t size = rng_range(r, 8, 1000);
    unsigned char *p = xmalloc(size);
    memset(p, 0, size);
    p[0] = (unsigned char)size;
    p[size - 1] = (unsigned char)size;
    return p;
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    rng_t r;
    rng_seed(&r, 100 + t);
    void **slots = xmalloc(sizeof(void *) * SLOTS);
    for (int i = 0; i < SLOTS; i++) slots[i] = new_obj(&r);
    uint64_t h = 0;
    for (size_t round = 0; round < rounds; round++) {
        for (int k = 0; k < OPS; k++) {
            size_t i = rng_below(&r, SLOTS);
            free(slots[i]);
            slots[i] = new_obj(&r);
        }
        void **batch = xmalloc(sizeof(void *) * HANDOFF);
        memcpy(batch, slots, sizeof(void *) * HANDOFF);
        memmove(slots, slots + HANDOFF, sizeof(void *) * (SLOTS - HANDOFF));
        for (int i = SLOTS - HANDOFF; i < SLOTS; i++) slots[i] = new_obj(&r);
        send_batch(&boxes[(t + 1) % nthreads], batch);
        void **in = recv_batch(&boxes[t]);
        for (int i = 0; i < HANDOFF; i++) {
            h += ((unsigned char *)in[i])[0];
            free(in[i]);
        }
        free(in);
    }
    for (int i = 0; i < SLOTS; i++) free(slots[i]);
    free(slots);
    return (void *)(uintptr_t)h;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    nthreads = 2 * cores();
    rounds = scaled(400, scale, 2);
    double t0 = now_ms();
    boxes = calloc(nthreads, sizeof(mailbox_t));
    for (int t = 0; t < nthreads; t++) {
        pthread_mutex_init(&boxes[t].lock, NULL);
        pthread_cond_init(&boxes[t].cond, NULL);
    }
    pthread_t *tids = xmalloc(sizeof(pthread_t) * nthreads);
    for (int t = 0; t < nthreads; t++) pthread_create(&tids[t], NULL, worker, (void *)(intptr_t)t);
    uint64_t h = 0;
    for (int t = 0; t < nthreads; t++) {
        void *ret;
        pthread_join(tids[t], &ret);
        h += (uint64_t)(uintptr_t)ret;
    }
    report("c-larson", scale, nthreads, now_ms() - t0, h, "");
    return 0;
}

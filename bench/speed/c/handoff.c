/* handoff: threads handing buffers to each other (the memory scenario mixed-c,
 * bench/scenarios/c/mixed.c, as a speed workload: the same work, without its RSS
 * sampling between rounds, whose /proc reads would be part of the time).
 *
 * Eight threads, 50 rounds (x scale). Every thread keeps two rings of 2,048 buffers of
 * 64 B-8 KiB and each round it
 *   1. frees what its neighbour handed it last round (cross-thread frees),
 *   2. replaces a quarter of both rings (frees of its own blocks, old and new),
 *   3. allocates a transient mix of about 4 MiB (buffers of 16 B-8 KiB, and every 64th
 *      pair a list of 16 blocks of 4 KiB) and an array grown by realloc from 1 KiB to
 *      256 KiB, frees half of the mix and hands the other half to its neighbour.
 * Every buffer is written whole when made; its first byte goes into the checksum when it
 * is freed. The threads meet at a barrier after each round, so a thread frees in
 * round r what its neighbour made in round r-1.
 * usage: handoff [scale] */
#include "common.h"
#include <pthread.h>

enum { THREADS = 8, RING = 2048, LIST_PAGES = 16 };
static const uint64_t TRANSIENT = 4u << 20;

struct page {
    struct page *next;
};

/* A buffer, or (list) a chain of 4 KiB blocks. */
typedef struct {
    void *ptr;
    int list;
} item_t;

typedef struct {
    item_t *items;
    size_t len, cap;
} items_t;

static items_t boxes[THREADS]; /* boxes[t]: what thread t frees next round */
static pthread_barrier_t barrier;
static size_t rounds;

typedef struct {
    int id;
    uint64_t sum;
} worker_t;

static void *made(size_t n, int fill) {
    void *p = xmalloc(n);
    memset(p, fill, n);
    return p;
}

static void push(items_t *v, item_t it) {
    if (v->len == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 64;
        item_t *n = realloc(v->items, v->cap * sizeof *n);
        if (!n) abort();
        v->items = n;
    }
    v->items[v->len++] = it;
}

static uint64_t item_free(item_t it, uint64_t sum) {
    if (it.list) {
        for (struct page *p = it.ptr; p;) {
            struct page *next = p->next;
            sum = mix(sum, ((unsigned char *)p)[sizeof *p]);
            free(p);
            p = next;
        }
    } else {
        sum = mix(sum, *(unsigned char *)it.ptr);
        free(it.ptr);
    }
    return sum;
}

static void *list_made(int fill) {
    struct page *head = NULL;
    for (int i = 0; i < LIST_PAGES; i++) {
        struct page *p = made(4096, fill + i);
        p->next = head;
        head = p;
    }
    return head;
}

static void *work(void *arg) {
    worker_t *w = arg;
    rng_t r;
    rng_seed(&r, 0x4a4d + (uint64_t)w->id);
    uint64_t sum = 0;
    void **lib = xmalloc(RING * sizeof *lib), **app = xmalloc(RING * sizeof *app);
    for (int k = 0; k < RING; k++) {
        lib[k] = made(rng_range(&r, 64, 8192), k);
        app[k] = made(rng_range(&r, 64, 8192), k | 1);
    }
    for (size_t round = 0; round < rounds; round++) {
        /* 1. What the neighbour handed over last round (nobody writes our box now: the
         *    writers wait at the barrier below until everyone has emptied theirs). */
        items_t in = boxes[w->id];
        boxes[w->id] = (items_t){0};
        for (size_t i = 0; i < in.len; i++) sum = item_free(in.items[i], sum);
        free(in.items);
        pthread_barrier_wait(&barrier);
        /* 2. A quarter of both rings replaced. */
        for (int i = 0; i < RING / 4; i++) {
            size_t k = rng_below(&r, RING);
            sum = mix(sum, *(unsigned char *)lib[k]);
            free(lib[k]);
            lib[k] = made(rng_range(&r, 64, 8192), (int)k);
            k = rng_below(&r, RING);
            sum = mix(sum, *(unsigned char *)app[k]);
            free(app[k]);
            app[k] = made(rng_range(&r, 64, 8192), (int)k | 1);
        }
        /* 3. The transient mix and the grown array. */
        items_t tmp = {0};
        uint64_t bytes = 0;
        for (uint64_t i = 0; bytes < TRANSIENT; i++) {
            size_t n = rng_range(&r, 16, 8192), m = rng_range(&r, 16, 8192);
            push(&tmp, (item_t){made(n, (int)i), 0});
            push(&tmp, (item_t){made(m, (int)i | 1), 0});
            bytes += n + m;
            if (i % 64 == 63) {
                push(&tmp, (item_t){list_made((int)i), 1});
                bytes += LIST_PAGES * 4096;
            }
        }
        size_t n = 1024;
        unsigned char *grown = made(n, 1);
        while (n < (256u << 10)) {
            unsigned char *g = realloc(grown, n * 2);
            if (!g) abort();
            memset(g + n, 2, n);
            grown = g;
            n *= 2;
        }
        sum = mix(sum, grown[n - 1]);
        free(grown);
        items_t *out = &boxes[(w->id + 1) % THREADS];
        for (size_t i = 0; i < tmp.len; i++) {
            if (i % 2)
                push(out, tmp.items[i]);
            else
                sum = item_free(tmp.items[i], sum);
        }
        free(tmp.items);
        pthread_barrier_wait(&barrier);
    }
    for (int k = 0; k < RING; k++) {
        free(lib[k]);
        free(app[k]);
    }
    free(lib);
    free(app);
    w->sum = sum;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    rounds = scaled(50, scale, 2);
    pthread_barrier_init(&barrier, NULL, THREADS);
    worker_t w[THREADS];
    double t0 = now_ms();
    for (int i = 0; i < THREADS; i++) w[i].id = i;
    run_threads(THREADS, work, w, sizeof w[0]);
    uint64_t sum = 0;
    for (int i = 0; i < THREADS; i++) sum = mix(sum, w[i].sum);
    /* The last round's hand-overs, freed by the main thread. */
    for (int i = 0; i < THREADS; i++) {
        for (size_t k = 0; k < boxes[i].len; k++) sum = item_free(boxes[i].items[k], sum);
        free(boxes[i].items);
    }
    report("c-handoff", scale, THREADS, now_ms() - t0, sum, "");
    return 0;
}

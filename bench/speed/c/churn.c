/* churn: single-threaded small-object churn with big numbers (cfrac-like), in C.
 * Numbers are malloc'd limb arrays (8..72 B); every operation makes a new number, most
 * results are temporaries freed at once, and a pool of 512 numbers is replaced at random.
 * usage: churn [scale] */
#include "common.h"

typedef struct {
    uint32_t n;
    uint32_t limb[];
} big;

static big *big_new(uint32_t n) {
    big *b = xmalloc(sizeof(big) + 4 * (size_t)(n ? n : 1));
    b->n = n;
    return b;
}

static void norm(big *b) {
    while (b->n && b->limb[b->n - 1] == 0) b->n--;
}

static big *add(const big *a, const big *b) {
    if (a->n < b->n) { const big *t = a; a = b; b = t; }
    big *o = big_new(a->n + 1);
    uint64_t c = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t s = (uint64_t)a->limb[i] + (i < b->n ? b->limb[i] : 0) + c;
        o->limb[i] = (uint32_t)s;
        c = s >> 32;
    }
    o->limb[a->n] = (uint32_t)c;
    norm(o);
    return o;
}

static int cmp(const big *a, const big *b) {
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    for (uint32_t i = a->n; i-- > 0;)
        if (a->limb[i] != b->limb[i]) return a->limb[i] < b->limb[i] ? -1 : 1;
    return 0;
}

static big *sub(const big *a, const big *b) { /* a >= b */
    big *o = big_new(a->n);
    int64_t br = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        int64_t d = (int64_t)a->limb[i] - (i < b->n ? b->limb[i] : 0) - br;
        o->limb[i] = (uint32_t)d;
        br = d < 0;
    }
    norm(o);
    return o;
}

static big *mul(const big *a, const big *b) {
    big *o = big_new(a->n + b->n);
    memset(o->limb, 0, 4 * (size_t)(a->n + b->n));
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t c = 0;
        for (uint32_t j = 0; j < b->n; j++) {
            uint64_t t = (uint64_t)a->limb[i] * b->limb[j] + o->limb[i + j] + c;
            o->limb[i + j] = (uint32_t)t;
            c = t >> 32;
        }
        o->limb[i + b->n] = (uint32_t)c;
    }
    norm(o);
    return o;
}

static big *divmod_small(const big *a, uint32_t d, uint32_t *rem) {
    big *q = big_new(a->n);
    uint64_t r = 0;
    for (uint32_t i = a->n; i-- > 0;) {
        uint64_t cur = (r << 32) | a->limb[i];
        q->limb[i] = (uint32_t)(cur / d);
        r = cur % d;
    }
    norm(q);
    *rem = (uint32_t)r;
    return q;
}

static big *random_big(rng_t *r, uint32_t max) {
    uint32_t n = (uint32_t)rng_range(r, 1, max);
    big *b = big_new(n);
    for (uint32_t i = 0; i < n; i++) b->limb[i] = (uint32_t)rng_next(r);
    norm(b);
    return b;
}

static const uint32_t PRIMES[8] = {3, 5, 7, 11, 13, 65521, 1000003, 4294967291u};

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t steps = scaled(2500000, scale, 1000);
    double t0 = now_ms();
    rng_t r;
    rng_seed(&r, 1);
    enum { POOL = 512 };
    big *pool[POOL];
    for (int i = 0; i < POOL; i++) pool[i] = random_big(&r, 8);
    uint64_t h = 0;
    for (size_t step = 0; step < steps; step++) {
        size_t i = rng_below(&r, POOL), j = rng_below(&r, POOL), k = rng_below(&r, POOL);
        big *t = mul(pool[i], pool[j]);
        big *u = add(t, pool[k]);
        free(t);
        uint32_t rem;
        big *q = divmod_small(u, PRIMES[step & 7], &rem);
        free(u);
        h = mix(h, rem);
        uint32_t keep = (uint32_t)rng_range(&r, 1, 8);
        big *next = q;
        if (q->n > keep) {
            next = big_new(keep);
            memcpy(next->limb, q->limb, 4 * (size_t)keep);
            norm(next);
            free(q);
        }
        big *d = cmp(next, pool[k]) < 0 ? sub(pool[k], next) : sub(next, pool[k]);
        h = mix(h, d->n ^ (d->n ? d->limb[0] : 0));
        free(d);
        if (next->n == 0) {
            free(next);
            next = random_big(&r, 4);
        }
        free(pool[i]);
        pool[i] = next;
    }
    for (int i = 0; i < POOL; i++) {
        h = mix(h, pool[i]->n);
        free(pool[i]);
    }
    report("c-churn", scale, 1, now_ms() - t0, h, "");
    return 0;
}

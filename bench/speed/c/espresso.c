/* espresso: a two-level logic minimiser's allocation shape (like mimalloc-bench's
 * espresso), single-threaded. A cube is a malloc'd bit set of 2 bits per input (16-40 B
 * with its header); a cover is a malloc'd array of cube pointers grown by realloc. Per
 * pass over a random function: cubes at distance 1 are merged into new cubes (consensus),
 * cubes contained in another are freed, the surviving cover is copied into a fresh array,
 * and a malloc'd scratch set per cube tracks which cubes it was merged with; every few
 * passes part of the cover is replaced by new random minterms.
 * usage: espresso [scale] */
#include "common.h"

enum { COVER = 600, PASSES_PER_FN = 6 };

typedef struct {
    uint32_t words;
    uint32_t weight;
    uint64_t bits[];
} cube_t;

typedef struct {
    cube_t **c;
    size_t n, cap;
} cover_t;

static cube_t *cube_new(uint32_t words) {
    cube_t *c = xmalloc(sizeof(cube_t) + 8 * (size_t)words);
    c->words = words;
    c->weight = 0;
    return c;
}

static void push(cover_t *v, cube_t *c) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 8;
        v->c = realloc(v->c, v->cap * sizeof *v->c);
        if (!v->c) abort();
    }
    v->c[v->n++] = c;
}

/* Inputs in 2-bit fields: 01 = 0, 10 = 1, 11 = don't care. */
static cube_t *minterm(rng_t *r, uint32_t inputs) {
    uint32_t words = (inputs * 2 + 63) / 64;
    cube_t *c = cube_new(words);
    memset(c->bits, 0, 8 * (size_t)words);
    for (uint32_t i = 0; i < inputs; i++) {
        uint64_t v = (rng_next(r) & 7) == 0 ? 3 : 1 + (rng_next(r) & 1);
        c->bits[i / 32] |= v << (2 * (i % 32));
    }
    return c;
}

/* Fields where a and b have no value in common; 1 means they merge into one cube. */
static int distance(const cube_t *a, const cube_t *b) {
    int d = 0;
    for (uint32_t w = 0; w < a->words; w++) {
        uint64_t x = a->bits[w] & b->bits[w];
        uint64_t empty = ~(x | (x >> 1)) & 0x5555555555555555ull;
        d += __builtin_popcountll(empty);
        if (d > 1) return d;
    }
    return d;
}

static int contains(const cube_t *a, const cube_t *b) { /* a contains b */
    for (uint32_t w = 0; w < a->words; w++)
        if ((a->bits[w] & b->bits[w]) != b->bits[w]) return 0;
    return 1;
}

static cube_t *consensus(const cube_t *a, const cube_t *b) {
    cube_t *c = cube_new(a->words);
    for (uint32_t w = 0; w < a->words; w++) {
        uint64_t x = a->bits[w] & b->bits[w];
        uint64_t empty = ~(x | (x >> 1)) & 0x5555555555555555ull;
        c->bits[w] = x | empty | (empty << 1);
    }
    return c;
}

static void pass(cover_t *v, rng_t *r, uint64_t *sum) {
    cover_t next = {0};
    size_t n = v->n;
    for (size_t i = 0; i < n; i++) {
        /* scratch: the partners this cube merged with */
        size_t cap = 4, k = 0;
        uint32_t *partners = xmalloc(cap * sizeof *partners);
        for (int t = 0; t < 24; t++) {
            size_t j = rng_below(r, n);
            if (j == i || distance(v->c[i], v->c[j]) != 1) continue;
            if (k == cap) {
                cap *= 2;
                partners = realloc(partners, cap * sizeof *partners);
                if (!partners) abort();
            }
            partners[k++] = (uint32_t)j;
            push(&next, consensus(v->c[i], v->c[j]));
        }
        *sum = mix(*sum, k);
        free(partners);
    }
    /* old cubes not contained in a new one survive (copied: a fresh cube each) */
    for (size_t i = 0; i < n; i++) {
        cube_t *c = v->c[i];
        int covered = 0;
        for (size_t t = 0; t < 8 && next.n; t++)
            if (contains(next.c[rng_below(r, next.n)], c)) { covered = 1; break; }
        if (!covered) {
            cube_t *copy = cube_new(c->words);
            memcpy(copy->bits, c->bits, 8 * (size_t)c->words);
            push(&next, copy);
        }
        free(c);
    }
    /* keep the cover bounded: drop cubes at random down to COVER */
    while (next.n > COVER) {
        size_t j = rng_below(r, next.n);
        *sum = mix(*sum, next.c[j]->bits[0]);
        free(next.c[j]);
        next.c[j] = next.c[--next.n];
    }
    free(v->c);
    *v = next;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t functions = scaled(2000, scale, 2);
    rng_t r;
    rng_seed(&r, 0xe5);
    uint64_t sum = 0;
    double t0 = now_ms();
    for (size_t f = 0; f < functions; f++) {
        uint32_t inputs = 16 + (uint32_t)rng_below(&r, 96); /* 1-4 words */
        cover_t v = {0};
        for (size_t i = 0; i < COVER; i++) push(&v, minterm(&r, inputs));
        for (int p = 0; p < PASSES_PER_FN; p++) pass(&v, &r, &sum);
        sum = mix(sum, v.n);
        for (size_t i = 0; i < v.n; i++) free(v.c[i]);
        free(v.c);
    }
    report("c-espresso", scale, 1, now_ms() - t0, sum, "");
    return 0;
}

/* huge: 20 live blocks of 5-25 MiB, one replaced at random 2,000 times (at scale 1),
 * in C: the Rust workload huge-replace, same sizes, order and page writes. The new block
 * is allocated before the old one is freed (as C++'s buffer.reset(new char[size])), and
 * written once per 4 KiB page and at its last byte.
 * usage: huge [scale] */
#include "common.h"

enum { LIVE = 20, PAGE = 4096 };
#define MIN_SIZE ((size_t)5 << 20)
#define MAX_SIZE ((size_t)25 << 20)

typedef struct {
    unsigned char *p;
    size_t size;
} block_t;

static block_t block_new(size_t size, unsigned char tag) {
    block_t b = {xmalloc(size), size};
    for (size_t i = 0; i < size; i += PAGE) b.p[i] = tag ^ (unsigned char)(i / PAGE);
    b.p[size - 1] = tag;
    return b;
}

static uint64_t probe(block_t b) { return (uint64_t)b.p[0] << 8 | b.p[b.size - 1]; }

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t replacements = scaled(2000, scale, LIVE);
    rng_t r;
    rng_seed(&r, 16);
    double t0 = now_ms();
    block_t live[LIVE];
    for (int i = 0; i < LIVE; i++) live[i] = block_new(rng_range(&r, MIN_SIZE, MAX_SIZE), (unsigned char)i);
    uint64_t h = 0;
    for (size_t i = 0; i < replacements; i++) {
        size_t slot = rng_below(&r, LIVE);
        size_t size = rng_range(&r, MIN_SIZE, MAX_SIZE);
        h = mix(h, probe(live[slot]));
        block_t fresh = block_new(size, (unsigned char)i);
        free(live[slot].p);
        live[slot] = fresh;
    }
    for (int i = 0; i < LIVE; i++) {
        h = mix(h, probe(live[i]));
        free(live[i].p);
    }
    report("c-huge", scale, 1, now_ms() - t0, h, "");
    return 0;
}

/* realloc: buffers grown with C realloc. Doubling a buffer from 64 B to 256 MiB
 * (writing each new half), twice; then 200k small strings grown by 1.5x steps from 8 B
 * to 1..16 KiB, every 8th kept in a ring of 256 (the rest freed at once).
 * usage: realloc [scale] */
#include "common.h"

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    size_t max = scaled((size_t)256 << 20, scale, 1 << 16);
    size_t strings = scaled(200000, scale, 100);
    double t0 = now_ms();
    uint64_t h = 0;
    for (int rep = 0; rep < 2; rep++) {
        size_t cap = 64;
        unsigned char *p = xmalloc(cap);
        memset(p, rep, cap);
        while (cap < max) {
            p = realloc(p, cap * 2);
            if (!p) abort();
            memset(p + cap, (int)(cap >> 6), cap);
            cap *= 2;
        }
        h += p[cap / 2 + 1] + cap;
        free(p);
    }
    rng_t r;
    rng_seed(&r, 5);
    enum { RING = 256 };
    char *ring[RING] = {0};
    for (size_t s = 0; s < strings; s++) {
        size_t target = (size_t)1024 << rng_below(&r, 5), cap = 8, len = 0;
        char *p = xmalloc(cap);
        while (len < target) {
            if (len + 8 > cap) {
                cap = cap + cap / 2 + 8;
                p = realloc(p, cap);
                if (!p) abort();
            }
            memcpy(p + len, "item123,", 8);
            len += 8;
        }
        h += len + (unsigned char)p[len / 2];
        if (s % 8 == 0) {
            free(ring[s / 8 % RING]);
            ring[s / 8 % RING] = p;
        } else {
            free(p);
        }
    }
    for (int i = 0; i < RING; i++) free(ring[i]);
    report("c-realloc", scale, 1, now_ms() - t0, h, "");
    return 0;
}

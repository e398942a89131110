/* sweep: malloc cost across sizes, in C. For each size: malloc+free pairs, then
 * malloc-many-then-free-many (up to 1000 blocks, at most 64 MiB at once), touching the
 * first and last byte; on one thread, then on two at once. Same sizes and counts as the
 * Rust `sweep` workload. Per-size times are in "sizes".
 * usage: sweep [scale] */
#include "common.h"
#include <pthread.h>

static const size_t SIZES[] = {16, 64, 256, 1024, 1040, 4096, 16384, 65536, 262144,
                               1 << 20, 4 << 20, 32 << 20};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };

static size_t base_ops(size_t size) {
    if (size <= 1040) return 400000;
    if (size <= 65536) return 100000;
    if (size <= 262144) return 40000;
    if (size <= 1048576) return 10000;
    if (size <= 4194304) return 4000;
    return 1000;
}

typedef struct {
    size_t size, ops;
    uint64_t h;
} job_t;

static inline uint64_t touch(volatile unsigned char *p, size_t size, unsigned char v) {
    p[0] = v;
    p[size - 1] = v;
    return p[0];
}

static void *one_size(void *arg) {
    job_t *j = arg;
    size_t size = j->size, ops = j->ops;
    uint64_t h = 0;
    for (size_t i = 0; i < ops; i++) {
        unsigned char *p = xmalloc(size);
        h += touch(p, size, (unsigned char)i);
        free(p);
    }
    size_t batch = ((size_t)64 << 20) / size;
    if (batch < 1) batch = 1;
    if (batch > 1000) batch = 1000;
    void **ptrs = xmalloc(sizeof(void *) * batch);
    for (size_t done = 0; done < ops;) {
        size_t n = ops - done < batch ? ops - done : batch;
        for (size_t i = 0; i < n; i++) {
            ptrs[i] = xmalloc(size);
            h += touch(ptrs[i], size, (unsigned char)i);
        }
        for (size_t i = 0; i < n; i++) free(ptrs[i]);
        done += n;
    }
    free(ptrs);
    j->h = h;
    return NULL;
}

int main(int argc, char **argv) {
    double scale = arg_scale(argc, argv);
    char extra[4096];
    size_t off = (size_t)snprintf(extra, sizeof extra, ", \"sizes\": {");
    uint64_t h = 0;
    double t_start = now_ms();
    for (int k = 0; k < NSIZES; k++) {
        size_t size = SIZES[k], ops = scaled(base_ops(size), scale, 4);
        job_t j1 = {size, ops, 0};
        double t0 = now_ms();
        one_size(&j1);
        double t1 = now_ms() - t0;
        job_t j2[2] = {{size, ops, 0}, {size, ops, 0}};
        pthread_t tid[2];
        t0 = now_ms();
        for (int t = 0; t < 2; t++) pthread_create(&tid[t], NULL, one_size, &j2[t]);
        for (int t = 0; t < 2; t++) pthread_join(tid[t], NULL);
        double t2 = now_ms() - t0;
        h = h * 31 + j1.h + j2[0].h + j2[1].h;
        off += (size_t)snprintf(extra + off, sizeof extra - off,
                                "%s\"%zu\": {\"t1_ms\": %.3f, \"t2_ms\": %.3f}", k ? ", " : "", size, t1, t2);
    }
    snprintf(extra + off, sizeof extra - off, "}");
    report("c-sweep", scale, 2, now_ms() - t_start, h, extra);
    return 0;
}

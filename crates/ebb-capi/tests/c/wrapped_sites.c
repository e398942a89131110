/* Allocation sites behind wrappers that keep no frame and reach malloc by tail jumps,
 * as CPython's do (PyMem_Malloc jumps through a table of function pointers to
 * _PyMem_RawMalloc, which jumps to malloc@plt; _PyObject_Realloc has a body and ends
 * in a jump to the next wrapper). Built without frame pointers (-O2), run under
 * LD_PRELOAD=libebb.so with EBB_PROFILE set (tests/profile.rs): each site's blocks
 * must be charged to the site, the caller of the wrapper.
 * Truth: site_table 100,000 x 1,000 B kept (through mem_malloc), site_grow one block
 * grown by mem_realloc to 32 MiB and kept (huge: sampled for sure). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*malloc_fn)(void *ctx, size_t n);
typedef void *(*realloc_fn)(void *ctx, void *p, size_t n);

__attribute__((noinline)) static void *raw_malloc(void *ctx, size_t n) {
    (void)ctx;
    return malloc(n ? n : 1);
}

__attribute__((noinline)) static void *raw_realloc(void *ctx, void *p, size_t n) {
    (void)ctx;
    return realloc(p, n ? n : 1);
}

static volatile long requests;

__attribute__((noinline)) static void count_request(size_t n) {
    requests += (long)(n & 1) + 1;
}

/* A body with a call (so a frame, saved registers), then a jump to the next
 * wrapper. */
__attribute__((noinline)) static void *pool_realloc(void *ctx, void *p, size_t n) {
    count_request(n);
    if (n < 16 && p == NULL)
        return NULL;
    return raw_realloc(ctx, p, n);
}

struct allocator {
    void *ctx;
    malloc_fn malloc;
    realloc_fn realloc;
};
struct allocator mem = {NULL, raw_malloc, pool_realloc};

__attribute__((noinline)) void *mem_malloc(size_t n) {
    if ((long)n < 0)
        return NULL;
    return mem.malloc(mem.ctx, n);
}

__attribute__((noinline)) void *mem_realloc(void *p, size_t n) {
    if ((long)n < 0)
        return NULL;
    return mem.realloc(mem.ctx, p, n);
}

static void *table[100000];

__attribute__((noinline)) static void site_table(void) {
    for (int i = 0; i < 100000; i++) {
        table[i] = mem_malloc(1000);
        memset(table[i], 1, 64);
    }
}

/* Grown by a quarter at a time to exactly 32 MiB: past 16 MiB, in place (the huge
 * mapping grows or moves), and the profile holds it at 32 MiB. */
__attribute__((noinline)) static char *site_grow(void) {
    char *p = NULL;
    size_t n = 1 << 16;
    for (;;) {
        p = mem_realloc(p, n);
        p[n - 1] = 1;
        if (n == 32 << 20)
            return p;
        n += n / 4;
        if (n > 32 << 20)
            n = 32 << 20;
    }
}

int main(void) {
    site_table();
    char *grown = site_grow();
    printf("kept %d %d\n", table[7] != NULL, grown != NULL);
    return 0;
}

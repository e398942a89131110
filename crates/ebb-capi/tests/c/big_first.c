/* A program whose first allocations are big (80 MiB from calloc, 80 MiB from
 * malloc: huge blocks, which never pass the small-block path that sets ebb up), run
 * under LD_PRELOAD=libebb.so with EBB_PROFILE set (tests/profile.rs). Built with frame
 * pointers. */
#pragma GCC optimize("no-omit-frame-pointer")
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static void *big_calloc(size_t n) {
    void *p = calloc(n, 1);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) static void *big_malloc(size_t n) {
    char *p = malloc(n);
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 1;
    return p;
}

int main(void) {
    void *a = big_calloc(80 << 20);
    void *b = big_malloc(80 << 20);
    if (!a || !b)
        return 1;
    printf("held %d MiB\n", 160);
    return 0;
}

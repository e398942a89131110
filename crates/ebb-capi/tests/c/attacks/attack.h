/* Shared by the attack programs (tests/attacks.rs): each commits one heap bug, then
 * keeps using the allocator; it prints "survived" and exits 0 only if it ran on.
 * The compiler must not see through the bugs: pointers pass through opaque(). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wmismatched-dealloc"

static inline void *opaque(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* Announce the bug (flushed, so it shows even if the process dies right after). */
static inline void committing(const char *what) {
    printf("committing: %s\n", what);
    fflush(stdout);
}

/* After the bug: use the allocator a little (where a corrupted heap would show), write
 * into what it returns, free it, and say the program ran on. */
static inline int survived(size_t size) {
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        blocks[i] = malloc(size);
        if (blocks[i] != NULL) memset(blocks[i], 0x5a, size);
    }
    for (int i = 0; i < 64; i++) free(blocks[i]);
    printf("survived\n");
    fflush(stdout);
    return 0;
}

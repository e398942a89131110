/* free() of a pointer read from memory never written: a fresh stack frame holding what
 * an earlier call left there (0xa5 bytes here, as poisoning or old data would). */
#include "attack.h"
static void __attribute__((noinline)) scribble(void) {
    volatile unsigned char junk[256];
    for (int i = 0; i < 256; i++) junk[i] = 0xa5;
}
static void *__attribute__((noinline)) stale(void) {
    volatile uintptr_t slots[32]; /* never written: holds scribble()'s bytes */
    uintptr_t v;
    __asm__ volatile("" ::: "memory");
    memcpy(&v, (const void *)&slots[7], sizeof v); /* -Wmaybe-uninitialized on purpose */
    return (void *)v;
}
int main(void) {
    scribble();
    void *p = stale();
    printf("ptr=%p\n", p);
    committing("free of an uninitialised pointer");
    free(opaque(p));
    return survived(64);
}

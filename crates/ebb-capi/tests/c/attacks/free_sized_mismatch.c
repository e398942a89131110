// C23 free_sized with the wrong size: a 32-byte block freed as if it were 4096 bytes
// (a free through the wrong type, or of another object). A weak reference, so the
// program links against a C library without free_sized (glibc before 2.43) and runs on
// there.
#include <stdio.h>
#include <stdlib.h>
extern void free_sized(void *, size_t) __attribute__((weak));
static void *opaque(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}
int main(void) {
    if (!free_sized) {
        printf("no free_sized in this C library\nsurvived\n");
        return 0;
    }
    void *p = opaque(malloc(32));
    printf("committing: free_sized of a 32-byte block with size 4096\n");
    fflush(stdout);
    free_sized(p, 4096);
    for (int i = 0; i < 64; i++) free(opaque(malloc(32)));
    printf("survived\n");
    return 0;
}

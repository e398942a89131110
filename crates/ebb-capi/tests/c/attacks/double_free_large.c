/* Double free of a 1 MiB block, immediately. */
#include "attack.h"
int main(void) {
    /* A program that has run a while: its first free of a large block is behind it.
     * (Under ebb that free starts the background purger, and glibc's set-up of the new
     * thread allocates, possibly from the span just freed: then the pointer below
     * would be the start of a live small block, which no check can tell from one.) */
    free(opaque(malloc(1 << 20)));
    char *p = opaque(malloc(1 << 20));
    memset(p, 1, 1 << 20);
    committing("double free of a 1 MiB block, immediate");
    free(p);
    free(opaque(p));
    return survived(1 << 20);
}

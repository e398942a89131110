/* realloc of a 1 MiB block after it was freed. */
#include "attack.h"
int main(void) {
    /* A program that has run a while: its first free of a large block is behind it.
     * (Under ebb that free starts the background purger, and glibc's set-up of the new
     * thread allocates, possibly from the span just freed: then the pointer below
     * would be the start of a live small block, which no check can tell from one.) */
    free(opaque(malloc(1 << 20)));
    char *p = opaque(malloc(1 << 20));
    committing("realloc of a freed 1 MiB block");
    free(p);
    char *q = realloc(opaque(p), 2 << 20);
    printf("realloc=%s\n", q ? "block" : "null");
    return survived(64);
}

/* free() of a pointer far past a block (a bad offset or index): 1 MiB beyond it. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    char *keep = opaque(malloc(2 << 20)); /* something may live there */
    committing("free of a pointer 1 MiB past a 64-byte block");
    free(opaque(p + (1 << 20)));
    free(keep);
    free(p);
    return survived(64);
}

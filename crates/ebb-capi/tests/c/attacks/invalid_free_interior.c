/* free() of a pointer 16 bytes inside a block (aligned, but not the block's start). */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    committing("free of a pointer 16 bytes into a 64-byte block");
    free(opaque(p + 16));
    return survived(64);
}

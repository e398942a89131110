/* free() of an unaligned pointer: one byte into a block. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    committing("free of a pointer 1 byte into a 64-byte block");
    free(opaque(p + 1));
    return survived(64);
}

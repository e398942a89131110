/* realloc of an unaligned pointer: one byte into a block. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    committing("realloc of a pointer 1 byte into a 64-byte block");
    char *q = realloc(opaque(p + 1), 4096);
    printf("realloc=%s\n", q ? "block" : "null");
    return survived(64);
}

/* Read a block after freeing it. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    strcpy(p, "secret");
    committing("read of a 64-byte block after free");
    free(p);
    volatile char c = ((volatile char *)opaque(p))[8];
    (void)c;
    return survived(64);
}

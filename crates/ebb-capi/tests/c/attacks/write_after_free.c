/* Write over a freed block (its whole first 16 bytes), then allocate again. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    committing("write into a 64-byte block after free");
    free(p);
    memset(opaque(p), 0x41, 16);
    return survived(64);
}

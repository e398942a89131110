/* One byte written past the end of a 24-byte block, then the block is freed. */
#include "attack.h"
int main(void) {
    char *blocks[8];
    for (int i = 0; i < 8; i++) blocks[i] = opaque(malloc(24));
    char *p = blocks[3];
    committing("1-byte overflow of a 24-byte block");
    memset(p, 0x41, 25);
    for (int i = 0; i < 8; i++) free(blocks[i]);
    return survived(24);
}

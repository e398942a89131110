/* Read a block after freeing it, and say how much of what it held the read saw. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    memset(p, 0xAB, 64);
    committing("read of a 64-byte block after free");
    free(p);
    int left = 0;
    for (int i = 16; i < 48; i++) left += ((volatile unsigned char *)opaque(p))[i] == 0xAB;
    printf("read after free: %d of 32 bytes as they were\n", left);
    return survived(64);
}

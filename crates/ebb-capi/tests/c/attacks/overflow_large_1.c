/* One byte written past the end of a 1 MiB block, then the block is freed. */
#include "attack.h"
int main(void) {
    size_t n = 1 << 20;
    char *p = opaque(malloc(n));
    committing("1-byte overflow of a 1 MiB block");
    memset(p, 0x41, n + 1);
    free(p);
    return survived(n);
}

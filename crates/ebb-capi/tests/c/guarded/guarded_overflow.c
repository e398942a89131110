/* A seeded 1-byte overflow under guarded sampling (tests/guarded.rs): 16 blocks of 64
 * bytes, one byte written past the end of each. A block placed at the end of its page
 * faults at the write; one placed at the start has the byte land in the pattern
 * around it, reported when it is freed. */
#include "../attacks/attack.h"
int main(void) {
    char *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = opaque(malloc(64));
    committing("1-byte overflow of 64-byte blocks");
    for (int i = 0; i < 16; i++) ((volatile char *)opaque(blocks[i]))[64] = 0x41;
    for (int i = 0; i < 16; i++) free(blocks[i]);
    return survived(64);
}

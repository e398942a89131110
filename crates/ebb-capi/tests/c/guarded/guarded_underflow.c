/* A 1-byte underflow under guarded sampling: one byte written before the start of
 * 16 blocks of 64 bytes (a block placed at the start of its page faults at once). */
#include "../attacks/attack.h"
int main(void) {
    char *blocks[16];
    for (int i = 0; i < 16; i++) blocks[i] = opaque(malloc(64));
    committing("1-byte underflow of 64-byte blocks");
    for (int i = 0; i < 16; i++) ((volatile char *)opaque(blocks[i]))[-1] = 0x41;
    for (int i = 0; i < 16; i++) free(blocks[i]);
    return survived(64);
}

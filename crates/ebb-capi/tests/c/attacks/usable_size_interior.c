/* malloc_usable_size of a pointer inside a block (not its start). */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(64));
    committing("malloc_usable_size of a pointer 16 bytes into a block");
    printf("usable=%zu\n", malloc_usable_size(opaque(p + 16)));
    free(p);
    return survived(64);
}

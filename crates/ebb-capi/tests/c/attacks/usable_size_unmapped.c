/* malloc_usable_size of an address that is not mapped. */
#include "attack.h"
int main(void) {
    char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    munmap(m, 1 << 20);
    committing("malloc_usable_size of an unmapped address");
    printf("usable=%zu\n", malloc_usable_size(opaque(m + 4096 + 16)));
    return survived(64);
}

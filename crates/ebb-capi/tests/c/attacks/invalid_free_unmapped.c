/* free() of an aligned pointer into memory that is not mapped at all. */
#include "attack.h"
int main(void) {
    char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 2;
    munmap(m, 1 << 20);
    committing("free of an unmapped address");
    free(opaque(m + 4096 + 16));
    return survived(64);
}

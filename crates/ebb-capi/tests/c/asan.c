/* Built with -fsanitize=address (tests/debuggers.rs): ASan brings its own allocator.
 * Usage: asan [overflow]   -- with "overflow", writes one byte past a 16-byte block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    char *blocks[100];
    for (int i = 0; i < 100; i++) {
        blocks[i] = malloc((size_t)i * 10 + 16);
        memset(blocks[i], i, (size_t)i * 10 + 16);
    }
    if (argc > 1 && strcmp(argv[1], "overflow") == 0) {
        volatile char *p = blocks[0];
        p[16] = 1;
    }
    for (int i = 0; i < 100; i++) free(blocks[i]);
    printf("asan program done\n");
    return 0;
}

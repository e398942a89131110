/* pairs N SIZE: N malloc+free pairs of SIZE bytes, for scripts/callgrind.sh.
 *
 * Run under valgrind --tool=callgrind with the allocator under test preloaded (or none:
 * glibc); the script takes the instruction totals at two values of N and divides their
 * difference by the difference of N: the instructions of one pair. */
#include <stdio.h>
#include <stdlib.h>

/* Keeps the compiler from removing or merging the pair. */
#define black_box(p) __asm__ volatile("" : : "r"(p) : "memory")

__attribute__((noinline)) static void pairs(long n, size_t size) {
    for (long i = 0; i < n; i++) {
        void *p = malloc(size);
        if (!p)
            abort();
        black_box(p);
        free(p);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: pairs N SIZE\n");
        return 2;
    }
    long n = atol(argv[1]);
    size_t size = (size_t)atol(argv[2]);
    black_box(&n);
    pairs(n, size);
    return 0;
}

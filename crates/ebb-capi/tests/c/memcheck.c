/* Bugs for valgrind's memcheck to find in a program allocating through ebb (run under
 * `valgrind --leak-check=full` with LD_PRELOAD=libebb.so built with the `valgrind`
 * feature; tests/debuggers.rs):
 *   leak     a 4000-byte block whose only pointer is dropped (definitely lost)
 *   uaf      a read of a 64-byte block after its free (invalid read)
 *   uninit   a branch on a byte of a fresh malloc'ed block (uninitialised value)
 *   clean    none of these: memcheck must report no error and no leak
 * Each scenario also allocates, reallocates and frees many blocks of many sizes, which
 * must produce no report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

static void *__attribute__((noinline)) opaque(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void churn(void) {
    void *blocks[200];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 200; i++) {
            size_t size = (size_t)(i * 37 % 3000) + 1 + (i % 5 == 0 ? 100000 : 0);
            blocks[i] = i % 3 == 0 ? calloc(1, size) : malloc(size);
            memset(blocks[i], i, size);
        }
        for (int i = 0; i < 200; i += 2) blocks[i] = realloc(blocks[i], (size_t)i * 11 + 3);
        for (int i = 0; i < 200; i++) free(blocks[i]);
    }
}

/* Leaks the middle one of three 4000-byte blocks. (Not the first block of its page:
 * ebb's page descriptor points at that one, which memcheck would count as still
 * reachable; README "Debuggers".) */
static void __attribute__((noinline)) leak_a_block(void) {
    char *first = malloc(4000), *p = malloc(4000), *last = malloc(4000);
    memset(first, 1, 4000);
    memset(p, 1, 4000);
    memset(last, 1, 4000);
    sink = p;
    sink = NULL; /* the only pointer is gone */
    free(first);
    free(last);
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "clean";
    churn();
    if (strcmp(what, "leak") == 0) {
        leak_a_block();
    } else if (strcmp(what, "uaf") == 0) {
        char *p = opaque(malloc(64));
        memset(p, 7, 64);
        free(p);
        printf("read %d\n", ((volatile char *)p)[40]);
    } else if (strcmp(what, "uninit") == 0) {
        char *p = opaque(malloc(64));
        if (p[20] == 42) printf("forty-two\n");
        free(p);
    }
    printf("done %s\n", what);
    return 0;
}

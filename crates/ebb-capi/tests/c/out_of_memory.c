/* Clean failure: allocate until the OS (or ebb's fault injection) refuses, check every
 * entry point returns null with errno ENOMEM (posix_memalign: returns ENOMEM), free
 * half, and allocate again. Prints one line per check; exits 1 on a failed check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024 * 1024)
static int failures;

static void check(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok" : "FAILED", what);
    if (!ok) failures++;
}

int main(int argc, char **argv) {
    size_t block = (argc > 1 ? (size_t)atol(argv[1]) : 8) * MIB;
    enum { MAX = 4096 };
    static char *held[MAX];
    int count = 0;
    while (count < MAX) {
        char *p = malloc(block);
        if (!p) break;
        memset(p, count & 0xff, 4096);
        held[count++] = p;
    }
    check(count > 0 && count < MAX, "malloc reached the limit");
    size_t beyond = block * 64; /* more than any limit the test sets leaves */
    errno = 0;
    check(malloc(beyond) == NULL && errno == ENOMEM, "malloc: null, ENOMEM");
    errno = 0;
    check(calloc(beyond, 1) == NULL && errno == ENOMEM, "calloc: null, ENOMEM");
    errno = 0;
    check(realloc(held[0], beyond) == NULL && errno == ENOMEM, "realloc: null, ENOMEM");
    void *aligned = NULL;
    check(posix_memalign(&aligned, 4096, beyond) == ENOMEM && aligned == NULL,
          "posix_memalign: ENOMEM");
    errno = 0;
    check(aligned_alloc(4096, beyond) == NULL && errno == ENOMEM, "aligned_alloc: null, ENOMEM");
    int intact = 1;
    for (int i = 0; i < count; i++)
        if (held[i][0] != (char)(i & 0xff) || held[i][4095] != (char)(i & 0xff)) intact = 0;
    check(intact, "blocks intact after the refusals");
    for (int i = 0; i < count; i += 2) free(held[i]);
    char *small = malloc(100);
    check(small != NULL, "small malloc works after free");
    free(small);
    int again = 1;
    /* All but a few of the freed blocks again (the small block took some room). */
    for (int i = 0; i < count; i += 2) {
        held[i] = i + 8 < count ? malloc(block) : NULL;
        if (i + 8 >= count) continue;
        if (!held[i]) again = 0;
        else memset(held[i], 1, block);
    }
    check(again, "malloc works again after free");
    for (int i = 0; i < count; i++) free(held[i]);
    return failures ? 1 : 0;
}

/* Heap bugs the secure build must stop, one per argument; run under LD_PRELOAD.
 * Each prints what happened if the process survives, so a test can tell "caught"
 * (killed, with ebb's report on stderr) from "ran on". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char target[256] __attribute__((aligned(64)));

/* Use after free: overwrite a freed block's link word with the address of `target`,
 * as an attacker would, then allocate until the allocator hands out `target`. */
static int corrupt_link(void) {
    char *a = malloc(48);
    free(a);
    *(volatile uintptr_t *)a = (uintptr_t)target;
    for (int i = 0; i < 100000; i++) {
        char *p = malloc(48);
        if (p == target) {
            printf("malloc returned the attacker's address\n");
            return 0;
        }
    }
    printf("ran on\n");
    return 0;
}

static int double_free_small(void) {
    char *p = malloc(32);
    free(p);
    free(p);
    printf("ran on\n");
    return 0;
}

/* The block is freed, others come and go, then it is freed again. */
static int double_free_delayed(void) {
    char *p = malloc(100);
    char *keep[64];
    free(p);
    for (int i = 0; i < 64; i++) keep[i] = malloc(200);
    for (int i = 0; i < 64; i++) free(keep[i]);
    free(p);
    printf("ran on\n");
    return 0;
}

static int double_free_large(void) {
    char *keep = malloc(1 << 20);
    char *p = malloc(1 << 20);
    free(p);
    free(p);
    free(keep);
    printf("ran on\n");
    return 0;
}

static int invalid_free_interior(void) {
    char *p = malloc(64);
    free(p + 16);
    printf("ran on\n");
    return 0;
}

/* Write forward from a block, past the end of its page (64 KiB of 1 KiB blocks):
 * the guard page after the page stops it. */
static int overflow_page(void) {
    volatile char *p = malloc(1024);
    for (size_t i = 0; i < 70 * 1024; i += 64) p[i] = 1;
    printf("ran on\n");
    return 0;
}

/* Read a freed block: zero on free leaves nothing of what it held. */
static int read_after_free(void) {
    char *p = malloc(64);
    memset(p, 0xAB, 64);
    free(p);
    int left = 0;
    for (int i = 8; i < 64; i++) left += ((volatile unsigned char *)p)[i] == 0xAB;
    printf("%d bytes of the freed block left\n", left);
    return 0;
}

/* Consecutive allocations of a fresh size class: in carving order, or not. */
static int order(void) {
    char *prev = malloc(3000), *p;
    int sequential = 0;
    for (int i = 0; i < 15; i++, prev = p) {
        p = malloc(3000);
        sequential += p == prev + 3072;
    }
    printf("%d of 15 allocations followed the previous one\n", sequential);
    return 0;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(what, "corrupt-link")) return corrupt_link();
    if (!strcmp(what, "double-free")) return double_free_small();
    if (!strcmp(what, "double-free-delayed")) return double_free_delayed();
    if (!strcmp(what, "double-free-large")) return double_free_large();
    if (!strcmp(what, "invalid-free")) return invalid_free_interior();
    if (!strcmp(what, "overflow-page")) return overflow_page();
    if (!strcmp(what, "read-after-free")) return read_after_free();
    if (!strcmp(what, "order")) return order();
    fprintf(stderr, "unknown test %s\n", what);
    return 2;
}

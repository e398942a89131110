/* realloc inplace|move ROUNDS: `realloc` of small blocks, in the two shapes programs
 * use it in. `inplace`: 1,024 blocks of 40 bytes, each resized between 40 and 44 bytes
 * ROUNDS times (a block every allocator here leaves where it is: a string or buffer
 * trimmed and regrown within its size). `move`: 64 blocks grown by doubling from 16
 * bytes to 4 KiB, their last byte written after each step, then freed, ROUNDS times (a
 * vector grown by push). Prints the wall time in ms and a checksum of the addresses.
 *
 *   gcc -O2 -o /tmp/realloc bench/callgrind/realloc.c
 *   LD_PRELOAD=target/release/libebb.so /tmp/realloc inplace 20000
 *   LD_PRELOAD=target/release/libebb.so valgrind --tool=callgrind /tmp/realloc inplace 200
 *
 * docs/BENCHMARKS.md, "realloc of a small block", uses it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static uint64_t in_place(int rounds) {
    enum { N = 1024 };
    static void *p[N];
    uint64_t sum = 0;
    for (int i = 0; i < N; i++)
        p[i] = malloc(40);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++) {
            p[i] = realloc(p[i], (r & 1) ? 40 : 44);
            sum += (uintptr_t)p[i] & 0xff;
        }
    for (int i = 0; i < N; i++)
        free(p[i]);
    return sum;
}

static uint64_t moving(int rounds) {
    enum { N = 64 };
    void *p[N];
    uint64_t sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < N; i++)
            p[i] = malloc(16);
        for (size_t n = 32; n <= 4096; n *= 2)
            for (int i = 0; i < N; i++) {
                p[i] = realloc(p[i], n);
                ((volatile char *)p[i])[n - 1] = 1;
                sum += (uintptr_t)p[i] & 0xf0;
            }
        for (int i = 0; i < N; i++)
            free(p[i]);
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "inplace") != 0 && strcmp(argv[1], "move") != 0)) {
        fprintf(stderr, "usage: realloc inplace|move ROUNDS\n");
        return 2;
    }
    int rounds = atoi(argv[2]);
    double t0 = now_ms();
    uint64_t sum = strcmp(argv[1], "inplace") == 0 ? in_place(rounds) : moving(rounds);
    printf("%.1f ms %llu\n", now_ms() - t0, (unsigned long long)sum);
    return 0;
}

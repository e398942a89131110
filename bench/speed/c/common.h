/* Shared helpers for the C-ABI benchmarks: timing, peak RSS, a PRNG, JSON output.
 * The allocator is whatever malloc the process gets (glibc, or one put in front of it
 * with LD_PRELOAD); BENCH_ALLOCATOR names it in the output. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}

/* User + system time of the whole process (all its threads) so far; a C program's
 * start-up is a negligible part of it. */
static inline double cpu_ms(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

typedef struct { uint64_t s; } rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    r->s = (z ^ (z >> 31)) | 1;
}

static inline uint64_t rng_next(rng_t *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

static inline size_t rng_below(rng_t *r, size_t n) {
    return (size_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

static inline size_t rng_range(rng_t *r, size_t lo, size_t hi) { return lo + rng_below(r, hi - lo + 1); }

/* Mixes a value into a running checksum (order-dependent); util::mix in the Rust suite. */
static inline uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x100000001b3ull;
    return (h << 17) | (h >> 47);
}

static inline size_t scaled(size_t base, double scale, size_t min) {
    double v = base * scale + 0.5;
    return v < (double)min ? min : (size_t)v;
}

static inline double arg_scale(int argc, char **argv) {
    double s = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(s > 0)) {
        fprintf(stderr, "usage: %s [scale]\n", argv[0]);
        exit(2);
    }
    return s;
}

static inline int cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 2 ? 2 : (int)n;
}

/* The number after "name": in a JSON object's text, or -1. */
static inline double json_number(const char *text, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(text, key);
    return at ? strtod(at + strlen(key), NULL) : -1;
}

/* Prints the JSON line; `extra` is "" or ", \"key\": value...". With ebb preloaded,
 * also its background purger's CPU time, the kernel's part of it (where the library
 * reports it) and its passes so far (issue 20: a background thread's time is the
 * program's; the report flags it above 0.5% of the CPU). */
static inline void report(const char *workload, double scale, int threads, double wall_ms, uint64_t checksum,
                   const char *extra) {
    const char *alloc = getenv("BENCH_ALLOCATOR");
    double cpu = cpu_ms();
    char purger[192] = "";
    size_t (*stats_json)(char *, size_t) = (size_t (*)(char *, size_t))dlsym(RTLD_DEFAULT, "ebb_stats_json");
    static char stats[64 << 10];
    if (stats_json && stats_json(stats, sizeof stats) < sizeof stats) {
        double ns = json_number(stats, "purger_cpu_ns"), wakeups = json_number(stats, "purger_wakeups");
        double sys_ns = json_number(stats, "purger_sys_ns");
        if (ns >= 0 && wakeups >= 0) {
            int n = snprintf(purger, sizeof purger, ", \"ebb_purger_cpu_ms\": %.2f, \"ebb_purger_wakeups\": %.0f",
                             ns / 1e6, wakeups);
            if (sys_ns >= 0 && n > 0 && (size_t)n < sizeof purger)
                snprintf(purger + n, sizeof purger - n, ", \"ebb_purger_sys_ms\": %.2f", sys_ns / 1e6);
        }
    }
    printf("{\"workload\": \"%s\", \"allocator\": \"%s\", \"scale\": %g, \"threads\": %d, "
           "\"wall_ms\": %.3f, \"cpu_ms\": %.0f, \"peak_rss_kib\": %ld, \"checksum\": \"%016llx\"%s%s}\n",
           workload, alloc ? alloc : "unknown", scale, threads, wall_ms, cpu, peak_rss_kib(),
           (unsigned long long)checksum, purger, extra);
}

/* Run `fn` on `n` threads, thread i given `(char *)args + i * size` (an array of the
 * workers' structs), and wait for all of them. Aborts if a thread cannot start. */
static inline void run_threads(int n, void *(*fn)(void *), void *args, size_t size) {
    pthread_t t[64];
    if (n > 64) abort();
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * size)) abort();
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        abort();
    }
    return p;
}

#endif

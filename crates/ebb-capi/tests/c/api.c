/* Edge cases of the whole malloc family, to glibc's documented behaviour, plus the
 * ebb_* functions when ebb is loaded (found with dlsym, so the same binary also runs
 * on glibc's malloc and the two outputs can be compared).
 *
 * Usage: api [GROUP...]   (no argument: every group of the default list)
 * Prints "ebb=yes|no", then one line per check: "ok NAME", "skip NAME (why)", or
 * "ok ebb: NAME" for checks that only run under ebb. The first failed check prints
 * "FAIL ..." and exits 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebb.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wuse-after-free" /* after a realloc that failed */

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                           \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            fflush(stdout);                                                          \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static void ok(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("ok ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* Hide values from the optimizer, so no call is folded or its size warned about. */
static size_t __attribute__((noinline)) opaque(size_t v) {
    __asm__ volatile("" : "+r"(v));
    return v;
}

static void *__attribute__((noinline)) opaque_ptr(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* --------------------------------------------------------------------------------- */
/* ebb, if loaded */

static struct {
    int (*stats)(ebb_stats_t *);
    void (*collect)(bool);
    int64_t (*option_get)(const char *);
    int (*option_set)(const char *, int64_t);
    const char *(*version)(void);
    void (*stats_print)(void);
    size_t (*stats_json)(char *, size_t);
} ebb;
static bool have_ebb;

static void find_ebb(void) {
    *(void **)&ebb.stats = dlsym(RTLD_DEFAULT, "ebb_stats");
    *(void **)&ebb.collect = dlsym(RTLD_DEFAULT, "ebb_collect");
    *(void **)&ebb.option_get = dlsym(RTLD_DEFAULT, "ebb_option_get");
    *(void **)&ebb.option_set = dlsym(RTLD_DEFAULT, "ebb_option_set");
    *(void **)&ebb.version = dlsym(RTLD_DEFAULT, "ebb_version");
    *(void **)&ebb.stats_print = dlsym(RTLD_DEFAULT, "ebb_stats_print");
    *(void **)&ebb.stats_json = dlsym(RTLD_DEFAULT, "ebb_stats_json");
    have_ebb = ebb.stats != NULL;
    if (have_ebb) {
        CHECK(ebb.collect && ebb.option_get && ebb.option_set && ebb.version &&
                  ebb.stats_print && ebb.stats_json,
              "ebb_stats found but not the other ebb_* functions");
        /* Proof that malloc itself is ebb's: a live 4 MiB block shows in its stats. */
        ebb_stats_t before, during;
        CHECK(ebb.stats(&before) == 0, "ebb_stats failed");
        void *p = malloc(opaque(4 * MiB));
        CHECK(p != NULL, "malloc(4 MiB)");
        memset(p, 1, 4 * MiB);
        CHECK(ebb.stats(&during) == 0, "ebb_stats failed");
        CHECK(during.allocated >= before.allocated + 4 * MiB,
              "malloc is not served by ebb: allocated %llu -> %llu",
              (unsigned long long)before.allocated, (unsigned long long)during.allocated);
        free(p);
    }
    printf("ebb=%s\n", have_ebb ? "yes" : "no");
}

static ebb_stats_t stats_now(void) {
    ebb_stats_t s;
    CHECK(ebb.stats(&s) == 0, "ebb_stats failed");
    return s;
}

/* --------------------------------------------------------------------------------- */
/* helpers */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static bool is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

static size_t round_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }

static size_t next_pow2(size_t n) {
    size_t a = 1;
    while (a < n)
        a <<= 1;
    return a;
}

static bool all_bytes(const void *p, int value, size_t n) {
    static unsigned char want[4096];
    memset(want, value, sizeof want);
    const unsigned char *b = p;
    for (size_t done = 0; done < n; done += sizeof want) {
        size_t chunk = n - done < sizeof want ? n - done : sizeof want;
        if (memcmp(b + done, want, chunk) != 0)
            return false;
    }
    return true;
}

/* Fill with a pattern that depends on the block's seed and the position, 8 bytes at a
 * time (byte j is byte j % 8 of word_of(seed, j / 8), whatever the length, so a prefix
 * of a filled block checks as a shorter fill). */
static uint64_t word_of(unsigned seed, size_t i) {
    return (uint64_t)(seed + 1) * 0x9E3779B97F4A7C15ull + i * 0x100000001B3ull;
}

static void fill(void *p, size_t n, unsigned seed) {
    unsigned char *b = p;
    size_t words = n / 8;
    for (size_t i = 0; i < words; i++) {
        uint64_t v = word_of(seed, i);
        __builtin_memcpy(b + 8 * i, &v, 8);
    }
    unsigned char tail[8];
    uint64_t last = word_of(seed, words);
    __builtin_memcpy(tail, &last, 8);
    for (size_t i = words * 8; i < n; i++)
        b[i] = tail[i - words * 8];
}

static bool check_fill(const void *p, size_t n, unsigned seed) {
    const unsigned char *b = p;
    size_t words = n / 8;
    uint64_t diff = 0;
    for (size_t i = 0; i < words; i++) {
        uint64_t v;
        __builtin_memcpy(&v, b + 8 * i, 8);
        diff |= v ^ word_of(seed, i);
    }
    unsigned char tail[8];
    uint64_t last = word_of(seed, words);
    __builtin_memcpy(tail, &last, 8);
    for (size_t i = words * 8; i < n; i++)
        diff |= b[i] ^ tail[i - words * 8];
    return diff == 0;
}

/* The minimum alignment glibc (and ebb) guarantee for a block of n bytes. */
static size_t min_align(size_t n) { return n <= 8 ? 8 : 16; }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static const size_t huge_sizes[] = {
    SIZE_MAX,
    SIZE_MAX - 1,
    SIZE_MAX - 7,
    SIZE_MAX - 8,
    SIZE_MAX - 14,
    SIZE_MAX - 15,
    SIZE_MAX - 16,
    SIZE_MAX - 4095,
    SIZE_MAX - 4096,
    SIZE_MAX - MiB,
    SIZE_MAX / 2 + 1, /* PTRDIFF_MAX + 1 */
    PTRDIFF_MAX,
    PTRDIFF_MAX - 1,
    PTRDIFF_MAX - 15,
    PTRDIFF_MAX - 4096,
    PTRDIFF_MAX - 32 * MiB,
    (size_t)1 << 62,
};

/* --------------------------------------------------------------------------------- */
/* groups */

static void t_malloc0(void) {
    enum { N = 100 };
    void *ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = malloc(opaque(0));
        CHECK(ps[i] != NULL, "malloc(0) #%d returned NULL", i);
        for (int j = 0; j < i; j++)
            CHECK(ps[j] != ps[i], "malloc(0) #%d == #%d", i, j);
        CHECK(is_aligned(ps[i], 8), "malloc(0) = %p", ps[i]);
    }
    for (int i = 0; i < N; i++) {
        memset(ps[i], 0xAB, malloc_usable_size(ps[i]));
        free(ps[i]);
    }
    ok("malloc(0) returns unique non-null pointers");

    void *a = realloc(NULL, opaque(0));
    void *b = calloc(opaque(0), 1);
    void *c = calloc(1, opaque(0));
    void *d = calloc(opaque(0), opaque(0));
    CHECK(a && b && c && d, "%p %p %p %p", a, b, c, d);
    CHECK(a != b && a != c && a != d && b != c && b != d && c != d, "not unique");
    free(a), free(b), free(c), free(d);
    ok("realloc(NULL, 0) and calloc with a zero count or size return unique non-null pointers");

    void *e = aligned_alloc(64, opaque(0));
    void *f = memalign(4096, opaque(0));
    void *g = NULL;
    CHECK(posix_memalign(&g, 256, opaque(0)) == 0, "posix_memalign(256, 0)");
    void *h = valloc(opaque(0));
    void *k = pvalloc(opaque(0));
    CHECK(e && f && g && h && k, "%p %p %p %p %p", e, f, g, h, k);
    CHECK(is_aligned(e, 64) && is_aligned(f, 4096) && is_aligned(g, 256) &&
              is_aligned(h, page_size()) && is_aligned(k, page_size()),
          "misaligned zero-size block");
    free(e), free(f), free(g), free(h), free(k);
    ok("aligned_alloc/memalign/posix_memalign/valloc/pvalloc of 0 bytes return aligned "
       "non-null pointers");
}

static void t_free_null(void) {
    errno = 1234;
    free(NULL);
    free(opaque_ptr(NULL));
    CHECK(errno == 1234, "free(NULL) changed errno to %d", errno);
    ok("free(NULL) is a no-op");
}

static void t_usable_size(void) {
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu",
          malloc_usable_size(NULL));
    ok("malloc_usable_size(NULL) == 0");

    size_t sizes[400];
    size_t n = 0;
    for (int k = 3; k <= 24; k++) {
        size_t s = (size_t)1 << k;
        sizes[n++] = s - 1;
        sizes[n++] = s;
        sizes[n++] = s + 1;
        sizes[n++] = s + s / 2;
    }
    for (size_t s = 0; s <= 4096; s++) {
        void *p = malloc(opaque(s));
        CHECK(p != NULL, "malloc(%zu)", s);
        size_t u = malloc_usable_size(p);
        CHECK(u >= s, "malloc_usable_size(malloc(%zu)) = %zu", s, u);
        CHECK(is_aligned(p, min_align(s)), "malloc(%zu) = %p", s, p);
        memset(p, 0x5C, u);
        free(p);
    }
    for (size_t i = 0; i < n; i++) {
        size_t s = sizes[i];
        void *p = malloc(opaque(s));
        CHECK(p != NULL, "malloc(%zu)", s);
        size_t u = malloc_usable_size(p);
        CHECK(u >= s, "malloc_usable_size(malloc(%zu)) = %zu", s, u);
        CHECK(is_aligned(p, min_align(s)), "malloc(%zu) = %p", s, p);
        memset(p, 0x5C, u);
        free(p);
    }
    ok("malloc_usable_size >= the size asked for, sizes 0..4096 and 2^k-1..1.5*2^k up to "
       "24 MiB; the whole usable size is writable");

    /* Many live blocks of mixed sizes: no two overlap (each keeps its pattern). */
    enum { LIVE = 3000 };
    static void *live[LIVE];
    static size_t live_size[LIVE];
    for (unsigned i = 0; i < LIVE; i++) {
        size_t s = (rng() % 8 == 0) ? rng() % (600 * KiB) : rng() % 2000;
        live[i] = malloc(opaque(s));
        CHECK(live[i] != NULL, "malloc(%zu)", s);
        live_size[i] = malloc_usable_size(live[i]);
        fill(live[i], live_size[i], i);
    }
    for (unsigned i = 0; i < LIVE; i++) {
        CHECK(check_fill(live[i], live_size[i], i), "block %u (%zu usable bytes) was overwritten",
              i, live_size[i]);
        free(live[i]);
    }
    ok("%d live blocks of mixed sizes do not overlap", LIVE);
}

static void t_aligned(void) {
    for (size_t a = 1; a <= MiB; a <<= 1) {
        const size_t sizes[] = {1, 7, 8, 16, a / 2 + 1, a, a + 1, 3 * a, 100000};
        for (size_t i = 0; i < COUNT(sizes); i++) {
            size_t n = sizes[i];
            void *p = aligned_alloc(a, opaque(n));
            CHECK(p != NULL && is_aligned(p, a), "aligned_alloc(%zu, %zu) = %p", a, n, p);
            CHECK(malloc_usable_size(p) >= n, "aligned_alloc(%zu, %zu): usable %zu", a, n,
                  malloc_usable_size(p));
            memset(p, 0xCD, n);
            void *q = memalign(a, opaque(n));
            CHECK(q != NULL && is_aligned(q, a), "memalign(%zu, %zu) = %p", a, n, q);
            CHECK(malloc_usable_size(q) >= n, "memalign(%zu, %zu): usable %zu", a, n,
                  malloc_usable_size(q));
            memset(q, 0xCE, n);
            CHECK(all_bytes(p, 0xCD, n), "aligned_alloc(%zu, %zu) block overwritten", a, n);
            free(p);
            free(q);
            if (a >= sizeof(void *)) {
                void *r = NULL;
                int rc = posix_memalign(&r, a, opaque(n));
                CHECK(rc == 0 && r != NULL && is_aligned(r, a),
                      "posix_memalign(%zu, %zu) = %d, %p", a, n, rc, r);
                CHECK(malloc_usable_size(r) >= n, "posix_memalign(%zu, %zu): usable %zu", a,
                      n, malloc_usable_size(r));
                memset(r, 0xCF, n);
                free(r);
            }
        }
        /* Several live at once, none overlapping. */
        if (a <= 64 * KiB) {
            enum { K = 24 };
            void *blocks[K];
            size_t n = a + a / 2 + 1;
            for (unsigned j = 0; j < K; j++) {
                blocks[j] = j % 2 ? aligned_alloc(a, opaque(n)) : memalign(a, opaque(n));
                CHECK(blocks[j] != NULL && is_aligned(blocks[j], a), "%zu-aligned block %u",
                      a, j);
                fill(blocks[j], n, j);
            }
            for (unsigned j = 0; j < K; j++) {
                CHECK(check_fill(blocks[j], n, j), "%zu-aligned block %u overwritten", a, j);
                free(blocks[j]);
            }
        }
        ok("aligned_alloc/memalign/posix_memalign align=%zu: aligned, usable >= size", a);
    }

    size_t page = page_size();
    const size_t vsizes[] = {1, 100, 4095, 4096, 4097, 100000, MiB, 20 * MiB};
    for (size_t i = 0; i < COUNT(vsizes); i++) {
        size_t n = vsizes[i];
        void *p = valloc(opaque(n));
        CHECK(p != NULL && is_aligned(p, page), "valloc(%zu) = %p", n, p);
        CHECK(malloc_usable_size(p) >= n, "valloc(%zu): usable %zu", n, malloc_usable_size(p));
        memset(p, 0x11, n);
        void *q = pvalloc(opaque(n));
        CHECK(q != NULL && is_aligned(q, page), "pvalloc(%zu) = %p", n, q);
        CHECK(malloc_usable_size(q) >= round_up(n, page), "pvalloc(%zu): usable %zu", n,
              malloc_usable_size(q));
        memset(q, 0x22, round_up(n, page));
        CHECK(all_bytes(p, 0x11, n), "valloc(%zu) block overwritten", n);
        free(p);
        free(q);
    }
    ok("valloc/pvalloc are page aligned; pvalloc rounds the size up to whole pages");
}

static bool aligned_alloc_rejects_bad_alignment(void) {
    /* glibc before 2.38 treats aligned_alloc like memalign. */
    int major = 0, minor = 0;
    sscanf(gnu_get_libc_version(), "%d.%d", &major, &minor);
    return have_ebb || major > 2 || (major == 2 && minor >= 38);
}

static void t_invalid_align(void) {
    const size_t bad_pm[] = {0, 1, 2, 3, 4, 5, 12, 24, 40, 48, 96, 4095, 4097,
                             12288, SIZE_MAX, SIZE_MAX / 2 + 2, SIZE_MAX - 7};
    for (size_t i = 0; i < COUNT(bad_pm); i++) {
        void *sentinel = (void *)&bad_pm[i];
        void *p = sentinel;
        errno = 4242;
        int rc = posix_memalign(&p, opaque(bad_pm[i]), opaque(64));
        CHECK(rc == EINVAL, "posix_memalign(align=%zu) returned %d", bad_pm[i], rc);
        CHECK(errno == 4242, "posix_memalign(align=%zu) changed errno to %d", bad_pm[i], errno);
        CHECK(p == sentinel, "posix_memalign(align=%zu) wrote *memptr", bad_pm[i]);
    }
    ok("posix_memalign with alignment 0, not a power of two or not a multiple of "
       "sizeof(void *) returns EINVAL, leaves errno and *memptr alone");

    if (aligned_alloc_rejects_bad_alignment()) {
        const size_t bad_aa[] = {0, 3, 5, 24, 48, 100, 4097, 12288, SIZE_MAX, SIZE_MAX / 2 + 2};
        for (size_t i = 0; i < COUNT(bad_aa); i++) {
            errno = 0;
            void *p = aligned_alloc(opaque(bad_aa[i]), opaque(64));
            CHECK(p == NULL, "aligned_alloc(%zu, 64) = %p", bad_aa[i], p);
            CHECK(errno == EINVAL, "aligned_alloc(%zu, 64): errno %d", bad_aa[i], errno);
        }
        ok("aligned_alloc with an alignment that is not a power of two returns NULL with "
           "EINVAL");
    } else {
        printf("skip aligned_alloc with an alignment that is not a power of two returns NULL "
               "with EINVAL (glibc %s < 2.38 treats it like memalign)\n",
               gnu_get_libc_version());
    }

    const size_t odd[] = {3, 5, 6, 17, 24, 48, 100, 1000, 3000, 4097, 5000, 65537, MiB - 1};
    for (size_t i = 0; i < COUNT(odd); i++) {
        for (size_t n = 1; n <= 20000; n *= 20) {
            void *p = memalign(opaque(odd[i]), opaque(n));
            size_t want = next_pow2(odd[i]);
            CHECK(p != NULL && is_aligned(p, want), "memalign(%zu, %zu) = %p, want %zu-aligned",
                  odd[i], n, p, want);
            memset(p, 0x33, n);
            free(p);
        }
    }
    ok("memalign rounds an alignment that is not a power of two up to the next one");

    void *p = memalign(opaque(0), opaque(100));
    CHECK(p != NULL && is_aligned(p, 16), "memalign(0, 100) = %p", p);
    free(p);
    ok("memalign(0, n) works like malloc(n)");

    const size_t too_big[] = {SIZE_MAX / 2 + 2, SIZE_MAX - 1, SIZE_MAX};
    for (size_t i = 0; i < COUNT(too_big); i++) {
        errno = 0;
        void *q = memalign(opaque(too_big[i]), opaque(1));
        CHECK(q == NULL && errno == EINVAL, "memalign(%zu, 1) = %p, errno %d", too_big[i], q,
              errno);
    }
    ok("memalign with an alignment above SIZE_MAX/2+1 returns NULL with EINVAL");
}

static void expect_enomem(void *p, const char *what, size_t a, size_t n) {
    int e = errno;
    CHECK(p == NULL, "%s(align=%zu, size=%#zx) = %p", what, a, n, p);
    CHECK(e == ENOMEM, "%s(align=%zu, size=%#zx): errno %d, want ENOMEM", what, a, n, e);
}

static void t_enomem(void) {
    const size_t aligns[] = {1, 8, 16, 32, 64, 4096, 64 * KiB, MiB};
    const size_t old_sizes[] = {100, 100000, 2 * MiB, 20 * MiB};
    void *olds[COUNT(old_sizes)];
    for (size_t j = 0; j < COUNT(old_sizes); j++) {
        olds[j] = malloc(old_sizes[j]);
        CHECK(olds[j] != NULL, "malloc(%zu)", old_sizes[j]);
        fill(olds[j], old_sizes[j], (unsigned)j);
    }
    for (size_t i = 0; i < COUNT(huge_sizes); i++) {
        size_t n = huge_sizes[i];
        errno = 0;
        expect_enomem(malloc(opaque(n)), "malloc", 0, n);
        errno = 0;
        expect_enomem(calloc(1, opaque(n)), "calloc(1, n)", 0, n);
        errno = 0;
        expect_enomem(calloc(opaque(n), 1), "calloc(n, 1)", 0, n);
        errno = 0;
        expect_enomem(valloc(opaque(n)), "valloc", 0, n);
        errno = 0;
        expect_enomem(pvalloc(opaque(n)), "pvalloc", 0, n);
        for (size_t j = 0; j < COUNT(aligns); j++) {
            size_t a = aligns[j];
            errno = 0;
            expect_enomem(aligned_alloc(a, opaque(n)), "aligned_alloc", a, n);
            errno = 0;
            expect_enomem(memalign(a, opaque(n)), "memalign", a, n);
            if (a >= sizeof(void *)) {
                void *sentinel = (void *)&aligns[j];
                void *p = sentinel;
                int rc = posix_memalign(&p, a, opaque(n));
                CHECK(rc == ENOMEM, "posix_memalign(%zu, %#zx) = %d", a, n, rc);
                CHECK(p == sentinel, "posix_memalign(%zu, %#zx) wrote *memptr", a, n);
            }
        }
        /* A failed realloc leaves the block alone. */
        for (size_t j = 0; j < COUNT(olds); j++) {
            void *p = olds[j];
            errno = 0;
            expect_enomem(realloc(p, opaque(n)), "realloc", 0, n);
            errno = 0;
            expect_enomem(reallocarray(p, 1, opaque(n)), "reallocarray(p, 1, n)", 0, n);
            CHECK(check_fill(p, old_sizes[j], (unsigned)j),
                  "failed realloc of a %zu-byte block changed it", old_sizes[j]);
            CHECK(malloc_usable_size(p) >= old_sizes[j], "failed realloc shrank the block");
        }
        errno = 0;
        expect_enomem(realloc(NULL, opaque(n)), "realloc(NULL, n)", 0, n);
        ok("size %#zx: malloc, calloc, realloc, reallocarray, aligned_alloc, memalign, "
           "posix_memalign, valloc, pvalloc fail with ENOMEM",
           n);
    }
    for (size_t j = 0; j < COUNT(old_sizes); j++)
        free(olds[j]);
    void *p = (void *)&p;
    int rc = posix_memalign(&p, SIZE_MAX / 2 + 1, opaque(1));
    CHECK(rc == ENOMEM && p == (void *)&p, "posix_memalign(2^63, 1) = %d", rc);
    errno = 0;
    expect_enomem(memalign(SIZE_MAX / 2 + 1, opaque(1)), "memalign", SIZE_MAX / 2 + 1, 1);
    errno = 0;
    expect_enomem(aligned_alloc(SIZE_MAX / 2 + 1, opaque(1)), "aligned_alloc",
                  SIZE_MAX / 2 + 1, 1);
    ok("alignment 2^63 fails with ENOMEM");
}

static void t_overflow(void) {
    const size_t pairs[][2] = {
        {SIZE_MAX / 2 + 1, 2},
        {2, SIZE_MAX / 2 + 1},
        {(size_t)1 << 32, (size_t)1 << 32},
        {SIZE_MAX, SIZE_MAX},
        {SIZE_MAX, 2},
        {((size_t)1 << 33) + 1, (size_t)1 << 31},
        {65537, (SIZE_MAX / 65537) + 1},
        {SIZE_MAX / 16 + 1, 16},
    };
    for (size_t i = 0; i < COUNT(pairs); i++) {
        size_t c = pairs[i][0], s = pairs[i][1];
        errno = 0;
        void *p = calloc(opaque(c), opaque(s));
        CHECK(p == NULL && errno == ENOMEM, "calloc(%#zx, %#zx) = %p, errno %d", c, s, p, errno);
        errno = 0;
        p = reallocarray(NULL, opaque(c), opaque(s));
        CHECK(p == NULL && errno == ENOMEM, "reallocarray(NULL, %#zx, %#zx) = %p, errno %d", c,
              s, p, errno);
        void *q = malloc(300);
        fill(q, 300, 5);
        errno = 0;
        p = reallocarray(q, opaque(c), opaque(s));
        CHECK(p == NULL && errno == ENOMEM, "reallocarray(p, %#zx, %#zx) = %p, errno %d", c, s,
              p, errno);
        CHECK(check_fill(q, 300, 5), "failed reallocarray changed the block");
        free(q);
    }
    ok("calloc and reallocarray whose count * size overflows return NULL with ENOMEM, the "
       "block untouched");

    unsigned char *q = reallocarray(NULL, opaque(10), opaque(10));
    CHECK(q != NULL && malloc_usable_size(q) >= 100, "reallocarray(NULL, 10, 10)");
    fill(q, 100, 9);
    q = reallocarray(q, opaque(1000), opaque(10));
    CHECK(q != NULL && malloc_usable_size(q) >= 10000, "reallocarray(p, 1000, 10)");
    CHECK(check_fill(q, 100, 9), "reallocarray lost the contents");
    free(q);
    ok("reallocarray without overflow works like realloc");
}

static void t_realloc(void) {
    const size_t sizes[] = {0, 1, 8, 9, 100, 1000, 5000, 100000, 600000, 3 * MiB, 20 * MiB};
    for (size_t i = 0; i < COUNT(sizes); i++) {
        void *p = realloc(NULL, opaque(sizes[i]));
        CHECK(p != NULL && malloc_usable_size(p) >= sizes[i] && is_aligned(p, min_align(sizes[i])),
              "realloc(NULL, %zu) = %p", sizes[i], p);
        memset(p, 0x44, sizes[i]);
        free(p);
    }
    ok("realloc(NULL, n) works like malloc(n)");

    for (size_t i = 0; i < COUNT(sizes); i++) {
        void *p = malloc(opaque(sizes[i]));
        CHECK(p != NULL, "malloc(%zu)", sizes[i]);
        errno = 0;
        void *q = realloc(p, opaque(0));
        CHECK(q == NULL, "realloc(p, 0) = %p (glibc frees p and returns NULL)", q);
    }
    ok("realloc(p, 0) frees p and returns NULL");

    /* Grow a block step by step up to 64 MiB and back down: contents preserved. */
    size_t n = 1;
    unsigned char *p = malloc(1);
    CHECK(p != NULL, "malloc(1)");
    fill(p, 1, 1);
    while (n < 64 * MiB) {
        size_t next = n * 3 / 2 + 5;
        unsigned char *q = realloc(p, opaque(next));
        CHECK(q != NULL, "realloc(%zu -> %zu)", n, next);
        CHECK(check_fill(q, n, 1), "realloc(%zu -> %zu) lost the contents", n, next);
        CHECK(is_aligned(q, min_align(next)), "realloc(%zu -> %zu) = %p", n, next, q);
        fill(q, next, 1);
        p = q;
        n = next;
    }
    while (n > 1) {
        size_t next = n / 3 + 1;
        unsigned char *q = realloc(p, opaque(next));
        CHECK(q != NULL, "realloc(%zu -> %zu)", n, next);
        CHECK(check_fill(q, next, 1), "realloc(%zu -> %zu) lost the contents", n, next);
        p = q;
        n = next == n ? 1 : next;
    }
    free(p);
    ok("realloc growing 1 B -> 64 MiB and shrinking back keeps the contents");

    /* Random reallocs of many live blocks. */
    enum { LIVE = 300, OPS = 10000 };
    static unsigned char *blocks[LIVE];
    static size_t block_size[LIVE];
    static unsigned seeds[LIVE];
    for (unsigned op = 0; op < OPS; op++) {
        unsigned i = (unsigned)(rng() % LIVE);
        size_t r = rng();
        size_t s = r % 64 == 0 ? r % (2 * MiB) : r % 16 == 1 ? r % (300 * KiB) : r % 3000;
        if (blocks[i] != NULL)
            CHECK(check_fill(blocks[i], block_size[i], seeds[i]), "block %u corrupted", i);
        unsigned char *q = realloc(blocks[i], opaque(s));
        if (s == 0 && blocks[i] != NULL) {
            CHECK(q == NULL, "realloc(p, 0) = %p", q);
            blocks[i] = NULL;
            block_size[i] = 0;
            continue;
        }
        CHECK(q != NULL, "realloc(%zu -> %zu)", block_size[i], s);
        size_t keep = block_size[i] < s ? block_size[i] : s;
        CHECK(check_fill(q, keep, seeds[i]), "realloc(%zu -> %zu) lost the contents",
              block_size[i], s);
        seeds[i] = op;
        fill(q, s, op);
        blocks[i] = q;
        block_size[i] = s;
    }
    for (unsigned i = 0; i < LIVE; i++) {
        if (blocks[i] != NULL)
            CHECK(check_fill(blocks[i], block_size[i], seeds[i]), "block %u corrupted", i);
        free(blocks[i]);
        blocks[i] = NULL;
    }
    ok("%d random reallocs over %d live blocks keep every block's contents", OPS, LIVE);
}

/* realloc to a size between half the usable size and the usable size (and at least
 * `floor`) keeps the block in place. */
static void realloc_in_place(const size_t *sizes, size_t count, size_t floor) {
    for (size_t i = 0; i < count; i++) {
        size_t n = sizes[i];
        unsigned char *p = malloc(opaque(n));
        CHECK(p != NULL, "malloc(%zu)", n);
        size_t u = malloc_usable_size(p);
        fill(p, n, 3);
        const size_t targets[] = {u, u - 1, n, u - u / 4, (u + 1) / 2, n + (u - n) / 2};
        size_t have = n; /* bytes known to hold the pattern */
        for (size_t j = 0; j < COUNT(targets); j++) {
            size_t t = targets[j];
            if (t == 0 || t > u || t < (u + 1) / 2 || t < floor)
                continue;
            unsigned char *q = realloc(p, opaque(t));
            CHECK(q == p, "realloc(malloc(%zu) [usable %zu], %zu) moved the block to %p", n, u,
                  t, q);
            if (t < have)
                have = t;
            CHECK(check_fill(q, have, 3), "in-place realloc lost the contents");
            u = malloc_usable_size(q);
            CHECK(u >= t, "usable %zu < %zu", u, t);
        }
        free(p);
    }
}

static void t_realloc_in_place(void) {
    /* Below glibc's mmap threshold (128 KiB) glibc resizes in place too. */
    const size_t sizes[] = {1,    8,    9,    16,    24,    100,   128,    129,
                            1000, 1024, 1025, 4000,  10000, 65536, 100000};
    realloc_in_place(sizes, COUNT(sizes), 0);
    ok("realloc to a size within [usable/2, usable] keeps the block in place (1 B to 100 KB)");
    if (!have_ebb)
        return;
    const size_t medium[] = {128 * KiB, 300000, 500000, 512 * KiB};
    realloc_in_place(medium, COUNT(medium), 0);
    ok("ebb: realloc to a size within [usable/2, usable] keeps the block in place (medium "
       "blocks up to 512 KiB)");
    /* Large blocks (up to 16 MiB) resize their span in place while they stay large, huge
     * ones their mapping while they stay huge (see bug_realloc_in_place_big). */
    const size_t large[] = {600000, MiB, 5 * MiB, 16 * MiB};
    realloc_in_place(large, COUNT(large), 512 * KiB + 1);
    const size_t huge[] = {17 * MiB, 20 * MiB, 40 * MiB, 100 * MiB};
    realloc_in_place(huge, COUNT(huge), 16 * MiB + 1);
    ok("ebb: realloc of a large block (> 512 KiB) or huge block (> 16 MiB) to a size within "
       "[usable/2, usable] that keeps it in its tier stays in place");
}

/* Regression (once an ebb deviation): shrinking a large block to <= 512 KiB, or a huge block
 * to <= 16 MiB, moved it even when the new size was at least half the usable size. Run by
 * tests/c_api.rs `realloc_in_place_for_large_and_huge_blocks`. */
static void t_bug_realloc_in_place_big(void) {
    const size_t sizes[] = {600000, MiB, 17 * MiB, 20 * MiB};
    realloc_in_place(sizes, COUNT(sizes), 0);
    ok("realloc to a size within [usable/2, usable] keeps large and huge blocks in place");
}

/* Regression (once an ebb bug): alignment 16 with a size of at most 8 bytes gave an
 * 8-aligned block. Run by tests/c_api.rs `aligned_16_small_sizes_are_16_aligned`. */
static void t_bug_aligned16_small(void) {
    /* Several live blocks per call: consecutive 8-byte blocks cannot all be 16-aligned. */
    enum { K = 4 };
    for (size_t n = 0; n <= 16; n++) {
        void *p[K], *q[K], *r[K];
        for (int k = 0; k < K; k++) {
            p[k] = aligned_alloc(16, opaque(n));
            CHECK(p[k] != NULL && is_aligned(p[k], 16), "aligned_alloc(16, %zu) = %p", n, p[k]);
            q[k] = memalign(16, opaque(n));
            CHECK(q[k] != NULL && is_aligned(q[k], 16), "memalign(16, %zu) = %p", n, q[k]);
            r[k] = NULL;
            int rc = posix_memalign(&r[k], 16, opaque(n));
            CHECK(rc == 0 && is_aligned(r[k], 16), "posix_memalign(16, %zu) = %p", n, r[k]);
        }
        for (int k = 0; k < K; k++)
            free(p[k]), free(q[k]), free(r[k]);
    }
    ok("aligned_alloc/memalign/posix_memalign(16, n <= 8) return 16-byte aligned blocks");
}

struct remote_job {
    void **blocks;
    size_t count;
    size_t size;
    int fill_value; /* -1: free the blocks; else malloc and fill */
};

static void *remote_thread(void *arg) {
    struct remote_job *job = arg;
    for (size_t i = 0; i < job->count; i++) {
        if (job->fill_value < 0) {
            free(job->blocks[i]);
        } else {
            job->blocks[i] = malloc(job->size);
            if (job->blocks[i] != NULL)
                memset(job->blocks[i], job->fill_value, job->size);
        }
    }
    return NULL;
}

static void run_remote(struct remote_job *job) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, remote_thread, job) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
}

static void t_calloc(void) {
    const size_t sizes[] = {1,     8,      16,     24,      100,    1000,      1024,
                            4096,  10000,  65536,  100000,  300000, 512 * KiB, 600000,
                            MiB,   3 * MiB, 16 * MiB, 20 * MiB};
    for (size_t i = 0; i < COUNT(sizes); i++) {
        size_t n = sizes[i];
        int rounds = n >= MiB ? 3 : n >= 64 * KiB ? 30 : 300;
        for (int r = 0; r < rounds; r++) {
            void *d = malloc(opaque(n));
            CHECK(d != NULL, "malloc(%zu)", n);
            memset(d, 0xAA, malloc_usable_size(d));
            free(d);
            unsigned char *z;
            switch (r % 3) {
            case 0: z = calloc(1, opaque(n)); break;
            case 1: z = calloc(opaque(n), 1); break;
            default: z = calloc(opaque((n + 7) / 8), 8); break;
            }
            CHECK(z != NULL, "calloc for %zu bytes", n);
            CHECK(all_bytes(z, 0, n), "calloc(%zu) after freeing a dirty block: not zeroed (round %d)",
                  n, r);
            memset(z, 0xAA, malloc_usable_size(z));
            free(z);
        }
        /* A batch: many dirty blocks freed, then as many callocs. */
        size_t batch = n >= MiB ? 3 : n >= 64 * KiB ? 20 : 500;
        void *blocks[500];
        for (size_t j = 0; j < batch; j++) {
            blocks[j] = malloc(opaque(n));
            CHECK(blocks[j] != NULL, "malloc(%zu)", n);
            memset(blocks[j], 0xAA, n);
        }
        for (size_t j = 0; j < batch; j++)
            free(blocks[j]);
        for (size_t j = 0; j < batch; j++) {
            blocks[j] = calloc(1, opaque(n));
            CHECK(blocks[j] != NULL && all_bytes(blocks[j], 0, n),
                  "calloc(1, %zu) #%zu after a batch of dirty frees: not zeroed", n, j);
            memset(blocks[j], 0xAA, n);
        }
        for (size_t j = 0; j < batch; j++)
            free(blocks[j]);
        ok("calloc(%zu) returns zeroed memory after dirty blocks of that size were freed", n);
    }

    /* Dirty blocks freed by another thread (remote frees), then calloc here; and dirty
     * blocks of a thread that exited, freed here, then calloc here. */
    const size_t rsizes[] = {16, 48, 1000, 70000, 600000, 20 * MiB};
    for (size_t i = 0; i < COUNT(rsizes); i++) {
        size_t n = rsizes[i];
        size_t count = n >= MiB ? 2 : n >= 64 * KiB ? 16 : 400;
        void *blocks[400];
        for (size_t j = 0; j < count; j++) {
            blocks[j] = malloc(opaque(n));
            CHECK(blocks[j] != NULL, "malloc(%zu)", n);
            memset(blocks[j], 0xAA, n);
        }
        struct remote_job freer = {blocks, count, n, -1};
        run_remote(&freer);
        for (size_t j = 0; j < count; j++) {
            blocks[j] = calloc(opaque(n), 1);
            CHECK(blocks[j] != NULL && all_bytes(blocks[j], 0, n),
                  "calloc(%zu, 1) #%zu after remote frees of dirty blocks: not zeroed", n, j);
        }
        for (size_t j = 0; j < count; j++)
            free(blocks[j]);

        struct remote_job maker = {blocks, count, n, 0xAA};
        run_remote(&maker);
        for (size_t j = 0; j < count; j++) {
            CHECK(blocks[j] != NULL, "malloc(%zu) in a thread", n);
            free(blocks[j]);
        }
        for (size_t j = 0; j < count; j++) {
            blocks[j] = calloc(1, opaque(n));
            CHECK(blocks[j] != NULL && all_bytes(blocks[j], 0, n),
                  "calloc(1, %zu) #%zu after freeing an exited thread's dirty blocks: not zeroed",
                  n, j);
        }
        for (size_t j = 0; j < count; j++)
            free(blocks[j]);
        ok("calloc(%zu) returns zeroed memory after dirty blocks were freed across threads", n);
    }
}

static void t_misc(void) {
    enum { N = 100 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(opaque(1000));
        memset(blocks[i], 1, 1000);
    }
    struct mallinfo2 mi = mallinfo2();
    CHECK(mi.uordblks + mi.hblkhd >= N * 1000, "mallinfo2: uordblks %zu + hblkhd %zu", mi.uordblks,
          mi.hblkhd);
    CHECK(mi.arena > 0, "mallinfo2: arena %zu", mi.arena);
    struct mallinfo m1 = mallinfo();
    CHECK(m1.uordblks > 0, "mallinfo: uordblks %d", m1.uordblks);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    ok("mallinfo2 and mallinfo count live blocks");

    int t = malloc_trim(0);
    CHECK(t == 0 || t == 1, "malloc_trim(0) = %d", t);
    t = malloc_trim(opaque(MiB));
    CHECK(t == 0 || t == 1, "malloc_trim(1 MiB) = %d", t);
    ok("malloc_trim returns 0 or 1");

    CHECK(mallopt(M_TRIM_THRESHOLD, 256 * 1024) == 1, "mallopt(M_TRIM_THRESHOLD)");
    CHECK(mallopt(M_MMAP_THRESHOLD, 256 * 1024) == 1, "mallopt(M_MMAP_THRESHOLD)");
    CHECK(mallopt(M_ARENA_MAX, 8) == 1, "mallopt(M_ARENA_MAX)");
    ok("mallopt returns 1");
}

/* C23's sized frees, as weak references: the test links against a C library without
 * them (glibc before 2.43), where the check is skipped; under ebb they are ebb's. */
extern void free_sized(void *, size_t) __attribute__((weak));
extern void free_aligned_sized(void *, size_t, size_t) __attribute__((weak));

static void t_free_sized(void) {
    const char *name = "free_sized and free_aligned_sized free their blocks";
    if (!free_sized || !free_aligned_sized) {
        printf("skip %s (not in this C library)\n", name);
        return;
    }
    free_sized(NULL, 0);
    free_aligned_sized(NULL, 64, 0);
    static const size_t sizes[] = {1, 24, 100, 1000, 5000, 70000, 600000, 3 * MiB, 20 * MiB};
    static const size_t aligns[] = {16, 64, 4096, 65536};
    ebb_stats_t before = {0};
    if (ebb.stats)
        before = stats_now();
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < COUNT(sizes); i++) {
            size_t n = opaque(sizes[i]);
            void *p = malloc(n);
            CHECK(p != NULL, "malloc(%zu)", n);
            memset(p, 1, n);
            free_sized(p, n);
            p = calloc(opaque(1), n);
            CHECK(p != NULL, "calloc(1, %zu)", n);
            free_sized(p, n);
            for (size_t a = 0; a < COUNT(aligns); a++) {
                size_t m = round_up(n, aligns[a]);
                void *q = aligned_alloc(aligns[a], m);
                CHECK(q != NULL && is_aligned(q, aligns[a]), "aligned_alloc(%zu, %zu) = %p",
                      aligns[a], m, q);
                memset(q, 2, m);
                free_aligned_sized(q, aligns[a], m);
            }
        }
    }
    ok("%s", name);
    if (ebb.stats) {
        /* 50 rounds of 23 MiB each: kept, they would be over 1 GiB live. */
        ebb_stats_t after = stats_now();
        CHECK(after.allocated < before.allocated + MiB,
              "live bytes grew from %llu to %llu: the sized frees did not free",
              (unsigned long long)before.allocated, (unsigned long long)after.allocated);
        ok("ebb: free_sized and free_aligned_sized are ebb's (live bytes back to %llu)",
           (unsigned long long)after.allocated);
    }
}

/* The number in `<NAME ... ATTR="N"` found at or after `from`; -1 if absent. */
static long long xml_number(const char *from, const char *element, const char *attr) {
    const char *at = strstr(from, element);
    if (!at)
        return -1;
    char key[32];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *v = strstr(at, key);
    const char *end = strchr(at, '>');
    if (!v || !end || v > end)
        return -1;
    return strtoll(v + strlen(key), NULL, 10);
}

/* malloc_info(0, fp) into a string (open_memstream); the caller frees it. */
static char *malloc_info_text(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL, "open_memstream");
    int r = malloc_info(0, f);
    CHECK(r == 0, "malloc_info(0, f) = %d", r);
    fclose(f);
    CHECK(text != NULL && len > 0, "malloc_info wrote nothing");
    return text;
}

static void t_malloc_info(void) {
    errno = 0;
    int r = malloc_info(opaque(1), stdout);
    CHECK(r == EINVAL && errno == 0, "malloc_info(1, stdout) = %d, errno %d (glibc: EINVAL "
          "returned, errno untouched)", r, errno);
    ok("malloc_info: options other than 0 give EINVAL as the result, errno untouched");

    enum { N = 60 };
    void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(opaque(1000));
        memset(blocks[i], 1, 1000);
    }
    char *huge = malloc(opaque(40 * MiB));
    CHECK(huge != NULL, "malloc(40 MiB)");
    memset(huge, 2, 40 * MiB);
    char *text = malloc_info_text();
    const char *head = "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n";
    CHECK(strncmp(text, head, strlen(head)) == 0, "head: %.60s", text);
    size_t len = strlen(text);
    CHECK(len > 10 && strcmp(text + len - 10, "</malloc>\n") == 0, "tail: %s", text);
    const char *order[] = {"</sizes>", "<total type=\"fast\"", "<total type=\"rest\"",
                           "<system type=\"current\"", "<system type=\"max\"",
                           "<aspace type=\"total\"", "<aspace type=\"mprotect\"", "</heap>",
                           "<total type=\"mmap\"", "</malloc>"};
    const char *at = text;
    for (size_t i = 0; i < COUNT(order); i++) {
        at = strstr(at, order[i]);
        CHECK(at != NULL, "%s missing or out of order in:\n%s", order[i], text);
    }
    const char *after_heap = strstr(text, "</heap>");
    ok("malloc_info: glibc's elements in glibc's order");

    if (have_ebb) {
        /* (glibc counts here only what it chose to mmap: which depends on its dynamic
         * threshold, i.e. on the groups before this one.) */
        long long mmap_size = xml_number(after_heap, "<total type=\"mmap\"", "size");
        long long mmap_count = xml_number(after_heap, "<total type=\"mmap\"", "count");
        CHECK(mmap_size >= (long long)(40 * MiB) && mmap_count >= 1,
              "a live 40 MiB block: mmap count %lld, size %lld", mmap_count, mmap_size);
        long long current = xml_number(after_heap, "<system type=\"current\"", "size");
        long long max = xml_number(after_heap, "<system type=\"max\"", "size");
        long long reserved = xml_number(after_heap, "<aspace type=\"total\"", "size");
        CHECK(current >= (long long)(40 * MiB + N * 1000) && max >= current &&
                  reserved >= current,
              "under ebb: system current %lld, max %lld, aspace %lld", current, max, reserved);
        /* 60 blocks leave free ones in their class's page: a <size> line for it. */
        char element[48];
        snprintf(element, sizeof element, "<size from=\"%zu\"", malloc_usable_size(blocks[0]));
        long long free_in_class = xml_number(text, element, "count");
        CHECK(free_in_class >= 1, "%s count %lld in:\n%s", element, free_in_class, text);
        free(text);
        free(huge);
        text = malloc_info_text();
        after_heap = strstr(text, "</heap>");
        long long later_max = xml_number(after_heap, "<system type=\"max\"", "size");
        long long later_mmap = xml_number(after_heap, "<total type=\"mmap\"", "size");
        CHECK(later_max >= current, "system max %lld fell below the earlier current %lld",
              later_max, current);
        CHECK(later_mmap < (long long)(40 * MiB), "mmap size %lld after the free", later_mmap);
        ok("ebb: malloc_info: the live 40 MiB block under mmap, system current counts the "
           "live blocks, free blocks of their class listed, max keeps the peak after the "
           "40 MiB block is freed");
    } else {
        free(huge);
    }
    free(text);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
}

static void t_ebb(void) {
    if (!have_ebb) {
        printf("skip ebb_* functions (ebb is not loaded)\n");
        return;
    }
    const char *v = ebb.version();
    int a, b, c;
    CHECK(v != NULL && v[0] != 0 && sscanf(v, "%d.%d.%d", &a, &b, &c) == 3, "ebb_version() = %s",
          v ? v : "(null)");
    ok("ebb: ebb_version() = %s", v);

    /* ebb_stats_json: snprintf-like length, NUL-terminated truncation. (The malloc of
     * the buffer changes the figures, so the second text may be a little longer.) */
    size_t need = ebb.stats_json(NULL, 0);
    CHECK(need > 100, "ebb_stats_json(NULL, 0) = %zu", need);
    char *text = malloc(need + 256);
    CHECK(text != NULL, "malloc");
    size_t got = ebb.stats_json(text, need + 256);
    CHECK(got + 1 < need + 256 && strlen(text) == got && text[0] == '{' && text[got - 1] == '}',
          "ebb_stats_json: %zu bytes, strlen %zu: %s", got, strlen(text), text);
    CHECK(strstr(text, "\"allocated\":") && strstr(text, "\"purger_cpu_ns\":"),
          "ebb_stats_json fields: %s", text);
    char small[16];
    memset(small, 'x', sizeof small);
    size_t trunc = ebb.stats_json(small, sizeof small);
    CHECK(trunc > sizeof small && small[sizeof small - 1] == 0 &&
              strlen(small) == sizeof small - 1,
          "ebb_stats_json truncation: returned %zu, strlen %zu", trunc, strlen(small));
    free(text);
    ok("ebb: ebb_stats_json writes one JSON object, truncates with a NUL, returns the length "
       "needed");

    int64_t delay = ebb.option_get("purge_delay");
    CHECK(delay >= 0, "ebb_option_get(purge_delay) = %lld", (long long)delay);
    CHECK(ebb.option_set("purge_delay", 1234) == 0, "ebb_option_set");
    CHECK(ebb.option_get("purge_delay") == 1234, "round trip");
    CHECK(ebb.option_get("EBB_PURGE_DELAY") == 1234, "EBB_ prefix");
    CHECK(ebb.option_get("Purge_Delay") == 1234, "any case");
    CHECK(ebb.option_set("EBB_PURGE_DELAY", 77) == 0 && ebb.option_get("purge_delay") == 77,
          "set with prefix");
    CHECK(ebb.option_get("no_such_option") == -1, "unknown option");
    CHECK(ebb.option_set("no_such_option", 1) == -1, "unknown option set");
    CHECK(ebb.option_set("purge_delay", -5) == -1, "negative value accepted");
    CHECK(ebb.option_get("purge_delay") == 77, "a rejected set changed the value");
    CHECK(ebb.option_get(NULL) == -1, "NULL name");
    CHECK(ebb.option_set("purge_delay", delay) == 0 && ebb.option_get("purge_delay") == delay,
          "restore");
    ok("ebb: ebb_option_get/ebb_option_set round-trip purge_delay (any case, EBB_ prefix, "
       "unknown names and negative values rejected)");

    int64_t background = ebb.option_get("background");
    CHECK(background == 0 || background == 1, "ebb_option_get(background) = %lld",
          (long long)background);
    CHECK(ebb.option_set("background", 2) == 0 && ebb.option_get("background") == 2,
          "background 2 (EBB_BACKGROUND=threads)");
    CHECK(ebb.option_set("background", 3) == -1 && ebb.option_get("background") == 2,
          "background 3 accepted");
    CHECK(ebb.option_set("background", background) == 0 &&
              ebb.option_get("background") == background,
          "background restore");
    ok("ebb: ebb_option_get/ebb_option_set round-trip background (0, 1, 2 = threads)");

    int64_t large_pages = ebb.option_get("large_pages");
    CHECK(large_pages == 0 || large_pages == 1, "ebb_option_get(large_pages) = %lld",
          (long long)large_pages);
    CHECK(ebb.option_set("EBB_LARGE_PAGES", 1) == 0 && ebb.option_get("large_pages") == 1,
          "large_pages on");
    CHECK(ebb.option_set("large_pages", large_pages) == 0 &&
              ebb.option_get("large_pages") == large_pages,
          "large_pages restore");
    ok("ebb: ebb_option_get/ebb_option_set round-trip large_pages");

    int64_t dense = ebb.option_get("dense_huge_pages");
    CHECK(dense == 0 || dense == 1, "ebb_option_get(dense_huge_pages) = %lld", (long long)dense);
    CHECK(ebb.option_set("EBB_DENSE_HUGE_PAGES", !dense) == 0 &&
              ebb.option_get("dense_huge_pages") == !dense,
          "dense_huge_pages flip");
    CHECK(ebb.option_set("dense_huge_pages", dense) == 0 &&
              ebb.option_get("dense_huge_pages") == dense,
          "dense_huge_pages restore");
    ok("ebb: ebb_option_get/ebb_option_set round-trip dense_huge_pages");

    CHECK(ebb.stats(NULL) == -1, "ebb_stats(NULL)");
    /* Reading stats changes nothing, so blocks other threads freed into abandoned pages
     * still count as allocated until they are taken in: take them in first, or a
     * malloc below that does would make the difference smaller than what it allocated. */
    ebb.collect(false);
    ebb_stats_t s0 = stats_now();
    enum { N = 10000 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(opaque(1000));
        memset(blocks[i], 7, 1000);
    }
    void *large = malloc(opaque(MiB));
    void *huge = malloc(opaque(20 * MiB));
    memset(large, 1, MiB);
    ebb_stats_t s1 = stats_now();
    CHECK(s1.allocated >= s0.allocated + N * 1000 + MiB + 20 * MiB, "allocated %llu -> %llu",
          (unsigned long long)s0.allocated, (unsigned long long)s1.allocated);
    CHECK(s1.committed > 0 && s1.reserved > 0 && s1.segments > 0 &&
              s1.pages > 0 && s1.threads >= 1 && s1.threads_created >= 1,
          "stats fields not filled");
    CHECK(s1.large_allocs > s0.large_allocs, "large_allocs %llu -> %llu",
          (unsigned long long)s0.large_allocs, (unsigned long long)s1.large_allocs);
    CHECK(s1.huge_allocs > s0.huge_allocs, "huge_allocs %llu -> %llu",
          (unsigned long long)s0.huge_allocs, (unsigned long long)s1.huge_allocs);
    /* Measured residency: the blocks written above are resident. */
    CHECK(s1.resident >= N * 1000 + MiB && s1.metadata > 0 && s1.metadata < s1.resident &&
              s1.heaps_live >= 1,
          "resident %llu, metadata %llu, heaps %llu", (unsigned long long)s1.resident,
          (unsigned long long)s1.metadata, (unsigned long long)s1.heaps_live);
    struct mallinfo2 mi = mallinfo2();
    CHECK(mi.uordblks + mi.hblkhd >= N * 1000 + 21 * MiB, "mallinfo2 under ebb");
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    free(large);
    free(huge);
    ebb_stats_t s2 = stats_now();
    CHECK(s2.allocated + N * 1000 + 21 * MiB <= s1.allocated, "allocated %llu -> %llu after free",
          (unsigned long long)s1.allocated, (unsigned long long)s2.allocated);
    ok("ebb: ebb_stats counts live blocks (allocated > 0 while blocks are live, back down "
       "after free)");

    void *p = malloc(opaque(200000));
    memset(p, 3, 200000);
    ebb_stats_t s3 = stats_now();
    CHECK(realloc(p, opaque(0)) == NULL, "realloc(p, 0)");
    ebb_stats_t s4 = stats_now();
    CHECK(s4.allocated + 200000 <= s3.allocated, "realloc(p, 0) did not free: %llu -> %llu",
          (unsigned long long)s3.allocated, (unsigned long long)s4.allocated);
    ok("ebb: realloc(p, 0) frees the block");

    /* Collect: with a long purge delay nothing is purged by the clock, so a forced
     * collect is what returns the memory. */
    CHECK(ebb.option_set("purge_delay", 3600 * 1000) == 0, "set purge_delay");
    enum { M = 256 };
    static void *mid[M];
    for (int i = 0; i < M; i++) {
        mid[i] = malloc(opaque(256 * KiB));
        memset(mid[i], 9, 256 * KiB);
    }
    for (int i = 0; i < M; i++)
        free(mid[i]);
    ebb_stats_t s5 = stats_now();
    CHECK(s5.free_committed > 0, "nothing awaits purging after freeing 64 MiB");
    ebb.collect(true);
    ebb_stats_t s6 = stats_now();
    CHECK(s6.purged > s5.purged, "ebb_collect(true) purged nothing (purged %llu -> %llu)",
          (unsigned long long)s5.purged, (unsigned long long)s6.purged);
    CHECK(s6.free_committed < s5.free_committed, "free_committed %llu -> %llu",
          (unsigned long long)s5.free_committed, (unsigned long long)s6.free_committed);
    CHECK(s6.purge_calls > s5.purge_calls, "purge_calls did not grow");
    ok("ebb: ebb_collect(true) purges freed memory at once");

    for (int i = 0; i < M; i++) {
        mid[i] = malloc(opaque(256 * KiB));
        memset(mid[i], 9, 256 * KiB);
    }
    for (int i = 0; i < M; i++)
        free(mid[i]);
    CHECK(malloc_trim(0) == 1, "malloc_trim(0) after freeing 64 MiB did not report a release");
    ebb_stats_t s7 = stats_now();
    CHECK(s7.free_committed == 0, "malloc_trim(0) left %llu bytes free but committed",
          (unsigned long long)s7.free_committed);
    CHECK(ebb.option_set("purge_delay", delay) == 0, "restore purge_delay");
    ok("ebb: malloc_trim(0) returns every free committed byte at once, and 1");

    ebb.stats_print();
    ok("ebb: ebb_stats_print");
}

/* --------------------------------------------------------------------------------- */

struct group {
    const char *name;
    void (*run)(void);
    bool by_default;
};

static const struct group groups[] = {
    {"malloc0", t_malloc0, true},
    {"free_null", t_free_null, true},
    {"usable_size", t_usable_size, true},
    {"aligned", t_aligned, true},
    {"invalid_align", t_invalid_align, true},
    {"enomem", t_enomem, true},
    {"overflow", t_overflow, true},
    {"realloc", t_realloc, true},
    {"realloc_in_place", t_realloc_in_place, true},
    /* Regressions run by name from tests/c_api.rs (see the functions): not run by default. */
    {"bug_realloc_in_place_big", t_bug_realloc_in_place_big, false},
    {"bug_aligned16_small", t_bug_aligned16_small, false},
    {"calloc", t_calloc, true},
    {"ebb", t_ebb, true},
    {"malloc_info", t_malloc_info, true},
    {"free_sized", t_free_sized, true},
    {"misc", t_misc, true}, /* last: mallopt changes glibc's thresholds */
};

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    find_ebb();
    if (argc == 1) {
        for (size_t i = 0; i < COUNT(groups); i++)
            if (groups[i].by_default)
                groups[i].run();
    } else {
        for (int a = 1; a < argc; a++) {
            size_t i = 0;
            while (i < COUNT(groups) && strcmp(groups[i].name, argv[a]) != 0)
                i++;
            CHECK(i < COUNT(groups), "unknown group %s", argv[a]);
            groups[i].run();
        }
    }
    printf("all checks passed\n");
    return 0;
}

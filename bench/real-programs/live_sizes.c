/* live_sizes: an LD_PRELOAD shim that records the requested sizes of the blocks live
 * at a program's peak of live requested bytes (the size-class study in
 * docs/REAL-PROGRAMS.md, "Size classes for a power of two plus a header").
 *
 *   cc -O2 -shared -fPIC -o /tmp/live_sizes.so bench/real-programs/live_sizes.c
 *   LIVE_SIZES_DIR=/tmp/ls LD_PRELOAD=/tmp/live_sizes.so PROGRAM ...
 *   python3 bench/real-programs/class_waste.py /tmp/ls
 *
 * It wraps glibc's malloc family (glibc serves the blocks) and keeps each live block's
 * requested size in a pointer-keyed table of its own (mmap'd, never malloc'd). The
 * histogram of live requests up to 512 KiB (ebb's largest class) is copied whenever live
 * bytes pass the last copy by 2%, so the copy written at exit is within 2% of the peak.
 * One file per process, LIVE_SIZES_DIR/live.COMM.PID: "size count" lines, then
 * "# peak_live BYTES big BYTES" (big: live bytes in requests over 512 KiB at the copy). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define HMAX (512 * 1024)
#define SLOTS (1UL << 25) /* 32 M slots of 16 B: 512 MiB of address space, touched as used */

struct slot {
    uintptr_t key; /* 0 empty */
    size_t size;
};
static struct slot *table;
static uint32_t *hist, *snap;
static size_t live, big, snap_live, snap_big;
static int lock;

static void take(void) {
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&lock, __ATOMIC_RELAXED))
            ;
}
static void give(void) { __atomic_store_n(&lock, 0, __ATOMIC_RELEASE); }

static void *map(size_t bytes) {
    void *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? 0 : p;
}

static int ready(void) {
    if (!table) {
        table = map(SLOTS * sizeof(struct slot));
        hist = map((HMAX + 1) * sizeof(uint32_t));
        snap = map((HMAX + 1) * sizeof(uint32_t));
    }
    return table && hist && snap;
}

static size_t hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ULL >> 39) & (SLOTS - 1); }

static void note(void *p, size_t size) {
    if (!p) return;
    take();
    if (ready()) {
        size_t i = hash((uintptr_t)p);
        while (table[i].key) i = (i + 1) & (SLOTS - 1);
        table[i].key = (uintptr_t)p;
        table[i].size = size;
        live += size;
        if (size <= HMAX) hist[size]++;
        else big += size;
        if (live > snap_live + snap_live / 50 + (1 << 20)) {
            memcpy(snap, hist, (HMAX + 1) * sizeof(uint32_t));
            snap_live = live;
            snap_big = big;
        }
    }
    give();
}

/* Backward-shift deletion keeps linear probing correct without tombstones. */
static void forget(void *p) {
    if (!p) return;
    take();
    if (ready()) {
        size_t i = hash((uintptr_t)p);
        while (table[i].key && table[i].key != (uintptr_t)p) i = (i + 1) & (SLOTS - 1);
        if (table[i].key) {
            size_t size = table[i].size;
            live -= size;
            if (size <= HMAX) hist[size]--;
            else big -= size;
            size_t j = i;
            for (;;) {
                j = (j + 1) & (SLOTS - 1);
                if (!table[j].key) break;
                size_t h = hash(table[j].key);
                /* Move j into the hole at i if its home is not in (i, j]. */
                if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
                    table[i] = table[j];
                    i = j;
                }
            }
            table[i].key = 0;
        }
    }
    give();
}

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    note(p, n);
    return p;
}
void free(void *p) {
    forget(p);
    __libc_free(p);
}
void *calloc(size_t a, size_t b) {
    void *p = __libc_calloc(a, b);
    note(p, a * b);
    return p;
}
void *realloc(void *old, size_t n) {
    forget(old);
    void *p = __libc_realloc(old, n);
    if (p) note(p, n);
    else if (old && n) note(old, 0); /* failed: the old block stays (its size is lost) */
    return p;
}
void *memalign(size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    note(p, n);
    return p;
}
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = memalign(a, n);
    if (!p) return 12;
    *out = p;
    return 0;
}
void *valloc(size_t n) { return memalign(4096, n); }
void *pvalloc(size_t n) { return memalign(4096, (n + 4095) & ~4095UL); }

__attribute__((destructor)) static void dump(void) {
    const char *dir = getenv("LIVE_SIZES_DIR");
    if (!dir || !snap) return;
    char comm[64] = "x", path[512], line[96];
    int fd = open("/proc/self/comm", O_RDONLY);
    if (fd >= 0) {
        ssize_t r = read(fd, comm, sizeof comm - 1);
        comm[r > 0 ? r - 1 : 0] = 0;
        close(fd);
    }
    snprintf(path, sizeof path, "%s/live.%s.%d", dir, comm, (int)getpid());
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    take();
    for (size_t s = 0; s <= HMAX; s++)
        if (snap[s]) write(fd, line, snprintf(line, sizeof line, "%zu %u\n", s, snap[s]));
    write(fd, line, snprintf(line, sizeof line, "# peak_live %zu big %zu\n", snap_live, snap_big));
    give();
    close(fd);
}

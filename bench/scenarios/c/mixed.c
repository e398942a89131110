/* mixed.c: the mixed-c-rust scenario in plain C, for comparing allocators through
 * LD_PRELOAD (libebb.so, Debian's libjemalloc.so.2 and libmimalloc.so.2, or none =
 * glibc).
 *
 * Eight threads, fifty rounds. Every thread keeps two rings of buffers ("library" and
 * "application" side, 64 B..8 KiB) and each round it
 *   1. frees what its neighbour handed it (remote frees),
 *   2. replaces a quarter of both rings,
 *   3. allocates a transient mix (buffers of 16 B..8 KiB, lists of 4 KiB pages, an array
 *      grown with realloc up to 256 KiB), frees half and hands the rest to its neighbour.
 * After each round the threads meet at a barrier and the main thread samples RSS, PSS and
 * RssAnon. Output: JSON lines like the Rust scenarios ("scenario":"mixed-c"); the
 * allocator label comes from $SCENARIO_ALLOC (default "unknown"), its version (for the
 * summary line) from $SCENARIO_ALLOC_VERSION.
 *
 *   cc -O2 -pthread -o mixed mixed.c
 *   LD_PRELOAD=target/release/libebb.so SCENARIO_ALLOC=ebb ./mixed [--quick]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct page {
    struct page *next;
    size_t size;
};

/* One hand-over item: a buffer or a page list. */
struct item {
    void *ptr;
    size_t size;
    int list;
};

struct mailbox {
    pthread_mutex_t lock;
    struct item *items;
    size_t len, cap;
    uint64_t bytes;
};

static int threads = 8, rounds = 50, ring = 2048;
static uint64_t transient = 4u << 20;
static pthread_barrier_t barrier;
static struct mailbox *boxes;
static uint64_t *ring_bytes;

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static size_t rng_range(uint64_t *s, size_t lo, size_t hi) {
    return lo + (size_t)(rng_next(s) % (hi - lo + 1));
}

static void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        perror("malloc");
        abort();
    }
    return p;
}

static void *buf(size_t n, int fill) {
    void *p = xmalloc(n);
    memset(p, fill, n);
    return p;
}

static void *list_build(size_t n) {
    struct page *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct page *p = buf(4096, (int)i);
        p->next = head;
        p->size = 4096;
        head = p;
    }
    return head;
}

static void item_free(struct item *it) {
    if (it->list) {
        struct page *p = it->ptr;
        while (p) {
            struct page *next = p->next;
            free(p);
            p = next;
        }
    } else {
        free(it->ptr);
    }
}

static void push(struct item **v, size_t *len, size_t *cap, struct item it) {
    if (*len == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        struct item *n = realloc(*v, *cap * sizeof **v);
        if (!n)
            abort();
        *v = n;
    }
    (*v)[(*len)++] = it;
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    uint64_t rng = (uint64_t)(t + 1) * 0x9E3779B97F4A7C15ULL | 1;
    struct item *lib = xmalloc(ring * sizeof *lib), *app = xmalloc(ring * sizeof *app);
    for (int k = 0; k < ring; k++) {
        size_t n = rng_range(&rng, 64, 8192), m = rng_range(&rng, 64, 8192);
        lib[k] = (struct item){buf(n, k), n, 0};
        app[k] = (struct item){buf(m, k | 1), m, 0};
    }
    for (int r = 0; r < rounds; r++) {
        /* 1. Free the hand-overs. */
        struct mailbox *in = &boxes[t];
        pthread_mutex_lock(&in->lock);
        struct item *items = in->items;
        size_t len = in->len;
        in->items = NULL;
        in->len = in->cap = 0;
        in->bytes = 0;
        pthread_mutex_unlock(&in->lock);
        for (size_t i = 0; i < len; i++)
            item_free(&items[i]);
        free(items);
        /* 2. Replace a quarter of both rings. */
        for (int i = 0; i < ring / 4; i++) {
            size_t k = rng_range(&rng, 0, ring - 1), n = rng_range(&rng, 64, 8192);
            free(lib[k].ptr);
            lib[k] = (struct item){buf(n, (int)k), n, 0};
            k = rng_range(&rng, 0, ring - 1);
            n = rng_range(&rng, 64, 8192);
            free(app[k].ptr);
            app[k] = (struct item){buf(n, (int)k | 1), n, 0};
        }
        /* 3. Transient mix. */
        struct item *tmp = NULL;
        size_t tlen = 0, tcap = 0;
        uint64_t bytes = 0;
        for (uint64_t i = 0; bytes < transient; i++) {
            size_t n = rng_range(&rng, 16, 8192), m = rng_range(&rng, 16, 8192);
            push(&tmp, &tlen, &tcap, (struct item){buf(n, (int)i), n, 0});
            push(&tmp, &tlen, &tcap, (struct item){buf(m, (int)i | 1), m, 0});
            bytes += n + m;
            if (i % 64 == 63) {
                push(&tmp, &tlen, &tcap, (struct item){list_build(16), 16 * 4096, 1});
                bytes += 16 * 4096;
            }
        }
        size_t n = 1024;
        unsigned char *grown = buf(n, 1);
        while (n < (256u << 10)) {
            unsigned char *g = realloc(grown, n * 2);
            if (!g)
                abort();
            memset(g + n, 2, n);
            grown = g;
            n *= 2;
        }
        struct mailbox *out = &boxes[(t + 1) % threads];
        pthread_mutex_lock(&out->lock);
        for (size_t i = 0; i < tlen; i++) {
            if (i % 2) {
                push(&out->items, &out->len, &out->cap, tmp[i]);
                out->bytes += tmp[i].size;
            } else {
                item_free(&tmp[i]);
            }
        }
        pthread_mutex_unlock(&out->lock);
        free(tmp);
        free(grown);
        uint64_t rb = 0;
        for (int k = 0; k < ring; k++)
            rb += lib[k].size + app[k].size;
        __atomic_store_n(&ring_bytes[t], rb, __ATOMIC_SEQ_CST);
        pthread_barrier_wait(&barrier); /* round done */
        pthread_barrier_wait(&barrier); /* main has sampled */
    }
    return NULL;
}

static uint64_t field_kb(const char *text, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':')
            return strtoull(p + kl + 1, NULL, 10) * 1024;
    }
    return 0;
}

static size_t read_file(const char *path, char *out, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t len = 0;
    if (fd < 0)
        return 0;
    for (;;) {
        ssize_t k = read(fd, out + len, cap - 1 - len);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    out[len] = 0;
    return len;
}

static const char *malloc_origin(void) {
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    if (!sym || !dladdr(sym, &info) || !info.dli_fname)
        return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

static double now_ms(const struct timespec *start) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)(ts.tv_sec - start->tv_sec) * 1e3 + (double)(ts.tv_nsec - start->tv_nsec) / 1e6;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (quick) {
        rounds = 5;
        ring = 128;
        transient = 256u << 10;
    }
    const char *alloc = getenv("SCENARIO_ALLOC");
    if (!alloc)
        alloc = "unknown";
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    static char text[16384];
    boxes = calloc(threads, sizeof *boxes);
    ring_bytes = calloc(threads, sizeof *ring_bytes);
    pthread_barrier_init(&barrier, NULL, threads + 1);
    pthread_t *tids = xmalloc(threads * sizeof *tids);
    for (int t = 0; t < threads; t++) {
        pthread_mutex_init(&boxes[t].lock, NULL);
        pthread_create(&tids[t], NULL, worker, (void *)(intptr_t)t);
    }
    uint64_t live = 0;
    for (int r = 1; r <= rounds; r++) {
        pthread_barrier_wait(&barrier);
        live = 0;
        for (int t = 0; t < threads; t++)
            live += __atomic_load_n(&ring_bytes[t], __ATOMIC_SEQ_CST) + boxes[t].bytes;
        double t_ms = now_ms(&start);
        read_file("/proc/self/status", text, sizeof text);
        uint64_t rss = field_kb(text, "VmRSS"), anon = field_kb(text, "RssAnon");
        read_file("/proc/self/smaps_rollup", text, sizeof text);
        uint64_t pss = field_kb(text, "Pss");
        printf("{\"type\":\"sample\",\"scenario\":\"mixed-c\",\"alloc\":\"%s\",\"t_ms\":%.1f,"
               "\"phase\":\"round\",\"idx\":%d,\"rss\":%llu,\"pss\":%llu,\"anon\":%llu,"
               "\"live_bytes\":%llu}\n",
               alloc, t_ms, r, (unsigned long long)rss, (unsigned long long)pss,
               (unsigned long long)anon, (unsigned long long)live);
        fflush(stdout);
        pthread_barrier_wait(&barrier);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    const char *version = getenv("SCENARIO_ALLOC_VERSION");
    if (!version || strchr(version, '"') || strchr(version, '\\'))
        version = "-";
    read_file("/proc/self/status", text, sizeof text);
    printf("{\"type\":\"summary\",\"scenario\":\"mixed-c\",\"alloc\":\"%s\",\"alloc_version\":\"%s\","
           "\"malloc_from\":\"%s\","
           "\"quick\":%s,\"wall_ms\":%.1f,\"samples\":%d,\"peak_rss\":%llu,\"final_rss\":%llu,"
           "\"live_bytes\":%llu,\"threads\":%d,\"rounds\":%d}\n",
           alloc, version, malloc_origin(), quick ? "true" : "false", now_ms(&start), rounds,
           (unsigned long long)field_kb(text, "VmHWM"), (unsigned long long)field_kb(text, "VmRSS"),
           (unsigned long long)live, threads, rounds);
    return 0;
}

/* Allocation before main and inside libc:
 * - a constructor (__attribute__((constructor))) mallocs, and creates a pthread that
 *   mallocs and frees; main joins that thread and frees the constructor's blocks;
 * - dlsym/dlerror/dlopen/dlclose, which allocate inside libc and the dynamic linker
 *   (dlerror's message is malloc'd by libc and freed by it later);
 * - other libc functions that return or use malloc'd memory (strdup, asprintf,
 *   getline, open_memstream, fopen, opendir, qsort, setenv);
 * - a destructor and an atexit handler that allocate and free after main returns.
 * Prints "ebb=yes|no", one "ok ..." line per check and "done"; exits non-zero on any
 * failure. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ebb.h"

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                           \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            fflush(stdout);                                                          \
            _exit(1);                                                                \
        }                                                                            \
    } while (0)

enum { CTOR_BLOCKS = 1000 };

static char *ctor_blocks[CTOR_BLOCKS];
static bool ctor_ok = true;
static pthread_t ctor_thread;
static bool ctor_thread_started;
static uint64_t ctor_allocated; /* ebb's allocated bytes seen in the constructor */

struct thread_result {
    bool ok;
    char *kept; /* a block the thread leaves for main to free */
};
static struct thread_result thread_result;

static void *ctor_thread_main(void *arg) {
    struct thread_result *r = arg;
    r->ok = true;
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(i % 300) * 16 + 1;
        char *p = malloc(n);
        if (p == NULL) {
            r->ok = false;
            break;
        }
        memset(p, 'x', n);
        free(p);
    }
    r->kept = strdup("made in a thread created by a constructor");
    if (r->kept == NULL)
        r->ok = false;
    return NULL;
}

__attribute__((constructor(101))) static void early_ctor(void) {
    for (int i = 0; i < CTOR_BLOCKS; i++) {
        size_t n = (size_t)i * 37 % 5000 + 1;
        ctor_blocks[i] = malloc(n);
        if (ctor_blocks[i] == NULL) {
            ctor_ok = false;
            return;
        }
        memset(ctor_blocks[i], i & 0xFF, n);
    }
    void *big = malloc(3 << 20);
    if (big == NULL)
        ctor_ok = false;
    free(big);
    int (*stats)(ebb_stats_t *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "ebb_stats");
    if (stats != NULL) {
        ebb_stats_t s;
        if (stats(&s) == 0)
            ctor_allocated = s.allocated;
    }
}

__attribute__((constructor)) static void late_ctor(void) {
    ctor_thread_started = pthread_create(&ctor_thread, NULL, ctor_thread_main, &thread_result) == 0;
}

static char *exit_block;

static void at_exit_handler(void) {
    /* Runs after main returns: allocate and free, and free a block main left. */
    char *p = malloc(12345);
    if (p == NULL)
        _exit(3);
    memset(p, 1, 12345);
    free(p);
    free(exit_block);
}

__attribute__((destructor)) static void dtor(void) {
    char *p = calloc(100, 100);
    if (p == NULL || p[9999] != 0)
        _exit(4);
    free(p);
    /* The last line of output comes from here, after main and the atexit handler. */
    static const char msg[] = "destructor ran\n";
    if (write(1, msg, sizeof msg - 1) < 0)
        _exit(5);
}

static int compare(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    int (*stats)(ebb_stats_t *);
    *(void **)&stats = dlsym(RTLD_DEFAULT, "ebb_stats");
    printf("ebb=%s\n", stats != NULL ? "yes" : "no");
    if (stats != NULL)
        CHECK(ctor_allocated >= CTOR_BLOCKS * 100, "the constructor's blocks are not ebb's "
                                                  "(allocated %llu)",
              (unsigned long long)ctor_allocated);

    CHECK(ctor_ok, "malloc failed in the constructor");
    for (int i = 0; i < CTOR_BLOCKS; i++) {
        size_t n = (size_t)i * 37 % 5000 + 1;
        for (size_t j = 0; j < n; j++)
            CHECK((unsigned char)ctor_blocks[i][j] == (i & 0xFF), "constructor block %d changed", i);
        free(ctor_blocks[i]);
    }
    printf("ok blocks malloc'd in a constructor are intact and freed in main\n");

    CHECK(ctor_thread_started, "pthread_create in the constructor failed");
    CHECK(pthread_join(ctor_thread, NULL) == 0, "pthread_join");
    CHECK(thread_result.ok, "malloc failed in the constructor's thread");
    CHECK(strcmp(thread_result.kept, "made in a thread created by a constructor") == 0,
          "the thread's block changed");
    free(thread_result.kept);
    printf("ok a pthread created in a constructor mallocs and frees; main frees its block\n");

    /* dlsym / dlerror: a failed lookup makes libc allocate the error message. */
    for (int i = 0; i < 200; i++) {
        void *sym = dlsym(RTLD_DEFAULT, "no_such_symbol_anywhere");
        CHECK(sym == NULL, "found a symbol that does not exist");
        const char *err = dlerror();
        CHECK(err != NULL && strstr(err, "no_such_symbol_anywhere") != NULL, "dlerror() = %s",
              err ? err : "(null)");
        CHECK(dlerror() == NULL, "dlerror() not cleared");
    }
    void *libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    CHECK(libm != NULL, "dlopen(libm.so.6): %s", dlerror());
    double (*cos_fn)(double);
    *(void **)&cos_fn = dlsym(libm, "cos");
    CHECK(cos_fn != NULL && cos_fn(0.0) == 1.0, "cos from libm");
    CHECK(dlsym(libm, "no_such_symbol_in_libm") == NULL && dlerror() != NULL, "dlerror");
    CHECK(dlclose(libm) == 0, "dlclose");
    void *missing = dlopen("libdoes-not-exist.so.42", RTLD_NOW);
    CHECK(missing == NULL, "dlopen of a missing library succeeded");
    const char *err = dlerror();
    CHECK(err != NULL && strstr(err, "libdoes-not-exist.so.42") != NULL, "dlerror() = %s",
          err ? err : "(null)");
    printf("ok dlsym, dlerror, dlopen and dlclose work\n");

    /* libc functions that hand out malloc'd memory, freed here with free. */
    char *dup = strdup("hello");
    char *ndup = strndup("hello, world", 5);
    char *formatted = NULL;
    CHECK(asprintf(&formatted, "%s-%d-%0500d", dup, 42, 7) == 509, "asprintf");
    CHECK(dup && ndup && strcmp(dup, ndup) == 0, "strdup/strndup");
    char *path = realpath("/", NULL);
    CHECK(path != NULL && strcmp(path, "/") == 0, "realpath");
    free(dup), free(ndup), free(formatted), free(path);

    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    CHECK(mem != NULL, "open_memstream");
    for (int i = 0; i < 5000; i++)
        fprintf(mem, "line %d\n", i);
    CHECK(fclose(mem) == 0 && len > 30000, "open_memstream length %zu", len);
    FILE *in = fmemopen(buf, len, "r");
    CHECK(in != NULL, "fmemopen");
    char *line = NULL;
    size_t cap = 0;
    int lines = 0;
    while (getline(&line, &cap, in) > 0)
        lines++;
    CHECK(lines == 5000, "getline read %d lines", lines);
    free(line);
    fclose(in);
    free(buf);

    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL, "fopen");
    bool preloaded = false;
    char row[4096];
    while (fgets(row, sizeof row, f) != NULL)
        if (strstr(row, "libebb") != NULL)
            preloaded = true;
    fclose(f);
    CHECK(preloaded == (stats != NULL), "libebb mapped: %d, ebb_stats found: %d", preloaded,
          stats != NULL);

    DIR *dir = opendir("/proc/self/fd");
    CHECK(dir != NULL, "opendir");
    int entries = 0;
    while (readdir(dir) != NULL)
        entries++;
    CHECK(closedir(dir) == 0 && entries >= 3, "readdir");

    enum { WORDS = 3000 };
    char **words = malloc(WORDS * sizeof *words);
    for (int i = 0; i < WORDS; i++)
        CHECK(asprintf(&words[i], "w%07d", (i * 7919) % WORDS) > 0, "asprintf");
    qsort(words, WORDS, sizeof *words, compare);
    for (int i = 0; i < WORDS; i++) {
        char want[16];
        snprintf(want, sizeof want, "w%07d", i);
        CHECK(strcmp(words[i], want) == 0, "qsort");
        free(words[i]);
    }
    free(words);

    for (int i = 0; i < 200; i++) {
        char name[32], value[64];
        snprintf(name, sizeof name, "EBB_TEST_VAR_%d", i);
        snprintf(value, sizeof value, "value-%d", i);
        CHECK(setenv(name, value, 1) == 0, "setenv");
    }
    CHECK(strcmp(getenv("EBB_TEST_VAR_150"), "value-150") == 0, "getenv");
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "EBB_TEST_VAR_%d", i);
        unsetenv(name);
    }
    printf("ok libc functions that allocate (strdup, asprintf, realpath, open_memstream, "
           "getline, fopen, opendir, qsort, setenv) work with free\n");

    exit_block = malloc(777);
    CHECK(exit_block != NULL, "malloc");
    CHECK(atexit(at_exit_handler) == 0, "atexit");
    printf("done\n");
    return 0;
}

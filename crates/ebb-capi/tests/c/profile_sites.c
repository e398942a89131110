/* Known allocation sites for the heap profiler's tests (tests/profile.rs), run under
 * LD_PRELOAD=libebb.so with EBB_PROFILE set. Built with frame pointers, as the
 * README asks of programs being profiled.
 *
 *   profile_sites DIR  - the sites below; dumps DIR/before.pb.gz after one round of
 *                        leaking and DIR/after.pb.gz after four more; then raises
 *                        SIGUSR1 (EBB_PROFILE_SIGNAL) and waits for that dump;
 *                        DIR/peak.pb.gz (ebb_profile_dump_peak) after the last round.
 * Truth (bytes requested): site_small 40 x 2,000,000; site_medium 2000 x 50,000;
 * site_big 1 MiB x 100; site_leak 4000 x 2,000 per round, all kept. */
#pragma GCC optimize("no-omit-frame-pointer")
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void site_small(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(40);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) static void site_medium(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(2000);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

__attribute__((noinline)) static void site_big(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(1 << 20);
        p[0] = (char)i;
        sink = p;
        free(p);
    }
}

static void *kept[20000];
static long kept_count;

__attribute__((noinline)) static void site_leak(long n) {
    for (long i = 0; i < n; i++) {
        char *p = malloc(4000);
        memset(p, 1, 64);
        kept[kept_count++] = p;
    }
}

__attribute__((noinline)) static void work(long rounds) {
    site_small(2000000 / 5 * rounds);
    site_medium(50000 / 5 * rounds);
    site_big(100 / 5 * rounds);
    site_leak(2000 * rounds);
}

int main(int argc, char **argv) {
    char path[4096];
    if (argc < 2) {
        fprintf(stderr, "usage: profile_sites DIR\n");
        return 2;
    }
    /* ebb_profile_dump of include/ebb.h, found in the preloaded libebb.so. */
    int (*ebb_profile_dump)(const char *);
    *(void **)&ebb_profile_dump = dlsym(RTLD_DEFAULT, "ebb_profile_dump");
    if (!ebb_profile_dump) {
        fprintf(stderr, "not running under libebb.so\n");
        return 1;
    }
    work(1);
    snprintf(path, sizeof path, "%s/before.pb.gz", argv[1]);
    if (ebb_profile_dump(path) != 0) {
        fprintf(stderr, "dump %s failed\n", path);
        return 1;
    }
    work(4);
    snprintf(path, sizeof path, "%s/after.pb.gz", argv[1]);
    if (ebb_profile_dump(path) != 0) {
        fprintf(stderr, "dump %s failed\n", path);
        return 1;
    }
    int (*ebb_profile_dump_peak)(const char *);
    *(void **)&ebb_profile_dump_peak = dlsym(RTLD_DEFAULT, "ebb_profile_dump_peak");
    snprintf(path, sizeof path, "%s/peak.pb.gz", argv[1]);
    if (!ebb_profile_dump_peak || ebb_profile_dump_peak(path) != 0) {
        fprintf(stderr, "dump %s failed\n", path);
        return 1;
    }
    /* The signal dump: written by ebb's own thread, named prefix.pid.1.pb.gz. */
    const char *prefix = getenv("EBB_PROFILE");
    if (prefix && getenv("EBB_PROFILE_SIGNAL")) {
        snprintf(path, sizeof path, "%s.%d.1.pb.gz", prefix, (int)getpid());
        raise(SIGUSR1);
        for (int i = 0; i < 1000 && access(path, R_OK) != 0; i++)
            usleep(10000);
        /* Let the writer finish (the file appears before it is complete). */
        usleep(300000);
    }
    printf("kept %ld\n", kept_count);
    return 0;
}

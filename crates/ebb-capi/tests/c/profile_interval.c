/* Profiles on a timer (EBB_PROFILE_INTERVAL, tests/profile.rs): grow_steadily leaks
 * 4 MiB in each of 4 steps, each step once the profile of the step before is on disk;
 * then the process forks, and the child leaks 4 MiB in child_grows and waits for a
 * profile of its own (the watcher runs again in a fork child). Polls with access(2),
 * which allocates nothing. Prints "child <pid>". Frame pointers, under
 * LD_PRELOAD=libebb.so. */
#pragma GCC optimize("no-omit-frame-pointer")
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void grow_steadily(void) {
    for (int i = 0; i < 64; i++) {
        char *p = malloc(64 << 10);
        memset(p, 1, 64);
        sink = p;
    }
}

__attribute__((noinline)) static void child_grows(void) {
    for (int i = 0; i < 64; i++) {
        char *p = malloc(64 << 10);
        memset(p, 2, 64);
        sink = p;
    }
}

/* Wait until <prefix>.<pid>.<n>.pb.gz exists (60 s at most). */
static int wait_for(const char *prefix, int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.%d.pb.gz", prefix, (int)getpid(), n);
    for (int i = 0; i < 12000; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        usleep(5000);
    }
    fprintf(stderr, "no %s\n", path);
    return 0;
}

int main(void) {
    const char *prefix = getenv("EBB_PROFILE");
    if (!prefix)
        return 2;
    for (int step = 1; step <= 4; step++) {
        grow_steadily();
        if (!wait_for(prefix, step))
            return 1;
    }
    pid_t child = fork();
    if (child == 0) {
        child_grows();
        _exit(wait_for(prefix, 1) ? 0 : 1);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    printf("child %d\n", (int)child);
    return 0;
}

/* A fork child's peak is its own (tests/profile.rs): the parent holds 64 MiB in
 * parent_peak and frees it, then forks; the child holds 16 MiB in child_site and
 * exits. The child's peak profile must show child_site, not the parent's 64 MiB.
 * Prints "child <pid>". Built with frame pointers, under LD_PRELOAD=libebb.so. */
#pragma GCC optimize("no-omit-frame-pointer")
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

__attribute__((noinline)) static void parent_peak(void) {
    void *held[1024];
    for (int i = 0; i < 1024; i++) {
        held[i] = malloc(64 << 10);
        memset(held[i], 1, 64);
    }
    for (int i = 0; i < 1024; i++)
        free(held[i]);
}

__attribute__((noinline)) static void child_site(void) {
    for (int i = 0; i < 256; i++) {
        char *p = malloc(64 << 10);
        memset(p, 2, 64);
        sink = p;
    }
}

int main(void) {
    parent_peak();
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        child_site();
        return 0;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    printf("child %d\n", (int)pid);
    return 0;
}

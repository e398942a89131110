/* Guarded sampling across fork (tests/guarded.rs): two threads allocate and free all
 * the time while the main thread forks; each child allocates and frees, then writes
 * into a block it freed, and must be killed by SIGSEGV (the pool works in the child,
 * whatever the threads were doing at the fork). Prints "children caught". */
#include "../attacks/attack.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile int stop;

static void *churn(void *arg) {
    (void)arg;
    while (!stop) {
        void *p[8];
        for (int i = 0; i < 8; i++) {
            p[i] = malloc(32 + 16 * i);
            memset(p[i], i, 32 + 16 * i);
        }
        for (int i = 0; i < 8; i++) free(p[i]);
    }
    return NULL;
}

int main(void) {
    pthread_t threads[2];
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, churn, NULL);
    for (int round = 0; round < 20; round++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            for (int i = 0; i < 1000; i++) {
                char *p = opaque(malloc(48));
                memset(p, 1, 48);
                free(p);
            }
            char *p = opaque(malloc(48));
            free(p);
            ((volatile char *)opaque(p))[0] = 1;
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV) {
            printf("child %d: status %#x, not killed by SIGSEGV\n", round, status);
            return 1;
        }
    }
    stop = 1;
    for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
    printf("children caught\n");
    return 0;
}

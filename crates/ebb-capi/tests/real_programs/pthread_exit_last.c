/* Regression test for an ebb bug fixed in fc33705 (real_programs.rs,
 * pthread_exit_of_last_thread_c): with libebb.so preloaded, a process whose last thread
 * ended with pthread_exit() never exited. Here a worker thread allocates and exits (its
 * heap is abandoned, which starts ebb's background purger thread); then main() calls
 * pthread_exit. The purger thread lived on, sleeping on a futex without a timeout, so the
 * process never ended. POSIX: the process exits with status 0 once its last thread has
 * terminated, as it does at once with glibc's malloc.
 *
 *   cc -O2 -pthread pthread_exit_last.c -o pthread_exit_last
 *   ./pthread_exit_last                                      # exits, status 0
 *   LD_PRELOAD=target/release/libebb.so ./pthread_exit_last  # must exit too (hung before fc33705)
 *
 * The last line is left in stdio's buffer: exit(0), run at the end of the last thread,
 * flushes it (with "worker-last", a worker started before main's pthread_exit is that
 * thread). ebb's purger has a descriptor table of its own (process/purger.rs), so it
 * must not be the thread that runs that exit: the line would be lost.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *worker(void *arg) {
    (void)arg;
    return malloc(100);
}

/* With "worker-last": the worker outlives main and is the process's last thread. */
static void *late_worker(void *arg) {
    (void)arg;
    usleep(50000);
    free(malloc(100));
    fputs("worker: flushed at exit\n", stdout);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t thread;
    void *block;
    if (pthread_create(&thread, NULL, worker, NULL) != 0 || pthread_join(thread, &block) != 0)
        return 1;
    free(block);
    puts("main: pthread_exit");
    fflush(stdout);
    fputs("main: flushed at exit\n", stdout);
    if (argc > 1 && strcmp(argv[1], "worker-last") == 0 &&
        pthread_create(&thread, NULL, late_worker, NULL) != 0)
        return 1;
    pthread_exit(NULL);
}

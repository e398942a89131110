// Preloaded into a program, starts one thread that sleeps in pause() for good: the cost
// of a second thread alone (docs/REAL-PROGRAMS.md, "python1").
//   gcc -O2 -shared -fPIC -pthread -o /tmp/sleeper.so bench/real-programs/sleeper.c
#include <pthread.h>
#include <unistd.h>

static void *sleeper(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

__attribute__((constructor)) static void start_sleeper(void) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&t, &attr, sleeper, NULL);
}

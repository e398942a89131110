// What a sleeping second thread costs a program's system calls (docs/REAL-PROGRAMS.md,
// "python1"): N write()s of 41 bytes to /dev/null or to FILE, with or without one thread
// blocked in pause(); prints the CPU time per call.
//
//   gcc -O2 -pthread -o /tmp/thread_tax bench/real-programs/thread_tax.c
//   /tmp/thread_tax 2000000 0; /tmp/thread_tax 2000000 1          # /dev/null
//   /tmp/thread_tax 1000000 0 /tmp/x; /tmp/thread_tax 1000000 1 /tmp/x   # a file
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *sleeper(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s N THREAD(0|1) [FILE]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    int thread = atoi(argv[2]);
    int fd = argc > 3 ? open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644)
                      : open("/dev/null", O_WRONLY);
    if (fd < 0) return 1;
    if (thread) {
        pthread_t t;
        pthread_create(&t, NULL, sleeper, NULL);
    }
    char buf[48] = "0123456789012345678901234567890123456789\n";
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    for (long i = 0; i < n; i++)
        if (write(fd, buf, 41) != 41) return 1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    printf("thread=%d %.1f ns/write\n", thread,
           ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
    return 0;
}

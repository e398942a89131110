/* measure: runs a command and prints its wall time, CPU time and peak RSS.
 *
 *   measure OUTFILE COMMAND [ARGS...]
 *
 * Writes "wall_s user_s sys_s maxrss_kib exit" to OUTFILE. The figures come from
 * wait4 on the command, so they cover every thread of it and every child it waited for
 * (a compiler driver's cc1 and as). It exists because a process forked from the suite's
 * Python runner inherits the runner's peak RSS in ru_maxrss (the kernel keeps the
 * high-water mark of the memory image an exec replaces); forked from this small program
 * instead, the floor is this program's few hundred KiB. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds(struct timeval tv) { return tv.tv_sec + tv.tv_usec / 1e6; }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: measure OUTFILE COMMAND [ARGS...]\n");
        return 2;
    }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) {
        perror("wait4");
        return 2;
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 2;
    }
    fprintf(out, "%.6f %.6f %.6f %ld %d\n",
            (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9,
            seconds(ru.ru_utime), seconds(ru.ru_stime), ru.ru_maxrss, code);
    fclose(out);
    return code;
}

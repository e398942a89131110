/* A program with its own SIGSEGV handler, installed before ebb's (a constructor runs
 * before the program's first malloc sets ebb up): under guarded sampling a fault
 * outside ebb's pool must still reach it (tests/guarded.rs). Prints "chained=1" when
 * ebb's handler is the one installed at the fault, then "own handler" from it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

static void own_handler(int signo) {
    (void)signo;
    static const char line[] = "own handler\n";
    write(1, line, sizeof line - 1);
    _exit(3);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = own_handler;
    sigaction(SIGSEGV, &action, NULL);
}

int main(void) {
    void *p = malloc(64);
    struct sigaction current;
    sigaction(SIGSEGV, NULL, &current);
    printf("chained=%d\n", current.sa_handler != own_handler);
    fflush(stdout);
    free(p);
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
    return 0;
}

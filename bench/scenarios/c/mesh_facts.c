/* Two facts that decide whether meshing (docs/MESHING.md) can be built into a drop-in
 * malloc, each checked on the running kernel:
 *
 * 1. What a mesh gives back shows in PSS and in the memory cgroup, not in VmRSS: a
 *    memfd page mapped at two addresses (what a mesh makes) counts twice in VmRSS
 *    once both are touched.
 * 2. The write barrier a mesh needs while it copies (the source page made read-only,
 *    a SIGSEGV handler that waits for the copy) catches the program's own stores, but
 *    not the kernel's: a read(2) into the page fails with EFAULT and no signal, so
 *    the program sees an I/O error it would never see under glibc.
 *
 * cc -O2 -o mesh_facts bench/scenarios/c/mesh_facts.c && ./mesh_facts */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MIB (1L << 20)

static long status_kib(const char *field) {
    char buf[8192];
    FILE *f = fopen("/proc/self/status", "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strstr(buf, field);
    return p ? strtol(p + strlen(field) + 1, NULL, 10) : -1;
}

static long pss_kib(void) {
    char buf[8192];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strstr(buf, "\nPss:");
    return p ? strtol(p + 5, NULL, 10) : -1;
}

static volatile sig_atomic_t faults;
static char *barrier_page;
static long page;

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    (void)sig;
    (void)ctx;
    char *at = info->si_addr;
    if (at >= barrier_page && at < barrier_page + page) {
        /* A mesh would wait here for the copy and the remap; lift the barrier. */
        faults++;
        mprotect(barrier_page, page, PROT_READ | PROT_WRITE);
        return;
    }
    signal(SIGSEGV, SIG_DFL);
}

int main(void) {
    page = sysconf(_SC_PAGESIZE);
    long size = 64 * MIB;
    int fd = memfd_create("mesh-facts", 0);
    if (fd < 0 || ftruncate(fd, 2 * size) != 0) {
        perror("memfd");
        return 1;
    }
    char *a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, size);
    memset(a, 1, size);
    memset(b, 2, size);
    long rss0 = status_kib("VmRSS:"), pss0 = pss_kib();
    /* Mesh b onto a: b's range now maps a's file pages, b's own pages are punched. */
    mmap(b, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, size, size);
    long rss1 = status_kib("VmRSS:"), pss1 = pss_kib();
    long sum = 0;
    for (long i = 0; i < size; i += page)
        sum += b[i];
    long rss2 = status_kib("VmRSS:"), pss2 = pss_kib();
    printf("1. 64 MiB meshed onto another 64 MiB (memfd, mapped twice)\n");
    printf("   both touched:             VmRSS %6ld KiB  PSS %6ld KiB\n", rss0, pss0);
    printf("   meshed, before b is read: VmRSS %6ld KiB  PSS %6ld KiB\n", rss1, pss1);
    printf("   meshed, b read again:     VmRSS %6ld KiB  PSS %6ld KiB (sum %ld)\n", rss2,
           pss2, sum);

    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    barrier_page = a;
    mprotect(barrier_page, page, PROT_READ);
    barrier_page[8] = 42; /* the program's store: caught, retried after the handler */
    printf("2. a page behind the write barrier (read-only, SIGSEGV handler)\n");
    printf("   the program's own store:  %s (handler ran %d time)\n",
           barrier_page[8] == 42 ? "done" : "lost", (int)faults);
    mprotect(barrier_page, page, PROT_READ);
    int pipefd[2];
    if (pipe(pipefd) != 0 || write(pipefd[1], "from the kernel", 15) != 15) {
        perror("pipe");
        return 1;
    }
    ssize_t got = read(pipefd[0], barrier_page + 64, 15);
    int err = errno;
    printf("   read(2) into it:          %zd (%s), handler ran %d time(s) in all\n", got,
           got < 0 ? strerror(err) : "ok", (int)faults);
    return 0;
}

/* An experiment, not part of the suite (docs/REAL-PROGRAMS.md "Huge pages: where the perl/Lua gap is"):
 * preloaded beside an allocator, a thread that every SHIM_DELAY_MS (1000) ms asks the kernel to
 * collapse every 2 MiB of every anonymous read-write mapping into a huge page (MADV_COLLAPSE),
 * to see how much of the huge-page gain comes back when huge pages are made after the fact.
 *   gcc -O2 -shared -fPIC -o collapse_shim.so collapse_shim.c -lpthread
 *   LD_PRELOAD=target/release/libebb.so:./collapse_shim.so SHIM_VERBOSE=1 perl ... */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
static void *run(void *a) {
  (void)a;
  int delay = getenv("SHIM_DELAY_MS") ? atoi(getenv("SHIM_DELAY_MS")) : 1000;
  for (int pass = 0; pass < 100; pass++) {
    usleep(delay * 1000);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512]; unsigned long lo, hi; char perm[8]; long n = 0, ok = 0;
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    while (fgets(line, sizeof line, f)) {
      char path[256] = "";
      if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %255s", &lo, &hi, perm, path) < 3) continue;
      if (perm[0] != 'r' || perm[1] != 'w' || path[0]) continue;
      unsigned long a0 = (lo + (2UL<<20) - 1) & ~((2UL<<20)-1);
      for (unsigned long p = a0; p + (2UL<<20) <= hi; p += 2UL<<20) {
        n++; if (madvise((void*)p, 2UL<<20, MADV_COLLAPSE) == 0) ok++;
      }
    }
    fclose(f);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("SHIM_VERBOSE")) fprintf(stderr, "shim pass %d: %ld/%ld collapsed in %.1f ms\n", pass, ok, n, (t1.tv_sec-t0.tv_sec)*1e3+(t1.tv_nsec-t0.tv_nsec)/1e6);
  }
  return 0;
}
__attribute__((constructor)) static void init(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_detach(t); }

/* A trivial program for c_api.rs: allocates a few KiB, then prints "ebb=yes|no" and its
 * peak RSS ("hwm_kb=N", VmHWM from /proc/self/status).
 *
 *   trivial               as above
 *   trivial close_stderr  also closes fd 2 from an atexit handler, as GNU coreutils do;
 *                         that handler runs before ebb's EBB_SHOW_STATS report (registered
 *                         at the first malloc, so earlier), which must still appear.
 *   trivial maps          also prints "so=PATH" for each shared object it has mapped
 *                         (from /proc/self/maps, each once).
 *   trivial options       also prints the options in force that the environment test
 *                         sets ("purge_delay=N check=N show_stats=N", ebb_option_get). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void close_stderr(void) { close(2); }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "close_stderr") == 0)
        atexit(close_stderr);
    char *blocks[16];
    for (int i = 0; i < 16; i++) {
        blocks[i] = malloc(256);
        memset(blocks[i], i, 256);
    }
    printf("ebb=%s\n", dlsym(RTLD_DEFAULT, "ebb_version") ? "yes" : "no");
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long hwm_kb = -1;
    while (status && fgets(line, sizeof line, status))
        if (strncmp(line, "VmHWM:", 6) == 0)
            hwm_kb = strtol(line + 6, NULL, 10);
    if (status)
        fclose(status);
    printf("hwm_kb=%ld\n", hwm_kb);
    if (argc > 1 && strcmp(argv[1], "maps") == 0) {
        FILE *maps = fopen("/proc/self/maps", "r");
        char last[256] = "";
        while (maps && fgets(line, sizeof line, maps)) {
            char *path = strchr(line, '/');
            if (path && strstr(path, ".so") && strcmp(path, last) != 0) {
                printf("so=%s", path);
                snprintf(last, sizeof last, "%s", path);
            }
        }
        if (maps)
            fclose(maps);
    }
    if (argc > 1 && strcmp(argv[1], "options") == 0) {
        long long (*get)(const char *) =
            (long long (*)(const char *))dlsym(RTLD_DEFAULT, "ebb_option_get");
        if (get)
            printf("purge_delay=%lld check=%lld show_stats=%lld\n", get("purge_delay"),
                   get("check"), get("show_stats"));
    }
    for (int i = 0; i < 16; i++)
        free(blocks[i]);
    return hwm_kb > 0 ? 0 : 1;
}

/* A single-threaded program that fills many pages of one class (so the heap abandons
 * the older full ones), then frees every other block in allocation order. Run with
 * EBB_STATS_FILE: alone in the process, ebb should take its own abandoned pages back on
 * the first free into each (reclaim) rather than push every free on the page's remote
 * list for the background collector. Prints "done". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 200000

int main(void) {
    static void *blocks[COUNT];
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = malloc(48);
        if (blocks[i] == NULL)
            return 1;
        memset(blocks[i], i, 48);
    }
    for (int i = 0; i < COUNT; i += 2)
        free(blocks[i]);
    for (int i = 1; i < COUNT; i += 2)
        free(blocks[i]);
    printf("done\n");
    return 0;
}

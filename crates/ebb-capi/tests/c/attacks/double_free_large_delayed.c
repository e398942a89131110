/* Double free of a 1 MiB block after other allocations reused memory. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(1 << 20));
    memset(p, 1, 1 << 20);
    committing("double free of a 1 MiB block, delayed");
    free(p);
    char *q = opaque(malloc(1 << 19));
    char *r = opaque(malloc(100));
    free(opaque(p));
    free(q);
    free(r);
    return survived(1 << 20);
}

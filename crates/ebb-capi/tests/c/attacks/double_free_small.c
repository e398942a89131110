/* Double free of a small block, immediately: free(p); free(p). */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(48));
    strcpy(p, "x");
    committing("double free of a 48-byte block, immediate");
    free(p);
    free(opaque(p));
    return survived(48);
}

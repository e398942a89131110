/* Double free of a small block after other frees and mallocs of its size. */
#include "attack.h"
int main(void) {
    char *p = opaque(malloc(48));
    char *q = opaque(malloc(48));
    char *r = opaque(malloc(48));
    committing("double free of a 48-byte block, delayed");
    free(p);
    free(q);
    char *s = opaque(malloc(48)); /* takes q back */
    free(r);
    free(opaque(p));
    free(s);
    return survived(48);
}

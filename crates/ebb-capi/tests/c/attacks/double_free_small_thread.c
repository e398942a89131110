/* Double free of a small block in a second thread, immediately: free(p); free(p).
 * A thread's first blocks of a class come from pages all threads share (ebb's shared
 * start pages), so this is the same bug on a page the thread does not own. */
#include <pthread.h>
#include "attack.h"
static void *run(void *arg) {
    (void)arg;
    char *p = opaque(malloc(48));
    strcpy(p, "x");
    committing("double free of a 48-byte block, immediate, in a second thread");
    free(p);
    free(opaque(p));
    survived(48);
    return NULL;
}
int main(void) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, run, NULL) != 0) return 2;
    pthread_join(thread, NULL);
    return 0;
}

/* alloctest2: alloctest.c on 2 threads at once (the same total steps).
 * usage: alloctest2 [scale] */
#define THREADS 2
#define NAME "c-alloctest2"
#include "alloctest.c"

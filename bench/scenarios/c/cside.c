/* The C half of the mixed-c-rust scenario: allocation patterns of a C library linked
 * into a Rust program (think LMDB inside meilisearch): lists of page-size buffers,
 * variable-size buffers and arrays grown with realloc. Everything goes through the
 * plain C malloc/realloc/free, so it reaches whatever allocator provides those symbols
 * in the final binary. */
#include <stdlib.h>
#include <string.h>

struct cs_page {
    struct cs_page *next;
    size_t size;
};

/* A linked list of `n` buffers of `size` bytes (>= 64), each written through. */
void *cs_list_build(size_t n, size_t size) {
    struct cs_page *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct cs_page *p = malloc(size);
        if (!p)
            abort();
        memset(p, (int)(i & 0xff), size);
        p->next = head;
        p->size = size;
        head = p;
    }
    return head;
}

/* Free a list from cs_list_build; returns the bytes freed. */
size_t cs_list_free(void *list) {
    size_t bytes = 0;
    struct cs_page *p = list;
    while (p) {
        struct cs_page *next = p->next;
        bytes += p->size;
        free(p);
        p = next;
    }
    return bytes;
}

/* A buffer of `n` bytes filled with `fill`. */
void *cs_buf(size_t n, int fill) {
    unsigned char *p = malloc(n);
    if (!p)
        abort();
    memset(p, fill, n);
    return p;
}

void cs_free(void *p) { free(p); }

/* Grow an array with realloc from `from` to `to` bytes, doubling, writing the new part
 * each time; returns the final buffer (to be freed with cs_free). */
void *cs_grow(size_t from, size_t to) {
    size_t n = from;
    unsigned char *p = malloc(n);
    if (!p)
        abort();
    memset(p, 1, n);
    while (n < to) {
        size_t m = n * 2;
        unsigned char *q = realloc(p, m);
        if (!q)
            abort();
        memset(q + n, 2, m - n);
        p = q;
        n = m;
    }
    return p;
}

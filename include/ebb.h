/* ebb — a general-purpose allocator that gives memory back.
 *
 * Link with -lebb (libebb.so or libebb.a, built by `cargo build --release -p ebb-capi`
 * into target/release/), or preload libebb.so to replace malloc in any program:
 *
 *     LD_PRELOAD=target/release/libebb.so ./program
 *
 * libebb exports the standard allocation functions (malloc, free, calloc, realloc,
 * reallocarray, aligned_alloc, posix_memalign, memalign, valloc, pvalloc, C23's
 * free_sized and free_aligned_sized,
 * malloc_usable_size, malloc_trim, mallopt, mallinfo, mallinfo2, malloc_stats, malloc_info
 * and glibc's __libc_* aliases) with glibc's documented behaviour, and the ebb_* functions
 * below. malloc_info writes glibc's XML elements with ebb's figures (README.md).
 * Options are read from EBB_* environment variables at first use (see README.md).
 */
#ifndef EBB_H
#define EBB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The standard interface under ebb_ names (same semantics as malloc etc.). */
void *ebb_malloc(size_t size);
void *ebb_calloc(size_t count, size_t size);
void *ebb_realloc(void *ptr, size_t size);
void *ebb_reallocarray(void *ptr, size_t count, size_t size);
void ebb_free(void *ptr);
/* C23: free a block of `size` bytes (from malloc, calloc or realloc), or of `size` bytes
 * at `alignment` (from aligned_alloc). The size and alignment are checked against the
 * block with EBB_CHECK=1 and in libebb_secure.so; otherwise they are hints. */
void ebb_free_sized(void *ptr, size_t size);
void ebb_free_aligned_sized(void *ptr, size_t alignment, size_t size);
void *ebb_aligned_alloc(size_t alignment, size_t size);
void *ebb_memalign(size_t alignment, size_t size);
int ebb_posix_memalign(void **out, size_t alignment, size_t size);
void *ebb_valloc(size_t size);
void *ebb_pvalloc(size_t size);
size_t ebb_malloc_usable_size(void *ptr);
int ebb_malloc_trim(size_t pad);

/* A statistics snapshot. All counts are bytes unless named otherwise. */
typedef struct ebb_stats_s {
    uint64_t allocated;       /* bytes in live blocks (at block size) */
    uint64_t committed;       /* bytes that may be resident */
    uint64_t free_committed;  /* part of committed that is free, awaiting purge */
    uint64_t reserved;        /* address space reserved */
    uint64_t purged;          /* bytes returned to the OS (cumulative) */
    uint64_t purge_calls;     /* madvise calls made by purging (cumulative) */
    uint64_t segments;        /* 32 MiB segments reserved */
    uint64_t pages;           /* pages in use */
    uint64_t pages_abandoned; /* pages owned by no thread right now */
    uint64_t threads;         /* threads with a heap now */
    uint64_t threads_created; /* threads that ever made a heap */
    uint64_t large_allocs;    /* large blocks allocated (cumulative) */
    uint64_t huge_allocs;     /* huge blocks allocated (cumulative) */
    uint64_t purger_wakeups;  /* passes of the background purger (cumulative) */
    uint64_t invalid_frees;   /* invalid or double frees detected (cumulative) */
    uint64_t purger_cpu_ns;   /* CPU time of the background purger thread (ns) */
    uint64_t resident;        /* resident bytes of ebb's memory, as RSS counts them (measured, pagemap) */
    uint64_t metadata;        /* part of resident: segment headers, heaps, bitmaps, map */
    uint64_t huge_kept;       /* bytes of freed huge mappings kept for reuse */
    uint64_t heaps_live;      /* heaps of live threads */
    uint64_t heaps_spare;     /* heaps of exited threads kept for reuse */
    uint64_t remote_freed_blocks; /* blocks freed by other threads, not yet taken in */
    uint64_t remote_freed_bytes;  /* their bytes (part of allocated) */
} ebb_stats_t;

/* Fill *out with a snapshot (cheap enough for a monitoring loop). 0 on success. */
int ebb_stats(ebb_stats_t *out);
/* Write a snapshot as one NUL-terminated JSON object into buf (at most len bytes,
 * truncated if longer; buf may be NULL when len is 0). Returns the length the whole
 * text needs without the NUL, like snprintf: if the result is >= len, call again with
 * a buffer of result + 1 bytes. The format of EBB_SHOW_STATS=json and EBB_STATS_FILE. */
size_t ebb_stats_json(char *buf, size_t len);
/* Print statistics to stderr (what EBB_SHOW_STATS=1 prints at exit). */
void ebb_stats_print(void);
/* The retention report: the process's RSS (/proc/self/smaps) split into live blocks,
 * free memory ebb keeps and why, ebb's metadata, and memory ebb does not own (other
 * allocators' or the program's own anonymous mappings, listed largest first, stacks,
 * files). The parts add up to RSS. Print it to stderr, or as JSON like
 * ebb_stats_json. EBB_REPORT=path (%p: pid; JSON if it ends in .json) writes it at
 * exit, and EBB_REPORT_SIGNAL=USR2 also on that signal. */
void ebb_retention_print(void);
size_t ebb_retention_json(char *buf, size_t len);
/* Collect now: fold in frees from other threads, free empty pages and purge memory
 * whose purge delay has passed; with force, purge all free memory at once. */
void ebb_collect(bool force);
/* Sampling heap profiler (README "Find a leak"): start with a mean of `rate` bytes
 * between samples (0: EBB_PROFILE_RATE or 512 KiB), stop, and write what was sampled
 * as pprof's gzipped protobuf (`go tool pprof -top path`). EBB_PROFILE=prefix starts
 * it at process start and writes prefix.<pid>.pb.gz at exit. Returns 0 on success.
 * ebb_profile_dump_peak writes what was live at the peak of the sampled live bytes so
 * far (within 1/16 of it; EBB_PROFILE also writes it, as prefix.<pid>.peak.pb.gz). */
int ebb_profile_start(size_t rate);
void ebb_profile_stop(void);
int ebb_profile_dump(const char *path);
int ebb_profile_dump_peak(const char *path);
/* Options by name, with or without the EBB_ prefix, any case: "purge_delay" (ms),
 * "background", "show_stats", "show_errors", "check", "abort_on_error", "large_pages",
 * "dense_huge_pages" (0/1; "large_pages" advises only segments made after the change;
 * "background" 2 is EBB_BACKGROUND=threads).
 * ebb_option_get returns -1 for an unknown name; ebb_option_set returns 0 on success,
 * -1 for an unknown name or a value out of range. "check" is fixed when the process starts
 * (EBB_CHECK): setting it to another value returns -1. */
int64_t ebb_option_get(const char *name);
int ebb_option_set(const char *name, int64_t value);
/* The library version, e.g. "0.1.0". */
const char *ebb_version(void);

/* First-class heaps. A heap belongs to the thread that made it: only that thread
 * allocates from it, destroys or deletes it (another thread doing so aborts with a
 * message). Any thread frees its blocks with ebb_free (or free under LD_PRELOAD).
 * Blocks above 16 MiB are ordinary blocks, not part of the heap: free them yourself. */
typedef struct ebb_heap_s ebb_heap_t;
typedef struct ebb_heap_stats_s {
    uint64_t pages;        /* pages (and large-block spans) the heap holds */
    uint64_t page_bytes;   /* bytes of those pages */
    uint64_t live_blocks;  /* blocks in use (frees by other threads taken in first) */
    uint64_t live_bytes;   /* bytes of those blocks, at block size */
    uint64_t large_blocks; /* blocks above 512 KiB among them */
} ebb_heap_stats_t;
ebb_heap_t *ebb_heap_new(void);
void *ebb_heap_malloc(ebb_heap_t *heap, size_t size);
void *ebb_heap_calloc(ebb_heap_t *heap, size_t count, size_t size);
/* ptr NULL: malloc; size 0: free and return NULL; else resize within the heap. */
void *ebb_heap_realloc(ebb_heap_t *heap, void *ptr, size_t size);
/* align: a power of two (else NULL, errno EINVAL). */
void *ebb_heap_malloc_aligned(ebb_heap_t *heap, size_t align, size_t size);
/* Free every block of the heap at once (in time proportional to its pages, not its
 * blocks), and the heap. Every pointer into it becomes invalid. */
void ebb_heap_destroy(ebb_heap_t *heap);
/* Free the heap but not its blocks: they stay valid, any thread frees them. */
void ebb_heap_delete(ebb_heap_t *heap);
/* Take in frees other threads made into the heap; give its unused pages back. */
void ebb_heap_collect(ebb_heap_t *heap);
/* Fill *out with the heap's figures. 0 on success, -1 if a pointer is NULL. */
int ebb_heap_stats(ebb_heap_t *heap, ebb_heap_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* EBB_H */

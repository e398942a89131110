//! The store scenario: a C/Rust indexer over an LMDB-like store (issue 14's second
//! shape: steady churn).
//!
//! Three indexer threads turn documents into tokens (short Rust strings), add them to a
//! shared term dictionary (postings vectors that grow and get trimmed) and emit a
//! compressed buffer per document. One writer thread takes those buffers, copies each
//! into 4 KiB pages (C `malloc`, taken from a page cache it keeps forever in a free list,
//! as LMDB's `me_dpages` does) or, for a buffer over one page, into a multi-page run
//! (C `malloc`, freed at commit), and frees the buffer (a remote free: the indexers
//! made it). At commit the pages go back to the cache and the runs are freed. Two
//! reader threads copy postings and pages meanwhile. 30 batches; after each the main
//! thread samples RSS, the live bytes and the touched-page bound (every thread waits at
//! a barrier while it walks what is held).

use crate::probe::{Recorder, Rng};
use crate::touched::Pages;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

const INDEXERS: usize = 3;
const READERS: usize = 2;
const PAGE: usize = 4096;
const MAX_POSTINGS: usize = 96;

struct Term {
    name: String,
    postings: Vec<u32>,
}

/// A C allocation (the store's side of the process).
struct CMem(*mut u8);
// SAFETY: exclusively owned C memory may move between threads.
unsafe impl Send for CMem {}

fn c_alloc(size: usize) -> CMem {
    // SAFETY: plain malloc; checked below.
    let p = unsafe { libc::malloc(size) } as *mut u8;
    assert!(!p.is_null(), "malloc({size}) failed");
    CMem(p)
}

fn c_free(m: CMem) {
    // SAFETY: from c_alloc, freed once (moved in).
    unsafe { libc::free(m.0 as *mut c_void) };
}

struct Shared {
    start: Barrier,
    end: Barrier,
    dict: Vec<Mutex<Vec<Term>>>,
    mailbox: Mutex<Vec<Vec<u8>>>,
    indexers_done: Mutex<usize>,
    /// The writer's page cache (kept forever), visible to the sampler between batches.
    cache: Mutex<Vec<CMem>>,
    stop: AtomicBool,
}

const SHARDS: usize = 64;

fn term_bytes(t: &Term) -> usize {
    t.name.capacity() + t.postings.capacity() * 4
}

pub fn run(quick: bool) {
    let (batches, docs_per_batch, terms) = if quick {
        (6, 200, 2_000)
    } else {
        // `--rounds N`: N batches (a batch here takes ~25 ms, so 30 end well inside the
        // default purge delay's second period; a longer run shows the steady state).
        (crate::rounds(30), 1500, 60_000)
    };
    let rec = Arc::new(Recorder::new("store"));
    let shared = Arc::new(Shared {
        start: Barrier::new(INDEXERS + READERS + 2),
        end: Barrier::new(INDEXERS + READERS + 2),
        dict: (0..SHARDS).map(|_| Mutex::new(Vec::new())).collect(),
        mailbox: Mutex::new(Vec::new()),
        indexers_done: Mutex::new(0),
        cache: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    });
    // The dictionary's terms exist from the start, their postings at random points of
    // their grow-and-trim cycle, so the live bytes stay level from the first batch on.
    {
        let mut rng = Rng::new(99);
        for i in 0..terms {
            let n = rng.range(6, 20);
            let name: String = (0..n)
                .map(|k| (b'a' + ((i + k) % 26) as u8) as char)
                .collect();
            let postings = (0..rng.range(MAX_POSTINGS / 2, MAX_POSTINGS) as u32).collect();
            shared.dict[i % SHARDS]
                .lock()
                .unwrap()
                .push(Term { name, postings });
        }
    }
    let mut handles = Vec::new();
    for ix in 0..INDEXERS {
        let shared = Arc::clone(&shared);
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(ix as u64 + 1000);
            for batch in 0..batches {
                shared.start.wait();
                for doc in 0..docs_per_batch {
                    let ntok = rng.range(20, 80);
                    let tokens: Vec<String> = (0..ntok)
                        .map(|_| {
                            let n = rng.range(3, 40);
                            "abcdefghijklmnopqrstuvwxyz0123456789abcd"[..n].to_owned()
                        })
                        .collect();
                    for t in &tokens {
                        let id = rng.range(0, terms - 1);
                        let mut shard = shared.dict[id % SHARDS].lock().unwrap();
                        let term = &mut shard[id / SHARDS];
                        if term.postings.len() >= MAX_POSTINGS {
                            // Trim to the newest half into a fresh vector, as a merge does.
                            term.postings = term.postings[MAX_POSTINGS / 2..].to_vec();
                        }
                        term.postings
                            .push((batch * docs_per_batch + doc) as u32 + t.len() as u32);
                    }
                    // The compressed form: mostly under a page, some spanning several.
                    let len = if rng.range(0, 9) < 7 {
                        rng.range(256, PAGE)
                    } else {
                        rng.range(PAGE + 1, 48 << 10)
                    };
                    let mut buf = Vec::with_capacity(len);
                    buf.resize(len, (doc & 0xff) as u8);
                    drop(tokens);
                    shared.mailbox.lock().unwrap().push(buf);
                }
                *shared.indexers_done.lock().unwrap() += 1;
                shared.end.wait();
            }
            // Alive until the last batch is sampled, as after every other batch.
            shared.start.wait();
        }));
    }
    {
        let shared = Arc::clone(&shared);
        handles.push(thread::spawn(move || {
            for _ in 0..batches {
                shared.start.wait();
                let mut dirty: Vec<CMem> = Vec::new();
                let mut runs: Vec<CMem> = Vec::new();
                loop {
                    // Read the count before taking the mailbox: an indexer pushes its
                    // last buffer before it counts itself done.
                    let all_done = *shared.indexers_done.lock().unwrap() == INDEXERS;
                    let bufs = std::mem::take(&mut *shared.mailbox.lock().unwrap());
                    if bufs.is_empty() && all_done {
                        break;
                    }
                    if bufs.is_empty() {
                        thread::yield_now();
                        continue;
                    }
                    for buf in bufs {
                        let dst = if buf.len() <= PAGE {
                            let page = shared.cache.lock().unwrap().pop();
                            let page = page.unwrap_or_else(|| c_alloc(PAGE));
                            let p = page.0;
                            dirty.push(page);
                            p
                        } else {
                            let pages = buf.len().div_ceil(PAGE);
                            let run = c_alloc(pages * PAGE);
                            let p = run.0;
                            runs.push(run);
                            p
                        };
                        // SAFETY: dst holds at least buf.len() bytes.
                        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, buf.len()) };
                        drop(buf); // made by an indexer: a remote free
                    }
                }
                // Commit: runs go back to malloc, single pages to the forever cache.
                for r in runs {
                    c_free(r);
                }
                shared.cache.lock().unwrap().extend(dirty);
                *shared.indexers_done.lock().unwrap() = 0;
                shared.end.wait();
            }
            // Alive until the last batch is sampled, as after every other batch.
            shared.start.wait();
        }));
    }
    for r in 0..READERS {
        let shared = Arc::clone(&shared);
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(r as u64 + 7);
            for _ in 0..batches {
                shared.start.wait();
                for _ in 0..docs_per_batch * 4 {
                    let id = rng.range(0, terms - 1);
                    let copy: Vec<u32> = shared.dict[id % SHARDS].lock().unwrap()[id / SHARDS]
                        .postings
                        .clone();
                    let page = c_alloc(PAGE);
                    // SAFETY: page holds PAGE bytes.
                    unsafe { std::ptr::write_bytes(page.0, copy.len() as u8, 64) };
                    c_free(page);
                    drop(copy);
                }
                shared.end.wait();
            }
            // Alive until the last batch is sampled, as after every other batch.
            shared.start.wait();
        }));
    }
    // `SCENARIO_NO_BOUND=1` skips the touched-page walk (timing runs: it calls
    // `malloc_usable_size` on every held block, which is the sampler's cost, not the
    // workload's, and differs by allocator).
    let bound = std::env::var_os("SCENARIO_NO_BOUND").map_or(true, |v| v != "1");
    // Time spent in the batches themselves (start to end barrier), without sampling.
    let mut work = std::time::Duration::ZERO;
    for batch in 1..=batches {
        shared.start.wait();
        let batch_start = std::time::Instant::now();
        shared.end.wait();
        work += batch_start.elapsed();
        // Every other thread waits at `start` now: walk what is held.
        let mut live = 0usize;
        let mut pages = Pages::new();
        for shard in &shared.dict {
            let shard = shard.lock().unwrap();
            live += shard.capacity() * std::mem::size_of::<Term>();
            if bound {
                pages.add_vec(&shard);
            }
            for t in shard.iter() {
                live += term_bytes(t);
                if bound {
                    pages.add_block(t.name.as_ptr(), t.name.capacity());
                    pages.add_vec(&t.postings);
                }
            }
        }
        {
            let cache = shared.cache.lock().unwrap();
            live += cache.len() * PAGE + cache.capacity() * std::mem::size_of::<CMem>();
            if bound {
                pages.add_vec(&cache);
                for p in cache.iter() {
                    pages.add_block(p.0, PAGE);
                }
            }
        }
        let touched = pages.bytes();
        drop(pages);
        let t_ms = rec.elapsed_ms();
        let m = crate::probe::mem();
        rec.print_sample_bound(t_ms, "batch", batch as u64, live as u64, touched, m);
        rec.debug_stats("batch", batch as u64);
    }
    // Release the workers, which waited at `start` so that the last batch, like every
    // other, was sampled with every thread alive and waiting (before, they exited while
    // the last sample was taken, and allocators that trim at thread exit, glibc and
    // jemalloc, showed a drop at the last batch alone).
    shared.start.wait();
    shared.stop.store(true, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    rec.summary(
        quick,
        0,
        format_args!(
            ",\"batches\":{batches},\"indexers\":{INDEXERS},\"readers\":{READERS},\"terms\":{terms},\"work_ms\":{:.1}",
            work.as_secs_f64() * 1000.0
        ),
    );
}

//! The mixed-c-rust scenario (after the meilisearch report: a Rust program with a C
//! library — LMDB — in the same process, both allocating heavily).
//!
//! Eight threads, fifty rounds. Every thread keeps a ring of C buffers (malloc'ed by
//! c/cside.c) and a ring of Rust buffers, and each round it
//! 1. frees what its neighbour handed it last round (C buffers, page lists and Rust
//!    vectors: remote frees),
//! 2. replaces a quarter of both rings (interleaving C malloc/free with Rust allocations),
//! 3. allocates a transient mix — C buffers and Rust vectors alternately, 4 KiB page
//!    lists, an array grown with realloc — frees half of it and hands the other half to
//!    its neighbour.
//!
//! After each round every thread waits at a barrier and the main thread samples. Live
//! bytes are both rings plus what sits in the hand-over mailboxes.

use crate::probe::{Recorder, Rng};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

extern "C" {
    fn cs_list_build(n: usize, size: usize) -> *mut c_void;
    fn cs_list_free(list: *mut c_void) -> usize;
    fn cs_buf(n: usize, fill: c_int) -> *mut c_void;
    fn cs_free(p: *mut c_void);
    fn cs_grow(from: usize, to: usize) -> *mut c_void;
}

/// A C allocation that may be handed to another thread.
struct CBuf {
    ptr: *mut c_void,
    size: usize,
    list: bool,
}

// SAFETY: the buffer is exclusively owned; C malloc'ed memory may be freed on any thread.
unsafe impl Send for CBuf {}

impl CBuf {
    fn new(size: usize, fill: u8) -> CBuf {
        // SAFETY: cs_buf aborts on failure, returns an owned buffer.
        let ptr = unsafe { cs_buf(size, c_int::from(fill)) };
        CBuf {
            ptr,
            size,
            list: false,
        }
    }

    fn list(pages: usize) -> CBuf {
        // SAFETY: as above.
        let ptr = unsafe { cs_list_build(pages, 4096) };
        CBuf {
            ptr,
            size: pages * 4096,
            list: true,
        }
    }
}

impl Drop for CBuf {
    fn drop(&mut self) {
        // SAFETY: we own the buffer or list.
        unsafe {
            if self.list {
                cs_list_free(self.ptr);
            } else {
                cs_free(self.ptr);
            }
        }
    }
}

#[derive(Default)]
struct Mailbox {
    c: Vec<CBuf>,
    rust: Vec<Vec<u8>>,
    bytes: u64,
}

struct Config {
    threads: usize,
    rounds: usize,
    ring: usize,
    transient: u64,
}

pub fn run(quick: bool) {
    let cfg = if quick {
        Config {
            threads: 8,
            rounds: 5,
            ring: 128,
            transient: 256 << 10,
        }
    } else {
        Config {
            threads: 8,
            rounds: 50,
            ring: 2048,
            transient: 4 << 20,
        }
    };
    let cfg = Config {
        rounds: crate::rounds(cfg.rounds),
        ..cfg
    };
    let rec = Arc::new(Recorder::new("mixed-c-rust"));
    let barrier = Arc::new(Barrier::new(cfg.threads + 1));
    let mailboxes: Arc<Vec<Mutex<Mailbox>>> = Arc::new(
        (0..cfg.threads)
            .map(|_| Mutex::new(Mailbox::default()))
            .collect(),
    );
    let live: Arc<Vec<AtomicU64>> = Arc::new((0..cfg.threads).map(|_| AtomicU64::new(0)).collect());

    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let (barrier, mailboxes, live) = (barrier.clone(), mailboxes.clone(), live.clone());
        let (threads, rounds, ring, transient) = (cfg.threads, cfg.rounds, cfg.ring, cfg.transient);
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(t as u64 + 1);
            let mut c_ring: Vec<CBuf> = Vec::with_capacity(ring);
            let mut r_ring: Vec<Vec<u8>> = Vec::with_capacity(ring);
            for k in 0..ring {
                c_ring.push(CBuf::new(rng.range(64, 8192), k as u8));
                r_ring.push(vec![k as u8 | 1; rng.range(64, 8192)]);
            }
            for _round in 0..rounds {
                // 1. Free what the neighbour handed over.
                let inbox = std::mem::take(&mut *mailboxes[t].lock().unwrap());
                drop(inbox);
                // 2. Replace a quarter of both rings.
                for _ in 0..ring / 4 {
                    let k = rng.range(0, ring - 1);
                    c_ring[k] = CBuf::new(rng.range(64, 8192), k as u8);
                    let k = rng.range(0, ring - 1);
                    r_ring[k] = vec![k as u8 | 1; rng.range(64, 8192)];
                }
                // 3. Transient mix.
                let mut c_tmp: Vec<CBuf> = Vec::new();
                let mut r_tmp: Vec<Vec<u8>> = Vec::new();
                let mut bytes = 0u64;
                let mut i = 0u64;
                while bytes < transient {
                    let n = rng.range(16, 8192);
                    c_tmp.push(CBuf::new(n, i as u8));
                    let m = rng.range(16, 8192);
                    r_tmp.push(vec![i as u8 | 1; m]);
                    bytes += (n + m) as u64;
                    if i % 64 == 63 {
                        c_tmp.push(CBuf::list(16));
                        bytes += 16 * 4096;
                    }
                    i += 1;
                }
                // SAFETY: cs_grow returns an owned buffer.
                let grown = unsafe { cs_grow(1024, 256 << 10) };
                let mut out = Mailbox::default();
                for (k, c) in c_tmp.into_iter().enumerate() {
                    if k % 2 == 1 {
                        out.bytes += c.size as u64;
                        out.c.push(c);
                    }
                }
                for (k, r) in r_tmp.into_iter().enumerate() {
                    if k % 2 == 0 {
                        out.bytes += r.capacity() as u64;
                        out.rust.push(r);
                    }
                }
                // SAFETY: ours, from cs_grow.
                unsafe { cs_free(grown) };
                {
                    // Append: the neighbour may already have started this round and
                    // emptied its box, then it frees this at the start of the next one.
                    let mut next = mailboxes[(t + 1) % threads].lock().unwrap();
                    next.bytes += out.bytes;
                    next.c.append(&mut out.c);
                    next.rust.append(&mut out.rust);
                }
                let ring_bytes = c_ring.iter().map(|c| c.size as u64).sum::<u64>()
                    + r_ring.iter().map(|r| r.capacity() as u64).sum::<u64>();
                live[t].store(ring_bytes, Ordering::SeqCst);
                barrier.wait(); // round done
                barrier.wait(); // main has sampled
            }
        }));
    }
    let mut total_live = 0;
    for round in 1..=cfg.rounds {
        barrier.wait();
        // Every worker waits at the barrier: rings and mailboxes are stable.
        total_live = live.iter().map(|l| l.load(Ordering::SeqCst)).sum::<u64>()
            + mailboxes
                .iter()
                .map(|m| m.lock().unwrap().bytes)
                .sum::<u64>();
        rec.sample("round", round as u64, total_live);
        barrier.wait();
    }
    for h in handles {
        h.join().unwrap();
    }
    rec.summary(
        quick,
        total_live,
        format_args!(",\"threads\":{},\"rounds\":{}", cfg.threads, cfg.rounds),
    );
}

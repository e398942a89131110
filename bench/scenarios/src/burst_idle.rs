//! The burst-idle scenario: a burst of allocation, most of it freed, then silence.
//!
//! Four threads each allocate a quarter of 1 GiB in blocks of 16 B..1 KiB: first their
//! long-lived 10% ("cache"), then the 90% burst, in two halves. Each thread then frees
//! the first half of its own burst and the second half of its neighbour's (so half of
//! the frees are remote frees into pages of a thread that is about to go to sleep), and
//! parks — no thread exits, and nothing calls the allocator any more. The survivors were
//! allocated before the burst, so they are clustered: this measures whether freed
//! memory goes back to the OS while the process is idle, not fragmentation.
//!
//! The main thread samples at 0, 0.1, 0.5, 1, 2, 5 and 10 s after the last free without
//! allocating (fixed buffers, raw read/write system calls, no formatting into Strings).

use crate::probe::{self, Recorder, Rng};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

type Blocks = Vec<Box<[u8]>>;

struct Shared {
    barrier: Barrier,
    slots: Vec<Mutex<Option<Blocks>>>,
    done: AtomicUsize,
    last_free_ns: AtomicU64,
    keep_bytes: AtomicU64,
    stop: AtomicBool,
}

fn alloc_blocks(rng: &mut Rng, total: u64) -> (Blocks, u64) {
    let mut v = Vec::new();
    let mut sum = 0u64;
    while sum < total {
        let n = rng.range(16, 1024);
        let mut b = vec![0u8; n].into_boxed_slice();
        b[0] = 1;
        b[n - 1] = 2;
        sum += n as u64;
        v.push(b);
    }
    let bytes = sum + (v.capacity() * std::mem::size_of::<Box<[u8]>>()) as u64;
    (v, bytes)
}

const THREADS: usize = 4;
const FULL_SAMPLES_MS: &[u64] = &[0, 100, 500, 1000, 2000, 5000, 10000];
const QUICK_SAMPLES_MS: &[u64] = &[0, 100, 500];

pub fn run(quick: bool) {
    let (total, sample_ms): (u64, &[u64]) = if quick {
        (16 << 20, QUICK_SAMPLES_MS)
    } else {
        (1 << 30, FULL_SAMPLES_MS)
    };
    let per_thread = total / THREADS as u64;
    let keep = per_thread / 10;
    let burst_half = (per_thread - keep) / 2;
    let rec = Arc::new(Recorder::new("burst-idle"));
    let shared = Arc::new(Shared {
        barrier: Barrier::new(THREADS + 1),
        slots: (0..THREADS).map(|_| Mutex::new(None)).collect(),
        done: AtomicUsize::new(0),
        last_free_ns: AtomicU64::new(0),
        keep_bytes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });

    let mut handles = Vec::with_capacity(THREADS);
    for i in 0..THREADS {
        let shared = Arc::clone(&shared);
        let rec = Arc::clone(&rec);
        handles.push(thread::spawn(move || {
            let me = thread::current();
            let mut rng = Rng::new(i as u64 + 77);
            let (cache, cache_bytes) = alloc_blocks(&mut rng, keep);
            let (mine, _) = alloc_blocks(&mut rng, burst_half);
            let (theirs, _) = alloc_blocks(&mut rng, burst_half);
            shared.keep_bytes.fetch_add(cache_bytes, Ordering::SeqCst);
            *shared.slots[i].lock().unwrap() = Some(theirs);
            shared.barrier.wait(); // everything allocated
            shared.barrier.wait(); // main has sampled
            let neighbour = shared.slots[(i + 1) % THREADS].lock().unwrap().take();
            drop(mine);
            drop(neighbour);
            let t = rec.start.elapsed().as_nanos() as u64;
            shared.last_free_ns.fetch_max(t, Ordering::SeqCst);
            shared.done.fetch_add(1, Ordering::SeqCst);
            // Park for good: no exit, no allocator calls.
            while !shared.stop.load(Ordering::SeqCst) {
                thread::park();
            }
            drop(me);
            drop(cache);
        }));
    }

    shared.barrier.wait();
    rec.sample("allocated", 0, total);
    shared.barrier.wait();
    // From here on this thread must not allocate.
    while shared.done.load(Ordering::SeqCst) < THREADS {
        thread::sleep(Duration::from_micros(100));
    }
    let last_free_ns = shared.last_free_ns.load(Ordering::SeqCst);
    let live = shared.keep_bytes.load(Ordering::SeqCst);
    for &ms in sample_ms {
        let due_ns = last_free_ns + ms * 1_000_000;
        let now_ns = rec.start.elapsed().as_nanos() as u64;
        if due_ns > now_ns {
            thread::sleep(Duration::from_nanos(due_ns - now_ns));
        }
        let t_ms = rec.elapsed_ms();
        let m = probe::mem();
        rec.print_sample(t_ms, "idle", ms, live, m);
    }
    rec.summary(
        quick,
        live,
        format_args!(
            ",\"threads\":{THREADS},\"total_bytes\":{total},\"last_free_ms\":{:.1}",
            last_free_ns as f64 / 1e6
        ),
    );
    // The parked threads hold their caches until the process exits.
    std::process::exit(0);
}

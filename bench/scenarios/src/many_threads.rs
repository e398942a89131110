//! The many-threads scenario: a thousand threads that each hold a few small blocks, then
//! idle (issue 14's fourth shape: what a thread that allocates a little costs).
//!
//! Each thread allocates 50 blocks of 16 B-2 KiB (log-uniform by default), collects the OS pages they touch
//! (the touched-page bound), reports in, and waits without calling the allocator. The
//! main thread samples RSS before the first thread starts (the baseline), once every
//! thread holds its blocks, and 1, 2 and 3 s later; the report divides RSS above the
//! baseline by the thread count. Stacks are 64 KiB (the same under every allocator):
//! what a thread's stack costs is the kernel's and the C library's, not the allocator's.

use crate::probe::{self, Recorder, Rng};
use crate::touched::Pages;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const BLOCKS: usize = 50;
/// `MANY_THREADS_BLOCKS=N` (at most 50) makes each thread hold N blocks instead: with 0,
/// what a thread costs that allocates nothing of its own (its stack, its heap metadata
/// and whatever the thread library allocates for it).
fn blocks_per_thread() -> usize {
    std::env::var("MANY_THREADS_BLOCKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(BLOCKS, |n: usize| n.min(BLOCKS))
}
/// How a block's size is drawn from 16 B..2 KiB: `MANY_THREADS_SIZES=uniform` (uniform
/// bytes, 51.5 KB live per thread, the scenario's first form) or `log` (the default:
/// log-uniform, every power-of-two band equally likely, ~21 KB live per thread; see
/// docs/MEMORY.md "many-threads: the shape" for why).
fn log_uniform_sizes() -> bool {
    std::env::var("MANY_THREADS_SIZES").map_or(true, |v| v != "uniform")
}

/// A size in 16..=2048 bytes whose base-2 logarithm is uniform in 4..=11.
fn log_uniform_size(rng: &mut Rng) -> usize {
    // 7 octaves, each split in 1024 steps: 2^(4 + k/1024) for k uniform in 0..=7168.
    let k = rng.range(0, 7 * 1024) as f64 / 1024.0;
    ((2f64.powf(4.0 + k)).round() as usize).clamp(16, 2048)
}

const FULL_SAMPLES_MS: &[u64] = &[0, 1000, 2000, 3000];
const QUICK_SAMPLES_MS: &[u64] = &[0, 100];

pub fn run(quick: bool) {
    let (threads, sample_ms): (usize, &[u64]) = if quick {
        (50, QUICK_SAMPLES_MS)
    } else {
        (1000, FULL_SAMPLES_MS)
    };
    let per_thread_blocks = blocks_per_thread();
    let log_sizes = log_uniform_sizes();
    let rec = Arc::new(Recorder::new("many-threads"));
    let ready = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let pages = Arc::new(Mutex::new(Pages::new()));
    let live = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::with_capacity(threads);
    // The main thread's own allocations (the handle vector above) come before the
    // baseline.
    let base = rec.sample("baseline", 0, 0);
    for i in 0..threads {
        let (ready, stop, pages, live) = (
            Arc::clone(&ready),
            Arc::clone(&stop),
            Arc::clone(&pages),
            Arc::clone(&live),
        );
        let h = thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let mut rng = Rng::new(i as u64 + 1);
                let mut blocks: [Option<Box<[u8]>>; BLOCKS] = [const { None }; BLOCKS];
                let mut bytes = 0;
                for b in blocks.iter_mut().take(per_thread_blocks) {
                    let n = if log_sizes {
                        log_uniform_size(&mut rng)
                    } else {
                        rng.range(16, 2048)
                    };
                    let mut v = vec![0u8; n].into_boxed_slice();
                    v[n - 1] = 1;
                    bytes += n;
                    *b = Some(v);
                }
                let mut mine = Pages::new();
                for b in blocks.iter().flatten() {
                    mine.add_block(b.as_ptr(), b.len());
                }
                mine.bytes();
                pages.lock().unwrap().merge(mine);
                live.fetch_add(bytes, Ordering::SeqCst);
                ready.fetch_add(1, Ordering::SeqCst);
                while !stop.load(Ordering::SeqCst) {
                    thread::park();
                }
                drop(blocks);
            })
            .expect("spawn");
        handles.push(h);
    }
    while ready.load(Ordering::SeqCst) < threads {
        thread::sleep(Duration::from_millis(1));
    }
    let live = live.load(Ordering::SeqCst) as u64;
    let start_ms = rec.elapsed_ms();
    let mut readings = [(0.0f64, probe::Mem::default()); 8];
    for (n, &ms) in sample_ms.iter().enumerate() {
        let due = start_ms + ms as f64;
        let now = rec.elapsed_ms();
        if due > now {
            thread::sleep(Duration::from_micros(((due - now) * 1000.0) as u64));
        }
        readings[n] = (rec.elapsed_ms(), probe::mem());
        rec.debug_stats("idle", ms);
    }
    let touched = pages.lock().unwrap().bytes();
    for (n, &ms) in sample_ms.iter().enumerate() {
        let (t_ms, m) = readings[n];
        rec.print_sample_bound(t_ms, "idle", ms, live, touched, m);
    }
    let (_, last) = readings[sample_ms.len() - 1];
    let per_thread = |rss: u64| rss.saturating_sub(base.rss) / threads as u64;
    rec.summary(
        quick,
        live,
        format_args!(
            ",\"threads\":{threads},\"baseline_rss\":{},\"touched_bytes\":{touched},\
             \"live_rss_per_thread\":{},\"idle_rss_per_thread\":{}",
            base.rss,
            per_thread(readings[0].1.rss),
            per_thread(last.rss)
        ),
    );
    stop.store(true, Ordering::SeqCst);
    for h in handles {
        h.thread().unpark();
        let _ = h.join();
    }
}

//! The built-in workload (`ebb workload`), run by `ebb compare` when no command is
//! given. It uses the system allocator (Rust's default), so `LD_PRELOAD` decides which
//! allocator serves it. It reproduces the patterns of the users' reports:
//!
//! 1. `pool`: a dispatcher hands batches of objects to a pool of workers, which free
//!    them (cross-thread frees) and send back results the dispatcher frees; three
//!    phases keep small, large, then medium windows of results alive.
//! 2. `refresh`: an owner thread builds a cache and goes to sleep; a refresher thread
//!    replaces all its entries twice (freeing the sleeping owner's blocks), then
//!    shrinks the cache to an eighth. The owner sleeps on until the process ends.
//! 3. `burst`: two threads allocate and touch 96 MiB each in 4..64 KiB blocks and free
//!    them.
//!
//! Then it prints `ebb-workload: idle` (the ready line `ebb compare` waits for) and
//! sleeps: memory the allocator still holds now is what the idle marks measure.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub const READY_LINE: &str = "^ebb-workload: idle";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic, so every allocator gets the same sequence.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }
}

fn block(rng: &mut Rng, lo: usize, hi: usize) -> Box<[u8]> {
    let len = rng.range(lo, hi);
    let mut b = vec![0u8; len].into_boxed_slice();
    // Touch every page, and write something the reader checks.
    for i in (0..len).step_by(4096) {
        b[i] = (i as u8) | 1;
    }
    b
}

fn pool(scale: usize) {
    let workers = 4;
    let (result_tx, result_rx) = mpsc::channel::<Vec<Box<[u8]>>>();
    let mut job_txs = Vec::new();
    let mut handles = Vec::new();
    for w in 0..workers {
        let (job_tx, job_rx) = mpsc::channel::<Vec<Box<[u8]>>>();
        let result_tx = result_tx.clone();
        job_txs.push(job_tx);
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0x9e37_79b9 + w as u64);
            for job in job_rx {
                let sum: usize = job.iter().map(|b| b[0] as usize + b.len()).sum();
                drop(job); // the dispatcher's blocks, freed on this thread
                let n = 8 + sum % 24;
                let result: Vec<Box<[u8]>> = (0..n).map(|_| block(&mut rng, 64, 4096)).collect();
                if result_tx.send(result).is_err() {
                    break;
                }
            }
        }));
    }
    drop(result_tx);
    let mut rng = Rng(42);
    for window in [200 * scale, 3000 * scale, 1000 * scale] {
        let mut kept: VecDeque<Vec<Box<[u8]>>> = VecDeque::new();
        let jobs = 6000 * scale;
        let mut in_flight = 0;
        for j in 0..jobs {
            let job: Vec<Box<[u8]>> = (0..rng.range(4, 40))
                .map(|_| block(&mut rng, 16, 2048))
                .collect();
            if job_txs[j % workers].send(job).is_err() {
                return;
            }
            in_flight += 1;
            while in_flight > 4 * workers {
                let Ok(result) = result_rx.recv() else { return };
                in_flight -= 1;
                kept.push_back(result);
                if kept.len() > window {
                    kept.pop_front(); // a worker's blocks, freed here
                }
            }
        }
        for _ in 0..in_flight {
            let _ = result_rx.recv();
        }
    }
    drop(job_txs);
    for h in handles {
        let _ = h.join();
    }
}

/// Returns the owner thread's handle: it sleeps until the process ends.
fn refresh(scale: usize) -> std::thread::JoinHandle<()> {
    type Cache = Arc<Mutex<Vec<Box<[u8]>>>>;
    let cache: Cache = Arc::new(Mutex::new(Vec::new()));
    let (built_tx, built_rx) = mpsc::channel();
    let owner_cache = cache.clone();
    let owner = std::thread::spawn(move || {
        let mut rng = Rng(7);
        let entries: Vec<Box<[u8]>> = (0..60_000 * scale)
            .map(|_| block(&mut rng, 64, 1024))
            .collect();
        *owner_cache.lock().unwrap() = entries;
        let _ = built_tx.send(());
        // The owner goes to sleep holding no lock, as a thread waiting for requests does.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    });
    let _ = built_rx.recv();
    let refresher = std::thread::spawn(move || {
        let mut rng = Rng(11);
        for _round in 0..2 {
            let len = cache.lock().unwrap().len();
            for i in 0..len {
                let fresh = block(&mut rng, 64, 1024);
                let mut entries = cache.lock().unwrap();
                entries[i] = fresh; // frees the previous owner's block
            }
        }
        let mut entries = cache.lock().unwrap();
        let keep = entries.len() / 8;
        entries.truncate(keep);
        entries.shrink_to_fit();
    });
    let _ = refresher.join();
    owner
}

fn burst(scale: usize) {
    let per_thread = 96usize << 20;
    let threads: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let mut rng = Rng(100 + t);
                let mut held = Vec::new();
                let mut total = 0;
                while total < per_thread * scale / 2 {
                    let b = block(&mut rng, 4096, 65536);
                    total += b.len();
                    held.push(b);
                }
                std::thread::sleep(Duration::from_millis(200));
                drop(held);
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

static TERMINATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sigterm(_: libc::c_int) {
    TERMINATED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Runs the workload, prints the ready line, then sleeps for `idle` or until SIGTERM,
/// and returns: the process then exits normally, so an allocator's exit hooks run (ebb
/// writes its `EBB_STATS_FILE` then).
pub fn run(quick: bool, idle: Duration) {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGTERM, on_sigterm as *const () as libc::sighandler_t);
    }
    let scale = if quick { 1 } else { 2 };
    let start = Instant::now();
    println!("ebb-workload: phase pool");
    pool(scale);
    println!(
        "ebb-workload: phase refresh ({:.2} s)",
        start.elapsed().as_secs_f64()
    );
    let _owner = refresh(scale);
    println!(
        "ebb-workload: phase burst ({:.2} s)",
        start.elapsed().as_secs_f64()
    );
    burst(scale);
    println!(
        "ebb-workload: idle ({:.2} s of work)",
        start.elapsed().as_secs_f64()
    );
    let end = Instant::now() + idle;
    while Instant::now() < end && !TERMINATED.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
}

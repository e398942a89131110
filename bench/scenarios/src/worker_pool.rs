//! The worker-pool scenario (after the dev-server report: a bundler in a long-running
//! process, with a thread pool, phased allocation, wide size-class coverage, sparse
//! long-lived survivors and many builds per process).
//!
//! Four pool threads; ten builds. Build `b` runs
//! 1. tokens (16..64 B) on thread `b % 4`,
//! 2. on thread `(b+1) % 4`: keeps every 20th token, frees the rest (remote frees),
//!    then allocates nodes (256 B..4 KiB),
//! 3. on thread `(b+2) % 4`: keeps every 20th node, frees the rest, then allocates
//!    chunks (64 KiB..1 MiB),
//! 4. on thread `(b+3) % 4`: keeps every 20th chunk, frees the rest, and frees the
//!    survivors of the previous build (this build's 5% replace them).
//!
//! Then every thread waits for work (idle, blocked in `recv`) for one second — the same
//! pause for every allocator — and the main thread samples RSS. Live bytes are the
//! survivors held across builds.

use crate::probe::{Recorder, Rng};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;
type Blocks = Vec<Box<[u8]>>;

struct Config {
    builds: usize,
    tokens: u64,
    nodes: u64,
    chunks: u64,
    pause: Duration,
}

/// Allocate blocks of `lo..=hi` bytes until `total` bytes; touch each one.
fn alloc_blocks(rng: &mut Rng, total: u64, lo: usize, hi: usize) -> Blocks {
    let mut v = Vec::new();
    let mut sum = 0u64;
    while sum < total {
        let n = rng.range(lo, hi);
        let mut b = vec![0u8; n].into_boxed_slice();
        // Write every 4 KiB and both ends, so the memory is really used.
        let mut k = 0;
        while k < n {
            b[k] = k as u8 ^ 0x5a;
            k += 4096;
        }
        b[n - 1] = 1;
        sum += n as u64;
        v.push(b);
    }
    v
}

/// Keep every 20th block (a sparse 5%), free the rest.
fn keep_sparse(blocks: Blocks) -> Blocks {
    blocks
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 20 == 0)
        .map(|(_, b)| b)
        .collect()
}

fn bytes_of(blocks: &Blocks) -> u64 {
    blocks.iter().map(|b| b.len() as u64).sum::<u64>()
        + (blocks.capacity() * std::mem::size_of::<Box<[u8]>>()) as u64
}

pub fn run(quick: bool) {
    let cfg = if quick {
        Config {
            builds: 3,
            tokens: 1 << 20,
            nodes: 2 << 20,
            chunks: 4 << 20,
            pause: Duration::from_millis(50),
        }
    } else {
        Config {
            builds: 10,
            tokens: 32 << 20,
            nodes: 64 << 20,
            chunks: 128 << 20,
            pause: Duration::from_secs(1),
        }
    };
    let cfg = Config {
        builds: crate::rounds(cfg.builds),
        ..cfg
    };
    let rec = Recorder::new("worker-pool");

    // The pool: each thread runs the jobs sent to it.
    let mut senders: Vec<mpsc::Sender<Job>> = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..4 {
        let (tx, rx) = mpsc::channel::<Job>();
        senders.push(tx);
        handles.push(thread::spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
        }));
    }
    // Run `f` on pool thread `t` and wait for its result.
    let run_on = |t: usize, f: Box<dyn FnOnce() -> Box<dyn std::any::Any + Send> + Send>| {
        let (tx, rx) = mpsc::channel();
        senders[t % 4]
            .send(Box::new(move || {
                let _ = tx.send(f());
            }))
            .unwrap();
        rx.recv().unwrap()
    };

    let mut survivors: Vec<Blocks> = Vec::new();
    let mut live = 0u64;
    let mut checksum = 0u64;
    for b in 1..=cfg.builds {
        let seed = b as u64 * 1000;
        let (tokens_total, nodes_total, chunks_total) = (cfg.tokens, cfg.nodes, cfg.chunks);

        // Phase 1: tokens.
        let tokens: Blocks = *run_on(
            b,
            Box::new(move || {
                let mut rng = Rng::new(seed + 1);
                Box::new(alloc_blocks(&mut rng, tokens_total, 16, 64))
            }),
        )
        .downcast()
        .unwrap();
        // Phase 2: consume tokens, make nodes.
        let (kept_tokens, nodes): (Blocks, Blocks) = *run_on(
            b + 1,
            Box::new(move || {
                let kept = keep_sparse(tokens);
                let mut rng = Rng::new(seed + 2);
                Box::new((kept, alloc_blocks(&mut rng, nodes_total, 256, 4096)))
            }),
        )
        .downcast()
        .unwrap();
        // Phase 3: consume nodes, make chunks.
        let (kept_nodes, chunks): (Blocks, Blocks) = *run_on(
            b + 2,
            Box::new(move || {
                let kept = keep_sparse(nodes);
                let mut rng = Rng::new(seed + 3);
                Box::new((
                    kept,
                    alloc_blocks(&mut rng, chunks_total, 64 << 10, 1 << 20),
                ))
            }),
        )
        .downcast()
        .unwrap();
        // Phase 4: consume chunks; this build's survivors replace the previous build's.
        let previous = std::mem::take(&mut survivors);
        let (new_survivors, sum): (Vec<Blocks>, u64) = *run_on(
            b + 3,
            Box::new(move || {
                drop(previous);
                let kept_chunks = keep_sparse(chunks);
                let all = vec![kept_tokens, kept_nodes, kept_chunks];
                let sum = all.iter().flatten().map(|blk| blk[0] as u64).sum::<u64>();
                Box::new((all, sum))
            }),
        )
        .downcast()
        .unwrap();
        survivors = new_survivors;
        checksum = checksum.wrapping_add(sum);
        live = survivors.iter().map(bytes_of).sum::<u64>()
            + (survivors.capacity() * std::mem::size_of::<Blocks>()) as u64;

        // Everybody idle for the pause, then sample.
        thread::sleep(cfg.pause);
        rec.sample("build", b as u64, live);
    }
    drop(senders);
    for h in handles {
        h.join().unwrap();
    }
    rec.summary(
        quick,
        live,
        format_args!(
            ",\"builds\":{},\"pause_ms\":{},\"checksum\":{checksum}",
            cfg.builds,
            cfg.pause.as_millis()
        ),
    );
}

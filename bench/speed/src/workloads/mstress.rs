//! mstress: thread churn (after mimalloc-bench's mstress). Each round starts worker
//! threads that take over a share of a global set of objects allocated by the previous
//! round's (now exited) threads: they free some, allocate new ones, and grow others by
//! pushing onto them (`realloc`), then exit. Objects outlive the threads that made them.

use crate::util::{cores, mix, scaled, Rng};
use crate::workloads::Outcome;

const OBJECTS_PER_THREAD: usize = 2000;

fn make(rng: &mut Rng) -> Vec<u32> {
    // Mostly small, sometimes large (up to 64 KiB), built by pushing: Vec growth.
    let n = if rng.below(100) == 0 {
        rng.range(1024, 16 * 1024)
    } else {
        rng.range(2, 64)
    };
    let mut v = Vec::new();
    for i in 0..n {
        v.push(i as u32);
    }
    v
}

pub fn run(scale: f64) -> Outcome {
    let threads = cores() * 2;
    let rounds = scaled(100, scale, 2);
    let ops = 8000;
    let mut chunks: Vec<Vec<Vec<u32>>> = (0..threads).map(|_| Vec::new()).collect();
    let mut h = 0u64;
    for round in 0..rounds {
        let handles: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(t, mut objs)| {
                std::thread::spawn(move || {
                    let mut rng = Rng::new((round * 64 + t) as u64);
                    let mut transient: Vec<Vec<u32>> = Vec::new();
                    while objs.len() < OBJECTS_PER_THREAD {
                        objs.push(make(&mut rng));
                    }
                    for _ in 0..ops {
                        let i = rng.below(objs.len());
                        match rng.below(8) {
                            // Grow an object (maybe made by a thread that has exited).
                            0..=2 => {
                                let extra = rng.range(1, 48);
                                let o = &mut objs[i];
                                if o.len() < 64 * 1024 {
                                    for k in 0..extra {
                                        o.push(k as u32);
                                    }
                                } else {
                                    o.truncate(16);
                                    o.shrink_to_fit();
                                }
                            }
                            // Replace it.
                            3..=5 => objs[i] = make(&mut rng),
                            // Short-lived objects.
                            _ => {
                                transient.push(make(&mut rng));
                                if transient.len() > 64 {
                                    transient.clear();
                                }
                            }
                        }
                    }
                    objs
                })
            })
            .collect();
        chunks = handles.into_iter().map(|j| j.join().unwrap()).collect();
        // The next round's threads get other threads' objects.
        chunks.rotate_left(1);
        // Free a random quarter of the objects from the main thread.
        let mut rng = Rng::new(round as u64 + 7);
        for c in &mut chunks {
            let n = c.len() / 4;
            for _ in 0..n {
                let i = rng.below(c.len());
                let v = c.swap_remove(i);
                h = mix(h, v.len() as u64);
            }
        }
    }
    for c in &chunks {
        for o in c {
            h = mix(h, o.len() as u64 + o.last().copied().unwrap_or(0) as u64);
        }
    }
    Outcome::new(h, threads)
}

//! prodcons: one thread allocates, another frees. The producer builds messages (boxed
//! byte buffers of 16..512 B and small `String`s) and sends them in batches through a
//! bounded channel; the consumer reads and drops them. Every free is a free of memory
//! allocated by the other thread. Two producer/consumer pairs run at once.

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::sync::mpsc;

const BATCH: usize = 64;

enum Msg {
    Bytes(Box<[u8]>),
    Text(String),
}

pub fn run(scale: f64) -> Outcome {
    let batches = scaled(40_000, scale, 10);
    let pairs = 2;
    let mut handles = Vec::new();
    for p in 0..pairs {
        let (tx, rx) = mpsc::sync_channel::<Vec<Msg>>(64);
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(200 + p as u64);
            for _ in 0..batches {
                let mut batch = Vec::with_capacity(BATCH);
                for _ in 0..BATCH {
                    if rng.below(4) == 0 {
                        let n = rng.range(1, 6);
                        let mut s = String::with_capacity(8);
                        for _ in 0..n {
                            s.push_str("word ");
                        }
                        batch.push(Msg::Text(s));
                    } else {
                        let size = rng.range(16, 512);
                        let mut b = vec![0u8; size].into_boxed_slice();
                        b[0] = size as u8;
                        batch.push(Msg::Bytes(b));
                    }
                }
                tx.send(batch).unwrap();
            }
            0u64
        }));
        handles.push(std::thread::spawn(move || {
            let mut h = 0u64;
            for batch in rx {
                for m in batch {
                    h = h.wrapping_add(match m {
                        Msg::Bytes(b) => b.len() as u64 + b[0] as u64,
                        Msg::Text(s) => s.len() as u64,
                    });
                }
            }
            h
        }));
    }
    let h = handles
        .into_iter()
        .fold(0u64, |h, j| h.wrapping_add(j.join().unwrap()));
    Outcome::new(mix(0, h), pairs * 2)
}

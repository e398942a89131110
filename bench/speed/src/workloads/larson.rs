//! larson: server-style cross-thread traffic (after Larson and Krishnan's benchmark).
//! Threads in a ring each hold an array of slots of random sizes 8..1000 B; in every
//! round a thread replaces random slots (free one, allocate another) and then hands a
//! batch of its objects to the next thread, which frees them, while it receives and
//! frees the previous thread's. Most frees are of objects another thread allocated.

use crate::util::{cores, mix, scaled, Rng};
use crate::workloads::Outcome;
use std::sync::mpsc;

const SLOTS: usize = 4000;
const HANDOFF: usize = 1000;

pub fn run(scale: f64) -> Outcome {
    let threads = cores() * 2;
    let rounds = scaled(400, scale, 2);
    let ops_per_round = 2000;
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..threads)
        .map(|_| mpsc::sync_channel::<Vec<Box<[u8]>>>(2))
        .unzip();
    let mut handles = Vec::new();
    for (t, rx) in receivers.into_iter().enumerate() {
        let tx = senders[(t + 1) % threads].clone();
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng::new(100 + t as u64);
            let alloc = |rng: &mut Rng| -> Box<[u8]> {
                let size = rng.range(8, 1000);
                let mut b = vec![0u8; size].into_boxed_slice();
                b[size - 1] = size as u8;
                b
            };
            let mut slots: Vec<Box<[u8]>> = (0..SLOTS).map(|_| alloc(&mut rng)).collect();
            let mut h = 0u64;
            for _ in 0..rounds {
                for _ in 0..ops_per_round {
                    let i = rng.below(SLOTS);
                    slots[i] = alloc(&mut rng);
                }
                // Hand the first HANDOFF objects (a contiguous run: rotate afterwards)
                // to the next thread and refill the slots.
                let batch: Vec<Box<[u8]>> = slots.drain(..HANDOFF).collect();
                slots.extend((0..HANDOFF).map(|_| alloc(&mut rng)));
                tx.send(batch).unwrap();
                let received = rx.recv().unwrap();
                for b in &received {
                    h = h.wrapping_add(b.len() as u64 + b[b.len() - 1] as u64);
                }
                drop(received);
            }
            for b in &slots {
                h = h.wrapping_add(b.len() as u64);
            }
            h
        }));
    }
    drop(senders);
    let h = handles
        .into_iter()
        .fold(0u64, |h, j| h.wrapping_add(j.join().unwrap()));
    Outcome::new(mix(0, h), threads)
}

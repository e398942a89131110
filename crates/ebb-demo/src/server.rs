//! Phase 2, a message-passing server: threads in a ring each build batches of
//! random-size (8..1000 B) objects, send them to the next thread over a channel and
//! consume what the previous thread sent. Consumed objects are freed by a thread other
//! than the one that allocated them; a quarter of them are kept for a while in a
//! per-thread cache (like sessions or a response cache) and freed later when evicted.

use crate::util::Rng;
use std::sync::mpsc;

pub struct Config {
    pub threads: usize,
    pub rounds: usize,
    pub batch: usize,
    pub cache_slots: usize,
}

#[derive(Default)]
pub struct Report {
    pub messages: u64,
    pub bytes: u64,
    pub checksum: u64,
}

type Batch = Vec<Vec<u8>>;

pub fn run(cfg: &Config) -> Report {
    let n = cfg.threads;
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel::<Batch>();
        senders.push(tx);
        receivers.push(Some(rx));
    }
    let reports: Vec<Report> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|t| {
                // Thread t sends to t+1 and receives from t-1.
                let tx = senders[(t + 1) % n].clone();
                let rx = receivers[t].take().unwrap();
                s.spawn(move || worker(t, tx, rx, cfg))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Report::default();
    for r in reports {
        total.messages += r.messages;
        total.bytes += r.bytes;
        total.checksum = total.checksum.wrapping_add(r.checksum);
    }
    total
}

fn worker(t: usize, tx: mpsc::Sender<Batch>, rx: mpsc::Receiver<Batch>, cfg: &Config) -> Report {
    let mut rng = Rng::new(0x5e4e_0000 + t as u64);
    let mut report = Report::default();
    let mut cache: Vec<Option<Vec<u8>>> = (0..cfg.cache_slots).map(|_| None).collect();
    for round in 0..cfg.rounds {
        // Produce a batch of requests.
        let mut batch: Batch = Vec::with_capacity(cfg.batch);
        for i in 0..cfg.batch {
            let len = rng.range(8, 1001);
            let mut msg = vec![(round + i) as u8; len];
            msg[0] = t as u8;
            msg[len - 1] = i as u8;
            report.bytes += len as u64;
            batch.push(msg);
        }
        tx.send(batch).expect("ring broken");
        // Consume the previous thread's batch: every object is freed here, by a thread
        // that did not allocate it, now or when evicted from the cache.
        let incoming = rx.recv().expect("ring broken");
        for msg in incoming {
            report.messages += 1;
            report.checksum = report
                .checksum
                .wrapping_mul(31)
                .wrapping_add(msg.len() as u64 ^ msg[0] as u64 ^ msg[msg.len() - 1] as u64);
            if rng.chance(25) {
                let slot = rng.below(cache.len() as u64) as usize;
                cache[slot] = Some(msg);
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_message_is_received() {
        let cfg = super::Config {
            threads: 3,
            rounds: 50,
            batch: 16,
            cache_slots: 32,
        };
        assert_eq!(super::run(&cfg).messages, 3 * 50 * 16);
    }
}

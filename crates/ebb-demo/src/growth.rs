//! Phase 3, growth: threads grow buffers by pushing, so the allocator sees reallocs
//! through every size range. Each thread first builds rounds of byte buffers grown in
//! random chunks to random sizes (up to 1 MiB: small, medium and large blocks), then
//! pushes into one `Vec<u64>` until it reaches its share of the total (huge blocks).

use crate::util::Rng;

pub struct Config {
    pub threads: usize,
    /// Final size of all the big vectors together, in bytes.
    pub total_bytes: usize,
    pub buffer_rounds: usize,
    pub buffers_per_round: usize,
}

#[derive(Default)]
pub struct Report {
    pub bytes_grown: u64,
    pub checksum: u64,
}

pub fn run(cfg: &Config) -> Report {
    let reports: Vec<Report> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| s.spawn(move || worker(t, cfg)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total = Report::default();
    for r in reports {
        total.bytes_grown += r.bytes_grown;
        total.checksum = total.checksum.wrapping_add(r.checksum);
    }
    total
}

fn worker(t: usize, cfg: &Config) -> Report {
    let mut rng = Rng::new(0x6407_0000 + t as u64);
    let mut report = Report::default();
    let chunk = [t as u8; 4096];
    for _ in 0..cfg.buffer_rounds {
        let mut buffers: Vec<Vec<u8>> = Vec::new();
        for _ in 0..cfg.buffers_per_round {
            // Log-uniform target size: mostly small buffers, some up to 1 MiB.
            let target = 16usize << rng.below(17);
            let target = rng.range(target / 2, target + 1);
            let mut b = Vec::new();
            while b.len() < target {
                let n = rng.range(1, 4097).min(target - b.len());
                b.extend_from_slice(&chunk[..n]);
            }
            report.bytes_grown += b.len() as u64;
            buffers.push(b);
        }
        report.checksum = report
            .checksum
            .wrapping_add(buffers.iter().map(|b| b.len() as u64).sum::<u64>());
    }
    let words = cfg.total_bytes / cfg.threads / 8;
    let mut big: Vec<u64> = Vec::new();
    for i in 0..words as u64 {
        big.push(i ^ t as u64);
    }
    report.bytes_grown += (big.len() * 8) as u64;
    report.checksum = report
        .checksum
        .wrapping_add(big[big.len() / 3] + big[big.len() - 1]);
    report
}

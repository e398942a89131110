//! Guarded sampling (`EBB_GUARDED_RATE`, `front/guarded.rs`) from Rust: ebb is the
//! global allocator, and each test runs its body in a child process started with the
//! option set (it is read once, when the process sets ebb up).
//!
//! The C-level behaviour (faults, reports, `LD_PRELOAD`, fork) is tested in
//! `crates/ebb-capi/tests/guarded.rs`.

use ebb::Ebb;
use std::process::Command;

#[global_allocator]
static GLOBAL: Ebb = Ebb;

/// The bound README "Security" states for the pool at the default slot count.
const MEMORY_BOUND: usize = 100 << 10;

/// Run test `name` in a child with `env` set; assert it passed.
fn in_child(name: &str, env: &[(&str, &str)]) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("EBB_GUARDED_TEST_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{name} in a child with {env:?}: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn is_child() -> bool {
    std::env::var_os("EBB_GUARDED_TEST_CHILD").is_some()
}

/// Allocate and free a mix of small blocks, many live at once, through every entry
/// point that can reach a guarded slot (malloc, zeroed, aligned, realloc).
fn churn(rounds: usize) -> usize {
    let mut checksum = 0usize;
    for round in 0..rounds {
        let mut live: Vec<Box<[u8]>> = Vec::new();
        for i in 0..200 {
            let size = 1 + (i * 37 + round) % 3000;
            let mut b = vec![0u8; size].into_boxed_slice();
            assert!(
                b.iter().all(|&x| x == 0),
                "a zeroed block of {size} bytes is not zero"
            );
            b[size - 1] = i as u8;
            b[0] = i as u8;
            live.push(b);
        }
        // realloc of (possibly guarded) blocks keeps their contents.
        let mut grown: Vec<u8> = Vec::new();
        for i in 0..2000u32 {
            grown.push(i as u8);
        }
        assert!(grown.iter().enumerate().all(|(i, &x)| x == i as u8));
        // An aligned one.
        let layout = std::alloc::Layout::from_size_align(200, 64).unwrap();
        // SAFETY: a non-zero layout; freed with the same layout.
        unsafe {
            let p = std::alloc::alloc(layout);
            assert!(!p.is_null() && p as usize % 64 == 0);
            p.write_bytes(7, 200);
            std::alloc::dealloc(p, layout);
        }
        for (i, b) in live.iter().enumerate() {
            assert_eq!(b[0], i as u8);
            assert_eq!(b[b.len() - 1], i as u8);
            checksum += b.len();
        }
    }
    checksum
}

/// Only requests of 1000 to 1100 bytes are guarded in these children: the test
/// harness's own blocks (live to the end) stay out of the pool.
const RANGE: [(&str, &str); 3] = [
    ("EBB_GUARDED_RATE", "1"),
    ("EBB_GUARDED_MIN", "1000"),
    ("EBB_GUARDED_MAX", "1100"),
];

/// Allocate `count` blocks of the guarded range, fill them, free them; returns the
/// most slots live at once.
fn fill_pool(count: usize) -> usize {
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut most = 0;
    for i in 0..count {
        live.push(vec![i as u8; 1000 + i % 100]);
        most = most.max(ebb::guarded_stats().live);
    }
    for (i, v) in live.iter().enumerate() {
        assert!(v.iter().all(|&x| x == i as u8));
    }
    most
}

#[test]
fn pool_stays_within_its_memory_bound() {
    if !is_child() {
        in_child("pool_stays_within_its_memory_bound", &RANGE);
        return;
    }
    let before = ebb::guarded_stats();
    assert_eq!(before.rate, 1, "guarded sampling is not on: {before:?}");
    assert_eq!(before.slots, 16);
    let mut most_resident = 0;
    for _ in 0..50 {
        // Every slot live at once (the worst case), then all freed into quarantine.
        assert_eq!(fill_pool(40), 16);
        churn(1);
        let s = ebb::guarded_stats();
        most_resident = most_resident.max(s.resident_bytes);
        assert!(s.live <= s.slots);
    }
    let after = ebb::guarded_stats();
    eprintln!("guarded pool: {after:?}, most resident {most_resident} bytes");
    assert!(after.allocations >= 50 * 16, "{after:?}");
    assert!(
        most_resident <= MEMORY_BOUND,
        "the pool's memory reached {most_resident} bytes (bound {MEMORY_BOUND}): {after:?}"
    );
}

#[test]
fn guarded_blocks_answer_usable_size_and_realloc() {
    if !is_child() {
        in_child("guarded_blocks_answer_usable_size_and_realloc", &RANGE);
        return;
    }
    let live = ebb::guarded_stats().live;
    let p = ebb::alloc(1050, 8);
    assert_eq!(ebb::guarded_stats().live, live + 1, "not guarded");
    assert!(ebb::owns(p));
    // SAFETY: p is a live block of 1050 bytes.
    unsafe {
        assert_eq!(ebb::usable_size(p), 1050);
        p.write_bytes(9, 100);
        let p = ebb::realloc(p, 1090, 8);
        assert!((0..100).all(|i| *p.add(i) == 9));
        let q = ebb::realloc(p, 3000, 8);
        assert!(!q.is_null());
        assert!((0..100).all(|i| *q.add(i) == 9));
        assert!(ebb::usable_size(q) >= 3000);
        let r = ebb::realloc(q, 10, 8);
        assert!((0..10).all(|i| *r.add(i) == 9));
        ebb::free(r);
    }
}

#[test]
fn refused_protect_serves_blocks_unguarded() {
    if !is_child() {
        in_child("refused_protect_serves_blocks_unguarded", &RANGE);
        return;
    }
    fill_pool(20);
    let before = ebb::guarded_stats().allocations;
    assert!(before > 0);
    ebb::fault_injection(1, u64::MAX, ebb::FaultKind::Protect as u8, usize::MAX);
    fill_pool(20);
    ebb::fault_injection(u64::MAX, u64::MAX, 0, usize::MAX);
    assert!(ebb::faults_refused() > 0, "no protect call was refused");
    assert_eq!(
        ebb::guarded_stats().allocations,
        before,
        "guarded while refused"
    );
    // Frees whose protect was refused still gave their slots back; once the OS says
    // yes again, guarded allocations resume.
    fill_pool(20);
    assert!(ebb::guarded_stats().allocations > before);
}

#[test]
fn off_by_default() {
    if is_child() {
        return;
    }
    churn(1);
    assert_eq!(ebb::guarded_stats(), ebb::GuardedStats::default());
}

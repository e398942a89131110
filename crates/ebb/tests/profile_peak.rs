//! The heap profile at the peak (`profile/peak.rs`): after 32 MiB held and freed and
//! then 8 MiB held, the peak view holds the 32 MiB and the live view the 8 MiB.
//!
//! No global allocator here: only the test's own blocks go through ebb, so the totals
//! over every sampled stack are the test's. Sampling at a mean of 64 KiB with the
//! default seed (fixed), 32 MiB is ~512 samples (standard error ~4.4%).

const RATE: u64 = 64 << 10;
const MIB: f64 = (1 << 20) as f64;
const BLOCK: usize = 8 << 10;

/// Estimated bytes allocated and in use over the stacks of `view`.
fn totals(view: ebb::profile::View) -> (f64, f64) {
    let (mut alloc, mut inuse) = (0u64, 0u64);
    ebb::profile::for_each_site_in(view, |s| {
        alloc += s.alloc_bytes;
        inuse += s.inuse_bytes;
    });
    (alloc as f64, inuse as f64)
}

fn hold(mib: usize) -> Vec<*mut u8> {
    (0..(mib << 20) / BLOCK)
        .map(|i| {
            let p = ebb::alloc(BLOCK, 16);
            assert!(!p.is_null());
            // SAFETY: a live block of BLOCK bytes.
            unsafe { p.write_bytes(i as u8, BLOCK) };
            p
        })
        .collect()
}

fn release(blocks: Vec<*mut u8>) {
    for p in blocks {
        // SAFETY: each block came from `ebb::alloc` and is freed once.
        unsafe { ebb::free(p) };
    }
}

#[test]
fn the_peak_view_holds_what_was_live_at_the_peak() {
    assert!(ebb::profile::start(RATE));
    assert_eq!(ebb::profile::peak(), None, "no sample yet");
    let peak_blocks = hold(32);
    let at_peak = ebb::profile::live_bytes() as f64;
    release(peak_blocks);
    let after = hold(8);
    let (peak_bytes, _) = ebb::profile::peak().expect("a peak after samples");
    let peak_bytes = peak_bytes as f64;

    // The snapshot was taken within 1/16 of the highest estimate, which was reached
    // with all 32 MiB live.
    assert!(
        (at_peak * 16.0 / 17.0..=at_peak).contains(&peak_bytes),
        "peak {peak_bytes}, estimate at the peak {at_peak}"
    );
    assert!(
        (26.0 * MIB..38.0 * MIB).contains(&peak_bytes),
        "{peak_bytes}"
    );
    let (peak_alloc, peak_inuse) = totals(ebb::profile::View::Peak);
    assert_eq!(peak_inuse, peak_bytes, "the view is the snapshot");
    assert_eq!(peak_alloc, peak_inuse, "nothing had been freed at the peak");

    let (all_alloc, all_inuse) = totals(ebb::profile::View::All);
    let (live_alloc, live_inuse) = totals(ebb::profile::View::Live);
    assert!(
        (6.0 * MIB..10.0 * MIB).contains(&all_inuse),
        "live now {all_inuse}"
    );
    assert_eq!(live_inuse, all_inuse);
    assert_eq!(
        live_alloc, live_inuse,
        "the live view's allocations are the live ones"
    );
    assert!(
        (34.0 * MIB..46.0 * MIB).contains(&all_alloc),
        "allocated {all_alloc}"
    );
    assert_eq!(ebb::profile::live_bytes() as f64, all_inuse);

    // A later, higher peak replaces the snapshot.
    let more = hold(48);
    let (second, _) = ebb::profile::peak().unwrap();
    assert!(
        second as f64 > peak_bytes * 1.3,
        "{second} after {peak_bytes}"
    );
    release(more);
    release(after);
    assert_eq!(ebb::profile::live_bytes(), 0);
}

//! Once a burst is freed and purged, the segment headers' page descriptors of the
//! decommitted slices go back to the OS too (`span/header_purge.rs`), and the slices
//! work as before when they are used again.
//!
//! One test per binary: it measures process-wide statistics.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const MIB: usize = 1 << 20;

#[test]
fn descriptors_of_purged_slices_go_back() {
    std::thread::spawn(|| {
        let burst =
            || -> Vec<Vec<u8>> { (0..96 * MIB / 1024).map(|i| vec![i as u8; 1024]).collect() };
        let blocks = burst();
        let peak = ebb::stats();
        drop(blocks);
        ebb::collect(true);
        let after = ebb::stats();
        // Each segment's header has 96 KiB of descriptors; the burst used about three
        // segments' worth of one-slice pages, all free and purged now.
        assert!(
            peak.metadata >= after.metadata + 128 * 1024,
            "metadata {} KiB at the peak, {} KiB after the purge",
            peak.metadata >> 10,
            after.metadata >> 10
        );
        // The slices (and their zeroed descriptors) serve a second burst.
        let again = burst();
        for (i, b) in again.iter().enumerate() {
            assert!(b.iter().all(|&x| x == i as u8), "block {i} changed");
        }
        drop(again);
        ebb::collect(true);
    })
    .join()
    .unwrap();
}

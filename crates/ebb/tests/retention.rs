//! The retention report and the measured stats: the report's parts add up to the
//! process's RSS on a fragmented multi-threaded workload and name memory ebb does not
//! own; stats read the remote-free lists and heap counts without changing them.
//!
//! The figures are process-wide, so the tests run one at a time.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use common::*;
use std::sync::{mpsc, Barrier, Mutex, MutexGuard};
use std::thread;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A block written whole, so its memory is resident.
fn block(size: usize, fill: u8) -> Vec<u8> {
    vec![fill; size]
}

fn report_text(r: &ebb::Retention) -> String {
    let mut text = String::new();
    r.write_to(&mut text).unwrap();
    text
}

/// Four threads allocate ~100 MiB of mixed sizes, each hands nine in ten of its blocks
/// to the next thread to free (cross-thread frees into pages still in use), and one in
/// ten stays live: pages stay resident for few live blocks. The report's parts must add
/// up to the RSS it measured within 3%, that RSS must agree with /proc/self/status,
/// and the free memory kept by live blocks must show as such.
#[test]
fn retention_adds_up_to_rss_on_a_fragmented_multithreaded_heap() {
    let _serial = serial();
    const THREADS: usize = 4;
    let barrier = std::sync::Arc::new(Barrier::new(THREADS + 1));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let done_rx = std::sync::Arc::new(Mutex::new(done_rx));
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..THREADS {
        let (tx, rx) = mpsc::channel::<Vec<Vec<u8>>>();
        senders.push(tx);
        receivers.push(rx);
    }
    let mut handles = Vec::new();
    for (t, rx) in receivers.into_iter().enumerate() {
        let to_next = senders[(t + 1) % THREADS].clone();
        let barrier = barrier.clone();
        let done_rx = done_rx.clone();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(0x5e7e + t as u64);
            let mut kept = Vec::new();
            let mut give = Vec::new();
            let mut bytes = 0;
            while bytes < 25 << 20 {
                let size = rng.range(16, 2048);
                bytes += size;
                let b = block(size, t as u8 + 1);
                if rng.chance(1, 10) {
                    kept.push(b);
                } else {
                    give.push(b);
                }
            }
            // A large and a huge block too.
            kept.push(block(3 << 20, 9));
            if t == 0 {
                kept.push(block(40 << 20, 9));
            }
            to_next.send(give).unwrap();
            drop(rx.recv().unwrap()); // the previous thread's blocks, freed here
            barrier.wait();
            // Stay alive (and keep `kept`) until the report is taken.
            let _ = done_rx.lock().unwrap().recv();
            drop(kept);
        }));
    }
    barrier.wait();
    // First as the frees left it (most pushed onto other threads' pages, not yet
    // taken in), then after a collection has taken them in.
    let before = ebb::retention();
    let before_text = report_text(&before);
    ebb::collect(false);
    let report = ebb::retention();
    let status_rss = rss_bytes().expect("VmRSS");
    let text = report_text(&report);
    for _ in 0..THREADS {
        done_tx.send(()).unwrap();
    }
    for h in handles {
        h.join().unwrap();
    }
    assert!(
        before.parts_total().abs_diff(before.rss) * 100 <= before.rss * 3,
        "{before_text}"
    );
    assert!(
        before.remote_freed + before.free_in_live_pages > 20 << 20,
        "{before_text}"
    );
    assert!(
        report.remote_freed < before.remote_freed.max(1 << 20),
        "{before_text}\n{text}"
    );
    let total = report.parts_total();
    assert!(
        total.abs_diff(report.rss) * 100 <= report.rss * 3,
        "parts {total} vs RSS {}:\n{text}",
        report.rss
    );
    assert!(
        report.rss.abs_diff(status_rss) * 100 <= status_rss * 3,
        "smaps RSS {} vs VmRSS {status_rss}:\n{text}",
        report.rss
    );
    // ~10 MiB of small blocks, 12 MiB large, 40 MiB huge live.
    assert!(
        (55 << 20..80 << 20).contains(&report.held),
        "held {}:\n{text}",
        report.held
    );
    assert!(report.live * 10 >= report.held * 9, "{text}");
    // Nine in ten small blocks were freed between the live ones: much more free
    // memory stays resident in their pages than they hold.
    assert!(
        report.free_in_live_pages > 20 << 20,
        "free in live pages {}:\n{text}",
        report.free_in_live_pages
    );
    assert!(
        report.metadata > 0 && report.file_backed > 0 && report.stack > 0,
        "{text}"
    );
    assert!(
        text.contains("free blocks kept resident by live ones"),
        "{text}"
    );
}

/// A heap is read in full but written only in part (its cold tail: the profiler's and
/// guarded sampling's state), so its tail maps the kernel's zero page: present for
/// `mincore`, not in RSS. With 600 thread heaps that was 2.4 MiB counted twice; the
/// parts must still add up to RSS within 2%.
#[test]
fn retention_adds_up_to_rss_with_hundreds_of_thread_heaps() {
    let _serial = serial();
    const THREADS: usize = 600;
    let barrier = std::sync::Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let barrier = barrier.clone();
            thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let kept: Vec<Vec<u8>> =
                        (0..8).map(|i| block(16 << (i % 6), t as u8)).collect();
                    // All alive at once: each thread has a heap of its own.
                    barrier.wait();
                    drop(kept);
                })
                .unwrap()
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (live, spare) = {
        let stats = ebb::stats();
        (stats.heaps_live, stats.heaps_spare)
    };
    assert!(live + spare >= THREADS as u64, "{live} + {spare} heaps");
    // The purger may be giving back what an earlier test freed while the report reads
    // smaps and then the segments: a skew, not a counting error. Of three reports one
    // must add up; the zero pages counted twice made all three miss.
    let mut texts = String::new();
    let added_up = (0..3).any(|_| {
        let report = ebb::retention();
        texts += &report_text(&report);
        report.parts_total().abs_diff(report.rss) * 100 <= report.rss * 2
    });
    assert!(added_up, "{texts}");
}

/// Zeroed blocks the program only reads map the kernel's zero page, which RSS leaves
/// out: the report must leave them out too (with `mincore` alone, a 64 MiB block read
/// page by page made it add up to 1,100% of RSS).
#[test]
fn zero_pages_of_blocks_only_read_are_not_counted_in_the_report() {
    let _serial = serial();
    let page = 4096;
    let sizes = [64 << 20, 12 << 20, 1 << 20, 96 << 10];
    let blocks: Vec<(*mut u8, std::alloc::Layout)> = sizes
        .iter()
        .map(|&size| {
            let layout = std::alloc::Layout::from_size_align(size, 16).unwrap();
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!p.is_null());
            (p, layout)
        })
        .collect();
    let mut sum = 0u64;
    for &(p, layout) in &blocks {
        for off in (0..layout.size()).step_by(page) {
            // SAFETY: inside the block, which is initialised (zeroed).
            sum += unsafe { std::ptr::read_volatile(p.add(off)) } as u64;
        }
    }
    assert_eq!(sum, 0);
    let zero_bytes: u64 = sizes.iter().map(|&s| s as u64).sum();
    let mut texts = String::new();
    let added_up = (0..3).any(|_| {
        let report = ebb::retention();
        texts += &report_text(&report);
        report.parts_total().abs_diff(report.rss) * 100 <= report.rss * 3
    });
    assert!(
        added_up,
        "{zero_bytes} B of zeroed blocks only read\n{texts}"
    );
    for (p, layout) in blocks {
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(p, layout) };
    }
}

/// After a fork, the child's pages are shared copy-on-write with the parent: not
/// exclusively mapped, like the zero page, yet counted in RSS. The child's report must
/// count them (it added up to far less than RSS when pagemap's flags alone decided).
#[cfg(target_os = "linux")]
#[test]
fn retention_adds_up_to_rss_in_a_fork_child() {
    let _serial = serial();
    let written: Vec<Vec<u8>> = (0..64).map(|i| block(128 << 10, i as u8 + 1)).collect();
    // SAFETY: the child calls only the allocator, ebb's report and `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = (0..3).any(|_| {
            let report = ebb::retention();
            report.parts_total().abs_diff(report.rss) * 100 <= report.rss * 3
                && report.live >= 7 << 20
        });
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's report did not add up to its RSS (status {status:#x})"
    );
    drop(written);
}

/// Memory the program maps itself is named, by address range, as not ebb's.
#[test]
fn retention_lists_the_programs_own_mappings() {
    let _serial = serial();
    const SIZE: usize = 96 << 20;
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    // SAFETY: the mapping is ours and SIZE bytes long.
    unsafe { std::ptr::write_bytes(base as *mut u8, 1, SIZE) };
    let report = ebb::retention();
    let text = report_text(&report);
    let start = base as usize;
    let listed = report.foreign[..report.foreign_listed]
        .iter()
        .find(|f| f.start <= start && start + SIZE <= f.end);
    // SAFETY: mapped above, no longer used.
    unsafe { libc::munmap(base, SIZE) };
    let listed = listed.unwrap_or_else(|| panic!("mapping {start:#x} not listed:\n{text}"));
    assert!(listed.resident >= SIZE as u64, "{text}");
    assert!(report.foreign_anon >= SIZE as u64, "{text}");
    assert!(
        text.contains("of anonymous memory in") && text.contains(&format!("{start:#x}")),
        "{text}"
    );
    let mut json = String::new();
    report.write_json(&mut json).unwrap();
    assert!(json.contains(&format!("\"start\":{start},")), "{json}");
    // Stamped with when it was measured; `write_json` itself names no trigger.
    assert!(report.measured_at_ms > 0, "{json}");
    assert!(
        json.contains(&format!("\"measured_at_ms\":{},", report.measured_at_ms))
            && json.contains("\"instance\":")
            && !json.contains("\"trigger\""),
        "{json}"
    );
}

/// Stats count the blocks other threads freed and the owner has not taken in, from
/// the lists' head words: reading twice gives the same count (nothing is drained),
/// and the blocks still count as allocated. Heaps of live threads are counted.
#[test]
fn stats_read_remote_frees_and_heaps_without_draining() {
    let _serial = serial();
    // Few enough to stay in pages the owner keeps (a full page beyond the last few is
    // abandoned, and frees into it are drained by the purger).
    const BLOCKS: usize = 1_000;
    let (to_freer, freer_rx) = mpsc::channel::<Vec<Box<[u8; 200]>>>();
    let (freed_tx, freed_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    // The owner allocates, hands the blocks over and then waits without allocating,
    // so nobody takes the remote frees in.
    let owner = thread::spawn(move || {
        let blocks: Vec<Box<[u8; 200]>> = (0..BLOCKS).map(|i| Box::new([i as u8; 200])).collect();
        to_freer.send(blocks).unwrap();
        go_rx.recv().unwrap();
    });
    let freer = thread::spawn(move || {
        let blocks = freer_rx.recv().unwrap();
        drop(blocks);
        freed_tx.send(()).unwrap();
    });
    freed_rx.recv().unwrap();
    // RSS before and after: the purger may be giving back what an earlier test freed
    // (RSS only falls meanwhile), and `resident` is measured in between.
    let rss_before = rss_bytes().unwrap();
    let first = ebb::stats();
    let second = ebb::stats();
    go_tx.send(()).unwrap();
    owner.join().unwrap();
    freer.join().unwrap();
    let remote_200: u64 = first
        .classes
        .iter()
        .find(|c| c.block_size >= 200)
        .map(|c| c.remote_freed_blocks)
        .unwrap();
    // The owner's pages may be taken over when it has been idle for the purge delay;
    // most of the blocks are still on their lists in the microseconds between.
    assert!(
        remote_200 >= BLOCKS as u64 / 2,
        "{remote_200} remote frees seen of {BLOCKS}: {first:?}"
    );
    // Reading the stats takes nothing in; a takeover of the idle owner between the two
    // reads does (on a loaded machine the reads can straddle the purge delay).
    if second.steals == first.steals {
        assert!(
            second.remote_freed_blocks >= first.remote_freed_blocks * 9 / 10,
            "{} remote frees seen, then {}: {second:?}",
            first.remote_freed_blocks,
            second.remote_freed_blocks
        );
    }
    assert!(first.remote_freed_bytes >= remote_200 * 200);
    assert!(first.heaps_live >= 3, "{first:?}");
    assert!(first.resident > 4 << 20 && first.metadata > 0, "{first:?}");
    let rss = rss_before.max(rss_bytes().unwrap());
    assert!(first.resident <= rss + (8 << 20), "RSS {rss}: {first:?}");
    let json = {
        let mut s = String::new();
        first.write_json(&mut s).unwrap();
        s
    };
    for key in [
        "\"resident\":",
        "\"heaps_live\":",
        "\"remote_freed_blocks\":",
    ] {
        assert!(json.contains(key), "{key} in {json}");
    }
}

/// A class used one block at a time keeps its page when the block is freed (the heap's
/// current page, for the next block of that size): the report names that class among
/// the pages with no live block, with the block's resident bytes, in JSON and in text.
#[test]
fn empty_pages_are_listed_by_class() {
    let _serial = serial();
    const SIZE: usize = 300 << 10;
    let (freed_tx, freed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let user = thread::spawn(move || {
        let b = block(SIZE, 7);
        // SAFETY: `b`'s buffer is a live block of this allocator.
        let class_size = unsafe { ebb::usable_size(b.as_ptr()) };
        drop(b);
        freed_tx.send(class_size).unwrap();
        // Alive, so its heap keeps the page (a thread's exit lets its pages go).
        go_rx.recv().unwrap();
    });
    let class_size = freed_rx.recv().unwrap() as u64;
    let report = ebb::retention();
    go_tx.send(()).unwrap();
    user.join().unwrap();
    assert!(class_size >= SIZE as u64, "usable size {class_size}");
    let class = report
        .classes
        .iter()
        .find(|c| c.block_size == class_size)
        .unwrap_or_else(|| panic!("no class of {class_size} B: {report:?}"));
    assert!(
        class.empty_pages >= 1 && class.empty_resident >= SIZE as u64 / 2,
        "the freed {SIZE} B block's page is not listed as empty: {class:?}"
    );
    assert!(
        report.empty_in_heaps >= SIZE as u64 / 2,
        "the page its heap keeps current is not counted as in a heap: {report:?}"
    );
    let by_class: u64 = report.classes.iter().map(|c| c.empty_resident).sum();
    assert!(
        by_class <= report.free_in_empty_pages,
        "empty pages by class ({by_class}) exceed the part ({})",
        report.free_in_empty_pages
    );
    let text = report_text(&report);
    assert!(
        text.contains("pages with no live block, by class")
            && text.contains(&format!("{class_size} B blocks")),
        "{text}"
    );
    let mut json = String::new();
    report.write_json(&mut json).unwrap();
    assert!(
        json.contains(&format!("\"block_size\":{class_size},"))
            && json.contains("\"empty_pages\":"),
        "{json}"
    );
}

/// A thread that allocates a batch of small blocks and frees it keeps some of the
/// emptied pages in its heap's stash for its next batch (front/stash.rs): the report
/// counts them among the free pages as stashed, and the three holders of free pages
/// add up to that part, in the value and in JSON.
#[test]
fn free_pages_are_split_by_who_holds_them() {
    let _serial = serial();
    const SIZE: usize = 1000;
    const COUNT: usize = 2000; // about 2 MiB: thirty-odd one-slice pages
    let (freed_tx, freed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let user = thread::spawn(move || {
        let batch: Vec<Vec<u8>> = (0..COUNT).map(|i| block(SIZE, i as u8)).collect();
        drop(batch);
        freed_tx.send(()).unwrap();
        // Alive, so its heap keeps its stash (a thread's exit lets its pages go).
        go_rx.recv().unwrap();
    });
    freed_rx.recv().unwrap();
    let report = ebb::retention();
    go_tx.send(()).unwrap();
    user.join().unwrap();
    assert_eq!(
        report.free_in_empty_pages,
        report.empty_stashed + report.empty_in_heaps + report.empty_abandoned,
        "{report:?}"
    );
    // The stash keeps at least 16 pages of 64 KiB; written whole, most of each is
    // resident unless the purger got to them first (it waits for the purge delay).
    assert!(
        report.empty_stashed >= 512 << 10,
        "the batch's emptied pages are not counted as stashed: {} B stashed",
        report.empty_stashed
    );
    let text = report_text(&report);
    assert!(
        text.contains("of which stashed for a heap's next pages"),
        "{text}"
    );
    let mut json = String::new();
    report.write_json(&mut json).unwrap();
    assert!(
        json.contains(&format!("\"empty_stashed\":{}", report.empty_stashed)),
        "{json}"
    );
}

//! Unit tests of `span::page` (the page descriptor and its free lists).

use super::*;
#[cfg(not(feature = "secure"))]
use crate::span::carve::CARVE_LINES;
use crate::span::carve::{carve_line_cap, FIRST_CARVE_BYTES};
extern crate std;
use std::vec;

fn page_over(buf: &mut [u8], size: usize) -> Page {
    let mut page = Page::new();
    page.start = buf.as_mut_ptr();
    page.slice_count = 1;
    page.init_blocks(crate::size_class::class_of(size), size, buf.len());
    page
}

/// An idle page built on a reused (dirty) span gives back its never-carved tail and
/// the inside of its free big blocks; live blocks and link words stay.
#[test]
fn purge_free_blocks_gives_back_tail_and_free_block_insides() {
    let len = crate::span::segment::SLICE_SIZE;
    let block = 16 * 1024;
    let os_page = crate::os::page_size();
    // SAFETY: a private anonymous mapping, unmapped at the end.
    let mem = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(mem, libc::MAP_FAILED);
    let mem = mem as *mut u8;
    // SAFETY: the mapping is ours and `len` bytes long.
    let buf = unsafe {
        core::ptr::write_bytes(mem, 0xAB, len); // dirty, like a reused span
        core::slice::from_raw_parts_mut(mem, len)
    };
    let mut page = page_over(buf, block);
    assert!(!page.is_zero);
    // Block 0 live, block 1 free, blocks 2 and 3 never carved.
    assert!(page.extend());
    let live = page.free;
    // SAFETY: test owns the page and its blocks.
    unsafe {
        page.free = page.link(live);
        page.clear_link(live);
        page.set_used(1);
        (live as *mut u8).add(8).write(0x5A);
    }
    assert!(page.extend());
    assert_eq!(page.capacity, 2);
    let free = page.free;
    let purged = page.purge_free_blocks();
    assert_eq!(purged, 2 * block + (block - os_page));
    // SAFETY: all within the mapping.
    unsafe {
        assert_eq!(page.free, free);
        assert!(
            page.link(free).is_null(),
            "the free block's link word survives"
        );
        assert_eq!(
            *(live as *mut u8).add(8),
            0x5A,
            "the live block is untouched"
        );
        // (Its last byte before the secure build's canary.)
        let last = block - 1 - crate::span::CANARY_PAD_MAX;
        assert_eq!(*mem.add(last), 0xAB, "the live block is untouched");
        let after_link =
            core::slice::from_raw_parts(mem.add(block + os_page), len - block - os_page);
        assert!(
            after_link.iter().all(|&b| b == 0),
            "tail and free insides read zero"
        );
        libc::munmap(mem as *mut libc::c_void, len);
    }
}

#[test]
fn extend_pop_free_collect() {
    let mut buf = vec![0u8; 4096];
    let mut page = page_over(&mut buf, 64);
    assert_eq!(page.reserved, 64);
    assert!(page.extend());
    let first = carve_line_cap(64).min(64);
    assert_eq!(page.capacity as usize, first, "one block per line, capped");
    assert_eq!(list_len(&page, page.free), first);
    let mut taken = vec![];
    while page.has_free() || page.extend() {
        let b = page.free;
        // SAFETY: test owns the page.
        unsafe {
            page.free = page.link(b);
            page.clear_link(b);
        }
        page.inc_used();
        taken.push(b);
    }
    assert!(!page.extend());
    assert_eq!(page.used(), 64);
    for &b in &taken[..32] {
        // SAFETY: b is in use.
        assert!(!unsafe { page.free_local(b) });
    }
    for &b in &taken[32..63] {
        // SAFETY: b is in use.
        unsafe { page.free_remote(b) };
    }
    assert_eq!(page.used(), 32);
    assert_eq!(
        page.thread_free.load(Ordering::Relaxed) as usize >> THREAD_FREE_COUNT_SHIFT,
        31,
        "the remote list carries its length"
    );
    page.gather_frees();
    assert_eq!(page.used(), 1);
    assert!(page.thread_free.load(Ordering::Relaxed).is_null());
    // The owner's frees are handed out first, then the remote ones (taken unwalked).
    assert_eq!(list_len(&page, page.free), 32);
    assert_eq!(list_len(&page, page.local_free), 31);
    // SAFETY: last block is in use.
    assert!(unsafe { page.free_local(taken[63]) });
    assert!(page.is_unused());
}

#[test]
fn remote_list_joins_both_lists_when_neither_is_empty() {
    let mut buf = vec![0u8; 4096];
    let mut page = page_over(&mut buf, 64);
    // Carved from zero memory: the owner's frees wait on `local_free`.
    page.is_zero = true;
    assert!(page.extend());
    let mut taken = vec![];
    for _ in 0..6 {
        let b = page.free;
        // SAFETY: test owns the page.
        unsafe {
            page.free = page.link(b);
            page.clear_link(b);
        }
        page.inc_used();
        taken.push(b);
    }
    // SAFETY: the blocks are in use.
    unsafe {
        page.free_local(taken[0]);
        page.free_remote(taken[1]);
        page.free_remote(taken[2]);
    }
    let free_before = list_len(&page, page.free);
    page.take_remote_frees();
    assert_eq!(page.used(), 3);
    assert_eq!(
        list_len(&page, page.free),
        free_before,
        "free is left alone"
    );
    assert_eq!(
        list_len(&page, page.local_free),
        3,
        "remote blocks then the owner's"
    );
    // SAFETY: the remaining blocks are in use.
    unsafe {
        for &b in &taken[3..] {
            page.free_remote(b);
        }
    }
    page.gather_frees();
    assert!(page.is_unused());
    assert_eq!(
        list_len(&page, page.free) + list_len(&page, page.local_free),
        page.capacity as usize
    );
}

/// Once `free` is not known zero, a block the owner frees is the next one handed
/// out (LIFO, its line still in cache); while it is, the block waits on
/// `local_free` and the carved blocks stay known zero.
#[test]
fn owner_free_is_reused_first_unless_free_is_known_zero() {
    for is_zero in [false, true] {
        let mut buf = vec![0u8; 4096];
        let mut page = page_over(&mut buf, 64);
        page.is_zero = is_zero;
        assert!(page.extend());
        let b = page.free;
        // SAFETY: test owns the page; b and the next block are then in use.
        unsafe {
            let second = page.link(b);
            page.free = page.link(second);
            page.clear_link(b);
            page.clear_link(second);
            page.set_used(2);
            assert!(!page.free_local(b));
        }
        assert_eq!(page.free_is_zero, is_zero);
        if is_zero {
            assert_eq!(page.local_free, b, "waits on local_free");
            assert_ne!(page.free, b);
        } else {
            assert_eq!(page.free, b, "handed out next");
            assert!(page.local_free.is_null());
        }
    }
}

#[test]
fn extend_is_incremental() {
    // Blocks of 1 KiB (one cache line of link word each): bytes decide.
    let mut buf = vec![0u8; 65536];
    let mut page = page_over(&mut buf, 1024);
    assert!(page.extend());
    assert_eq!(
        page.capacity as usize,
        FIRST_CARVE_BYTES / 1024,
        "first carve: one OS page"
    );
    for carved_kib in [8, 16, 32, 48] {
        page.free = null_mut();
        assert!(page.extend());
        assert_eq!(page.capacity as usize, carved_kib, "doubling to 16 KiB");
    }
    assert!(page.capacity < page.reserved);
}

/// Small blocks: the lines of link words written decide (2 KiB of 16-byte blocks, 32
/// blocks of 64 bytes), not the 4-16 KiB of bytes. (The secure build carves by bytes.)
#[cfg(not(feature = "secure"))]
#[test]
fn extend_writes_at_most_carve_lines() {
    for (size, per_carve) in [
        (16, CARVE_LINES * 4),
        (48, CARVE_LINES * 64 / 48),
        (64, CARVE_LINES),
        (128, CARVE_LINES),
    ] {
        let mut buf = vec![0u8; 65536];
        let mut page = page_over(&mut buf, size);
        for carves in 1..=3 {
            page.free = null_mut();
            assert!(page.extend());
            assert_eq!(
                page.capacity as usize,
                carves * per_carve,
                "{size}-byte blocks"
            );
        }
    }
}

/// The fast path's carve waits while other threads' frees wait, or a hole does, and
/// once the page is fully carved.
#[test]
fn carving_in_place_only_with_nothing_else_to_hand_out() {
    let mut buf = vec![0u8; 4096];
    let mut page = page_over(&mut buf, 64);
    assert!(page.can_carve_in_place());
    page.thread_free
        .store(page.start as *mut Block, Ordering::Relaxed);
    assert!(!page.can_carve_in_place(), "a remote free waits");
    page.thread_free.store(null_mut(), Ordering::Relaxed);
    page.holes = 1;
    assert!(!page.can_carve_in_place(), "a hole waits");
    page.holes = 0;
    while page.extend() {
        page.free = null_mut();
    }
    assert!(!page.can_carve_in_place(), "fully carved");
}

/// The fast path's carve carves what `extend` would: the same counts, doubling from
/// the first carve up to the class's batch, until the page is full.
#[test]
fn carve_in_place_carves_as_extend_does() {
    for size in [16, 48, 64, 256, 1024, 8192] {
        let mut a_buf = vec![0u8; 65536];
        let mut b_buf = vec![0u8; 65536];
        let mut a = page_over(&mut a_buf, size);
        let mut b = page_over(&mut b_buf, size);
        assert!(a.extend() && b.extend(), "first carve: the slow path's");
        loop {
            a.free = null_mut();
            b.free = null_mut();
            let more = b.can_carve_in_place();
            assert_eq!(a.extend(), more);
            if !more {
                break;
            }
            assert!(b.carve_in_place());
            assert_eq!(a.capacity, b.capacity, "{size}-byte blocks");
            assert_eq!(list_len(&a, a.free), list_len(&b, b.free));
        }
        assert_eq!(b.capacity, b.reserved);
    }
}

/// Level light's carve on the malloc fast path (`Page::carve_light_and_pop`): each
/// batch's first block is handed out (counted, its word cleared, not on the list),
/// the rest are on `free` with links that decode into the page, and free's
/// block-start test covers exactly the blocks carved so far.
#[cfg(feature = "secure")]
#[test]
fn light_carve_hands_out_the_first_block_of_each_batch() {
    use crate::span::secure::is_block_start;
    for size in [16, 48, 64, 256, 1024, 8192] {
        let mut buf = vec![0xA5u8; 65536];
        let mut page = page_over(&mut buf, size);
        assert!(page.extend(), "first carve: the slow path's");
        let mut carved = page.capacity;
        let mut batches = 0;
        loop {
            page.free = null_mut();
            if !page.can_carve_in_place() {
                break;
            }
            let used = page.used();
            // SAFETY: block `carved` lies inside `buf`.
            let first = unsafe { page.start.add(carved as usize * size) };
            let p = page.carve_light_and_pop();
            assert_eq!(p, first, "{size}-byte blocks");
            // SAFETY: `p` is a block of `buf`.
            assert_eq!(unsafe { (p as *const usize).read() }, 0, "its link cleared");
            assert_eq!(page.used(), used + 1);
            assert!(page.capacity > carved);
            let count = (page.capacity - carved) as usize;
            assert_eq!(list_len(&page, page.free), count - 1, "{size}-byte blocks");
            for j in 0..=page.capacity as usize + 1 {
                let start = is_block_start(j * size, page.block_magic, page.block_limit);
                assert_eq!(
                    start,
                    j < page.capacity as usize,
                    "block {j} of {size} bytes"
                );
            }
            carved = page.capacity;
            batches += 1;
        }
        assert_eq!(page.capacity, page.reserved);
        assert!(batches > 0 || page.reserved <= 2, "{size}-byte blocks");
    }
}

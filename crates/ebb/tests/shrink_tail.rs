//! `realloc` shrinking a big block of a multi-block page in place gives back the whole
//! OS pages past the new size (`span/shrink.rs`): a `Vec` shrunk from a 384 KiB block to
//! 240 KB must not keep the other 144 KiB resident, and the block must stay usable.
//! But a block shrunk again within a purge delay of its last give-back churns (it was
//! regrown or freed and reused in between) and keeps its tail (`front/shrunk_tails.rs`).

use std::alloc::{GlobalAlloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const BLOCK: usize = 384 * 1024; // a class of multi-block pages (up to 512 KiB)
const SHRUNK: usize = 240_000;

/// Resident OS pages of `[start, end)`, both page aligned.
fn resident_pages(start: usize, end: usize) -> usize {
    let page = 4096;
    let mut out = vec![0u8; (end - start) / page];
    // SAFETY: the range is mapped (inside ebb's segment) and `out` has one byte per page.
    let rc = unsafe { libc::mincore(start as *mut libc::c_void, end - start, out.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore failed");
    out.iter().filter(|&&b| b & 1 != 0).count()
}

#[test]
fn an_in_place_shrink_gives_back_the_tail() {
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_PAGESIZE) } != 4096 {
        return;
    }
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    // SAFETY: plain allocation through ebb, each pointer used within its layout.
    unsafe {
        let p = A.alloc(layout);
        assert!(!p.is_null());
        for i in 0..BLOCK {
            *p.add(i) = (i % 251) as u8;
        }
        let tail_start = (p as usize + SHRUNK).next_multiple_of(4096);
        let tail_end = (p as usize + BLOCK) & !4095;
        assert_eq!(
            resident_pages(tail_start, tail_end),
            (tail_end - tail_start) / 4096
        );

        let q = A.realloc(p, layout, SHRUNK);
        assert_eq!(q, p, "a shrink to more than half stays in place");
        assert!(
            (0..SHRUNK).all(|i| *q.add(i) == (i % 251) as u8),
            "contents kept"
        );
        assert_eq!(
            resident_pages(tail_start, tail_end),
            0,
            "the tail's OS pages went back"
        );

        // Growing back inside the block: the tail reads as zero and takes writes.
        let shrunk = Layout::from_size_align(SHRUNK, 8).unwrap();
        let r = A.realloc(q, shrunk, BLOCK);
        assert_eq!(r, q, "a growth within the usable size stays in place");
        assert!((0..SHRUNK).all(|i| *r.add(i) == (i % 251) as u8));
        assert!((tail_start..tail_end).all(|a| *(a as *const u8) == 0));
        for i in SHRUNK..BLOCK {
            *r.add(i) = 7;
        }
        assert!((SHRUNK..BLOCK).all(|i| *r.add(i) == 7));
        A.dealloc(r, layout);
    }
}

#[test]
fn a_small_shrink_keeps_the_tail() {
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_PAGESIZE) } != 4096 {
        return;
    }
    // A shrink by less than a quarter (or by less than 64 KiB) makes no system call.
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    // SAFETY: as above.
    unsafe {
        let p = A.alloc(layout);
        core::ptr::write_bytes(p, 1, BLOCK);
        let new = BLOCK - BLOCK / 8;
        let q = A.realloc(p, layout, new);
        assert_eq!(q, p);
        let start = (p as usize + new).next_multiple_of(4096);
        let end = (p as usize + BLOCK) & !4095;
        assert_eq!(resident_pages(start, end), (end - start) / 4096);
        A.dealloc(q, Layout::from_size_align(new, 8).unwrap());
    }
}

/// `p`, shrunk to `SHRUNK` in place: grown back to `BLOCK` in place, written whole with
/// `byte`, and shrunk to `SHRUNK` again (a buffer the next item grows into). Returns it.
///
/// # Safety
/// `p` is a live block of `SHRUNK` bytes from `A`.
unsafe fn regrow_write_shrink(p: *mut u8, byte: u8) -> *mut u8 {
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    let shrunk = Layout::from_size_align(SHRUNK, 8).unwrap();
    // SAFETY: per the contract; each pointer is used within its layout.
    unsafe {
        let r = A.realloc(p, shrunk, BLOCK);
        assert_eq!(r, p, "a growth within the usable size stays in place");
        core::ptr::write_bytes(r, byte, BLOCK);
        let s = A.realloc(r, layout, SHRUNK);
        assert_eq!(s, p, "a shrink to more than half stays in place");
        s
    }
}

#[test]
fn a_block_shrunk_again_within_the_purge_delay_keeps_its_tail() {
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_PAGESIZE) } != 4096 {
        return;
    }
    let layout = Layout::from_size_align(BLOCK, 8).unwrap();
    let shrunk = Layout::from_size_align(SHRUNK, 8).unwrap();
    // A delay no run of this test outlasts, so "again" is always within it. (The other
    // tests here give a tail back on a block's first shrink, whatever the delay.)
    let before = ebb::options();
    ebb::set_options(ebb::Options {
        purge_delay_ms: 3_600_000,
        ..before
    });
    // SAFETY: as above.
    unsafe {
        let p = A.alloc(layout);
        core::ptr::write_bytes(p, 1, BLOCK);
        let tail_start = (p as usize + SHRUNK).next_multiple_of(4096);
        let tail_end = (p as usize + BLOCK) & !4095;
        let tail_pages = (tail_end - tail_start) / 4096;

        let q = A.realloc(p, layout, SHRUNK);
        assert_eq!(q, p);
        assert_eq!(
            resident_pages(tail_start, tail_end),
            0,
            "first shrink: given back"
        );

        // Regrown and written, as a buffer the next item grows into, then shrunk again.
        let s = regrow_write_shrink(q, 2);
        assert_eq!(
            resident_pages(tail_start, tail_end),
            tail_pages,
            "shrunk again at once: the tail stays"
        );
        assert!((0..SHRUNK).all(|i| *s.add(i) == 2), "contents kept");

        // With a purge delay of 0 nothing is held: the tail goes back every time.
        ebb::set_options(ebb::Options {
            purge_delay_ms: 0,
            ..before
        });
        let u = regrow_write_shrink(s, 3);
        assert_eq!(
            resident_pages(tail_start, tail_end),
            0,
            "purge delay 0: given back"
        );
        A.dealloc(u, shrunk);
    }
    ebb::set_options(before);
}

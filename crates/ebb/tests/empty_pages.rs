//! Empty pages of big blocks go back when the heap takes a span (front/empty_pages.rs):
//! a program that allocates and frees one block in each of many classes above 8 KiB
//! used to keep one empty page per class (its current page, one block resident each);
//! now, when its heap next takes a span for a page, it keeps empty pages of those
//! classes only up to a budget of block bytes (the smaller classes) and gives the
//! others back. And when frees alone empty them (no span taken in between), the free
//! that empties a current page holds the others to a budget of carved block bytes
//! (`KEPT_EMPTIED_BYTES`). With a second thread's heap live, nothing is given back. A test binary
//! of its own without the test harness (`harness = false` in Cargo.toml): the harness
//! runs tests on threads of their own, so the process would never have one heap.

use std::alloc::{alloc, dealloc, Layout};

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const KIB: usize = 1024;
/// `front::empty_pages::KEPT_EMPTY_BYTES`.
const BUDGET: u64 = 2048 * KIB as u64;
/// `front::empty_pages::KEPT_EMPTIED_BYTES`.
const EMPTIED_BUDGET: u64 = 1024 * KIB as u64;
/// One block in each: block sizes of classes above 8 KiB, 3.8 MiB in all but the last.
const SIZES: [usize; 15] = [
    96, 112, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480, 512,
];

fn layout(kib: usize) -> Layout {
    Layout::from_size_align(kib * KIB, 16).unwrap()
}

/// Allocate a block of `kib` KiB and write it.
fn block(kib: usize) -> *mut u8 {
    // SAFETY: a non-zero size.
    let p = unsafe { alloc(layout(kib)) };
    assert!(!p.is_null());
    // SAFETY: the block just allocated.
    unsafe { p.write_bytes(1, kib * KIB) };
    // The optimiser may drop an allocation whose block is only written and then freed
    // (it did at the test profile's opt-level 2: no class above 8 KiB took a page).
    std::hint::black_box(p)
}

/// Classes above 8 KiB holding pages (live or empty): (block size, pages).
fn big_pages() -> Vec<(u64, u64)> {
    ebb::stats()
        .classes
        .iter()
        .filter(|c| c.block_size > 8 * KIB as u64 && c.pages > 0)
        .map(|c| (c.block_size, c.pages))
        .collect()
}

/// One block in each class of `SIZES`, smallest first, each freed before the next is
/// allocated: every class takes a page, and frees its last block into it.
fn use_each_class_once() {
    for kib in SIZES {
        let p = block(kib);
        // SAFETY: allocated above with this layout.
        unsafe { dealloc(p, layout(kib)) };
    }
}

/// Bytes of one block per page of `pages` (from `big_pages`), but for class `size`.
fn bytes_but(pages: &[(u64, u64)], size: u64) -> u64 {
    pages
        .iter()
        .filter(|&&(block_size, _)| block_size != size)
        .map(|&(block_size, pages)| block_size * pages)
        .sum()
}

fn main() {
    use_each_class_once();
    // Each class took a span for its page, and gave back the empty pages before it past
    // the budget, the biggest blocks first. (The last class took none since.)
    let last = (SIZES[SIZES.len() - 1] * KIB) as u64;
    let pages = big_pages();
    let empty_bytes = bytes_but(&pages, last);
    assert!(
        empty_bytes <= BUDGET,
        "empty pages of classes above 8 KiB kept {empty_bytes} B of blocks, past the budget: {pages:?}"
    );
    assert!(
        pages.contains(&((SIZES[0] * KIB) as u64, 1)),
        "the smallest class gave its page back, under the budget: {pages:?}"
    );
    assert!(
        pages.contains(&(last, 1)),
        "the class used last gave its page back before taking any span: {pages:?}"
    );

    // All live at once, then freed smallest first: the heap takes no span while the
    // frees empty its pages, and each emptying holds the others to the budget, the
    // page just emptied kept (each page carved its one block).
    let blocks: Vec<*mut u8> = SIZES.iter().map(|&kib| block(kib)).collect();
    for (&kib, &p) in SIZES.iter().zip(&blocks) {
        // SAFETY: allocated above with this layout.
        unsafe { dealloc(p, layout(kib)) };
    }
    let pages = big_pages();
    let empty_bytes = bytes_but(&pages, last);
    assert!(
        empty_bytes <= EMPTIED_BUDGET,
        "frees emptying pages kept {empty_bytes} B of blocks in the others: {pages:?}"
    );
    assert!(
        pages.contains(&(last, 1)) && pages.contains(&((SIZES[0] * KIB) as u64, 1)),
        "the page emptied last, or the smallest class's, was given back: {pages:?}"
    );

    // With a second heap live, every class keeps its page.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || {
        let held = vec![7u8; 4 * KIB];
        ready_tx.send(()).unwrap();
        rx.recv().unwrap();
        drop(held);
    });
    ready_rx.recv().unwrap();
    use_each_class_once();
    let pages = big_pages();
    for kib in SIZES {
        assert!(
            pages.contains(&((kib * KIB) as u64, 1)),
            "a page was given back while another heap is live: {kib} KiB, {pages:?}"
        );
    }
    tx.send(()).unwrap();
    other.join().unwrap();
    println!("empty_pages: ok");
}

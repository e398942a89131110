//! A block grown by `realloc` that moves through the size classes above 64 KiB leaves
//! no empty page behind in each class it passed (`front/realloc.rs`, "A growing block
//! leaves no empty page behind"): a buffer grown by an eighth at a time from 72 KiB to
//! 422 KiB passes 15 classes, whose pages of 8 blocks each used to stay with the heap,
//! empty, as current pages. The second time through, the pages stay: a program that
//! grows buffers through the same classes again reuses them.
//!
//! Its own process: the page counts are process-wide.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const KIB: usize = 1024;

/// Pages in use of the classes of blocks above 64 KiB.
fn big_class_pages() -> u64 {
    ebb::stats()
        .classes
        .iter()
        .filter(|c| c.block_size > 64 * KIB as u64)
        .map(|c| c.pages)
        .sum()
}

/// Grow a buffer by an eighth at a time from 72 KiB past 400 KiB (moving through the
/// classes above 64 KiB); returns how many times it moved.
fn grow_through_the_big_classes() -> (Vec<u8>, usize) {
    let mut buffer: Vec<u8> = Vec::with_capacity(72 * KIB);
    buffer.resize(72 * KIB, 1);
    let mut moves = 0;
    while buffer.capacity() < 400 * KIB {
        let before = buffer.as_ptr();
        let grown = buffer.capacity() + buffer.capacity() / 8;
        buffer.reserve_exact(grown - buffer.len());
        buffer.resize(grown, 1);
        moves += usize::from(buffer.as_ptr() != before);
    }
    assert!(buffer.iter().all(|&b| b == 1), "contents lost in a move");
    (buffer, moves)
}

#[test]
fn a_block_grown_by_moving_leaves_no_empty_pages_behind() {
    assert_eq!(big_class_pages(), 0);
    let (buffer, moves) = grow_through_the_big_classes();
    assert!(moves >= 8, "the buffer moved only {moves} times");
    assert_eq!(
        big_class_pages(),
        1,
        "pages of classes above 64 KiB besides the one holding the buffer ({moves} moves)"
    );
    drop(buffer);
    // Once per class: growing through them again keeps their pages for the next time.
    let (buffer, moves) = grow_through_the_big_classes();
    assert!(
        big_class_pages() >= moves as u64,
        "the second growth let go of its pages: {} pages, {moves} moves",
        big_class_pages()
    );
    drop(buffer);
}

//! A class whose blocks a thread replaces at random gets bigger pages
//! (`front::slow::count_refill`): each free lands on one of the class's pages at
//! random, so with many one-slice pages most freed blocks wait, going cold, on pages
//! that are not current. After `SPREAD_REFILLS` refills in a row from nearly full
//! pages, the slow path takes a page of `SPREAD_PAGE_SLICES` slices. A thread that
//! builds and drops its blocks in phases keeps one-slice pages, and so does a heap
//! that takes in other threads' frees.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

/// 4 KiB blocks live in one-slice (64 KiB) pages of 16; 3 KiB ones in pages of 21.
const SLICE: u64 = 64 * 1024;

/// (pages, blocks they can hold) of the class of `size`-byte blocks.
fn class_pages(size: u64) -> (u64, u64) {
    let c = ebb::stats()
        .classes
        .into_iter()
        .find(|c| c.block_size == size)
        .expect("a class of that size");
    (c.pages, c.capacity_blocks)
}

/// A small xorshift generator: the test needs a fixed, spread-out sequence of slots.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn no_shared_start() {
    // The thread's blocks come from its own pages from the first one, so that the
    // pages counted are all of them.
    ebb::set_options(ebb::Options {
        shared_start: false,
        ..ebb::options()
    });
}

/// Free a block of `slots` chosen at random and allocate its replacement, 20,000 times
/// (the random-replacement shape the spread rule looks for).
fn replace_at_random(slots: &mut [*mut u8], size: usize, mut rng: u64) {
    for _ in 0..20_000 {
        let k = (next(&mut rng) % slots.len() as u64) as usize;
        // SAFETY: the slot's block, allocated by the caller or below with this size
        // and alignment.
        unsafe { ebb::free(slots[k]) };
        slots[k] = ebb::alloc(size, 8);
        assert!(!slots[k].is_null());
    }
}

#[test]
fn random_replacement_takes_a_bigger_page() {
    no_shared_start();
    const SIZE: usize = 4096;
    const LIVE: usize = 96; // six pages' worth
    std::thread::spawn(|| {
        let mut slots: Vec<*mut u8> = (0..LIVE).map(|_| ebb::alloc(SIZE, 8)).collect();
        let (pages, capacity) = class_pages(SIZE as u64);
        assert_eq!(
            capacity,
            pages * SLICE / SIZE as u64,
            "one-slice pages at first"
        );
        replace_at_random(&mut slots, SIZE, 0x9e37_79b9_7f4a_7c15);
        let (pages, capacity) = class_pages(SIZE as u64);
        assert!(
            capacity > pages * SLICE / SIZE as u64,
            "a page bigger than one slice: {pages} pages hold {capacity} blocks"
        );
        for p in slots {
            // SAFETY: as above.
            unsafe { ebb::free(p) };
        }
    })
    .join()
    .unwrap();
}

#[test]
fn phases_keep_one_slice_pages() {
    no_shared_start();
    const SIZE: usize = 3072;
    const LIVE: usize = 126; // six pages' worth
    std::thread::spawn(|| {
        for round in 0..400 {
            let blocks: Vec<*mut u8> = (0..LIVE).map(|_| ebb::alloc(SIZE, 8)).collect();
            // Most of them die at once, in or out of order; a few live one more round.
            for (i, &p) in blocks.iter().enumerate().rev() {
                if (i + round) % 7 != 0 {
                    // SAFETY: allocated above with this size and alignment.
                    unsafe { ebb::free(p) };
                }
            }
            let (pages, capacity) = class_pages(SIZE as u64);
            assert_eq!(
                capacity,
                pages * (SLICE / SIZE as u64),
                "one-slice pages only, round {round}"
            );
            for (i, &p) in blocks.iter().enumerate() {
                if (i + round) % 7 == 0 {
                    // SAFETY: as above.
                    unsafe { ebb::free(p) };
                }
            }
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_heap_that_takes_in_remote_frees_keeps_one_slice_pages() {
    no_shared_start();
    const SIZE: usize = 2560;
    const LIVE: usize = 150; // six pages' worth
    std::thread::spawn(|| {
        let mut slots: Vec<*mut u8> = (0..LIVE).map(|_| ebb::alloc(SIZE, 8)).collect();
        // Another thread frees a few of the last ones (in pages the heap still holds,
        // not abandoned ones): this heap takes those frees in on its next refills.
        let given: Vec<usize> = slots
            .drain(LIVE - LIVE / 10..)
            .map(|p| p as usize)
            .collect();
        std::thread::spawn(move || {
            for p in given {
                // SAFETY: blocks allocated above, handed over whole.
                unsafe { ebb::free(p as *mut u8) };
            }
        })
        .join()
        .unwrap();
        slots.extend((0..LIVE / 10).map(|_| ebb::alloc(SIZE, 8)));
        replace_at_random(&mut slots, SIZE, 0x2545_f491_4f6c_dd1d);
        let (pages, capacity) = class_pages(SIZE as u64);
        assert_eq!(
            capacity,
            pages * (SLICE / SIZE as u64),
            "one-slice pages only: {pages} pages hold {capacity} blocks"
        );
        for p in slots {
            // SAFETY: as above.
            unsafe { ebb::free(p) };
        }
    })
    .join()
    .unwrap();
}

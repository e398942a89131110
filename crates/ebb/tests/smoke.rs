//! Quick end-to-end checks of the global allocator across sizes and threads.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::alloc::{alloc, dealloc, realloc, Layout};

#[test]
fn sizes_and_alignments() {
    let mut size = 1usize;
    while size <= 64 << 20 {
        for align in [1usize, 8, 16, 64, 4096, 1 << 16, 1 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero layout; the block is written within bounds and freed once.
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null(), "size {size} align {align}");
                assert_eq!(p as usize % align, 0, "size {size} align {align}");
                assert!(ebb::usable_size(p) >= size);
                p.write_bytes(0xAB, size);
                dealloc(p, layout);
            }
        }
        size = size * 3 / 2 + 1;
    }
}

#[test]
fn vec_growth_and_threads() {
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut v: Vec<Box<[u64]>> = Vec::new();
                for i in 0..200_000u64 {
                    v.push(vec![i ^ t; (i % 37) as usize + 1].into_boxed_slice());
                    if i % 3 == 0 {
                        v.swap_remove((i as usize * 7) % v.len());
                    }
                }
                v
            })
        })
        .collect();
    let all: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let total: usize = all.iter().map(|v| v.len()).sum();
    assert!(total > 0);
    drop(all);
    let s = ebb::stats();
    assert!(s.threads_created >= 4);
}

#[test]
fn realloc_keeps_contents() {
    let layout = Layout::from_size_align(10, 8).unwrap();
    // SAFETY: the block is live and resized within the allocator's contract.
    unsafe {
        let mut p = alloc(layout);
        let mut size = 10;
        for i in 0..10 {
            *p.add(i) = i as u8;
        }
        while size < 100 << 20 {
            let new = size * 2;
            p = realloc(p, Layout::from_size_align(size, 8).unwrap(), new);
            assert!(!p.is_null());
            for i in 0..10 {
                assert_eq!(*p.add(i), i as u8);
            }
            *p.add(new - 1) = 7;
            size = new;
        }
        dealloc(p, Layout::from_size_align(size, 8).unwrap());
    }
}

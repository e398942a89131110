//! A thread whose current page refills only from other threads' frees takes them in on
//! its malloc fast path (`front::alloc::malloc_gather_or_slow`), not in the slow path;
//! each such refill must still count as activity, or the idle-heap stealer would take
//! the pages of a thread that is busy living on its remote frees. (Its own binary: the
//! owner thread must make no other allocator call while it counts.)

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// 1 KiB blocks: one-slice pages of 64, carved 4 KiB at first, doubling.
const BLOCK: usize = 1024;
/// Blocks handed to the freer per round: more than the first carves, fewer than a page.
const PER_ROUND: usize = 16;
const ROUNDS: usize = 40;

/// Phase word: the owner writes `HANDED`, the freer `FREED`.
const FREED: usize = 0;
const HANDED: usize = 1;
const STOP: usize = 2;

#[test]
fn refills_from_remote_frees_count_as_activity() {
    // Everything the two threads share is allocated up front: the owner's loop makes no
    // allocator call but its mallocs of BLOCK bytes.
    let slots: Arc<Vec<AtomicUsize>> =
        Arc::new((0..PER_ROUND).map(|_| AtomicUsize::new(0)).collect());
    let phase = Arc::new(AtomicUsize::new(FREED));
    let freer = {
        let (slots, phase) = (Arc::clone(&slots), Arc::clone(&phase));
        std::thread::spawn(move || loop {
            match phase.load(Ordering::Acquire) {
                HANDED => {
                    for slot in slots.iter() {
                        // SAFETY: the owner allocated the block and handed it over.
                        unsafe { ebb::free(slot.load(Ordering::Relaxed) as *mut u8) };
                    }
                    phase.store(FREED, Ordering::Release);
                }
                STOP => return,
                _ => std::thread::yield_now(),
            }
        })
    };
    let owner = std::thread::spawn(move || {
        let mut counted = None;
        for round in 0..ROUNDS {
            for slot in slots.iter() {
                let p = ebb::alloc(BLOCK, 8);
                assert!(!p.is_null());
                slot.store(p as usize, Ordering::Relaxed);
            }
            if round == 3 {
                // (Round 0 took the shared start pages' blocks: front/shared.rs.) From
                // here on each round's mallocs empty the page's free list once and
                // find the previous round's blocks on its remote-free list.
                counted = Some(ebb::thread_activity());
            }
            phase.store(HANDED, Ordering::Release);
            while phase.load(Ordering::Acquire) != FREED {
                std::thread::yield_now();
            }
        }
        let refills = ebb::thread_activity() - counted.unwrap();
        phase.store(STOP, Ordering::Release);
        refills
    });
    let refills = owner.join().unwrap();
    freer.join().unwrap();
    assert!(
        refills >= (ROUNDS - 4) as u64,
        "{refills} refills counted in {} rounds that each took remote frees in",
        ROUNDS - 4
    );
}

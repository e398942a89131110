//! cache-scratch: passive false sharing (after Hoard's cache-scratch). The main thread
//! allocates one small (8 B) object per worker, back to back; each worker frees the
//! object it was given, then repeatedly allocates an 8 B object, writes to it many
//! times and frees it. An allocator that hands a worker the block the main thread
//! allocated next to another worker's puts two threads' hot data in one cache line,
//! and the writes then bounce the line between cores.

use crate::util::{cores, scaled};
use crate::workloads::Outcome;

pub fn run(scale: f64) -> Outcome {
    let threads = cores();
    let iterations = scaled(200_000, scale, 10);
    let repetitions = 2_000;
    // Allocate the objects together, as the original does, so they share cache lines.
    let objects: Vec<usize> = (0..threads)
        .map(|_| Box::into_raw(Box::new([0u8; 8])) as usize)
        .collect();
    let handles: Vec<_> = objects
        .into_iter()
        .map(|obj| {
            std::thread::spawn(move || {
                // SAFETY: obj came from Box::into_raw above and is freed once, here.
                drop(unsafe { Box::from_raw(obj as *mut [u8; 8]) });
                let mut sum = 0u64;
                for _ in 0..iterations {
                    let b = std::hint::black_box(Box::new([0u8; 8]));
                    let p = Box::into_raw(b) as *mut u8;
                    for r in 0..repetitions {
                        // SAFETY: p points to 8 live bytes.
                        unsafe {
                            let q = p.add(r & 7);
                            q.write_volatile(q.read_volatile().wrapping_add(1));
                        }
                    }
                    // SAFETY: p is the box's pointer.
                    let b = unsafe { Box::from_raw(p as *mut [u8; 8]) };
                    sum += b.iter().map(|&x| x as u64).sum::<u64>();
                }
                sum
            })
        })
        .collect();
    let h = handles.into_iter().map(|j| j.join().unwrap()).sum();
    Outcome::new(h, threads)
}

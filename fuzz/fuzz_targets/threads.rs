//! Two threads run random operation sequences (the halves of the input) against
//! their own shadow models, and pass blocks to each other to be freed there (remote
//! frees); 4 bytes per operation, an operation byte of 0xff sends a block.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::mpsc;

mod shadow;

fn run(ops: &[u8], send: mpsc::Sender<shadow::Live>, receive: mpsc::Receiver<shadow::Live>) {
    let mut live = Vec::new();
    let mut counter = 0u8;
    for chunk in ops.chunks_exact(4) {
        if chunk[0] == 0xff && !live.is_empty() {
            let i = chunk[1] as usize % live.len();
            let _ = send.send(live.swap_remove(i));
        } else {
            shadow::step(&mut live, chunk.try_into().unwrap(), &mut counter);
        }
        while let Ok(block) = receive.try_recv() {
            shadow::release(block, chunk[2] % 2 == 0);
        }
    }
    drop(send);
    for block in live.into_iter().chain(receive) {
        shadow::release(block, false);
    }
}

fuzz_target!(|data: &[u8]| {
    let half = (data.len() / 8) * 4;
    let (a, b) = data.split_at(half);
    let (to_b, from_a) = mpsc::channel();
    let (to_a, from_b) = mpsc::channel();
    let (a, b) = (a.to_vec(), b.to_vec());
    let other = std::thread::spawn(move || run(&b, to_a, from_a));
    run(&a, to_b, from_b);
    other.join().unwrap();
});

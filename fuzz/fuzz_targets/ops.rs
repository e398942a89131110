//! Single-threaded random operation sequences through every entry point, against the
//! shadow model (`shadow.rs`): 4 bytes per operation.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod shadow;

fuzz_target!(|data: &[u8]| {
    let mut live = Vec::new();
    let mut counter = 0u8;
    for chunk in data.chunks_exact(4) {
        shadow::step(&mut live, chunk.try_into().unwrap(), &mut counter);
    }
    for block in live {
        shadow::release(block, false);
    }
});

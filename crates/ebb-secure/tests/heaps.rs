//! crates/ebb/tests/heaps.rs, run on the secure core.
extern crate ebb_secure_core as ebb;
#[path = "../../ebb/tests/heaps.rs"]
mod heaps;

//! crates/ebb/tests/stress.rs, run on the secure core.
extern crate ebb_secure_core as ebb;
#[path = "../../ebb/tests/stress.rs"]
mod stress;

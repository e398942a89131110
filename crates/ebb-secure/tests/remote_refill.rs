//! crates/ebb/tests/remote_refill.rs, run on the secure core.
extern crate ebb_secure_core as ebb;
#[path = "../../ebb/tests/remote_refill.rs"]
mod remote_refill;

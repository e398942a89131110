//! crates/ebb/tests/smoke.rs, run on the secure core.
extern crate ebb_secure_core as ebb;
#[path = "../../ebb/tests/smoke.rs"]
mod smoke;

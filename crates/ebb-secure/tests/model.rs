//! crates/ebb/tests/model.rs, run on the secure core.
extern crate ebb_secure_core as ebb;
#[path = "../../ebb/tests/model.rs"]
mod model;

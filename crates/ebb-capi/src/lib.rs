//! `libebb.so` / `libebb.a`: the ebb allocator behind the C ABI.
//!
//! Everything lives in the `ebb` crate (`c_api` module); this crate only links it with
//! the `override` feature into a shared and a static library, so `malloc`, `free`, ...
//! and the `ebb_*` functions of `include/ebb.h` are exported. Preload it
//! (`LD_PRELOAD=libebb.so program`) or link it to route every allocation of a process
//! through ebb.

// Keep the dependency linked: its #[no_mangle] exports are this library's interface.
pub use ebb::c_api::VERSION;

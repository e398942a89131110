//! `libebb.so` / `libebb.a`: the ebb allocator behind the C ABI.
//!
//! Everything lives in the `ebb` crate (`c_api` module); this crate only links it with
//! the `override` feature into a shared and a static library, so `malloc`, `free`, ...
//! and the `ebb_*` functions of `include/ebb.h` are exported. Preload it
//! (`LD_PRELOAD=libebb.so program`) or link it to route every allocation of a process
//! through ebb.

// Keep the dependency linked: its #[no_mangle] exports are this library's interface.
pub use ebb::c_api::VERSION;

/// Registers the pprof encoder with the allocator when the library is loaded, before
/// the program's `main` and before any profile can be written (it only stores a
/// function pointer: no allocation).
#[used]
#[link_section = ".init_array"]
static REGISTER_PPROF_ENCODER: extern "C" fn() = register_pprof_encoder;

extern "C" fn register_pprof_encoder() {
    ebb_pprof::install();
}

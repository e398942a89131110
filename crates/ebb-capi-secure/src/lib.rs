//! `libebb_secure.so` / `libebb_secure.a`: ebb's secure build behind the C ABI.
//!
//! The same exports as `libebb.so` (crates/ebb-capi), over the secure core
//! (crates/ebb-secure, imported as `ebb`). Unlike `libebb.so` it does not link the
//! pprof encoder: `ebb-pprof` depends on the default core, and linking it here would put
//! a second allocator core into the library. Heap profiles of the secure build are
//! written in the raw text format, which `ebb-pprof symbolize` converts (README "Find a
//! leak").

// Keep the dependency linked: its #[no_mangle] exports are this library's interface.
pub use ebb::c_api::VERSION;

//! The front end: entry points, the per-thread heap, its page queues, the slow paths.

pub mod alloc;
pub mod check;
pub mod heap;
pub mod tls;

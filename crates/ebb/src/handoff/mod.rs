//! Page hand-off between threads, without a heap in sight: pages are handed over by
//! their owner words and remote-free lists (the steps are in `protocol`).
//!
//! - `abandon`: giving a page up (listed per class if it has room), claiming a listed
//!   one, the purge of unclaimed pages' free-block insides;
//! - `drain`: remote frees, notifying a drainer, draining notified pages;
//! - `steal`: whether idle heaps may be taken over (`membarrier`);
//! - `freed_into`: heaps whose blocks other threads free (a hint for the takeover).

pub mod abandon;
pub mod drain;
pub mod freed_into;
pub mod steal;

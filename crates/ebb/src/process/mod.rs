//! Process-wide concerns: the background purger.

pub mod purge;

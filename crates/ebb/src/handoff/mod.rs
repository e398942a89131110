//! Page hand-off between threads: abandon, notify, collect, claim, steal.

pub mod steal;

//! Process-wide event and byte counters, updated on slow paths only (relaxed atomics).
//! Every layer counts here; `stats.rs` reads them into a [`crate::Stats`] snapshot.

use core::sync::atomic::AtomicU64;

/// Process-wide counters (relaxed; updated on slow paths only).
pub struct Counters {
    pub reserved: AtomicU64,
    pub committed: AtomicU64,
    /// The most `span::arena::committed_bytes` has been (`arena::note_committed_peak`,
    /// after each increase).
    pub committed_peak: AtomicU64,
    pub purged: AtomicU64,
    pub purge_calls: AtomicU64,
    pub segments: AtomicU64,
    pub threads: AtomicU64,
    pub threads_created: AtomicU64,
    pub pages_abandoned: AtomicU64,
    pub pages_reclaimed: AtomicU64,
    pub pages_collected: AtomicU64,
    pub large_allocs: AtomicU64,
    pub large_frees: AtomicU64,
    pub huge_allocs: AtomicU64,
    pub huge_frees: AtomicU64,
    pub huge_bytes: AtomicU64,
    pub huge_used: AtomicU64,
    /// Bytes of freed huge mappings kept for reuse (`huge.rs`).
    pub huge_cached: AtomicU64,
    pub purger_wakeups: AtomicU64,
    /// The purger thread's own CPU time (ns), as of its last pass.
    pub purger_cpu_ns: AtomicU64,
    /// The part of it spent in the kernel (ns, approximate), as of the same pass.
    pub purger_sys_ns: AtomicU64,
    pub invalid_frees: AtomicU64,
    pub steals: AtomicU64,
    pub steal_attempts: AtomicU64,
    /// Heaps the purger's idle walk read (`front::takeover`, the registry's holders).
    pub idle_walk_visits: AtomicU64,
    /// The walks themselves (a pass may walk again after a full batch of candidates).
    pub idle_walks: AtomicU64,
    /// Abandoned pages the purger's walk for due inside purges read
    /// (`handoff::abandon::purge_unclaimed_insides`: only pages still awaiting one).
    pub inside_walk_visits: AtomicU64,
    /// Bytes of free committed arena runs whose pages moved into new huge blocks
    /// (`span::lend`).
    pub lent_to_huge: AtomicU64,
    /// Bytes of kept huge pages moved into new huge blocks or large spans
    /// (`huge::fill_from_kept`).
    pub kept_moved: AtomicU64,
    /// Times page moves paused because the process had more kernel mappings than
    /// their budget (`span::move_budget`).
    pub move_pauses: AtomicU64,
    /// Kernel mappings the process had at the budget's last count (a gauge).
    pub mappings_counted: AtomicU64,
    pub sweeps: AtomicU64,
    /// Blocks served from the shared start pages (`front/shared.rs`).
    pub shared_start_blocks: AtomicU64,
    /// 2 MiB units advised for huge pages by dense growth (`span/large_pages.rs`).
    pub dense_huge_units: AtomicU64,
}

pub static COUNTERS: Counters = Counters {
    reserved: AtomicU64::new(0),
    committed: AtomicU64::new(0),
    committed_peak: AtomicU64::new(0),
    purged: AtomicU64::new(0),
    purge_calls: AtomicU64::new(0),
    segments: AtomicU64::new(0),
    threads: AtomicU64::new(0),
    threads_created: AtomicU64::new(0),
    pages_abandoned: AtomicU64::new(0),
    pages_reclaimed: AtomicU64::new(0),
    pages_collected: AtomicU64::new(0),
    large_allocs: AtomicU64::new(0),
    large_frees: AtomicU64::new(0),
    huge_allocs: AtomicU64::new(0),
    huge_bytes: AtomicU64::new(0),
    huge_used: AtomicU64::new(0),
    huge_cached: AtomicU64::new(0),
    huge_frees: AtomicU64::new(0),
    purger_wakeups: AtomicU64::new(0),
    purger_cpu_ns: AtomicU64::new(0),
    purger_sys_ns: AtomicU64::new(0),
    invalid_frees: AtomicU64::new(0),
    steals: AtomicU64::new(0),
    steal_attempts: AtomicU64::new(0),
    idle_walk_visits: AtomicU64::new(0),
    inside_walk_visits: AtomicU64::new(0),
    lent_to_huge: AtomicU64::new(0),
    kept_moved: AtomicU64::new(0),
    move_pauses: AtomicU64::new(0),
    mappings_counted: AtomicU64::new(0),
    idle_walks: AtomicU64::new(0),
    sweeps: AtomicU64::new(0),
    dense_huge_units: AtomicU64::new(0),
    shared_start_blocks: AtomicU64::new(0),
};

//! The workloads. Each takes a scale factor (1.0: about 0.5-3 s on a 2-core machine)
//! and returns a checksum that depends only on the work done, never on the allocator.

mod cache_scratch;
mod churn;
mod compiler;
mod frontend;
mod growth;
mod huge_replace;
mod larson;
mod mstress;
mod prodcons;
mod sweep;
mod tree_rebuild;
mod typechecker;

/// What a workload reports besides its wall time.
pub struct Outcome {
    pub checksum: u64,
    /// Threads doing the work at once (1 for single-threaded workloads).
    pub threads: usize,
    /// Extra JSON fields: (key, raw JSON value).
    pub extra: Vec<(String, String)>,
}

impl Outcome {
    pub fn new(checksum: u64, threads: usize) -> Outcome {
        Outcome {
            checksum,
            threads,
            extra: Vec::new(),
        }
    }
}

pub struct Workload {
    pub name: &'static str,
    pub run: fn(f64) -> Outcome,
}

pub const ALL: &[Workload] = &[
    Workload {
        name: "churn",
        run: churn::run,
    },
    Workload {
        name: "frontend",
        run: frontend::run,
    },
    Workload {
        name: "larson",
        run: larson::run,
    },
    Workload {
        name: "prodcons",
        run: prodcons::run,
    },
    Workload {
        name: "mstress",
        run: mstress::run,
    },
    Workload {
        name: "cache-scratch",
        run: cache_scratch::run,
    },
    Workload {
        name: "sweep",
        run: sweep::run,
    },
    Workload {
        name: "growth",
        run: growth::run,
    },
    Workload {
        name: "typechecker",
        run: typechecker::run,
    },
    Workload {
        name: "compiler",
        run: compiler::run,
    },
    Workload {
        name: "compiler-mt",
        run: compiler::run_mt,
    },
    Workload {
        name: "huge-replace",
        run: huge_replace::run,
    },
    Workload {
        name: "tree-rebuild",
        run: tree_rebuild::run,
    },
];

//! ast-churn: the Rust program of the real-programs suite.
//!
//! A tool shaped like an indexer or a language server, built on real crates (syn parses,
//! rayon spreads the work over all cores): it parses many Rust source files into ASTs
//! held in memory, re-parses a random half of them several times (replacing the old
//! trees, so frees happen on whichever worker thread drops them), walks every tree, then
//! drops 90% of them and reports the resident set two seconds later.
//!
//! ```text
//! ast-churn gen DIR FILES     write FILES generated source files into DIR (deterministic)
//! ast-churn run DIR [ROUNDS]  the measured program (default 3 rounds)
//! ```
//!
//! `run` prints a summary of the trees on stdout (identical under every allocator; the
//! suite hashes it) and `metric NAME VALUE` lines on stderr: the time of the first parse,
//! of each re-parse round, and the RSS two seconds after the drop.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use syn::visit::Visit;

// ---- the global allocator, chosen by cargo feature -------------------------------------

#[cfg(feature = "alloc-ebb")]
#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

#[cfg(all(feature = "alloc-jemalloc", not(feature = "alloc-ebb")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(
    feature = "alloc-mimalloc",
    not(any(feature = "alloc-ebb", feature = "alloc-jemalloc"))
))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Without a feature (or with `alloc-system`) the allocator is the system's `malloc`:
// glibc, or the library LD_PRELOAD names.

/// splitmix64: a small deterministic generator, so inputs and choices are the same on
/// every run and under every allocator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// ---- the generator ----------------------------------------------------------------------

const NAMES: &[&str] = &[
    "acc", "value", "count", "items", "node", "state", "buffer", "index", "key", "entry", "total",
    "left", "right", "depth", "width", "offset", "limit", "cursor", "span", "token",
];
const TYPES: &[&str] = &[
    "u64",
    "i32",
    "usize",
    "String",
    "Vec<u8>",
    "Option<u32>",
    "Box<str>",
    "HashMap<String, u64>",
    "Vec<(u32, String)>",
    "Result<u64, String>",
];

fn name(rng: &mut Rng) -> &'static str {
    NAMES[rng.below(NAMES.len() as u64) as usize]
}

fn expr(rng: &mut Rng, depth: u32, out: &mut String) {
    let choice = if depth == 0 {
        rng.below(3)
    } else {
        rng.below(10)
    };
    match choice {
        0 => write!(out, "{}", rng.below(100_000)).unwrap(),
        1 => out.push_str(name(rng)),
        2 => write!(out, "\"{}-{}\".len()", name(rng), rng.below(1000)).unwrap(),
        3..=4 => {
            const OPS: &[&str] = &["+", "-", "*", "^", "&", "|", "%"];
            out.push('(');
            expr(rng, depth - 1, out);
            write!(out, " {} ", OPS[rng.below(OPS.len() as u64) as usize]).unwrap();
            expr(rng, depth - 1, out);
            out.push(')');
        }
        5 => {
            write!(out, "{}.wrapping_add(", name(rng)).unwrap();
            expr(rng, depth - 1, out);
            out.push(')');
        }
        6 => {
            out.push_str("if ");
            expr(rng, depth - 1, out);
            out.push_str(" > 10 { ");
            expr(rng, depth - 1, out);
            out.push_str(" } else { ");
            expr(rng, depth - 1, out);
            out.push_str(" }");
        }
        7 => {
            write!(out, "{}.iter().map(|x| x + ", name(rng)).unwrap();
            expr(rng, depth - 1, out);
            out.push_str(").filter(|x| x % 3 != 0).sum::<u64>()");
        }
        8 => {
            out.push_str("match ");
            expr(rng, depth - 1, out);
            out.push_str(" { 0 => ");
            expr(rng, depth - 1, out);
            write!(out, ", 1..=9 => {}, _ => ", rng.below(50)).unwrap();
            expr(rng, depth - 1, out);
            out.push_str(" }");
        }
        _ => {
            write!(out, "helper_{}(&[", rng.below(40)).unwrap();
            for i in 0..1 + rng.below(4) {
                if i > 0 {
                    out.push_str(", ");
                }
                expr(rng, depth - 1, out);
            }
            out.push_str("])");
        }
    }
}

fn function(rng: &mut Rng, ident: &str, out: &mut String) {
    writeln!(
        out,
        "    pub fn {ident}(&self, {}: &[u64], {}: u64) -> u64 {{",
        name(rng),
        name(rng)
    )
    .unwrap();
    for _ in 0..2 + rng.below(6) {
        write!(out, "        let mut {} = ", name(rng)).unwrap();
        expr(rng, 3, out);
        out.push_str(";\n");
        if rng.below(3) == 0 {
            write!(out, "        for (i, e) in {}.iter().enumerate() {{\n            {} = {}.wrapping_mul(*e).rotate_left(i as u32);\n        }}\n", name(rng), name(rng), name(rng)).unwrap();
        }
    }
    out.push_str("        ");
    expr(rng, 4, out);
    out.push_str("\n    }\n");
}

/// One source file of about 8 to 24 KiB: structs, enums, impls, free functions.
fn source_file(index: u64) -> String {
    let mut rng = Rng(index.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed);
    let target = 8 * 1024 + rng.below(16 * 1024) as usize;
    let mut out = String::with_capacity(target + 4096);
    writeln!(
        out,
        "//! Generated module {index}.\nuse std::collections::HashMap;\n"
    )
    .unwrap();
    let mut item = 0;
    while out.len() < target {
        match rng.below(4) {
            0 | 1 => {
                writeln!(
                    out,
                    "#[derive(Debug, Clone, PartialEq)]\npub struct S{index}x{item} {{"
                )
                .unwrap();
                for f in 0..1 + rng.below(6) {
                    let ty = TYPES[rng.below(TYPES.len() as u64) as usize];
                    writeln!(out, "    pub {}_{f}: {ty},", name(&mut rng)).unwrap();
                }
                writeln!(out, "}}\n\nimpl S{index}x{item} {{").unwrap();
                for m in 0..1 + rng.below(4) {
                    function(&mut rng, &format!("method_{m}"), &mut out);
                }
                out.push_str("}\n\n");
            }
            2 => {
                writeln!(out, "pub enum E{index}x{item} {{").unwrap();
                for v in 0..2 + rng.below(6) {
                    match rng.below(3) {
                        0 => writeln!(out, "    V{v},").unwrap(),
                        1 => writeln!(out, "    V{v}(u32, String),").unwrap(),
                        _ => writeln!(out, "    V{v} {{ x: i64, y: Vec<u8> }},").unwrap(),
                    }
                }
                out.push_str("}\n\n");
            }
            _ => {
                writeln!(
                    out,
                    "pub struct F{index}x{item};\n\nimpl F{index}x{item} {{"
                )
                .unwrap();
                function(&mut rng, "run", &mut out);
                out.push_str("}\n\n");
            }
        }
        item += 1;
    }
    out
}

fn generate(dir: &Path, files: u64) {
    std::fs::create_dir_all(dir).expect("create the input directory");
    (0..files).into_par_iter().for_each(|i| {
        std::fs::write(dir.join(format!("m{i:06}.rs")), source_file(i))
            .expect("write a source file");
    });
}

// ---- the measured program ---------------------------------------------------------------

/// Counts of what a tree holds; their sums are the program's output.
#[derive(Default, Clone, Copy)]
struct Counts {
    items: u64,
    fns: u64,
    exprs: u64,
    idents: u64,
    ident_bytes: u64,
}

impl Counts {
    fn add(self, o: Counts) -> Counts {
        Counts {
            items: self.items + o.items,
            fns: self.fns + o.fns,
            exprs: self.exprs + o.exprs,
            idents: self.idents + o.idents,
            ident_bytes: self.ident_bytes + o.ident_bytes,
        }
    }
}

impl<'ast> Visit<'ast> for Counts {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        self.items += 1;
        syn::visit::visit_item(self, i);
    }
    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        self.fns += 1;
        syn::visit::visit_impl_item_fn(self, i);
    }
    fn visit_expr(&mut self, i: &'ast syn::Expr) {
        self.exprs += 1;
        syn::visit::visit_expr(self, i);
    }
    fn visit_ident(&mut self, i: &'ast proc_macro2::Ident) {
        self.idents += 1;
        // Ident's Display allocates a String: part of the workload, as in real tools.
        self.ident_bytes += i.to_string().len() as u64;
    }
}

/// A parsed file, movable between threads as a whole.
///
/// Outside a procedural macro, proc-macro2's token streams are reference-counted with
/// `Rc`, which makes `syn::File` neither `Send` nor `Sync`. A tree is only ever used as
/// a unit: it is built on one thread, then moved (into the vector, to the worker that
/// replaces or walks it, to the one that drops it), never shared or cloned.
struct Tree(syn::File);

// SAFETY: every `Rc` inside a `syn::File` points at data owned by the same tree (the
// token stream it was parsed from is dropped before `parse` returns, and trees are never
// cloned), and the tree is moved as a whole, so no two threads ever touch the same
// reference count. proc-macro2 keeps no thread-local state that a tree refers to
// (its `span-locations` feature, which would, is off).
unsafe impl Send for Tree {}

fn parse(src: &str) -> Tree {
    Tree(syn::parse_file(src).expect("generated sources are valid Rust"))
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn metric(name: &str, value: f64) {
    eprintln!("metric {name} {value:.4}");
}

fn run(dir: &Path, rounds: u32) {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("read the input directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    paths.sort();
    let mut sources: Vec<String> = paths
        .par_iter()
        .map(|p| std::fs::read_to_string(p).expect("read a source file"))
        .collect();
    let bytes: usize = sources.iter().map(String::len).sum();
    println!("files {} bytes {}", sources.len(), bytes);

    let start = Instant::now();
    let mut trees: Vec<Tree> = sources.par_iter().map(|s| parse(s)).collect();
    metric("parse_s", start.elapsed().as_secs_f64());
    metric("rss_parsed_mib", rss_kib() as f64 / 1024.0);

    let mut rng = Rng(20);
    for round in 1..=rounds {
        // A random half: a Fisher-Yates shuffle of the indices, first half taken.
        let mut order: Vec<usize> = (0..trees.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut chosen = vec![false; trees.len()];
        for &i in &order[..order.len() / 2] {
            chosen[i] = true;
        }
        let start = Instant::now();
        trees
            .par_iter_mut()
            .zip(&sources)
            .zip(&chosen)
            .for_each(|((tree, src), &pick)| {
                if pick {
                    *tree = parse(src);
                }
            });
        metric(&format!("reparse{round}_s"), start.elapsed().as_secs_f64());
    }

    let start = Instant::now();
    let total = trees
        .par_iter_mut()
        .map(|t| {
            let mut c = Counts::default();
            c.visit_file(&t.0);
            c
        })
        .reduce(Counts::default, Counts::add);
    metric("visit_s", start.elapsed().as_secs_f64());
    println!(
        "items {} fns {} exprs {} idents {} ident_bytes {}",
        total.items, total.fns, total.exprs, total.idents, total.ident_bytes
    );

    // Keep every tenth tree (and its source); drop the rest, on all threads.
    let mut index = 0;
    let keep: Vec<bool> = (0..trees.len()).map(|i| i % 10 == 0).collect();
    let (kept_trees, dropped): (Vec<_>, Vec<_>) = trees.into_iter().partition(|_| {
        index += 1;
        keep[index - 1]
    });
    dropped.into_par_iter().for_each(drop);
    let mut i = 0;
    sources.retain(|_| {
        i += 1;
        keep[i - 1]
    });
    std::thread::sleep(Duration::from_secs(2));
    metric("rss_after_drop_mib", rss_kib() as f64 / 1024.0);
    println!(
        "kept {} trees of {} bytes",
        kept_trees.len(),
        sources.iter().map(String::len).sum::<usize>()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("gen") if args.len() == 4 => generate(
            Path::new(&args[2]),
            args[3].parse().expect("FILES is a number"),
        ),
        Some("run") if args.len() >= 3 => {
            let rounds = args
                .get(3)
                .map_or(3, |r| r.parse().expect("ROUNDS is a number"));
            run(Path::new(&args[2]), rounds)
        }
        _ => {
            eprintln!("usage: ast-churn gen DIR FILES | ast-churn run DIR [ROUNDS]");
            std::process::exit(2);
        }
    }
}

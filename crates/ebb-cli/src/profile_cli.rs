//! The heap-profile subcommands' arguments and what they do: `ebb top`, `ebb flame`
//! (a profile file) and `ebb profile PID` (a running process, through `live.rs`).

use crate::live;
use crate::profile_files::{
    default_flame_path, flame_svg, other_instance_beside, series_text, top_text,
};
use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct ProfileQuery {
    /// A heap profile (.pb.gz: ebb's, or any pprof heap profile; or ebb's .raw).
    #[arg(value_name = "PROFILE")]
    pub profile: PathBuf,
    /// Subtract this earlier profile first: what grew between the two.
    #[arg(long, value_name = "PROFILE")]
    pub base: Option<PathBuf>,
    /// The sample type: inuse_space, inuse_objects, alloc_space, alloc_objects
    /// [default: the profile's default, inuse_space for ebb's].
    #[arg(long, value_name = "TYPE")]
    pub index: Option<String>,
    /// Count the standard libraries as allocation sites, as pprof does (Rust's Vec
    /// growth, Box::new, format!, HashMap's tables; C++'s std::string, std::vector);
    /// by default what they allocate is charged to the code that called them.
    #[arg(long)]
    pub std_sites: bool,
}

impl ProfileQuery {
    fn sites(&self) -> ebb_pprof::top::Sites {
        sites(self.std_sites)
    }
}

/// What `--std-sites` asks for: Rust's collections as sites (pprof's view), or not.
fn sites(std_sites: bool) -> ebb_pprof::top::Sites {
    if std_sites {
        ebb_pprof::top::Sites::OutsideAllocator
    } else {
        ebb_pprof::top::Sites::OutsideStd
    }
}

#[derive(Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub query: ProfileQuery,
    /// More profiles of the same process (`EBB_PROFILE_INTERVAL`, `EBB_PROFILE_SIGNAL`;
    /// a glob such as /tmp/heap.1234.*.pb.gz will do, in any order): one table of what
    /// each site held in each, oldest first, by growth; a site that kept rising is
    /// marked (a leak, or a cache without a bound).
    #[arg(value_name = "LATER", conflicts_with_all = ["base", "stacks"])]
    pub later: Vec<PathBuf>,
    /// Rows (stacks with --stacks) to print.
    #[arg(short, default_value_t = 20)]
    pub n: usize,
    /// Whole stacks from the allocation site outward, identical ones added up, instead
    /// of functions: the callers behind a site every path goes through (Vec growth).
    #[arg(long)]
    pub stacks: bool,
    /// With --stacks: frames shown of each stack.
    #[arg(long, default_value_t = 12, requires = "stacks")]
    pub depth: usize,
}

#[derive(Args)]
pub struct ProfileNowArgs {
    /// The process id.
    #[arg(value_name = "PID")]
    pub pid: i32,
    /// Subtract the profile the process wrote before this one: what grew since (run
    /// `ebb profile PID` once first; with EBB_PROFILE_INTERVAL the one before may be
    /// the timer's: `ebb top --base` of two chosen files compares any two).
    #[arg(long)]
    pub since_last: bool,
    /// Print what was live at the process's peak so far (within 1/16 of it), freed
    /// since or not: what made its memory peak.
    #[arg(long, conflicts_with = "since_last")]
    pub peak: bool,
    /// Print each site's live bytes in every profile the process has written (on the
    /// signal, and with EBB_PROFILE_INTERVAL on its timer), oldest first, by growth: a
    /// site that kept rising is a leak.
    #[arg(long, conflicts_with_all = ["since_last", "peak"])]
    pub over_time: bool,
    /// The sample type: inuse_space, inuse_objects, alloc_space, alloc_objects
    /// [default: inuse_space].
    #[arg(long, value_name = "TYPE")]
    pub index: Option<String>,
    /// Rows to print.
    #[arg(short, default_value_t = 20)]
    pub n: usize,
    /// Count the standard libraries (Rust's collections, C++'s std::) as allocation
    /// sites, as pprof does.
    #[arg(long)]
    pub std_sites: bool,
}

#[derive(Args)]
pub struct FlameArgs {
    #[command(flatten)]
    pub query: ProfileQuery,
    /// The same process's other ebb instance's profile of the same moment (a Rust
    /// program on ebb with `libebb.so` preloaded writes a `.raw` beside the `.pb.gz`):
    /// both drawn as one.
    #[arg(value_name = "OTHER_INSTANCE", conflicts_with = "base")]
    pub other: Option<PathBuf>,
    /// The SVG to write [default: the profile's name with .svg for .pb.gz].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the stacks in the folded format (one `outer;...;site value` a line).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
}

/// `ebb top`: the table of one profile, minus a base; of several, over time.
pub fn top(args: &TopArgs) -> Result<ExitCode> {
    if !args.later.is_empty() {
        let mut paths = vec![args.query.profile.clone()];
        paths.extend(args.later.iter().cloned());
        let table = series_text(
            &paths,
            args.query.index.as_deref(),
            args.query.sites(),
            args.n,
        )?;
        print!("{table}");
        return Ok(ExitCode::SUCCESS);
    }
    let table = top_text(
        &args.query.profile,
        args.query.base.as_deref(),
        args.query.index.as_deref(),
        args.query.sites(),
        args.n,
        args.stacks.then_some(args.depth),
    )?;
    print!("{table}");
    if args.query.base.is_none() {
        hint_other_instance(&args.query.profile, "top");
    }
    Ok(ExitCode::SUCCESS)
}

/// On stderr, when `profile` is one of a process's two ebb instances' profiles at exit
/// and the other's lies beside it: how to see the whole process.
fn hint_other_instance(profile: &Path, command: &str) {
    if let Some(other) = other_instance_beside(profile) {
        eprintln!(
            "ebb: {} beside it is the same process's other ebb instance (a Rust program on \
             ebb with libebb.so preloaded); `ebb {command} {} {}` shows both",
            other.display(),
            profile.display(),
            other.display()
        );
    }
}

/// `ebb flame`: the profile's stacks as an SVG (and folded stacks with `--folded`).
pub fn flame(args: &FlameArgs) -> Result<ExitCode> {
    let svg = args
        .output
        .clone()
        .unwrap_or_else(|| default_flame_path(&args.query.profile));
    let what = flame_svg(
        &args.query.profile,
        args.other.as_deref(),
        args.query.base.as_deref(),
        args.query.index.as_deref(),
        args.query.sites(),
        &svg,
        args.folded.as_deref(),
    )?;
    eprintln!("ebb: wrote {} ({what})", svg.display());
    if args.other.is_none() && args.query.base.is_none() {
        hint_other_instance(&args.query.profile, "flame");
    }
    if let Some(folded) = &args.folded {
        eprintln!("ebb: wrote {}", folded.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// `ebb profile PID` (see `live::profile_table`).
pub fn profile_now(args: &ProfileNowArgs) -> Result<ExitCode> {
    let shown = match (args.since_last, args.peak, args.over_time) {
        (true, _, _) => live::Shown::SinceLast,
        (_, true, _) => live::Shown::Peak,
        (_, _, true) => live::Shown::OverTime,
        _ => live::Shown::Now,
    };
    let table = live::profile_table(
        args.pid,
        shown,
        args.index.as_deref(),
        sites(args.std_sites),
        args.n,
    )?;
    print!("{table}");
    Ok(ExitCode::SUCCESS)
}

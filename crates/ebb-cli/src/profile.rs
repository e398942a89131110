//! The heap profiler from the command line: `ebb run --profile PREFIX` has every ebb
//! process of the tree write a profile at exit (`EBB_PROFILE`) and prints the top
//! allocation sites of what it wrote; `ebb top` prints them for any profile, minus a
//! base (`ebb_pprof::top`: `pprof -top` for readers without Go); `ebb flame` draws its
//! stacks as a flame graph (`inferno`).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Rows of each table `ebb run --profile` prints.
const RUN_ROWS: usize = 10;
/// Profiles of a tree `ebb run --profile` summarises (the ones that allocated most).
const RUN_PROFILES: usize = 3;

/// A profile a process of the tree wrote.
pub struct Written {
    pub path: PathBuf,
    pub profile: ebb_pprof::proto::Profile,
    /// Written at exit (`<prefix>.<pid>.pb.gz`), not on a signal (`.<pid>.<n>.pb.gz`).
    pub at_exit: bool,
    /// Its estimate of the bytes allocated (`alloc_space`): 0 if it holds no sample.
    pub allocated: i64,
}

/// The directory and file-name stem of `prefix`.
fn split_prefix(prefix: &Path) -> Option<(PathBuf, &str)> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((dir, prefix.file_name()?.to_str()?))
}

/// The files `<prefix>.<pid>.pb.gz` (sequence None) and `<prefix>.<pid>.<n>.pb.gz`
/// in `prefix`'s directory, as (path, pid, sequence, modified).
fn profile_files(prefix: &Path) -> Vec<(PathBuf, u32, Option<u32>, SystemTime)> {
    let Some((dir, stem)) = split_prefix(prefix) else {
        return Vec::new();
    };
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let rest = name
                .to_str()?
                .strip_prefix(stem)?
                .strip_prefix('.')?
                .strip_suffix(".pb.gz")?;
            let (pid, sequence) = match rest.split_once('.') {
                Some((pid, n)) => (number(pid)?, Some(number(n)?)),
                None => (number(rest)?, None),
            };
            let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
            Some((entry.path(), pid, sequence, modified))
        })
        .collect()
}

/// The profiles process `pid` wrote on a signal, in order (`.<pid>.1.pb.gz`, ...).
pub fn signal_profiles(prefix: &Path, pid: i32) -> Vec<PathBuf> {
    let mut files: Vec<(u32, PathBuf)> = profile_files(prefix)
        .into_iter()
        .filter(|&(_, p, _, _)| p as i32 == pid)
        .filter_map(|(path, _, n, _)| Some((n?, path)))
        .collect();
    files.sort();
    files.into_iter().map(|(_, path)| path).collect()
}

/// For each process that wrote profiles since `since`: its profile at exit, or else its
/// last one on a signal (`ebb run` asked for one before stopping the tree). Largest
/// first by allocated bytes.
pub fn written_since(prefix: &Path, since: SystemTime) -> Vec<Written> {
    let mut last: std::collections::HashMap<u32, (PathBuf, Option<u32>)> =
        std::collections::HashMap::new();
    for (path, pid, sequence, modified) in profile_files(prefix) {
        if modified < since {
            continue;
        }
        let newer = match last.get(&pid) {
            None => true,
            Some((_, None)) => false,
            Some((_, Some(n))) => sequence.map_or(true, |m| m > *n),
        };
        if newer {
            last.insert(pid, (path, sequence));
        }
    }
    let mut found: Vec<Written> = last
        .into_values()
        .filter_map(|(path, sequence)| {
            let profile = ebb_pprof::read_gzipped(&path).ok()?;
            let allocated =
                ebb_pprof::top::top(&profile, None, Some("alloc_space")).map_or(0, |t| t.total);
            Some(Written {
                path,
                profile,
                at_exit: sequence.is_none(),
                allocated,
            })
        })
        .collect();
    found.sort_by(|a, b| {
        b.allocated
            .cmp(&a.allocated)
            .then_with(|| a.path.cmp(&b.path))
    });
    found
}

/// What `ebb run --profile` prints after the run: for the profiles that allocated
/// most, what was still live at exit and what was allocated, by site.
pub fn run_text(prefix: &Path, since: SystemTime) -> String {
    use std::fmt::Write;
    let profiles = written_since(prefix, since);
    let mut out = String::new();
    if profiles.is_empty() {
        let _ = writeln!(
            out,
            "\nebb run: no heap profile written to {}.<pid>.pb.gz (a process writes one when it \
             exits normally, or when ebb asks before stopping it)",
            prefix.display()
        );
        return out;
    }
    let sampled = profiles.iter().filter(|w| w.allocated > 0).count();
    let which = if sampled == 0 {
        "; none holds a sample: the processes allocated too little for the sampling \
         interval (--profile-rate)"
            .to_string()
    } else if sampled > RUN_PROFILES {
        format!("; {sampled} with samples, the {RUN_PROFILES} that allocated most:")
    } else if sampled < profiles.len() {
        format!("; {sampled} with samples:")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\nebb run: {} heap profile{} written ({}.<pid>.pb.gz){which}",
        profiles.len(),
        if profiles.len() == 1 { "" } else { "s" },
        prefix.display(),
    );
    for written in profiles
        .iter()
        .filter(|w| w.allocated > 0)
        .take(RUN_PROFILES)
    {
        let _ = writeln!(out, "\n  {}", written.path.display());
        let live = if written.at_exit {
            "still live at exit (leaks, caches)"
        } else {
            "live when ebb stopped it (leaks, caches)"
        };
        for (index, what) in [
            ("inuse_space", live),
            ("alloc_space", "allocated over the run"),
        ] {
            match ebb_pprof::top::top(&written.profile, None, Some(index)) {
                Ok(table) => {
                    let _ = writeln!(out, "  {what}:");
                    for line in ebb_pprof::top::format(&table, RUN_ROWS).lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "  {what}: {e}");
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n  more: ebb top PROFILE [--base EARLIER] [--index alloc_objects] [-n 50]; \
         ebb flame PROFILE (a flame graph); go tool pprof -http=: PROFILE"
    );
    out
}

/// Where `ebb flame` writes by default: beside the profile, `.pb.gz` (or whatever
/// extension it has) replaced by `.svg`.
pub fn default_flame_path(profile: &Path) -> PathBuf {
    let name = profile
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("profile");
    let stem = name
        .strip_suffix(".pb.gz")
        .or_else(|| name.strip_suffix(".gz"))
        .unwrap_or(name);
    profile.with_file_name(format!("{stem}.svg"))
}

/// `ebb flame`: the stacks of one profile (minus a base: what grew) as a flame graph
/// in `svg`, and in the folded format in `folded` if given; returns a line saying what
/// was drawn.
pub fn flame(
    profile_path: &Path,
    base_path: Option<&Path>,
    index: Option<&str>,
    svg: &Path,
    folded: Option<&Path>,
) -> Result<String> {
    let read = |path: &Path| {
        ebb_pprof::read_gzipped(path)
            .with_context(|| format!("cannot read the profile {}", path.display()))
    };
    let profile = read(profile_path)?;
    let base = base_path.map(read).transpose()?;
    let table = match ebb_pprof::top::top_stacks(&profile, base.as_ref(), index) {
        Ok(table) => table,
        Err(e) => bail!("{e}"),
    };
    let lines = ebb_pprof::top::folded(&table);
    if let Some(path) = folded {
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(path, text)
            .with_context(|| format!("cannot write the folded stacks to {}", path.display()))?;
    }
    let drawn: i64 = table.rows.iter().map(|r| r.1).filter(|&v| v > 0).sum();
    let what = match (&base_path, table.unit.as_str()) {
        (Some(b), _) => format!("{} that grew since {}", table.index, b.display()),
        (None, _) => table.index.clone(),
    };
    if lines.is_empty() {
        bail!(
            "nothing to draw: {} holds no {what} (a profile minus itself, or one with no samples)",
            profile_path.display()
        );
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = format!("ebb heap profile: {what}");
    options.subtitle = Some(format!(
        "{}: {} in {} stacks (allocation sites on top; click to zoom, Ctrl-F to search)",
        profile_path.display(),
        ebb_pprof::top::format_value(drawn, &table.unit),
        lines.len()
    ));
    options.count_name = table.unit.clone();
    options.name_type = "Function:".into();
    options.colors =
        inferno::flamegraph::Palette::Basic(inferno::flamegraph::color::BasicPalette::Mem);
    let file = std::fs::File::create(svg)
        .with_context(|| format!("cannot write the flame graph to {}", svg.display()))?;
    inferno::flamegraph::from_lines(
        &mut options,
        lines.iter().map(String::as_str),
        std::io::BufWriter::new(file),
    )
    .with_context(|| format!("cannot draw the flame graph to {}", svg.display()))?;
    Ok(format!(
        "{what}: {} in {} stacks",
        ebb_pprof::top::format_value(drawn, &table.unit),
        lines.len()
    ))
}

/// `ebb top`: the table of one profile, minus a base; by stacks of `stack_depth`
/// frames if given.
pub fn top(
    profile: &Path,
    base: Option<&Path>,
    index: Option<&str>,
    rows: usize,
    stack_depth: Option<usize>,
) -> Result<String> {
    let read = |path: &Path| {
        ebb_pprof::read_gzipped(path)
            .with_context(|| format!("cannot read the profile {}", path.display()))
    };
    let profile = read(profile)?;
    let base = base.map(read).transpose()?;
    let text = match stack_depth {
        Some(depth) => ebb_pprof::top::top_stacks(&profile, base.as_ref(), index)
            .map(|table| ebb_pprof::top::format_stacks(&table, rows, depth)),
        None => ebb_pprof::top::top(&profile, base.as_ref(), index)
            .map(|table| ebb_pprof::top::format(&table, rows)),
    };
    match text {
        Ok(text) => Ok(text),
        Err(e) => bail!("{e}"),
    }
}

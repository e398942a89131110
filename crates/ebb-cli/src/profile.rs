//! The heap profiler from the command line: `ebb run --profile PREFIX` has every ebb
//! process of the tree write a profile at exit (`EBB_PROFILE`) and prints the top
//! allocation sites of what it wrote; `ebb top` prints them for any profile, minus a
//! base (`ebb_pprof::top`: `pprof -top` for readers without Go).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Rows of each table `ebb run --profile` prints.
const RUN_ROWS: usize = 10;
/// Profiles of a tree `ebb run --profile` summarises (the ones that allocated most).
const RUN_PROFILES: usize = 3;

/// The profiles `<prefix>.<pid>.pb.gz` written since `since` (at exit: no `.<n>` of a
/// signal), largest first by allocated bytes.
pub fn written_since(
    prefix: &Path,
    since: SystemTime,
) -> Vec<(PathBuf, ebb_pprof::proto::Profile)> {
    let dir = match prefix.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(stem) = prefix.file_name().and_then(|n| n.to_str()) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, ebb_pprof::proto::Profile, i64)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return false;
            };
            let pid = name
                .strip_prefix(stem)
                .and_then(|rest| rest.strip_prefix('.'))
                .and_then(|rest| rest.strip_suffix(".pb.gz"));
            pid.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t >= since)
        })
        .filter_map(|entry| {
            let path = entry.path();
            let profile = ebb_pprof::read_gzipped(&path).ok()?;
            let allocated =
                ebb_pprof::top::top(&profile, None, Some("alloc_space")).map_or(0, |t| t.total);
            Some((path, profile, allocated))
        })
        .collect();
    found.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    found
        .into_iter()
        .map(|(p, profile, _)| (p, profile))
        .collect()
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
            "\nebb run: no heap profile written to {}.<pid>.pb.gz (a profile is written when \
             a process exits normally; one stopped by a signal writes none)",
            prefix.display()
        );
        return out;
    }
    let _ = writeln!(
        out,
        "\nebb run: {} heap profile{} written ({}.<pid>.pb.gz){}",
        profiles.len(),
        if profiles.len() == 1 { "" } else { "s" },
        prefix.display(),
        if profiles.len() > RUN_PROFILES {
            format!("; the {RUN_PROFILES} that allocated most:")
        } else {
            String::new()
        }
    );
    for (path, profile) in profiles.iter().take(RUN_PROFILES) {
        let _ = writeln!(out, "\n  {}", path.display());
        for (index, what) in [
            ("inuse_space", "still live at exit (leaks, caches)"),
            ("alloc_space", "allocated over the run"),
        ] {
            match ebb_pprof::top::top(profile, None, Some(index)) {
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
         go tool pprof -http=: PROFILE"
    );
    out
}

/// `ebb top`: the table of one profile, minus a base.
pub fn top(
    profile: &Path,
    base: Option<&Path>,
    index: Option<&str>,
    rows: usize,
) -> Result<String> {
    let read = |path: &Path| {
        ebb_pprof::read_gzipped(path)
            .with_context(|| format!("cannot read the profile {}", path.display()))
    };
    let profile = read(profile)?;
    let base = base.map(read).transpose()?;
    match ebb_pprof::top::top(&profile, base.as_ref(), index) {
        Ok(table) => Ok(ebb_pprof::top::format(&table, rows)),
        Err(e) => bail!("{e}"),
    }
}

//! Profile files read back: one profile's top sites or stacks (minus a base), several
//! of one process over time, a flame graph; for `ebb top`, `ebb flame` and `ebb profile
//! PID` (`profile_cli.rs`, `live.rs`). A process with two ebb instances (a Rust program
//! on ebb with `libebb.so` preloaded) writes a `.raw` and a `.pb.gz` at each moment:
//! read together, they are merged moment by moment (`ebb_pprof::merge::over_time`).

use crate::profile::{is_raw, nanos, read_profile};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// When a profile was written: a pprof file's `time_nanos` (ebb's encoder sets it when
/// it writes; the peak's says when the peak was), a raw file's modification time.
fn written_at(path: &Path, profile: &ebb_pprof::proto::Profile) -> SystemTime {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    match modified {
        Some(m) if path.extension().is_some_and(|e| e == "raw") || profile.time_nanos <= 0 => m,
        _ => std::time::UNIX_EPOCH + Duration::from_nanos(profile.time_nanos.max(0) as u64),
    }
}

/// The process id in a profile's name (`<prefix>.<pid>[.<n>|.peak].pb.gz`, or
/// `.raw`): the first all-digit dot-separated part after the stem.
fn profile_pid(path: &Path) -> Option<&str> {
    let name = path.file_name()?.to_str()?;
    let stem = name
        .strip_suffix(".pb.gz")
        .or_else(|| name.strip_suffix(".raw"))?;
    stem.split('.')
        .skip(1)
        .find(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// `ebb top A B C ...`: each site's value in each profile, oldest first (by when each
/// was written, whatever order a shell glob gave), the columns labelled by seconds after
/// the first; peak profiles (`.peak.`) are left out, as another view. A process's two
/// instances' profiles (`.pb.gz` and `.raw`) are merged moment by moment
/// (`ebb_pprof::merge::over_time`): those of one moment give one table, not a series.
pub fn series_text(
    paths: &[PathBuf],
    index: Option<&str>,
    sites: ebb_pprof::top::Sites,
    rows: usize,
) -> Result<String> {
    let mut profiles = Vec::new();
    let mut left_out = Vec::new();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.contains(".peak.") {
            left_out.push(path.display().to_string());
            continue;
        }
        let profile = read_profile(path)?;
        profiles.push((written_at(path, &profile), path.clone(), profile));
    }
    if profiles.len() < 2 {
        bail!(
            "a table over time needs two profiles or more (left out: {})",
            left_out.join(", ")
        );
    }
    let mut pids: Vec<&str> = profiles
        .iter()
        .filter_map(|(_, path, _)| profile_pid(path))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    if pids.len() > 1 {
        bail!(
            "profiles of {} processes (pids {}): a table over time is of one process's \
             profiles (<prefix>.<pid>.<n>.pb.gz)",
            pids.len(),
            pids.join(", ")
        );
    }
    profiles.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let instances = profiles.iter().filter(|(_, path, _)| is_raw(path)).count();
    let moments = moments_of(
        profiles
            .iter()
            .map(|(at, path, p)| (*at, path.as_path(), p)),
    )?;
    let two = instances > 0 && instances < profiles.len();
    let merged_note = if two {
        "(the process's two ebb instances, its Rust code's .raw and its C code's .pb.gz, \
         merged at each moment)\n"
    } else {
        ""
    };
    if moments.len() == 1 {
        // A `.pb.gz` and a `.raw` of one moment: one profile of the process.
        let table = ebb_pprof::top::top(&moments[0].1, None, index, sites)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(format!(
            "{}(the process's two ebb instances, its Rust code's .raw and its C code's \
             .pb.gz, merged)\n",
            ebb_pprof::top::format(&table, rows)
        ));
    }
    let first = moments[0].0;
    let labels: Vec<String> = moments
        .iter()
        .map(|(at, _)| format!("+{:.1} s", (at - first) as f64 / 1e9))
        .collect();
    let refs: Vec<&ebb_pprof::proto::Profile> = moments.iter().map(|(_, p)| p).collect();
    let table = match ebb_pprof::series::series(&refs, index, sites) {
        Ok(table) => table,
        Err(e) => bail!("{e}"),
    };
    let mut text = ebb_pprof::series::format(&table, &labels, rows);
    text.push_str(merged_note);
    if !left_out.is_empty() {
        text.push_str(&format!(
            "(left out, profiles at the peak: {}; `ebb top` one of them alone)\n",
            left_out.join(", ")
        ));
    }
    Ok(text)
}

/// One process's profiles (when written, file, profile), its `.raw` ones by one
/// instance and its `.pb.gz` ones by another, as one profile per moment
/// (`ebb_pprof::merge::over_time`), oldest first.
fn moments_of<'a>(
    profiles: impl Iterator<Item = (SystemTime, &'a Path, &'a ebb_pprof::proto::Profile)>,
) -> Result<Vec<(u64, ebb_pprof::proto::Profile)>> {
    let timed: Vec<ebb_pprof::merge::Timed> = profiles
        .map(|(at, path, profile)| ebb_pprof::merge::Timed {
            instance: usize::from(is_raw(path)),
            at_ns: nanos(at),
            profile,
        })
        .collect();
    ebb_pprof::merge::over_time(&timed).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The profiles of one process's two ebb instances at one moment (a `.pb.gz` and a
/// `.raw`), merged; an error if they are not that.
pub fn one_moment(paths: &[PathBuf]) -> Result<ebb_pprof::proto::Profile> {
    let mut profiles = Vec::new();
    for path in paths {
        let profile = read_profile(path)?;
        profiles.push((written_at(path, &profile), path, profile));
    }
    let mut pids: Vec<&str> = profiles
        .iter()
        .filter_map(|(_, path, _)| profile_pid(path))
        .collect();
    pids.dedup();
    let raw = profiles.iter().filter(|(_, path, _)| is_raw(path)).count();
    if pids.len() > 1 || raw != 1 {
        bail!(
            "{} and {} are not one process's two ebb instances (its .pb.gz and its .raw \
             of one moment)",
            paths[0].display(),
            paths[1].display()
        );
    }
    let mut moments = moments_of(
        profiles
            .iter()
            .map(|(at, path, p)| (*at, path.as_path(), p)),
    )?;
    Ok(moments.pop().expect("two profiles are a moment").1)
}

/// The same process's other ebb instance's profile of the same moment beside `path`,
/// if there is one: `heap.77.raw` beside `heap.77.pb.gz` (at exit; a numbered profile
/// `heap.77.3.raw` beside `heap.77.3.pb.gz` is each instance's third, not one moment,
/// and a peak is its own instance's moment, so neither is named).
pub fn other_instance_beside(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let (stem, other) = match name.strip_suffix(".pb.gz") {
        Some(stem) => (stem, ".raw"),
        None => (name.strip_suffix(".raw")?, ".pb.gz"),
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let mut parts = stem.rsplit('.');
    // `<prefix>.<pid>`: digits after a part that is not (`<prefix>.<pid>.<n>` is
    // numbered).
    let at_exit = digits(parts.next()?) && !digits(parts.next()?);
    let beside = path.with_file_name(format!("{stem}{other}"));
    (at_exit && beside.is_file()).then_some(beside)
}

/// Where `ebb flame` writes by default: beside the profile, `.pb.gz` (`.gz`, `.raw`)
/// replaced by `.svg`.
pub fn default_flame_path(profile: &Path) -> PathBuf {
    let name = profile
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("profile");
    let stem = name
        .strip_suffix(".pb.gz")
        .or_else(|| name.strip_suffix(".gz"))
        .or_else(|| name.strip_suffix(".raw"))
        .unwrap_or(name);
    profile.with_file_name(format!("{stem}.svg"))
}

/// `ebb flame`: the stacks of one profile (minus a base: what grew; or with the same
/// process's other instance's profile of the same moment, `other`, merged in) as a
/// flame graph in `svg`, and in the folded format in `folded` if given; returns a line
/// saying what was drawn.
pub fn flame_svg(
    profile_path: &Path,
    other: Option<&Path>,
    base_path: Option<&Path>,
    index: Option<&str>,
    sites: ebb_pprof::top::Sites,
    svg: &Path,
    folded: Option<&Path>,
) -> Result<String> {
    let profile = match other {
        None => read_profile(profile_path)?,
        Some(other) => one_moment(&[profile_path.to_path_buf(), other.to_path_buf()])?,
    };
    let base = base_path.map(read_profile).transpose()?;
    let table = match ebb_pprof::top::top_stacks(&profile, base.as_ref(), index, sites) {
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
pub fn top_text(
    profile: &Path,
    base: Option<&Path>,
    index: Option<&str>,
    sites: ebb_pprof::top::Sites,
    rows: usize,
    stack_depth: Option<usize>,
) -> Result<String> {
    let profile = read_profile(profile)?;
    let base = base.map(read_profile).transpose()?;
    top_of(&profile, base.as_ref(), index, sites, rows, stack_depth)
}

/// [`top_text`] of profiles already read.
pub fn top_of(
    profile: &ebb_pprof::proto::Profile,
    base: Option<&ebb_pprof::proto::Profile>,
    index: Option<&str>,
    sites: ebb_pprof::top::Sites,
    rows: usize,
    stack_depth: Option<usize>,
) -> Result<String> {
    let text = match stack_depth {
        Some(depth) => ebb_pprof::top::top_stacks(profile, base, index, sites)
            .map(|table| ebb_pprof::top::format_stacks(&table, rows, depth)),
        None => ebb_pprof::top::top(profile, base, index, sites)
            .map(|table| ebb_pprof::top::format(&table, rows)),
    };
    match text {
        Ok(text) => Ok(text),
        Err(e) => bail!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::raw_text;

    #[test]
    fn the_process_id_is_read_from_a_profile_name() {
        for (name, pid) in [
            ("/tmp/heap.1234.pb.gz", Some("1234")),
            ("/tmp/heap.1234.7.pb.gz", Some("1234")),
            ("/tmp/heap.1234.peak.raw", Some("1234")),
            ("/tmp/my.heap.99.3.pb.gz", Some("99")),
            ("/tmp/grew.svg", None),
            ("/tmp/renamed.pb.gz", None),
        ] {
            assert_eq!(profile_pid(Path::new(name)), pid, "{name}");
        }
    }

    /// `ebb top` given a process's `.pb.gz` and `.raw` (its two instances): one table of
    /// both, not a series of two moments; given two moments of each, a series of two
    /// moments (not four), each holding both instances.
    #[test]
    fn ebb_top_of_two_instances_merges_them_moment_by_moment() {
        let dir = std::env::temp_dir().join(format!("ebb-cli-top2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |secs: u64| std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs);
        let write = |name: &str, bytes: u64, secs: u64| {
            let path = dir.join(name);
            if name.ends_with(".raw") {
                std::fs::write(&path, raw_text(bytes, true)).unwrap();
                let file = std::fs::File::options().write(true).open(&path).unwrap();
                file.set_modified(at(secs)).unwrap();
            } else {
                let mut raw = ebb_pprof::RawProfile::parse(&raw_text(bytes, true)).unwrap();
                raw.time_nanos = Some(nanos(at(secs)) as i64);
                ebb_pprof::write_gzipped(&ebb_pprof::build(&raw), &path).unwrap();
            }
            path
        };
        let sites = ebb_pprof::top::Sites::OutsideAllocator;
        let one = [
            write("heap.77.pb.gz", 4 << 20, 10),
            write("heap.77.raw", 64 << 20, 10),
        ];
        let text = series_text(&one, None, sites, 5).unwrap();
        assert!(text.contains("two ebb instances"), "{text}");
        assert!(!text.contains("+0.0 s"), "one moment, not a series: {text}");
        assert!(
            text.contains("68.0 MiB"),
            "both instances' live bytes: {text}"
        );
        let four = [
            write("heap.78.1.pb.gz", 1 << 20, 1),
            write("heap.78.1.raw", 8 << 20, 1),
            write("heap.78.2.pb.gz", 2 << 20, 2),
            write("heap.78.2.raw", 16 << 20, 2),
        ];
        let text = series_text(&four, None, sites, 5).unwrap();
        assert!(text.contains("+1.0 s"), "{text}");
        assert!(!text.contains("+2.0 s"), "two moments, not four: {text}");
        assert!(
            text.contains("9.0 MiB") && text.contains("18.0 MiB"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    #[test]
    fn the_other_instance_of_an_exit_profile_is_found_beside_it() {
        let dir = std::env::temp_dir().join(format!("ebb-cli-beside-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "heap.77.pb.gz",
            "heap.77.raw",
            "heap.78.3.pb.gz",
            "heap.78.3.raw",
        ] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        std::fs::write(dir.join("heap.79.pb.gz"), "").unwrap();
        let beside = |name: &str| other_instance_beside(&dir.join(name));
        assert_eq!(beside("heap.77.pb.gz"), Some(dir.join("heap.77.raw")));
        assert_eq!(beside("heap.77.raw"), Some(dir.join("heap.77.pb.gz")));
        assert_eq!(beside("heap.78.3.pb.gz"), None, "numbered: not one moment");
        assert_eq!(beside("heap.79.pb.gz"), None, "one instance");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

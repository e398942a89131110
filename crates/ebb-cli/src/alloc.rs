//! Turning an allocator name (`ebb`, `glibc`, `jemalloc`, `mimalloc2`, `mimalloc3`,
//! `tcmalloc`) or a `.so` path into the library to put in `LD_PRELOAD`, after checking
//! it can be preloaded.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// An allocator ready to run a program under.
#[derive(Clone, Debug)]
pub struct Allocator {
    /// What the user called it (`jemalloc`, or the file name of a path), with its
    /// settings as given (`ebb[EBB_PURGE_DELAY=0]`).
    pub name: String,
    /// The library for `LD_PRELOAD`; None for glibc's own malloc.
    pub preload: Option<PathBuf>,
    /// ebb writes its statistics to `EBB_STATS_FILE` at exit.
    pub is_ebb: bool,
    /// Environment variables set for the program under this allocator: its settings
    /// (`ebb[EBB_PURGE_DELAY=0]`, `jemalloc[MALLOC_CONF=dirty_decay_ms:0]`,
    /// `glibc[GLIBC_TUNABLES=glibc.malloc.arena_max=2]`), so one `compare` can put
    /// settings of one allocator side by side.
    pub env: Vec<(String, String)>,
}

/// The outcome of looking an allocator up.
pub enum Lookup {
    Found(Allocator),
    /// A known allocator whose library is not installed, with the command that installs it.
    NotInstalled {
        name: String,
        install: String,
    },
}

/// Debian's libraries of the allocators known by name: (name, file names, package).
/// `mimalloc` is mimalloc 2 (Debian 12 packages no other), shown as `mimalloc2` beside
/// [`mimalloc3`]'s column.
const KNOWN: &[(&str, &[&str], &str)] = &[
    (
        "jemalloc",
        &["libjemalloc.so.2", "libjemalloc.so"],
        "libjemalloc2",
    ),
    (
        "mimalloc2",
        &["libmimalloc.so.2", "libmimalloc.so"],
        "libmimalloc2.0",
    ),
    (
        "tcmalloc",
        &[
            "libtcmalloc_minimal.so.4",
            "libtcmalloc.so.4",
            "libtcmalloc_minimal.so",
        ],
        "libtcmalloc-minimal4",
    ),
];

pub const NAMES: &str =
    "ebb, glibc, jemalloc, mimalloc2 (or mimalloc), mimalloc3, tcmalloc or a path to a .so";

/// Where `scripts/build-mimalloc3.sh` puts mimalloc 3, inside a cargo target directory.
const MIMALLOC3_IN_TARGET: &str = "mimalloc3/libmimalloc3.so";

/// The allocators of a `--alloc` list: split at the commas outside brackets, so a
/// setting's value may hold commas (`jemalloc[MALLOC_CONF=narenas:1,tcache:false]`).
pub fn split_list(list: &str) -> Result<Vec<String>> {
    let mut items = Vec::new();
    let mut item = String::new();
    let mut depth = 0usize;
    for c in list.chars() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => bail!("'{list}': a ']' without its '['"),
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    if depth > 0 {
        bail!("'{list}': a '[' without its ']'");
    }
    items.push(item);
    Ok(items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect())
}

/// `NAME[VAR=VALUE VAR=VALUE ...]`: the allocator and the environment variables its
/// runs get (none without brackets). Values cannot hold spaces; `LD_PRELOAD` is the
/// allocator's own.
fn split_settings(spec: &str) -> Result<(&str, Vec<(String, String)>)> {
    let Some(open) = spec.find('[') else {
        return Ok((spec, Vec::new()));
    };
    let Some(inner) = spec[open + 1..].strip_suffix(']') else {
        bail!("'{spec}': settings go in brackets at the end, as ebb[EBB_PURGE_DELAY=0]");
    };
    let mut env = Vec::new();
    for setting in inner.split_whitespace() {
        let Some((key, value)) = setting.split_once('=') else {
            bail!("'{spec}': '{setting}' is not VAR=VALUE");
        };
        let valid = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            bail!("'{spec}': '{key}' is not an environment variable name");
        }
        if key == "LD_PRELOAD" {
            bail!("'{spec}': LD_PRELOAD is what the allocator sets; give a .so path instead");
        }
        env.push((key.to_string(), value.to_string()));
    }
    if env.is_empty() {
        bail!("'{spec}': no settings in the brackets");
    }
    Ok((&spec[..open], env))
}

/// [`lookup_plain`] of `spec`'s allocator, with the settings in its brackets.
pub fn lookup(spec: &str) -> Result<Lookup> {
    let spec = spec.trim();
    let (base, env) = split_settings(spec)?;
    if env.is_empty() {
        return lookup_plain(base);
    }
    let settings = &spec[base.len()..];
    Ok(match lookup_plain(base)? {
        Lookup::Found(a) => Lookup::Found(Allocator {
            name: format!("{}{settings}", a.name),
            env,
            ..a
        }),
        Lookup::NotInstalled { name, install } => Lookup::NotInstalled {
            name: format!("{name}{settings}"),
            install,
        },
    })
}

fn lookup_plain(spec: &str) -> Result<Lookup> {
    match spec {
        "" => bail!("empty allocator name: use {NAMES}"),
        "glibc" | "system" => {
            return Ok(Lookup::Found(Allocator {
                name: spec.to_string(),
                preload: None,
                is_ebb: false,
                env: Vec::new(),
            }))
        }
        "ebb" => {
            let lib = ebb_library()?;
            check_preloadable(&lib)?;
            return Ok(Lookup::Found(Allocator {
                name: "ebb".into(),
                preload: Some(lib),
                is_ebb: true,
                env: Vec::new(),
            }));
        }
        "mimalloc3" => return mimalloc3(),
        _ => {}
    }
    let spec = if spec == "mimalloc" {
        "mimalloc2"
    } else {
        spec
    };
    if let Some(&(name, files, package)) = KNOWN.iter().find(|k| k.0 == spec) {
        return Ok(match find_in_library_dirs(files) {
            Some(lib) => {
                check_preloadable(&lib)?;
                Lookup::Found(Allocator {
                    name: name.into(),
                    preload: Some(lib),
                    is_ebb: false,
                    env: Vec::new(),
                })
            }
            None => Lookup::NotInstalled {
                name: name.into(),
                install: format!("sudo apt-get install {package}"),
            },
        });
    }
    if spec.contains('/') || spec.contains(".so") {
        let path = Path::new(spec);
        check_shared_object(path)?;
        check_preloadable(path)?;
        let name = path
            .file_name()
            .map_or(spec.to_string(), |f| f.to_string_lossy().into_owned());
        return Ok(Lookup::Found(Allocator {
            is_ebb: name.starts_with("libebb."),
            name,
            preload: Some(path.canonicalize().unwrap_or_else(|_| path.to_path_buf())),
            env: Vec::new(),
        }));
    }
    bail!("unknown allocator '{spec}': use {NAMES}")
}

/// What version of the allocator runs, for the reports: glibc's own (no preload),
/// the Debian package that installed a library, the mimalloc 3 that
/// `scripts/build-mimalloc3.sh` built (its `version` file), or ebb's crate version and
/// source commit. None where none of these says.
pub fn version(a: &Allocator) -> Option<String> {
    let Some(lib) = &a.preload else {
        // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
        let v = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
        return Some(format!("glibc {}", v.to_string_lossy()));
    };
    if a.is_ebb && lib.parent().and_then(|d| d.file_name()) == Some("release".as_ref()) {
        let commit = source_workspace().and_then(|ws| {
            let out = Command::new("git")
                .arg("-C")
                .arg(ws)
                .args(["rev-parse", "--short", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        });
        let version = env!("CARGO_PKG_VERSION");
        return Some(match commit {
            Some(c) => format!("ebb {version} ({c})"),
            None => format!("ebb {version}"),
        });
    }
    if let Some(built) = lib.parent().map(|d| d.join("version")) {
        if lib.ends_with(MIMALLOC3_IN_TARGET) {
            if let Ok(v) = std::fs::read_to_string(built) {
                return Some(v.trim().to_string());
            }
        }
    }
    debian_package_version(lib)
}

/// "package version" of the Debian package that installed `lib` (`dpkg -S`, then
/// `dpkg-query`), trying the path as given and with `/usr` added or taken away, since
/// Debian's merged `/usr` installs some libraries under `/lib`.
fn debian_package_version(lib: &Path) -> Option<String> {
    let text = lib.to_string_lossy();
    let candidates = [
        text.to_string(),
        text.strip_prefix("/usr")
            .map_or(format!("/usr{text}"), str::to_string),
    ];
    let package = candidates.iter().find_map(|path| {
        let out = Command::new("dpkg").args(["-S", path]).output().ok()?;
        let line = String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .to_string();
        (out.status.success()).then(|| line.split(':').next().unwrap_or("").to_string())
    })?;
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", &package])
        .output()
        .ok()?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !version.is_empty()).then(|| format!("{package} {version}"))
}

/// The first of `files` in the system's library directories (the multiarch ones first).
fn find_in_library_dirs(files: &[&str]) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for root in ["/usr/lib", "/lib", "/usr/local/lib"] {
        if let Ok(entries) = std::fs::read_dir(root) {
            let mut multiarch: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with("-linux-gnu"))
                .collect();
            // The machine's own architecture first.
            let arch = std::env::consts::ARCH;
            multiarch.sort_by_key(|p| !p.to_string_lossy().contains(arch));
            dirs.extend(multiarch);
        }
    }
    dirs.extend(["/usr/lib64", "/usr/lib", "/lib64", "/usr/local/lib"].map(PathBuf::from));
    files
        .iter()
        .flat_map(|file| dirs.iter().map(move |dir| dir.join(file)))
        .find(|path| path.is_file())
}

/// Fails unless `path` is a readable ELF shared object.
fn check_shared_object(path: &Path) -> Result<()> {
    let shown = path.display();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("{shown}: no such file"),
        Err(e) => bail!("cannot read {shown}: {e}"),
    };
    // e_type (offset 16, 2 bytes little-endian on the machines LD_PRELOAD serves here)
    // is 3 (ET_DYN) for shared objects.
    if bytes.len() < 18 || &bytes[..4] != b"\x7fELF" {
        bail!("{shown} is not an ELF shared object");
    }
    if u16::from_le_bytes([bytes[16], bytes[17]]) != 3 {
        bail!("{shown} is an ELF file but not a shared object");
    }
    Ok(())
}

/// Runs `/bin/true` with `lib` preloaded: the dynamic loader reports a library it cannot
/// preload (wrong architecture, missing dependency, no such file) on stderr and goes on.
fn check_preloadable(lib: &Path) -> Result<()> {
    let out = Command::new("/bin/true")
        .env("LD_PRELOAD", lib)
        .output()
        .context("cannot run /bin/true to check the library")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = stderr.lines().find(|l| l.contains("LD_PRELOAD")) {
        bail!(
            "{} cannot be preloaded: {}",
            lib.display(),
            line.trim_start_matches("ERROR: ").trim()
        );
    }
    if !out.status.success() {
        bail!(
            "{} cannot be preloaded: /bin/true failed under it ({})",
            lib.display(),
            out.status
        );
    }
    Ok(())
}

/// The workspace this binary was built from, when its sources are still there.
pub fn source_workspace() -> Option<PathBuf> {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    (ws.join("Cargo.toml").is_file() && ws.join("crates/ebb-capi/Cargo.toml").is_file())
        .then(|| ws.canonicalize().unwrap_or(ws))
}

/// mimalloc 3, the current major version and ebb's closest peer: a system library
/// (`libmimalloc.so.3`, where the distribution has one), else the one
/// `scripts/build-mimalloc3.sh` builds in the cargo target directory this binary runs
/// from, out of the C sources the `mimalloc` crate vendors (the same mimalloc 3 as the
/// speed suite's). Built on first use from ebb's source tree: a `cargo fetch` and a few
/// seconds of C compiling.
fn mimalloc3() -> Result<Lookup> {
    let found = |lib: PathBuf| -> Result<Lookup> {
        check_preloadable(&lib)?;
        Ok(Lookup::Found(Allocator {
            name: "mimalloc3".into(),
            preload: Some(lib),
            is_ebb: false,
            env: Vec::new(),
        }))
    };
    if let Some(lib) = find_in_library_dirs(&["libmimalloc.so.3"]) {
        return found(lib);
    }
    let install = "scripts/build-mimalloc3.sh in ebb's source tree".to_string();
    let (Some(target_dir), Some(ws)) = (cargo_target_dir(), source_workspace()) else {
        return Ok(Lookup::NotInstalled {
            name: "mimalloc3".into(),
            install,
        });
    };
    let lib = target_dir.join(MIMALLOC3_IN_TARGET);
    // (A library built before the script wrote its `version` file is built again.)
    let complete = lib.is_file() && lib.with_file_name("version").is_file();
    if !complete && std::env::var_os("EBB_CLI_NO_BUILD").is_none() {
        eprintln!("ebb: building mimalloc 3 (scripts/build-mimalloc3.sh) ...");
        let built = Command::new("bash")
            .arg(ws.join("scripts/build-mimalloc3.sh"))
            .env("CARGO_TARGET_DIR", &target_dir)
            .stdout(std::process::Stdio::null())
            .status();
        match built {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("ebb: building mimalloc 3 failed ({status})"),
            Err(e) => eprintln!("ebb: cannot run scripts/build-mimalloc3.sh: {e}"),
        }
    }
    if lib.is_file() {
        return found(lib);
    }
    Ok(Lookup::NotInstalled {
        name: "mimalloc3".into(),
        install,
    })
}

/// The cargo target directory this binary runs from (`target/release/ebb` gives
/// `target`), if it runs from one.
fn cargo_target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let exe_dir = exe.parent()?;
    let profile = exe_dir.file_name().and_then(|n| n.to_str());
    matches!(profile, Some("release" | "debug"))
        .then(|| exe_dir.parent().map(Path::to_path_buf))
        .flatten()
}

/// `libebb.so`: in the cargo target directory this binary runs from (built or rebuilt
/// there, in release mode, when it is missing or older than the sources), or next to
/// an installed `ebb`.
fn ebb_library() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the ebb executable")?;
    let exe_dir = exe
        .parent()
        .context("the ebb executable has no directory")?;
    let profile = exe_dir.file_name().and_then(|n| n.to_str());
    let from_cargo = matches!(profile, Some("release" | "debug"));
    if let (true, Some(ws)) = (from_cargo, source_workspace()) {
        let target_dir = exe_dir.parent().context("no target directory")?;
        let lib = target_dir.join("release/libebb.so");
        if is_stale(&lib, &ws) && std::env::var_os("EBB_CLI_NO_BUILD").is_none() {
            build_libebb(&ws, target_dir)?;
        }
        if lib.is_file() {
            return Ok(lib);
        }
    }
    let beside = exe_dir.join("libebb.so");
    if beside.is_file() {
        return Ok(beside);
    }
    bail!(
        "libebb.so not found next to {}: build it with `cargo build --release -p ebb-capi` \
         and pass --alloc PATH/libebb.so",
        exe.display()
    )
}

/// True when `lib` is missing or older than a source file of the allocator.
fn is_stale(lib: &Path, ws: &Path) -> bool {
    let Ok(built) = lib.metadata().and_then(|m| m.modified()) else {
        return true;
    };
    let sources = [
        "crates/ebb/src",
        "crates/ebb/Cargo.toml",
        "crates/ebb-capi/src",
        "crates/ebb-capi/Cargo.toml",
        "Cargo.lock",
    ];
    sources
        .iter()
        .any(|s| newest_mtime(&ws.join(s)).is_some_and(|t| t > built))
}

fn newest_mtime(path: &Path) -> Option<SystemTime> {
    let meta = path.metadata().ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .flatten()
        .filter_map(|e| newest_mtime(&e.path()))
        .max()
}

fn build_libebb(ws: &Path, target_dir: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("ebb: building libebb.so (cargo build --release -p ebb-capi) ...");
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "ebb-capi",
            "--manifest-path",
        ])
        .arg(ws.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .with_context(|| format!("cannot run {}", cargo.to_string_lossy()))?;
    if !status.success() {
        bail!("building libebb.so failed (cargo build --release -p ebb-capi: {status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_at_commas_outside_brackets() {
        assert_eq!(
            split_list("glibc, ebb[EBB_PURGE_DELAY=0],jemalloc[MALLOC_CONF=a:1,b:2] ,").unwrap(),
            [
                "glibc",
                "ebb[EBB_PURGE_DELAY=0]",
                "jemalloc[MALLOC_CONF=a:1,b:2]"
            ]
        );
        assert!(split_list("ebb[X=1").is_err());
        assert!(split_list("ebb]X=1[").is_err());
    }

    #[test]
    fn settings_are_names_and_values_in_brackets_at_the_end() {
        let (base, env) = split_settings("ebb[EBB_PURGE_DELAY=0 EBB_BACKGROUND=threads]").unwrap();
        assert_eq!(base, "ebb");
        assert_eq!(
            env,
            [
                ("EBB_PURGE_DELAY".to_string(), "0".to_string()),
                ("EBB_BACKGROUND".to_string(), "threads".to_string())
            ]
        );
        // An empty value is a value (it unsets ebb's options, as in a shell).
        assert_eq!(split_settings("ebb[EBB_PROFILE=]").unwrap().1[0].1, "");
        assert_eq!(split_settings("glibc").unwrap(), ("glibc", Vec::new()));
        for bad in [
            "ebb[]",
            "ebb[X]",
            "ebb[=1]",
            "ebb[1X=1]",
            "ebb[X-Y=1]",
            "ebb[X=1]tail",
            "ebb[LD_PRELOAD=/x.so]",
        ] {
            assert!(split_settings(bad).is_err(), "{bad}");
        }
    }
}

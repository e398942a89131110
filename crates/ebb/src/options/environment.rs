//! The environment check: every `EBB_*` variable ebb reads, what each one takes, and a
//! warning on stderr for a setting ebb would otherwise ignore without a word. It runs
//! once, at process set-up (`process::init`), and is silent with `EBB_SHOW_ERRORS=0`;
//! `diag::warn_setting` prints the lines (diagnostics depend on options, not back).
//!
//! Why: a mistyped option looks exactly like a working one. `EBB_PURGE_DELAY=2sec` kept
//! the default and `EBB_PURGE_DELY=0` did nothing, and a user measuring "ebb with a
//! 0 ms delay" measured the default. jemalloc prints `<jemalloc>: Invalid conf value`
//! and mimalloc `mimalloc: warning: environment option ... has an invalid value`; ebb
//! prints one line per problem:
//!
//! ```text
//! ebb: warning: EBB_PURGE_DELAY="2sec" ignored: expected a duration (500, 500ms, 2s, 1m; bare digits are ms)
//! ebb: warning: EBB_PURGE_DELY is not an ebb variable; did you mean EBB_PURGE_DELAY?
//! ebb: warning: EBB_PROFILE_INTERVAL="1s" ignored: it takes effect only with EBB_PROFILE
//! ebb: warning: EBB_SECURE="full" ignored: only libebb_secure.so (the `secure` feature) reads it
//! ```
//!
//! Other programs set variables starting with `EBB_` too (this repository's own scripts
//! and tests set `EBB_SO`, `EBB_BASE_LIB`, ...), and a process tree passes them to every
//! process it starts. So a name ebb does not read is reported only when it is a near
//! miss of one it does: within two edits, ignoring case. An empty value counts as unset
//! (`EBB_PROFILE= cmd` is how a shell unsets one for a command).
//!
//! Every value is checked with the parser its reader uses (`parse.rs`, and
//! `os::signal_number`), so the check and the reader cannot disagree; the unit tests
//! below check that every `EBB_*` name the crate's sources read is in [`VARIABLES`]
//! and in README.md.

use super::parse::{
    parse_bool, parse_bytes, parse_duration_ms, parse_secure_level, parse_u64, trim,
};
use crate::os;

/// What a variable's value must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepts {
    /// `parse_bool`.
    Switch,
    /// `parse_bool`, or this word (any case).
    SwitchOr(&'static str),
    /// `parse_u64`.
    Count,
    /// `parse_duration_ms`, zero included.
    Duration,
    /// `parse_duration_ms`, above zero.
    Interval,
    /// `parse_bytes`.
    Bytes,
    /// `os::signal_number`.
    Signal,
    /// A file name or prefix (any non-empty value).
    File,
    /// `parse_secure_level`.
    SecureLevel,
    /// Test plumbing (any value).
    Anything,
}

impl Accepts {
    fn takes(self, value: &[u8]) -> bool {
        match self {
            Accepts::Switch => parse_bool(value).is_some(),
            Accepts::SwitchOr(word) => {
                parse_bool(value).is_some() || trim(value).eq_ignore_ascii_case(word.as_bytes())
            }
            Accepts::Count => parse_u64(value).is_some(),
            Accepts::Duration => parse_duration_ms(value).is_some(),
            Accepts::Interval => parse_duration_ms(value).is_some_and(|ms| ms > 0),
            Accepts::Bytes => parse_bytes(value).is_some(),
            Accepts::Signal => os::signal_number(value).is_some(),
            Accepts::File | Accepts::Anything => true,
            Accepts::SecureLevel => parse_secure_level(value).is_some(),
        }
    }

    /// What the warning says was expected.
    pub fn expected(self) -> &'static str {
        match self {
            Accepts::Switch => "1 or 0 (also true/false, yes/no, on/off)",
            Accepts::SwitchOr(word) => match word.as_bytes() {
                b"json" => "1, 0 or json",
                _ => "1, 0 or threads",
            },
            Accepts::Count => "a whole number",
            Accepts::Duration => "a duration (500, 500ms, 2s, 1m; bare digits are ms)",
            Accepts::Interval => "a duration above zero (500ms, 10s, 5m, 1h; bare digits are ms)",
            Accepts::Bytes => "a byte count above zero (524288, 512k, 4m, 1g)",
            Accepts::Signal => "USR1, USR2 or a real-time signal number",
            Accepts::SecureLevel => "light or full",
            Accepts::File | Accepts::Anything => "any value",
        }
    }
}

/// One variable ebb reads. Invariant: `name` starts with `EBB_` and is at most
/// [`MAX_NAME`] bytes; `requires`, if set, is another entry's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    pub accepts: Accepts,
    /// Read only when this other variable is set too.
    pub requires: Option<&'static str>,
    /// Read only by the `secure` build (`libebb_secure.so`).
    pub secure_only: bool,
    /// Test plumbing, left out of README's tables.
    pub internal: bool,
}

const fn var(name: &'static str, accepts: Accepts) -> Variable {
    Variable {
        name,
        accepts,
        requires: None,
        secure_only: false,
        internal: false,
    }
}

const fn with(name: &'static str, accepts: Accepts, requires: &'static str) -> Variable {
    Variable {
        requires: Some(requires),
        ..var(name, accepts)
    }
}

const fn secure(name: &'static str, accepts: Accepts) -> Variable {
    Variable {
        secure_only: true,
        ..var(name, accepts)
    }
}

const fn internal(name: &'static str) -> Variable {
    Variable {
        internal: true,
        ..var(name, Accepts::Anything)
    }
}

/// The longest name of [`VARIABLES`] (const-checked), and so the longest name the
/// near-miss search compares.
pub const MAX_NAME: usize = 32;

/// Every `EBB_*` variable ebb reads (README.md's tables document them).
pub const VARIABLES: &[Variable] = &[
    // options/mod.rs
    var("EBB_PURGE_DELAY", Accepts::Duration),
    var("EBB_BACKGROUND", Accepts::SwitchOr("threads")),
    var("EBB_SHOW_STATS", Accepts::SwitchOr("json")),
    var("EBB_SHOW_ERRORS", Accepts::Switch),
    var("EBB_CHECK", Accepts::Switch),
    var("EBB_ABORT_ON_ERROR", Accepts::Switch),
    var("EBB_LARGE_PAGES", Accepts::Switch),
    var("EBB_DENSE_HUGE_PAGES", Accepts::Switch),
    var("EBB_SHARED_START", Accepts::Switch),
    var("EBB_VECTORED_DECOMMIT", Accepts::Switch),
    var("EBB_MAPPING_BUDGET", Accepts::Count),
    // Reports (stats_json.rs, observe/retention.rs).
    var("EBB_STATS_FILE", Accepts::File),
    var("EBB_REPORT", Accepts::File),
    with("EBB_REPORT_SIGNAL", Accepts::Signal, "EBB_REPORT"),
    // The heap profiler (profile/mod.rs); the rate also serves `ebb_profile_start(0)`.
    var("EBB_PROFILE", Accepts::File),
    var("EBB_PROFILE_RATE", Accepts::Bytes),
    with("EBB_PROFILE_SIGNAL", Accepts::Signal, "EBB_PROFILE"),
    with("EBB_PROFILE_INTERVAL", Accepts::Interval, "EBB_PROFILE"),
    with("EBB_PROFILE_LEAKS", Accepts::Switch, "EBB_PROFILE"),
    with("EBB_PROFILE_SEED", Accepts::Count, "EBB_PROFILE"),
    // Guarded sampling (front/guarded.rs).
    var("EBB_GUARDED_RATE", Accepts::Count),
    with("EBB_GUARDED_SLOTS", Accepts::Count, "EBB_GUARDED_RATE"),
    with("EBB_GUARDED_MIN", Accepts::Count, "EBB_GUARDED_RATE"),
    with("EBB_GUARDED_MAX", Accepts::Count, "EBB_GUARDED_RATE"),
    // The secure build (span/secure.rs).
    secure("EBB_SECURE", Accepts::SecureLevel),
    secure("EBB_ZERO_ON_FREE", Accepts::Switch),
    secure("EBB_CANARY", Accepts::Switch),
    // Fault injection for tests (os/fault.rs).
    var("EBB_FAULT_AFTER", Accepts::Count),
    var("EBB_FAULT_BUDGET", Accepts::Count),
    // lib.rs's assertion test re-runs itself with this set.
    internal("EBB_TEST_ASSERTION_CHILD"),
];

const _: () = {
    let mut i = 0;
    while i < VARIABLES.len() {
        let name = VARIABLES[i].name.as_bytes();
        assert!(name.len() <= MAX_NAME);
        assert!(name[0] == b'E' && name[1] == b'B' && name[2] == b'B' && name[3] == b'_');
        i += 1;
    }
};

fn find(name: &[u8]) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name.as_bytes() == name)
}

/// What is wrong with one variable of the environment, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// A value its reader does not take (it keeps the default).
    Invalid(&'static Variable),
    /// Set, but read only with `requires`, which is not set.
    WithoutRequired(&'static Variable),
    /// Read only by the secure build, and this is not it.
    SecureOnly(&'static Variable),
    /// Not a variable ebb reads, but within two edits of this one.
    NearMiss(&'static Variable),
}

/// The problem with `name=value` in an environment where `is_set(other)` tells whether
/// another variable is set (with a non-empty value).
pub fn problem(name: &[u8], value: &[u8], is_set: impl Fn(&[u8]) -> bool) -> Option<Problem> {
    if trim(value).is_empty() {
        return None;
    }
    let Some(variable) = find(name) else {
        return near_miss(name).map(Problem::NearMiss);
    };
    if variable.secure_only && !cfg!(feature = "secure") {
        return Some(Problem::SecureOnly(variable));
    }
    if !variable.accepts.takes(value) {
        return Some(Problem::Invalid(variable));
    }
    match variable.requires {
        Some(required) if !is_set(required.as_bytes()) => Some(Problem::WithoutRequired(variable)),
        _ => None,
    }
}

/// The known name within two edits of `name` (any case), the nearest one if several.
fn near_miss(name: &[u8]) -> Option<&'static Variable> {
    if name.len() < 4 || !name[..4].eq_ignore_ascii_case(b"EBB_") || name.len() > MAX_NAME + 2 {
        return None;
    }
    VARIABLES
        .iter()
        .filter(|v| !v.internal)
        .map(|v| (edit_distance(name, v.name.as_bytes()), v))
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, v)| v)
}

/// Levenshtein distance, ASCII case ignored. Both at most `MAX_NAME + 2` bytes (longer
/// ones compare as far apart).
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    const N: usize = MAX_NAME + 3;
    if a.len() >= N || b.len() >= N {
        return usize::MAX;
    }
    let mut previous = [0usize; N];
    let mut current = [0usize; N];
    for (j, slot) in previous.iter_mut().enumerate().take(b.len() + 1) {
        *slot = j;
    }
    for (i, &x) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, &y) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(!x.eq_ignore_ascii_case(&y));
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// Check the process's environment: `report(name, value, problem)` for each problem
/// (at process set-up, with `diag::warn_setting`; nothing when `EBB_SHOW_ERRORS=0`).
/// Allocates nothing.
pub fn check_environment(report: fn(&[u8], &[u8], Problem)) {
    if !super::get().show_errors {
        return;
    }
    let is_set = |name: &[u8]| {
        let mut buf = [0u8; MAX_NAME + 1];
        buf[..name.len()].copy_from_slice(name);
        os::getenv(&buf[..name.len() + 1]).is_some_and(|v| !trim(v).is_empty())
    };
    os::for_each_env(&mut |name, value| {
        if name.len() < 4 || !name[..4].eq_ignore_ascii_case(b"EBB_") {
            return;
        }
        if let Some(problem) = problem(name, value, is_set) {
            report(name, value, problem);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;
    use std::vec::Vec;

    fn problem_in(name: &str, value: &str, others: &[&str]) -> Option<Problem> {
        problem(name.as_bytes(), value.as_bytes(), |n| {
            others.iter().any(|o| o.as_bytes() == n)
        })
    }

    fn name_of(p: Option<Problem>) -> Option<(&'static str, &'static str)> {
        p.map(|p| match p {
            Problem::Invalid(v) => ("invalid", v.name),
            Problem::WithoutRequired(v) => ("without", v.name),
            Problem::SecureOnly(v) => ("secure", v.name),
            Problem::NearMiss(v) => ("near", v.name),
        })
    }

    #[test]
    fn values_the_readers_take_pass() {
        for (name, value) in [
            ("EBB_PURGE_DELAY", "0"),
            ("EBB_PURGE_DELAY", "250"),
            ("EBB_PURGE_DELAY", " 2s "),
            ("EBB_BACKGROUND", "Threads"),
            ("EBB_SHOW_STATS", "JSON"),
            ("EBB_CHECK", "on"),
            ("EBB_PROFILE_RATE", "512k"),
            ("EBB_MAPPING_BUDGET", "5000"),
            ("EBB_STATS_FILE", "/tmp/s-%p.json"),
            ("EBB_TEST_ASSERTION_CHILD", "whatever"),
            ("EBB_PURGE_DELAY", ""),
            ("EBB_PURGE_DELAY", "  "),
        ] {
            assert_eq!(problem_in(name, value, &[]), None, "{name}={value}");
        }
        for (name, value) in [
            ("EBB_PROFILE_INTERVAL", "500ms"),
            ("EBB_PROFILE_SIGNAL", "USR2"),
            ("EBB_PROFILE_SIGNAL", "SIGUSR1"),
            ("EBB_PROFILE_LEAKS", "1"),
        ] {
            assert_eq!(
                problem_in(name, value, &["EBB_PROFILE"]),
                None,
                "{name}={value}"
            );
        }
    }

    #[test]
    fn values_the_readers_ignore_are_named() {
        for (name, value) in [
            ("EBB_PURGE_DELAY", "2sec"),
            ("EBB_PURGE_DELAY", "-1"),
            ("EBB_PURGE_DELAY", "1.5s"),
            ("EBB_CHECK", "nonsense"),
            ("EBB_BACKGROUND", "thread"),
            ("EBB_SHOW_STATS", "yaml"),
            ("EBB_PROFILE_RATE", "0"),
            ("EBB_PROFILE_RATE", "4 MiB"),
            ("EBB_MAPPING_BUDGET", "lots"),
            ("EBB_GUARDED_RATE", "1/100"),
        ] {
            assert_eq!(
                name_of(problem_in(name, value, &[])),
                Some(("invalid", name)),
                "{name}={value}"
            );
        }
        assert_eq!(
            name_of(problem_in("EBB_PROFILE_INTERVAL", "0", &["EBB_PROFILE"])),
            Some(("invalid", "EBB_PROFILE_INTERVAL"))
        );
        assert_eq!(
            name_of(problem_in("EBB_PROFILE_SIGNAL", "HUP", &["EBB_PROFILE"])),
            Some(("invalid", "EBB_PROFILE_SIGNAL"))
        );
    }

    #[test]
    fn a_variable_read_only_with_another_says_so() {
        assert_eq!(
            name_of(problem_in("EBB_PROFILE_INTERVAL", "1s", &[])),
            Some(("without", "EBB_PROFILE_INTERVAL"))
        );
        assert_eq!(
            name_of(problem_in("EBB_REPORT_SIGNAL", "USR1", &["EBB_PROFILE"])),
            Some(("without", "EBB_REPORT_SIGNAL"))
        );
        assert_eq!(
            problem_in("EBB_REPORT_SIGNAL", "USR1", &["EBB_REPORT"]),
            None
        );
        assert_eq!(
            name_of(problem_in("EBB_GUARDED_SLOTS", "8", &[])),
            Some(("without", "EBB_GUARDED_SLOTS"))
        );
    }

    #[test]
    fn secure_variables_outside_the_secure_build() {
        let found = name_of(problem_in("EBB_SECURE", "full", &[]));
        if cfg!(feature = "secure") {
            assert_eq!(found, None);
            assert_eq!(
                name_of(problem_in("EBB_SECURE", "medium", &[])),
                Some(("invalid", "EBB_SECURE"))
            );
        } else {
            assert_eq!(found, Some(("secure", "EBB_SECURE")));
        }
    }

    #[test]
    fn near_misses_are_named_and_other_programs_variables_are_not() {
        for (typo, meant) in [
            ("EBB_PURGE_DELY", "EBB_PURGE_DELAY"),
            ("ebb_purge_delay", "EBB_PURGE_DELAY"),
            ("EBB_PURGEDELAY", "EBB_PURGE_DELAY"),
            ("EBB_SHOW_STAT", "EBB_SHOW_STATS"),
            ("EBB_PROFILE_INTERVALS", "EBB_PROFILE_INTERVAL"),
            ("EBB_LARGE_PAGE", "EBB_LARGE_PAGES"),
            ("Ebb_Check", "EBB_CHECK"),
        ] {
            assert_eq!(
                name_of(problem_in(typo, "1", &[])),
                Some(("near", meant)),
                "{typo}"
            );
        }
        // Set by this repository's scripts and tests, and passed down process trees.
        for other in [
            "EBB_SO",
            "EBB_BIN",
            "EBB_BASE_LIB",
            "EBB_BENCH",
            "EBB_TARGET",
            "EBB_CLI_NO_BUILD",
            "EBB_STATIC_UNWINDER",
            "EBB_PACKED_RELOCS",
            "EBB_LINK_LAYOUT",
            "EBB_ATTACKS_SECURE",
            "EBB_MODEL_CHILD",
            "EBB_OVERFLOW_CHILD",
            "EBB_GUARDED_TEST_CHILD",
            "EBB_PROFILE_BIG_CHILD",
            "EBB_PROFILE_CHECK_CHILD",
            "EBB_SHORT_RUNS_TEST_CHILD",
            "EBB_FREED_INTO_TEST_CHILD",
            "EBB_SCENARIOS_GIT_COMMIT",
            "EBB_TEST_VAR_1",
            "EBBX_PURGE_DELAY",
            "PURGE_DELAY",
        ] {
            assert_eq!(problem_in(other, "1", &[]), None, "{other}");
        }
    }

    #[test]
    fn edit_distance_counts_edits_ignoring_case() {
        assert_eq!(edit_distance(b"EBB_CHECK", b"EBB_CHECK"), 0);
        assert_eq!(edit_distance(b"ebb_check", b"EBB_CHECK"), 0);
        assert_eq!(edit_distance(b"EBB_CHEK", b"EBB_CHECK"), 1);
        assert_eq!(edit_distance(b"EBB_CEHCK", b"EBB_CHECK"), 2);
        assert_eq!(edit_distance(b"", b"abc"), 3);
        assert_eq!(edit_distance(&[b'E'; 40], b"EBB_CHECK"), usize::MAX);
    }

    /// Every `EBB_*` name the crate's sources look up is registered, so none escapes
    /// the check.
    #[test]
    fn every_variable_the_sources_read_is_registered() {
        // `file!()` is relative to the workspace root, and names this file also when
        // another crate (ebb-secure) compiles these sources.
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let this_file = workspace.join(file!());
        let root = this_file.parent().unwrap().parent().unwrap().to_path_buf();
        let mut read = Vec::new();
        let mut dirs = std::vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    for (at, _) in text.match_indices("b\"EBB_") {
                        let rest = &text[at + 2..];
                        let literal = &rest[..rest.find('"').unwrap()];
                        if let Some(name) = literal.strip_suffix("\\0") {
                            read.push(String::from(name));
                        }
                    }
                }
            }
        }
        assert!(read.len() > 20, "found only {read:?}");
        for name in &read {
            assert!(
                find(name.as_bytes()).is_some(),
                "{name} is read but not in VARIABLES"
            );
        }
    }

    /// README.md documents every variable (test plumbing aside).
    #[test]
    fn readme_documents_every_variable() {
        let readme = include_str!("../../../../README.md");
        for v in VARIABLES.iter().filter(|v| !v.internal) {
            assert!(
                readme.contains(&std::format!("| `{}`", v.name))
                    || readme.contains(&std::format!(", `{}` |", v.name)),
                "{} is not in README.md's tables",
                v.name
            );
        }
    }
}

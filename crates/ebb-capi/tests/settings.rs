//! `EBB_*` settings under `LD_PRELOAD`: what ebb says about those it cannot use
//! (`options/environment.rs`).

mod c_support;

use c_support::*;

/// A bad `EBB_*` setting keeps the default and is named on stderr, once per process:
/// a value the option does not take, a variable that needs another one, a near miss of
/// a name; a good value takes effect without a word, other programs' `EBB_*` variables
/// are left alone, and `EBB_SHOW_ERRORS=0` silences the warnings.
#[test]
fn bad_settings_are_named_and_keep_the_defaults() {
    let exe = program("trivial.c");
    let warnings = |run: &Run| -> Vec<String> {
        run.stderr
            .lines()
            .filter(|l| l.starts_with("ebb: warning: "))
            .map(str::to_string)
            .collect()
    };
    let bad = run(
        &exe,
        &["options"],
        true,
        &[
            ("EBB_PURGE_DELAY", "2sec"),
            ("EBB_CHEK", "1"),
            ("EBB_PROFILE_INTERVAL", "1s"),
            ("EBB_SHOW_STATS", "yaml"),
            ("EBB_BASE_LIB", "/tmp/other/libebb.so"),
        ],
    );
    bad.assert_success()
        .assert_stdout_has("purge_delay=500 check=0 show_stats=0");
    let mut seen = warnings(&bad);
    seen.sort();
    assert_eq!(
        seen,
        [
            "ebb: warning: EBB_CHEK is not an ebb variable; did you mean EBB_CHECK?",
            "ebb: warning: EBB_PROFILE_INTERVAL=\"1s\" ignored: it takes effect only with EBB_PROFILE",
            "ebb: warning: EBB_PURGE_DELAY=\"2sec\" ignored: expected a duration (500, 500ms, 2s, 1m; bare digits are ms)",
            "ebb: warning: EBB_SHOW_STATS=\"yaml\" ignored: expected 1, 0 or json",
        ],
        "{}",
        bad.describe()
    );
    let quiet = run(
        &exe,
        &["options"],
        true,
        &[("EBB_PURGE_DELAY", "2sec"), ("EBB_SHOW_ERRORS", "0")],
    );
    quiet.assert_success();
    assert!(warnings(&quiet).is_empty(), "{}", quiet.describe());
    let good = run(
        &exe,
        &["options"],
        true,
        &[
            ("EBB_PURGE_DELAY", "2s"),
            ("EBB_CHECK", "on"),
            ("EBB_SO", "x"),
        ],
    );
    good.assert_success()
        .assert_stdout_has("purge_delay=2000 check=1 show_stats=0");
    assert!(warnings(&good).is_empty(), "{}", good.describe());
}

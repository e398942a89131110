//! Small programs for the integration tests of `ebb` (not meant for users):
//!
//! - `tree N MIB HOLD_MS`: starts N children running `alloc MIB HOLD_MS`, waits for them.
//! - `alloc MIB HOLD_MS`: allocates and touches MIB MiB, holds it HOLD_MS ms, exits 0.
//! - `server HOLD_MS`: prints `ready` after HOLD_MS ms, then sleeps until killed.
//! - `silent`: prints nothing and sleeps until killed.
//! - `exit CODE`: prints a line and exits with CODE.

use std::process::{Command, ExitCode};
use std::time::Duration;

fn arg(args: &[String], i: usize) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("ebb-test-helper: argument {i} missing or not a number");
        std::process::exit(2)
    })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("tree") => {
            let exe = std::env::current_exe().expect("own path");
            let children: Vec<_> = (0..arg(&args, 2))
                .map(|_| {
                    Command::new(&exe)
                        .args(["alloc", &args[3], &args[4]])
                        .spawn()
                        .expect("spawn a child")
                })
                .collect();
            let ok = children
                .into_iter()
                .all(|mut c| c.wait().is_ok_and(|s| s.success()));
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some("alloc") => {
            let bytes = (arg(&args, 2) as usize) << 20;
            let mut v = vec![0u8; bytes];
            for i in (0..bytes).step_by(4096) {
                v[i] = 1;
            }
            std::thread::sleep(Duration::from_millis(arg(&args, 3)));
            std::hint::black_box(&v);
            ExitCode::SUCCESS
        }
        Some("server") => {
            std::thread::sleep(Duration::from_millis(arg(&args, 2)));
            println!("server: ready");
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        Some("silent") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Some("exit") => {
            println!("exiting with {}", arg(&args, 2));
            ExitCode::from(arg(&args, 2) as u8)
        }
        _ => {
            eprintln!("usage: ebb-test-helper tree N MIB HOLD_MS | alloc MIB HOLD_MS | server HOLD_MS | silent | exit CODE");
            ExitCode::from(2)
        }
    }
}

//! The background purger in a process of one thread (process/purger.rs, "A
//! single-threaded process"): by default it starts there too, so a process that goes
//! idle gives back what it freed last. With `EBB_BACKGROUND=threads` it waits for a
//! second thread's heap (a second thread, even asleep, puts every system call on a file
//! descriptor and glibc's stdio on their multi-threaded paths), and the process's own
//! slow paths purge what is due meanwhile. A test binary without the harness
//! (`harness = false` in Cargo.toml), whose threads would make the process
//! multi-threaded from the start.

use std::alloc::{alloc, dealloc, Layout};
use std::time::Duration;

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const DELAY_MS: u64 = 50;

/// Threads of this process, from /proc/self/status.
fn threads() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

/// `n` large blocks (spans of their own: their frees go back to the arena, which gives
/// the purger work and, before this change, started it), written, then freed.
fn large_blocks_freed(n: usize) {
    let layout = Layout::from_size_align(1 << 20, 16).unwrap();
    let blocks: Vec<*mut u8> = (0..n)
        .map(|_| {
            // SAFETY: a non-zero size.
            let p = unsafe { alloc(layout) };
            assert!(!p.is_null());
            // SAFETY: the block just allocated.
            unsafe { p.write_bytes(1, layout.size()) };
            p
        })
        .collect();
    for p in blocks {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { dealloc(p, layout) };
    }
}

/// Small blocks over many pages, freed: free spans to purge.
fn small_pages_freed() {
    let blocks: Vec<Box<[u8; 256]>> = (0..20_000).map(|_| Box::new([1; 256])).collect();
    drop(blocks);
}

/// The purger's thread holds none of the program's file descriptors (it has a table of
/// its own: process/purger.rs), and blocks every signal the program could send.
fn purger_holds_no_descriptor() {
    let me = std::process::id().to_string();
    let purger = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|tid| *tid != me)
        .expect("the purger's task");
    let task = format!("/proc/self/task/{purger}");
    let own = std::fs::read_dir("/proc/self/fd").unwrap().count();
    assert!(own >= 3, "the program's own table: {own} descriptors");
    let status = std::fs::read_to_string(format!("{task}/status")).unwrap();
    // Under seccomp the purger keeps the shared table (os/linux_threads.rs).
    if status.contains("\nSeccomp:\t0") {
        // Its first step, which a purger that has just started may not have taken yet.
        let fds = || std::fs::read_dir(format!("{task}/fd")).unwrap().count();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while fds() != 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(fds(), 0, "the purger shares the program's descriptor table");
    }
    let line = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
    let blocked = u64::from_str_radix(line["SigBlk:".len()..].trim(), 16).unwrap();
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1, libc::SIGCHLD] {
        assert_ne!(
            blocked & 1 << (signal - 1),
            0,
            "signal {signal} reaches the purger"
        );
    }
}

/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: Ok if the process is registered for
/// it, the errno otherwise (EPERM: not registered). None if the kernel has no such
/// command.
fn private_expedited_barrier() -> Option<Result<(), i32>> {
    const QUERY: libc::c_long = 0;
    const PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    // SAFETY: membarrier has no memory-safety preconditions.
    let supported = unsafe { libc::syscall(libc::SYS_membarrier, QUERY, 0, 0) };
    if supported < 0 || supported & PRIVATE_EXPEDITED == 0 {
        return None;
    }
    // SAFETY: as above.
    let result = unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) };
    Some(if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    })
}

fn main() {
    let threads_only = std::env::args().nth(1).as_deref() == Some("threads");
    // The takeover of idle heaps needs `membarrier` (handoff/steal.rs): the process
    // registers as it starts the purger, while it has one thread and the kernel needs no
    // RCU grace period. The purger registering from its own thread (two users of the
    // address space) waited one out, 10-25 ms that the process's exit waited for too
    // (process/purger.rs `start`). So a purger started in a process of one thread finds
    // the process registered; where no purger has started, nothing registered. (One
    // started beside other threads registers on its first takeover.)
    let barrier_at_start = private_expedited_barrier();
    let registered_with_the_purger = || {
        if barrier_at_start.is_some() {
            assert_eq!(
                private_expedited_barrier(),
                Some(Ok(())),
                "the purger runs but the process is not registered for membarrier"
            );
        }
    };
    if ebb::background_purger_running() {
        // Started before `main` (the runtime's own frees gave it work).
        registered_with_the_purger();
    } else if let Some(result) = barrier_at_start {
        assert_eq!(
            result,
            Err(libc::EPERM),
            "registered with no purger running"
        );
    }
    let mut options = ebb::options();
    options.purge_delay_ms = DELAY_MS;
    ebb::set_options(options);
    assert!(options.background, "run without EBB_BACKGROUND=0");

    small_pages_freed();
    large_blocks_freed(8);
    if !threads_only {
        // The default: the purger starts with one thread too, once the first purge it
        // was wanted for has waited out the start grace (`ALONE_START_GRACE_MS`, 50 ms:
        // a process that lives a few ms never pays for a thread), at the next slow path.
        assert!(options.background_alone);
        std::thread::sleep(Duration::from_millis(60));
        large_blocks_freed(1);
        assert!(
            ebb::background_purger_running(),
            "a single-threaded process started no background purger by default"
        );
        assert_eq!(threads(), 2);
        registered_with_the_purger();
        purger_holds_no_descriptor();
        // And EBB_BACKGROUND=threads, in a process of its own.
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .arg("threads")
            .env("EBB_BACKGROUND", "threads")
            .status()
            .unwrap();
        assert!(status.success(), "EBB_BACKGROUND=threads: {status}");
        println!("alone_purger: ok");
        return;
    }
    assert!(!options.background_alone);
    assert!(
        !ebb::background_purger_running(),
        "EBB_BACKGROUND=threads: a single-threaded process started the background purger"
    );
    assert_eq!(threads(), 1, "the process has a thread it did not make");

    // With no purger, the program's own slow paths purge what is due: the large block
    // takes one of the free spans, and its slow path purges the others.
    let purged = ebb::stats().purged;
    std::thread::sleep(Duration::from_millis(3 * DELAY_MS));
    large_blocks_freed(1);
    assert!(
        ebb::stats().purged > purged,
        "nothing purged by a slow path past the purge delay ({} B before and after)",
        purged
    );
    assert!(!ebb::background_purger_running());

    // A second thread that allocates: the purger starts at the next slow path with
    // work for it.
    std::thread::spawn(|| drop(std::hint::black_box(Box::new([2u8; 64]))))
        .join()
        .unwrap();
    small_pages_freed();
    large_blocks_freed(8);
    assert!(
        ebb::background_purger_running(),
        "a process that has had two threads with heaps started no purger"
    );
}

//! A Rust program on ebb (`#[global_allocator]`) whose C side allocates too, for the
//! integration tests of a process with two ebb instances, as `ebb run` makes one (it
//! preloads `libebb.so` for the C code): `leak-both MIB` leaks MIB MiB from Rust
//! (`rust_leak`, through the global allocator) and MIB MiB through C's `malloc`
//! (`c_leak`), in 64 KiB blocks, and exits 0; `leak-both-steps MIB STEPS` does that
//! STEPS times, each step once every instance has written the profile of the step
//! before (`EBB_PROFILE_INTERVAL`); `leak-both-reported MIB` leaks as `leak-both` and
//! exits once every instance has written a retention report on the signal
//! (`EBB_REPORT_SIGNAL`, which `ebb run --breakdown` sends), or after 30 s;
//! `leak-both-lines MIB` leaks as `leak-both`, prints `ready (two instances: BOOL)`,
//! then leaks as much again for each `leak` line on its input (answering `leaked`)
//! until the input ends. Not meant for users.

#[global_allocator]
static GLOBAL: ebb::Ebb = ebb::Ebb;

const BLOCK: usize = 64 << 10;

/// Rust's blocks, never freed. `std::alloc::alloc` directly, so the site is this
/// function with or without frame pointers.
#[inline(never)]
fn rust_leak(mib: usize) {
    let layout = std::alloc::Layout::from_size_align(BLOCK, 16).unwrap();
    for _ in 0..mib * (1 << 20) / BLOCK {
        // SAFETY: a nonzero size; the block is written within its bounds and leaked.
        unsafe {
            let p = std::alloc::alloc(layout);
            assert!(!p.is_null());
            p.write_bytes(1, BLOCK);
            // Escapes, so the compiler keeps the allocation.
            std::hint::black_box(p);
        }
    }
}

/// C's blocks (what a C library linked into the program allocates), never freed.
#[inline(never)]
fn c_leak(mib: usize) {
    for _ in 0..mib * (1 << 20) / BLOCK {
        // SAFETY: malloc of a nonzero size; the block is written within its bounds.
        unsafe {
            let p = libc::malloc(BLOCK) as *mut u8;
            assert!(!p.is_null());
            p.write_bytes(2, BLOCK);
            std::hint::black_box(p);
        }
    }
}

/// Profiles of this process written on the interval timer so far, by instance:
/// (`.pb.gz`: the preloaded `libebb.so`'s, `.raw`: the Rust code's).
fn sequence_profiles(prefix: &str) -> (usize, usize) {
    let prefix = std::path::Path::new(prefix);
    let dir = prefix.parent().unwrap_or(std::path::Path::new("."));
    let stem = format!(
        "{}.{}.",
        prefix.file_name().unwrap().to_string_lossy(),
        std::process::id()
    );
    let numbered = |name: &str, ext: &str| {
        name.strip_prefix(&stem)
            .and_then(|rest| rest.strip_suffix(ext))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let count = |ext: &str| names.iter().filter(|n| numbered(n, ext)).count();
    (count(".pb.gz"), count(".raw"))
}

/// The distinct instances that wrote a retention report on the signal to this
/// process's `EBB_REPORT` file (JSON lines) so far.
fn instances_reported_on_signal(template: &str) -> usize {
    let path = template.replace("%p", &std::process::id().to_string());
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut instances: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"trigger\":\"signal\""))
        .filter_map(|l| l.split("\"instance\":").nth(1)?.split(',').next())
        .collect();
    instances.sort_unstable();
    instances.dedup();
    instances.len()
}

/// Whether C's `malloc` is served by a second ebb instance (a preloaded library), not
/// by this program's own ebb (a build whose `ebb` has the `override` feature: Cargo's
/// feature unification in a workspace build gives it that).
fn c_has_its_own_instance() -> bool {
    // The object each function was loaded from, by its load address (a path would be
    // as the loader was given it, relative or not).
    let base_of = |f: *const libc::c_void| {
        // SAFETY: `Dl_info` is pointers and an integer, for which all zeroes is valid.
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `f` is a function of the process; `info` is written by dladdr.
        let found = unsafe { libc::dladdr(f, &mut info) };
        (found != 0).then_some(info.dli_fbase as usize)
    };
    let own = base_of(c_has_its_own_instance as *const libc::c_void);
    let malloc = base_of(libc::malloc as *const libc::c_void);
    own.is_some() && malloc.is_some() && own != malloc
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("leak-both"), Some(mib)) => {
            let mib: usize = mib.parse().expect("MIB");
            rust_leak(mib);
            c_leak(mib);
        }
        (Some("leak-both-steps"), Some(mib)) => {
            let mib: usize = mib.parse().expect("MIB");
            let steps: usize = args.get(3).and_then(|s| s.parse().ok()).expect("STEPS");
            let prefix = std::env::var("EBB_PROFILE").expect("EBB_PROFILE");
            let two = c_has_its_own_instance();
            for _ in 0..steps {
                let before = sequence_profiles(&prefix);
                rust_leak(mib);
                c_leak(mib);
                loop {
                    let now = sequence_profiles(&prefix);
                    let c_wrote = now.0 > before.0;
                    let rust_wrote = now.1 > before.1;
                    let done = if two {
                        c_wrote && rust_wrote
                    } else {
                        c_wrote || rust_wrote
                    };
                    if done {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
            println!("two instances: {two}");
        }
        (Some("leak-both-reported"), Some(mib)) => {
            let mib: usize = mib.parse().expect("MIB");
            let template = std::env::var("EBB_REPORT").expect("EBB_REPORT");
            rust_leak(mib);
            c_leak(mib);
            let want = if c_has_its_own_instance() { 2 } else { 1 };
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while instances_reported_on_signal(&template) < want {
                if std::time::Instant::now() > give_up {
                    println!("not every instance reported");
                    std::process::exit(1);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            println!("instances reported: {want}");
        }
        (Some("leak-both-lines"), Some(mib)) => {
            let mib: usize = mib.parse().expect("MIB");
            rust_leak(mib);
            c_leak(mib);
            println!("ready (two instances: {})", c_has_its_own_instance());
            for line in std::io::stdin().lines() {
                if line.expect("stdin").trim() == "leak" {
                    rust_leak(mib);
                    c_leak(mib);
                    println!("leaked");
                }
            }
        }
        _ => {
            eprintln!(
                "usage: ebb-test-rust-on-ebb leak-both MIB | leak-both-steps MIB STEPS \
                 | leak-both-reported MIB | leak-both-lines MIB"
            );
            std::process::exit(2);
        }
    }
}

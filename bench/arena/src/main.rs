//! Per-request arena pattern: a request allocates many small objects (a linked list of
//! nodes of 16-128 bytes, each written), reads them back, and then all of them go at
//! once. Three ways to let them go:
//!
//! - `frees`: ordinary allocations (ebb as the global allocator), freed one by one;
//! - `heap`: one `ebb::Heap` per request, allocated from, then `destroy`ed;
//! - `bumpalo`: one `bumpalo::Bump` reused across requests, `reset` after each.
//!
//! Rounds interleave the three (A B C A B C ...); prints the median ns per object of
//! each and the process CPU time (user+sys).
//!
//!   cargo run --release -p ebb-bench-arena -- [objects-per-request] [requests] [rounds]

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

use std::time::Instant;

#[repr(C)]
struct Node {
    next: *mut Node,
    len: usize,
}

fn size_of(i: usize) -> usize {
    16 + (i * 7919 % 8) * 16
}

/// Build a list of `n` nodes with `alloc`, then walk it; returns a checksum.
fn request(n: usize, mut alloc: impl FnMut(usize) -> *mut u8) -> (usize, *mut Node) {
    let mut head: *mut Node = std::ptr::null_mut();
    for i in 0..n {
        let size = size_of(i);
        let p = alloc(size) as *mut Node;
        // SAFETY: p is a fresh block of `size` >= 16 bytes, 8-aligned.
        unsafe {
            p.write(Node {
                next: head,
                len: size,
            });
            std::ptr::write_bytes((p as *mut u8).add(16), i as u8, size - 16);
        }
        head = p;
    }
    let mut sum = 0;
    let mut p = head;
    while !p.is_null() {
        // SAFETY: nodes are live until the request ends.
        unsafe {
            sum += (*p).len;
            p = (*p).next;
        }
    }
    (sum, head)
}

fn run_frees(n: usize, requests: usize) -> usize {
    let mut total = 0;
    for _ in 0..requests {
        let layout = |s| std::alloc::Layout::from_size_align(s, 8).unwrap();
        // SAFETY: layouts are non-zero sized.
        let (sum, mut p) = request(n, |s| unsafe { std::alloc::alloc(layout(s)) });
        total += sum;
        while !p.is_null() {
            // SAFETY: each node is a live block of its recorded size.
            unsafe {
                let next = (*p).next;
                std::alloc::dealloc(p as *mut u8, layout((*p).len));
                p = next;
            }
        }
    }
    total
}

fn run_heap(n: usize, requests: usize) -> usize {
    let mut total = 0;
    for _ in 0..requests {
        let heap = ebb::Heap::new();
        total += request(n, |s| heap.alloc(s, 8)).0;
        heap.destroy();
    }
    total
}

fn run_bumpalo(n: usize, requests: usize) -> usize {
    let mut total = 0;
    let mut bump = bumpalo::Bump::new();
    for _ in 0..requests {
        let layout = |s| std::alloc::Layout::from_size_align(s, 8).unwrap();
        total += request(n, |s| bump.alloc_layout(layout(s)).as_ptr()).0;
        bump.reset();
    }
    total
}

/// User + system CPU time of the whole process (every thread), in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// A way to let a request's objects go: its name, and `run(objects, requests)`.
type Variant = (&'static str, fn(usize, usize) -> usize);

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = args.first().copied().unwrap_or(10_000);
    let requests = args.get(1).copied().unwrap_or(200);
    let rounds = args.get(2).copied().unwrap_or(7);
    let variants: [Variant; 3] = [
        ("frees", run_frees),
        ("heap", run_heap),
        ("bumpalo", run_bumpalo),
    ];
    let mut times = vec![Vec::new(); variants.len()];
    let mut cpu = vec![0.0; variants.len()];
    let mut check = 0;
    for _ in 0..rounds {
        for (i, (_, f)) in variants.iter().enumerate() {
            let c0 = cpu_seconds();
            let t0 = Instant::now();
            check ^= f(n, requests);
            times[i].push(t0.elapsed().as_nanos() as f64 / (n * requests) as f64);
            cpu[i] += cpu_seconds() - c0;
        }
    }
    println!("objects/request {n}, requests {requests}, rounds {rounds} (checksum {check})");
    println!(
        "{:<8} {:>14} {:>14} {:>10}",
        "variant", "median ns/obj", "min ns/obj", "cpu s"
    );
    let base = {
        let mut t = times[0].clone();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    for (i, (name, _)) in variants.iter().enumerate() {
        let mut t = times[i].clone();
        t.sort_by(f64::total_cmp);
        println!(
            "{:<8} {:>14.2} {:>14.2} {:>10.2}   ({:.2}x frees)",
            name,
            t[t.len() / 2],
            t[0],
            cpu[i],
            t[t.len() / 2] / base
        );
    }
}

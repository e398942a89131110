//! The sparse-survivors scenario: a burst of mixed object graphs, random whole objects
//! survive, then the process goes idle (issue 14's first shape).
//!
//! Three threads each build objects: trees of 32-256 B nodes (each node a short string,
//! a child vector and a small payload), texts of 1-64 KiB and buffers of 64 KiB-2 MiB.
//! Each thread hands its objects to its neighbour, which frees them (remote frees)
//! except a random 5% of whole objects, which it keeps. Every thread then parks: nothing
//! calls the allocator any more. The survivors are spread over everything the burst
//! touched, so a page of small blocks keeps a few live nodes among many free ones: this
//! measures what an allocator gives back around survivors it cannot move.
//!
//! Before parking, each thread puts its survivors where the main thread can reach them;
//! the main thread samples at 0, 0.1, 0.25, 0.5, 1, 2 and 10 s after the last free
//! without allocating, and only then collects the OS pages the survivors touch (the
//! touched-page bound, `touched.rs`): collected earlier, the page lists would be live
//! memory at every sample that neither `live` nor the bound counts (~0.7 MiB here).

use crate::probe::{self, Recorder, Rng};
use crate::touched::Pages;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

struct Node {
    name: String,
    payload: Box<[u8]>,
    children: Vec<Node>,
}

enum Object {
    Tree(Node),
    Text(String),
    Buffer(Vec<u8>),
}

impl Node {
    /// A tree of about `budget` bytes of nodes; returns it and the bytes it holds.
    fn build(rng: &mut Rng, budget: usize) -> (Node, usize) {
        let name_len = rng.range(4, 24);
        let name: String = (0..name_len)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        // A node's own block: 32-256 B together with its name and child vector.
        let payload = vec![7u8; rng.range(8, 200)].into_boxed_slice();
        let mut bytes = name.capacity() + payload.len();
        let mut children = Vec::new();
        let mut left = budget.saturating_sub(bytes);
        let fanout = rng.range(0, 6);
        for _ in 0..fanout {
            if left < 64 {
                break;
            }
            let share = left / 2;
            let (child, b) = Node::build(rng, share);
            left = left.saturating_sub(b);
            bytes += b;
            children.push(child);
        }
        bytes += children.capacity() * std::mem::size_of::<Node>();
        (
            Node {
                name,
                payload,
                children,
            },
            bytes,
        )
    }

    fn add_pages(&self, pages: &mut Pages) {
        pages.add_block(self.name.as_ptr(), self.name.capacity());
        pages.add_block(self.payload.as_ptr(), self.payload.len());
        pages.add_vec(&self.children);
        for c in &self.children {
            c.add_pages(pages);
        }
    }
}

impl Object {
    fn make(rng: &mut Rng) -> (Object, usize) {
        match rng.range(0, 99) {
            // Trees: most objects, a third of the bytes.
            0..=79 => {
                let budget = rng.range(2 << 10, 24 << 10);
                let (tree, bytes) = Node::build(rng, budget);
                (Object::Tree(tree), bytes)
            }
            80..=97 => {
                let n = rng.range(1 << 10, 64 << 10);
                let text: String = "lorem ipsum ".chars().cycle().take(n).collect();
                let cap = text.capacity();
                (Object::Text(text), cap)
            }
            _ => {
                let n = rng.range(64 << 10, 2 << 20);
                let mut buf = vec![0u8; n];
                for i in (0..n).step_by(4096) {
                    buf[i] = 1;
                }
                (Object::Buffer(buf), n)
            }
        }
    }

    fn add_pages(&self, pages: &mut Pages) {
        match self {
            Object::Tree(n) => {
                // The root node lives inline in the vector of objects.
                n.add_pages(pages)
            }
            Object::Text(t) => pages.add_block(t.as_ptr(), t.capacity()),
            Object::Buffer(b) => pages.add_vec(b),
        }
    }
}

/// Objects with their sizes, handed from their maker to the thread that frees them.
type Handed = Mutex<Option<Vec<(Object, usize)>>>;

struct Shared {
    barrier: Barrier,
    handed: Vec<Handed>,
    /// Each thread's survivors, held here until the process exits.
    kept: Vec<Mutex<Vec<Object>>>,
    done: AtomicUsize,
    last_free_ns: AtomicU64,
    live_bytes: AtomicU64,
    stop: AtomicBool,
}

const THREADS: usize = 3;
const FULL_SAMPLES_MS: &[u64] = &[0, 100, 250, 500, 1000, 2000, 10000];
const QUICK_SAMPLES_MS: &[u64] = &[0, 200];
/// Survivors: this many in 1000 whole objects.
const KEEP_PER_MILLE: usize = 50;

pub fn run(quick: bool) {
    // The report measured 1.5 GB; a fifth keeps the run to seconds on a small machine
    // and the same proportions.
    let (total, sample_ms): (usize, &[u64]) = if quick {
        (12 << 20, QUICK_SAMPLES_MS)
    } else {
        // `--rounds 5`: the report's 1.5 GB.
        (crate::rounds(1) * (300 << 20), FULL_SAMPLES_MS)
    };
    let per_thread = total / THREADS;
    let rec = Arc::new(Recorder::new("sparse-survivors"));
    let shared = Arc::new(Shared {
        barrier: Barrier::new(THREADS + 1),
        handed: (0..THREADS).map(|_| Mutex::new(None)).collect(),
        kept: (0..THREADS).map(|_| Mutex::new(Vec::new())).collect(),
        done: AtomicUsize::new(0),
        last_free_ns: AtomicU64::new(0),
        live_bytes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });

    let mut handles = Vec::with_capacity(THREADS);
    for i in 0..THREADS {
        let shared = Arc::clone(&shared);
        let rec = Arc::clone(&rec);
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(i as u64 * 31 + 5);
            let mut objects = Vec::new();
            let mut bytes = 0;
            while bytes < per_thread {
                let (o, b) = Object::make(&mut rng);
                bytes += b;
                objects.push((o, b));
            }
            *shared.handed[(i + 1) % THREADS].lock().unwrap() = Some(objects);
            shared.barrier.wait(); // everything built
            shared.barrier.wait(); // main has sampled
            let theirs = shared.handed[i].lock().unwrap().take().unwrap();
            let mut kept = Vec::new();
            let mut kept_bytes = 0;
            for (o, b) in theirs {
                if rng.range(0, 999) < KEEP_PER_MILLE {
                    kept_bytes += b;
                    kept.push(o);
                } else {
                    drop(o);
                }
            }
            kept.shrink_to_fit();
            let live = kept_bytes + kept.capacity() * std::mem::size_of::<Object>();
            *shared.kept[i].lock().unwrap() = kept;
            shared.live_bytes.fetch_add(live as u64, Ordering::SeqCst);
            let t = rec.start.elapsed().as_nanos() as u64;
            shared.last_free_ns.fetch_max(t, Ordering::SeqCst);
            shared.done.fetch_add(1, Ordering::SeqCst);
            // Park for good: no exit, no allocator calls.
            while !shared.stop.load(Ordering::SeqCst) {
                thread::park();
            }
        }));
    }

    shared.barrier.wait();
    rec.sample("built", 0, total as u64);
    shared.barrier.wait();
    // From here on this thread must not allocate until the last sample.
    while shared.done.load(Ordering::SeqCst) < THREADS {
        thread::sleep(Duration::from_micros(100));
    }
    let last_free_ns = shared.last_free_ns.load(Ordering::SeqCst);
    let live = shared.live_bytes.load(Ordering::SeqCst);
    let mut readings = [(0.0f64, probe::Mem::default()); 8];
    for (n, &ms) in sample_ms.iter().enumerate() {
        let due_ns = last_free_ns + ms * 1_000_000;
        let now_ns = rec.start.elapsed().as_nanos() as u64;
        if due_ns > now_ns {
            thread::sleep(Duration::from_nanos(due_ns - now_ns));
        }
        readings[n] = (rec.elapsed_ms(), probe::mem());
    }
    // The state at the end (not at any one sample), before the page walk allocates.
    rec.debug_stats("idle", *sample_ms.last().unwrap());
    let resident = crate::excess::wanted().then(crate::excess::Resident::snapshot);
    let (touched, mesh) = {
        let mut pages = Pages::new();
        if cfg!(feature = "alloc-ebb") {
            pages.record_small();
        }
        if resident.is_some() {
            pages.record_all();
        }
        for kept in &shared.kept {
            let kept = kept.lock().unwrap();
            pages.add_vec(&kept);
            for o in kept.iter() {
                o.add_pages(&mut pages);
            }
        }
        let mesh = crate::mesh::count(pages.small_blocks());
        if let Some(resident) = &resident {
            let blocks = pages.all_blocks().to_vec();
            resident.report(pages.sorted(), &blocks);
        }
        (pages.bytes(), mesh)
    };
    for (n, &ms) in sample_ms.iter().enumerate() {
        let (t_ms, m) = readings[n];
        rec.print_sample_bound(t_ms, "idle", ms, live, touched, m);
    }
    rec.summary(
        quick,
        live,
        format_args!(
            ",\"threads\":{THREADS},\"total_bytes\":{total},\"touched_bytes\":{touched},\
             \"last_free_ms\":{:.1},\"small_os_pages\":{},\"mesh_pairs\":{}",
            last_free_ns as f64 / 1e6,
            mesh.os_pages,
            mesh.pairs
        ),
    );
    // The parked threads hold their survivors until the process exits.
    std::process::exit(0);
}

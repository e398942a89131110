//! Multi-threaded stress: blocks cross threads through channels and a shared pool, are
//! freed by threads that did not allocate them (often after their creators exited),
//! and every block's contents are checked before it is freed.
//!
//! Tests here run one at a time (a process-wide lock) so that the statistics checked at
//! the end of each describe that test alone. Every test uses at least 4 threads, even
//! on machines with fewer cores.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

mod common;

use common::stress_blocks::*;
use common::*;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

// ---------------------------------------------------------------------------------
// (a) producer / consumer pairs

enum Msg {
    One(Blk),
    Many(Vec<Blk>),
}

#[test]
fn producer_consumer_pairs() {
    let _serial = serial();
    let before = ebb::stats();
    let pairs = threads_to_use() / 2;
    const PER_PRODUCER: usize = 300_000;
    let mut handles = Vec::new();
    for pair in 0..pairs {
        let (tx, rx) = mpsc::sync_channel::<Msg>(512);
        // Blocks the consumer sends back for the producer to free (freed twice removed
        // from their allocating thread's view: allocated here, checked there, freed here).
        let (back_tx, back_rx) = mpsc::channel::<Blk>();
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(100 + pair as u64);
            let mut sent = 0;
            let mut returned = 0;
            while sent < PER_PRODUCER {
                if rng.chance(1, 4) {
                    let n = rng.range(1, 64);
                    let batch: Vec<Blk> = (0..n).map(|_| Blk::random(&mut rng)).collect();
                    sent += n;
                    tx.send(Msg::Many(batch)).unwrap();
                } else {
                    tx.send(Msg::One(Blk::random(&mut rng))).unwrap();
                    sent += 1;
                }
                while let Ok(b) = back_rx.try_recv() {
                    b.free("returned to producer");
                    returned += 1;
                }
            }
            drop(tx);
            for b in back_rx {
                b.free("returned to producer");
                returned += 1;
            }
            (sent, returned)
        }));
        handles.push(thread::spawn(move || {
            let mut rng = Rng::new(200 + pair as u64);
            let mut got = 0;
            let mut sent_back = 0;
            let mut handle = |b: Blk, rng: &mut Rng| {
                got += 1;
                if rng.chance(1, 8) {
                    b.verify("consumer, before sending back");
                    back_tx.send(b).unwrap();
                    sent_back += 1;
                } else {
                    b.free("consumer");
                }
            };
            for msg in rx {
                match msg {
                    Msg::One(b) => handle(b, &mut rng),
                    Msg::Many(v) => {
                        for b in v {
                            handle(b, &mut rng);
                        }
                    }
                }
            }
            (got, sent_back)
        }));
    }
    let results: Vec<(usize, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for pair in results.chunks(2) {
        let ((sent, returned), (got, sent_back)) = (pair[0], pair[1]);
        assert_eq!(sent, got);
        assert_eq!(returned, sent_back);
        assert!(sent >= PER_PRODUCER);
    }
    check_after(&before, 2 * pairs as u64);
}

// ---------------------------------------------------------------------------------
// (b) thread churn

#[cfg(target_os = "linux")]
mod key {
    //! A pthread key created after ebb's own, so its destructor runs after ebb has
    //! retired the exiting thread's heap: the frees and allocations it does must work.
    use super::Blk;
    use std::ffi::{c_int, c_void};
    use std::sync::OnceLock;

    type PthreadKey = std::ffi::c_uint;
    extern "C" {
        fn pthread_key_create(
            key: *mut PthreadKey,
            dtor: Option<unsafe extern "C" fn(*mut c_void)>,
        ) -> c_int;
        fn pthread_setspecific(key: PthreadKey, value: *const c_void) -> c_int;
    }

    unsafe extern "C" fn destructor(value: *mut c_void) {
        // SAFETY: the value is a Box<Blk> leaked by `set`.
        let blk = unsafe { Box::from_raw(value as *mut Blk) };
        blk.free("late thread-exit destructor");
        let v: Vec<u64> = (0..1000).collect();
        assert_eq!(v.iter().sum::<u64>(), 499_500);
    }

    static KEY: OnceLock<PthreadKey> = OnceLock::new();

    /// Have `blk` freed by a pthread key destructor when this thread exits.
    pub fn free_at_exit(blk: Blk) {
        let key = *KEY.get_or_init(|| {
            let mut key = 0;
            // SAFETY: valid out-pointer and destructor.
            assert_eq!(unsafe { pthread_key_create(&mut key, Some(destructor)) }, 0);
            key
        });
        let value = Box::into_raw(Box::new(blk));
        // SAFETY: key is valid; the value is a leaked box the destructor reclaims.
        assert_eq!(
            unsafe { pthread_setspecific(key, value as *const c_void) },
            0
        );
    }
}

/// Drops at thread exit (Rust TLS destructor): frees a block and allocates.
struct TlsGuard(Option<Blk>);
impl Drop for TlsGuard {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            b.free("TLS destructor");
        }
        let s: String = (0..100)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        assert_eq!(s.len(), 100);
    }
}
thread_local! {
    static TLS_GUARD: std::cell::RefCell<TlsGuard> = const { std::cell::RefCell::new(TlsGuard(None)) };
}

#[test]
fn thread_churn() {
    let _serial = serial();
    let before = ebb::stats();
    const WAVES: usize = 10;
    const PER_WAVE: usize = 20;
    const BLOCKS: usize = 1500;
    let (tx, rx) = mpsc::channel::<Vec<Blk>>();
    // Blocks of earlier waves, waiting to be freed by later threads.
    let mut held: Vec<Blk> = Vec::new();
    let mut spawned = 0u64;
    let mut created = 0usize;
    let mut freed_by_others = 0usize;
    for wave in 0..WAVES {
        // Hand each thread of this wave a share of the blocks made by exited threads.
        let mut shares: Vec<Vec<Blk>> = (0..PER_WAVE).map(|_| Vec::new()).collect();
        for (i, b) in held.drain(..).enumerate() {
            shares[i % PER_WAVE].push(b);
        }
        let handles: Vec<_> = shares
            .into_iter()
            .enumerate()
            .map(|(t, share)| {
                let tx = tx.clone();
                spawned += 1;
                thread::spawn(move || {
                    let mut rng = Rng::new((wave * PER_WAVE + t) as u64 + 1000);
                    let n_share = share.len();
                    for b in share {
                        b.free("churn: block of an exited thread");
                    }
                    let mut mine: Vec<Blk> = (0..BLOCKS).map(|_| Blk::random(&mut rng)).collect();
                    // Free a third here, resize some, hand the rest over.
                    for _ in 0..BLOCKS / 3 {
                        let i = rng.below(mine.len());
                        mine.swap_remove(i).free("churn: own block");
                    }
                    for _ in 0..50 {
                        let i = rng.below(mine.len());
                        let new = stress_size(&mut rng);
                        mine[i].resize(new);
                    }
                    #[cfg(target_os = "linux")]
                    key::free_at_exit(mine.pop().unwrap());
                    let last = mine.pop().unwrap();
                    TLS_GUARD.with(|g| g.borrow_mut().0 = Some(last));
                    let handed = mine.len();
                    tx.send(mine).unwrap();
                    (n_share, handed)
                })
            })
            .collect();
        for h in handles {
            let (n_share, handed) = h.join().unwrap();
            freed_by_others += n_share;
            created += handed;
        }
        // The wave's threads have exited; their blocks are in the channel.
        while let Ok(v) = rx.try_recv() {
            held.extend(v);
        }
        // The owner frees some itself.
        let mut rng = Rng::new(wave as u64);
        for _ in 0..held.len() / 10 {
            let i = rng.below(held.len());
            held.swap_remove(i).free("churn: owner");
            freed_by_others += 1;
        }
    }
    // The rest goes to a few final threads.
    let mut shares: Vec<Vec<Blk>> = (0..4).map(|_| Vec::new()).collect();
    for (i, b) in held.drain(..).enumerate() {
        shares[i % 4].push(b);
    }
    let handles: Vec<_> = shares
        .into_iter()
        .map(|share| {
            spawned += 1;
            thread::spawn(move || {
                let n = share.len();
                for b in share {
                    b.free("churn: final freer");
                }
                n
            })
        })
        .collect();
    for h in handles {
        freed_by_others += h.join().unwrap();
    }
    drop(tx);
    assert_eq!(
        created, freed_by_others,
        "every handed-over block was freed"
    );
    assert!(spawned >= 200);
    check_after(&before, spawned);
}

// ---------------------------------------------------------------------------------
// (c) mixed workload with a shared pool

#[test]
fn mixed_workload_shared_pool() {
    let _serial = serial();
    let before = ebb::stats();
    let threads = threads_to_use();
    const TOTAL_OPS: usize = 10_000_000;
    let per_thread = TOTAL_OPS.div_ceil(threads);
    let pool: Arc<Mutex<Vec<Blk>>> = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(5000 + t as u64);
                let mut mine: Vec<Blk> = Vec::new();
                let max_live = 1000 + 500 * t;
                let mut ops = 0usize;
                let mut counts = [0usize; 5];
                while ops < per_thread {
                    let r = rng.below(1000);
                    if mine.is_empty() || (r < 500 && mine.len() < max_live) {
                        mine.push(Blk::random(&mut rng));
                        counts[0] += 1;
                    } else if r < 930 {
                        let i = rng.below(mine.len());
                        mine.swap_remove(i).free("mixed: own block");
                        counts[1] += 1;
                    } else if r < 950 {
                        let i = rng.below(mine.len());
                        let new = stress_size(&mut rng);
                        mine[i].resize(new);
                        counts[2] += 1;
                    } else if r < 980 {
                        // Hand a block to whoever takes it next.
                        let i = rng.below(mine.len());
                        let b = mine.swap_remove(i);
                        let mut p = pool.lock().unwrap();
                        if p.len() < 20_000 {
                            p.push(b);
                        } else {
                            let j = rng.below(p.len());
                            let other = std::mem::replace(&mut p[j], b);
                            drop(p);
                            other.free("mixed: pool block (swap)");
                        }
                        counts[3] += 1;
                    } else {
                        // Take blocks someone else (probably) allocated.
                        let taken: Vec<Blk> = {
                            let mut p = pool.lock().unwrap();
                            let n = rng.range(1, 8).min(p.len());
                            let at = p.len() - n;
                            p.split_off(at)
                        };
                        for b in taken {
                            if rng.chance(1, 2) {
                                b.free("mixed: pool block");
                            } else {
                                b.verify("mixed: adopted pool block");
                                mine.push(b);
                            }
                        }
                        counts[4] += 1;
                    }
                    ops += 1;
                }
                for b in mine {
                    b.free("mixed: final");
                }
                counts
            })
        })
        .collect();
    let mut counts = [0usize; 5];
    for h in handles {
        let c = h.join().unwrap();
        for (a, b) in counts.iter_mut().zip(c) {
            *a += b;
        }
    }
    assert!(counts.iter().sum::<usize>() >= TOTAL_OPS);
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    let rest = std::mem::take(&mut *pool.lock().unwrap());
    for b in rest {
        b.free("mixed: left in pool");
    }
    check_after(&before, threads as u64);
}

/// Many threads allocate and free at once in the same few size classes, with
/// everything freed remotely: pages fill, get abandoned, collected and reclaimed.
#[test]
fn all_remote_frees_same_class() {
    let _serial = serial();
    let before = ebb::stats();
    let threads = threads_to_use();
    let (tx, rx) = mpsc::sync_channel::<Vec<Blk>>(64);
    let freer = thread::spawn(move || {
        let mut n = 0;
        for v in rx {
            n += v.len();
            for b in v {
                b.free("same class: remote");
            }
        }
        n
    });
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut n = 0;
                for round in 0..200 {
                    let size = [16usize, 48, 128, 1024][(round + t) % 4];
                    let v: Vec<Blk> = (0..1000)
                        .map(|i| Blk::new(size, 8, (t * 1_000_000 + round * 1000 + i) as u64))
                        .collect();
                    n += v.len();
                    tx.send(v).unwrap();
                }
                n
            })
        })
        .collect();
    drop(tx);
    let made: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(freer.join().unwrap(), made);
    check_after(&before, threads as u64 + 1);
}

// ---------------------------------------------------------------------------------
// fork while other threads allocate

#[cfg(target_os = "linux")]
mod sys {
    use std::ffi::c_int;
    extern "C" {
        pub fn fork() -> c_int;
        pub fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
        pub fn kill(pid: c_int, sig: c_int) -> c_int;
        pub fn _exit(code: c_int) -> !;
        pub fn dup2(old: c_int, new: c_int) -> c_int;
        pub fn write(fd: c_int, buf: *const u8, len: usize) -> isize;
    }
    pub const WNOHANG: c_int = 1;
    pub const SIGKILL: c_int = 9;
}

/// The child of a fork taken while other threads allocate and free can use the
/// allocator: allocate and free all kinds of blocks, and free blocks allocated before
/// the fork by threads that do not exist in the child. The child only calls the
/// allocator and `_exit` (no printing through `std`: locks of other threads may be
/// held). Its standard error goes to a file (ebb's own reports, the secure build's
/// abort message, and a panic's message, written with `write`), which a failed
/// round's assertion shows: the test harness captures neither a child's direct writes
/// nor its panic output.
#[cfg(target_os = "linux")]
#[test]
fn fork_while_allocating() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let _serial = serial();
    let before = ebb::stats();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel::<Vec<Blk>>(4);
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let stop = stop.clone();
            let tx = tx.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(9000 + t);
                let mut mine: Vec<Blk> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..1000 {
                        if mine.len() < 2000 && rng.chance(1, 2) {
                            mine.push(Blk::random(&mut rng));
                        } else if !mine.is_empty() {
                            let i = rng.below(mine.len());
                            mine.swap_remove(i).free("fork: worker");
                        }
                    }
                    let give: Vec<Blk> = (0..100.min(mine.len()))
                        .map(|_| mine.pop().unwrap())
                        .collect();
                    if let Err(mpsc::TrySendError::Full(v) | mpsc::TrySendError::Disconnected(v)) =
                        tx.try_send(give)
                    {
                        mine.extend(v);
                    }
                }
                for b in mine {
                    b.free("fork: worker final");
                }
            })
        })
        .collect();
    drop(tx);
    for round in 0..12 {
        // Blocks allocated by the workers, owned here now.
        let handed: Vec<Blk> = rx.recv().unwrap();
        let stderr_path = std::env::temp_dir().join(format!(
            "ebb-fork-child-{}-{round}.stderr",
            std::process::id()
        ));
        let stderr_file = std::fs::File::create(&stderr_path).unwrap();
        // SAFETY: the child only allocates, frees and exits.
        let pid = unsafe { sys::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: both descriptors are open; fd 2 becomes the file.
            unsafe { sys::dup2(stderr_file.as_raw_fd(), 2) };
            let ok = std::panic::catch_unwind(move || {
                let mut rng = Rng::new(round);
                for b in handed {
                    b.free("fork child: block of a thread that is gone");
                }
                let mut mine: Vec<Blk> = Vec::new();
                for i in 0..6_000 {
                    if mine.len() < 500 && rng.chance(2, 3) {
                        mine.push(Blk::random(&mut rng));
                    } else if !mine.is_empty() {
                        let j = rng.below(mine.len());
                        mine.swap_remove(j).free("fork child");
                    }
                    if i % 3000 == 0 {
                        mine.push(Blk::new(ebb::LARGE_MAX + 123, 8, i as u64));
                        mine.push(Blk::new(3 * MIB, 4096, i as u64));
                    }
                }
                for b in mine {
                    b.free("fork child: final");
                }
                let t = thread::spawn(|| Blk::random(&mut Rng::new(1)).free("fork child thread"));
                t.join().unwrap();
                ebb::collect(true);
                check_stats_consistent(&ebb::stats());
            });
            if let Err(payload) = &ok {
                let message = payload
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| payload.downcast_ref::<&str>().copied())
                    .unwrap_or("(a panic without a message)");
                for part in ["fork child panicked: ", message, "\n"] {
                    // SAFETY: a valid buffer of that length; fd 2 is the file.
                    unsafe { sys::write(2, part.as_ptr(), part.len()) };
                }
            }
            // SAFETY: leave the child at once, without running the parent's exit code.
            unsafe { sys::_exit(if ok.is_ok() { 0 } else { 1 }) };
        }
        drop(stderr_file);
        // Parent: its copy of the handed blocks is still live here.
        for b in handed {
            b.free("fork parent");
        }
        let mut status = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            // SAFETY: pid is our child; status is a valid out-pointer.
            let r = unsafe { sys::waitpid(pid, &mut status, sys::WNOHANG) };
            if r == pid {
                break;
            }
            assert_eq!(r, 0, "waitpid failed");
            if std::time::Instant::now() > deadline {
                // SAFETY: pid is our child.
                unsafe { sys::kill(pid, sys::SIGKILL) };
                stop.store(true, Ordering::Relaxed);
                let child_stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!(
                    "fork child {round} hung (deadlock in the allocator after fork?); its \
                     standard error:\n{child_stderr}"
                );
            }
            thread::sleep(std::time::Duration::from_millis(10));
        }
        let child_stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let _ = std::fs::remove_file(&stderr_path);
        assert_eq!(
            status,
            0,
            "fork child {round} failed: raw wait status {status:#x} \
             (exit code {}, signal {}); its standard error:\n{child_stderr}",
            (status >> 8) & 0xff,
            status & 0x7f
        );
    }
    stop.store(true, Ordering::Relaxed);
    for v in rx {
        for b in v {
            b.free("fork: left in channel");
        }
    }
    for w in workers {
        w.join().unwrap();
    }
    check_after(&before, 3);
}

// ---------------------------------------------------------------------------------
// threads that keep going idle while others free into their pages

/// Restores the options when dropped (also when the test panics).
struct OptionsGuard(ebb::Options);
impl Drop for OptionsGuard {
    fn drop(&mut self) {
        ebb::set_options(self.0);
    }
}

/// Threads alternate short bursts of work with short sleeps, with a purge delay of a
/// few milliseconds, so the background purger keeps taking over the pages of idle
/// heaps (when it runs) while their owners wake up again and while other threads free
/// blocks into those pages and hand blocks around. Every block is checked before it
/// is freed.
#[test]
fn owners_going_idle_and_waking() {
    let _serial = serial();
    let before = ebb::stats();
    let _restore = OptionsGuard(ebb::options());
    let mut fast = ebb::options();
    fast.purge_delay_ms = 2;
    ebb::set_options(fast);

    let threads = threads_to_use() + 2;
    let pool: Arc<Mutex<Vec<Blk>>> = Arc::new(Mutex::new(Vec::new()));
    // Busy threads: only fast paths for long stretches (same few small classes, work
    // between calls), so they look idle to the purger while they run, and it tries to
    // take their pages over between two of their calls.
    let busy_threads = 3;
    let busy: Vec<_> = (0..busy_threads)
        .map(|t| {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(77_000 + t as u64);
                let mut ring: Vec<Blk> = (0..256)
                    .map(|_| Blk::new(rng.range(16, 48), 8, rng.next_u64()))
                    .collect();
                let mut spin = 0u64;
                for i in 0..60_000usize {
                    let slot = i % ring.len();
                    let fresh = Blk::new(rng.range(16, 48), 8, rng.next_u64());
                    let old = std::mem::replace(&mut ring[slot], fresh);
                    if i % 16 == 0 {
                        old.verify("busy: handed to the pool");
                        pool.lock().unwrap().push(old);
                    } else {
                        old.free("busy: own block");
                    }
                    // Work outside the allocator.
                    for _ in 0..rng.range(0, 8000) {
                        spin = spin.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                }
                for b in ring {
                    b.free("busy: final");
                }
                std::hint::black_box(spin);
            })
        })
        .collect();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let pool = pool.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(31_000 + t as u64);
                let mut mine: Vec<Blk> = Vec::new();
                for _round in 0..250 {
                    for _ in 0..rng.range(50, 1500) {
                        let r = rng.below(100);
                        if mine.is_empty() || (r < 45 && mine.len() < 3000) {
                            mine.push(Blk::random(&mut rng));
                        } else if r < 85 {
                            let i = rng.below(mine.len());
                            mine.swap_remove(i).free("idle owners: own block");
                        } else if r < 90 {
                            let i = rng.below(mine.len());
                            let new = stress_size(&mut rng);
                            mine[i].resize(new);
                        } else if r < 95 {
                            let i = rng.below(mine.len());
                            let b = mine.swap_remove(i);
                            pool.lock().unwrap().push(b);
                        } else {
                            let taken: Vec<Blk> = {
                                let mut p = pool.lock().unwrap();
                                let n = rng.range(1, 32).min(p.len());
                                let at = p.len() - n;
                                p.split_off(at)
                            };
                            for b in taken {
                                b.free("idle owners: pool block");
                            }
                        }
                    }
                    // Idle: no allocator calls. Sometimes longer than the purge delay.
                    thread::sleep(std::time::Duration::from_micros(rng.range(0, 8000) as u64));
                }
                for b in mine {
                    b.free("idle owners: final");
                }
            })
        })
        .collect();
    for h in handles.into_iter().chain(busy) {
        h.join().unwrap();
    }
    let rest = std::mem::take(&mut *pool.lock().unwrap());
    for b in rest {
        b.free("idle owners: left in pool");
    }
    let s = ebb::stats();
    eprintln!(
        "owners_going_idle_and_waking: {} steals in {} attempts",
        s.steals - before.steals,
        s.steal_attempts - before.steal_attempts
    );
    check_after(&before, (threads + busy_threads) as u64);
}

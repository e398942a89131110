//! The sampler's records, lock-free and fixed in size: a table of call stacks
//! (buckets) with the estimated allocations and frees of each, and a table of the
//! sampled blocks still live (slot -> address, bucket and the amounts to credit when
//! the block is freed). A sampled block's span keeps its slot (`Page::sample`), so a
//! free goes straight to it: no probing, and nothing shared is written per sample
//! beyond the bucket's three counters and the slot.
//!
//! Both live in one mapping made when profiling first starts (untouched entries cost
//! address space only). Inserts claim an entry with one CAS; a bucket is published
//! (`READY`) once its stack is written, and readers (dumps) skip entries not ready. A
//! thread that finds a bucket being written by another waits a few rounds and then
//! uses another entry (a duplicate stack is harmless: the encoder merges by stack), so
//! no thread ever waits for another indefinitely, even one it interrupted.

use crate::os;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Frames kept per stack (the innermost).
pub const MAX_DEPTH: usize = 64;
/// Distinct stacks (power of two).
pub const BUCKETS: usize = 1 << 14;
/// Sampled blocks tracked while live (power of two); a block sampled while the table
/// is full counts as allocated but never as live.
pub const LIVE_SLOTS: usize = 1 << 16;
/// Entries an insert or a lookup probes, from the hash's own.
const PROBES: usize = 64;
/// Fixed-point scale of the object estimates (a weight is fractional).
pub const OBJECT_SCALE: u64 = 1024;

const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;

/// One call stack and what was sampled at it.
#[repr(C)]
pub struct Bucket {
    state: AtomicU32,
    depth: u32,
    hash: u64,
    pcs: [usize; MAX_DEPTH],
    /// Samples taken here, and of those, freed (or never tracked as live).
    pub samples: AtomicU64,
    pub freed_samples: AtomicU64,
    /// Estimates of the true totals (objects in `1/OBJECT_SCALE` units): allocated,
    /// and of those freed. In use is the difference; kept as two sums, not as in-use
    /// counters, so a sample writes three counters instead of six.
    pub alloc_objects: AtomicU64,
    pub alloc_bytes: AtomicU64,
    pub freed_objects: AtomicU64,
    pub freed_bytes: AtomicU64,
}

impl Bucket {
    pub fn stack(&self) -> &[usize] {
        &self.pcs[..self.depth as usize]
    }

    /// The six counters as one reading: `[samples, freed_samples, alloc_objects,
    /// alloc_bytes, freed_objects, freed_bytes]`. The frees are read first, each counted
    /// after its allocation, so in-use (allocated less freed) is never negative even
    /// with a sample between the loads (they are separate atomics).
    pub fn counters(&self) -> [u64; 6] {
        let freed_samples = self.freed_samples.load(Ordering::Acquire);
        let freed_objects = self.freed_objects.load(Ordering::Acquire);
        let freed_bytes = self.freed_bytes.load(Ordering::Acquire);
        [
            self.samples.load(Ordering::Acquire),
            freed_samples,
            self.alloc_objects.load(Ordering::Acquire),
            self.alloc_bytes.load(Ordering::Acquire),
            freed_objects,
            freed_bytes,
        ]
    }

    fn add_freed(&self, objects: u64, bytes: u64) {
        self.freed_samples.fetch_add(1, Ordering::Relaxed);
        self.freed_objects.fetch_add(objects, Ordering::Relaxed);
        self.freed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A sampled block still live.
#[repr(C)]
struct LiveSlot {
    /// The block's address; `0` never used, `TOMBSTONE` freed.
    addr: AtomicUsize,
    bucket: AtomicU32,
    objects: AtomicU64,
    bytes: AtomicU64,
    /// The block's requested size (what its pages hold).
    size: AtomicUsize,
}
const TOMBSTONE: usize = 1;

#[repr(C)]
struct Tables {
    buckets: [Bucket; BUCKETS],
    live: [LiveSlot; LIVE_SLOTS],
    /// The buckets in the order they were made, each as its index + 1 (0: being
    /// published), so that a reader of every stack in use (the peak's snapshot,
    /// `peak.rs`) reads `USED` entries instead of the whole table: the untouched
    /// entries would map the shared zero page (see `bucket_for`).
    used: [AtomicU32; BUCKETS],
}

static TABLES: AtomicPtr<Tables> = AtomicPtr::new(core::ptr::null_mut());
static MAKING: AtomicU32 = AtomicU32::new(0);
/// Samples that found no room (a full bucket table or live table).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The live slot the next sample tries first (`track_live`).
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
/// Entries of `Tables::used` claimed.
static USED: AtomicUsize = AtomicUsize::new(0);
/// The estimated bytes of the sampled blocks tracked as live (the sum of their slots'
/// `bytes`): what the peak's snapshot follows.
static LIVE_BYTES: AtomicU64 = AtomicU64::new(0);

/// The tables, mapped on first use (zeroed memory is the empty state). Null if the
/// OS refused the mapping.
pub fn tables_or_make() -> bool {
    if !TABLES.load(Ordering::Acquire).is_null() {
        return true;
    }
    // One maker; the others wait for it (profiling start-up only, never a sample).
    if MAKING.swap(1, Ordering::AcqRel) == 0 {
        let bytes = core::mem::size_of::<Tables>().next_multiple_of(os::page_size());
        let memory = os::reserve_aligned(bytes, os::page_size());
        TABLES.store(memory as *mut Tables, Ordering::Release);
        if memory.is_null() {
            MAKING.store(0, Ordering::Release);
        }
    } else {
        while TABLES.load(Ordering::Acquire).is_null() && MAKING.load(Ordering::Acquire) != 0 {
            os::yield_now();
        }
    }
    !TABLES.load(Ordering::Acquire).is_null()
}

fn tables() -> Option<&'static Tables> {
    let t = TABLES.load(Ordering::Acquire);
    // SAFETY: once made, the tables are never unmapped; all shared fields are atomics
    // or written before `READY` is published.
    (!t.is_null()).then(|| unsafe { &*t })
}

fn hash_stack(pcs: &[usize]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ pcs.len() as u64;
    for &pc in pcs {
        h = (h ^ pc as u64).wrapping_mul(0x0100_0000_01b3);
        h ^= h >> 29;
    }
    h | 1
}

/// The bucket of `pcs`, made if new; `None` if the table has no room near its hash.
fn bucket_for(t: &Tables, pcs: &[usize]) -> Option<u32> {
    let hash = hash_stack(pcs);
    let mut i = hash as usize;
    for _ in 0..PROBES {
        i &= BUCKETS - 1;
        let b = &t.buckets[i];
        // The claim comes first, not a load: the first access to an entry of a page
        // never touched is then a write, which maps a fresh page. A load first maps the
        // shared zero page, and the write that follows copies it and flushes that
        // mapping from every core running the process (an IPI each): `perf` on
        // typechecker's samples, most of their time in the kernel. (A failed claim
        // writes the line as the bucket's counters are about to anyway.)
        let mut state =
            match b
                .state
                .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    // SAFETY: WRITING gives this thread the entry's plain fields until
                    // READY is published; readers skip it meanwhile.
                    unsafe {
                        let b = b as *const Bucket as *mut Bucket;
                        (*b).hash = hash;
                        (*b).depth = pcs.len() as u32;
                        (&mut (*b).pcs)[..pcs.len()].copy_from_slice(pcs);
                    }
                    b.state.store(READY, Ordering::Release);
                    let k = USED.fetch_add(1, Ordering::AcqRel);
                    if let Some(entry) = t.used.get(k) {
                        entry.store(i as u32 + 1, Ordering::Release);
                    }
                    return Some(i as u32);
                }
                Err(now) => now,
            };
        let mut rounds = 0;
        while state == WRITING && rounds < 100 {
            core::hint::spin_loop();
            state = b.state.load(Ordering::Acquire);
            rounds += 1;
        }
        if state == READY && b.hash == hash && b.stack() == pcs {
            return Some(i as u32);
        }
        i += 1;
    }
    None
}

/// Record a sampled block at `addr` (0: not tracked as live) with its stack and the
/// allocations it stands for (`weight`) of `size` bytes each. Returns its live slot
/// (for [`freed`]) if tracked; a block not tracked counts as allocated and freed.
pub fn record(pcs: &[usize], addr: usize, size: usize, weight: f64) -> Option<u32> {
    let t = tables()?;
    let Some(index) = bucket_for(t, pcs) else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    let b = &t.buckets[index as usize];
    let objects = (weight * OBJECT_SCALE as f64 + 0.5) as u64;
    let bytes = (weight * size as f64 + 0.5) as u64;
    b.samples.fetch_add(1, Ordering::Relaxed);
    b.alloc_objects.fetch_add(objects, Ordering::Relaxed);
    b.alloc_bytes.fetch_add(bytes, Ordering::Relaxed);
    let slot = if addr == 0 {
        None
    } else {
        track_live(t, addr, index, objects, bytes, size)
    };
    if slot.is_none() {
        b.add_freed(objects, bytes);
    }
    slot
}

fn track_live(
    t: &Tables,
    addr: usize,
    bucket: u32,
    objects: u64,
    bytes: u64,
    size: usize,
) -> Option<u32> {
    // Slots are taken in turn from a cursor, not placed by the address's hash: the
    // free finds its slot through the span (`Page::sample`), so nothing needs to look
    // an address up, and in turn the samples fill the table a page at a time (one
    // page fault per ~100 samples, not one per sample while the table is new) and
    // reuse slots freed a lap ago. Each probe is a claim (a write first: see
    // `bucket_for`), from never used and then from freed.
    for _ in 0..PROBES {
        let i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) & (LIVE_SLOTS - 1);
        let slot = &t.live[i];
        let claimed = match slot
            .addr
            .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => true,
            Err(seen) => {
                seen == TOMBSTONE
                    && slot
                        .addr
                        .compare_exchange(TOMBSTONE, addr, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
            }
        };
        if claimed {
            // The block is not handed out yet, so no free can look for it before these
            // stores (the free happens after the allocation returns, on any thread,
            // through a synchronising hand-over of the pointer).
            slot.bucket.store(bucket, Ordering::Relaxed);
            slot.objects.store(objects, Ordering::Relaxed);
            slot.bytes.store(bytes, Ordering::Relaxed);
            slot.size.store(size, Ordering::Relaxed);
            let live = LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
            super::peak::after_sample(live);
            return Some(i as u32);
        }
    }
    DROPPED.fetch_add(1, Ordering::Relaxed);
    None
}

/// The block at `addr`, tracked in live slot `slot` (as [`record`] said), is being
/// freed: credit its bucket and return its requested size. None if the slot holds
/// another block (a stale slot number).
pub fn freed(slot: u32, addr: usize) -> Option<usize> {
    let t = tables()?;
    let slot = t.live.get(slot as usize)?;
    if slot.addr.load(Ordering::Acquire) != addr {
        return None;
    }
    let bucket = slot.bucket.load(Ordering::Relaxed) as usize;
    let objects = slot.objects.load(Ordering::Relaxed);
    let bytes = slot.bytes.load(Ordering::Relaxed);
    let size = slot.size.load(Ordering::Relaxed);
    slot.addr
        .compare_exchange(addr, TOMBSTONE, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    t.buckets[bucket].add_freed(objects, bytes);
    LIVE_BYTES.fetch_sub(bytes, Ordering::Relaxed);
    Some(size)
}

/// A sampled block in live slot `slot` moved from `from` to `to` (a huge block
/// remapped by `realloc`, its span's descriptor with it): keep tracking it.
pub fn moved(slot: u32, from: usize, to: usize) {
    if let Some(slot) = tables().and_then(|t| t.live.get(slot as usize)) {
        let _ = slot
            .addr
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// [`changes`] before the first sample.
pub const NOTHING_SAMPLED: (usize, u64) = (0, 0);

/// A value that differs whenever the profile may have: a sample taken (each moves the
/// live-slot cursor) or a sampled block freed (each lowers the live estimate, which
/// only a sample raises). For the interval profiles: an interval that changed neither
/// holds the same profile (`mod.rs`, `profile_watcher`).
pub fn changes() -> (usize, u64) {
    (
        NEXT_SLOT.load(Ordering::Relaxed),
        LIVE_BYTES.load(Ordering::Relaxed),
    )
}

/// The estimated bytes of the sampled blocks live now.
pub fn live_bytes() -> u64 {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// Every published bucket in the order they were made, with its index in the table
/// (the tables made; a bucket being published is skipped).
pub fn for_each_used(mut f: impl FnMut(u32, &Bucket)) {
    let Some(t) = tables() else {
        return;
    };
    let made = USED.load(Ordering::Acquire).min(BUCKETS);
    for entry in &t.used[..made] {
        let index = entry.load(Ordering::Acquire);
        if index != 0 {
            f(index - 1, &t.buckets[index as usize - 1]);
        }
    }
}

/// The bucket at `index` if published.
pub fn bucket(index: u32) -> Option<&'static Bucket> {
    let b = tables()?.buckets.get(index as usize)?;
    (b.state.load(Ordering::Acquire) == READY).then_some(b)
}

/// Every published bucket, in table order.
pub fn for_each_bucket(mut f: impl FnMut(&Bucket)) {
    let Some(t) = tables() else {
        return;
    };
    for b in &t.buckets {
        if b.state.load(Ordering::Acquire) == READY {
            f(b);
        }
    }
}

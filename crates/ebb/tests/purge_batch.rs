//! The purger gives back many small ranges per pass in few system calls
//! (`span::decommit_batch`, `os::decommit_ranges`): the holes of a thousand abandoned
//! pages, each with one survivor, cost a few dozen calls, not one or more per page.
//!
//! One test per binary: it counts process-wide system calls.

#[global_allocator]
static A: ebb::Ebb = ebb::Ebb;

const BLOCK: usize = 48;
const PAGE: usize = 64 << 10;
const PAGES: usize = 1024;

/// Blocks that must stay where they are (a `Vec<[u8; N]>` would move them).
type Survivors = Vec<Box<[u8; BLOCK]>>;

/// True if the kernel takes `process_madvise` on the calling process (Linux 6.13+):
/// a call with no ranges succeeds. Older kernels fall back to one `madvise` per range.
fn vectored_decommit_available() -> bool {
    const PIDFD_SELF: libc::c_int = -10000;
    let iov = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    // SAFETY: an empty vector; nothing is advised.
    unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            PIDFD_SELF,
            &iov,
            0usize,
            libc::MADV_DONTNEED,
            0u32,
        ) == 0
    }
}

/// Resident OS pages of `[addr, addr + len)` (mincore).
fn resident_pages(addr: usize, len: usize) -> usize {
    let os_page = 4096;
    let start = addr & !(os_page - 1);
    let pages = (addr + len - start).div_ceil(os_page);
    let mut vec = vec![0u8; pages];
    // SAFETY: the range is mapped (a span of ebb's); vec has one byte per page.
    let r = unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            pages * os_page,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "mincore");
    vec.iter().filter(|&&v| v & 1 != 0).count()
}

/// A thread fills 1,024 pages with 48-byte blocks, frees all but one of each page and
/// exits: its pages are abandoned, each with one survivor. A forced collect
/// purges their holes (15 of 16 OS pages each). Returns the survivors, the decommit
/// system calls and the bytes the collect made.
fn abandoned_pages_purged(vectored: bool) -> (Survivors, u64, u64) {
    let mut options = ebb::options();
    options.purge_delay_ms = 60_000; // the background purger stays out of the way
    options.vectored_decommit = vectored;
    ebb::set_options(options);
    let survivors: Survivors = std::thread::spawn(|| {
        let mut blocks: Vec<Box<[u8; BLOCK]>> = (0..PAGES * PAGE / BLOCK)
            .map(|i| Box::new([i as u8 | 1; BLOCK]))
            .collect();
        // One survivor per page: the first block of it this thread got (a page left
        // by an earlier call keeps its own survivor at its start).
        let mut pages = std::collections::HashSet::new();
        blocks.retain(|b| pages.insert(b.as_ptr() as usize / PAGE));
        blocks.shrink_to_fit();
        blocks
    })
    .join()
    .unwrap();
    assert!(
        survivors.len() >= PAGES * 9 / 10,
        "{} survivors",
        survivors.len()
    );
    let before = ebb::stats();
    ebb::collect(true);
    let after = ebb::stats();
    let calls = after.decommit_calls - before.decommit_calls;
    let purged = after.purged - before.purged;
    // Every page gave back its 15 free OS pages, and they are gone.
    assert!(
        purged as usize >= survivors.len() * 15 * 4096 * 9 / 10,
        "{} KiB purged for {} pages",
        purged >> 10,
        survivors.len()
    );
    let resident: usize = survivors
        .iter()
        .map(|b| resident_pages(b.as_ptr() as usize & !(PAGE - 1), PAGE))
        .sum();
    assert!(
        resident <= survivors.len() * 2,
        "{resident} OS pages resident for {} survivors",
        survivors.len()
    );
    assert!(survivors
        .iter()
        .all(|b| b[0] & 1 == 1 && b.iter().all(|&x| x == b[0])));
    (survivors, calls, purged)
}

/// The same purge with one `madvise` per range (`EBB_VECTORED_DECOMMIT=0`: a call per
/// page at least) and with the batch (a call per 32 pages, about).
#[test]
fn holes_of_many_pages_go_back_in_few_system_calls() {
    let (first, calls_one_by_one, _) = abandoned_pages_purged(false);
    assert!(
        calls_one_by_one >= first.len() as u64,
        "{calls_one_by_one} decommit calls for {} pages, one by one",
        first.len()
    );
    let (second, calls, _) = abandoned_pages_purged(true);
    if vectored_decommit_available() {
        assert!(
            calls <= (second.len() / 8) as u64,
            "{calls} decommit system calls for the holes of {} pages",
            second.len()
        );
    } else {
        eprintln!("no process_madvise on this kernel: {calls} calls (not checked)");
    }
    drop(first);
}

//! Where RSS exceeds the touched-page bound (`SCENARIO_EXCESS=1`, sparse-survivors): the
//! resident anonymous OS pages that hold no byte of a live block, grouped by the 64 KiB
//! slice of the 32 MiB-aligned window they fall in (ebb's segments), printed to stderr
//! after the last sample. A diagnostic for ebb's layout (slice 0 is a segment's header);
//! for other allocators the grouping means little.
//!
//! [`Resident::snapshot`] reads which pages are resident before the scenario collects
//! the bound (which allocates and frees), [`Resident::report`] compares afterwards.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

const OS_PAGE: usize = 4096;
const SLICE: usize = 64 << 10;
const WINDOW: usize = 32 << 20;
/// Resident pages the snapshot can hold (its buffer is reserved up front, so reading
/// does not allocate as it goes).
const MAX_PAGES: usize = 1 << 20;

/// True if `SCENARIO_EXCESS=1`.
pub fn wanted() -> bool {
    std::env::var_os("SCENARIO_EXCESS").is_some_and(|v| v == "1")
}

/// Resident anonymous pages (page numbers, ascending) at one moment.
pub struct Resident {
    pages: Vec<usize>,
}

impl Resident {
    pub fn snapshot() -> Resident {
        let mut pages = Vec::with_capacity(MAX_PAGES);
        let own = (pages.as_ptr() as usize, MAX_PAGES * 8);
        let mut maps = String::with_capacity(1 << 16);
        File::open("/proc/self/maps")
            .and_then(|mut f| f.read_to_string(&mut maps))
            .expect("maps");
        let mut pagemap = File::open("/proc/self/pagemap").expect("pagemap");
        let mut entries = [0u8; 8 * 512];
        for line in BufReader::new(maps.as_bytes()).lines() {
            let line = line.unwrap();
            let mut fields = line.split_whitespace();
            let range = fields.next().unwrap();
            let perms = fields.next().unwrap();
            let path = fields.nth(3).unwrap_or("");
            if !path.is_empty() || !perms.starts_with("rw") {
                continue;
            }
            let (a, b) = range.split_once('-').unwrap();
            let start = usize::from_str_radix(a, 16).unwrap();
            let end = usize::from_str_radix(b, 16).unwrap();
            let mut addr = start;
            while addr < end {
                let n = ((end - addr) / OS_PAGE).min(512);
                pagemap
                    .seek(SeekFrom::Start((addr / OS_PAGE * 8) as u64))
                    .unwrap();
                pagemap.read_exact(&mut entries[..n * 8]).unwrap();
                for p in 0..n {
                    let entry = u64::from_ne_bytes(entries[p * 8..p * 8 + 8].try_into().unwrap());
                    let page = addr + p * OS_PAGE;
                    let mine = own.0 <= page && page < own.0 + own.1;
                    if entry >> 63 != 0 && !mine && pages.len() < MAX_PAGES {
                        pages.push(page / OS_PAGE);
                    }
                }
                addr += n * OS_PAGE;
            }
        }
        Resident { pages }
    }

    /// Print the snapshot's pages outside `touched` (sorted page numbers).
    pub fn report(&self, touched: &[usize], blocks: &[(usize, usize)]) {
        // Outside pages by the usable size of the nearest live block below them (within
        // 512 KiB): [<= 1 KiB, <= 8 KiB, <= 64 KiB, <= 512 KiB, bigger, none near].
        let mut by_size = [0usize; 6];
        let (mut inside, mut outside) = (0, 0);
        // Per slice: (slice base, resident pages outside, resident pages inside the bound).
        let mut slices: Vec<(usize, usize, usize)> = Vec::new();
        for &page in &self.pages {
            let slice = (page * OS_PAGE) & !(SLICE - 1);
            let in_bound = touched.binary_search(&page).is_ok();
            if in_bound {
                inside += 1;
            } else {
                outside += 1;
                let addr = page * OS_PAGE;
                let below = blocks.partition_point(|b| b.0 <= addr);
                let bucket = match below.checked_sub(1).map(|i| blocks[i]) {
                    Some((a, size)) if addr - a < (512 << 10) => match size {
                        0..=1024 => 0,
                        1025..=8192 => 1,
                        8193..=65536 => 2,
                        65537..=524288 => 3,
                        _ => 4,
                    },
                    _ => 5,
                };
                by_size[bucket] += 1;
            }
            match slices.last_mut() {
                Some(last) if last.0 == slice => {
                    last.1 += !in_bound as usize;
                    last.2 += in_bound as usize;
                }
                _ => slices.push((slice, !in_bound as usize, in_bound as usize)),
            }
        }
        eprintln!(
            "excess: {} KiB of anonymous memory resident outside the bound, {} KiB inside",
            outside * 4,
            inside * 4
        );
        let (mut header, mut with_live, mut without_live) = (0, 0, 0);
        let mut histogram = [0usize; 17];
        for &(slice, out, inn) in &slices {
            if slice % WINDOW == 0 {
                header += out;
            } else if inn > 0 {
                with_live += out;
                histogram[out.min(16)] += 1;
            } else {
                without_live += out;
            }
        }
        eprintln!(
            "  outside: in slice 0 of a 32 MiB window {} KiB; in slices that hold live blocks {} KiB; in other slices {} KiB",
            header * 4,
            with_live * 4,
            without_live * 4
        );
        eprintln!(
            "  outside, by the usable size of the nearest live block below (<= 1 KiB, 8 KiB, 64 KiB, 512 KiB, more, none within 512 KiB), KiB: {:?}",
            by_size.map(|n| n * 4)
        );
        eprintln!(
            "  slices with live blocks, by resident OS pages outside the bound (0..16): {histogram:?}"
        );
        // Slices with live blocks and pages outside: the usable sizes of their blocks.
        let mut sizes: Vec<(usize, usize)> = Vec::new();
        for &(slice, out, inn) in &slices {
            if out == 0 || inn == 0 || slice % WINDOW == 0 {
                continue;
            }
            let i = blocks.partition_point(|b| b.0 < slice);
            let size = blocks
                .get(i)
                .filter(|b| b.0 < slice + SLICE)
                .map_or(0, |b| b.1);
            match sizes.iter_mut().find(|e| e.0 == size) {
                Some(e) => e.1 += out,
                None => sizes.push((size, out)),
            }
        }
        sizes.sort_by_key(|e| std::cmp::Reverse(e.1));
        eprintln!(
            "  outside pages in slices with live blocks, by the usable size of the slice's first live block (size, KiB): {:?}",
            sizes.iter().take(20).map(|e| (e.0, e.1 * 4)).collect::<Vec<_>>()
        );
        let mut worst: Vec<_> = slices
            .iter()
            .filter(|s| s.1 > 0 && s.0 % WINDOW != 0)
            .collect();
        worst.sort_by_key(|s| std::cmp::Reverse(s.1));
        for s in worst.iter().take(16) {
            eprintln!(
                "  slice {:#x} (slice {} of its window): {} OS pages outside, {} inside",
                s.0,
                (s.0 % WINDOW) / SLICE,
                s.1,
                s.2
            );
        }
    }
}

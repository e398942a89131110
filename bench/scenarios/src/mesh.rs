//! How much meshing (Mesh, Powers et al., PLDI 2019) could give back below the
//! touched-page bound, counted from the survivors of a scenario (docs/MESHING.md).
//!
//! Meshing merges two pages of one size class whose live blocks sit at different
//! offsets onto one physical page: the blocks of one are copied into the other at the
//! same offsets and its virtual page is remapped there. In ebb's layout a page of small
//! blocks is a 64 KiB slice; within it, OS page `j` holds the same block offsets in
//! every page of the class, so two OS pages can share a physical page if they have the
//! same class, the same `j`, and no live block at a common offset. The count pairs such
//! OS pages greedily (each at most once, as Mesh's split mesher does, with at most
//! `PROBES` candidates tried per page), from the addresses and usable sizes of the
//! live blocks (which, under ebb, are its class sizes: an ebb build's metadata seen
//! through `malloc_usable_size`). Only meaningful for ebb's layout.

use std::collections::HashMap;

const SLICE: usize = 64 << 10;
const OS_PAGE: usize = 4096;
/// Candidates tried per page (Mesh tries a bounded number of random partners too).
const PROBES: usize = 256;

/// Result of [`count`].
pub struct MeshCount {
    /// OS pages holding small live blocks.
    pub os_pages: usize,
    /// Disjoint pairs found: the OS pages meshing would give back.
    pub pairs: usize,
}

/// Count meshable OS-page pairs among `blocks` (address, usable size; all at most
/// `touched::SMALL_MAX`).
pub fn count(blocks: &[(usize, usize)]) -> MeshCount {
    // (class, OS page index in its slice) -> OS page address -> live block indices.
    let mut groups: HashMap<(usize, usize), HashMap<usize, Vec<u32>>> = HashMap::new();
    for &(addr, size) in blocks {
        let slice = addr & !(SLICE - 1);
        let index = ((addr - slice) / size) as u32;
        let first = (addr - slice) / OS_PAGE;
        let last = (addr + size - 1 - slice) / OS_PAGE;
        for j in first..=last.min(SLICE / OS_PAGE - 1) {
            groups
                .entry((size, j))
                .or_default()
                .entry(slice + j * OS_PAGE)
                .or_default()
                .push(index);
        }
    }
    let mut os_pages = 0;
    let mut pairs = 0;
    for (_, pages) in groups {
        let mut sets: Vec<Vec<u32>> = pages
            .into_values()
            .map(|mut v| {
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        os_pages += sets.len();
        // Sparsest first: they are the easiest to pair.
        sets.sort_by_key(|s| s.len());
        let mut paired = vec![false; sets.len()];
        for a in 0..sets.len() {
            if paired[a] {
                continue;
            }
            let mut probes = 0;
            for b in a + 1..sets.len() {
                if paired[b] {
                    continue;
                }
                probes += 1;
                if probes > PROBES {
                    break;
                }
                if disjoint(&sets[a], &sets[b]) {
                    paired[a] = true;
                    paired[b] = true;
                    pairs += 1;
                    break;
                }
            }
        }
    }
    MeshCount { os_pages, pairs }
}

fn disjoint(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return false,
        }
    }
    true
}

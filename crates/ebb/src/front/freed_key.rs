//! The freed-block key: double frees caught in the default mode, as glibc's tcache key
//! catches them.
//!
//! A block freed by its page's owner gets [`FREED_KEY`] in its second word (the first
//! is the free-list link); every pop from a free list clears that word again. A free
//! that finds the key in place is probably a double free: the slow path here looks for
//! the block on its page's lists and reports it only if it is there (a live block whose
//! program wrote the key value itself is freed as usual). Every block has a second
//! word: requests of up to 8 bytes get 16-byte blocks (`size_class::small_classes`).
//!
//! Cost on the fast paths: a compare with the word, a branch and a store on free, a
//! store on malloc (see README "Security" for the measured instructions per pair).
//! Frees from other threads (pushes onto `thread_free`) neither check nor set the key.
//!
//! Why a constant and not a per-process random word: it only says "probably freed", the
//! slow path proves it, and a constant is an immediate operand (no load on the fast
//! paths); it reveals no address, unlike glibc's first key (the tcache's own address).
//! It is a non-canonical address with the top bit set, which no pointer and few
//! integers stored by a program hold.
//!
//! The secure build (`secure` feature) does without the key: there a free block's link
//! word is encoded with its page's key and cleared on every pop, so the first word alone
//! tells a free block from a live one, on any list of any thread (`front::secure`). The
//! functions here then compile to nothing (`is_marked` is false).

use crate::span::page::{Block, Page};

/// The word a locally freed block holds after its link. A sign-extended 32-bit
/// immediate, so storing and comparing it are single instructions.
pub const FREED_KEY: usize = 0xFFFF_FFFF_EBB0_F4EE;

/// Second word of `block`.
#[inline(always)]
fn key_word(block: *mut u8) -> *mut usize {
    block.wrapping_add(core::mem::size_of::<usize>()) as *mut usize
}

/// True if `block` holds the freed key.
///
/// # Safety
/// `block` is a block (of at least 16 bytes) of a page with small blocks.
#[inline(always)]
pub unsafe fn is_marked(block: *mut u8) -> bool {
    if cfg!(feature = "secure") {
        return false;
    }
    // SAFETY: per the contract the block has a second word.
    unsafe { key_word(block).read() == FREED_KEY }
}

/// Put the freed key in `block`, which its owner is freeing.
///
/// # Safety
/// As `is_marked`; the block is the caller's to write.
#[inline(always)]
pub unsafe fn mark(block: *mut u8) {
    if cfg!(feature = "secure") {
        return;
    }
    // SAFETY: per the contract.
    unsafe { key_word(block).write(FREED_KEY) }
}

/// Clear the key of `block`, just popped from a free list.
///
/// # Safety
/// As `mark`.
#[inline(always)]
pub unsafe fn clear(block: *mut Block) {
    if cfg!(feature = "secure") {
        return;
    }
    // SAFETY: per the contract.
    unsafe { key_word(block as *mut u8).write(0) }
}

/// True if `block` is on a free list of `page` (owned by the caller): a double free.
/// Takes the page's remote frees in first, so they are walked too. Time: the page's
/// free blocks (a slow path, entered only when the key is found).
///
/// # Safety
/// The caller owns `page`, inside its heap's `in_op` window.
#[cold]
pub unsafe fn is_on_free_list(page: *mut Page, block: *mut u8) -> bool {
    // SAFETY: the owner may take remote frees and walk its own lists.
    unsafe {
        (*page).take_remote_frees();
        for mut entry in [(*page).free, (*page).local_free] {
            // A double free may have closed a list into a cycle: walk at most the
            // page's blocks.
            let mut steps = (*page).reserved;
            while !entry.is_null() && steps > 0 {
                if entry as *mut u8 == block {
                    return true;
                }
                entry = (*page).link(entry);
                steps -= 1;
            }
        }
        false
    }
}

/// Report a double free of `block` of `page` (aborts unless `EBB_ABORT_ON_ERROR=0`).
#[cold]
pub fn report_double_free(page: *mut Page, block: *mut u8) {
    // SAFETY: page is a valid descriptor.
    let size = unsafe { (*page).block_size() };
    crate::diag::report_invalid_sized("free", block, "double free", size);
}

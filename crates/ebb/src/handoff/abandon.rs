//! Abandoned pages: pages no heap owns that still hold live blocks, listed per size
//! class for any heap that needs a page of that class.
//!
//! A heap abandons a page when it fills (beyond the few it keeps), when a sweep asks,
//! when its thread exits, or when the purger takes over an idle heap. The page keeps
//! its blocks where they are; blocks freed into it later reach it as remote frees
//! (`drain.rs`). Pages with room are *listed*; a heap claims one with a CAS on the
//! owner word (`claim_listed`), its former owner may take it back (`unlist`).
//!
//! [`ABANDONED_LISTS`] guards the lists and each page's `listed` flag and links while
//! listed. It guards nothing else and is never held while taking another lock.
//!
//! Each class has two lists ([`AbandonedLists`]): pages whose free blocks still wait
//! for their inside purge (*awaiting*, in the order they were listed), and the rest
//! (*settled*: purged inside, or of a class never purged inside). The purger walks only
//! the awaiting pages; a heap claims an awaiting page first (its free blocks are still
//! committed, and claiming it saves the purge that was about to give them back).

use crate::counters::COUNTERS;
use crate::handoff::drain::{self, claim_for_drain, finish_drain};
use crate::protocol;
use crate::size_class::CLASS_COUNT;
use crate::span::arena::free_span;
use crate::span::decommit_batch::DecommitBatch;
use crate::span::holes::purged_inside;
use crate::span::page::{Page, PageList, ABANDONED};
use crate::span::{deadline, hole_yield};
use crate::sync::Mutex;
use core::ptr::null_mut;
use core::sync::atomic::Ordering;

/// Abandoned pages with room, two lists per size class.
pub static ABANDONED_LISTS: Mutex<AbandonedLists> = Mutex::new(AbandonedLists::new());

/// The listed abandoned pages of each class, split by whether their inside purge is
/// still due. Invariants: a page is `listed` ⇔ it is on exactly one of its class's two
/// lists; `awaiting[c]` holds only pages with `purged_inside(page)` and
/// `freed_at != PURGED_INSIDE` (but for a page a purge has just done, held by that
/// purge until it moves the page), in the order they were listed: by `freed_at`, give or
/// take the few ms between a lister's clock read and its taking the lock (the purger's
/// walk stops at the first page not yet due, so such a page is purged that much late).
///
/// Before the split, every purger pass walked every listed page, the settled ones
/// too, and each batch of a pass walked them again: in the sparse-survivor scenario
/// at full scale that walk over cold descriptors was 42% of `purger::purge`'s samples.
pub struct AbandonedLists {
    awaiting: [PageList; CLASS_COUNT],
    settled: [PageList; CLASS_COUNT],
}

impl AbandonedLists {
    pub const fn new() -> Self {
        Self {
            awaiting: [PageList::new(); CLASS_COUNT],
            settled: [PageList::new(); CLASS_COUNT],
        }
    }

    /// Put `page` at the back of the awaiting or the settled list of its class.
    ///
    /// # Safety
    /// `page` is a valid descriptor on no list.
    unsafe fn push(&mut self, page: *mut Page, awaiting: bool) {
        // SAFETY: per the contract.
        unsafe {
            let class = (*page).class as usize;
            debug_assert!(!awaiting || purged_inside(&*page));
            if awaiting {
                self.awaiting[class].push_back(page);
            } else {
                self.settled[class].push_back(page);
            }
        }
    }

    /// Take `page` off whichever of its class's lists it is on.
    ///
    /// # Safety
    /// `page` is on one of the lists of its class.
    unsafe fn remove(&mut self, page: *mut Page) {
        // SAFETY: per the contract; list members are valid. A page at neither end of
        // its list unlinks without the list; one at an end is its list's first or last.
        unsafe {
            let class = (*page).class as usize;
            let on_awaiting = if (*page).prev.is_null() {
                self.awaiting[class].first == page
            } else if (*page).next.is_null() {
                self.awaiting[class].last == page
            } else {
                false // either list: `PageList::remove` touches only the neighbours
            };
            debug_assert!((*page).listed);
            if on_awaiting {
                self.awaiting[class].remove(page);
            } else {
                self.settled[class].remove(page);
            }
        }
    }

    /// Move a listed `page` to the back of the awaiting or the settled list.
    ///
    /// # Safety
    /// `page` is on one of the lists of its class.
    unsafe fn requeue(&mut self, page: *mut Page, awaiting: bool) {
        // SAFETY: per the contract.
        unsafe {
            self.remove(page);
            self.push(page, awaiting);
        }
    }

    /// The first page of `class`'s awaiting list, then of its settled list.
    fn first_of(&self, class: usize) -> [*mut Page; 2] {
        [self.awaiting[class].first, self.settled[class].first]
    }
}

/// `unused_since` for [`abandon`]: now, as for a page its owner lets go of, although
/// a stealer abandons it (a heap taken over before it was idle for the purge delay:
/// `front::takeover`), so nothing in it counts as idle yet.
pub const NOT_IDLE: u64 = u64::MAX;

/// Give up ownership of `page`: it keeps its blocks and any thread may claim it. Pages
/// with room are listed so heaps needing the class find them. An unused page goes back
/// to the arena, its purge delay counted from `unused_since` (now, unless the page is
/// taken from an idle heap: then its free blocks are purged inside at once; `NOT_IDLE`:
/// now). `last_owner`: the abandoning heap, which may take the page back on a later free.
///
/// # Safety
/// The caller must own `page` (a heap, or a stealer holding its heap), and the page
/// must be in no heap queue.
pub unsafe fn abandon(page: *mut Page, last_owner: usize, unused_since: u64) {
    // SAFETY: we own the page until it is published as abandoned.
    unsafe {
        // Whoever claims it next decides whether it is current (a steal clears the
        // heap's tables without touching the pages).
        (*page).set_is_current(false);
        (*page).gather_frees();
        let now = deadline::coarse_now_ms();
        let unused_since = unused_since.min(now);
        if (*page).is_unused() {
            // A deleted first-class heap's large span: its block, if sampled, is gone.
            crate::profile::span_released(page);
            free_span(page, unused_since);
            return;
        }
        let idle = unused_since < now;
        // A page of a class whose hole walks find nothing waits like any abandoned
        // page, for longer (`span::hole_yield`): it may well be reused or freed first.
        let defer = idle && hole_yield::defers(&*page);
        let idle = idle && !defer;
        if idle {
            // Taken from an idle owner: its free blocks have not been used for the purge
            // delay either.
            let bytes = (*page).purge_free_blocks();
            if bytes > 0 {
                COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
                COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
            }
        }
        if (*page).has_room() {
            let mut lists = ABANDONED_LISTS.lock();
            list_locked(&mut lists, page, if idle { PURGED_INSIDE } else { now });
        }
        (*page).last_owner.store(last_owner, Ordering::Relaxed);
        publish(page);
    }
    COUNTERS.pages_abandoned.fetch_add(1, Ordering::Relaxed);
}

/// Publish `page` as abandoned (owner word `ABANDONED`), then re-check for remote frees
/// that raced with it and notify a drainer if there are any (`protocol::publish_abandoned`: one side of the
/// Dekker pair whose other side is `drain::free_remote`).
///
/// # Safety
/// The caller owns the page and has gathered its remote frees.
pub unsafe fn publish(page: *mut Page) {
    // SAFETY: per the contract the page is ours until the store in `publish_abandoned`.
    let raced = unsafe { protocol::publish_abandoned(&(*page).owner, &(*page).thread_free) };
    if raced {
        drain::notify(page);
    }
}

/// Claim a listed abandoned page of `class` for the heap whose owner word is
/// `owner_word`. Returns the page, owned by that heap and unlisted, or null.
pub fn claim_listed(class: usize, owner_word: usize) -> *mut Page {
    let mut lists = ABANDONED_LISTS.lock();
    for mut candidate in lists.first_of(class) {
        while !candidate.is_null() {
            // SAFETY: listed pages are valid descriptors; the lock guards the links.
            let next = unsafe { (*candidate).next };
            // SAFETY: as above; the CAS decides ownership.
            if unsafe { protocol::claim(&(*candidate).owner, ABANDONED, owner_word) } {
                // SAFETY: we own it now and hold the lock for the list.
                unsafe {
                    lists.remove(candidate);
                    (*candidate).listed = false;
                }
                COUNTERS.pages_reclaimed.fetch_add(1, Ordering::Relaxed);
                return candidate;
            }
            candidate = next;
        }
    }
    null_mut()
}

/// Take a page the caller just claimed off the abandoned list, if it is on it.
///
/// # Safety
/// The caller owns `page` (it claimed it from `ABANDONED`).
pub unsafe fn unlist(page: *mut Page) {
    // SAFETY: we own the page; the lock guards the list.
    unsafe {
        if (*page).listed {
            let mut lists = ABANDONED_LISTS.lock();
            if (*page).listed {
                lists.remove(page);
                (*page).listed = false;
            }
        }
    }
}

/// `freed_at` of a listed abandoned page whose free blocks have been purged inside.
pub const PURGED_INSIDE: u64 = u64::MAX;
/// Pages purged inside per pass under the lock.
const INSIDE_BATCH: usize = 32;

/// Put an abandoned page on the list of its class. For pages whose free blocks are
/// purged inside (big blocks, or small ones by holes: `span::holes::purged_inside`)
/// `freed_at` (unused while the page is in use: see `Page::freed_at`) records when:
/// their free blocks are purged inside once nobody has claimed the page for the purge
/// delay.
///
/// `listed_at` is normally now; `PURGED_INSIDE` if the caller just purged the page.
///
/// # Safety
/// The caller owns `page` and holds the list lock (`lists`); the page is not listed.
pub unsafe fn list_locked(lists: &mut AbandonedLists, page: *mut Page, listed_at: u64) {
    // SAFETY: per the contract.
    unsafe {
        debug_assert!(!(*page).listed);
        let inside = purged_inside(&*page);
        lists.push(page, inside && listed_at != PURGED_INSIDE);
        (*page).listed = true;
        if inside {
            (*page).freed_at.store(listed_at, Ordering::Relaxed);
            if listed_at != PURGED_INSIDE {
                deadline::schedule_purge(listed_at);
            }
        }
    }
}

/// New free blocks reached a listed page that is purged inside: their insides wait out
/// the purge delay again, from `now`, at the back of the awaiting list.
///
/// # Safety
/// The caller holds `page` (`DRAINING`) and the list lock (`lists`); the page is
/// listed and `purged_inside`.
pub unsafe fn rearm_locked(lists: &mut AbandonedLists, page: *mut Page, now: u64) {
    // SAFETY: per the contract.
    unsafe {
        debug_assert!((*page).listed && purged_inside(&*page));
        (*page).freed_at.store(now, Ordering::Relaxed);
        lists.requeue(page, true);
    }
    deadline::schedule_purge(now);
}

/// Purge the inside of the free blocks of listed abandoned pages that nobody claimed
/// for the purge delay (all of them if `force`): a few survivors must not keep a page
/// of 512 KiB blocks, or the OS pages around them in a page of small blocks, resident.
/// Returns the next time one becomes due.
pub fn purge_unclaimed_insides(now: u64, delay: u64, force: bool) -> u64 {
    // Batch after batch (a pass of the sparse-survivor scenario finds thousands of
    // pages due at once), but bounded: a page another drainer holds stays due, and the
    // purger must not spin on it.
    for _ in 0..MAX_INSIDE_BATCHES {
        let (next_due, more) = purge_unclaimed_batch(now, delay, force);
        if !more {
            return next_due;
        }
    }
    now // more left: come back soon
}

/// Batches of `purge_unclaimed_insides` per call.
const MAX_INSIDE_BATCHES: usize = 256;

/// One batch of `purge_unclaimed_insides`; true if more were due than a batch holds.
fn purge_unclaimed_batch(now: u64, delay: u64, force: bool) -> (u64, bool) {
    let mut next_due = u64::MAX;
    let mut more = false;
    // One pass under the lock over every class (the lock is what the slow paths of all
    // threads contend for), then the purging outside it.
    let mut batch: [*mut Page; INSIDE_BATCH] = [null_mut(); INSIDE_BATCH];
    let mut count = 0;
    let mut visits = 0;
    {
        let lists = ABANDONED_LISTS.lock();
        'classes: for list in lists.awaiting.iter() {
            let mut page = list.first;
            while !page.is_null() {
                // SAFETY: listed pages are valid descriptors; the lock guards the links.
                let (listed_at, next) =
                    unsafe { ((*page).freed_at.load(Ordering::Relaxed), (*page).next) };
                visits += 1;
                if listed_at == PURGED_INSIDE {
                    // Another thread's purge (slow paths purge too when no purger
                    // thread runs) has done it and moves it to the settled list next.
                    page = next;
                    continue;
                }
                if !force && listed_at.saturating_add(delay) > now {
                    // Every later page was listed no earlier and waits at least `delay`.
                    next_due = next_due.min(listed_at.saturating_add(delay));
                    break;
                }
                // SAFETY: as above.
                let wait = unsafe { hole_yield::inside_delay(&*page, delay) };
                if !force && listed_at.saturating_add(wait) > now {
                    next_due = next_due.min(listed_at.saturating_add(wait));
                } else if count == batch.len() {
                    more = true; // more than a batch: another one right after
                    break 'classes;
                } else {
                    batch[count] = page;
                    count += 1;
                }
                page = next;
            }
        }
    }
    COUNTERS
        .inside_walk_visits
        .fetch_add(visits, Ordering::Relaxed);
    // Every page is held (DRAINING) until the decommits of the whole batch are done in
    // one system call (`DecommitBatch`), then let go.
    let mut decommits = DecommitBatch::new();
    let mut held = 0;
    for i in 0..count {
        let page = batch[i];
        if !claim_for_drain(page) {
            continue; // claimed meanwhile: in use again, or another drainer has it
        }
        batch[held] = page;
        held += 1;
        // SAFETY: we own the page (DRAINING) until after the batch is finished.
        unsafe { (*page).take_remote_frees() };
    }
    // A group's free lists walked side by side first, then purged from the cache: a
    // group's link words fit in a core's L2 (`warm::WARM_LANES` pages of 64 KiB).
    for group in batch[..held].chunks(crate::span::warm::WARM_LANES) {
        // SAFETY: we hold every page of the batch (DRAINING).
        unsafe { crate::span::warm::warm_free_lists(group) };
        for &page in group {
            // SAFETY: we own the page (DRAINING) until after the batch is finished.
            unsafe {
                if (*page).listed {
                    (*page).purge_free_blocks_into(&mut decommits);
                    COUNTERS.purge_calls.fetch_add(1, Ordering::Relaxed);
                    (*page).freed_at.store(PURGED_INSIDE, Ordering::Relaxed);
                }
            }
        }
    }
    let bytes = decommits.finish();
    COUNTERS.purged.fetch_add(bytes as u64, Ordering::Relaxed);
    if held > 0 {
        let mut lists = ABANDONED_LISTS.lock();
        for &page in &batch[..held] {
            // SAFETY: we hold the page (DRAINING): nobody else lists or unlists it.
            unsafe {
                if (*page).listed && (*page).freed_at.load(Ordering::Relaxed) == PURGED_INSIDE {
                    lists.requeue(page, false);
                }
            }
        }
    }
    for &page in &batch[..held] {
        // SAFETY: we hold the page (DRAINING) and took its remote frees in.
        unsafe { finish_drain(page, false) };
    }
    (next_due, more)
}

/// Take the list lock before `fork` (see `process::fork_prepare`).
pub fn lock_for_fork() {
    ABANDONED_LISTS.lock_raw();
}

/// Release the lock taken by `lock_for_fork`, in the parent.
///
/// # Safety
/// The calling thread took the lock with `lock_for_fork`.
pub unsafe fn unlock_after_fork() {
    // SAFETY: per the contract.
    unsafe { ABANDONED_LISTS.unlock_raw() };
}

/// In the fork child: the lock is free (its holder was the forking thread).
///
/// # Safety
/// Only in the child of a fork whose prepare handler took the lock.
pub unsafe fn reset_after_fork() {
    // SAFETY: per the contract.
    unsafe { ABANDONED_LISTS.reset_after_fork() };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Descriptors of `class` with 64 B blocks in one slice: purged inside by holes.
    fn pages<const N: usize>(class: u8) -> [Page; N] {
        core::array::from_fn(|_| {
            let page = Page::new();
            page.block_size.store(64, Ordering::Relaxed);
            let mut page = page;
            page.class = class;
            page.slice_count = 1;
            page
        })
    }

    fn order(list: &PageList) -> [*mut Page; 4] {
        let mut out = [null_mut(); 4];
        let mut page = list.first;
        let mut i = 0;
        while !page.is_null() {
            out[i] = page;
            i += 1;
            // SAFETY: the test's pages are valid and linked only by these lists.
            page = unsafe { (*page).next };
        }
        out
    }

    #[test]
    fn a_page_leaves_whichever_list_it_is_on_from_any_place() {
        let mut p = pages::<4>(3);
        assert!(purged_inside(&p[0]));
        let [a, b, c, d] = p.each_mut().map(|page| page as *mut Page);
        let mut lists = AbandonedLists::new();
        // SAFETY: the pages are valid, on no list, and outlive `lists`' use of them.
        unsafe {
            for (page, awaiting) in [(a, true), (b, false), (c, true), (d, false)] {
                (*page).listed = true;
                lists.push(page, awaiting);
            }
            assert_eq!(order(&lists.awaiting[3]), [a, c, null_mut(), null_mut()]);
            assert_eq!(order(&lists.settled[3]), [b, d, null_mut(), null_mut()]);
            // The last of the settled list, then the first of the awaiting list.
            lists.remove(d);
            lists.remove(a);
            assert_eq!(
                order(&lists.awaiting[3]),
                [c, null_mut(), null_mut(), null_mut()]
            );
            assert_eq!(
                order(&lists.settled[3]),
                [b, null_mut(), null_mut(), null_mut()]
            );
            // A page alone on its list is both ends of it.
            lists.requeue(c, false);
            assert!(lists.awaiting[3].first.is_null() && lists.awaiting[3].last.is_null());
            assert_eq!(order(&lists.settled[3]), [b, c, null_mut(), null_mut()]);
            lists.requeue(b, true);
            assert_eq!(lists.first_of(3), [b, c]);
            lists.remove(b);
            lists.remove(c);
            assert_eq!(lists.first_of(3), [null_mut(), null_mut()]);
            assert!(lists.settled[3].last.is_null());
        }
    }

    #[test]
    fn a_page_in_the_middle_of_the_settled_list_leaves_it() {
        let mut p = pages::<4>(5);
        let [a, b, c, d] = p.each_mut().map(|page| page as *mut Page);
        let mut lists = AbandonedLists::new();
        // SAFETY: as in the test above.
        unsafe {
            for (page, awaiting) in [(a, false), (b, false), (c, false), (d, true)] {
                (*page).listed = true;
                lists.push(page, awaiting);
            }
            lists.remove(b);
            assert_eq!(order(&lists.settled[5]), [a, c, null_mut(), null_mut()]);
            assert_eq!(
                order(&lists.awaiting[5]),
                [d, null_mut(), null_mut(), null_mut()]
            );
        }
    }
}

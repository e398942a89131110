//! Linux signals: the allocator's fault handler (`catch_faults`, for guarded
//! sampling) and the signal handlers the reports and the profiler install
//! (`signal_number`, `on_signal`). Part of the OS contract (`os/mod.rs`).

use super::{errno, preserving_errno, set_errno};
use core::ffi::{c_int, c_void};
use core::ptr::null_mut;

/// The memory-fault signals `catch_faults` handles, and what was installed for each
/// before (restored once a fault is ours, or passed to for faults that are not).
const FAULT_SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];
static mut PREVIOUS_FAULT_ACTIONS: [core::mem::MaybeUninit<libc::sigaction>; 2] =
    [core::mem::MaybeUninit::uninit(); 2];
/// The handler `catch_faults` installed (0: none).
static FAULT_HANDLER: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Call `handler(address)` on every SIGSEGV and SIGBUS of the process (once, for the
/// process's life; false if it could not be installed). When it returns true (the
/// fault is the allocator's to report, and it reported it), the handlers that were
/// installed before come back and the faulting instruction runs again, so the fault
/// ends the process as it would have without ebb (or reaches the program's own
/// handler). When it returns false, the fault goes to the previous handler: called
/// directly if it is a function, else (default or ignore) restored and re-raised.
/// `handler` runs in a signal handler: it must not allocate or take a lock.
pub fn catch_faults(handler: fn(usize) -> bool) -> bool {
    use core::sync::atomic::Ordering;
    if FAULT_HANDLER
        .compare_exchange(0, handler as usize, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    // SAFETY: a zeroed sigaction is valid (empty mask, no flags); sigaction copies it and
    // writes the old action into our static, which only the fault handler reads
    // (after this store, since the handler is installed by the same call).
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let previous = core::ptr::addr_of_mut!(PREVIOUS_FAULT_ACTIONS);
        for (n, &signo) in FAULT_SIGNALS.iter().enumerate() {
            let old = (*previous)[n].as_mut_ptr();
            if preserving_errno(|| libc::sigaction(signo, &action, old)) != 0 {
                return false;
            }
        }
    }
    true
}

/// Put the previous fault handlers back.
///
/// # Safety
/// Only after `catch_faults` installed ours (the saved actions are written).
unsafe fn restore_fault_actions() {
    // SAFETY: per the contract, the saved actions are initialised.
    unsafe {
        let previous = core::ptr::addr_of!(PREVIOUS_FAULT_ACTIONS);
        for (n, &signo) in FAULT_SIGNALS.iter().enumerate() {
            libc::sigaction(signo, (*previous)[n].as_ptr(), null_mut());
        }
    }
}

extern "C" fn on_fault(signo: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    use core::sync::atomic::Ordering;
    let saved = errno();
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; the handler
    // address was stored before the handler was installed.
    unsafe {
        let address = (*info).si_addr() as usize;
        let handler: fn(usize) -> bool =
            core::mem::transmute::<usize, fn(usize) -> bool>(FAULT_HANDLER.load(Ordering::Acquire));
        if handler(address) {
            restore_fault_actions();
            set_errno(saved);
            return;
        }
        let n = FAULT_SIGNALS.iter().position(|&s| s == signo).unwrap_or(0);
        let previous = (*core::ptr::addr_of!(PREVIOUS_FAULT_ACTIONS))[n].assume_init_ref();
        let target = previous.sa_sigaction;
        if target == libc::SIG_DFL || target == libc::SIG_IGN {
            // The default action: put it back and let the instruction fault again.
            libc::sigaction(signo, previous, null_mut());
        } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                core::mem::transmute(target);
            f(signo, info, context);
        } else {
            let f: extern "C" fn(c_int) = core::mem::transmute(target);
            f(signo);
        }
        set_errno(saved);
    }
}

/// The number of signal `name` ("USR1", "SIGUSR2", "10", ...), if it is one a report
/// may be tied to (USR1, USR2, or a real-time signal by number).
pub fn signal_number(name: &[u8]) -> Option<c_int> {
    let name = name.strip_prefix(b"SIG").unwrap_or(name);
    match name {
        b"USR1" => Some(libc::SIGUSR1),
        b"USR2" => Some(libc::SIGUSR2),
        _ => {
            let mut n: c_int = 0;
            if name.is_empty() || name.len() > 3 {
                return None;
            }
            for &b in name {
                if !b.is_ascii_digit() {
                    return None;
                }
                n = n * 10 + (b - b'0') as c_int;
            }
            let allowed = n == libc::SIGUSR1
                || n == libc::SIGUSR2
                || (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n);
            allowed.then_some(n)
        }
    }
}

/// Let signal `signo` reach the calling thread (an allocator thread, started with every
/// signal blocked), so that a signal sent to that thread alone (`tgkill`: what `ebb run`
/// does) runs its handler there and interrupts none of the program's threads; a
/// `sleep` or `poll` of the program would return early (`EINTR`, which `SA_RESTART`
/// does not prevent for them). True if done.
pub fn accept_signal(signo: c_int) -> bool {
    // SAFETY: the set is initialised by sigemptyset before use; pthread_sigmask only
    // changes the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = core::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signo);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, null_mut()) == 0
    }
}

/// The handler each signal had before [`on_signal`] replaced it, if a plain function
/// (no `SA_SIGINFO`), for [`pass_on_signal`]; 0: none. Indexed by signal number.
static PREVIOUS_HANDLERS: [core::sync::atomic::AtomicUsize; SIGNAL_SLOTS] =
    [const { core::sync::atomic::AtomicUsize::new(0) }; SIGNAL_SLOTS];
/// Signal numbers 0 to `SIGRTMAX` (64 on Linux).
const SIGNAL_SLOTS: usize = 65;

/// Run `handler` when signal `signo` arrives (`SA_RESTART`, so interrupted system calls
/// of the program resume). True if installed. The handler it replaces, if a plain
/// function, is kept for [`pass_on_signal`]: a process with two ebb instances (a Rust
/// program on ebb with `libebb.so` preloaded) installs one for each, and the second
/// would otherwise leave the first deaf to `ebb run`'s requests.
pub fn on_signal(signo: c_int, handler: extern "C" fn(c_int)) -> bool {
    // SAFETY: a zeroed sigaction is valid (empty mask, no flags); sigaction copies it
    // and writes the old action into `old`.
    unsafe {
        let mut action: libc::sigaction = core::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = core::mem::zeroed();
        if preserving_errno(|| libc::sigaction(signo, &action, &mut old)) != 0 {
            return false;
        }
        let previous = old.sa_sigaction;
        let plain = old.sa_flags & libc::SA_SIGINFO == 0;
        if let Some(slot) = PREVIOUS_HANDLERS.get(signo as usize) {
            let chained = plain
                && previous != libc::SIG_DFL
                && previous != libc::SIG_IGN
                && previous != handler as usize;
            slot.store(
                if chained { previous } else { 0 },
                core::sync::atomic::Ordering::Release,
            );
        }
        true
    }
}

/// Call the handler signal `signo` had before [`on_signal`] installed this one, if it
/// was a plain function: the last thing an `on_signal` handler does, so that every
/// instance that asked for the signal hears it. Async-signal-safe.
pub fn pass_on_signal(signo: c_int) {
    let Some(slot) = PREVIOUS_HANDLERS.get(signo as usize) else {
        return;
    };
    let previous = slot.load(core::sync::atomic::Ordering::Acquire);
    if previous != 0 {
        // SAFETY: `previous` was installed as a plain handler (`sa_handler`, no
        // `SA_SIGINFO`) for this signal, so it takes the signal number alone; it was a
        // function, not `SIG_DFL` or `SIG_IGN`.
        let handler: extern "C" fn(c_int) = unsafe { core::mem::transmute(previous) };
        handler(signo);
    }
}

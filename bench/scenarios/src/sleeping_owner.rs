//! The sleeping-owner scenarios (after the "pricing engine" report: one thread loads the
//! data and then sleeps — in real life it serves requests from a pool — while a refresher
//! thread replaces the data item by item, forever).
//!
//! The owner (main thread) builds every item, then blocks in `join` and never calls the
//! allocator again. The refresher replaces every item once per round and takes a sample
//! right after each round. Memory the refresher frees lands in pages the owner allocated;
//! an allocator that can only reuse such memory from its owner thread grows by the whole
//! data set per round.
//!
//! - `sleeping-owner-big`: 500 `Vec<f32>` of 1M elements (2 GB); the refresher drops
//!   the old vector, then builds the new one.
//! - `sleeping-owner-small`: 500 items of ~2 MB each, made of thousands of boxed strings,
//!   byte buffers and structs of 16 B..1 KiB (~1 GB in all); the refresher builds the
//!   new item, then replaces (drops) the old one, like `state.items[i] = load(i)`.
//! - `sleeping-owner-small-fresh`: the same data, but the refresher thread's first
//!   action is a free (it drops the old item before building the new one), so it has
//!   never allocated before it starts freeing into the owner's pages.

use crate::probe::{Recorder, Rng};
use std::sync::{Arc, RwLock};
use std::thread;

fn big_item(len: usize, seed: u64) -> Vec<f32> {
    (0..len).map(|n| (n as u64 ^ seed) as f32).collect()
}

pub fn run_big(quick: bool) {
    let (items, len, rounds) = if quick {
        (16, 100_000, 2)
    } else {
        (500, 1_000_000, 10)
    };
    let rounds = crate::rounds(rounds);
    let rec = Arc::new(Recorder::new("sleeping-owner-big"));
    let live = (items * len * 4 + items * std::mem::size_of::<Vec<f32>>()) as u64;

    // The owner builds everything...
    let state: Vec<Vec<f32>> = (0..items).map(|i| big_item(len, i as u64)).collect();
    rec.sample("built", 0, live);
    let state = Arc::new(RwLock::new(state));

    // ...and a refresher replaces it, round after round.
    let refresher = {
        let state = Arc::clone(&state);
        let rec = Arc::clone(&rec);
        thread::spawn(move || {
            for round in 1..=rounds {
                {
                    let mut s = state.write().unwrap();
                    for (i, slot) in s.iter_mut().enumerate() {
                        *slot = Vec::new(); // drop the old vector
                        *slot = big_item(len, (round * items + i) as u64);
                    }
                }
                rec.sample("round", round as u64, live);
            }
        })
    };
    // The owner sleeps (blocked in join) and never calls the allocator meanwhile.
    refresher.join().unwrap();
    let check: f64 = state
        .read()
        .unwrap()
        .iter()
        .map(|v| v[len / 2] as f64)
        .sum();
    rec.summary(
        quick,
        live,
        format_args!(",\"items\":{items},\"item_len\":{len},\"rounds\":{rounds},\"check\":{check}"),
    );
}

/// Boxed objects of 16 B .. 1 KiB.
#[allow(dead_code)] // the fields exist to be allocated, not read
enum Obj {
    Str(String),
    Bytes(Box<[u8]>),
    Pair(Box<[u64; 2]>),
    Rec(Box<Rec>),
    Node(Box<[u64; 32]>),
    Page(Box<[u8; 1024]>),
}

#[allow(dead_code)]
struct Rec {
    id: u64,
    price: f64,
    tax: f32,
    flags: u32,
    tags: [u16; 8],
}

#[derive(Default)]
struct Item {
    objs: Vec<Obj>,
    /// Bytes held: payloads plus the vector's capacity.
    bytes: u64,
}

/// Build one item of about `target` bytes.
fn small_item(target: u64, seed: u64) -> Item {
    let mut rng = Rng::new(seed);
    let mut objs = Vec::new();
    let mut payload = 0u64;
    while payload < target {
        let kind = rng.next() % 10;
        let (obj, size) = match kind {
            0..=2 => {
                let len = rng.range(16, 256);
                let s = String::from_utf8(vec![b'a' + (seed % 26) as u8; len]).unwrap();
                (Obj::Str(s), len)
            }
            3..=5 => {
                let len = rng.range(16, 1024);
                let b = vec![(seed & 0xff) as u8; len].into_boxed_slice();
                (Obj::Bytes(b), len)
            }
            6 => (Obj::Pair(Box::new([seed, seed + 1])), 16),
            7 => (
                Obj::Rec(Box::new(Rec {
                    id: seed,
                    price: seed as f64 * 0.5,
                    tax: 0.19,
                    flags: kind as u32,
                    tags: [seed as u16; 8],
                })),
                std::mem::size_of::<Rec>(),
            ),
            8 => (Obj::Node(Box::new([seed; 32])), 256),
            _ => (Obj::Page(Box::new([seed as u8; 1024])), 1024),
        };
        payload += size as u64;
        objs.push(obj);
    }
    let bytes = payload + (objs.capacity() * std::mem::size_of::<Obj>()) as u64;
    Item { objs, bytes }
}

pub fn run_small(quick: bool, fresh: bool) {
    let (items, item_bytes, rounds) = if quick {
        (16, 256 << 10, 2)
    } else {
        (500, 2_000_000, 10)
    };
    let rounds = crate::rounds(rounds);
    let name = if fresh {
        "sleeping-owner-small-fresh"
    } else {
        "sleeping-owner-small"
    };
    let rec = Arc::new(Recorder::new(name));

    let state: Vec<Item> = (0..items)
        .map(|i| small_item(item_bytes, i as u64))
        .collect();
    let live_of = |s: &[Item]| -> u64 {
        s.iter().map(|it| it.bytes).sum::<u64>() + std::mem::size_of_val(s) as u64
    };
    let live0 = live_of(&state);
    rec.sample("built", 0, live0);
    let state = Arc::new(RwLock::new(state));

    let refresher = {
        let state = Arc::clone(&state);
        let rec = Arc::clone(&rec);
        thread::spawn(move || {
            let mut live = live0;
            for round in 1..=rounds {
                {
                    let mut s = state.write().unwrap();
                    for i in 0..items {
                        let seed = (round * items + i) as u64;
                        if fresh {
                            // Free first (the very first call this thread makes is a free).
                            s[i] = Item::default();
                            s[i] = small_item(item_bytes, seed);
                        } else {
                            // Build first, then replace: the old item is dropped here.
                            let new = small_item(item_bytes, seed);
                            s[i] = new;
                        }
                    }
                    live = live_of(&s);
                }
                rec.sample("round", round as u64, live);
            }
            live
        })
    };
    let live = refresher.join().unwrap();
    let objects: usize = state.read().unwrap().iter().map(|it| it.objs.len()).sum();
    rec.summary(
        quick,
        live,
        format_args!(
            ",\"items\":{items},\"objects\":{objects},\"rounds\":{rounds},\"fresh\":{fresh}"
        ),
    );
}

/// One item of `sleeping-owner-strings`: short strings (8..=100 bytes), as a loader
/// reading names, keys and labels makes them.
fn string_item(target: u64, seed: u64) -> (Vec<String>, u64) {
    let mut rng = Rng::new(seed);
    let mut strings = Vec::new();
    let mut payload = 0u64;
    while payload < target {
        let len = rng.range(8, 100);
        let mut s = String::with_capacity(len);
        s.extend(std::iter::repeat((b'a' + (seed % 26) as u8) as char).take(len));
        payload += s.capacity() as u64;
        strings.push(s);
    }
    // Exact, as a loader that knows its row count makes it (the spare capacity of a
    // doubled vector is address space no allocator makes resident).
    strings.shrink_to_fit();
    let bytes = payload + (strings.capacity() * std::mem::size_of::<String>()) as u64;
    (strings, bytes)
}

/// `sleeping-owner-strings` (issue 14's third shape): the owner loads ~372 MiB of 8-100 B
/// strings (their bytes and their `String`s in each item's vector) and sleeps; a
/// refresher replaces them item by item (builds the new item, then drops the old one).
pub fn run_strings(quick: bool) {
    let (items, item_bytes, rounds) = if quick {
        (16, 128 << 10, 2)
    } else {
        (500, 540_000, 5)
    };
    let rounds = crate::rounds(rounds);
    let rec = Arc::new(Recorder::new("sleeping-owner-strings"));
    let state: Vec<(Vec<String>, u64)> = (0..items)
        .map(|i| string_item(item_bytes, i as u64))
        .collect();
    let live_of = |s: &[(Vec<String>, u64)]| -> u64 {
        s.iter().map(|it| it.1).sum::<u64>() + std::mem::size_of_val(s) as u64
    };
    let live0 = live_of(&state);
    rec.sample("built", 0, live0);
    let state = Arc::new(RwLock::new(state));
    let refresher = {
        let state = Arc::clone(&state);
        let rec = Arc::clone(&rec);
        thread::spawn(move || {
            let mut live = live0;
            for round in 1..=rounds {
                {
                    let mut s = state.write().unwrap();
                    for i in 0..items {
                        let new = string_item(item_bytes, (round * items + i) as u64);
                        s[i] = new;
                    }
                    live = live_of(&s);
                }
                rec.sample("round", round as u64, live);
            }
            live
        })
    };
    let live = refresher.join().unwrap();
    let strings: usize = state.read().unwrap().iter().map(|it| it.0.len()).sum();
    rec.summary(
        quick,
        live,
        format_args!(",\"items\":{items},\"strings\":{strings},\"rounds\":{rounds}"),
    );
}

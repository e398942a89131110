//! churn: single-threaded small-object churn, like a big-number factoring program
//! (cfrac). Numbers are `Vec<u32>` limbs (4..64 B); every arithmetic operation makes
//! a new number and most results are temporaries dropped at once, while a pool of 512
//! numbers lives on and is replaced at random.

use crate::util::{mix, scaled, Rng};
use crate::workloads::Outcome;
use std::cmp::Ordering;

type Big = Vec<u32>;

fn normalized(mut v: Big) -> Big {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

fn add(a: &[u32], b: &[u32]) -> Big {
    let (a, b) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let mut out = Vec::with_capacity(a.len() + 1);
    let mut carry = 0u64;
    for (i, &x) in a.iter().enumerate() {
        let s = x as u64 + *b.get(i).unwrap_or(&0) as u64 + carry;
        out.push(s as u32);
        carry = s >> 32;
    }
    if carry != 0 {
        out.push(carry as u32);
    }
    out
}

fn cmp(a: &[u32], b: &[u32]) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

/// a - b, for a >= b.
fn sub(a: &[u32], b: &[u32]) -> Big {
    let mut out = Vec::with_capacity(a.len());
    let mut borrow = 0i64;
    for (i, &x) in a.iter().enumerate() {
        let d = x as i64 - *b.get(i).unwrap_or(&0) as i64 - borrow;
        out.push(d as u32);
        borrow = (d < 0) as i64;
    }
    normalized(out)
}

fn mul(a: &[u32], b: &[u32]) -> Big {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let mut out = vec![0u32; a.len() + b.len()];
    for (i, &x) in a.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.iter().enumerate() {
            let t = x as u64 * y as u64 + out[i + j] as u64 + carry;
            out[i + j] = t as u32;
            carry = t >> 32;
        }
        out[i + b.len()] = carry as u32;
    }
    normalized(out)
}

fn divmod_small(a: &[u32], d: u32) -> (Big, u32) {
    let mut q = vec![0u32; a.len()];
    let mut rem = 0u64;
    for i in (0..a.len()).rev() {
        let cur = (rem << 32) | a[i] as u64;
        q[i] = (cur / d as u64) as u32;
        rem = cur % d as u64;
    }
    (normalized(q), rem as u32)
}

fn random_big(rng: &mut Rng, max_limbs: usize) -> Big {
    let n = rng.range(1, max_limbs);
    normalized((0..n).map(|_| rng.next() as u32).collect())
}

const PRIMES: [u32; 8] = [3, 5, 7, 11, 13, 65_521, 1_000_003, 4_294_967_291];

pub fn run(scale: f64) -> Outcome {
    let steps = scaled(2_500_000, scale, 1000);
    let mut rng = Rng::new(1);
    let mut pool: Vec<Big> = (0..512).map(|_| random_big(&mut rng, 8)).collect();
    let mut h = 0u64;
    for step in 0..steps {
        let i = rng.below(pool.len());
        let j = rng.below(pool.len());
        let k = rng.below(pool.len());
        let t = mul(&pool[i], &pool[j]);
        let u = add(&t, &pool[k]);
        let (q, r) = divmod_small(&u, PRIMES[step & 7]);
        h = mix(h, r as u64);
        // Keep numbers at most 8 limbs: take the low limbs (a new, shorter number).
        let keep = rng.range(1, 8);
        let mut next = if q.len() > keep {
            normalized(q[..keep].to_vec())
        } else {
            q
        };
        // Differences and a comparison, like a gcd or a residue test.
        let d = match cmp(&next, &pool[k]) {
            Ordering::Less => sub(&pool[k], &next),
            _ => sub(&next, &pool[k]),
        };
        h = mix(h, d.len() as u64 ^ d.first().copied().unwrap_or(0) as u64);
        if next.is_empty() {
            next = random_big(&mut rng, 4);
        }
        pool[i] = next;
    }
    for b in &pool {
        h = mix(h, b.iter().fold(b.len() as u64, |a, &x| mix(a, x as u64)));
    }
    Outcome::new(h, 1)
}

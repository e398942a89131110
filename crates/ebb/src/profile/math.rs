//! The few floating-point functions the sampler needs, without `std` (core has no
//! `ln` or `exp`): the exponential draw of the next sample point and the weight of a
//! sample. Accurate to about 1e-13 relative, far below the sampling noise.

const LN_2: f64 = core::f64::consts::LN_2;

/// Table steps: `ln` splits the mantissa into 128 intervals, `exp` the unit of
/// `ln 2` into 64 steps, so the series left over are short (6 terms, on arguments
/// below 1/256 and ln 2/64) and a sample pays ~20 multiplies for its weight and its
/// next interval instead of the ~70 of series over the whole range (perf on sweep:
/// the two were a fifth of the profiler's time there).
const LN_STEPS: usize = 128;
const EXP_STEPS: usize = 64;

/// `ln(1 + x)` for `|x| <= 1/3`, by `2 atanh(x / (2 + x))` with enough terms for the
/// tables below (evaluated at compile time).
const fn ln_1p_slow(x: f64) -> f64 {
    let t = x / (2.0 + x);
    let t2 = t * t;
    let mut term = t;
    let mut sum = 0.0;
    let mut k = 1;
    while k < 80 {
        sum += term / k as f64;
        term *= t2;
        k += 2;
    }
    2.0 * sum
}

/// `exp(-x)` for `0 <= x < 1` by its Taylor series (evaluated at compile time).
const fn exp_neg_slow(x: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut n = 1;
    while n < 30 {
        term *= -x / n as f64;
        sum += term;
        n += 1;
    }
    sum
}

/// For the interval `i` of `[1, 2)`: its midpoint `c`, `1/c` and `ln c`.
const LN_TABLE: [[f64; 3]; LN_STEPS] = {
    let mut t = [[0.0; 3]; LN_STEPS];
    let mut i = 0;
    while i < LN_STEPS {
        let c = 1.0 + (i as f64 + 0.5) / LN_STEPS as f64;
        t[i] = [c, 1.0 / c, ln_1p_slow(c - 1.0)];
        i += 1;
    }
    t
};

/// `2^(-j/64)`.
const EXP_TABLE: [f64; EXP_STEPS] = {
    let mut t = [0.0; EXP_STEPS];
    let mut j = 0;
    while j < EXP_STEPS {
        t[j] = exp_neg_slow(j as f64 * LN_2 / EXP_STEPS as f64);
        j += 1;
    }
    t
};

/// `ln(1 + r)` for `|r| <= 1/256`: 6 terms (the 7th is below 1e-17).
#[inline]
fn ln_1p_small(r: f64) -> f64 {
    let r2 = r * r;
    // r - r^2/2 + r^3/3 - r^4/4 + r^5/5 - r^6/6, paired so the chain is short.
    let a = r - r2 * 0.5;
    let b = r2 * r * (1.0 / 3.0 - r * 0.25);
    let c = r2 * r2 * r * (0.2 - r * (1.0 / 6.0));
    a + b + c
}

/// `exp(-r) - 1` for `0 <= r < ln 2 / 64`: 6 terms (the 7th is below 1e-17).
#[inline]
fn expm1_neg_small(r: f64) -> f64 {
    let r2 = r * r;
    let a = -r + r2 * 0.5;
    let b = r2 * r * (-1.0 / 6.0 + r * (1.0 / 24.0));
    let c = r2 * r2 * r * (-1.0 / 120.0 + r * (1.0 / 720.0));
    a + b + c
}

/// Natural logarithm of `x > 0` (finite, normal): `x = m * 2^e` with `m` in `[1, 2)`,
/// `m = c (1 + r)` with `c` the midpoint of `m`'s 1/128 interval, so `|r| <= 1/256`.
pub fn ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mantissa = bits & ((1u64 << 52) - 1);
    let m = f64::from_bits(mantissa | (1023u64 << 52));
    let [c, inv_c, ln_c] = LN_TABLE[(mantissa >> (52 - 7)) as usize];
    let r = (m - c) * inv_c;
    exponent as f64 * LN_2 + ln_c + ln_1p_small(r)
}

/// `x = (64 k + j) ln 2 / 64 + r` with `0 <= r < ln 2 / 64`: `(k, j, r)`.
#[inline]
fn reduce(x: f64) -> (u64, usize, f64) {
    let n = (x * (EXP_STEPS as f64 / LN_2)) as u64;
    let r = x - n as f64 * (LN_2 / EXP_STEPS as f64);
    // Rounding may leave r a hair below 0 or at the step: harmless to the series.
    (n / EXP_STEPS as u64, (n % EXP_STEPS as u64) as usize, r)
}

/// `exp(-x)` for `x >= 0`: `2^-k * 2^(-j/64) * exp(-r)`.
fn exp_neg(x: f64) -> f64 {
    if x > 700.0 {
        return 0.0;
    }
    let (k, j, r) = reduce(x);
    EXP_TABLE[j] * (1.0 + expm1_neg_small(r)) * f64::from_bits((1023 - k) << 52)
}

/// `1 - exp(-x)` for `x >= 0`, without the cancellation of the subtraction for
/// small `x` (below one table step it is the series `x - x^2/2 + ...` itself; above,
/// `1 - exp(-x) >= 0.01`, so the subtraction loses at most ~7 bits of 53).
pub fn one_minus_exp_neg(x: f64) -> f64 {
    if x < LN_2 / EXP_STEPS as f64 {
        return -expm1_neg_small(x);
    }
    1.0 - exp_neg(x)
}

/// How many allocations one sample of a `sampled_size`-byte block stands for when
/// every byte is sampled with probability `1/rate`: `1 / (1 - exp(-size/rate))`.
pub fn sample_weight(sampled_size: usize, rate: u64) -> f64 {
    1.0 / one_minus_exp_neg(sampled_size.max(1) as f64 / rate as f64)
}

/// xorshift64* (state never zero); the seed fixes the whole sequence.
#[derive(Clone, Copy, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub const fn new(seed: u64) -> Rng {
        // splitmix64 of the seed, so nearby seeds give unrelated sequences.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    /// Uniform in `(0, 1]`.
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        (x as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// Bytes to the next sample point: exponential with mean `rate`, at least 1.
    pub fn next_interval(&mut self, rate: u64) -> i64 {
        let bytes = -ln(self.unit()) * rate as f64;
        (bytes as i64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_and_exp_match_std() {
        for &x in &[
            1e-300, 1e-9, 0.001, 0.3, 0.5, 0.999, 1.0, 1.5, 2.0, 10.0, 1e9,
        ] {
            let want = std::primitive::f64::ln(x);
            assert!(
                (ln(x) - want).abs() <= 1e-12 * want.abs().max(1.0),
                "ln {x}"
            );
        }
        for &x in &[
            0.0, 1e-12, 1e-6, 0.01, 0.49, 0.5, 0.7, 1.0, 3.0, 30.0, 100.0,
        ] {
            let want = -std::primitive::f64::exp_m1(-x);
            let got = one_minus_exp_neg(x);
            assert!(
                (got - want).abs() <= 1e-12 * want.max(1e-300),
                "1-exp(-{x}): {got} vs {want}"
            );
        }
    }

    #[test]
    fn tables_match_std_everywhere() {
        // Every interval of both tables, at their edges and inside.
        let mut x = 1e-7;
        while x < 800.0 {
            for y in [x, x * 1.000_123, x * 1.003_9] {
                let want = -std::primitive::f64::exp_m1(-y);
                let got = one_minus_exp_neg(y);
                assert!(
                    (got - want).abs() <= 1e-13 * want,
                    "1-exp(-{y}): {got} vs {want}"
                );
                let want = std::primitive::f64::ln(y);
                assert!(
                    (ln(y) - want).abs() <= 1e-14 * want.abs().max(1.0),
                    "ln {y}"
                );
            }
            x *= 1.001;
        }
        for i in 0..=4096 {
            let m = 1.0 + i as f64 / 4096.0;
            let want = std::primitive::f64::ln(m);
            assert!((ln(m) - want).abs() <= 1e-15, "ln {m}: {} vs {want}", ln(m));
        }
    }

    #[test]
    fn intervals_have_the_rate_as_mean() {
        let mut rng = Rng::new(42);
        let n = 200_000;
        let sum: f64 = (0..n).map(|_| rng.next_interval(1 << 19) as f64).sum();
        let mean = sum / n as f64;
        // Standard error of the mean: rate / sqrt(n) ~ 0.22%; 1% is over 4 of them.
        assert!((mean / (1 << 19) as f64 - 1.0).abs() < 0.01, "mean {mean}");
    }
}

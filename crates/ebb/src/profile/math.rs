//! The few floating-point functions the sampler needs, without `std` (core has no
//! `ln` or `exp`): the exponential draw of the next sample point and the weight of a
//! sample. Accurate to about 1e-9 relative, far below the sampling noise.

const LN_2: f64 = core::f64::consts::LN_2;

/// Natural logarithm of `x > 0` (finite): `x = m * 2^e` with `m` in `[1, 2)`, then
/// `ln m = 2 atanh((m-1)/(m+1))` by its series (`|t| <= 1/3`, so 12 terms suffice).
pub fn ln(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let mut term = t;
    let mut sum = 0.0;
    let mut k = 1.0;
    while k < 25.0 {
        sum += term / k;
        term *= t2;
        k += 2.0;
    }
    exponent as f64 * LN_2 + 2.0 * sum
}

/// `exp(-x)` for `x >= 0`: `x = k ln 2 + r`, `exp(-r)` by its Taylor series on
/// `[0, ln 2)`, scaled by `2^-k` through the exponent bits.
fn exp_neg(x: f64) -> f64 {
    if x > 700.0 {
        return 0.0;
    }
    let k = (x / LN_2) as u64;
    let r = x - k as f64 * LN_2;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut n = 1.0;
    while n < 20.0 {
        term *= -r / n;
        sum += term;
        n += 1.0;
    }
    sum * f64::from_bits((1023 - k) << 52)
}

/// `1 - exp(-x)` for `x >= 0`, without the cancellation of the subtraction for
/// small `x` (where it is the series `x - x^2/2 + x^3/6 - ...`).
pub fn one_minus_exp_neg(x: f64) -> f64 {
    if x >= 0.5 {
        return 1.0 - exp_neg(x);
    }
    let mut term = x;
    let mut sum = x;
    let mut n = 2.0;
    while n < 20.0 {
        term *= -x / n;
        sum += term;
        n += 1.0;
    }
    sum
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
    fn intervals_have_the_rate_as_mean() {
        let mut rng = Rng::new(42);
        let n = 200_000;
        let sum: f64 = (0..n).map(|_| rng.next_interval(1 << 19) as f64).sum();
        let mean = sum / n as f64;
        // Standard error of the mean: rate / sqrt(n) ~ 0.22%; 1% is over 4 of them.
        assert!((mean / (1 << 19) as f64 - 1.0).abs() < 0.01, "mean {mean}");
    }
}

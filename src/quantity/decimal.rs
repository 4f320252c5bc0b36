//! An exact signed decimal of any size, the stand-in for `inf.Dec` (and `big.Int`) in
//! `resource.Quantity`: only the few operations a quantity needs, each linear in the number of
//! digits. The exponent is kept apart from the digits, so `1e2000000000` costs one digit.

use std::cmp::Ordering;

/// `±digits × 10^exp`. `digits` holds decimal digits (0–9), most significant first, with no
/// leading and no trailing zeros; zero is the empty list (with `exp` 0 and not negative).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decimal {
    neg: bool,
    digits: Vec<u8>,
    exp: i64,
}

impl Decimal {
    pub(crate) fn zero() -> Self {
        Decimal {
            neg: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    /// From ASCII digits (leading and trailing zeros allowed) times `10^exp`.
    pub(crate) fn from_ascii_digits(
        neg: bool,
        ascii: impl IntoIterator<Item = u8>,
        exp: i64,
    ) -> Self {
        let digits = ascii
            .into_iter()
            .map(|b| b - b'0')
            .skip_while(|&d| d == 0)
            .collect();
        Decimal { neg, digits, exp }.normalized()
    }

    /// `value × 10^exp`.
    pub(crate) fn from_i64(value: i64, exp: i64) -> Self {
        let mut digits = Vec::new();
        let mut magnitude = value.unsigned_abs();
        while magnitude > 0 {
            digits.push((magnitude % 10) as u8);
            magnitude /= 10;
        }
        digits.reverse();
        Decimal {
            neg: value < 0,
            digits,
            exp,
        }
        .normalized()
    }

    fn normalized(mut self) -> Self {
        let trailing = self.digits.iter().rev().take_while(|&&d| d == 0).count();
        self.digits.truncate(self.digits.len() - trailing);
        if self.digits.is_empty() {
            return Decimal::zero();
        }
        let leading = self.digits.iter().take_while(|&&d| d == 0).count();
        if leading > 0 {
            self.digits.drain(..leading);
        }
        self.exp = self.exp.saturating_add(trailing as i64);
        self
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// -1, 0 or 1.
    pub(crate) fn signum(&self) -> i32 {
        match (self.is_zero(), self.neg) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }

    pub(crate) fn negated(mut self) -> Self {
        if !self.is_zero() {
            self.neg = !self.neg;
        }
        self
    }

    /// The power of ten of the last (non-zero) digit.
    pub(crate) fn exp(&self) -> i64 {
        self.exp
    }

    /// Position of the most significant digit (its power of ten).
    fn top(&self) -> i64 {
        self.exp.saturating_add(self.digits.len() as i64 - 1)
    }

    fn cmp_abs(&self, other: &Self) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            (false, false) => {}
        }
        self.top()
            .cmp(&other.top())
            // Same leading position: compare digit by digit; with no trailing zeros, a proper
            // prefix is the smaller number.
            .then_with(|| self.digits.cmp(&other.digits))
    }

    /// Multiplies by `factor` (at most 2^32).
    fn mul_small(&mut self, factor: u64) {
        if self.is_zero() {
            return;
        }
        let mut carry: u64 = 0;
        for d in self.digits.iter_mut().rev() {
            let v = u64::from(*d) * factor + carry;
            *d = (v % 10) as u8;
            carry = v / 10;
        }
        let mut front = Vec::new();
        while carry > 0 {
            front.push((carry % 10) as u8);
            carry /= 10;
        }
        if !front.is_empty() {
            front.reverse();
            front.append(&mut self.digits);
            self.digits = front;
        }
        *self = std::mem::replace(self, Decimal::zero()).normalized();
    }

    /// Multiplies by `2^power`.
    pub(crate) fn mul_pow2(&mut self, mut power: u32) {
        while power > 0 {
            let step = power.min(32);
            self.mul_small(1u64 << step);
            power -= step;
        }
    }

    /// Rounds away from zero to a multiple of `10^min_exp` (inf.Dec's `RoundUp`); whether the
    /// value was already one.
    pub(crate) fn round_up(&mut self, min_exp: i64) -> bool {
        if self.is_zero() || self.exp >= min_exp {
            return true;
        }
        // Every dropped part is non-zero, as the last digit is never 0.
        let keep = self.top() - min_exp + 1;
        if keep <= 0 {
            self.digits = vec![1];
        } else {
            self.digits.truncate(keep as usize);
            let mut carry = true;
            for d in self.digits.iter_mut().rev() {
                if *d == 9 {
                    *d = 0;
                } else {
                    *d += 1;
                    carry = false;
                    break;
                }
            }
            if carry {
                self.digits.insert(0, 1);
            }
        }
        self.exp = min_exp;
        *self = std::mem::replace(self, Decimal::zero()).normalized();
        false
    }

    /// Writes `[-]digits` followed by `zeros` zeros.
    pub(crate) fn write_scaled(&self, zeros: u64, out: &mut String) {
        if self.is_zero() {
            out.push('0');
            return;
        }
        if self.neg {
            out.push('-');
        }
        out.extend(self.digits.iter().map(|&d| char::from(b'0' + d)));
        for _ in 0..zeros {
            out.push('0');
        }
    }

    /// For an integer value: the value with all factors of 1024 divided out, written in
    /// decimal, and how many were removed. The integer is written out in full, so this is
    /// linear in its number of digits.
    pub(crate) fn remove_1024_factors(&self) -> (String, i32) {
        let mut out = String::new();
        if self.is_zero() {
            out.push('0');
            return (out, 0);
        }
        let mut digits: Vec<u8> = self.digits.clone();
        digits.extend(std::iter::repeat_n(0u8, self.exp.max(0) as usize));
        let mut times: i32 = 0;
        loop {
            let mut quotient = Vec::with_capacity(digits.len());
            let mut rem: u32 = 0;
            for &d in &digits {
                let v = rem * 10 + u32::from(d);
                let q = (v / 1024) as u8;
                rem = v % 1024;
                if !(quotient.is_empty() && q == 0) {
                    quotient.push(q);
                }
            }
            if rem != 0 || quotient.is_empty() {
                break;
            }
            digits = quotient;
            times = times.wrapping_add(1);
        }
        if self.neg {
            out.push('-');
        }
        out.extend(digits.iter().map(|&d| char::from(b'0' + d)));
        (out, times)
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        match self.signum().cmp(&other.signum()) {
            Ordering::Equal if self.neg => other.cmp_abs(self),
            Ordering::Equal => self.cmp_abs(other),
            unequal => unequal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str, exp: i64) -> Decimal {
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        Decimal::from_ascii_digits(neg, s.bytes(), exp)
    }

    #[test]
    fn normalizes_and_compares() {
        assert_eq!(d("0100", 0), d("1", 2));
        assert_eq!(d("000", 5), Decimal::zero());
        assert!(d("9", 0) < d("1", 1));
        assert!(d("-9", 0) > d("-1", 1));
        assert!(d("12", 0) > d("1", 1));
        assert!(d("-1", 0) < Decimal::zero());
        assert_eq!(Decimal::from_i64(i64::MIN, 0), d("-9223372036854775808", 0));
    }

    #[test]
    fn rounds_away_from_zero() {
        let mut x = d("3001", -12);
        assert!(!x.round_up(-9));
        assert_eq!(x, d("4", -9));
        let mut x = d("-999", -12);
        assert!(!x.round_up(-9));
        assert_eq!(x, d("-1", -9));
        let mut x = d("1", -2_000_000_000);
        assert!(!x.round_up(-9));
        assert_eq!(x, d("1", -9));
        let mut x = d("15", -1);
        assert!(x.round_up(-1));
    }

    #[test]
    fn multiplies_and_divides_by_powers_of_two() {
        let mut x = d("3", 0);
        x.mul_pow2(60);
        assert_eq!(x, Decimal::from_i64(3 << 60, 0));
        assert_eq!(x.remove_1024_factors(), ("3".to_string(), 6));
        assert_eq!(d("-2048", 0).remove_1024_factors(), ("-2".to_string(), 1));
    }
}

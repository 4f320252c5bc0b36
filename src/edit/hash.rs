//! Content hashes for recognising text we wrote ourselves and webhook calls already answered.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::OnceLock;

/// A 128-bit hash of some content: two keyed SipHash passes with keys drawn once per process.
/// Equal contents have equal hashes; different contents collide with probability about 2⁻¹²⁸
/// per pair. Not stable across processes (never store it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(u128);

impl ContentHash {
    /// The hash of some bytes.
    pub fn of(bytes: &[u8]) -> ContentHash {
        let mut h = Hasher128::new();
        h.write(bytes);
        h.finish()
    }
}

fn keys() -> &'static (RandomState, RandomState) {
    static KEYS: OnceLock<(RandomState, RandomState)> = OnceLock::new();
    KEYS.get_or_init(|| (RandomState::new(), RandomState::new()))
}

/// Builds a [`ContentHash`] from several parts; each part is length-prefixed, so part
/// boundaries count.
pub(crate) struct Hasher128 {
    a: std::hash::DefaultHasher,
    b: std::hash::DefaultHasher,
}

impl Hasher128 {
    pub(crate) fn new() -> Self {
        let (a, b) = keys();
        Self {
            a: a.build_hasher(),
            b: b.build_hasher(),
        }
    }

    pub(crate) fn write(&mut self, part: &[u8]) {
        self.a.write_usize(part.len());
        self.a.write(part);
        self.b.write_usize(part.len());
        self.b.write(part);
    }

    pub(crate) fn finish(&self) -> ContentHash {
        ContentHash((u128::from(self.a.finish()) << 64) | u128::from(self.b.finish()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_count() {
        assert_eq!(ContentHash::of(b"abc"), ContentHash::of(b"abc"));
        assert_ne!(ContentHash::of(b"abc"), ContentHash::of(b"abd"));
        let mut one = Hasher128::new();
        one.write(b"ab");
        one.write(b"c");
        let mut two = Hasher128::new();
        two.write(b"a");
        two.write(b"bc");
        assert_ne!(one.finish(), two.finish());
    }
}

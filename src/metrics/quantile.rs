//! The streaming quantile estimator behind client_golang summaries: a port of
//! `github.com/beorn7/perks/quantile` (`NewTargeted`) with the objectives component-base gives
//! every summary that sets none: `{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}`.
//!
//! Only the head stream of a client_golang summary is modelled (no age-bucket rotation: there is no
//! clock here), and queries run on a copy, as if the apiserver was scraped only when
//! [`super::Metrics::encode_text`] is called. Below 500 observations the estimate is exact (perks
//! answers from its sorted buffer).

use std::cmp::Ordering;

/// The quantiles a component-base summary reports, in the order they are printed.
pub(crate) const OBJECTIVES: [(f64, f64); 3] = [(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)];

/// perks' buffer capacity: the buffer is merged into the compressed list when it is full.
const BUFFER_CAP: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq)]
struct QSample {
    value: f64,
    width: f64,
    delta: f64,
}

/// perks `Stream` (targeted).
#[derive(Debug, Clone, Default)]
pub(crate) struct Stream {
    /// Observed `n` of the compressed list.
    n: f64,
    /// The compressed list (perks `stream.l`).
    l: Vec<QSample>,
    /// Not yet merged observations, in insertion order (perks `Stream.b`).
    b: Vec<f64>,
}

impl Stream {
    /// perks `Stream.Insert`.
    pub(crate) fn insert(&mut self, v: f64) {
        self.b.push(v);
        if self.b.len() == BUFFER_CAP {
            self.flush();
        }
    }

    /// Whether the compressed list was ever used (perks `flushed`): until then every observation
    /// is still in `b`, in insertion order.
    pub(crate) fn flushed(&self) -> bool {
        !self.l.is_empty()
    }

    /// The raw observations not yet merged, in insertion order.
    pub(crate) fn buffered(&self) -> &[f64] {
        &self.b
    }

    /// The compressed samples as (value, width) pairs (for approximate merges).
    pub(crate) fn compressed(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.l.iter().map(|s| (s.value, s.width))
    }

    /// perks `Stream.Query` for each objective, in order, on a copy (Go's `Query` flushes the
    /// buffer into the list; the copy keeps `self` as if never scraped).
    pub(crate) fn query_objectives(&self) -> [f64; 3] {
        let mut s = self.clone();
        OBJECTIVES.map(|(q, _)| s.query(q))
    }

    fn query(&mut self, q: f64) -> f64 {
        if !self.flushed() {
            let l = self.b.len();
            if l == 0 {
                return 0.0;
            }
            let i = ((l as f64 * q).ceil() as usize).saturating_sub(1);
            sort_values(&mut self.b);
            return self.b.get(i).copied().unwrap_or(0.0);
        }
        self.flush();
        self.query_list(q)
    }

    fn flush(&mut self) {
        let mut batch = std::mem::take(&mut self.b);
        sort_values(&mut batch);
        self.merge(&batch);
        batch.clear();
        self.b = batch;
    }

    /// The targeted invariant ƒ(s, r).
    fn invariant(&self, r: f64) -> f64 {
        let mut m = f64::MAX;
        for (quantile, epsilon) in OBJECTIVES {
            let f = if quantile * self.n <= r {
                (2.0 * epsilon * r) / quantile
            } else {
                (2.0 * epsilon * (self.n - r)) / (1.0 - quantile)
            };
            if f < m {
                m = f;
            }
        }
        m
    }

    /// perks `stream.merge` of sorted unit samples: each goes before the first kept sample of a
    /// greater value. Written into a new list (perks inserts in place, which moves the list's
    /// tail once per sample); the result is the same.
    fn merge(&mut self, samples: &[f64]) {
        let old = std::mem::take(&mut self.l);
        let mut out = Vec::with_capacity(old.len() + samples.len());
        let mut r = 0.0;
        let mut i = 0;
        for &value in samples {
            while let Some(&c) = old
                .get(i)
                .filter(|c| c.value.partial_cmp(&value) != Some(Ordering::Greater))
            {
                r += c.width;
                out.push(c);
                i += 1;
            }
            let delta = if i < old.len() {
                f64::max(0.0, self.invariant(r).floor() - 1.0)
            } else {
                0.0
            };
            out.push(QSample {
                value,
                width: 1.0,
                delta,
            });
            self.n += 1.0;
            r += 1.0;
        }
        out.extend_from_slice(old.get(i..).unwrap_or_default());
        self.l = out;
        self.compress();
    }

    /// perks `stream.compress`: from the largest sample down, each folds into the one above it
    /// while the invariant allows. Written into a new list, as [`Stream::merge`].
    fn compress(&mut self) {
        let Some((&last, rest)) = self.l.split_last() else {
            return;
        };
        if rest.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.l.len());
        let mut x = last;
        let mut r = self.n - 1.0 - x.width;
        for &c in rest.iter().rev() {
            if c.width + x.width + x.delta <= self.invariant(r) {
                x.width += c.width;
            } else {
                kept.push(x);
                x = c;
            }
            r -= c.width;
        }
        kept.push(x);
        kept.reverse();
        self.l = kept;
    }

    /// perks `stream.query`.
    fn query_list(&self, q: f64) -> f64 {
        let mut t = (q * self.n).ceil();
        t += (self.invariant(t) / 2.0).ceil();
        let Some((first, rest)) = self.l.split_first() else {
            return 0.0;
        };
        let mut p = *first;
        let mut r = 0.0;
        for &c in rest {
            r += p.width;
            if r + c.width + c.delta > t {
                return p.value;
            }
            p = c;
        }
        p.value
    }
}

fn sort_values(v: &mut [f64]) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_streams_answer_from_the_sorted_buffer() {
        // The fixture's step summary with 4 observations: 0.5 → 2nd smallest, 0.9/0.99 → largest.
        let mut s = Stream::default();
        for v in [0.045, 0.047720898, 0.043701016, 0.042] {
            s.insert(v);
        }
        assert_eq!(
            s.query_objectives(),
            [0.043701016, 0.047720898, 0.047720898]
        );
        assert!(!s.flushed());
        assert_eq!(s.buffered(), &[0.045, 0.047720898, 0.043701016, 0.042]);
    }

    #[test]
    fn large_streams_stay_within_the_error_bounds() {
        let mut s = Stream::default();
        // 1..=10000 in a scrambled order.
        for k in 0..10_000u64 {
            s.insert(((k * 7919) % 10_000 + 1) as f64);
        }
        assert!(s.flushed());
        let [p50, p90, p99] = s.query_objectives();
        assert!((p50 - 5000.0).abs() <= 500.0, "{p50}");
        assert!((p90 - 9000.0).abs() <= 100.0, "{p90}");
        assert!((p99 - 9900.0).abs() <= 10.0, "{p99}");
        // Querying a copy leaves the stream as it was.
        assert_eq!(s.query_objectives(), [p50, p90, p99]);
    }

    /// perks' merge and compress as written there, in place.
    impl Stream {
        fn merge_in_place(&mut self, samples: &[f64]) {
            let mut r = 0.0;
            let mut i = 0;
            for &value in samples {
                let mut inserted = false;
                while i < self.l.len() {
                    let c = self.l[i];
                    if c.value > value {
                        let delta = f64::max(0.0, self.invariant(r).floor() - 1.0);
                        self.l.insert(
                            i,
                            QSample {
                                value,
                                width: 1.0,
                                delta,
                            },
                        );
                        i += 1;
                        inserted = true;
                        break;
                    }
                    r += c.width;
                    i += 1;
                }
                if !inserted {
                    self.l.push(QSample {
                        value,
                        width: 1.0,
                        delta: 0.0,
                    });
                    i += 1;
                }
                self.n += 1.0;
                r += 1.0;
            }
            self.compress_in_place();
        }

        fn compress_in_place(&mut self) {
            let len = self.l.len();
            if len < 2 {
                return;
            }
            let mut xi = len - 1;
            let mut x = self.l[xi];
            let mut r = self.n - 1.0 - x.width;
            for i in (0..len - 1).rev() {
                let c = self.l[i];
                if c.width + x.width + x.delta <= self.invariant(r) {
                    x.width += c.width;
                    self.l[xi] = x;
                    self.l.remove(i);
                    xi -= 1;
                } else {
                    x = c;
                    xi = i;
                }
                r -= c.width;
            }
        }
    }

    #[test]
    fn merging_into_a_new_list_is_merging_in_place() {
        let (mut new, mut reference) = (Stream::default(), Stream::default());
        // Batches of a scrambled sequence with repeats and ties, as flushes see them.
        let mut x = 12345u64;
        let mut total = 0;
        for round in 0..40 {
            let mut batch: Vec<f64> = (0..(BUFFER_CAP / 4 + round))
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 997) as f64 / 7.0
                })
                .collect();
            sort_values(&mut batch);
            total += batch.len();
            new.merge(&batch);
            reference.merge_in_place(&batch);
            assert_eq!(new.n, reference.n);
            assert_eq!(new.l, reference.l, "round {round}");
        }
        assert!(
            new.l.len() * 4 < total,
            "compressed: {} of {total}",
            new.l.len()
        );
    }

    #[test]
    fn empty_stream_queries_zero() {
        assert_eq!(Stream::default().query_objectives(), [0.0; 3]);
    }
}

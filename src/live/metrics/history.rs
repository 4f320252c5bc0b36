//! Admission series over time: a bounded history of scrapes, and rates and quantiles over a
//! window of it. Pure: the time of each scrape is an input, and queries read only the history.
//!
//! Counters follow PromQL's `increase()`/`rate()` on the samples inside the window, without
//! extrapolation to the window's edges: a value lower than the previous one is a counter reset
//! (the series restarted from 0, so the increase over that interval is the new value). A series
//! absent from a scrape inside the window and present in the next one counts from 0 (kube-apiserver
//! creates a series on its first increment), where PromQL would ignore its first value. A
//! histogram is reset as a whole when its count or any bucket decreases, or its buckets change.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use thiserror::Error;

use super::admission::{
    AdmissionFamily, AdmissionSnapshot, Bucket, HistogramValue, INSTANCE_LABEL, LabelSet, SeriesKey,
};

/// A scrape that cannot be added to the history.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HistoryError {
    /// Scrapes must be pushed in strictly increasing time order.
    #[error("scrape at {at:?} is not later than the latest scrape in the history, at {latest:?}")]
    OutOfOrder {
        /// The rejected scrape's time.
        at: SystemTime,
        /// The latest scrape's time.
        latest: SystemTime,
    },
}

/// Where a query window ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowEnd {
    /// At the latest scrape.
    Latest,
    /// At this time (a paused chart): the window ends at the last scrape at or before it.
    At(SystemTime),
}

/// The scrapes a query reads: those within `length` before the window's end, and of their
/// series those of one apiserver or all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// How far back from the end the window reaches.
    pub length: Duration,
    /// Where it ends.
    pub end: WindowEnd,
    /// Only the series of this apiserver (their `instance` label); `None` reads every series,
    /// so that a sum adds up the apiservers.
    pub instance: Option<String>,
}

impl Window {
    /// A window of `length` ending at the latest scrape.
    pub fn latest(length: Duration) -> Self {
        Window {
            length,
            end: WindowEnd::Latest,
            instance: None,
        }
    }

    /// A window of `length` ending at `at` (paused).
    pub fn paused_at(length: Duration, at: SystemTime) -> Self {
        Window {
            length,
            end: WindowEnd::At(at),
            instance: None,
        }
    }

    /// The same window over the series of one apiserver (`Some`), or of all (`None`).
    pub fn of_instance(self, instance: Option<String>) -> Self {
        Window { instance, ..self }
    }
}

/// One point of a line chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The scrape time.
    pub at: SystemTime,
    /// Seconds from the window's end (zero or negative): the chart's x coordinate.
    pub offset_secs: f64,
    /// The value over the interval from the previous scrape to this one.
    pub value: f64,
}

/// The rate of one group of counter series over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSeries {
    /// The group's labels (the grouping labels the series carry).
    pub labels: LabelSet,
    /// The increase over the window, summed over the group's series.
    pub increase: f64,
    /// `increase` per second of the window's span (first to last scrape in it); `None` with fewer
    /// than two scrapes in the window.
    pub rate: Option<f64>,
    /// Per-second rate over each interval between consecutive scrapes in the window.
    pub points: Vec<Point>,
}

/// Quantiles of one group of histogram series over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileSeries {
    /// The group's labels (the grouping labels the series carry).
    pub labels: LabelSet,
    /// Observations in the window (increase of `_count`).
    pub observations: f64,
    /// Mean observed value in the window (increase of `_sum` / of `_count`); `None` without
    /// observations.
    pub mean: Option<f64>,
    /// `histogram_quantile(q, …)` over the window's bucket increases, one per requested `q`
    /// (NaN without observations).
    pub quantiles: Vec<f64>,
    /// The same quantiles over each interval between consecutive scrapes (NaN for an interval
    /// without observations).
    pub points: Vec<QuantilePoint>,
}

/// Quantiles over one interval between scrapes.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantilePoint {
    /// The scrape time ending the interval.
    pub at: SystemTime,
    /// Seconds from the window's end (zero or negative).
    pub offset_secs: f64,
    /// One value per requested quantile, NaN without observations.
    pub values: Vec<f64>,
}

/// One stored scrape: values indexed by series id.
#[derive(Debug, Clone)]
struct Stored {
    at: SystemTime,
    counters: Vec<Option<f64>>,
    histograms: Vec<Option<HistogramValue>>,
}

/// Ids of series seen so far.
#[derive(Debug, Clone, Default)]
struct Registry {
    keys: Vec<SeriesKey>,
    ids: HashMap<SeriesKey, usize>,
}

impl Registry {
    fn id(&mut self, key: &SeriesKey) -> usize {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        self.keys.push(key.clone());
        self.ids.insert(key.clone(), self.keys.len() - 1);
        self.keys.len() - 1
    }

    /// Series ids of `family` (of `instance` only, when given) grouped by their labels projected
    /// on `group_by`.
    fn groups(
        &self,
        family: AdmissionFamily,
        group_by: &[&str],
        instance: Option<&str>,
    ) -> BTreeMap<LabelSet, Vec<usize>> {
        let mut groups: BTreeMap<LabelSet, Vec<usize>> = BTreeMap::new();
        for (id, key) in self.keys.iter().enumerate() {
            if key.family == family
                && instance.is_none_or(|i| key.labels.get(INSTANCE_LABEL) == Some(i))
            {
                groups
                    .entry(key.labels.project(group_by))
                    .or_default()
                    .push(id);
            }
        }
        groups
    }
}

fn put<T>(slots: &mut Vec<Option<T>>, id: usize, value: T) {
    if slots.len() <= id {
        slots.resize_with(id + 1, || None);
    }
    slots[id] = Some(value);
}

/// A bounded history of admission snapshots: the latest `capacity` scrapes, oldest dropped first.
#[derive(Debug, Clone)]
pub struct MetricsHistory {
    capacity: usize,
    scrapes: VecDeque<Stored>,
    counters: Registry,
    histograms: Registry,
    latest: Option<AdmissionSnapshot>,
    /// Whether the latest scrape with series had them labelled by apiserver.
    by_instance: Option<bool>,
}

impl MetricsHistory {
    /// An empty history keeping at most `capacity` scrapes (at least 1).
    pub fn new(capacity: usize) -> Self {
        MetricsHistory {
            capacity: capacity.max(1),
            scrapes: VecDeque::new(),
            counters: Registry::default(),
            histograms: Registry::default(),
            latest: None,
            by_instance: None,
        }
    }

    /// How many scrapes the history keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many scrapes it holds.
    pub fn len(&self) -> usize {
        self.scrapes.len()
    }

    /// Whether it holds no scrape.
    pub fn is_empty(&self) -> bool {
        self.scrapes.is_empty()
    }

    /// The times of the scrapes held, oldest first.
    pub fn times(&self) -> impl Iterator<Item = SystemTime> + '_ {
        self.scrapes.iter().map(|s| s.at)
    }

    /// The latest scrape's time and snapshot.
    pub fn latest(&self) -> Option<(SystemTime, &AdmissionSnapshot)> {
        Some((self.scrapes.back()?.at, self.latest.as_ref()?))
    }

    /// The apiservers whose series the history holds (their `instance` label), sorted.
    pub fn instances(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .counters
            .keys
            .iter()
            .chain(&self.histograms.keys)
            .filter_map(|k| k.labels.get(INSTANCE_LABEL).map(str::to_string))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Adds the scrape taken at `at`, dropping the oldest one when full. `at` must be later than
    /// the latest scrape's time.
    ///
    /// A scrape whose series are labelled by apiserver after scrapes whose series were not, or
    /// the reverse (per-apiserver scraping starting, or falling back to the load balancer's
    /// `/metrics`), starts the history afresh: the two are not the same series, and counting one
    /// from 0 where the other ends would chart the whole counter as one interval's increase.
    pub fn push(
        &mut self,
        at: SystemTime,
        snapshot: AdmissionSnapshot,
    ) -> Result<(), HistoryError> {
        if let Some(last) = self.scrapes.back()
            && at <= last.at
        {
            return Err(HistoryError::OutOfOrder {
                at,
                latest: last.at,
            });
        }
        if !snapshot.is_empty() {
            let by_instance = !snapshot.instances().is_empty();
            if self.by_instance.is_some_and(|b| b != by_instance) {
                self.scrapes.clear();
            }
            self.by_instance = Some(by_instance);
        }
        let mut stored = Stored {
            at,
            counters: Vec::new(),
            histograms: Vec::new(),
        };
        for (key, &v) in &snapshot.counters {
            put(&mut stored.counters, self.counters.id(key), v);
        }
        for (key, h) in &snapshot.histograms {
            put(&mut stored.histograms, self.histograms.id(key), h.clone());
        }
        if self.scrapes.len() == self.capacity {
            self.scrapes.pop_front();
        }
        self.scrapes.push_back(stored);
        self.latest = Some(snapshot);
        Ok(())
    }

    /// The scrapes inside `window` and the window's end time.
    fn window(&self, window: &Window) -> Option<(Vec<&Stored>, SystemTime)> {
        let end = match window.end {
            WindowEnd::Latest => self.scrapes.back()?.at,
            WindowEnd::At(t) => t,
        };
        let start = end
            .checked_sub(window.length)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let inside: Vec<&Stored> = self
            .scrapes
            .iter()
            .filter(|s| s.at >= start && s.at <= end)
            .collect();
        (!inside.is_empty()).then_some((inside, end))
    }

    /// Per-second rates of the counter series of `family` over `window`, summed by the labels in
    /// `group_by` (`&[]` sums everything; `&["name"]` is per webhook; `&["name", "error_type"]`,
    /// `&["name", "code"]`, …). For a histogram family, the rate of its `_count` (observations per
    /// second). Groups are sorted by their labels.
    pub fn rates(
        &self,
        window: &Window,
        family: AdmissionFamily,
        group_by: &[&str],
    ) -> Vec<RateSeries> {
        let Some((scrapes, end)) = self.window(window) else {
            return Vec::new();
        };
        let intervals = interval_secs(&scrapes);
        let span = intervals.iter().fold(0.0, |a, b| a + b);
        let registry = if family.is_histogram() {
            &self.histograms
        } else {
            &self.counters
        };
        let mut out = Vec::new();
        for (labels, ids) in registry.groups(family, group_by, window.instance.as_deref()) {
            let mut sums = vec![0.0; intervals.len()];
            for id in ids {
                let values = scrapes.iter().map(|s| {
                    if family.is_histogram() {
                        s.histograms
                            .get(id)
                            .and_then(Option::as_ref)
                            .map(|h| h.count)
                    } else {
                        s.counters.get(id).copied().flatten()
                    }
                });
                for (sum, inc) in sums.iter_mut().zip(counter_increases(values)) {
                    *sum += inc;
                }
            }
            let increase = sums.iter().fold(0.0, |a, b| a + b);
            let points = scrapes
                .iter()
                .skip(1)
                .zip(sums.iter().zip(&intervals))
                .map(|(s, (inc, dt))| Point {
                    at: s.at,
                    offset_secs: offset(s.at, end),
                    value: inc / dt,
                })
                .collect();
            out.push(RateSeries {
                labels,
                increase,
                rate: (span > 0.0).then(|| increase / span),
                points,
            });
        }
        out
    }

    /// Quantiles `qs` (e.g. `[0.5, 0.9, 0.99]`) of the histogram series of `family` over
    /// `window`, from bucket increases summed by the labels in `group_by`, with
    /// [`histogram_quantile`]'s rules. Groups are sorted by their labels; a counter family gives
    /// none.
    pub fn quantiles(
        &self,
        window: &Window,
        family: AdmissionFamily,
        group_by: &[&str],
        qs: &[f64],
    ) -> Vec<QuantileSeries> {
        if !family.is_histogram() {
            return Vec::new();
        }
        let Some((scrapes, end)) = self.window(window) else {
            return Vec::new();
        };
        let n = scrapes.len().saturating_sub(1);
        let mut out = Vec::new();
        for (labels, ids) in self
            .histograms
            .groups(family, group_by, window.instance.as_deref())
        {
            let mut per_interval: Vec<HistogramValue> = vec![HistogramValue::default(); n];
            for id in ids {
                let values = scrapes
                    .iter()
                    .map(|s| s.histograms.get(id).and_then(Option::as_ref));
                for (acc, inc) in per_interval.iter_mut().zip(histogram_increases(values)) {
                    if let Some(inc) = inc {
                        add_histogram(acc, &inc);
                    }
                }
            }
            let mut total = HistogramValue::default();
            for h in &per_interval {
                add_histogram(&mut total, h);
            }
            let at_qs = |h: &HistogramValue| quantiles_of(qs, &h.buckets);
            let points = scrapes
                .iter()
                .skip(1)
                .zip(&per_interval)
                .map(|(s, h)| QuantilePoint {
                    at: s.at,
                    offset_secs: offset(s.at, end),
                    values: at_qs(h),
                })
                .collect();
            out.push(QuantileSeries {
                labels,
                observations: total.count,
                mean: (total.count > 0.0).then(|| total.sum / total.count),
                quantiles: at_qs(&total),
                points,
            });
        }
        out
    }
}

fn offset(at: SystemTime, end: SystemTime) -> f64 {
    match end.duration_since(at) {
        Ok(d) => -d.as_secs_f64(),
        Err(e) => e.duration().as_secs_f64(),
    }
}

/// Seconds between consecutive scrapes.
fn interval_secs(scrapes: &[&Stored]) -> Vec<f64> {
    scrapes
        .windows(2)
        .map(|w| {
            w[1].at
                .duration_since(w[0].at)
                .map_or(0.0, |d| d.as_secs_f64())
        })
        .collect()
}

/// The increase of one counter over each interval between consecutive values (one fewer than
/// the values): the difference, or the new value after a reset or when the series appears. A
/// missing or non-finite value adds nothing; negative values count as 0 after a reset.
pub(crate) fn counter_increases(values: impl Iterator<Item = Option<f64>>) -> Vec<f64> {
    let mut out = Vec::new();
    let mut last: Option<f64> = None;
    for (i, v) in values.enumerate() {
        let v = v.filter(|v| v.is_finite());
        if i > 0 {
            out.push(match (last, v) {
                (_, None) => 0.0,
                (Some(p), Some(c)) if c >= p => c - p,
                (_, Some(c)) => c.max(0.0),
            });
        }
        if v.is_some() {
            last = v;
        }
    }
    out
}

/// The increase of one histogram over each interval between consecutive values: `None` when it
/// is absent from the later scrape; the whole value when it appears, resets or changes buckets.
fn histogram_increases<'a>(
    values: impl Iterator<Item = Option<&'a HistogramValue>>,
) -> Vec<Option<HistogramValue>> {
    let mut out = Vec::new();
    let mut last: Option<&HistogramValue> = None;
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(v.map(|c| {
                match last {
                    Some(p) if continues(p, c) => HistogramValue {
                        buckets: p
                            .buckets
                            .iter()
                            .zip(&c.buckets)
                            .map(|(pb, cb)| Bucket {
                                le: cb.le,
                                count: cb.count - pb.count,
                            })
                            .collect(),
                        sum: c.sum - p.sum,
                        count: c.count - p.count,
                    },
                    _ => c.clone(),
                }
            }));
        }
        if v.is_some() {
            last = v;
        }
    }
    out
}

/// Whether `c` is `p` plus new observations (same buckets, nothing decreased).
fn continues(p: &HistogramValue, c: &HistogramValue) -> bool {
    c.count >= p.count
        && p.buckets.len() == c.buckets.len()
        && p.buckets
            .iter()
            .zip(&c.buckets)
            .all(|(pb, cb)| pb.le == cb.le && cb.count >= pb.count)
}

/// Adds `h`'s buckets (matched by `le`), sum and count into `acc`.
fn add_histogram(acc: &mut HistogramValue, h: &HistogramValue) {
    for b in &h.buckets {
        match acc.buckets.iter_mut().find(|a| a.le == b.le) {
            Some(a) => a.count += b.count,
            None => acc.buckets.push(*b),
        }
    }
    acc.sum += h.sum;
    acc.count += h.count;
}

/// PromQL's `histogram_quantile(q, …)` over classic cumulative buckets (prometheus
/// `promql/quantile.go` `BucketQuantile`): NaN for a NaN `q`, -Inf below 0, +Inf above 1; NaN
/// without a `+Inf` bucket, with fewer than two buckets, or without observations; buckets sorted
/// by `le`, equal bounds merged, counts made monotonic; the rank `q × count` located in the first
/// bucket reaching it and interpolated linearly inside it (from 0 for the lowest bucket, unless
/// its bound is ≤ 0, which is then returned); a rank in the `+Inf` bucket gives the highest
/// finite bound.
pub fn histogram_quantile(q: f64, buckets: &[Bucket]) -> f64 {
    quantile_of(q, &prepare(buckets))
}

/// `histogram_quantile` of each of `qs`, preparing the buckets once.
fn quantiles_of(qs: &[f64], buckets: &[Bucket]) -> Vec<f64> {
    let prepared = prepare(buckets);
    qs.iter().map(|&q| quantile_of(q, &prepared)).collect()
}

/// Buckets sorted by `le`, equal bounds merged, counts raised to their running maximum.
fn prepare(buckets: &[Bucket]) -> Vec<Bucket> {
    let mut sorted: Vec<Bucket> = buckets.to_vec();
    sorted.sort_by(|a, b| a.le.total_cmp(&b.le));
    let mut merged: Vec<Bucket> = Vec::with_capacity(sorted.len());
    for b in sorted {
        match merged.last_mut() {
            Some(last) if last.le == b.le => last.count += b.count,
            _ => merged.push(b),
        }
    }
    let mut max = f64::NEG_INFINITY;
    for b in &mut merged {
        max = max.max(b.count);
        b.count = max;
    }
    merged
}

fn quantile_of(q: f64, merged: &[Bucket]) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    if merged.last().is_none_or(|b| b.le != f64::INFINITY) {
        return f64::NAN;
    }
    let n = merged.len();
    if n < 2 {
        return f64::NAN;
    }
    let observations = merged[n - 1].count;
    if observations.is_nan() || observations <= 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let b = merged[..n - 1]
        .iter()
        .position(|bucket| bucket.count >= rank)
        .unwrap_or(n - 1);
    if b == n - 1 {
        return merged[n - 2].le;
    }
    if b == 0 && merged[0].le <= 0.0 {
        return merged[0].le;
    }
    let (start, below) = if b > 0 {
        (merged[b - 1].le, merged[b - 1].count)
    } else {
        (0.0, 0.0)
    };
    let end = merged[b].le;
    let count = merged[b].count - below;
    rank -= below;
    start + (end - start) * (rank / count)
}

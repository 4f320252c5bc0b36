//! The admission webhook and admission policy series of one scrape (or of a replay's
//! [`Metrics`]), keyed as kube-apiserver labels them (kubernetes/apiserver
//! `pkg/admission/metrics/metrics.go`, and the policy plugins' `metrics.go` under
//! `pkg/admission/plugin/policy/{validating,mutating}/metrics`).

use std::collections::BTreeMap;

use crate::metrics::Metrics;

use super::parse::{Exposition, ParseError, SampleRole, parse_families, parse_go_float};

/// The label naming the apiserver a series was scraped from (`host:port`), as Prometheus names
/// the target a sample came from.
pub const INSTANCE_LABEL: &str = "instance";

/// Label names and values in a canonical order (sorted by name), so that two samples of one
/// series compare equal whatever order their labels were written in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSet(Vec<(String, String)>);

impl LabelSet {
    /// The set of `pairs`, sorted by label name.
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<_> = pairs.into_iter().collect();
        pairs.sort();
        LabelSet(pairs)
    }

    /// The set of borrowed `pairs`, sorted by label name.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Self::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The pairs, sorted by label name.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Only the labels named in `names` (those present), as PromQL's `sum by (names)` keeps them.
    pub fn project(&self, names: &[&str]) -> LabelSet {
        LabelSet(
            self.0
                .iter()
                .filter(|(k, _)| names.contains(&k.as_str()))
                .cloned()
                .collect(),
        )
    }
}

/// The admission metric families the console charts: the webhooks', matchConditions', and the
/// admission policies'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AdmissionFamily {
    /// `apiserver_admission_webhook_rejection_count` (counter).
    WebhookRejections,
    /// `apiserver_admission_webhook_request_total` (counter).
    WebhookRequests,
    /// `apiserver_admission_webhook_admission_duration_seconds` (histogram).
    WebhookDuration,
    /// `apiserver_admission_webhook_fail_open_count` (counter).
    WebhookFailOpen,
    /// `apiserver_admission_match_condition_evaluation_errors_total` (counter).
    MatchConditionErrors,
    /// `apiserver_admission_match_condition_exclusions_total` (counter).
    MatchConditionExclusions,
    /// `apiserver_admission_match_condition_evaluation_seconds` (histogram).
    MatchConditionDuration,
    /// `apiserver_validating_admission_policy_check_total` (counter): the ValidatingAdmissionPolicy
    /// decisions that were not a plain allow (violations, and errors).
    PolicyChecks,
    /// `apiserver_validating_admission_policy_check_duration_seconds` (histogram).
    PolicyDuration,
    /// `apiserver_mutating_admission_policy_check_total` (counter; 1.34 and later).
    MutatingPolicyChecks,
    /// `apiserver_mutating_admission_policy_check_duration_seconds` (histogram; 1.34 and later).
    MutatingPolicyDuration,
}

impl AdmissionFamily {
    /// Every family, in declaration order.
    pub const ALL: [AdmissionFamily; 11] = [
        AdmissionFamily::WebhookRejections,
        AdmissionFamily::WebhookRequests,
        AdmissionFamily::WebhookDuration,
        AdmissionFamily::WebhookFailOpen,
        AdmissionFamily::MatchConditionErrors,
        AdmissionFamily::MatchConditionExclusions,
        AdmissionFamily::MatchConditionDuration,
        AdmissionFamily::PolicyChecks,
        AdmissionFamily::PolicyDuration,
        AdmissionFamily::MutatingPolicyChecks,
        AdmissionFamily::MutatingPolicyDuration,
    ];

    /// The metric family name on `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionFamily::WebhookRejections => "apiserver_admission_webhook_rejection_count",
            AdmissionFamily::WebhookRequests => "apiserver_admission_webhook_request_total",
            AdmissionFamily::WebhookDuration => {
                "apiserver_admission_webhook_admission_duration_seconds"
            }
            AdmissionFamily::WebhookFailOpen => "apiserver_admission_webhook_fail_open_count",
            AdmissionFamily::MatchConditionErrors => {
                "apiserver_admission_match_condition_evaluation_errors_total"
            }
            AdmissionFamily::MatchConditionExclusions => {
                "apiserver_admission_match_condition_exclusions_total"
            }
            AdmissionFamily::MatchConditionDuration => {
                "apiserver_admission_match_condition_evaluation_seconds"
            }
            AdmissionFamily::PolicyChecks => "apiserver_validating_admission_policy_check_total",
            AdmissionFamily::PolicyDuration => {
                "apiserver_validating_admission_policy_check_duration_seconds"
            }
            AdmissionFamily::MutatingPolicyChecks => {
                "apiserver_mutating_admission_policy_check_total"
            }
            AdmissionFamily::MutatingPolicyDuration => {
                "apiserver_mutating_admission_policy_check_duration_seconds"
            }
        }
    }

    /// The label names kube-apiserver gives the family (without `le`), sorted; before 1.31 the
    /// validating policy families had `state` instead of `error_type`.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            AdmissionFamily::WebhookRejections => {
                &["error_type", "name", "operation", "rejection_code", "type"]
            }
            AdmissionFamily::WebhookRequests => &["code", "name", "operation", "rejected", "type"],
            AdmissionFamily::WebhookDuration => &["name", "operation", "rejected", "type"],
            AdmissionFamily::WebhookFailOpen => &["name", "type"],
            AdmissionFamily::MatchConditionErrors
            | AdmissionFamily::MatchConditionExclusions
            | AdmissionFamily::MatchConditionDuration => &["kind", "name", "operation", "type"],
            AdmissionFamily::PolicyChecks | AdmissionFamily::PolicyDuration => &[
                "enforcement_action",
                "error_type",
                "policy",
                "policy_binding",
            ],
            AdmissionFamily::MutatingPolicyChecks | AdmissionFamily::MutatingPolicyDuration => {
                &["error_type", "policy", "policy_binding"]
            }
        }
    }

    /// Whether the family is a histogram (else a counter).
    pub fn is_histogram(self) -> bool {
        matches!(
            self,
            AdmissionFamily::WebhookDuration
                | AdmissionFamily::MatchConditionDuration
                | AdmissionFamily::PolicyDuration
                | AdmissionFamily::MutatingPolicyDuration
        )
    }

    /// The family called `name` on `/metrics`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Parses only the [`AdmissionFamily`] families of a `/metrics` text: [`parse_families`] with
/// their names, so a scrape pays for the few hundred admission lines rather than the whole text.
pub fn parse_admission(text: &str) -> Result<Exposition, ParseError> {
    let names = AdmissionFamily::ALL.map(AdmissionFamily::name);
    parse_families(text, &names)
}

/// One series: its family and its labels (without `le`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// The family.
    pub family: AdmissionFamily,
    /// The series labels as exposed (kube-apiserver's label names, plus any others present).
    pub labels: LabelSet,
}

/// One cumulative histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// The upper bound (`le`), `+Inf` for the last bucket.
    pub le: f64,
    /// Observations less than or equal to `le`.
    pub count: f64,
}

/// A histogram series' value in one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramValue {
    /// Cumulative buckets sorted by `le`.
    pub buckets: Vec<Bucket>,
    /// `_sum`.
    pub sum: f64,
    /// `_count`.
    pub count: f64,
}

/// Every admission webhook series of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AdmissionSnapshot {
    /// Counter series and their values.
    pub counters: BTreeMap<SeriesKey, f64>,
    /// Histogram series and their buckets, sum and count.
    pub histograms: BTreeMap<SeriesKey, HistogramValue>,
}

impl AdmissionSnapshot {
    /// The admission series of a parsed `/metrics`. Samples are taken from the families
    /// [`AdmissionFamily::name`] names, by their role in the family (a bucket without a float `le`
    /// is skipped).
    pub fn from_exposition(exposition: &Exposition) -> Self {
        let mut out = Self::default();
        for family in AdmissionFamily::ALL {
            let Some(f) = exposition.family(family.name()) else {
                continue;
            };
            for sample in &f.samples {
                out.ingest(family, f.role(sample), &sample.labels, sample.value);
            }
        }
        out.sort_buckets();
        out
    }

    /// The admission series of the text of one `/metrics` scrape: [`parse_admission`], then
    /// [`AdmissionSnapshot::from_exposition`]. The scrape path's entry point.
    pub fn from_text(text: &str) -> Result<Self, ParseError> {
        Ok(Self::from_exposition(&parse_admission(text)?))
    }

    /// The admission series a replay recorded: the same extraction from
    /// [`Metrics::samples`], so a replay charts like a cluster.
    pub fn from_metrics(metrics: &Metrics) -> Self {
        Self::from_samples(
            metrics
                .samples()
                .iter()
                .map(|s| (s.name.as_str(), s.labels.as_slice(), s.value)),
        )
    }

    /// The admission series of loose samples, each a sample name as exposed (a histogram's with
    /// its `_bucket`, `_sum` or `_count` suffix), its labels and its value: what a Prometheus
    /// query answers. Samples of other families are skipped.
    pub fn from_samples<'a>(
        samples: impl IntoIterator<Item = (&'a str, &'a [(String, String)], f64)>,
    ) -> Self {
        let mut out = Self::default();
        for (name, labels, value) in samples {
            let Some((family, role)) = AdmissionFamily::ALL.into_iter().find_map(|f| {
                let suffix = name.strip_prefix(f.name())?;
                let role = match (f.is_histogram(), suffix) {
                    (false, "") => SampleRole::Value,
                    (true, "_bucket") => SampleRole::Bucket,
                    (true, "_sum") => SampleRole::Sum,
                    (true, "_count") => SampleRole::Count,
                    _ => return None,
                };
                Some((f, role))
            }) else {
                continue;
            };
            out.ingest(family, role, labels, value);
        }
        out.sort_buckets();
        out
    }

    /// The same series, each labelled `instance="<instance>"` (replacing an `instance` label it
    /// had): one apiserver's scrape, kept apart from the others' in a [`super::MetricsHistory`].
    pub fn with_instance(self, instance: &str) -> Self {
        let relabel = |key: SeriesKey| SeriesKey {
            family: key.family,
            labels: LabelSet::new(
                key.labels
                    .0
                    .into_iter()
                    .filter(|(k, _)| k != INSTANCE_LABEL)
                    .chain([(INSTANCE_LABEL.to_string(), instance.to_string())]),
            ),
        };
        AdmissionSnapshot {
            counters: self
                .counters
                .into_iter()
                .map(|(k, v)| (relabel(k), v))
                .collect(),
            histograms: self
                .histograms
                .into_iter()
                .map(|(k, v)| (relabel(k), v))
                .collect(),
        }
    }

    /// Adds `other`'s series (a series in both keeps `other`'s value): the scrapes of several
    /// apiservers, labelled by [`AdmissionSnapshot::with_instance`], as one snapshot.
    pub fn merge(&mut self, other: AdmissionSnapshot) {
        self.counters.extend(other.counters);
        self.histograms.extend(other.histograms);
    }

    /// The values of the `instance` label its series carry, sorted (none for a scrape of one
    /// `/metrics` that was not labelled).
    pub fn instances(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .counters
            .keys()
            .chain(self.histograms.keys())
            .filter_map(|k| k.labels.get(INSTANCE_LABEL).map(str::to_string))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn ingest(
        &mut self,
        family: AdmissionFamily,
        role: SampleRole,
        labels: &[(String, String)],
        value: f64,
    ) {
        if !family.is_histogram() {
            if role == SampleRole::Value {
                let key = SeriesKey {
                    family,
                    labels: LabelSet::new(labels.iter().cloned()),
                };
                self.counters.insert(key, value);
            }
            return;
        }
        let key = SeriesKey {
            family,
            labels: LabelSet::new(labels.iter().filter(|(k, _)| k != "le").cloned()),
        };
        match role {
            SampleRole::Bucket => {
                let le = labels
                    .iter()
                    .find(|(k, _)| k == "le")
                    .and_then(|(_, v)| parse_go_float(v));
                if let Some(le) = le {
                    let h = self.histograms.entry(key).or_default();
                    h.buckets.push(Bucket { le, count: value });
                }
            }
            SampleRole::Sum => self.histograms.entry(key).or_default().sum = value,
            SampleRole::Count => self.histograms.entry(key).or_default().count = value,
            SampleRole::Value | SampleRole::Quantile => {}
        }
    }

    fn sort_buckets(&mut self) {
        for h in self.histograms.values_mut() {
            h.buckets.sort_by(|a, b| a.le.total_cmp(&b.le));
        }
    }

    /// The value of the counter series of `family` with exactly `labels` (any order).
    pub fn counter(&self, family: AdmissionFamily, labels: &[(&str, &str)]) -> Option<f64> {
        let key = SeriesKey {
            family,
            labels: LabelSet::from_pairs(labels),
        };
        self.counters.get(&key).copied()
    }

    /// The histogram series of `family` with exactly `labels` (any order, without `le`).
    pub fn histogram(
        &self,
        family: AdmissionFamily,
        labels: &[(&str, &str)],
    ) -> Option<&HistogramValue> {
        let key = SeriesKey {
            family,
            labels: LabelSet::from_pairs(labels),
        };
        self.histograms.get(&key)
    }

    /// The number of series.
    pub fn len(&self) -> usize {
        self.counters.len() + self.histograms.len()
    }

    /// Whether there is no admission series.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty() && self.histograms.is_empty()
    }
}

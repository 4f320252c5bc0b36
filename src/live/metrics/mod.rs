//! The apiserver's `/metrics`: parsing the exposition text and keeping the admission webhook
//! series over time.
//!
//! [`parse`] turns the text of one scrape into an [`Exposition`];
//! [`AdmissionSnapshot::from_exposition`] (or [`AdmissionSnapshot::from_metrics`] for a replay)
//! keeps its admission webhook series; [`AdmissionSnapshot::from_text`] does both for a scrape,
//! parsing only the admission families ([`parse_admission`]); [`MetricsHistory`] holds the latest scrapes and answers
//! rate and quantile queries over a window for the charts. No IO and no clock: scrape times are
//! inputs.

mod admission;
mod history;
mod parse;

pub use admission::{
    AdmissionFamily, AdmissionSnapshot, Bucket, HistogramValue, INSTANCE_LABEL, LabelSet,
    SeriesKey, parse_admission,
};
pub use history::{
    HistoryError, MetricsHistory, Point, QuantilePoint, QuantileSeries, RateSeries, Window,
    WindowEnd, histogram_quantile,
};
pub use parse::{
    Exposition, Family, MetricKind, ParseError, ParseErrorKind, Sample, SampleRole, parse,
    parse_exact, parse_families,
};

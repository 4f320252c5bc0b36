//! `apiserver_admission_webhook_rejection_count` over replay time: the cumulative count of each
//! webhook and `error_type` at the moments it grew, on the replay's own clock (the sum of the
//! requests' dispatch durations, in input order), so the same capture always draws the same chart.

use std::time::Duration;

use crate::metrics::Metrics;

/// One webhook and `error_type`, and its count as it grew.
#[derive(Debug, Clone, PartialEq)]
pub struct RejectionSeries {
    /// The webhook's name.
    pub name: String,
    /// `error_type` (`calling_webhook_error`, `apiserver_internal_error`, `no_error`).
    pub error_type: String,
    /// (replay time in seconds, cumulative count), one point per request that added to it.
    pub points: Vec<(f64, f64)>,
}

/// The rejection counts over replay time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RejectionTimeline {
    /// The replay clock: the dispatch durations so far.
    pub clock: Duration,
    /// One series per webhook and `error_type`, in order of first rejection.
    pub series: Vec<RejectionSeries>,
}

impl RejectionTimeline {
    /// Advances the clock by one request's dispatch and adds the rejections its metrics record.
    pub fn record(&mut self, elapsed: Duration, metrics: Option<&Metrics>) {
        self.clock += elapsed;
        let Some(m) = metrics else {
            return;
        };
        let x = self.clock.as_secs_f64();
        for ((name, error_type), v) in super::model::rejections(m) {
            if v == 0.0 {
                continue;
            }
            let at = self
                .series
                .iter()
                .position(|s| s.name == name && s.error_type == error_type);
            let i = match at {
                Some(i) => i,
                None => {
                    self.series.push(RejectionSeries {
                        name,
                        error_type,
                        points: Vec::new(),
                    });
                    self.series.len() - 1
                }
            };
            let s = &mut self.series[i];
            let total = s.points.last().map_or(0.0, |p| p.1) + v;
            s.points.push((x, total));
        }
    }
}

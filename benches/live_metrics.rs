//! The live `/metrics` path: parsing a real kube-apiserver v1.32 scrape (1.4 MB, 10,851 samples)
//! with the prometheus-parse fast path, with the exact lexer alone and for its admission families
//! only (the scrape path), extracting its admission series, and a history of an hour of 5-second
//! scrapes (720) of 50 webhooks: pushing a scrape, and the rate and quantile queries a chart
//! makes over 5 minutes and over the hour.
//!
//! `cargo bench --bench live_metrics`

use std::time::{Duration, SystemTime};

use divan::Bencher;
use divan::counter::BytesCount;
use hookscope::live::metrics::{
    AdmissionFamily, AdmissionSnapshot, Bucket, HistogramValue, LabelSet, MetricsHistory,
    SeriesKey, Window, parse, parse_admission, parse_exact,
};

const REAL: &str = include_str!("../tests/fixtures/oracle-v1.32/metrics.txt");

const WEBHOOKS: usize = 50;
const SCRAPES: usize = 720;
const LES: [f64; 9] = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0, f64::INFINITY];

fn main() {
    divan::main();
}

#[divan::bench]
fn parse_real_scrape(bencher: Bencher) {
    bencher
        .counter(BytesCount::of_str(REAL))
        .bench(|| parse(divan::black_box(REAL)));
}

#[divan::bench]
fn parse_real_scrape_exact_lexer_only(bencher: Bencher) {
    bencher
        .counter(BytesCount::of_str(REAL))
        .bench(|| parse_exact(divan::black_box(REAL)));
}

#[divan::bench]
fn parse_real_scrape_admission_families_only(bencher: Bencher) {
    bencher
        .counter(BytesCount::of_str(REAL))
        .bench(|| parse_admission(divan::black_box(REAL)));
}

#[divan::bench]
fn admission_snapshot_from_real_scrape_text(bencher: Bencher) {
    bencher
        .counter(BytesCount::of_str(REAL))
        .bench(|| AdmissionSnapshot::from_text(divan::black_box(REAL)));
}

#[divan::bench]
fn admission_series_of_real_scrape(bencher: Bencher) {
    let exposition = parse(REAL).expect("the fixture parses");
    bencher.bench(|| AdmissionSnapshot::from_exposition(divan::black_box(&exposition)));
}

fn key(family: AdmissionFamily, pairs: &[(&str, &str)]) -> SeriesKey {
    SeriesKey {
        family,
        labels: LabelSet::from_pairs(pairs),
    }
}

/// Scrape `i` of 50 webhooks: request counters for codes 200 and 403, a rejection counter, and
/// a latency histogram per rejected=true/false (250 series), growing at steady rates.
fn scrape(i: usize) -> AdmissionSnapshot {
    let mut s = AdmissionSnapshot::default();
    let n = i as f64;
    for w in 0..WEBHOOKS {
        let name = format!("webhook-{w}.example.com");
        let base = [
            ("name", name.as_str()),
            ("operation", "CREATE"),
            ("type", "validating"),
        ];
        for (code, rejected, per) in [("200", "false", 7.0), ("403", "true", 1.0)] {
            let mut labels = base.to_vec();
            labels.extend([("code", code), ("rejected", rejected)]);
            s.counters
                .insert(key(AdmissionFamily::WebhookRequests, &labels), n * per);
            let mut labels = base.to_vec();
            labels.push(("rejected", rejected));
            let count = n * per;
            s.histograms.insert(
                key(AdmissionFamily::WebhookDuration, &labels),
                HistogramValue {
                    buckets: LES
                        .iter()
                        .enumerate()
                        .map(|(b, &le)| Bucket {
                            le,
                            count: (count * (b + 1) as f64 / LES.len() as f64).floor(),
                        })
                        .collect(),
                    sum: count * 0.04,
                    count,
                },
            );
        }
        let mut labels = base.to_vec();
        labels.extend([("error_type", "no_error"), ("rejection_code", "403")]);
        s.counters
            .insert(key(AdmissionFamily::WebhookRejections, &labels), n);
    }
    s
}

fn at(i: usize) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + 5 * i as u64)
}

fn full_history() -> MetricsHistory {
    let mut h = MetricsHistory::new(SCRAPES);
    for i in 0..SCRAPES {
        h.push(at(i), scrape(i)).expect("in order");
    }
    h
}

#[divan::bench]
fn history_push_into_full_history(bencher: Bencher) {
    let history = full_history();
    let next = scrape(SCRAPES);
    bencher
        .with_inputs(|| (history.clone(), next.clone()))
        .bench_local_values(|(mut h, s)| {
            h.push(at(SCRAPES), s).expect("in order");
            h
        });
}

#[divan::bench(args = [300, 3600])]
fn history_rates_per_webhook_and_code(bencher: Bencher, window_secs: u64) {
    let history = full_history();
    let window = Window::latest(Duration::from_secs(window_secs));
    bencher.bench(|| {
        history.rates(
            &window,
            AdmissionFamily::WebhookRequests,
            divan::black_box(&["name", "code"]),
        )
    });
}

#[divan::bench(args = [300, 3600])]
fn history_p50_p90_p99_per_webhook(bencher: Bencher, window_secs: u64) {
    let history = full_history();
    let window = Window::latest(Duration::from_secs(window_secs));
    bencher.bench(|| {
        history.quantiles(
            &window,
            AdmissionFamily::WebhookDuration,
            divan::black_box(&["name"]),
            &[0.5, 0.9, 0.99],
        )
    });
}

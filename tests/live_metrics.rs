//! The `/metrics` parser against a real kube-apiserver v1.32 scrape, the project's own exporter
//! and adversarial lines; admission series extraction; rates and quantiles over a history.

use std::time::{Duration, SystemTime};

use hookscope::api::Operation;
use hookscope::live::metrics::{
    AdmissionFamily, AdmissionSnapshot, Bucket, Exposition, HistoryError, LabelSet, MetricKind,
    MetricsHistory, ParseErrorKind, SampleRole, Window, histogram_quantile, parse, parse_admission,
    parse_exact, parse_families,
};
use hookscope::metrics::{Metrics, RejectionErrorType, WebhookType};
use proptest::prelude::*;

const REAL: &str = include_str!("fixtures/oracle-v1.32/metrics.txt");

/// One sample line read the obvious way: a character walk that knows only quotes and
/// backslashes. Good for text whose label values hold no escapes (checked by the caller).
struct RefLine {
    name: String,
    labels: Vec<(String, String)>,
    value: String,
}

fn reference_line(line: &str) -> RefLine {
    let name_end = line.find(['{', ' ']).expect("a name");
    let name = line[..name_end].to_owned();
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        let mut end = 0;
        for (i, ch) in inner.char_indices() {
            match (in_value, ch) {
                (false, '}') => {
                    end = i + 1;
                    break;
                }
                (false, '"') => in_value = true,
                (false, '=' | ',') => {}
                (false, c) => key.push(c),
                (true, '"') => {
                    in_value = false;
                    labels.push((std::mem::take(&mut key), std::mem::take(&mut value)));
                }
                (true, c) => value.push(c),
            }
        }
        rest = &inner[end..];
    }
    let value = rest.trim().to_owned();
    RefLine {
        name,
        labels,
        value,
    }
}

/// Equality that counts NaN values as equal.
fn assert_same(a: &Exposition, b: &Exposition) {
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

fn same_value(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

#[test]
fn every_sample_line_of_a_real_scrape_is_represented_exactly_once() {
    assert!(
        !REAL.contains('\\'),
        "the reference reader assumes no escapes"
    );
    let sample_lines: Vec<&str> = REAL
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(sample_lines.len(), 10851);
    let exposition = parse(REAL).expect("the real scrape parses");
    assert_eq!(exposition.sample_count(), sample_lines.len());

    // The scrape is grouped by family, so the parse's order is the file's order.
    for (line, (family, sample)) in sample_lines.iter().zip(exposition.samples()) {
        let want = reference_line(line);
        assert_eq!(sample.name, want.name, "{line}");
        assert_eq!(sample.labels, want.labels, "{line}");
        let value: f64 = want.value.parse().expect("a float");
        assert!(same_value(sample.value, value), "{line}");
        assert_eq!(sample.timestamp_ms, None);
        assert!(sample.name.starts_with(&family.name), "{line}");
    }

    // Every family once, with the TYPE and HELP of its header lines.
    let types: Vec<(&str, &str)> = REAL
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    assert_eq!(exposition.families.len(), types.len());
    for (family, (name, kind)) in exposition.families.iter().zip(&types) {
        assert_eq!(family.name, *name);
        assert_eq!(family.kind.as_str(), *kind);
        let help = REAL
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")));
        assert_eq!(family.help.as_deref(), help);
    }
}

#[test]
fn every_admission_line_has_its_labels_values_and_role() {
    let exposition = parse(REAL).expect("parses");
    let lines: Vec<&str> = REAL
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_"))
        .collect();
    assert_eq!(lines.len(), 476);
    for line in lines {
        let want = reference_line(line);
        let matches: Vec<_> = exposition
            .samples()
            .filter(|(_, s)| s.name == want.name && s.labels == want.labels)
            .collect();
        assert_eq!(matches.len(), 1, "{line}");
        let (family, sample) = matches[0];
        assert_eq!(sample.value, want.value.parse::<f64>().expect("float"));
        // The family and role from the file's TYPE lines: the exact name if it is declared, else
        // the histogram or summary the suffix points to.
        let declared = |name: &str| {
            REAL.lines()
                .filter_map(|l| l.strip_prefix("# TYPE "))
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        };
        let (base, kind, expected) = match declared(&want.name) {
            Some("summary") => (want.name.as_str(), "summary", SampleRole::Quantile),
            Some(kind) => (want.name.as_str(), kind, SampleRole::Value),
            None => [
                ("_bucket", SampleRole::Bucket),
                ("_sum", SampleRole::Sum),
                ("_count", SampleRole::Count),
            ]
            .into_iter()
            .find_map(|(suffix, role)| {
                let base = want.name.strip_suffix(suffix)?;
                Some((base, declared(base)?, role))
            })
            .expect("a declared family"),
        };
        assert_eq!((family.name.as_str(), family.kind.as_str()), (base, kind));
        let role = family.role(sample);
        assert_eq!(role, expected, "{line}");
    }
    let summary = exposition
        .family("apiserver_admission_step_admission_duration_seconds_summary")
        .expect("summary family");
    assert_eq!(summary.kind, MetricKind::Summary);
    assert_eq!(summary.samples.len(), 25);
}

#[test]
fn the_fast_path_and_the_exact_lexer_agree_on_the_real_scrape() {
    assert_same(
        &parse(REAL).expect("parses"),
        &parse_exact(REAL).expect("parses"),
    );
}

#[test]
fn admission_series_of_the_real_scrape() {
    let snapshot = AdmissionSnapshot::from_exposition(&parse(REAL).expect("parses"));
    assert_eq!(snapshot.counters.len(), 4);
    assert_eq!(snapshot.histograms.len(), 3);
    assert_eq!(
        snapshot.counter(
            AdmissionFamily::WebhookRequests,
            &[
                ("code", "403"),
                ("name", "deny.oracle.test"),
                ("operation", "CREATE"),
                ("rejected", "true"),
                ("type", "validating"),
            ],
        ),
        Some(4.0)
    );
    assert_eq!(
        snapshot.counter(
            AdmissionFamily::WebhookRejections,
            &[
                ("type", "validating"),
                ("error_type", "no_error"),
                ("name", "deny.oracle.test"),
                ("operation", "CREATE"),
                ("rejection_code", "403"),
            ],
        ),
        Some(4.0)
    );
    let h = snapshot
        .histogram(
            AdmissionFamily::WebhookDuration,
            &[
                ("name", "add-label.oracle.test"),
                ("operation", "CREATE"),
                ("rejected", "false"),
                ("type", "admit"),
            ],
        )
        .expect("add-label's histogram");
    let les: Vec<f64> = h.buckets.iter().map(|b| b.le).collect();
    assert_eq!(
        les,
        [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0, f64::INFINITY]
    );
    assert_eq!(h.buckets[0].count, 4.0);
    assert_eq!(h.buckets[8].count, 12.0);
    assert_eq!(h.count, 12.0);
    assert_eq!(h.sum, 0.36420139199999996);
}

/// The families of `full` whose names start with one of `prefixes`, in order.
fn only(full: &Exposition, prefixes: &[&str]) -> Exposition {
    Exposition {
        families: full
            .families
            .iter()
            .filter(|f| prefixes.iter().any(|p| f.name.starts_with(p)))
            .cloned()
            .collect(),
    }
}

#[test]
fn the_admission_families_of_the_real_scrape_parse_alone_exactly_as_in_the_full_parse() {
    let full = parse(REAL).expect("parses");
    let admission = parse_families(REAL, &["apiserver_admission_"]).expect("parses");
    let want = only(&full, &["apiserver_admission_"]);
    // Sample by sample: every sample line of the file with the prefix, and nothing else.
    let lines = REAL
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_"))
        .count();
    assert_eq!(admission.sample_count(), lines);
    assert_eq!(want.sample_count(), lines);
    assert_eq!(admission.families.len(), want.families.len());
    for (got, want) in admission.families.iter().zip(&want.families) {
        assert_eq!(
            (&got.name, got.kind, &got.help),
            (&want.name, want.kind, &want.help)
        );
        assert_eq!(got.samples.len(), want.samples.len(), "{}", want.name);
        for (g, w) in got.samples.iter().zip(&want.samples) {
            assert_eq!((&g.name, &g.labels), (&w.name, &w.labels));
            assert!(same_value(g.value, w.value), "{}", w.name);
            assert_eq!(g.timestamp_ms, w.timestamp_ms);
        }
    }

    // The charted families alone, and the snapshot the scrape path builds from them.
    let names = AdmissionFamily::ALL.map(AdmissionFamily::name);
    let charted = parse_admission(REAL).expect("parses");
    assert_same(&charted, &only(&full, &names));
    assert_eq!(charted.families.len(), 3, "the families the scrape holds");
    let snapshot = AdmissionSnapshot::from_text(REAL).expect("parses");
    assert_eq!(snapshot, AdmissionSnapshot::from_exposition(&full));
    assert_eq!(snapshot.len(), 7);
}

#[test]
fn a_filtered_parse_is_the_full_parse_restricted_to_its_families() {
    let full = parse(REAL).expect("parses");
    assert_same(&parse_families(REAL, &[""]).expect("parses"), &full);
    for prefixes in [
        &["go_", "process_"][..],
        &["apiserver_request"],
        &["nothing_"],
    ] {
        assert_same(
            &parse_families(REAL, prefixes).expect("parses"),
            &only(&full, prefixes),
        );
    }

    // A `_bucket` sample belongs to the histogram its `# TYPE` declares, even when only the
    // bucket's own name is asked for; HELP lines are found behind blanks.
    let text = "# HELP h_sum x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 2\nh_count 1\n \t#  HELP  h_bucketed y\nh_bucketed 3\n";
    let full = parse(text).expect("parses");
    for prefixes in [&["h_bucket"][..], &["h_s"], &["h"], &["h_sum"]] {
        let got = parse_families(text, prefixes).expect("parses");
        assert_same(&got, &only(&full, prefixes));
    }
    let bucketed = parse_families(text, &["h_bucket"]).expect("parses");
    assert_eq!(bucketed.families.len(), 1);
    assert_eq!(bucketed.families[0].help.as_deref(), Some("y"));
    assert_eq!(bucketed.families[0].samples[0].value, 3.0);
}

#[test]
fn a_filtered_parse_checks_the_lines_it_reads_and_names_them_in_the_whole_text() {
    let text = "a{b=\"\\x\"} 1\n# TYPE a_x counter\na_x{q=\"1\" r} 1\n";
    let skipped = parse_families(text, &["c"]).expect("the invalid lines are not read");
    assert!(skipped.families.is_empty());
    let err = parse_families(text, &["a_"]).expect_err("a_x's line is invalid");
    assert_eq!(
        (err.line, err.kind),
        (3, ParseErrorKind::ExpectedLabelSeparator("q".into()))
    );
    let err = parse_families("x 1\n# TYPE y gauges\n", &["x"]).expect_err("TYPE lines are read");
    assert_eq!(
        (err.line, err.kind),
        (2, ParseErrorKind::UnknownType("gauges".into()))
    );
    assert_eq!(parse_families(text, &["a"]).expect_err("a's line").line, 1);
}

/// Webhook names that stress the exposition: every character the format escapes or that
/// prometheus-parse mishandles.
const AWKWARD_NAMES: [&str; 5] = [
    "plain.example.com",
    "sel=app=web,tier=db",
    "quote\"and\\slash",
    "brace{x}.example.com",
    "line\nbreak",
];

fn recorded() -> Metrics {
    let mut m = Metrics::new();
    for (i, name) in AWKWARD_NAMES.iter().enumerate() {
        let elapsed = Duration::from_micros(1500 + 40_000 * i as u64);
        m.observe_webhook(
            name,
            WebhookType::Admit,
            Operation::Create,
            false,
            200,
            elapsed,
        );
        m.observe_webhook(
            name,
            WebhookType::Validating,
            Operation::Update,
            true,
            403,
            elapsed * 3,
        );
        m.observe_webhook_rejection(
            name,
            WebhookType::Validating,
            Operation::Update,
            RejectionErrorType::NoError,
            403,
        );
        m.observe_webhook_fail_open(name, WebhookType::Admit);
        m.observe_match_condition_error(name, WebhookType::Validating, Operation::Delete);
        m.observe_match_condition_exclusion(name, WebhookType::Admit, Operation::Create);
        m.observe_match_condition_evaluation(
            name,
            WebhookType::Admit,
            Operation::Create,
            elapsed / 7,
        );
    }
    m.observe_controller(
        WebhookType::Admit,
        Operation::Create,
        false,
        Duration::from_millis(3),
    );
    m.observe_step(
        WebhookType::Admit,
        Operation::Create,
        false,
        Duration::from_millis(4),
    );
    m
}

#[test]
fn the_projects_own_exposition_parses_back_to_the_same_samples() {
    let m = recorded();
    let text = m.encode_text();
    let exposition = parse(&text).expect("our exporter's text parses");
    let parsed: Vec<_> = exposition.samples().map(|(_, s)| s).collect();
    let samples = m.samples();
    assert_eq!(parsed.len(), samples.len());
    for (got, want) in parsed.iter().zip(&samples) {
        assert_eq!(got.name, want.name);
        assert_eq!(got.labels, want.labels);
        assert!(same_value(got.value, want.value), "{}", want.name);
    }
    assert_same(&exposition, &parse_exact(&text).expect("parses"));
    let from_text = AdmissionSnapshot::from_exposition(&exposition);
    assert_eq!(from_text, AdmissionSnapshot::from_metrics(&m));
    // Per webhook: 2 request, 1 rejection, 1 fail-open, 1 matchCondition error and 1 exclusion
    // counter; 2 latency and 1 matchCondition latency histogram.
    assert_eq!(from_text.len(), AWKWARD_NAMES.len() * 9);
    let rejections = from_text.counter(
        AdmissionFamily::WebhookRejections,
        &[
            ("error_type", "no_error"),
            ("name", "sel=app=web,tier=db"),
            ("operation", "UPDATE"),
            ("rejection_code", "403"),
            ("type", "validating"),
        ],
    );
    assert_eq!(rejections, Some(1.0));
}

fn one(text: &str) -> hookscope::live::metrics::Sample {
    let exposition = parse(text).expect("parses");
    assert_same(&exposition, &parse_exact(text).expect("parses exactly"));
    let mut samples = exposition.samples().map(|(_, s)| s.clone());
    let sample = samples.next().expect("one sample");
    assert!(samples.next().is_none());
    sample
}

/// What prometheus-parse alone makes of `text` (its clock stamps the samples; unused here).
fn with_prometheus_parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("no io error")
}

fn pairs(labels: &[(&str, &str)]) -> Vec<(String, String)> {
    labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn label_values_with_equals_signs_are_kept() {
    let line = r#"a{sel="app=web",b="c"} 1"#;
    assert_eq!(
        with_prometheus_parse(line).samples[0].labels.get("sel"),
        None,
        "prometheus-parse drops it"
    );
    assert_eq!(one(line).labels, pairs(&[("sel", "app=web"), ("b", "c")]));
}

#[test]
fn label_values_with_commas_are_kept_whole() {
    let line = r#"a{x="1,2",y="z"} 1"#;
    assert_eq!(
        with_prometheus_parse(line).samples[0].labels.get("x"),
        Some("1"),
        "prometheus-parse truncates it"
    );
    assert_eq!(one(line).labels, pairs(&[("x", "1,2"), ("y", "z")]));
}

#[test]
fn escapes_are_unescaped() {
    let line = r#"a{msg="say \"hi\"",path="C:\\DIR",err="two\nlines"} 1"#;
    assert_eq!(
        with_prometheus_parse(line).samples[0].labels.get("msg"),
        Some(r#"say \"hi\"#),
        "prometheus-parse leaves escapes in"
    );
    assert_eq!(
        one(line).labels,
        pairs(&[
            ("msg", "say \"hi\""),
            ("path", "C:\\DIR"),
            ("err", "two\nlines")
        ])
    );
}

#[test]
fn lines_with_braces_in_values_or_colons_in_names_are_not_dropped() {
    for line in [r#"a{brace="{x}"} 1"#, "ns:rec:rate5m 1", "a{} 1"] {
        assert!(
            with_prometheus_parse(line).samples.is_empty(),
            "prometheus-parse drops {line}"
        );
    }
    assert_eq!(
        one(r#"a{brace="{x}"} 1"#).labels,
        pairs(&[("brace", "{x}")])
    );
    let text = "# HELP ns:rec:rate5m A recording.\n# TYPE ns:rec:rate5m gauge\nns:rec:rate5m{job=\"x\"} 2.5\n";
    let exposition = parse(text).expect("parses");
    let family = exposition.family("ns:rec:rate5m").expect("family");
    assert_eq!(family.kind, MetricKind::Gauge);
    assert_eq!(family.help.as_deref(), Some("A recording."));
    assert_eq!(family.samples[0].value, 2.5);
    assert_eq!(one("a{} 1").labels, vec![]);
}

#[test]
fn sums_and_counts_belong_to_their_histogram_or_summary() {
    let text = "\
# TYPE h histogram
h_bucket{le=\"1\"} 1
h_bucket{le=\"+Inf\"} 2
h_sum 3.5
h_count 2
# TYPE s summary
s{quantile=\"0.5\"} 0.1
s_sum 4
s_count 9
# TYPE c_count counter
c_count 7
";
    let e = parse(text).expect("parses");
    assert_same(&e, &parse_exact(text).expect("parses"));
    let roles = |name: &str| -> Vec<(String, SampleRole)> {
        let f = e.family(name).expect("family");
        f.samples
            .iter()
            .map(|s| (s.name.clone(), f.role(s)))
            .collect()
    };
    assert_eq!(
        roles("h"),
        [
            ("h_bucket".to_owned(), SampleRole::Bucket),
            ("h_bucket".to_owned(), SampleRole::Bucket),
            ("h_sum".to_owned(), SampleRole::Sum),
            ("h_count".to_owned(), SampleRole::Count),
        ]
    );
    assert_eq!(
        roles("s"),
        [
            ("s".to_owned(), SampleRole::Quantile),
            ("s_sum".to_owned(), SampleRole::Sum),
            ("s_count".to_owned(), SampleRole::Count),
        ]
    );
    assert_eq!(
        roles("c_count"),
        [("c_count".to_owned(), SampleRole::Value)]
    );
    assert_eq!(e.families.len(), 3);
}

#[test]
fn label_order_values_and_timestamps_are_as_written() {
    let s = one(r#"a{z="1",a="2",m="3"} -Inf 1700000000123"#);
    assert_eq!(s.labels, pairs(&[("z", "1"), ("a", "2"), ("m", "3")]));
    assert_eq!(s.value, f64::NEG_INFINITY);
    assert_eq!(s.timestamp_ms, Some(1_700_000_000_123));
    assert!(one("a NaN").value.is_nan());
    assert_eq!(one("a +Inf").value, f64::INFINITY);
    assert_eq!(one("a 1e+06").timestamp_ms, None);
    let blanks = one("  a { b = \"c\" , d=\"e\", }\t2   -5  ");
    assert_eq!(blanks.labels, pairs(&[("b", "c"), ("d", "e")]));
    assert_eq!((blanks.value, blanks.timestamp_ms), (2.0, Some(-5)));
}

#[test]
fn help_text_is_unescaped_and_other_comments_ignored() {
    let text = "# a comment\n# HELP a One \\\\ two\\nthree\n#TYPE a counter\na 1\n";
    let e = parse(text).expect("parses");
    let f = e.family("a").expect("family");
    assert_eq!(f.help.as_deref(), Some("One \\ two\nthree"));
    assert_eq!(f.kind, MetricKind::Counter);
}

#[test]
fn invalid_lines_fail_with_their_line_number() {
    let cases: [(&str, ParseErrorKind); 13] = [
        ("a{b=\"\\x\"} 1", ParseErrorKind::InvalidEscape('x')),
        (
            "a{b=\"c} 1",
            ParseErrorKind::UnterminatedLabelValue("b".into()),
        ),
        (
            "a{b=\"c\",b=\"d\"} 1",
            ParseErrorKind::DuplicateLabel {
                metric: "a".into(),
                label: "b".into(),
            },
        ),
        ("a{b=c} 1", ParseErrorKind::ExpectedLabelValue("b".into())),
        ("a{1=\"c\"} 1", ParseErrorKind::InvalidLabelName("a".into())),
        (
            "a{b=\"c\" d=\"e\"} 1",
            ParseErrorKind::ExpectedLabelSeparator("b".into()),
        ),
        ("a", ParseErrorKind::MissingValue("a".into())),
        ("a one", ParseErrorKind::InvalidValue("one".into())),
        ("a 1 now", ParseErrorKind::InvalidTimestamp("now".into())),
        ("a 1 2 3", ParseErrorKind::TrailingCharacters("3".into())),
        (
            "# TYPE a gauges",
            ParseErrorKind::UnknownType("gauges".into()),
        ),
        ("9a 1", ParseErrorKind::InvalidMetricName),
        (
            "# TYPE h histogram\nh_bucket{le=\"x\"} 1",
            ParseErrorKind::InvalidBound {
                label: "le".into(),
                value: "x".into(),
            },
        ),
    ];
    for (text, kind) in cases {
        let text = format!("ok 1\n{text}\n");
        let err = parse(&text).expect_err(&text);
        let line = if text.contains("histogram") { 3 } else { 2 };
        assert_eq!((err.line, &err.kind), (line, &kind), "{text}");
        assert_eq!(parse_exact(&text).expect_err(&text), err);
    }
    let twice = parse("# TYPE a counter\n# TYPE a gauge\n").expect_err("two TYPEs");
    assert_eq!(twice.kind, ParseErrorKind::DuplicateType("a".into()));
    let late = parse("a 1\n# TYPE a counter\n").expect_err("TYPE after samples");
    assert_eq!(
        (late.line, late.kind),
        (2, ParseErrorKind::DuplicateType("a".into()))
    );
    let help = parse("# HELP a x\n# HELP a y\n").expect_err("two HELPs");
    assert_eq!(
        help.to_string(),
        "metrics text line 2: second HELP line for metric name \"a\""
    );
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

proptest! {
    #[test]
    fn any_label_value_round_trips(
        values in prop::collection::vec("[a-z=,{}\"\\\\\n :.#]{0,12}", 1..4),
        value in prop_oneof![Just(f64::NAN), Just(f64::INFINITY), any::<f64>()],
    ) {
        let labels: Vec<(String, String)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("l{i}"), v.clone()))
            .collect();
        let body: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let text = format!("m{{{}}} {value:?}\n", body.join(","));
        let fast = parse(&text).expect("parses");
        prop_assert_eq!(format!("{fast:?}"), format!("{:?}", parse_exact(&text).expect("parses")));
        let s = &fast.families[0].samples[0];
        prop_assert_eq!(&s.labels, &labels);
        prop_assert!(same_value(s.value, value));
    }
}

// History.

const WEBHOOK: AdmissionFamily = AdmissionFamily::WebhookRequests;

fn t(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn requests(series: &[(&str, &str, f64)]) -> AdmissionSnapshot {
    let mut s = AdmissionSnapshot::default();
    for &(name, code, v) in series {
        let labels = LabelSet::from_pairs(&[
            ("code", code),
            ("name", name),
            ("operation", "CREATE"),
            ("rejected", if code == "200" { "false" } else { "true" }),
            ("type", "validating"),
        ]);
        s.counters.insert(
            hookscope::live::metrics::SeriesKey {
                family: WEBHOOK,
                labels,
            },
            v,
        );
    }
    s
}

#[test]
fn rates_handle_resets_new_series_and_grouping() {
    let mut h = MetricsHistory::new(100);
    let scrapes = [
        (0, requests(&[("a", "200", 10.0)])),
        (10, requests(&[("a", "200", 30.0), ("a", "403", 5.0)])),
        // apiserver restart: a's 200 series resets to 4
        (20, requests(&[("a", "200", 4.0), ("b", "200", 1.0)])),
        (
            30,
            requests(&[("a", "200", 14.0), ("a", "403", 6.0), ("b", "200", 1.0)]),
        ),
    ];
    for (at, snap) in scrapes {
        h.push(t(at), snap).expect("in order");
    }
    let window = Window::latest(Duration::from_secs(60));
    let per_webhook = h.rates(&window, WEBHOOK, &["name"]);
    assert_eq!(per_webhook.len(), 2);
    let a = &per_webhook[0];
    assert_eq!(a.labels, LabelSet::from_pairs(&[("name", "a")]));
    // 200: +20, reset → +4, +10; 403: appears with 5 (counted from 0), absent, 6 (+1)
    assert_eq!(a.increase, 20.0 + 4.0 + 10.0 + 5.0 + 1.0);
    assert_eq!(a.rate, Some(40.0 / 30.0));
    let values: Vec<f64> = a.points.iter().map(|p| p.value).collect();
    assert_eq!(values, [2.5, 0.4, 1.1]);
    let offsets: Vec<f64> = a.points.iter().map(|p| p.offset_secs).collect();
    assert_eq!(offsets, [-20.0, -10.0, 0.0]);
    assert_eq!(per_webhook[1].increase, 1.0);

    let per_code = h.rates(&window, WEBHOOK, &["name", "code"]);
    let keys: Vec<(Option<&str>, Option<&str>)> = per_code
        .iter()
        .map(|r| (r.labels.get("name"), r.labels.get("code")))
        .collect();
    assert_eq!(
        keys,
        [
            (Some("a"), Some("200")),
            (Some("b"), Some("200")),
            (Some("a"), Some("403"))
        ],
        "sorted by label set, labels by name"
    );
    assert_eq!(per_code[2].increase, 6.0);
    let total = h.rates(&window, WEBHOOK, &[]);
    assert_eq!(total.len(), 1);
    assert_eq!(total[0].increase, 41.0);
}

#[test]
fn windows_end_at_the_latest_or_a_paused_scrape_and_the_history_is_bounded() {
    let mut h = MetricsHistory::new(3);
    for i in 0..5u64 {
        h.push(t(i * 10), requests(&[("a", "200", (i * i) as f64)]))
            .expect("in order");
    }
    assert_eq!(h.len(), 3);
    assert_eq!(h.times().collect::<Vec<_>>(), [t(20), t(30), t(40)]);
    assert_eq!(
        h.push(t(40), AdmissionSnapshot::default()),
        Err(HistoryError::OutOfOrder {
            at: t(40),
            latest: t(40)
        })
    );
    // 20..40: 4 → 9 → 16
    let all = h.rates(
        &Window::latest(Duration::from_secs(3600)),
        WEBHOOK,
        &["name"],
    );
    assert_eq!(all[0].increase, 12.0);
    let last = h.rates(&Window::latest(Duration::from_secs(10)), WEBHOOK, &["name"]);
    assert_eq!((last[0].increase, last[0].rate), (7.0, Some(0.7)));
    let paused = h.rates(
        &Window::paused_at(Duration::from_secs(15), t(35)),
        WEBHOOK,
        &["name"],
    );
    assert_eq!((paused[0].increase, paused[0].rate), (5.0, Some(0.5)));
    assert_eq!(paused[0].points[0].offset_secs, -5.0);
    let single = h.rates(&Window::latest(Duration::ZERO), WEBHOOK, &["name"]);
    assert_eq!((single[0].increase, single[0].rate), (0.0, None));
    assert!(single[0].points.is_empty());
    let before = h.rates(
        &Window::paused_at(Duration::from_secs(5), t(0)),
        WEBHOOK,
        &["name"],
    );
    assert!(before.is_empty());
}

fn durations(name: &str, buckets: &[f64], sum: f64) -> AdmissionSnapshot {
    let les = [0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0, f64::INFINITY];
    let mut s = AdmissionSnapshot::default();
    s.histograms.insert(
        hookscope::live::metrics::SeriesKey {
            family: AdmissionFamily::WebhookDuration,
            labels: LabelSet::from_pairs(&[
                ("name", name),
                ("operation", "CREATE"),
                ("rejected", "false"),
                ("type", "admit"),
            ]),
        },
        hookscope::live::metrics::HistogramValue {
            buckets: les
                .iter()
                .zip(buckets)
                .map(|(&le, &count)| Bucket { le, count })
                .collect(),
            sum,
            count: buckets[8],
        },
    );
    s
}

#[test]
fn quantiles_come_from_bucket_increases_over_the_window() {
    let mut h = MetricsHistory::new(10);
    let c0 = [0.0, 0.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0, 10.0];
    // +10 observations in (0.1, 0.5], +10 above 25 s
    let c1 = [0.0, 0.0, 10.0, 20.0, 20.0, 20.0, 20.0, 20.0, 30.0];
    h.push(t(0), durations("a", &c0, 1.0)).expect("push");
    h.push(t(10), durations("a", &c1, 301.0)).expect("push");
    h.push(t(20), durations("a", &c1, 301.0)).expect("push");
    let window = Window::latest(Duration::from_secs(60));
    let q = h.quantiles(
        &window,
        AdmissionFamily::WebhookDuration,
        &["name"],
        &[0.25, 0.5, 0.9],
    );
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].observations, 20.0);
    assert_eq!(q[0].mean, Some(15.0));
    // rank 5 of 10 in (0.1, 0.5] → 0.3; rank 10 → 0.5; rank 18 → in +Inf → 25
    assert_eq!(q[0].quantiles, [0.30000000000000004, 0.5, 25.0]);
    assert_eq!(q[0].points[0].values, q[0].quantiles);
    assert!(
        q[0].points[1].values.iter().all(|v| v.is_nan()),
        "empty interval"
    );
    // Rates of a histogram family count observations.
    let r = h.rates(&window, AdmissionFamily::WebhookDuration, &["name"]);
    assert_eq!(r[0].rate, Some(1.0));
    assert!(
        h.quantiles(&window, AdmissionFamily::WebhookRequests, &[], &[0.5])
            .is_empty()
    );
}

#[test]
fn a_histogram_reset_counts_its_new_observations() {
    let mut h = MetricsHistory::new(10);
    let before = [0.0, 0.0, 10.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0];
    let after = [0.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0];
    h.push(t(0), durations("a", &before, 9.0)).expect("push");
    h.push(t(10), durations("a", &after, 0.04)).expect("push");
    let q = h.quantiles(
        &Window::latest(Duration::from_secs(60)),
        AdmissionFamily::WebhookDuration,
        &[],
        &[0.5],
    );
    assert_eq!(q[0].observations, 4.0);
    // rank 2 of 4 in (0.005, 0.025]
    assert_eq!(q[0].quantiles, [0.015]);
}

#[test]
fn histogram_quantile_follows_promql() {
    let b = |pairs: &[(f64, f64)]| -> Vec<Bucket> {
        pairs
            .iter()
            .map(|&(le, count)| Bucket { le, count })
            .collect()
    };
    let normal = b(&[(1.0, 10.0), (2.0, 20.0), (f64::INFINITY, 20.0)]);
    assert_eq!(histogram_quantile(0.5, &normal), 1.0);
    assert_eq!(histogram_quantile(0.75, &normal), 1.5);
    assert_eq!(histogram_quantile(0.25, &normal), 0.5);
    assert_eq!(histogram_quantile(-0.1, &normal), f64::NEG_INFINITY);
    assert_eq!(histogram_quantile(1.1, &normal), f64::INFINITY);
    assert!(histogram_quantile(f64::NAN, &normal).is_nan());
    assert!(
        histogram_quantile(0.5, &b(&[(1.0, 1.0), (2.0, 2.0)])).is_nan(),
        "no +Inf"
    );
    assert!(
        histogram_quantile(0.5, &b(&[(f64::INFINITY, 2.0)])).is_nan(),
        "one bucket"
    );
    assert!(histogram_quantile(0.5, &b(&[(1.0, 0.0), (f64::INFINITY, 0.0)])).is_nan());
    // In the +Inf bucket: the highest finite bound.
    assert_eq!(
        histogram_quantile(0.9, &b(&[(1.0, 1.0), (f64::INFINITY, 10.0)])),
        1.0
    );
    // A lowest bound ≤ 0 is returned as is.
    assert_eq!(
        histogram_quantile(0.1, &b(&[(-1.0, 5.0), (f64::INFINITY, 10.0)])),
        -1.0
    );
    // Unsorted, duplicated and non-monotonic input.
    // Unsorted with a repeated bound: le 1 → 12, le 2 → 10 + 8, +Inf → 20; rank 10 is in le 1.
    let messy = b(&[(f64::INFINITY, 20.0), (2.0, 10.0), (1.0, 12.0), (2.0, 8.0)]);
    assert_eq!(histogram_quantile(0.5, &messy), 10.0 / 12.0);
    // Non-monotonic counts are raised to the running maximum: le 2 → 12.
    let dipping = b(&[(1.0, 12.0), (2.0, 10.0), (f64::INFINITY, 20.0)]);
    assert_eq!(histogram_quantile(0.6, &dipping), 1.0);
    assert_eq!(histogram_quantile(0.7, &dipping), 2.0);
}

proptest! {
    #[test]
    fn rates_are_never_negative_and_sum_the_increases(
        steps in prop::collection::vec((0u8..4, 0u32..1000), 2..40),
    ) {
        // Each step either grows the counter, keeps it, resets it to a smaller value or drops
        // the series from the scrape.
        let mut h = MetricsHistory::new(64);
        let mut value = 0.0_f64;
        let mut expected = 0.0;
        let mut last_seen: Option<f64> = None;
        for (i, (op, n)) in steps.iter().enumerate() {
            let n = f64::from(*n);
            let present = match op {
                0 => { value += n; true }
                1 => true,
                2 => { value = (n / 10.0).floor(); true }
                _ => false,
            };
            let snap = if present { requests(&[("a", "200", value)]) } else { AdmissionSnapshot::default() };
            if present {
                if i > 0 {
                    expected += match last_seen {
                        Some(p) if value >= p => value - p,
                        _ => value,
                    };
                }
                last_seen = Some(value);
            }
            h.push(t(i as u64 * 5), snap).expect("in order");
        }
        let rates = h.rates(&Window::latest(Duration::from_secs(3600)), WEBHOOK, &["name"]);
        for r in &rates {
            prop_assert!(r.increase >= 0.0);
            prop_assert!(r.rate.is_none_or(|v| v >= 0.0));
            prop_assert!(r.points.iter().all(|p| p.value >= 0.0));
            prop_assert_eq!(r.increase, expected);
        }
    }
}

#[test]
fn the_policy_families_read_the_same_from_a_scrape_and_from_a_replay() {
    let mut m = Metrics::new();
    let check = |action: &'static str| hookscope::metrics::PolicyCheckKey {
        policy: "no-forbidden-key".into(),
        binding: "no-forbidden-key-binding".into(),
        action,
        error_type: "invalid_error",
        legacy: false,
    };
    m.observe_policy_check(check("deny"), Duration::from_micros(40));
    m.observe_policy_check(check("deny"), Duration::from_micros(60));
    m.observe_policy_check(check("warn"), Duration::from_micros(20));
    // The mutating policies' families of 1.34 and later.
    m.observe_mutating_check(
        "add-owner",
        "add-owner-binding",
        "no_error",
        Duration::from_micros(30),
    );
    let text = m.encode_text();
    let from_text = AdmissionSnapshot::from_text(&text).expect("our exporter's text parses");
    assert_eq!(from_text, AdmissionSnapshot::from_metrics(&m));
    let deny = [
        ("enforcement_action", "deny"),
        ("error_type", "invalid_error"),
        ("policy", "no-forbidden-key"),
        ("policy_binding", "no-forbidden-key-binding"),
    ];
    assert_eq!(
        from_text.counter(AdmissionFamily::PolicyChecks, &deny),
        Some(2.0)
    );
    let latency = from_text
        .histogram(AdmissionFamily::PolicyDuration, &deny)
        .expect("the check latency");
    assert_eq!(latency.count, 2.0);
    let mutated = [
        ("error_type", "no_error"),
        ("policy", "add-owner"),
        ("policy_binding", "add-owner-binding"),
    ];
    assert_eq!(
        from_text.counter(AdmissionFamily::MutatingPolicyChecks, &mutated),
        Some(1.0)
    );
    assert!(
        from_text
            .histogram(AdmissionFamily::MutatingPolicyDuration, &mutated)
            .is_some()
    );
    // The labels the families document are those the series carry.
    for family in [
        AdmissionFamily::PolicyChecks,
        AdmissionFamily::MutatingPolicyChecks,
    ] {
        let key = from_text
            .counters
            .keys()
            .find(|k| k.family == family)
            .expect("a series");
        let names: Vec<&str> = key.labels.pairs().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, family.labels());
    }
}

/// The snapshots of two apiservers, labelled by address, as one round.
fn apiservers(a: f64, b: f64) -> AdmissionSnapshot {
    let mut round = requests(&[("a", "200", a)]).with_instance("10.0.0.1:6443");
    round.merge(requests(&[("a", "200", b)]).with_instance("10.0.0.2:6443"));
    round
}

#[test]
fn each_apiservers_series_are_kept_apart_reset_alone_and_summed() {
    let mut h = MetricsHistory::new(100);
    // 10.0.0.1 restarts between the second and the third round; 10.0.0.2 counts on.
    for (at, (a, b)) in [(0, (10.0, 100.0)), (10, (15.0, 130.0)), (20, (3.0, 160.0))] {
        h.push(t(at), apiservers(a, b)).expect("in order");
    }
    assert_eq!(h.instances(), ["10.0.0.1:6443", "10.0.0.2:6443"]);
    let window = Window::latest(Duration::from_secs(60));
    let increase = |w: &Window| h.rates(w, WEBHOOK, &["name"])[0].increase;
    let one = window.clone().of_instance(Some("10.0.0.1:6443".into()));
    let two = window.clone().of_instance(Some("10.0.0.2:6443".into()));
    assert_eq!(increase(&one), 8.0);
    assert_eq!(increase(&two), 60.0);
    assert_eq!(increase(&window), 68.0);
    // Through a load balancer the same values, alternating between the two, would read as
    // counters jumping up and "resetting": what keeping them apart avoids.
    let mut mixed = MetricsHistory::new(100);
    for (at, v) in [(0, 10.0), (10, 130.0), (20, 3.0), (30, 160.0)] {
        mixed.push(t(at), requests(&[("a", "200", v)])).unwrap();
    }
    assert_eq!(increase_of(&mixed, &window), 120.0 + 3.0 + 157.0);
    // An apiserver not named is no series.
    let none = window.of_instance(Some("10.0.0.3:6443".into()));
    assert!(h.rates(&none, WEBHOOK, &["name"]).is_empty());
}

fn increase_of(h: &MetricsHistory, w: &Window) -> f64 {
    h.rates(w, WEBHOOK, &["name"])[0].increase
}

#[test]
fn switching_between_apiservers_and_the_load_balancer_starts_the_history_afresh() {
    let mut h = MetricsHistory::new(100);
    h.push(t(0), apiservers(10.0, 100.0)).unwrap();
    h.push(t(10), apiservers(12.0, 101.0)).unwrap();
    // Falling back: the load balancer's counter is not a continuation of either apiserver's.
    h.push(t(20), requests(&[("a", "200", 113.0)])).unwrap();
    assert_eq!(h.len(), 1);
    h.push(t(30), requests(&[("a", "200", 118.0)])).unwrap();
    let window = Window::latest(Duration::from_secs(60));
    assert_eq!(increase_of(&h, &window), 5.0);
    // A scrape without admission series says nothing of where it came from.
    h.push(t(40), AdmissionSnapshot::default()).unwrap();
    assert_eq!(h.len(), 3);
    // And back to the apiservers apart.
    h.push(t(50), apiservers(14.0, 104.0)).unwrap();
    assert_eq!(h.len(), 1);
    assert!(h.instances().contains(&"10.0.0.1:6443".to_string()));
}

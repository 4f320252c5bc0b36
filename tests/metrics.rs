//! The admission metrics exposition against a real kube-apiserver v1.32 `/metrics`
//! (`tests/fixtures/metrics/`).

use std::time::Duration;

use hookscope::api::Operation;
use hookscope::metrics::{Metrics, RejectionErrorType, Sample, WebhookType};

const ORACLE: &str = include_str!("fixtures/metrics/apiserver-admission-v1.32.txt");
const HELP_FROM_SOURCE: &str = include_str!("fixtures/metrics/help-from-upstream-source.txt");

fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The family a HELP/TYPE or sample line belongs to.
fn family_of(line: &str) -> &str {
    if let Some(rest) = line
        .strip_prefix("# HELP ")
        .or_else(|| line.strip_prefix("# TYPE "))
    {
        return rest.split(' ').next().unwrap_or("");
    }
    let name = line.split(['{', ' ']).next().unwrap_or("");
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && ORACLE.lines().chain(HELP_FROM_SOURCE.lines()).any(|l| {
                l == format!("# TYPE {base} histogram") || l == format!("# TYPE {base} summary")
            })
        {
            return base;
        }
    }
    name
}

/// Every `# HELP`/`# TYPE` line of `text`.
fn header_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("# ")).collect()
}

/// Durations that reproduce the oracle session's series: bucket counts as recorded, the sums
/// bit for bit as Go accumulated them, the summary's order statistics as recorded.
mod oracle_session {
    pub const ADD_LABEL: [u64; 12] = [
        1780708, 1273091, 130276, 3581934, 25642002, 26251912, 41330386, 36829856, 54292376,
        41286982, 42309858, 89492011,
    ];
    pub const ADD_LABEL_B: [u64; 6] = [32933678, 41616418, 54962627, 33302984, 78241553, 30639112];
    pub const DENY: [u64; 4] = [31729504, 74106735, 44434668, 27880786];
    pub const VALIDATING_PLUGIN: [u64; 4] = [32068022, 29290771, 26530213, 90691456];
    pub const VALIDATE_STEP: [u64; 4] = [43701016, 47720898, 40763941, 46623810];
}

fn record_oracle_session() -> Metrics {
    use oracle_session::*;
    let mut m = Metrics::new();
    // Interleaved as in the session: each create calls add-label, add-label-b, (add-label again).
    let mut a = ADD_LABEL.iter();
    for &d in &ADD_LABEL_B {
        if let Some(&x) = a.next() {
            m.observe_webhook(
                "add-label.oracle.test",
                WebhookType::Admit,
                Operation::Create,
                false,
                200,
                ns(x),
            );
        }
        m.observe_webhook(
            "add-label-b.oracle.test",
            WebhookType::Admit,
            Operation::Create,
            false,
            200,
            ns(d),
        );
        if let Some(&x) = a.next() {
            m.observe_webhook(
                "add-label.oracle.test",
                WebhookType::Admit,
                Operation::Create,
                false,
                200,
                ns(x),
            );
        }
    }
    for ((&d, &c), &s) in DENY.iter().zip(&VALIDATING_PLUGIN).zip(&VALIDATE_STEP) {
        m.observe_webhook(
            "deny.oracle.test",
            WebhookType::Validating,
            Operation::Create,
            true,
            403,
            ns(d),
        );
        m.observe_webhook_rejection(
            "deny.oracle.test",
            WebhookType::Validating,
            Operation::Create,
            RejectionErrorType::NoError,
            403,
        );
        m.observe_controller(WebhookType::Validating, Operation::Create, true, ns(c));
        m.observe_step(WebhookType::Validating, Operation::Create, true, ns(s));
    }
    m
}

#[test]
fn oracle_session_encodes_as_the_real_apiserver_printed_it() {
    let ours = record_oracle_session().encode_text();
    // The fixture's lines for exactly the series recorded above, in the fixture's order.
    let whole = [
        "apiserver_admission_webhook_admission_duration_seconds",
        "apiserver_admission_webhook_rejection_count",
        "apiserver_admission_webhook_request_total",
    ];
    let headers_only = [
        "apiserver_admission_controller_admission_duration_seconds",
        "apiserver_admission_step_admission_duration_seconds",
        "apiserver_admission_step_admission_duration_seconds_summary",
    ];
    let mut expected = String::new();
    for line in ORACLE.lines() {
        let family = family_of(line);
        let keep = whole.contains(&family)
            || (headers_only.contains(&family) && line.starts_with("# "))
            || line.contains(r#"{name="ValidatingAdmissionWebhook",operation="CREATE",rejected="true",type="validate""#)
            || line.contains(r#"{operation="CREATE",rejected="true",type="validate""#);
        if keep {
            expected.push_str(line);
            expected.push('\n');
        }
    }
    assert_eq!(expected.lines().count(), 72, "fixture selection");
    assert_eq!(ours, expected);
}

#[test]
fn every_header_comes_from_the_real_scrape_or_the_upstream_source() {
    let mut m = record_oracle_session();
    m.observe_webhook_fail_open("a", WebhookType::Admit);
    m.observe_match_condition_error("a", WebhookType::Admit, Operation::Update);
    m.observe_match_condition_exclusion("a", WebhookType::Validating, Operation::Update);
    m.observe_match_condition_evaluation("a", WebhookType::Validating, Operation::Update, ms(1));
    m.observe_controller(WebhookType::Admit, Operation::Update, false, ms(1));
    m.observe_step(WebhookType::Admit, Operation::Update, false, ms(1));
    let text = m.encode_text();
    let headers = header_lines(&text);
    assert_eq!(headers.len(), 20, "all ten families");
    let real = header_lines(ORACLE);
    let from_source = header_lines(HELP_FROM_SOURCE);
    for h in &headers {
        let in_real = real.contains(h);
        let in_source = from_source.contains(h);
        assert!(in_real ^ in_source, "header not found exactly once: {h}");
    }
    // Families in the real scrape must match it (not only the source-derived file).
    for family in [
        "apiserver_admission_controller_admission_duration_seconds",
        "apiserver_admission_step_admission_duration_seconds",
        "apiserver_admission_step_admission_duration_seconds_summary",
        "apiserver_admission_webhook_admission_duration_seconds",
        "apiserver_admission_webhook_rejection_count",
        "apiserver_admission_webhook_request_total",
    ] {
        let ours: Vec<_> = headers.iter().filter(|l| family_of(l) == family).collect();
        let theirs: Vec<_> = real.iter().filter(|l| family_of(l) == family).collect();
        assert_eq!(ours, theirs, "{family}");
    }
    // Families sorted by name, each printed once.
    let mut names: Vec<&str> = headers.iter().map(|l| family_of(l)).collect();
    names.dedup();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted);
}

#[test]
fn empty_set_prints_nothing() {
    let m = Metrics::new();
    assert_eq!(m.encode_text(), "");
    assert!(m.samples().is_empty());
    assert_eq!(
        m.value("apiserver_admission_webhook_request_total", &[]),
        None
    );
}

#[test]
fn codes_above_600_are_capped() {
    let mut m = Metrics::new();
    for code in [700, 601, 600, 599, 0] {
        m.observe_webhook(
            "w",
            WebhookType::Validating,
            Operation::Create,
            true,
            code,
            ms(1),
        );
        m.observe_webhook_rejection(
            "w",
            WebhookType::Validating,
            Operation::Create,
            RejectionErrorType::CallingWebhookError,
            code,
        );
    }
    let text = m.encode_text();
    let requests: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_webhook_request_total{"))
        .collect();
    assert_eq!(
        requests,
        [
            r#"apiserver_admission_webhook_request_total{code="0",name="w",operation="CREATE",rejected="true",type="validating"} 1"#,
            r#"apiserver_admission_webhook_request_total{code="599",name="w",operation="CREATE",rejected="true",type="validating"} 1"#,
            r#"apiserver_admission_webhook_request_total{code="600",name="w",operation="CREATE",rejected="true",type="validating"} 3"#,
        ]
    );
    let rejections: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_webhook_rejection_count{"))
        .collect();
    assert_eq!(
        rejections,
        [
            r#"apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="w",operation="CREATE",rejection_code="0",type="validating"} 1"#,
            r#"apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="w",operation="CREATE",rejection_code="599",type="validating"} 1"#,
            r#"apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="w",operation="CREATE",rejection_code="600",type="validating"} 3"#,
        ]
    );
}

#[test]
fn label_values_are_escaped() {
    let mut m = Metrics::new();
    m.observe_webhook_fail_open("a\\b\"c\nd", WebhookType::Admit);
    assert!(
        m.encode_text()
            .contains("apiserver_admission_webhook_fail_open_count{name=\"a\\\\b\\\"c\\nd\",type=\"admit\"} 1\n"),
        "{}",
        m.encode_text()
    );
    // samples() carries the raw value.
    assert_eq!(m.samples()[0].labels[0].1, "a\\b\"c\nd");
}

#[test]
fn match_condition_type_labels() {
    let mut m = Metrics::new();
    for ty in [WebhookType::Admit, WebhookType::Validating] {
        m.observe_match_condition_error("mc", ty, Operation::Delete);
        m.observe_match_condition_exclusion("mc", ty, Operation::Delete);
        m.observe_match_condition_evaluation("mc", ty, Operation::Delete, ms(5));
    }
    let text = m.encode_text();
    let counters: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_match_condition_e") && l.contains("_total{"))
        .collect();
    assert_eq!(
        counters,
        [
            r#"apiserver_admission_match_condition_evaluation_errors_total{kind="webhook",name="mc",operation="DELETE",type="admit"} 1"#,
            r#"apiserver_admission_match_condition_evaluation_errors_total{kind="webhook",name="mc",operation="DELETE",type="validating"} 1"#,
            r#"apiserver_admission_match_condition_exclusions_total{kind="webhook",name="mc",operation="DELETE",type="admit"} 1"#,
            r#"apiserver_admission_match_condition_exclusions_total{kind="webhook",name="mc",operation="DELETE",type="validate"} 1"#,
        ]
    );
    // The evaluation histogram: 7 buckets from 1ms to 250ms, 5ms lands in le="0.005".
    let hist: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_admission_match_condition_evaluation_seconds")
                && l.contains("type=\"validating\"")
        })
        .collect();
    let pre = r#"apiserver_admission_match_condition_evaluation_seconds"#;
    let lbl = r#"kind="webhook",name="mc",operation="DELETE",type="validating""#;
    let want: Vec<String> = [
        ("0.001", 0),
        ("0.005", 1),
        ("0.01", 1),
        ("0.025", 1),
        ("0.1", 1),
        ("0.2", 1),
        ("0.25", 1),
        ("+Inf", 1),
    ]
    .iter()
    .map(|(le, n)| format!("{pre}_bucket{{{lbl},le=\"{le}\"}} {n}"))
    .chain([
        format!("{pre}_sum{{{lbl}}} 0.005"),
        format!("{pre}_count{{{lbl}}} 1"),
    ])
    .collect();
    assert_eq!(hist, want);
}

#[test]
fn bucket_boundaries_and_sum_formatting() {
    let mut m = Metrics::new();
    // Upper bounds are inclusive; above the last bound only +Inf counts.
    for d in [ms(5), ns(5_000_001), ms(25_000), ms(30_000)] {
        m.observe_webhook("b", WebhookType::Admit, Operation::Connect, false, 200, d);
    }
    let labels = [
        ("name", "b"),
        ("operation", "CONNECT"),
        ("rejected", "false"),
        ("type", "admit"),
    ];
    let bucket = |le: &str| {
        let mut l = labels.to_vec();
        l.push(("le", le));
        m.value(
            "apiserver_admission_webhook_admission_duration_seconds_bucket",
            &l,
        )
    };
    assert_eq!(bucket("0.005"), Some(1.0));
    assert_eq!(bucket("0.025"), Some(2.0));
    assert_eq!(bucket("10"), Some(2.0));
    assert_eq!(bucket("25"), Some(3.0));
    assert_eq!(bucket("+Inf"), Some(4.0));
    assert_eq!(bucket("1.0"), None, "le is printed as Go prints 1.0: \"1\"");
    assert!(bucket("1").is_some());

    // 0.1 + 0.2 accumulates and prints as Go does.
    let mut s = Metrics::new();
    s.observe_controller(WebhookType::Admit, Operation::Update, false, ms(100));
    s.observe_controller(WebhookType::Admit, Operation::Update, false, ms(200));
    assert!(s.encode_text().contains(
        "apiserver_admission_controller_admission_duration_seconds_sum{name=\"MutatingAdmissionWebhook\",operation=\"UPDATE\",rejected=\"false\",type=\"admit\"} 0.30000000000000004\n"
    ));
    // Small sums use Go's exponent form.
    let mut t = Metrics::new();
    t.observe_step(
        WebhookType::Validating,
        Operation::Update,
        false,
        ns(25_000),
    );
    assert!(t.encode_text().contains(
        "apiserver_admission_step_admission_duration_seconds_sum{operation=\"UPDATE\",rejected=\"false\",type=\"validate\"} 2.5e-05\n"
    ));
}

#[test]
fn series_sort_by_label_strings() {
    let mut m = Metrics::new();
    for op in [
        Operation::Update,
        Operation::Delete,
        Operation::Create,
        Operation::Connect,
    ] {
        m.observe_webhook("z", WebhookType::Validating, op, false, 200, ms(1));
    }
    m.observe_webhook(
        "a.b",
        WebhookType::Admit,
        Operation::Create,
        false,
        200,
        ms(1),
    );
    m.observe_webhook(
        "a-b",
        WebhookType::Admit,
        Operation::Create,
        false,
        200,
        ms(1),
    );
    m.observe_webhook("z", WebhookType::Admit, Operation::Update, true, 0, ms(1));
    let order: Vec<String> = m
        .samples()
        .into_iter()
        .filter(|s| s.name == "apiserver_admission_webhook_request_total")
        .map(|s| {
            s.labels
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        order,
        [
            "0 z UPDATE true admit",
            "200 a-b CREATE false admit",
            "200 a.b CREATE false admit",
            "200 z CONNECT false validating",
            "200 z CREATE false validating",
            "200 z DELETE false validating",
            "200 z UPDATE false validating",
        ]
    );
}

#[test]
fn merge_of_per_request_sets_equals_recording_in_one_set() {
    let record = |m: &mut Metrics, i: u64| {
        m.observe_match_condition_evaluation(
            "m",
            WebhookType::Admit,
            Operation::Create,
            ns(1_000 * i + 7),
        );
        m.observe_webhook(
            "m",
            WebhookType::Admit,
            Operation::Create,
            false,
            200,
            ns(3_100_000 + i),
        );
        m.observe_webhook(
            "m",
            WebhookType::Admit,
            Operation::Create,
            false,
            200,
            ns(1_700_003 * i),
        );
        m.observe_controller(
            WebhookType::Admit,
            Operation::Create,
            false,
            ns(9_999_999 + i),
        );
        m.observe_step(
            WebhookType::Admit,
            Operation::Create,
            false,
            ns(12_345_678 + 3 * i),
        );
        m.observe_webhook(
            "v",
            WebhookType::Validating,
            Operation::Create,
            true,
            1000 + i as i32,
            ns(100 + i),
        );
        m.observe_webhook_rejection(
            "v",
            WebhookType::Validating,
            Operation::Create,
            RejectionErrorType::ApiserverInternalError,
            0,
        );
        m.observe_webhook_fail_open("f", WebhookType::Validating);
        if i.is_multiple_of(3) {
            m.observe_match_condition_error("m", WebhookType::Admit, Operation::Update);
            m.observe_match_condition_exclusion("v", WebhookType::Validating, Operation::Create);
        }
    };
    let mut one = Metrics::new();
    let mut merged = Metrics::new();
    let mut merged_lists = Metrics::new();
    for i in 0..700 {
        record(&mut one, i);
        let mut request = Metrics::new();
        record(&mut request, i);
        merged.merge(&request);
        let mut list = Metrics::per_request();
        record(&mut list, i);
        assert_eq!(list.encode_text(), request.encode_text(), "read directly");
        merged_lists.merge(&list);
    }
    assert_eq!(merged.encode_text(), one.encode_text());
    assert_eq!(merged.samples(), one.samples());
    assert_eq!(merged_lists.encode_text(), one.encode_text());
    assert_eq!(merged_lists.samples(), one.samples());
    // A per-request set merged into another keeps the observations in order.
    let (mut a, mut b) = (Metrics::per_request(), Metrics::per_request());
    record(&mut a, 1);
    record(&mut b, 2);
    a.merge(&b);
    let mut both = Metrics::new();
    record(&mut both, 1);
    record(&mut both, 2);
    assert_eq!(a.encode_text(), both.encode_text());
    assert_eq!(
        merged.value(
            "apiserver_admission_webhook_fail_open_count",
            &[("type", "validating"), ("name", "f")]
        ),
        Some(700.0)
    );
    // Merging an empty set changes nothing; merging into an empty set copies.
    let before = one.encode_text();
    one.merge(&Metrics::new());
    assert_eq!(one.encode_text(), before);
    let mut copy = Metrics::new();
    copy.merge(&one);
    assert_eq!(copy.encode_text(), before);
}

#[test]
fn samples_and_value() {
    let mut m = Metrics::new();
    m.observe_webhook(
        "s",
        WebhookType::Admit,
        Operation::Create,
        false,
        200,
        ms(30),
    );
    m.observe_step(WebhookType::Admit, Operation::Create, false, ms(40));
    let samples = m.samples();
    // 1 request counter + (8+1+2) webhook histogram + (6+1+2) step histogram + (3+2) summary.
    assert_eq!(samples.len(), 1 + 11 + 9 + 5);
    assert_eq!(
        samples[0],
        Sample {
            name: "apiserver_admission_step_admission_duration_seconds_bucket".into(),
            labels: vec![
                ("operation".into(), "CREATE".into()),
                ("rejected".into(), "false".into()),
                ("type".into(), "admit".into()),
                ("le".into(), "0.005".into()),
            ],
            value: 0.0,
        }
    );
    // The samples are the text's lines.
    let text = m.encode_text();
    let sample_lines = text.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(sample_lines, samples.len());

    let wl = [
        ("name", "s"),
        ("operation", "CREATE"),
        ("rejected", "false"),
        ("type", "admit"),
    ];
    assert_eq!(
        m.value(
            "apiserver_admission_webhook_admission_duration_seconds",
            &wl
        ),
        Some(1.0)
    );
    assert_eq!(
        m.value(
            "apiserver_admission_webhook_admission_duration_seconds_sum",
            &wl
        ),
        Some(0.03)
    );
    let rl = [
        ("type", "admit"),
        ("rejected", "false"),
        ("operation", "CREATE"),
        ("name", "s"),
        ("code", "200"),
    ];
    assert_eq!(
        m.value("apiserver_admission_webhook_request_total", &rl),
        Some(1.0)
    );
    assert_eq!(
        m.value("apiserver_admission_webhook_request_total", &rl[1..]),
        None
    );
    let sl = [
        ("operation", "CREATE"),
        ("rejected", "false"),
        ("type", "admit"),
        ("quantile", "0.99"),
    ];
    assert_eq!(
        m.value(
            "apiserver_admission_step_admission_duration_seconds_summary",
            &sl
        ),
        Some(0.04)
    );
    assert_eq!(
        m.value(
            "apiserver_admission_webhook_fail_open_count",
            &[("name", "s"), ("type", "admit")]
        ),
        None
    );
}

#[test]
fn summary_quantiles_follow_client_golang() {
    let mut m = Metrics::new();
    // 10 observations: 0.5 → 5th smallest, 0.9 → 9th, 0.99 → 10th (perks' sorted-buffer path).
    for k in [7u64, 3, 10, 1, 9, 2, 8, 4, 6, 5] {
        m.observe_step(WebhookType::Validating, Operation::Delete, true, ms(k));
    }
    let text = m.encode_text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_admission_step_admission_duration_seconds_summary"))
        .collect();
    let l = r#"operation="DELETE",rejected="true",type="validate""#;
    assert_eq!(
        lines,
        [
            format!(
                "apiserver_admission_step_admission_duration_seconds_summary{{{l},quantile=\"0.5\"}} 0.005"
            ),
            format!(
                "apiserver_admission_step_admission_duration_seconds_summary{{{l},quantile=\"0.9\"}} 0.009"
            ),
            format!(
                "apiserver_admission_step_admission_duration_seconds_summary{{{l},quantile=\"0.99\"}} 0.01"
            ),
            format!(
                "apiserver_admission_step_admission_duration_seconds_summary_sum{{{l}}} 0.05499999999999999"
            ),
            format!("apiserver_admission_step_admission_duration_seconds_summary_count{{{l}}} 10"),
        ]
    );
}

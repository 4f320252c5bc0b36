//! Shared pieces of the upstream-case suite: loading `fixtures/upstream-cases.json`, turning its
//! JSON into engine inputs, and collecting per-case mismatches so that one test per category
//! reports every failing case at once.

pub mod dispatcher;
pub mod e2e;
pub mod integration;
pub mod unit;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use hookscope::api::{
    GroupVersionKind, GroupVersionResource, LabelSelector, MatchCondition, Operation,
    RuleWithOperations, ServiceReference, Status, UserInfo, Webhook, WebhookClientConfig,
    WebhookConfiguration, WebhookKind,
};
use hookscope::metrics::Metrics;
use serde_json::{Value, json};

const CASES: &str = include_str!("../fixtures/upstream-cases.json");

/// Every case, in file order.
pub fn all_cases() -> &'static [Value] {
    static PARSED: OnceLock<Vec<Value>> = OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(CASES).expect("upstream-cases.json parses"))
}

/// The cases of one category, in file order.
pub fn cases(category: &str) -> Vec<&'static Value> {
    all_cases()
        .iter()
        .filter(|c| c["category"] == category)
        .collect()
}

/// Mismatches found in one case.
#[derive(Default)]
pub struct Check {
    pub problems: Vec<String>,
}

impl Check {
    pub fn ok(&mut self, cond: bool, what: impl FnOnce() -> String) {
        if !cond {
            self.problems.push(what());
        }
    }

    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.problems
                .push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    pub fn contains(&mut self, what: &str, text: &str, needle: &str) {
        if !text.contains(needle) {
            self.problems
                .push(format!("{what}: {text:?} does not contain {needle:?}"));
        }
    }
}

/// The result of one category: passed cases, and the problems of the others.
pub struct Report {
    category: &'static str,
    total: usize,
    failures: Vec<String>,
}

impl Report {
    pub fn new(category: &'static str) -> Self {
        Report {
            category,
            total: 0,
            failures: Vec::new(),
        }
    }

    /// Records one case (or one variant of a case, e.g. its mutating form).
    pub fn record(&mut self, id: &str, check: Check) {
        self.total += 1;
        if !check.problems.is_empty() {
            self.failures
                .push(format!("{id}:\n    {}", check.problems.join("\n    ")));
        }
    }

    /// Prints the tally and fails the test if any case failed.
    pub fn finish(self) {
        let passed = self.total - self.failures.len();
        println!("{}: {passed}/{} passed", self.category, self.total);
        assert!(self.total > 0, "{}: no cases ran", self.category);
        assert!(
            self.failures.is_empty(),
            "{}: {} of {} failed:\n{}",
            self.category,
            self.failures.len(),
            self.total,
            self.failures.join("\n")
        );
    }
}

/// A string field, `""` when absent or null.
pub fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn opt_strings(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| a.iter().map(s).collect::<Vec<_>>())
}

pub fn rule(v: &Value) -> RuleWithOperations {
    RuleWithOperations {
        operations: opt_strings(&v["operations"]),
        api_groups: opt_strings(&v["apiGroups"]),
        api_versions: opt_strings(&v["apiVersions"]),
        resources: opt_strings(&v["resources"]),
        scope: v["scope"].as_str().map(String::from),
    }
}

pub fn selector(v: &Value) -> Option<LabelSelector> {
    (!v.is_null()).then(|| serde_json::from_value(v.clone()).expect("label selector"))
}

/// Where the test webhook server is, for client configs written against upstream's harness.
#[derive(Clone, Default)]
pub struct ServerRef {
    /// `127.0.0.1:<port>` of the test server.
    pub host_port: String,
    /// The CA bundle that verifies it (upstream's `testcerts.CACert`).
    pub ca_pem: Vec<u8>,
}

/// A webhook exactly as the case writes it (not defaulted). `<test-server-host:port>` and
/// `<server>` in URLs point at `server`; `testcerts.CACert` is the server's CA.
pub fn webhook(v: &Value, server: &ServerRef) -> Webhook {
    let cc = &v["clientConfig"];
    let url = cc["url"].as_str().map(|u| {
        u.replace("<test-server-host:port>", &server.host_port)
            .replace("<server>", &format!("https://{}", server.host_port))
    });
    let service = cc["service"].as_object().map(|svc| ServiceReference {
        namespace: s(&svc["namespace"]),
        name: s(&svc["name"]),
        path: svc["path"].as_str().map(String::from),
        port: svc["port"]
            .as_i64()
            .map(|p| i32::try_from(p).expect("port")),
    });
    let ca_bundle = match cc["caBundle"].as_str() {
        Some("testcerts.CACert") => Some(server.ca_pem.clone()),
        _ if url.is_some() && cc.get("caBundle").is_none() => Some(server.ca_pem.clone()),
        _ => None,
    };
    Webhook {
        name: s(&v["name"]),
        client_config: WebhookClientConfig {
            url,
            service,
            ca_bundle,
        },
        rules: v["rules"].as_array().map(|r| r.iter().map(rule).collect()),
        failure_policy: v["failurePolicy"].as_str().map(String::from),
        match_policy: v["matchPolicy"].as_str().map(String::from),
        namespace_selector: selector(&v["namespaceSelector"]),
        object_selector: selector(&v["objectSelector"]),
        side_effects: v["sideEffects"].as_str().map(String::from),
        timeout_seconds: v["timeoutSeconds"]
            .as_i64()
            .map(|t| i32::try_from(t).expect("timeout")),
        admission_review_versions: opt_strings(&v["admissionReviewVersions"]),
        reinvocation_policy: v["reinvocationPolicy"].as_str().map(String::from),
        match_conditions: v["matchConditions"].as_array().map(|mc| {
            mc.iter()
                .map(|c| MatchCondition {
                    name: s(&c["name"]),
                    expression: s(&c["expression"]),
                })
                .collect()
        }),
    }
}

pub fn configuration(
    kind: WebhookKind,
    name: &str,
    webhooks: Vec<Webhook>,
) -> WebhookConfiguration {
    WebhookConfiguration {
        kind,
        api_version: "admissionregistration.k8s.io/v1".into(),
        name: name.into(),
        metadata: json!({ "name": name }),
        webhooks,
    }
}

pub fn gvk(v: &Value) -> GroupVersionKind {
    GroupVersionKind::new(&s(&v["group"]), &s(&v["version"]), &s(&v["kind"]))
}

pub fn gvr(v: &Value) -> GroupVersionResource {
    GroupVersionResource::new(&s(&v["group"]), &s(&v["version"]), &s(&v["resource"]))
}

pub fn operation(v: &Value) -> Operation {
    Operation::parse(v.as_str().unwrap_or("CREATE")).expect("operation")
}

pub fn user(v: &Value) -> UserInfo {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

pub fn status(v: &Value) -> Option<Status> {
    (!v.is_null()).then(|| serde_json::from_value(v.clone()).expect("status"))
}

pub fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), s(v))).collect())
        .unwrap_or_default()
}

/// One expected sample line, `name{k="v",...} value`.
pub fn check_metric_line(c: &mut Check, metrics: &Metrics, line: &str) {
    let (head, value) = line.rsplit_once(' ').expect("metric line has a value");
    let want: f64 = value.parse().expect("metric value");
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.trim_end_matches('}')),
        None => (head, ""),
    };
    let pairs: Vec<(String, String)> = labels
        .split("\",")
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once("=\"").expect("label pair");
            (k.to_string(), v.trim_end_matches('"').to_string())
        })
        .collect();
    let refs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let got = metrics.value(name, &refs);
    c.ok(got == Some(want), || format!("metric {line}: got {got:?}"));
}

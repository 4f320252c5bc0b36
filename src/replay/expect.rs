//! `--expect`: expected outcomes per request, checked against the replay.
//!
//! The file is YAML (or JSON): a list of entries, or `{expectations: [...]}`. Each entry selects
//! requests with `match` (every field given must agree; an empty `match` selects every request)
//! and states what must hold for each of them:
//!
//! ```yaml
//! - match: {namespace: prod, name: web, operation: CREATE}   # also: uid, auditID, file, index,
//!   allowed: false                                           #       resource, kind
//!   code: 403
//!   message: "admission webhook \"deny.example.com\" denied the request: no"
//!   reason: Forbidden
//!   annotations:                       # a subset; null means "must be absent"
//!     mutation.webhook.admission.k8s.io/round_0_index_0: '{"configuration":"c","webhook":"w","mutated":true}'
//!   labels: {injected: "yes", stale: null}   # labels of the object after the mutating chain
//!   warnings: ["deprecated field"]           # the exact list
//! ```
//!
//! An entry that selects no request is itself a mismatch.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::report::RequestReport;

/// Errors reading an expectations file.
#[derive(Debug, thiserror::Error)]
pub enum ExpectError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// File.
        file: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a valid expectations document.
    #[error("{file}: {message}")]
    Invalid {
        /// File.
        file: String,
        /// What is wrong, with the field path.
        message: String,
    },
}

/// Which requests an entry is about.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Selector {
    /// Captured uid.
    pub uid: Option<String>,
    /// Audit ID.
    #[serde(rename = "auditID")]
    pub audit_id: Option<String>,
    /// Input file as given.
    pub file: Option<String>,
    /// Line or document within the file (1-based).
    pub index: Option<usize>,
    /// CREATE, UPDATE, DELETE, CONNECT.
    pub operation: Option<String>,
    /// Resource, optionally with `/subresource`.
    pub resource: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Namespace.
    pub namespace: Option<String>,
    /// Name.
    pub name: Option<String>,
}

/// One expectation.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    /// The requests concerned.
    #[serde(default, rename = "match")]
    pub selector: Selector,
    /// Verdict.
    pub allowed: Option<bool>,
    /// Status code the client gets (200 when allowed).
    pub code: Option<i32>,
    /// Exact status message.
    pub message: Option<String>,
    /// Status reason.
    pub reason: Option<String>,
    /// Annotations (subset; null: absent).
    #[serde(default)]
    pub annotations: BTreeMap<String, Option<String>>,
    /// Labels of the final object (subset; null: absent).
    #[serde(default)]
    pub labels: BTreeMap<String, Option<String>>,
    /// Exact warnings.
    pub warnings: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Document {
    List(Vec<Expectation>),
    Wrapped { expectations: Vec<Expectation> },
}

/// A difference between what was expected and what the replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Entry number in the file, 1-based.
    pub entry: usize,
    /// What was compared (`code`, `annotations[key]`, `labels[key]`, …).
    pub field: String,
    /// Expected value, as text (`<absent>` for absence).
    pub expected: String,
    /// Actual value, as text.
    pub actual: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "expectation {}: {}\n  - {}\n  + {}",
            self.entry, self.field, self.expected, self.actual
        )
    }
}

/// The expectations of a replay, with how many requests each one selected.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    entries: Vec<Expectation>,
    matched: Vec<usize>,
}

const ABSENT: &str = "<absent>";

fn text(v: Option<&str>) -> String {
    v.map_or_else(|| ABSENT.to_string(), |s| format!("{s:?}"))
}

impl Expectations {
    /// Parses an expectations document.
    pub fn parse(text: &str, file: &str) -> Result<Self, ExpectError> {
        let doc: Document =
            crate::yaml::from_str(text).map_err(|e| ExpectError::Invalid {
                file: file.into(),
                message: format!(
                    "expected a list of expectations (match, allowed, code, message, reason, annotations, labels, warnings): {e}"
                ),
            })?;
        let entries = match doc {
            Document::List(l) | Document::Wrapped { expectations: l } => l,
        };
        Ok(Self {
            matched: vec![0; entries.len()],
            entries,
        })
    }

    /// Reads an expectations file.
    pub fn load(path: &Path) -> Result<Self, ExpectError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ExpectError::Io {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// Checks one replayed request against every entry that selects it.
    pub fn check(&mut self, r: &RequestReport) -> Vec<Mismatch> {
        let mut out = Vec::new();
        for (i, e) in self.entries.iter().enumerate() {
            if !selects(&e.selector, r) {
                continue;
            }
            self.matched[i] += 1;
            compare(i + 1, e, r, &mut out);
        }
        out
    }

    /// Entries that selected no request, as mismatches.
    pub fn unmatched(&self) -> Vec<Mismatch> {
        self.matched
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == 0)
            .map(|(i, _)| Mismatch {
                entry: i + 1,
                field: "match".into(),
                expected: "at least one request".into(),
                actual: "no request matched".into(),
            })
            .collect()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn selects(s: &Selector, r: &RequestReport) -> bool {
    let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    let resource = if r.sub_resource.is_empty() {
        r.resource.resource.clone()
    } else {
        format!("{}/{}", r.resource.resource, r.sub_resource)
    };
    eq(&s.uid, &r.uid)
        && s.audit_id
            .as_deref()
            .is_none_or(|w| r.source.audit_id.as_deref() == Some(w))
        && eq(&s.file, &r.source.file)
        && s.index.is_none_or(|i| i == r.source.index)
        && eq(&s.operation, r.operation.as_str())
        && eq(&s.resource, &resource)
        && eq(&s.kind, &r.kind.kind)
        && eq(&s.namespace, &r.namespace)
        && eq(&s.name, &r.name)
}

fn compare(entry: usize, e: &Expectation, r: &RequestReport, out: &mut Vec<Mismatch>) {
    let mut diff = |field: String, expected: String, actual: String| {
        if expected != actual {
            out.push(Mismatch {
                entry,
                field,
                expected,
                actual,
            });
        }
    };
    if let Some(a) = e.allowed {
        diff("allowed".into(), a.to_string(), r.allowed.to_string());
    }
    let status = r.status.as_ref();
    if let Some(c) = e.code {
        let actual = status.map_or(200, |s| s.code);
        diff("code".into(), c.to_string(), actual.to_string());
    }
    if let Some(m) = &e.message {
        diff(
            "message".into(),
            text(Some(m)),
            text(status.map(|s| s.message.as_str())),
        );
    }
    if let Some(m) = &e.reason {
        diff(
            "reason".into(),
            text(Some(m)),
            text(status.map(|s| s.reason.as_str())),
        );
    }
    for (k, want) in &e.annotations {
        diff(
            format!("annotations[{k}]"),
            text(want.as_deref()),
            text(r.annotations.get(k).map(String::as_str)),
        );
    }
    let labels = r
        .object
        .as_ref()
        .and_then(|o| o.value().pointer("/metadata/labels"))
        .and_then(Value::as_object);
    for (k, want) in &e.labels {
        diff(
            format!("labels[{k}]"),
            text(want.as_deref()),
            text(labels.and_then(|l| l.get(k)).and_then(Value::as_str)),
        );
    }
    if let Some(w) = &e.warnings {
        diff(
            "warnings".into(),
            format!("{w:?}"),
            format!("{:?}", r.warnings),
        );
    }
}

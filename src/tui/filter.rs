//! The Requests view's `/` filter: plain words and field terms, all of which must match.
//!
//! ```text
//! verdict:denied ns:shop cart        denied requests in namespace shop mentioning "cart"
//! webhook:policy verdict:403         requests the policy webhook was called for, refused with 403
//! !verdict:allowed                   every request that was not plainly allowed
//! ```
//!
//! * a plain word must appear (case-insensitive) in the operation, resource, namespace/name,
//!   the verdict words (`allowed`, `denied 403`, `failed-open`), `dry-run`, or a called
//!   webhook's name;
//! * `verdict:V` — `allowed` (admitted, failed open included), `denied`, `failed-open` (or
//!   `open`), or an HTTP code (`403`); a word is taken by its prefix while it is typed
//!   (`verdict:den`);
//! * `webhook:NAME` (or `hook:`) — a webhook called for the request has NAME in its name;
//! * `ns:NAME` (or `namespace:`) — the request's namespace is NAME exactly;
//! * `!` before a term negates it.
//!
//! A field with nothing after the colon (while it is being typed) constrains nothing; an
//! unknown field name is plain text (names may contain colons, e.g. `system:serviceaccount`).

use super::model::{RequestRow, Verdict};

/// Why a filter cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// `verdict:` names no verdict.
    #[error("verdict:{0}: expected allowed, denied, failed-open or an HTTP code")]
    Verdict(String),
}

/// Which verdicts a `verdict:` term takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictTerm {
    /// Admitted (failed open included).
    Allowed,
    /// Refused, whatever the code.
    Denied,
    /// Admitted while a webhook failed open.
    FailedOpen,
    /// Refused with this code.
    Code(i32),
}

impl VerdictTerm {
    fn parse(value: &str) -> Result<VerdictTerm, FilterError> {
        if let Ok(code) = value.parse::<i32>() {
            return Ok(VerdictTerm::Code(code));
        }
        let v = value.to_lowercase();
        let words: [(&str, VerdictTerm); 4] = [
            ("allowed", VerdictTerm::Allowed),
            ("denied", VerdictTerm::Denied),
            ("failed-open", VerdictTerm::FailedOpen),
            ("open", VerdictTerm::FailedOpen),
        ];
        words
            .iter()
            .find(|(w, _)| w.starts_with(&v))
            .map(|(_, t)| *t)
            .ok_or_else(|| FilterError::Verdict(value.to_string()))
    }

    fn matches(self, v: Verdict) -> bool {
        match (self, v) {
            (VerdictTerm::Allowed, Verdict::Allowed | Verdict::FailedOpen) => true,
            (VerdictTerm::FailedOpen, Verdict::FailedOpen) => true,
            (VerdictTerm::Denied, Verdict::Denied(_)) => true,
            (VerdictTerm::Code(c), Verdict::Denied(d)) => c == d,
            _ => false,
        }
    }

    fn describe(self) -> String {
        match self {
            VerdictTerm::Allowed => "allowed".into(),
            VerdictTerm::Denied => "denied".into(),
            VerdictTerm::FailedOpen => "failed open".into(),
            VerdictTerm::Code(c) => format!("denied {c}"),
        }
    }
}

/// One condition of a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// A word anywhere in the row (lower-cased).
    Text(String),
    /// The verdict.
    Verdict(VerdictTerm),
    /// A called webhook's name contains this (lower-cased).
    Webhook(String),
    /// The namespace is exactly this.
    Namespace(String),
}

impl Term {
    fn matches(&self, row: &RequestRow) -> bool {
        match self {
            Term::Text(w) => row.matches(w),
            Term::Verdict(v) => v.matches(row.verdict),
            Term::Webhook(w) => row.webhooks.iter().any(|h| h.to_lowercase().contains(w)),
            Term::Namespace(ns) => row.namespace == *ns,
        }
    }

    fn describe(&self) -> String {
        match self {
            Term::Text(w) => format!("{w:?}"),
            Term::Verdict(v) => format!("verdict {}", v.describe()),
            Term::Webhook(w) => format!("webhook ~{w}"),
            Term::Namespace(ns) => format!("namespace {ns}"),
        }
    }
}

/// A parsed filter: every condition must hold (`negated` ones must not).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestFilter {
    /// The conditions, each with whether it is negated.
    pub terms: Vec<(bool, Term)>,
    /// The plain words that must appear, joined: a row is searched for all of them at once.
    words: String,
}

impl RequestFilter {
    /// Parses the text typed after `/`.
    pub fn parse(text: &str) -> Result<RequestFilter, FilterError> {
        let mut terms = Vec::new();
        for word in text.split_whitespace() {
            let (negated, word) = match word.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, word),
            };
            let term = match word.split_once(':') {
                Some((field, value)) => match field.to_lowercase().as_str() {
                    _ if value.is_empty() && is_field(field) => continue,
                    "verdict" | "v" => Term::Verdict(VerdictTerm::parse(value)?),
                    "webhook" | "hook" => Term::Webhook(value.to_lowercase()),
                    "ns" | "namespace" => Term::Namespace(value.to_string()),
                    _ => Term::Text(word.to_lowercase()),
                },
                None if word.is_empty() => continue,
                None => Term::Text(word.to_lowercase()),
            };
            terms.push((negated, term));
        }
        let words: Vec<&str> = terms
            .iter()
            .filter_map(|t| match t {
                (false, Term::Text(w)) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        let words = words.join(" ");
        Ok(RequestFilter { terms, words })
    }

    /// Whether a row passes.
    pub fn matches(&self, row: &RequestRow) -> bool {
        (self.words.is_empty() || row.matches(&self.words))
            && (self.terms.iter())
                .filter(|t| !matches!(t, (false, Term::Text(_))))
                .all(|(neg, t)| t.matches(row) != *neg)
    }

    /// Whether there is no condition.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The conditions in words, as the status line shows them.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|(neg, t)| {
                if *neg {
                    format!("not {}", t.describe())
                } else {
                    t.describe()
                }
            })
            .collect();
        parts.join(" · ")
    }
}

fn is_field(name: &str) -> bool {
    FIELDS
        .iter()
        .any(|(names, _)| names.contains(&name.to_lowercase().as_str()))
}

/// The field names the filter knows, with what they match (help, documentation).
pub const FIELDS: &[(&[&str], &str)] = &[
    (
        &["verdict", "v"],
        "allowed, denied, failed-open, or a code (403)",
    ),
    (&["webhook", "hook"], "a called webhook's name contains it"),
    (&["ns", "namespace"], "the namespace is exactly it"),
];

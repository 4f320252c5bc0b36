//! The JSON report of a replay: one entry per replayed request, in input order, and a summary.
//! The schema is documented in `docs/replay.md`; scripts depend on it, so fields are only ever
//! added.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::{CapturedRequest, InputProblem, SourceRef};
use crate::KubeVersion;
use crate::api::{GroupVersionKind, GroupVersionResource, Operation, WebhookKind};
use crate::engine::{AuditLevel, CallDecision, CallRecord, Object, Outcome};

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Release whose behaviour was modelled, e.g. `1.32`.
    pub kube_version: String,
    /// Audit level the annotations were written at.
    pub audit_level: String,
    /// One entry per replayed request, in input order.
    pub requests: Vec<RequestReport>,
    /// Counts.
    pub summary: Summary,
    /// Input that was not replayed, and configurations that were left out, each with its reason.
    pub problems: Vec<Problem>,
}

/// Counts over the whole replay.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Requests replayed.
    pub total: usize,
    /// Replayed requests admitted.
    pub allowed: usize,
    /// Replayed requests refused.
    pub denied: usize,
    /// Admission requests found in the input that could not be replayed faithfully.
    pub not_replayable: usize,
    /// Input items that could not be read (invalid lines or documents).
    pub invalid: usize,
    /// Configurations left out because they are unreadable or invalid.
    pub invalid_configurations: usize,
    /// Paths given on the command line that yield nothing usable (missing, unreadable, no valid
    /// configuration, no readable request): the replay exits 2 when there is any.
    pub unusable: usize,
    /// Audit requests read that did not go through admission, counted once at their final
    /// stage: reads (`get`, `list`, `watch`), non-resource requests, requests authorization
    /// refused.
    pub skipped_events: u64,
    /// Warnings about what was used as it stands (a configuration replacing another of the same
    /// kind and name, an apiVersion the modelled release no longer serves).
    pub warnings: usize,
    /// Why requests were not replayed: reason → count.
    pub reasons: BTreeMap<String, usize>,
    /// Webhook calls answered from nothing (no recorded reply).
    pub missing_replies: usize,
}

/// Something that was not replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// `notReplayable`, `invalid`, `configuration`, `unusable` or `warning`.
    pub kind: ProblemKind,
    /// Where.
    pub source: SourceRef,
    /// Field path, or empty.
    pub field: String,
    /// What and why.
    pub message: String,
}

/// Classes of [`Problem`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProblemKind {
    /// An admission request that cannot be replayed faithfully.
    NotReplayable,
    /// Unreadable input.
    Invalid,
    /// A webhook configuration left out.
    Configuration,
    /// A path given on the command line that yields nothing usable: it does not exist, cannot
    /// be read, holds no configuration the apiserver would accept (`--webhooks`) or no readable
    /// request (`--input`).
    Unusable,
    /// Something used as it stands, but worth knowing: a configuration that replaced another of
    /// the same kind and name, a configuration under an apiVersion the release no longer serves.
    Warning,
}

impl Problem {
    /// A problem known only by its text (no file position).
    pub fn note(kind: ProblemKind, message: String) -> Self {
        Problem {
            kind,
            source: SourceRef {
                file: String::new(),
                index: 0,
                unit: Default::default(),
                audit_id: None,
                line: None,
            },
            field: String::new(),
            message,
        }
    }

    /// The kind in words, as the console lists it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ProblemKind::NotReplayable => "not replayable",
            ProblemKind::Invalid => "invalid",
            ProblemKind::Configuration => "configuration left out",
            ProblemKind::Unusable => "unusable",
            ProblemKind::Warning => "warning",
        }
    }

    /// A problem from an input item.
    pub fn from_input(kind: ProblemKind, p: &InputProblem) -> Self {
        Problem {
            kind,
            source: p.source.clone(),
            field: p.field.clone(),
            message: p.message.clone(),
        }
    }
}

/// The error an API client would receive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientStatus {
    /// HTTP status code.
    pub code: i32,
    /// Message.
    pub message: String,
    /// Reason (`Forbidden`, `InternalError`, …), or empty.
    pub reason: String,
}

/// One replayed request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestReport {
    /// Where the request was read.
    pub source: SourceRef,
    /// The captured uid.
    pub uid: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// `group/version, Kind=…` spelled as `{group, kind, version}`.
    pub kind: ReportKind,
    /// `{group, resource, version}`.
    pub resource: ReportResource,
    /// Subresource, or empty.
    pub sub_resource: String,
    /// Namespace, or empty.
    pub namespace: String,
    /// Name, or empty.
    pub name: String,
    /// Whether the request was a dry run.
    pub dry_run: bool,
    /// The verdict.
    pub allowed: bool,
    /// What the client gets back when refused.
    pub status: Option<ClientStatus>,
    /// Warnings returned to the client.
    pub warnings: Vec<String>,
    /// Audit annotations, exactly as the apiserver writes them at the chosen level.
    pub annotations: BTreeMap<String, String>,
    /// The object after the mutating chain, or null (shared with the outcome). Written as the
    /// webhooks received it: the text it was captured as, when it was sent so.
    #[serde(serialize_with = "ser_object")]
    pub object: Option<Arc<Object>>,
    /// One entry per webhook considered.
    pub calls: Vec<CallReport>,
    /// What the replay had to assume (unknown namespace labels, …).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the apiserver recorded for this request, when it came from an audit log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recorded>,
}

/// A request's kind in the report (the request's own, shared), written with its fields in the
/// report's (alphabetical) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportKind(pub Arc<GroupVersionKind>);

impl std::ops::Deref for ReportKind {
    type Target = GroupVersionKind;

    fn deref(&self) -> &GroupVersionKind {
        &self.0
    }
}

impl Serialize for ReportKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ReportKind", 3)?;
        st.serialize_field("group", &self.group)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("version", &self.version)?;
        st.end()
    }
}

/// A request's resource in the report (the request's own, shared), written with its fields in
/// the report's (alphabetical) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportResource(pub Arc<GroupVersionResource>);

impl std::ops::Deref for ReportResource {
    type Target = GroupVersionResource;

    fn deref(&self) -> &GroupVersionResource {
        &self.0
    }
}

impl Serialize for ReportResource {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("ReportResource", 3)?;
        st.serialize_field("group", &self.group)?;
        st.serialize_field("resource", &self.resource)?;
        st.serialize_field("version", &self.version)?;
        st.end()
    }
}

/// What an audit log recorded for the original request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// `responseStatus.code`.
    pub code: Option<i32>,
    /// The admission annotations recorded (`mutation.` and `patch.webhook.admission.k8s.io/…`,
    /// and the webhooks' own audit annotations).
    pub annotations: BTreeMap<String, String>,
}

/// One webhook considered for one request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallReport {
    /// `mutatingPolicy` (a MutatingAdmissionPolicy with one binding: `configuration` is the
    /// policy, `webhook` the binding), `mutating`, `validatingPolicy` (the same for a
    /// ValidatingAdmissionPolicy) or `validating`.
    pub phase: &'static str,
    /// Reinvocation round.
    pub round: u8,
    /// Annotation index.
    pub index: usize,
    /// Configuration name.
    pub configuration: Arc<str>,
    /// Webhook name.
    pub webhook: Arc<str>,
    /// `called` or `skipped`.
    pub decision: &'static str,
    /// Why it was skipped.
    pub skip_reason: Option<Arc<str>>,
    /// Its verdict, when it answered.
    pub allowed: Option<bool>,
    /// Whether its patch changed the object.
    pub mutated: bool,
    /// Its patch, decoded.
    pub patch: Option<Value>,
    /// The error, when the call failed.
    pub error: Option<Box<str>>,
    /// Failure policy in force.
    pub failure_policy: &'static str,
    /// How long the call took.
    pub duration_ms: f64,
}

impl CallReport {
    fn new(c: CallRecord, redact: bool) -> Self {
        let mut patch = c.patch_value();
        if redact && let Some(p) = &mut patch {
            redact_patch(p);
        }
        CallReport {
            phase: match c.phase {
                WebhookKind::Mutating if c.policy.is_some() => "mutatingPolicy",
                _ if c.policy.is_some() => "validatingPolicy",
                WebhookKind::Mutating => "mutating",
                WebhookKind::Validating => "validating",
            },
            round: c.round,
            index: c.index,
            configuration: c.configuration,
            webhook: c.webhook,
            decision: match c.decision {
                CallDecision::Called => "called",
                CallDecision::Skipped => "skipped",
            },
            skip_reason: c.skip_reason,
            allowed: c.allowed,
            mutated: c.mutated,
            patch,
            error: c.error,
            failure_policy: c.failure_policy,
            duration_ms: c.duration_ms,
        }
    }
}

/// How the report treats Secret data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretPolicy {
    /// `data` and `stringData` values of Secrets are replaced by a placeholder (the default).
    #[default]
    Redact,
    /// Secrets are shown as captured.
    Show,
}

/// The placeholder written instead of a Secret value.
pub const REDACTED: &str = "<redacted>";

/// True for core/v1 Secrets.
pub fn is_secret(req: &CapturedRequest) -> bool {
    req.attrs.kind.group.is_empty() && req.attrs.kind.kind == "Secret"
}

/// Replaces the values of a Secret's `data` and `stringData`.
pub fn redact_secret(object: &mut Value) {
    for field in ["data", "stringData"] {
        if let Some(Value::Object(m)) = object.get_mut(field) {
            for v in m.values_mut() {
                *v = Value::String(REDACTED.into());
            }
        }
    }
}

/// Redacts the values a patch writes under `/data` or `/stringData`, or a whole object it writes.
pub fn redact_patch(patch: &mut Value) {
    let Value::Array(ops) = patch else { return };
    for op in ops {
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let whole = path.is_empty() || path == "/";
        let secret = path.starts_with("/data") || path.starts_with("/stringData");
        if let Some(v) = op.get_mut("value") {
            if whole {
                redact_secret(v);
            } else if secret {
                match v {
                    Value::Object(m) => m
                        .values_mut()
                        .for_each(|x| *x = Value::String(REDACTED.into())),
                    _ => *v = Value::String(REDACTED.into()),
                }
            }
        }
    }
}

/// Annotations that admission writes, out of everything an audit event carries.
pub fn is_admission_annotation(key: &str) -> bool {
    !key.starts_with("authorization.k8s.io/")
        && !key.starts_with("authentication.k8s.io/")
        && !key.starts_with("pod-security.kubernetes.io/")
        && !key.starts_with("apiserver.latency.k8s.io/")
}

/// An object as the webhooks received it: the text it was captured as, when it has one (in JSON
/// output that text is written as it stands, and laid out like the rest by the report's writer),
/// else its value.
fn ser_object<S: serde::Serializer>(o: &Option<Arc<Object>>, s: S) -> Result<S::Ok, S::Error> {
    let Some(o) = o.as_deref() else {
        return s.serialize_none();
    };
    match o
        .json()
        .and_then(|t| crate::json::from_str::<&serde_json::value::RawValue>(t).ok())
    {
        Some(raw) => raw.serialize(s),
        None => o.value().serialize(s),
    }
}

impl RequestReport {
    /// The report entry of one replayed request, made of the request and its outcome (their
    /// strings are moved, not copied).
    pub fn new(
        req: CapturedRequest,
        outcome: Outcome,
        level: AuditLevel,
        secrets: SecretPolicy,
    ) -> Self {
        let redact = secrets == SecretPolicy::Redact && is_secret(&req);
        let annotations = outcome.annotations_at(level);
        let mut object = outcome.object;
        if redact && let Some(o) = &mut object {
            redact_secret(Arc::make_mut(o).value_mut());
        }
        let notes = req.notes;
        let a = req.attrs;
        RequestReport {
            source: req.source,
            uid: req.uid,
            operation: a.operation,
            kind: ReportKind(a.kind),
            resource: ReportResource(a.resource),
            sub_resource: a.sub_resource,
            namespace: a.namespace,
            name: a.name,
            dry_run: a.dry_run,
            allowed: outcome.allowed,
            status: outcome.status.map(|s| ClientStatus {
                code: s.code,
                message: s.message,
                reason: s.reason,
            }),
            warnings: outcome.warnings,
            annotations,
            object,
            calls: outcome
                .calls
                .into_iter()
                .map(|c| CallReport::new(c, redact))
                .collect(),
            notes,
            recorded: req.audit.map(|o| Recorded {
                code: o.response_code,
                annotations: o
                    .annotations
                    .into_iter()
                    .filter(|(k, _)| is_admission_annotation(k))
                    .collect(),
            }),
        }
    }

    /// `CREATE configmaps default/name` style label.
    pub fn title(&self) -> String {
        let mut resource = self.resource.resource.clone();
        if !self.sub_resource.is_empty() {
            resource = format!("{resource}/{}", self.sub_resource);
        }
        let group = &self.resource.group;
        if !group.is_empty() {
            resource = format!("{resource}.{group}");
        }
        let name = match (self.namespace.as_str(), self.name.as_str()) {
            ("", "") => String::new(),
            ("", n) => n.to_string(),
            (ns, "") => format!("{ns}/"),
            (ns, n) => format!("{ns}/{n}"),
        };
        let dry = if self.dry_run { " (dry run)" } else { "" };
        format!("{} {resource} {name}{dry}", self.operation.as_str())
            .trim_end()
            .to_string()
    }
}

impl Report {
    /// An empty report.
    pub fn new(kube_version: KubeVersion, level: AuditLevel) -> Self {
        Report {
            kube_version: kube_version.to_string(),
            audit_level: level.to_string(),
            requests: Vec::new(),
            summary: Summary::default(),
            problems: Vec::new(),
        }
    }

    /// Adds a replayed request.
    pub fn push_request(&mut self, r: RequestReport) {
        self.tally(r.allowed);
        self.requests.push(r);
    }

    /// Counts a replayed request without keeping it (long replays that need no JSON report).
    pub fn tally(&mut self, allowed: bool) {
        self.summary.total += 1;
        if allowed {
            self.summary.allowed += 1;
        } else {
            self.summary.denied += 1;
        }
    }

    /// Adds a problem.
    pub fn push_problem(&mut self, p: Problem) {
        match p.kind {
            ProblemKind::NotReplayable => {
                self.summary.not_replayable += 1;
                *self
                    .summary
                    .reasons
                    .entry(reason_class(&p.message))
                    .or_default() += 1;
            }
            ProblemKind::Invalid => self.summary.invalid += 1,
            ProblemKind::Configuration => self.summary.invalid_configurations += 1,
            ProblemKind::Unusable => self.summary.unusable += 1,
            ProblemKind::Warning => self.summary.warnings += 1,
        }
        self.problems.push(p);
    }
}

/// The reason of a not-replayable message without its specifics: the text before the first
/// colon (`old object unknown: configmaps default/x` counts as `old object unknown`).
fn reason_class(message: &str) -> String {
    message
        .split(':')
        .next()
        .unwrap_or(message)
        .trim()
        .to_string()
}

/// Writes a [`Report`] as it is produced: the requests stream out one by one, so a long replay
/// never holds them all; the summary and problems follow at the end. The text is the same as
/// `serde_json::to_string_pretty` of the whole report.
pub struct ReportWriter<W: std::io::Write> {
    out: W,
    requests: usize,
    /// One request's text, reused: the writer behind `out` sees one write per request.
    buf: Vec<u8>,
}

/// serde_json's pretty layout (two spaces per level) for a value nested `base` levels deep, so
/// that it can be written in place inside the enclosing document.
struct Nested {
    level: usize,
    has_value: bool,
}

impl Nested {
    fn new(base: usize) -> Self {
        Self {
            level: base,
            has_value: false,
        }
    }

    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W, lead: &[u8]) -> std::io::Result<()> {
        const SPACES: &[u8] = &[b' '; 64];
        w.write_all(lead)?;
        let mut n = self.level * 2;
        while n > 0 {
            let k = n.min(SPACES.len());
            w.write_all(&SPACES[..k])?;
            n -= k;
        }
        Ok(())
    }

    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(c)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w, b"\n")?;
        }
        w.write_all(c)
    }

    fn item<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.newline(w, if first { b"\n" } else { b",\n" })
    }
}

impl serde_json::ser::Formatter for Nested {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    /// A raw fragment here is compact JSON (an object's captured text): it is written in the
    /// layout it would have had if serialised here.
    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(fragment.len() * 2);
        reindent(&mut out, fragment.as_bytes(), self.level);
        w.write_all(&out)
    }
}

/// Appends `compact` (compact JSON) in the report's pretty layout, `level` levels deep.
///
/// One step per token: a string is copied whole (found by its closing quote), punctuation
/// becomes its pretty form, and anything else (numbers, literals) is copied up to the next
/// punctuation, so that text this does not expect still comes out as it was.
fn reindent(out: &mut Vec<u8>, b: &[u8], mut level: usize) {
    // The pretty text is rarely more than twice the compact one: one reservation for most.
    out.reserve(b.len() * 2);
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match c {
            b'"' => {
                // A string is copied as it stands: on to its closing quote.
                let end = quoted_end(b, i + 1);
                copy_short(out, b, i, end);
                i = end;
            }
            b'{' | b'[' => {
                // `}` and `]` follow `{` and `[` by two in ASCII.
                let close = c + 2;
                if b.get(i + 1) == Some(&close) {
                    out.extend_from_slice(&[c, close]);
                    i += 2;
                } else {
                    level += 1;
                    out.push(c);
                    line(out, false, level);
                    i += 1;
                }
            }
            b'}' | b']' => {
                level = level.saturating_sub(1);
                line(out, false, level);
                out.push(c);
                i += 1;
            }
            b',' => {
                line(out, true, level);
                i += 1;
            }
            b':' => {
                out.extend_from_slice(b": ");
                i += 1;
            }
            _ => {
                let start = i;
                while let Some(&d) = b.get(i) {
                    if matches!(d, b'"' | b'{' | b'[' | b'}' | b']' | b',' | b':') {
                        break;
                    }
                    i += 1;
                }
                copy_short(out, b, start, i);
            }
        }
    }
}

/// End (after the closing quote) of the string whose content starts at `k`, or the end of `b`
/// when it is not closed: a word at a time while words are whole, without the longer strides
/// of [`crate::scan::quote_or_backslash`], which the short strings of an object do not reach.
#[inline(always)]
fn quoted_end(b: &[u8], mut k: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `w` equal to `byte`; only the lowest is exact.
    let flags = |w: u64, byte: u8| {
        let x = w ^ (ONES * u64::from(byte));
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    while let Some(w) = b.get(k..).and_then(|rest| rest.first_chunk::<8>()) {
        let w = u64::from_le_bytes(*w);
        let hits = flags(w, b'"') | flags(w, b'\\');
        if hits == 0 {
            k += 8;
            continue;
        }
        let q = k + (hits.trailing_zeros() / 8) as usize;
        if b[q] == b'"' {
            return q + 1;
        }
        k = q + 2;
    }
    while let Some(&c) = b.get(k) {
        match c {
            b'"' => return k + 1,
            b'\\' => k += 2,
            _ => k += 1,
        }
    }
    b.len()
}

/// Appends `b[start..end]`: for a short run (most strings of an object) as one copy of constant
/// length whose tail is cut off again, which compiles to a few moves rather than a call.
#[inline(always)]
fn copy_short(out: &mut Vec<u8>, b: &[u8], start: usize, end: usize) {
    const CHUNK: usize = 16;
    if end - start <= CHUNK
        && let Some(chunk) = b.get(start..).and_then(|rest| rest.first_chunk::<CHUNK>())
    {
        let at = out.len();
        out.extend_from_slice(chunk);
        out.truncate(at + (end - start));
    } else {
        out.extend_from_slice(&b[start..end]);
    }
}

/// Appends `value` pretty-printed as if nested `level` levels deep.
fn write_nested<T: Serialize>(buf: &mut Vec<u8>, value: &T, level: usize) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *buf, Nested::new(level));
    value.serialize(&mut ser).map_err(std::io::Error::other)
}

/// Appends `s` as a JSON string, escaped as serde_json escapes it.
fn write_str(buf: &mut Vec<u8>, s: &str) {
    if !crate::scan::needs_json_escape(s.as_bytes()) {
        buf.reserve(s.len() + 2);
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde::Serializer::serialize_str(&mut serde_json::Serializer::new(&mut *buf), s);
    }
}

/// A newline (after a comma when `comma`) and the indentation of `level`, two spaces a level.
fn line(buf: &mut Vec<u8>, comma: bool, level: usize) {
    /// A comma, a newline and the indentation of up to [`FAST`] levels, with room to spare.
    const LINE: &[u8; 2 + 2 * 48] = b",\n                                                                                                ";
    /// Levels whose line is one copy of constant length (32 bytes from [`LINE`], of which
    /// the unwanted tail is cut off again): a few moves, whatever the level.
    const FAST: usize = 15;
    let from = usize::from(!comma);
    let len = 2 - from + level * 2;
    if level <= FAST
        && let Some(chunk) = LINE[from..].first_chunk::<32>()
    {
        let at = buf.len();
        buf.extend_from_slice(chunk);
        buf.truncate(at + len);
        return;
    }
    buf.extend_from_slice(&LINE[from..2]);
    buf.resize(buf.len() + level * 2, b' ');
}

/// A field name as [`Fields`] writes it: quoted, then `: `.
macro_rules! key {
    ($name:literal) => {
        concat!("\"", $name, "\": ")
    };
}

/// A JSON object written field by field in the report's pretty layout, `level` levels deep: the
/// request entries' hot path, the same text as serde writes for them (which stays the definition,
/// and the tests hold the two equal).
struct Fields<'a> {
    buf: &'a mut Vec<u8>,
    level: usize,
    first: bool,
}

impl<'a> Fields<'a> {
    fn begin(buf: &'a mut Vec<u8>, level: usize) -> Self {
        buf.push(b'{');
        Fields {
            buf,
            level,
            first: true,
        }
    }

    /// Starts a field; `key` is the field's name already quoted and followed by `: ` (see
    /// [`key!`]).
    #[inline(always)]
    fn key(&mut self, key: &str) {
        line(self.buf, !self.first, self.level + 1);
        self.first = false;
        self.buf.extend_from_slice(key.as_bytes());
    }

    #[inline(always)]
    fn str(&mut self, key: &str, v: &str) {
        self.key(key);
        write_str(self.buf, v);
    }

    #[inline(always)]
    fn opt_str(&mut self, key: &str, v: Option<&str>) {
        match v {
            Some(v) => self.str(key, v),
            None => self.raw(key, "null"),
        }
    }

    #[inline(always)]
    fn raw(&mut self, key: &str, text: &str) {
        self.key(key);
        self.buf.extend_from_slice(text.as_bytes());
    }

    #[inline(always)]
    fn bool(&mut self, key: &str, v: bool) {
        self.raw(key, if v { "true" } else { "false" });
    }

    #[inline(always)]
    fn uint(&mut self, key: &str, v: u64) {
        self.key(key);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    /// A field whose value serde writes (rare or irregular values).
    fn value<T: Serialize>(&mut self, key: &str, v: &T) -> std::io::Result<()> {
        self.key(key);
        write_nested(self.buf, v, self.level + 1)
    }

    /// A nested object of string fields.
    #[inline(always)]
    fn strs<const N: usize>(&mut self, key: &str, fields: [(&str, &String); N]) {
        self.key(key);
        let mut inner = Fields::begin(self.buf, self.level + 1);
        for (k, v) in fields {
            inner.str(k, v);
        }
        inner.end();
    }

    fn strings(&mut self, key: &str, items: &[String]) {
        self.key(key);
        if items.is_empty() {
            self.buf.extend_from_slice(b"[]");
            return;
        }
        self.buf.push(b'[');
        for (i, item) in items.iter().enumerate() {
            line(self.buf, i > 0, self.level + 2);
            write_str(self.buf, item);
        }
        line(self.buf, false, self.level + 1);
        self.buf.push(b']');
    }

    fn map(&mut self, key: &str, map: &BTreeMap<String, String>) {
        self.key(key);
        let mut inner = Fields::begin(self.buf, self.level + 1);
        for (k, v) in map {
            line(inner.buf, !inner.first, inner.level + 1);
            inner.first = false;
            write_str(inner.buf, k);
            inner.buf.extend_from_slice(b": ");
            write_str(inner.buf, v);
        }
        inner.end();
    }

    fn end(self) {
        if !self.first {
            line(self.buf, false, self.level);
        }
        self.buf.push(b'}');
    }
}

impl RequestReport {
    /// Appends this entry as the report writes it, `level` levels deep: the text of
    /// `write_nested(buf, self, level)`, written without serde's per-field machinery.
    fn write(&self, buf: &mut Vec<u8>, level: usize) -> std::io::Result<()> {
        let mut f = Fields::begin(buf, level);
        f.key(key!("source"));
        let mut source = Fields::begin(f.buf, level + 1);
        source.str(key!("file"), &self.source.file);
        source.uint(key!("index"), self.source.index as u64);
        if let Some(id) = &self.source.audit_id {
            source.str(key!("auditID"), id);
        }
        source.end();
        f.str(key!("uid"), &self.uid);
        f.str(key!("operation"), self.operation.as_str());
        let k = &self.kind;
        let kind = [
            (key!("group"), &k.group),
            (key!("kind"), &k.kind),
            (key!("version"), &k.version),
        ];
        f.strs(key!("kind"), kind);
        let r = &self.resource;
        let resource = [
            (key!("group"), &r.group),
            (key!("resource"), &r.resource),
            (key!("version"), &r.version),
        ];
        f.strs(key!("resource"), resource);
        f.str(key!("subResource"), &self.sub_resource);
        f.str(key!("namespace"), &self.namespace);
        f.str(key!("name"), &self.name);
        f.bool(key!("dryRun"), self.dry_run);
        f.bool(key!("allowed"), self.allowed);
        match &self.status {
            None => f.raw(key!("status"), "null"),
            Some(status) => f.value(key!("status"), status)?,
        }
        f.strings(key!("warnings"), &self.warnings);
        f.map(key!("annotations"), &self.annotations);
        f.key(key!("object"));
        match self.object.as_deref() {
            None => f.buf.extend_from_slice(b"null"),
            // The text was checked when it was captured: compact JSON of an object.
            Some(o) => match o.json() {
                Some(text) => reindent(f.buf, text.as_bytes(), level + 1),
                None => write_nested(f.buf, o.value(), level + 1)?,
            },
        }
        f.key(key!("calls"));
        if self.calls.is_empty() {
            f.buf.extend_from_slice(b"[]");
        } else {
            f.buf.push(b'[');
            for (i, call) in self.calls.iter().enumerate() {
                line(f.buf, i > 0, level + 2);
                call.write(f.buf, level + 2)?;
            }
            line(f.buf, false, level + 1);
            f.buf.push(b']');
        }
        if !self.notes.is_empty() {
            f.strings(key!("notes"), &self.notes);
        }
        if let Some(recorded) = &self.recorded {
            f.value(key!("recorded"), recorded)?;
        }
        f.end();
        Ok(())
    }
}

impl CallReport {
    /// Appends this call as [`RequestReport::write`] does.
    fn write(&self, buf: &mut Vec<u8>, level: usize) -> std::io::Result<()> {
        let mut f = Fields::begin(buf, level);
        f.str(key!("phase"), self.phase);
        f.uint(key!("round"), self.round.into());
        f.uint(key!("index"), self.index as u64);
        f.str(key!("configuration"), &self.configuration);
        f.str(key!("webhook"), &self.webhook);
        f.str(key!("decision"), self.decision);
        f.opt_str(key!("skipReason"), self.skip_reason.as_deref());
        match self.allowed {
            Some(a) => f.bool(key!("allowed"), a),
            None => f.raw(key!("allowed"), "null"),
        }
        f.bool(key!("mutated"), self.mutated);
        f.value(key!("patch"), &self.patch)?;
        f.opt_str(key!("error"), self.error.as_deref());
        f.str(key!("failurePolicy"), self.failure_policy);
        f.value(key!("durationMs"), &self.duration_ms)?;
        f.end();
        Ok(())
    }
}

impl<W: std::io::Write> ReportWriter<W> {
    /// Writes the opening of the report.
    pub fn begin(mut out: W, kube_version: &str, level: &str) -> std::io::Result<Self> {
        write!(
            out,
            "{{\n  \"kubeVersion\": {},\n  \"auditLevel\": {},\n  \"requests\": [",
            Value::from(kube_version),
            Value::from(level)
        )?;
        Ok(Self {
            out,
            requests: 0,
            buf: Vec::new(),
        })
    }

    /// Writes one request.
    pub fn request(&mut self, r: &RequestReport) -> std::io::Result<()> {
        self.buf.clear();
        let sep: &[u8] = if self.requests == 0 { b"" } else { b"," };
        self.buf.extend_from_slice(sep);
        self.buf.extend_from_slice(b"\n    ");
        r.write(&mut self.buf, 2)?;
        self.out.write_all(&self.buf)?;
        self.requests += 1;
        Ok(())
    }

    /// Writes the summary and problems of `report` (its `requests` are ignored: they were
    /// streamed) and closes the document.
    pub fn finish(mut self, report: &Report) -> std::io::Result<W> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let close: &[u8] = if self.requests == 0 { b"]" } else { b"\n  ]" };
        buf.extend_from_slice(close);
        buf.extend_from_slice(b",\n  \"summary\": ");
        write_nested(&mut buf, &report.summary, 1)?;
        buf.extend_from_slice(b",\n  \"problems\": ");
        write_nested(&mut buf, &report.problems, 1)?;
        buf.extend_from_slice(b"\n}\n");
        self.out.write_all(&buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::IndexUnit;

    use proptest::prelude::*;
    use serde_json::value::RawValue;

    /// `value` written by the report's writer `level` deep, as a value and as compact text.
    fn both_ways(value: &Value, level: usize) -> (String, String) {
        let text = serde_json::to_string(value).unwrap();
        let raw: &RawValue = crate::json::from_str(&text).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_nested(&mut a, value, level).unwrap();
        write_nested(&mut b, &raw, level).unwrap();
        (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap())
    }

    #[test]
    fn lines_are_indented_two_spaces_a_level_at_any_depth() {
        for level in 0..80 {
            for comma in [false, true] {
                let mut buf = b"x".to_vec();
                line(&mut buf, comma, level);
                let comma = if comma { "," } else { "" };
                let want = format!("x{comma}\n{}", " ".repeat(level * 2));
                assert_eq!(String::from_utf8(buf).unwrap(), want, "{level}");
            }
        }
    }

    #[test]
    fn captured_text_is_laid_out_as_a_serialised_value() {
        let values = [
            serde_json::json!({}),
            serde_json::json!([]),
            serde_json::json!({"a": {}, "b": [], "c": [[], {}], "d": [1, [2, {"e": null}]]}),
            serde_json::json!({"s": "{[,:]}\"\\", "t": "\\", "u": "é\u{2028}<>", "n": -1.5e-7}),
            serde_json::json!({"k\"{": {"x,": true, "y:": false}}),
        ];
        for v in &values {
            for level in 0..4 {
                let (serialised, raw) = both_ways(v, level);
                assert_eq!(raw, serialised, "{v} at {level}");
            }
        }
        assert_eq!(
            both_ways(&values[2], 0).0,
            serde_json::to_string_pretty(&values[2]).unwrap()
        );
    }

    #[test]
    fn strings_of_every_length_are_copied_whole_wherever_they_end() {
        for len in 0..40 {
            let text = "ab\\\"é".repeat(len / 5) + &"x".repeat(len % 5);
            let values = [
                serde_json::json!(text),
                serde_json::json!({ &text: text, "n": len, "l": [text, len] }),
                serde_json::json!([len, [text]]),
                serde_json::json!({ "k": len }),
            ];
            for v in &values {
                for level in 0..3 {
                    let (serialised, raw) = both_ways(v, level);
                    assert_eq!(raw, serialised, "{v} at {level}");
                }
            }
        }
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,6}".prop_map(Value::String),
            proptest::sample::select(vec!["{", "}", "[", "]", ",", ":", "\"", "\\", "\\\""])
                .prop_map(Value::from),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(5, 40, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c{}:,\"\\\\]{0,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_compact_text_is_laid_out_as_its_value(v in value(), level in 0usize..4) {
            let (serialised, raw) = both_ways(&v, level);
            prop_assert_eq!(raw, serialised);
        }
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9./-]{0,12}",
            "\\PC{0,8}",
            proptest::sample::select(vec!["", "\"", "\\", "\n\t\u{1}", "é\u{2028}", "a\"b\\c"])
                .prop_map(String::from),
        ]
    }

    fn call() -> impl Strategy<Value = CallReport> {
        (
            (any::<bool>(), any::<u8>(), any::<usize>(), text(), text()),
            (
                proptest::option::of(text()),
                proptest::option::of(any::<bool>()),
            ),
            (
                any::<bool>(),
                proptest::option::of(value()),
                proptest::option::of(text()),
            ),
            any::<f64>().prop_filter("finite", |f| f.is_finite()),
        )
            .prop_map(
                |(
                    (mutating, round, index, configuration, webhook),
                    (skip, allowed),
                    (mutated, patch, error),
                    duration_ms,
                )| CallReport {
                    phase: if mutating { "mutating" } else { "validating" },
                    round,
                    index,
                    configuration: configuration.into(),
                    webhook: webhook.into(),
                    decision: if skip.is_some() { "skipped" } else { "called" },
                    skip_reason: skip.map(Into::into),
                    allowed,
                    mutated,
                    patch,
                    error: error.map(Into::into),
                    failure_policy: "Ignore",
                    duration_ms,
                },
            )
    }

    fn object() -> impl Strategy<Value = Option<Arc<Object>>> {
        proptest::option::of((value(), any::<bool>()).prop_map(|(v, captured)| {
            let v = match v {
                Value::Object(_) => v,
                other => serde_json::json!({ "v": other }),
            };
            Arc::new(if captured {
                Object::from_checked_json(serde_json::to_string(&v).unwrap().into())
            } else {
                Object::new(v)
            })
        }))
    }

    fn request() -> impl Strategy<Value = RequestReport> {
        let strings = || proptest::collection::vec(text(), 0..3);
        (
            (text(), any::<usize>(), proptest::option::of(text()), text()),
            proptest::collection::vec(text(), 9),
            (
                any::<bool>(),
                any::<bool>(),
                proptest::option::of((any::<i32>(), text(), text())),
            ),
            (
                strings(),
                proptest::collection::btree_map(text(), text(), 0..3),
                object(),
            ),
            (proptest::collection::vec(call(), 0..3), strings()),
            proptest::option::of((
                proptest::option::of(any::<i32>()),
                proptest::collection::btree_map(text(), text(), 0..2),
            )),
        )
            .prop_map(
                |(
                    (file, index, audit_id, uid),
                    t,
                    (dry_run, allowed, status),
                    (warnings, annotations, object),
                    (calls, notes),
                    recorded,
                )| RequestReport {
                    source: SourceRef {
                        file,
                        index,
                        unit: IndexUnit::Line,
                        audit_id,
                        line: None,
                    },
                    uid,
                    operation: Operation::Update,
                    kind: ReportKind(GroupVersionKind::new(&t[0], &t[2], &t[1]).into()),
                    resource: ReportResource(GroupVersionResource::new(&t[3], &t[5], &t[4]).into()),
                    sub_resource: t[6].clone(),
                    namespace: t[7].clone(),
                    name: t[8].clone(),
                    dry_run,
                    allowed,
                    status: status.map(|(code, message, reason)| ClientStatus {
                        code,
                        message,
                        reason,
                    }),
                    warnings,
                    annotations,
                    object,
                    calls,
                    notes,
                    recorded: recorded.map(|(code, annotations)| Recorded { code, annotations }),
                },
            )
    }

    proptest! {
        #[test]
        fn a_request_entry_is_written_as_serde_writes_it(r in request(), level in 0usize..4) {
            let (mut fast, mut serde) = (Vec::new(), Vec::new());
            r.write(&mut fast, level).unwrap();
            write_nested(&mut serde, &r, level).unwrap();
            prop_assert_eq!(String::from_utf8(fast).unwrap(), String::from_utf8(serde).unwrap());
        }
    }

    #[test]
    fn a_captured_object_is_reported_as_captured() {
        let text = r#"{"kind":"ConfigMap","apiVersion":"v1","data":{"b":"\u00e9","a":"x"}}"#;
        let object = Some(Arc::new(Object::from_checked_json(text.into())));
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Nested::new(0));
        ser_object(&object, &mut ser).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "{\n  \"kind\": \"ConfigMap\",\n  \"apiVersion\": \"v1\",\n  \"data\": {\n    \"b\": \"\\u00e9\",\n    \"a\": \"x\"\n  }\n}"
        );
        assert!(
            !object.as_deref().unwrap().is_parsed(),
            "reported without parsing"
        );
        let mut changed = object.clone();
        Arc::make_mut(changed.as_mut().unwrap()).value_mut()["data"]["a"] = "y".into();
        let out = serde_json::to_string(&Wrap(&changed)).unwrap();
        assert_eq!(
            out,
            r#"{"apiVersion":"v1","data":{"a":"y","b":"é"},"kind":"ConfigMap"}"#
        );
    }

    struct Wrap<'a>(&'a Option<Arc<Object>>);

    impl Serialize for Wrap<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            ser_object(self.0, s)
        }
    }

    #[test]
    fn the_streamed_report_is_the_pretty_printed_report() {
        let mut report = Report::new(KubeVersion::default(), AuditLevel::Request);
        let mut writer = ReportWriter::begin(Vec::new(), &report.kube_version, &report.audit_level)
            .expect("begin");
        for i in 0..2 {
            let r = RequestReport {
                source: SourceRef {
                    file: "in.jsonl".into(),
                    index: i,
                    unit: IndexUnit::Line,
                    audit_id: None,
                    line: None,
                },
                uid: format!("u-{i}"),
                operation: Operation::Create,
                kind: ReportKind(GroupVersionKind::new("", "v1", "ConfigMap").into()),
                resource: ReportResource(GroupVersionResource::new("", "v1", "configmaps").into()),
                sub_resource: String::new(),
                namespace: "default".into(),
                name: "a\nb".into(),
                dry_run: false,
                allowed: true,
                status: None,
                warnings: vec![],
                annotations: BTreeMap::from([("k/v".into(), "{\"x\":1}".into())]),
                object: Some(Arc::new(
                    serde_json::json!({"data": {"k": "v"}, "list": [1, {"a": []}]}).into(),
                )),
                calls: vec![],
                notes: vec![],
                recorded: None,
            };
            writer.request(&r).expect("request");
            report.push_request(r);
        }
        report.push_problem(Problem {
            kind: ProblemKind::Invalid,
            source: SourceRef {
                file: "in.jsonl".into(),
                index: 3,
                unit: IndexUnit::Line,
                audit_id: None,
                line: None,
            },
            field: String::new(),
            message: "truncated".into(),
        });
        let streamed = String::from_utf8(writer.finish(&report).expect("finish")).unwrap();
        assert_eq!(
            streamed,
            serde_json::to_string_pretty(&report).unwrap() + "\n"
        );

        let empty = Report::new(KubeVersion::default(), AuditLevel::None);
        let writer =
            ReportWriter::begin(Vec::new(), &empty.kube_version, &empty.audit_level).unwrap();
        let streamed = String::from_utf8(writer.finish(&empty).unwrap()).unwrap();
        assert_eq!(
            streamed,
            serde_json::to_string_pretty(&empty).unwrap() + "\n"
        );
    }
}

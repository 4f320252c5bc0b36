//! Turning raw audit events into what the console shows, and into replayable requests.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::RawEvent;
use crate::replay::input::Reader;
use crate::replay::report::is_admission_annotation;
use crate::replay::{InputItem, InputProblem, SourceRef};

const MUTATION: &str = "mutation.webhook.admission.k8s.io/";
const PATCH: &str = "patch.webhook.admission.k8s.io/";
const FAILED_OPEN_MUTATION: &str = "failed-open.mutation.webhook.admission.k8s.io/";
const FAILED_OPEN_VALIDATING: &str = "failed-open.validating.webhook.admission.k8s.io/";

/// One audit event as the console shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// Where it came from (with its `auditID`).
    pub source: SourceRef,
    /// `auditID`: the same for every stage of one request.
    pub audit_id: String,
    /// `stage`: `RequestReceived`, `ResponseStarted`, `ResponseComplete` or `Panic`.
    pub stage: String,
    /// `level`: `Metadata`, `Request` or `RequestResponse`.
    pub level: String,
    /// `requestURI`.
    pub request_uri: String,
    /// `verb` (`create`, `update`, `patch`, `get`, …).
    pub verb: String,
    /// `user`: the authenticated user.
    pub user: AuditUser,
    /// `impersonatedUser`, when the request impersonated someone.
    pub impersonated_user: Option<AuditUser>,
    /// `userAgent`.
    pub user_agent: Option<String>,
    /// `sourceIPs`.
    pub source_ips: Vec<String>,
    /// `objectRef`; `None` for non-resource requests (`/healthz`, …).
    pub object_ref: Option<AuditObjectRef>,
    /// `responseStatus.code` (absent before the response).
    pub response_code: Option<i32>,
    /// `responseStatus.message`: why a request failed (which webhook denied it, what a call
    /// failed with), absent on success.
    pub response_message: Option<String>,
    /// `requestReceivedTimestamp`, as recorded (RFC 3339 with microseconds).
    pub request_received_timestamp: Option<String>,
    /// `stageTimestamp`, as recorded.
    pub stage_timestamp: Option<String>,
    /// The admission webhook annotations, parsed, by round, index, then kind.
    pub admission: Vec<AdmissionAnnotation>,
    /// The other admission-related annotations, raw (webhooks' own `auditAnnotations` as
    /// `<webhook>/<key>`, admission policies, pod security), and those of the keys above whose
    /// value could not be parsed. Authentication, authorization and latency annotations are left
    /// out.
    pub annotations: BTreeMap<String, String>,
    /// Annotation values that could not be parsed (the value is kept in
    /// [`annotations`](Self::annotations)).
    pub problems: Vec<InputProblem>,
}

impl AuditEvent {
    /// Whether this is the last stage of its request (`ResponseComplete` or `Panic`).
    pub fn is_final(&self) -> bool {
        matches!(self.stage.as_str(), "ResponseComplete" | "Panic")
    }
}

/// A user of an audit event.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct AuditUser {
    /// `username`.
    pub username: String,
    /// `uid`.
    pub uid: String,
    /// `groups`.
    pub groups: Vec<String>,
}

/// `objectRef` of an audit event.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditObjectRef {
    /// `apiGroup` (empty for the core group).
    pub api_group: String,
    /// `apiVersion`.
    pub api_version: String,
    /// `resource`.
    pub resource: String,
    /// `subresource`.
    pub subresource: String,
    /// `namespace`.
    pub namespace: String,
    /// `name`.
    pub name: String,
}

/// One admission webhook annotation: `<prefix>/round_{round}_index_{index}`.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionAnnotation {
    /// The annotation key as recorded.
    pub key: String,
    /// The value as recorded, byte for byte.
    pub value: String,
    /// The round (0, or 1 for a reinvocation).
    pub round: u32,
    /// The webhook's position among the webhooks of its kind, in the dispatcher's order.
    pub index: u32,
    /// What it says.
    pub kind: AnnotationKind,
}

/// What an admission webhook annotation says.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnotationKind {
    /// `mutation.webhook.admission.k8s.io/…` (level `Metadata`): a mutating webhook was called.
    Mutation {
        /// The MutatingWebhookConfiguration's name.
        configuration: String,
        /// The webhook's name.
        webhook: String,
        /// Whether its patch changed the object.
        mutated: bool,
    },
    /// `patch.webhook.admission.k8s.io/…` (level `Request`): the patch a webhook applied.
    Patch {
        /// The MutatingWebhookConfiguration's name.
        configuration: String,
        /// The webhook's name.
        webhook: String,
        /// The patch (a JSON patch for `JSONPatch`).
        patch: Value,
        /// `patchType`, e.g. `JSONPatch`.
        patch_type: String,
    },
    /// `failed-open.{mutation,validating}.webhook.admission.k8s.io/…`: the call failed and
    /// `failurePolicy: Ignore` let the request go on.
    FailedOpen {
        /// A mutating webhook (else a validating one).
        mutating: bool,
        /// The webhook's name (the annotation's value).
        webhook: String,
    },
}

impl AnnotationKind {
    fn order(&self) -> u8 {
        match self {
            AnnotationKind::Mutation { .. } => 0,
            AnnotationKind::Patch { .. } => 1,
            AnnotationKind::FailedOpen { .. } => 2,
        }
    }
}

/// What one raw event gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Ingested {
    /// The event as the console shows it, or why it could not be read (file or source, index,
    /// field): such an event is skipped.
    pub event: Result<AuditEvent, InputProblem>,
    /// What the replay reader made of it: requests (at the request's final stage),
    /// not-replayable requests with the reason, and invalid input.
    pub items: Vec<InputItem>,
    /// The event is an early stage of a request that went through admission: its request comes
    /// with the final stage (or from [`Ingester::finish`]).
    pub pending: bool,
}

/// Ingests raw audit events one at a time: the console's view of each, and the replay reader's
/// items, with its state (old objects, namespaces, pending stages) carried from one event to the
/// next.
#[derive(Debug)]
pub struct Ingester {
    reader: Reader,
}

impl Ingester {
    /// An ingester feeding `reader` (e.g. `Reader::new(ClusterState::default())`, or one that knows
    /// the cluster's objects).
    pub fn new(reader: Reader) -> Self {
        Ingester { reader }
    }

    /// The replay reader, for its counters.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The replay reader, to tell it what the cluster defines.
    pub fn reader_mut(&mut self) -> &mut Reader {
        &mut self.reader
    }

    /// Ingests one event.
    pub fn ingest(&mut self, raw: &RawEvent) -> Ingested {
        let mut items = Vec::new();
        let source = raw.origin.source_ref();
        let event = decode(&raw.text, source.clone());
        self.reader
            .read_document(source, &raw.text, &mut |item| items.push(item));
        let pending = event
            .as_ref()
            .is_ok_and(|e| !e.is_final() && self.reader.is_pending(&e.audit_id));
        Ingested {
            event,
            items,
            pending,
        }
    }

    /// Called when the stream ends: the requests still waiting for their final stage, from the
    /// latest stage seen, with a note.
    pub fn finish(&mut self) -> Vec<InputItem> {
        let mut items = Vec::new();
        self.reader.finish(&mut |item| items.push(item));
        items
    }
}

/// The members of an event the console shows, each kept as text to be decoded on its own (so a
/// bad one is named).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Members<'a> {
    #[serde(borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    api_version: Option<&'a RawValue>,
    #[serde(borrow)]
    level: Option<&'a RawValue>,
    #[serde(borrow, rename = "auditID")]
    audit_id: Option<&'a RawValue>,
    #[serde(borrow)]
    stage: Option<&'a RawValue>,
    #[serde(borrow, rename = "requestURI")]
    request_uri: Option<&'a RawValue>,
    #[serde(borrow)]
    verb: Option<&'a RawValue>,
    #[serde(borrow)]
    user: Option<&'a RawValue>,
    #[serde(borrow)]
    impersonated_user: Option<&'a RawValue>,
    #[serde(borrow, rename = "sourceIPs")]
    source_ips: Option<&'a RawValue>,
    #[serde(borrow)]
    user_agent: Option<&'a RawValue>,
    #[serde(borrow)]
    object_ref: Option<&'a RawValue>,
    #[serde(borrow)]
    response_status: Option<&'a RawValue>,
    #[serde(borrow)]
    request_received_timestamp: Option<&'a RawValue>,
    #[serde(borrow)]
    stage_timestamp: Option<&'a RawValue>,
    #[serde(borrow)]
    annotations: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Status {
    code: Option<i32>,
    message: Option<String>,
}

/// The JSON value of an annotation `mutation.webhook.admission.k8s.io/…`.
#[derive(Deserialize)]
struct MutationValue {
    configuration: String,
    webhook: String,
    mutated: bool,
}

/// The JSON value of an annotation `patch.webhook.admission.k8s.io/…`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PatchValue {
    configuration: String,
    webhook: String,
    patch: Value,
    patch_type: String,
}

fn problem(source: &SourceRef, field: &str, message: impl Into<String>) -> InputProblem {
    InputProblem {
        source: source.clone(),
        field: field.to_string(),
        message: message.into(),
    }
}

/// serde_json's message without its position (the field is named instead).
fn message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((m, _)) => m.to_string(),
        None => text,
    }
}

fn member<T: DeserializeOwned>(
    raw: Option<&RawValue>,
    field: &str,
    source: &SourceRef,
) -> Result<Option<T>, InputProblem> {
    match raw {
        None => Ok(None),
        Some(r) if r.get() == "null" => Ok(None),
        Some(r) => crate::json::from_str(r.get())
            .map(Some)
            .map_err(|e| problem(source, field, message(&e))),
    }
}

fn string(
    raw: Option<&RawValue>,
    field: &str,
    source: &SourceRef,
) -> Result<Option<String>, InputProblem> {
    member::<String>(raw, field, source)
}

/// Decodes the console's view of one event.
fn decode(text: &[u8], mut source: SourceRef) -> Result<AuditEvent, InputProblem> {
    let m: Members<'_> = crate::json::from_slice(text).map_err(|e| {
        let what = if e.is_syntax() || e.is_eof() {
            "invalid JSON"
        } else {
            "not an audit event"
        };
        problem(&source, "", format!("{what}: {}", message(&e)))
    })?;
    if let Some(id) = string(m.audit_id, "auditID", &source)? {
        source.audit_id = Some(id);
    }
    let kind = string(m.kind, "kind", &source)?;
    if kind.as_deref().is_some_and(|k| k != "Event") {
        return Err(problem(
            &source,
            "kind",
            format!(
                "{:?} is not an audit.k8s.io/v1 Event",
                kind.unwrap_or_default()
            ),
        ));
    }
    let api_version = string(m.api_version, "apiVersion", &source)?;
    if api_version
        .as_deref()
        .is_some_and(|v| v != "audit.k8s.io/v1")
    {
        return Err(problem(
            &source,
            "apiVersion",
            format!(
                "unsupported audit event version {:?} (audit.k8s.io/v1)",
                api_version.unwrap_or_default()
            ),
        ));
    }
    let Some(audit_id) = source.audit_id.clone() else {
        return Err(problem(&source, "auditID", "missing"));
    };
    let Some(stage) = string(m.stage, "stage", &source)? else {
        return Err(problem(&source, "stage", "missing"));
    };
    let annotations: BTreeMap<String, String> =
        member(m.annotations, "annotations", &source)?.unwrap_or_default();
    let status = member::<Status>(m.response_status, "responseStatus", &source)?;
    let mut event = AuditEvent {
        audit_id,
        stage,
        level: string(m.level, "level", &source)?.unwrap_or_default(),
        request_uri: string(m.request_uri, "requestURI", &source)?.unwrap_or_default(),
        verb: string(m.verb, "verb", &source)?.unwrap_or_default(),
        user: member(m.user, "user", &source)?.unwrap_or_default(),
        impersonated_user: member(m.impersonated_user, "impersonatedUser", &source)?,
        user_agent: string(m.user_agent, "userAgent", &source)?,
        source_ips: member(m.source_ips, "sourceIPs", &source)?.unwrap_or_default(),
        object_ref: member(m.object_ref, "objectRef", &source)?,
        response_code: None,
        response_message: None,
        request_received_timestamp: string(
            m.request_received_timestamp,
            "requestReceivedTimestamp",
            &source,
        )?,
        stage_timestamp: string(m.stage_timestamp, "stageTimestamp", &source)?,
        admission: Vec::new(),
        annotations: BTreeMap::new(),
        problems: Vec::new(),
        source,
    };
    if let Some(status) = status {
        event.response_code = status.code;
        event.response_message = status.message.filter(|m| !m.is_empty());
    }
    for (key, value) in annotations {
        match parse_annotation(&key, &value) {
            Ok(Some(a)) => event.admission.push(a),
            Ok(None) => {
                if is_admission_annotation(&key) {
                    event.annotations.insert(key, value);
                }
            }
            Err(message) => {
                event.problems.push(problem(
                    &event.source,
                    &format!("annotations[{key:?}]"),
                    message,
                ));
                event.annotations.insert(key, value);
            }
        }
    }
    event
        .admission
        .sort_by_key(|a| (a.round, a.index, a.kind.order()));
    Ok(event)
}

/// Parses an admission webhook annotation; `Ok(None)` for other keys.
fn parse_annotation(key: &str, value: &str) -> Result<Option<AdmissionAnnotation>, String> {
    let (rest, which) = if let Some(r) = key.strip_prefix(MUTATION) {
        (r, 0)
    } else if let Some(r) = key.strip_prefix(PATCH) {
        (r, 1)
    } else if let Some(r) = key.strip_prefix(FAILED_OPEN_MUTATION) {
        (r, 2)
    } else if let Some(r) = key.strip_prefix(FAILED_OPEN_VALIDATING) {
        (r, 3)
    } else {
        return Ok(None);
    };
    let (round, index) = round_index(rest)
        .ok_or_else(|| format!("expected a key ending in round_<r>_index_<i>, got {rest:?}"))?;
    let kind = match which {
        0 => {
            let v: MutationValue = crate::json::from_str(value)
                .map_err(|e| format!("invalid mutation annotation: {}", message(&e)))?;
            AnnotationKind::Mutation {
                configuration: v.configuration,
                webhook: v.webhook,
                mutated: v.mutated,
            }
        }
        1 => {
            let v: PatchValue = crate::json::from_str(value)
                .map_err(|e| format!("invalid patch annotation: {}", message(&e)))?;
            AnnotationKind::Patch {
                configuration: v.configuration,
                webhook: v.webhook,
                patch: v.patch,
                patch_type: v.patch_type,
            }
        }
        n => AnnotationKind::FailedOpen {
            mutating: n == 2,
            webhook: value.to_string(),
        },
    };
    Ok(Some(AdmissionAnnotation {
        key: key.to_string(),
        value: value.to_string(),
        round,
        index,
        kind,
    }))
}

/// `round_{r}_index_{i}`.
fn round_index(s: &str) -> Option<(u32, u32)> {
    let (round, index) = s.strip_prefix("round_")?.split_once("_index_")?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(round) || !digits(index) {
        return None;
    }
    Some((round.parse().ok()?, index.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_and_index() {
        assert_eq!(round_index("round_1_index_12"), Some((1, 12)));
        assert_eq!(round_index("round__index_1"), None);
        assert_eq!(round_index("round_1_index_x"), None);
        assert_eq!(round_index("index_1"), None);
    }

    #[test]
    fn annotation_values() {
        let a = parse_annotation(
            "mutation.webhook.admission.k8s.io/round_1_index_0",
            r#"{"configuration":"c","webhook":"w","mutated":true}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.round, a.index), (1, 0));
        assert!(matches!(
            a.kind,
            AnnotationKind::Mutation { mutated: true, .. }
        ));
        let f = parse_annotation(
            "failed-open.validating.webhook.admission.k8s.io/round_0_index_2",
            "v.example.com",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            f.kind,
            AnnotationKind::FailedOpen {
                mutating: false,
                webhook: "v.example.com".into()
            }
        );
        assert!(parse_annotation("patch.webhook.admission.k8s.io/round_0_index_0", "{").is_err());
        assert_eq!(
            parse_annotation("authorization.k8s.io/decision", "allow"),
            Ok(None)
        );
    }
}

//! The step-by-step account of one dispatch: what the console steps through and what the report
//! prints. Steps are in the order they happened; `at` is the engine's virtual clock (the sum of
//! call durations reported by the replier).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::audit::AuditLevel;
use super::matching::SkipReason;
use crate::api::{Status, WebhookKind};

/// Which webhook, in which phase, round and annotation index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookRef {
    /// Mutating or validating.
    pub phase: WebhookKind,
    /// 0, or 1 in the reinvocation round.
    pub round: u8,
    /// Annotation index (mutating: list position; validating: among matching hooks, or the list
    /// position for skipped ones).
    pub index: usize,
    /// Configuration name.
    #[serde(serialize_with = "ser_shared_str")]
    pub configuration: Arc<str>,
    /// Webhook name.
    #[serde(serialize_with = "ser_shared_str")]
    pub webhook: Arc<str>,
}

/// Serialises a shared string as the string itself.
pub(crate) fn ser_shared_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

/// Serialises a shared JSON value as the value itself.
pub(crate) fn ser_shared_value<S: serde::Serializer>(
    v: &Arc<Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    v.as_ref().serialize(s)
}

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Virtual time since the request started.
    #[serde(serialize_with = "ser_ms", rename = "atMs")]
    pub at: Duration,
    /// What happened.
    #[serde(flatten)]
    pub kind: StepKind,
}

/// Text that is usually JSON: written as JSON when it parses, as a string otherwise. Parsing
/// happens only when a trace is serialised, not while dispatching.
fn ser_json_text<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    match serde_json::value::RawValue::from_string(text.to_string()) {
        Ok(raw) => raw.serialize(s),
        Err(_) => s.serialize_str(text),
    }
}

fn ser_opt_json_text<S: serde::Serializer>(
    text: &Option<Arc<str>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match text {
        Some(t) => ser_json_text(t, s),
        None => s.serialize_none(),
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

/// An AdmissionReview as sent, kept as the parts calls share: the text around the objects (the
/// same for every call of a request with the same invocation) and the objects themselves (the
/// same allocations as the trace's and the request's), so a trace does not hold a serialised copy
/// of the object per call. [`ReviewBody::text`] writes the exact bytes sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewBody(Box<ReviewParts>);

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReviewParts {
    pub(crate) version: &'static str,
    pub(crate) uid: Arc<str>,
    pub(crate) head: Arc<str>,
    pub(crate) object: Option<Arc<Value>>,
    pub(crate) old_object: Option<Arc<Value>>,
    pub(crate) tail: Arc<str>,
}

impl ReviewBody {
    pub(crate) fn new(parts: ReviewParts) -> Self {
        ReviewBody(Box::new(parts))
    }

    /// The review exactly as sent.
    pub fn text(&self) -> String {
        let p = &self.0;
        let object = super::review::object_json(p.object.as_deref());
        let old_object = super::review::object_json(p.old_object.as_deref());
        let mut out = String::with_capacity(
            p.head.len() + p.tail.len() + object.len() + old_object.len() + 128,
        );
        super::review::write_review(
            &mut out,
            p.version,
            &p.uid,
            &p.head,
            &object,
            &old_object,
            &p.tail,
        );
        out
    }

    /// The object sent (relabelled to the invocation's kind when matched as an equivalent).
    pub fn object(&self) -> Option<&Value> {
        self.0.object.as_deref()
    }

    /// The old object sent.
    pub fn old_object(&self) -> Option<&Value> {
        self.0.old_object.as_deref()
    }
}

impl Serialize for ReviewBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ser_json_text(&self.text(), s)
    }
}

/// What a step records.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "camelCase")]
pub enum StepKind {
    /// A phase (mutating round 0/1, validating) begins.
    PhaseStarted {
        /// Mutating or validating.
        phase: WebhookKind,
        /// Round.
        round: u8,
    },
    /// The request is of a kind no API-registered webhook ever sees.
    RequestExempt {
        /// Why.
        reason: String,
    },
    /// A webhook was not called.
    Skipped {
        /// Which.
        hook: HookRef,
        /// Why (human-readable).
        reason: String,
        /// Why (structured).
        #[serde(skip)]
        cause: SkipReason,
    },
    /// A webhook matched and will be called.
    Matched {
        /// Which.
        hook: HookRef,
        /// Rule index that matched.
        rule: usize,
        /// Resource sent.
        resource: String,
        /// Kind sent.
        kind: String,
        /// Matched through matchPolicy Equivalent.
        equivalent: bool,
    },
    /// The AdmissionReview sent.
    ReviewSent {
        /// Which.
        hook: HookRef,
        /// Request URL.
        url: String,
        /// request.uid.
        uid: String,
        /// Timeout for this call.
        #[serde(serialize_with = "ser_ms", rename = "timeoutMs")]
        timeout: Duration,
        /// The review: [`ReviewBody::text`] gives exactly the JSON bytes sent.
        review: ReviewBody,
    },
    /// What came back.
    ReplyReceived {
        /// Which.
        hook: HookRef,
        /// HTTP status, if a response arrived.
        http_status: Option<u16>,
        /// The body parsed as JSON (or a string if it was not JSON), if a response arrived.
        #[serde(serialize_with = "ser_opt_json_text")]
        body: Option<Arc<str>>,
        /// Transport-level failure, if any.
        transport_error: Option<String>,
        /// Call duration.
        #[serde(serialize_with = "ser_ms", rename = "elapsedMs")]
        elapsed: Duration,
    },
    /// The webhook allowed the request without changing it.
    Allowed {
        /// Which.
        hook: HookRef,
    },
    /// The webhook denied the request.
    Denied {
        /// Which.
        hook: HookRef,
        /// The status the client gets (boxed: it is the largest field of any step).
        status: Box<Status>,
    },
    /// The call failed; failurePolicy decided.
    CallFailed {
        /// Which.
        hook: HookRef,
        /// upstream's `failed calling webhook` reason.
        error: String,
        /// Fail or Ignore.
        failure_policy: String,
        /// True when the request continued (fail open).
        failed_open: bool,
    },
    /// A patch was applied.
    PatchApplied {
        /// Which.
        hook: HookRef,
        /// The JSON patch as the webhook sent it (decoded).
        patch: Value,
        #[serde(serialize_with = "ser_shared_value")]
        /// Object before (shared with the request, the previous patch's `after`, or both).
        before: Arc<Value>,
        #[serde(serialize_with = "ser_shared_value")]
        /// Object after (shared with the next patch's `before` or the outcome's object).
        after: Arc<Value>,
        /// Whether the object changed semantically (drives reinvocation).
        changed: bool,
    },
    /// A patch could not be decoded or applied, or could not apply to this request.
    PatchFailed {
        /// Which.
        hook: HookRef,
        /// The error.
        error: String,
    },
    /// An audit annotation was written.
    Annotation {
        /// Key.
        key: String,
        /// Value.
        value: String,
        /// Lowest level showing it.
        level: AuditLevel,
    },
    /// An audit annotation was refused (invalid key, overwrite).
    AnnotationDropped {
        /// Key.
        key: String,
        /// Why.
        error: String,
    },
    /// A warning for the client.
    Warning {
        /// Which webhook sent it.
        hook: HookRef,
        /// Text.
        text: String,
        /// False when deduplicated or invalid.
        kept: bool,
    },
    /// A webhook metric changed.
    Metric {
        /// Metric family.
        name: Cow<'static, str>,
        /// Labels.
        labels: Vec<(Cow<'static, str>, String)>,
    },
    /// Reinvocation bookkeeping changed.
    Reinvocation {
        /// Which webhook caused it.
        hook: HookRef,
        /// Webhook UIDs now due for reinvocation.
        reinvoke: Vec<String>,
    },
    /// The final answer.
    Verdict {
        /// Allowed?
        allowed: bool,
        /// The status the client gets, when denied.
        status: Option<Box<Status>>,
    },
}

impl StepKind {
    /// The webhook the step concerns, if any.
    pub fn hook(&self) -> Option<&HookRef> {
        match self {
            StepKind::Skipped { hook, .. }
            | StepKind::Matched { hook, .. }
            | StepKind::ReviewSent { hook, .. }
            | StepKind::ReplyReceived { hook, .. }
            | StepKind::Allowed { hook }
            | StepKind::Denied { hook, .. }
            | StepKind::CallFailed { hook, .. }
            | StepKind::PatchApplied { hook, .. }
            | StepKind::PatchFailed { hook, .. }
            | StepKind::Warning { hook, .. }
            | StepKind::Reinvocation { hook, .. } => Some(hook),
            _ => None,
        }
    }
}

//! The step-by-step account of one dispatch: what the console steps through and what the report
//! prints. Steps are in the order they happened; `at` is the engine's virtual clock (the sum of
//! call durations reported by the replier).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::CallRecord;
use super::audit::AuditLevel;
use super::matching::SkipReason;
use super::object::Object;
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

/// Serialises an optional shared string as the string itself.
pub(crate) fn ser_opt_shared_str<S: serde::Serializer>(
    v: &Option<Arc<str>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    v.as_deref().serialize(s)
}

/// Serialises a shared object as the object's value.
pub(crate) fn ser_shared_object<S: serde::Serializer>(
    v: &Arc<Object>,
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
/// same for every call of a request with the same invocation, and in good part the same from
/// request to request) and the objects themselves (the same allocations as the trace's and the
/// request's), so a trace does not hold a serialised copy of the object per call.
/// [`ReviewBody::text`] writes the exact bytes sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewBody(Box<ReviewParts>);

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReviewParts {
    pub(crate) version: &'static str,
    pub(crate) uid: Box<str>,
    /// The webhook's URL before `?timeout=`, shared by its calls, and the seconds sent.
    pub(crate) url: Arc<str>,
    pub(crate) timeout_secs: u64,
    pub(crate) timeout: Duration,
    pub(crate) texts: Arc<ReviewTexts>,
    pub(crate) object: Option<Arc<Object>>,
    pub(crate) old_object: Option<Arc<Object>>,
    /// The kind the objects were sent as and the release whose Go types encoded them, for
    /// objects that were not given as text.
    pub(crate) kind: Arc<crate::api::GroupVersionKind>,
    pub(crate) release: crate::KubeVersion,
}

/// The text of a request's AdmissionReviews around the uid and the objects, in the pieces of
/// `review::request_head_pieces` and `review::request_tail`: the kinds, the user and the tail are
/// shared with the other requests that have the same (the engine keeps one copy of each), the
/// names are the request's own.
#[derive(Debug, PartialEq)]
pub(crate) struct ReviewTexts {
    pub(crate) kinds: Arc<str>,
    pub(crate) names: String,
    pub(crate) user: Arc<str>,
    pub(crate) tail: Arc<str>,
}

impl ReviewTexts {
    /// The text between the uid and the object, in pieces.
    pub(crate) fn head(&self) -> [&str; 3] {
        [&self.kinds, &self.names, &self.user]
    }
}

/// An object's text in a review: the one it was given as, or the apiserver's serialisation.
fn sent_json<'a>(object: &'a Option<Arc<Object>>, parts: &ReviewParts) -> Cow<'a, str> {
    match object.as_deref().and_then(Object::json) {
        Some(text) => Cow::Borrowed(text),
        None => Cow::Owned(super::review::typed_object_text(
            object.as_deref(),
            &parts.kind,
            parts.release,
        )),
    }
}

impl ReviewBody {
    pub(crate) fn new(parts: ReviewParts) -> Self {
        ReviewBody(Box::new(parts))
    }

    /// The review exactly as sent.
    pub fn text(&self) -> String {
        let p = &self.0;
        let object = sent_json(&p.object, p);
        let old_object = sent_json(&p.old_object, p);
        super::review::review_text(
            p.version,
            &p.uid,
            &p.texts.head(),
            &object,
            &old_object,
            &p.texts.tail,
        )
    }

    /// The object sent (converted to the invocation's version when matched as an equivalent).
    pub fn object(&self) -> Option<&Value> {
        self.0.object.as_deref().map(Object::value)
    }

    /// The old object sent.
    pub fn old_object(&self) -> Option<&Value> {
        self.0.old_object.as_deref().map(Object::value)
    }

    /// `request.uid` of the review.
    pub fn uid(&self) -> &str {
        &self.0.uid
    }

    /// The request URL, `?timeout=` included.
    pub fn url(&self) -> String {
        let secs = super::status::go_duration_secs(self.0.timeout_secs);
        let mut url = String::with_capacity(self.0.url.len() + 9 + secs.len());
        url.push_str(&self.0.url);
        url.push_str("?timeout=");
        url.push_str(&secs);
        url
    }

    /// The objects sent, as shared.
    fn shared_objects(&self) -> impl Iterator<Item = &Arc<Object>> {
        self.0.object.iter().chain(&self.0.old_object)
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
    /// The ValidatingAdmissionPolicy plugin begins (after the mutating webhooks, before the
    /// validating ones).
    PolicyPhaseStarted,
    /// A ValidatingAdmissionPolicy was considered with one of its bindings.
    PolicyEvaluated {
        /// Which: `configuration` is the policy, `webhook` the binding.
        hook: HookRef,
        /// `skipped: …`, `admitted`, `denied: …` (a failed validation with the Deny action),
        /// `failed: …` (an error under failurePolicy Fail) or `error ignored: …`.
        outcome: String,
        /// Its parameters and every expression's result.
        details: Box<super::policy::PolicyCall>,
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
        #[serde(serialize_with = "ser_shared_object")]
        /// Object before (shared with the request, the previous patch's `after`, or both).
        before: Arc<Object>,
        #[serde(serialize_with = "ser_shared_object")]
        /// Object after (shared with the next patch's `before` or the outcome's object).
        after: Arc<Object>,
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
            | StepKind::Reinvocation { hook, .. }
            | StepKind::PolicyEvaluated { hook, .. } => Some(hook),
            _ => None,
        }
    }
}

/// The trace as a dispatch keeps it: compact steps that name their webhook by the index of its
/// [`super::CallRecord`] and take texts the outcome already holds (skip reasons, errors, patches,
/// annotations, the verdict's status) from it. [`super::Outcome::steps`] expands it into
/// [`Step`]s.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    steps: Box<[TraceStep]>,
}

/// One compact step of a [`Trace`] (see [`super::Outcome::steps`] for its full form).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    at_nanos: u64,
    entry: Entry,
}

/// Index of a call record in the outcome.
type CallIx = u32;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    PhaseStarted {
        phase: WebhookKind,
        round: u8,
    },
    RequestExempt {
        reason: Box<str>,
    },
    PolicyPhaseStarted,
    PolicyEvaluated {
        call: CallIx,
    },
    Skipped {
        call: CallIx,
        cause: Box<SkipReason>,
    },
    Matched {
        call: CallIx,
        rule: u32,
        equivalent: bool,
        texts: Arc<MatchTexts>,
    },
    ReviewSent {
        call: CallIx,
        review: ReviewBody,
    },
    /// The call's duration is its record's.
    ReplyReceived {
        call: CallIx,
        http_status: u16,
        body: Arc<str>,
    },
    ReplyFailed {
        call: CallIx,
        error: Box<str>,
    },
    Allowed {
        call: CallIx,
    },
    /// `status` is None when it is the outcome's.
    Denied {
        call: CallIx,
        status: Option<Box<Status>>,
    },
    CallFailed {
        call: CallIx,
        failed_open: bool,
    },
    PatchApplied {
        call: CallIx,
        changed: bool,
        before: Arc<Object>,
        after: Arc<Object>,
    },
    PatchFailed {
        call: CallIx,
        error: Box<str>,
    },
    Annotation {
        index: u32,
    },
    AnnotationDropped {
        key_and_error: Box<(String, String)>,
    },
    Warning {
        call: CallIx,
        kept: bool,
        text: Box<str>,
    },
    Metric(MetricStep),
    Reinvocation {
        call: CallIx,
        reinvoke: Box<[String]>,
    },
    Verdict {
        allowed: bool,
    },
}

/// A metric step: the family and labels follow from the kind and the call record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MetricStep {
    // Boxed (these steps are rare) so that every step is 32 bytes.
    ConditionErrors {
        webhook: Box<Arc<str>>,
    },
    ConditionExclusions {
        webhook: Box<Arc<str>>,
    },
    FailOpen {
        call: CallIx,
    },
    Rejection {
        call: CallIx,
        error_type: crate::metrics::RejectionErrorType,
        code: i32,
    },
    Request {
        call: CallIx,
        code: i32,
        rejected: bool,
    },
}

/// What a `Matched` step shows of an invocation, shared by the calls of the requests that match
/// it the same way (the engine keeps one copy of each).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct MatchTexts {
    pub(crate) resource: Box<str>,
    pub(crate) kind: Box<str>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Trace {
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether there are no steps.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The compact steps.
    pub fn compact_steps(&self) -> &[TraceStep] {
        &self.steps
    }

    /// Every JSON object the trace refers to (objects before and after patches, objects sent),
    /// once per reference: the same allocation may appear many times.
    pub fn objects(&self) -> impl Iterator<Item = &Arc<Object>> {
        self.steps.iter().flat_map(|s| {
            let (a, b): (Option<&Arc<Object>>, Option<&Arc<Object>>) = match &s.entry {
                Entry::PatchApplied { before, after, .. } => (Some(before), Some(after)),
                _ => (None, None),
            };
            let sent = match &s.entry {
                Entry::ReviewSent { review, .. } => Some(review.shared_objects()),
                _ => None,
            };
            a.into_iter().chain(b).chain(sent.into_iter().flatten())
        })
    }

    /// The trace of a dispatch that ended with `status`: denials that gave the request its
    /// status refer to the outcome's rather than keep a copy.
    pub(crate) fn from_steps(mut steps: Vec<TraceStep>, status: Option<&Status>) -> Self {
        if let Some(status) = status {
            for s in &mut steps {
                if let Entry::Denied { status: own, .. } = &mut s.entry
                    && own.as_deref() == Some(status)
                {
                    *own = None;
                }
            }
        }
        Trace {
            steps: steps.into_boxed_slice(),
        }
    }
}

impl TraceStep {
    pub(crate) fn new(at: Duration, entry: Entry) -> Self {
        TraceStep {
            at_nanos: nanos(at),
            entry,
        }
    }

    /// Virtual time since the request started.
    pub fn at(&self) -> Duration {
        Duration::from_nanos(self.at_nanos)
    }

    /// Index of the call record of the webhook the step concerns, if it concerns one.
    pub fn call(&self) -> Option<usize> {
        let ix = match &self.entry {
            Entry::Skipped { call, .. }
            | Entry::Matched { call, .. }
            | Entry::ReviewSent { call, .. }
            | Entry::ReplyReceived { call, .. }
            | Entry::ReplyFailed { call, .. }
            | Entry::Allowed { call }
            | Entry::Denied { call, .. }
            | Entry::CallFailed { call, .. }
            | Entry::PatchApplied { call, .. }
            | Entry::PatchFailed { call, .. }
            | Entry::Warning { call, .. }
            | Entry::PolicyEvaluated { call }
            | Entry::Reinvocation { call, .. } => *call,
            _ => return None,
        };
        Some(ix as usize)
    }

    /// The object before and after, when the step is an applied patch.
    pub fn patch_objects(&self) -> Option<(&Arc<Object>, &Arc<Object>)> {
        match &self.entry {
            Entry::PatchApplied { before, after, .. } => Some((before, after)),
            _ => None,
        }
    }
}

impl super::Outcome {
    /// The trace in full: every step with its webhook and texts, as the report writes it.
    pub fn steps(&self) -> Vec<Step> {
        self.trace
            .steps
            .iter()
            .map(|s| Step {
                at: s.at(),
                kind: self.expand(&s.entry),
            })
            .collect()
    }

    fn hook_ref(&self, call: CallIx) -> HookRef {
        match self.calls.get(call as usize) {
            Some(c) => HookRef {
                phase: c.phase,
                round: c.round,
                index: c.index,
                configuration: Arc::clone(&c.configuration),
                webhook: Arc::clone(&c.webhook),
            },
            None => HookRef {
                phase: WebhookKind::Mutating,
                round: 0,
                index: 0,
                configuration: Arc::from(""),
                webhook: Arc::from(""),
            },
        }
    }

    fn expand(&self, entry: &Entry) -> StepKind {
        let record = |call: &CallIx| self.calls.get(*call as usize);
        match entry {
            Entry::PhaseStarted { phase, round } => StepKind::PhaseStarted {
                phase: *phase,
                round: *round,
            },
            Entry::RequestExempt { reason } => StepKind::RequestExempt {
                reason: reason.to_string(),
            },
            Entry::PolicyPhaseStarted => StepKind::PolicyPhaseStarted,
            Entry::PolicyEvaluated { call } => {
                let r = record(call);
                let outcome = match r {
                    Some(c) if c.decision == super::CallDecision::Skipped => {
                        format!("skipped: {}", c.skip_reason.as_deref().unwrap_or_default())
                    }
                    Some(c) => match (c.allowed, c.error.as_deref()) {
                        (Some(false), Some(e)) => format!("failed: {e}"),
                        (Some(false), None) => format!(
                            "denied: {}",
                            c.policy
                                .as_ref()
                                .and_then(|p| p.message.as_deref())
                                .unwrap_or_default()
                        ),
                        (_, Some(e)) => format!("error ignored: {e}"),
                        _ if c.phase == WebhookKind::Mutating => if c.mutated {
                            "mutated"
                        } else {
                            "applied, no change"
                        }
                        .into(),
                        _ => "admitted".into(),
                    },
                    None => String::new(),
                };
                StepKind::PolicyEvaluated {
                    hook: self.hook_ref(*call),
                    outcome,
                    details: r.and_then(|c| c.policy.clone()).unwrap_or_else(|| {
                        Box::new(super::policy::PolicyCall {
                            params: Vec::new(),
                            expressions: Vec::new(),
                            validation_actions: Vec::new(),
                            message: None,
                        })
                    }),
                }
            }
            Entry::Skipped { call, cause } => StepKind::Skipped {
                hook: self.hook_ref(*call),
                reason: record(call)
                    .and_then(|c| c.skip_reason.as_deref())
                    .unwrap_or_default()
                    .to_string(),
                cause: (**cause).clone(),
            },
            Entry::Matched {
                call,
                rule,
                equivalent,
                texts,
            } => StepKind::Matched {
                hook: self.hook_ref(*call),
                rule: *rule as usize,
                resource: texts.resource.to_string(),
                kind: texts.kind.to_string(),
                equivalent: *equivalent,
            },
            Entry::ReviewSent { call, review } => StepKind::ReviewSent {
                hook: self.hook_ref(*call),
                url: review.url(),
                uid: review.uid().to_string(),
                timeout: review.0.timeout,
                review: review.clone(),
            },
            Entry::ReplyReceived {
                call,
                http_status,
                body,
            } => StepKind::ReplyReceived {
                hook: self.hook_ref(*call),
                http_status: Some(*http_status),
                body: Some(Arc::clone(body)),
                transport_error: None,
                elapsed: record(call).map(CallRecord::elapsed).unwrap_or_default(),
            },
            Entry::ReplyFailed { call, error } => StepKind::ReplyReceived {
                hook: self.hook_ref(*call),
                http_status: None,
                body: None,
                transport_error: Some(error.to_string()),
                elapsed: record(call).map(CallRecord::elapsed).unwrap_or_default(),
            },
            Entry::Allowed { call } => StepKind::Allowed {
                hook: self.hook_ref(*call),
            },
            Entry::Denied { call, status } => StepKind::Denied {
                hook: self.hook_ref(*call),
                status: status
                    .clone()
                    .or_else(|| self.status.clone())
                    .unwrap_or_default(),
            },
            Entry::CallFailed { call, failed_open } => StepKind::CallFailed {
                hook: self.hook_ref(*call),
                error: record(call)
                    .and_then(|c| c.error.as_deref())
                    .unwrap_or_default()
                    .to_string(),
                failure_policy: record(call)
                    .map(|c| c.failure_policy)
                    .unwrap_or_default()
                    .to_string(),
                failed_open: *failed_open,
            },
            Entry::PatchApplied {
                call,
                changed,
                before,
                after,
            } => StepKind::PatchApplied {
                hook: self.hook_ref(*call),
                patch: record(call)
                    .and_then(|c| c.patch_value())
                    .unwrap_or(Value::Null),
                before: Arc::clone(before),
                after: Arc::clone(after),
                changed: *changed,
            },
            Entry::PatchFailed { call, error } => StepKind::PatchFailed {
                hook: self.hook_ref(*call),
                error: error.to_string(),
            },
            Entry::Annotation { index } => match self.annotations.get(*index as usize) {
                Some(a) => StepKind::Annotation {
                    key: a.key.to_string(),
                    value: a.value.to_string(),
                    level: a.level,
                },
                None => StepKind::Annotation {
                    key: String::new(),
                    value: String::new(),
                    level: AuditLevel::None,
                },
            },
            Entry::AnnotationDropped { key_and_error } => StepKind::AnnotationDropped {
                key: key_and_error.0.clone(),
                error: key_and_error.1.clone(),
            },
            Entry::Warning { call, kept, text } => StepKind::Warning {
                hook: self.hook_ref(*call),
                text: text.to_string(),
                kept: *kept,
            },
            Entry::Metric(m) => self.expand_metric(m),
            Entry::Reinvocation { call, reinvoke } => StepKind::Reinvocation {
                hook: self.hook_ref(*call),
                reinvoke: reinvoke.to_vec(),
            },
            Entry::Verdict { allowed } => StepKind::Verdict {
                allowed: *allowed,
                status: self.status.clone(),
            },
        }
    }

    fn expand_metric(&self, m: &MetricStep) -> StepKind {
        let name_of = |call: &CallIx| {
            self.calls
                .get(*call as usize)
                .map(|c| c.webhook.to_string())
                .unwrap_or_default()
        };
        let (family, labels): (&'static str, Vec<(&'static str, String)>) = match m {
            MetricStep::ConditionErrors { webhook } => (
                "apiserver_admission_match_condition_evaluation_errors_total",
                vec![("name", webhook.to_string())],
            ),
            MetricStep::ConditionExclusions { webhook } => (
                "apiserver_admission_match_condition_exclusions_total",
                vec![("name", webhook.to_string())],
            ),
            MetricStep::FailOpen { call } => (
                "apiserver_admission_webhook_fail_open_count",
                vec![("name", name_of(call))],
            ),
            MetricStep::Rejection {
                call,
                error_type,
                code,
            } => (
                "apiserver_admission_webhook_rejection_count",
                vec![
                    ("name", name_of(call)),
                    ("error_type", error_type.as_str().to_string()),
                    ("rejection_code", (*code).min(600).to_string()),
                ],
            ),
            MetricStep::Request {
                call,
                code,
                rejected,
            } => (
                "apiserver_admission_webhook_request_total",
                vec![
                    ("name", name_of(call)),
                    ("code", (*code).min(600).to_string()),
                    ("rejected", rejected.to_string()),
                ],
            ),
        };
        StepKind::Metric {
            name: Cow::Borrowed(family),
            labels: labels
                .into_iter()
                .map(|(k, v)| (Cow::Borrowed(k), v))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_step_is_32_bytes() {
        assert_eq!(std::mem::size_of::<TraceStep>(), 32);
    }

    #[test]
    fn a_reply_step_reads_its_duration_from_the_record_to_the_nanosecond() {
        let record = |elapsed: Duration| CallRecord {
            phase: WebhookKind::Mutating,
            round: 0,
            index: 0,
            configuration: Arc::from("c"),
            webhook: Arc::from("w"),
            decision: super::super::CallDecision::Called,
            skip_reason: None,
            allowed: Some(true),
            mutated: false,
            patch: None,
            error: None,
            failure_policy: "Fail",
            duration_ms: elapsed.as_secs_f64() * 1000.0,
            policy: None,
        };
        for nanos in [
            0,
            1,
            999,
            1_000_001,
            4_000_000,
            1_234_567_891,
            29_999_999_999,
            86_399_999_999_999,
        ] {
            let d = Duration::from_nanos(nanos);
            assert_eq!(record(d).elapsed(), d, "{nanos} ns");
        }
    }
}

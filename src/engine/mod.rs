//! The admission dispatcher: a faithful, IO-free re-implementation of kube-apiserver's
//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins.
//!
//! An [`Engine`] is built from webhook configurations. [`Engine::dispatch`] runs one request
//! through the mutating chain (with reinvocation) and the validating webhooks, asking a
//! [`call::Replier`] to answer the calls, and returns an [`Outcome`]: the verdict and client
//! status, the final object, audit annotations, warnings, per-call records and the [`trace`].
//! Metrics accumulate in a [`crate::metrics::Metrics`] the caller owns.

// A denial is the normal result of a dispatch, carried as a `Status` the client receives; boxing
// it would only move the allocation.
#![allow(clippy::result_large_err)]

pub mod attributes;
pub mod audit;
pub mod call;
mod dispatch;
pub mod endpoint;
pub mod hooks;
pub mod matching;
mod object;
pub mod policy;
pub mod review;
pub mod status;
pub(crate) mod strategy;
pub mod trace;

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use attributes::{
    Attributes, IdSource, NamespaceLookup, NamespaceSource, Namespaces, SequentialIds,
};
pub use audit::{AuditAnnotation, AuditLevel};
pub use call::{
    Endpoint, Replier, Reply, ReplyOutcome, TransportError, TransportErrorKind, WebhookCall,
};
pub use dispatch::{mutation_annotation_value, patch_annotation_value};
pub use hooks::Hook;
pub use matching::{Decision, Invocation, NotReinvokedWhy, SkipReason};
pub use object::Object;
pub use trace::{HookRef, ReviewBody, Step, StepKind, Trace, TraceStep};

use crate::api::{GroupResource, Status, WebhookConfiguration, WebhookKind};
use crate::metrics::Metrics;
use crate::registry::ResourceRegistry;
use crate::{KubeVersion, cel};

/// The audience a TokenRequest naming none gets when the apiserver's `--api-audiences` is not
/// known: the `--service-account-issuer` of the recorded sessions (`https://kubernetes.default.svc`).
pub const DEFAULT_API_AUDIENCE: &str = "https://kubernetes.default.svc";

/// Settings of an engine.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Release whose behaviour to model.
    pub kube_version: KubeVersion,
    /// Built-in (and user) resources, for matchPolicy Equivalent.
    pub registry: ResourceRegistry,
    /// What CEL's `authorizer` answers.
    pub authorizer: cel::Authorizer,
    /// Resources for which no webhook is ever called, beyond upstream's built-in exclusions.
    pub excluded_resources: Vec<GroupResource>,
    /// Whether dispatches record their step-by-step trace ([`Outcome::trace`]; on by default). A
    /// headless replay that reports only outcomes turns it off: the trace is then empty.
    pub trace: bool,
    /// The apiserver's `--api-audiences`: the audiences a TokenRequest naming none gets before
    /// validation ([`DEFAULT_API_AUDIENCE`] unless told).
    pub api_audiences: Vec<String>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self::for_version(KubeVersion::default())
    }
}

impl EngineOptions {
    /// Defaults for a release: its built-in resources, an allow-all authorizer.
    pub fn for_version(kube_version: KubeVersion) -> Self {
        Self {
            kube_version,
            registry: ResourceRegistry::builtin(kube_version),
            authorizer: cel::Authorizer::default(),
            excluded_resources: Vec::new(),
            trace: true,
            api_audiences: vec![DEFAULT_API_AUDIENCE.to_string()],
        }
    }
}

/// Which plugins a dispatch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phases {
    /// Mutating (with reinvocation) then validating, as the apiserver does.
    #[default]
    All,
    /// Only MutatingAdmissionWebhook, one round (upstream's `Admit`).
    MutatingOnly,
    /// Only ValidatingAdmissionWebhook (upstream's `Validate`).
    ValidatingOnly,
}

/// Per-request inputs besides the request itself.
pub struct RequestContext<'a> {
    /// Namespace labels.
    pub namespaces: &'a (dyn NamespaceSource + Sync),
    /// Supply of `request.uid`s.
    pub ids: &'a mut (dyn IdSource + Send),
    /// Metrics to record into.
    pub metrics: &'a mut Metrics,
    /// Time budget of the request (the apiserver's request deadline); None: no deadline.
    pub deadline: Option<Duration>,
    /// Which plugins to run.
    pub phases: Phases,
}

/// The result of dispatching one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Whether the request was admitted.
    pub allowed: bool,
    /// The error the API client receives, when not admitted (boxed: most requests are admitted).
    pub status: Option<Box<Status>>,
    /// The object after the mutating chain (None for requests without an object): the request's
    /// own object when no patch changed it, else the last patch's result, shared with the trace.
    pub object: Option<Arc<Object>>,
    /// Audit annotations in the order written, with their levels.
    pub annotations: Vec<AuditAnnotation>,
    /// Warnings returned to the client.
    pub warnings: Vec<String>,
    /// One record per webhook considered, in order.
    pub calls: Vec<CallRecord>,
    /// Everything that happened, compact: [`Outcome::steps`] gives the steps in full.
    pub trace: Trace,
    /// Whether the reinvocation round ran.
    pub reinvoked: bool,
    /// UIDs of webhooks that were due for reinvocation after round 0.
    pub reinvoke_set: BTreeSet<String>,
    /// Virtual time the dispatch took.
    pub elapsed: Duration,
}

impl Serialize for Outcome {
    /// The outcome with its trace in full (the steps of [`Outcome::steps`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Full<'a> {
            allowed: bool,
            status: Option<&'a Status>,
            object: Option<&'a Object>,
            annotations: &'a [AuditAnnotation],
            warnings: &'a [String],
            calls: &'a [CallRecord],
            trace: Vec<Step>,
            reinvoked: bool,
            reinvoke_set: &'a BTreeSet<String>,
        }
        Full {
            allowed: self.allowed,
            status: self.status.as_deref(),
            object: self.object.as_deref(),
            annotations: &self.annotations,
            warnings: &self.warnings,
            calls: &self.calls,
            trace: self.steps(),
            reinvoked: self.reinvoked,
            reinvoke_set: &self.reinvoke_set,
        }
        .serialize(s)
    }
}

impl Outcome {
    /// The annotations an audit event at `level` carries.
    pub fn annotations_at(&self, level: AuditLevel) -> std::collections::BTreeMap<String, String> {
        audit::annotations_at(&self.annotations, level)
    }
}

/// What became of one webhook in one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// Mutating or validating.
    pub phase: WebhookKind,
    /// Round.
    pub round: u8,
    /// Annotation index (validating: among matching hooks; list position when skipped).
    pub index: usize,
    /// Configuration name.
    #[serde(serialize_with = "trace::ser_shared_str")]
    pub configuration: Arc<str>,
    /// Webhook name.
    #[serde(serialize_with = "trace::ser_shared_str")]
    pub webhook: Arc<str>,
    /// Called or skipped.
    pub decision: CallDecision,
    /// Why it was skipped (shared: requests skipped for the same reason refer to one text).
    #[serde(serialize_with = "trace::ser_opt_shared_str")]
    pub skip_reason: Option<Arc<str>>,
    /// The webhook's verdict, when it answered.
    pub allowed: Option<bool>,
    /// Whether its patch changed the object.
    pub mutated: bool,
    /// Its patch, decoded and marshalled again as the `patch.webhook.admission.k8s.io`
    /// annotation carries it ([`CallRecord::patch_value`] parses it).
    #[serde(serialize_with = "ser_patch")]
    pub patch: Option<Box<str>>,
    /// The error, when the call failed.
    pub error: Option<Box<str>>,
    /// The failure policy in force: `Fail` or `Ignore`.
    pub failure_policy: &'static str,
    /// Call duration in milliseconds.
    pub duration_ms: f64,
    /// For a ValidatingAdmissionPolicy with one binding (`configuration` is the policy,
    /// `webhook` the binding): its parameters and every expression's result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Box<policy::PolicyCall>>,
}

impl CallRecord {
    /// The call's duration as the replier reported it: `duration_ms` in nanoseconds (exact for
    /// durations under a day).
    pub fn elapsed(&self) -> Duration {
        // Saturating: a negative or NaN duration (not one a dispatch records) reads as zero.
        Duration::from_nanos((self.duration_ms * 1e6).round() as u64)
    }

    /// Its patch as a JSON value.
    pub fn patch_value(&self) -> Option<Value> {
        self.patch
            .as_deref()
            .map(|p| crate::json::from_str(p).unwrap_or(Value::Null))
    }
}

fn ser_patch<S: serde::Serializer>(patch: &Option<Box<str>>, s: S) -> Result<S::Ok, S::Error> {
    match patch.as_deref() {
        Some(p) => crate::json::from_str::<Value>(p)
            .unwrap_or(Value::Null)
            .serialize(s),
        None => s.serialize_none(),
    }
}

/// Whether a webhook was called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CallDecision {
    /// It was called (or its call was attempted).
    Called,
    /// It was not called.
    Skipped,
}

/// A dispatcher for one set of configurations.
#[derive(Debug, Clone)]
pub struct Engine {
    mutating: Vec<Hook>,
    validating: Vec<Hook>,
    /// ValidatingAdmissionPolicies with their bindings, by name.
    policies: Vec<policy::PolicyHook>,
    /// MutatingAdmissionPolicies with their bindings, by name.
    mutating_policies: Vec<policy::mutating::MutatingPolicyHook>,
    options: EngineOptions,
    /// One copy of the texts that repeat from request to request, shared by the outcomes of the
    /// requests dispatched.
    shared: Arc<Mutex<Shared>>,
}

/// Texts that repeat from request to request: review texts (kinds, users, options), skip
/// reasons, annotations, what `Matched` steps show.
#[derive(Debug, Default)]
struct Shared {
    texts: foldhash::HashSet<Arc<str>>,
    matches: foldhash::HashSet<Arc<trace::MatchTexts>>,
    pieces: review::PieceCache,
}

/// Distinct values a sharing set keeps; beyond it the set starts afresh (sharing is an economy,
/// not a promise: the copies handed out stay valid).
const MAX_SHARED: usize = 4096;

/// The copy of `text` in `set`, which keeps it from now on (see [`shared_copy`]); looked up by the
/// text itself, so that only a new text is copied into an `Arc`.
fn shared_text_in(set: &mut foldhash::HashSet<Arc<str>>, text: String) -> Arc<str> {
    match set.get(text.as_str()) {
        Some(known) => Arc::clone(known),
        None => shared_copy(set, Arc::from(text)),
    }
}

/// The copy of `value` in `set`, which keeps it from now on: the one place values that repeat
/// from request to request (texts, users, labels) are made one allocation.
pub(crate) fn shared_copy<T: Eq + std::hash::Hash + ?Sized, S: std::hash::BuildHasher>(
    set: &mut HashSet<Arc<T>, S>,
    value: Arc<T>,
) -> Arc<T> {
    if let Some(known) = set.get(&value) {
        return Arc::clone(known);
    }
    if set.len() >= MAX_SHARED {
        set.clear();
    }
    set.insert(Arc::clone(&value));
    value
}

impl Engine {
    /// Builds the ordered webhook lists. Configurations are used as given: apply defaults first
    /// (see [`crate::config`]) to model what an apiserver stores.
    pub fn new(configs: &[WebhookConfiguration], options: EngineOptions) -> Engine {
        Engine {
            mutating: hooks::flatten(configs, WebhookKind::Mutating, options.kube_version),
            validating: hooks::flatten(configs, WebhookKind::Validating, options.kube_version),
            policies: Vec::new(),
            mutating_policies: Vec::new(),
            options,
            shared: Arc::default(),
        }
    }

    /// The engine with ValidatingAdmissionPolicies and their bindings (defaulted and valid, as
    /// the apiserver stores them; see [`crate::config::policy`]), their expressions compiled
    /// once here. They run after the mutating webhooks and before the validating ones.
    pub fn with_policies(
        mut self,
        policies: &[crate::api::policy::ValidatingAdmissionPolicy],
        bindings: &[crate::api::policy::ValidatingAdmissionPolicyBinding],
    ) -> Engine {
        self.policies = policy::build(policies, bindings, self.options.kube_version);
        self
    }

    /// The engine with MutatingAdmissionPolicies and their bindings (defaulted and valid),
    /// compiled once here. They run before the mutating webhooks, and again with them when the
    /// mutating plugins are reinvoked.
    pub fn with_mutating_policies(
        mut self,
        policies: &[crate::api::policy::MutatingAdmissionPolicy],
        bindings: &[crate::api::policy::MutatingAdmissionPolicyBinding],
    ) -> Engine {
        self.mutating_policies =
            policy::mutating::build(policies, bindings, self.options.kube_version);
        self
    }

    /// The ValidatingAdmissionPolicies in evaluation order, with their bindings.
    pub fn policies(&self) -> &[policy::PolicyHook] {
        &self.policies
    }

    /// The MutatingAdmissionPolicies in evaluation order, with their bindings.
    pub fn mutating_policies(&self) -> &[policy::mutating::MutatingPolicyHook] {
        &self.mutating_policies
    }

    /// What the admission plugins count of their configurations rather than of requests, as an
    /// apiserver that took in this engine's configurations counts it: in 1.28–1.29 each
    /// ValidatingAdmissionPolicy definition once
    /// (`apiserver_validating_admission_policy_definition_total`).
    pub fn observe_configurations(&self, metrics: &mut Metrics) {
        let release = self.options.kube_version;
        if release.at_least(28) && !release.at_least(30) {
            for _ in &self.policies {
                metrics.observe_policy_definition();
            }
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine's shared copy of `text`.
    fn shared_text(&self, text: String) -> Arc<str> {
        shared_text_in(&mut self.shared().texts, text)
    }

    /// The shared review pieces of a request for an invocation: its kinds, its user (up to the
    /// object) and its tail (after the old object), found again when a recent request had the
    /// same, else written and shared.
    fn review_pieces(
        &self,
        attrs: &Attributes,
        invocation: &matching::Invocation,
    ) -> [Arc<str>; 3] {
        let mut shared = self.shared();
        let Shared { texts, pieces, .. } = &mut *shared;
        let mut share = |text: String| shared_text_in(texts, text);
        let kinds = pieces.kinds(attrs, invocation).unwrap_or_else(|| {
            let text = share(review::request_kinds(attrs, invocation));
            pieces.remember_kinds(attrs, invocation, Arc::clone(&text));
            text
        });
        let user = pieces.user(attrs).unwrap_or_else(|| {
            let text = share(review::request_user(attrs));
            pieces.remember_user(attrs, Arc::clone(&text));
            text
        });
        let tail = pieces.tail(attrs).unwrap_or_else(|| {
            let text = share(review::request_tail(attrs, self.options.kube_version));
            pieces.remember_tail(attrs, Arc::clone(&text));
            text
        });
        [kinds, user, tail]
    }

    /// What a `Matched` step shows for an invocation: found again when a recent request had
    /// the same, else written and shared.
    fn match_texts(&self, invocation: &matching::Invocation) -> Arc<trace::MatchTexts> {
        let mut shared = self.shared();
        let Shared {
            matches, pieces, ..
        } = &mut *shared;
        if let Some(known) = pieces.match_texts(invocation) {
            return known;
        }
        let resource = if invocation.sub_resource.is_empty() {
            invocation.resource.to_string()
        } else {
            format!(
                "{}, Subresource={}",
                invocation.resource, invocation.sub_resource
            )
        };
        let texts = shared_copy(
            matches,
            Arc::new(trace::MatchTexts {
                resource: resource.into_boxed_str(),
                kind: invocation.kind.to_string().into_boxed_str(),
            }),
        );
        pieces.remember_match_texts(invocation, Arc::clone(&texts));
        texts
    }

    /// The mutating webhooks in dispatch order.
    pub fn mutating_hooks(&self) -> &[Hook] {
        &self.mutating
    }

    /// The validating webhooks in dispatch order.
    pub fn validating_hooks(&self) -> &[Hook] {
        &self.validating
    }

    /// Whether dispatching may read the value of a request's object or old object rather than
    /// only send it: when a webhook mutates, selects objects by label, or has match conditions,
    /// or any admission policy runs.
    /// (Namespace objects are also read for their labels, whatever the webhooks.)
    pub fn reads_objects(&self) -> bool {
        !self.mutating.is_empty()
            || !self.policies.is_empty()
            || !self.mutating_policies.is_empty()
            || self.validating.iter().any(|h| {
                !h.conditions.is_empty() || h.object_selector.as_ref().is_ok_and(|s| !s.is_empty())
            })
    }

    /// The options.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Upstream's ShouldCallHook for one hook, for inspection and benchmarks.
    pub fn should_call_hook(
        &self,
        hook: &Hook,
        attrs: &Attributes,
        namespaces: &dyn NamespaceSource,
    ) -> Decision {
        let env = matching::MatchEnv {
            registry: &self.options.registry,
            namespaces,
            authorizer: &self.options.authorizer,
            release: self.options.kube_version,
            versioned: None,
        };
        matching::should_call_hook(hook, attrs, &env, &mut matching::ConditionStats::default())
    }

    /// Dispatches one request.
    // Not `async fn`s: the dispatch's own future is returned as it is, not wrapped in one more
    // that would copy it (some kilobytes) into its state when first polled.
    pub fn dispatch<R: Replier + Send>(
        &self,
        attrs: Attributes,
        ctx: RequestContext<'_>,
        replier: &mut R,
    ) -> impl Future<Output = Outcome> {
        dispatch::Run::new(self, std::borrow::Cow::Owned(attrs), ctx).run(replier)
    }

    /// [`Engine::dispatch`] of a borrowed request: it is copied only if a patch replaces its
    /// object.
    pub fn dispatch_ref<'c, R: Replier + Send>(
        &self,
        attrs: &'c Attributes,
        ctx: RequestContext<'c>,
        replier: &mut R,
    ) -> impl Future<Output = Outcome> {
        dispatch::Run::new(self, std::borrow::Cow::Borrowed(attrs), ctx).run(replier)
    }

    /// Dispatches with a replier whose futures complete immediately (scripted or recorded
    /// replies), without an async runtime.
    pub fn dispatch_blocking<R: Replier + Send>(
        &self,
        attrs: Attributes,
        ctx: RequestContext<'_>,
        replier: &mut R,
    ) -> Outcome {
        futures::executor::block_on(self.dispatch(attrs, ctx, replier))
    }
}

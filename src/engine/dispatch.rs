//! One request through the chain: the mutating dispatcher (`mutating/dispatcher.go`) with its
//! reinvocation bookkeeping, then the validating dispatcher (`validating/dispatcher.go`).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::audit::{Annotations, AuditLevel, Warnings};
use super::call::{Replier, Reply, ReplyOutcome, TransportError, TransportErrorKind, WebhookCall};
use super::hooks::Hook;
use super::matching::{
    self, ConditionStats, Decision, Invocation, MatchEnv, NotReinvokedWhy, SkipReason,
};
use super::object::Object;
use super::review::{self, CallingError};
use super::status::{self, go_json_string, go_quote};
use super::strategy;
use super::trace::{
    Entry, MatchTexts, MetricStep, ReviewBody, ReviewParts, ReviewTexts, TraceStep,
};
use super::{
    Attributes, CallDecision, CallRecord, Engine, Outcome, Phases, RequestContext, policy,
};
use crate::api::meta::short_eq;
use crate::api::{GroupVersionKind, Operation, Status, WebhookKind};
use crate::jsonpatch;
use crate::metrics::{PolicyCheckKey, RejectionErrorType, WebhookType};
use crate::schema::{self, Schema};

pub(super) const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Index of a call record in the outcome.
type CallIx = u32;

/// The webhook being called: its phase, round, annotation index and call record.
#[derive(Clone, Copy)]
struct Slot {
    phase: WebhookKind,
    round: u8,
    index: usize,
    call: CallIx,
}

/// How one webhook call ended, in upstream's error classes.
enum CallError {
    /// `ErrCallingWebhook`: subject to failurePolicy.
    Calling(CallingError),
    /// `ErrWebhookRejection`: the webhook said no.
    Rejection(Status),
    /// Any other error: the request fails whatever the failurePolicy.
    Other(Status),
}

/// What the calls of a request that match the same way share.
#[derive(Default)]
struct InvocationTexts {
    /// What `Matched` steps show, once one was recorded.
    matched: Option<Arc<MatchTexts>>,
    /// The review text around the uid and the objects, once a call was prepared.
    review: Option<Arc<ReviewTexts>>,
}

pub(super) struct Run<'e, 'c> {
    engine: &'e Engine,
    /// The request; taken over (copied, when borrowed) only if a patch replaces the object.
    attrs: Cow<'c, Attributes>,
    ctx: RequestContext<'c>,
    annotations: Annotations,
    warnings: Warnings,
    trace: Vec<TraceStep>,
    calls: Vec<CallRecord>,
    elapsed: Duration,
    previously_invoked: BTreeSet<String>,
    reinvoke: BTreeSet<String>,
    should_reinvoke: bool,
    /// The object as the mutating webhooks left it (`SetLastWebhookInvocationOutput`).
    webhook_output: Option<Arc<Object>>,
    /// The MutatingAdmissionPolicy plugin's reinvocation context.
    policy_reinvocation: policy::mutating::ReinvocationContext,
    /// Index in `calls` of the record of the call being handled.
    current_call: Option<usize>,
    /// `attrs.object` and `attrs.old_object` serialised for AdmissionReview bodies, when they
    /// were not given as JSON; the first is replaced whenever a patch replaces the object.
    object_json: Option<String>,
    old_object_json: Option<String>,
    /// The last object a typed patch made, which is normal (its Go type decoded and encoded
    /// again, defaulted): a later patch of it normalises only what it changed.
    normal_object: Option<Arc<Object>>,
    /// Whether a patch has been decoded into the object's Go type yet: until then the
    /// `managedFields` times the field manager set for this request are held at nanosecond
    /// precision, which the first decode truncates to seconds.
    decoded_once: bool,
    /// Whether `attrs.object`'s members other than `metadata` are its kind's Go type decoded and
    /// encoded again (a patch's result is), so that the registry strategy normalises only what it
    /// changes.
    object_typed: bool,
    /// The texts of the request's own invocation (every exact match) and of each equivalent
    /// invocation (resource, subresource, kind) seen so far.
    own_invocation: Option<InvocationTexts>,
    invocations: Vec<(Invocation, InvocationTexts)>,
    /// The object as last sent to, or patched by, a webhook of another version (upstream's
    /// `VersionedAttributes`): a later webhook of that version is sent it as it is, without
    /// converting the request's object again, while `attrs.object` is still `source`.
    versioned: Option<Versioned>,
}

/// What [`Run::patch_object`] made of a patch.
struct Patched {
    /// The patched object (still labelled with the invocation kind).
    value: Value,
    /// Whether it differs from the object sent.
    changed: bool,
    /// Its serialisation for review bodies, when there is one.
    json: Option<String>,
    /// Whether it was decoded into a Go type.
    typed: bool,
    /// Whether it is known to be plain.
    plain: bool,
    /// The top-level members in which it can differ from the object sent, when known.
    edited: Option<Vec<String>>,
    /// Whether the object sent was the current one as a decode leaves it
    /// ([`Object::normalized`]), not the current one itself.
    normalized: bool,
    /// Instead of `value`: the current object with these top-level members replaced.
    members: Option<Vec<(Box<str>, Option<Value>)>>,
}

impl Patched {
    /// An object not decoded into a Go type.
    fn untyped(value: Value, changed: bool, json: Option<String>) -> Self {
        Patched {
            value,
            changed,
            json,
            typed: false,
            plain: false,
            edited: None,
            normalized: false,
            members: None,
        }
    }
}

/// The top-level members `edits` reach, sorted.
fn top_level_members(edits: &[schema::codec::Edit<'_>]) -> Vec<String> {
    let mut members: Vec<String> = edits
        .iter()
        .filter_map(|e| e.path.first().map(|&m| m.to_owned()))
        .collect();
    members.sort_unstable();
    members.dedup();
    members
}

/// An object converted to the version of an equivalent invocation.
struct Versioned {
    kind: Arc<GroupVersionKind>,
    /// The `attrs.object` it stands for.
    source: Arc<Object>,
    object: Arc<Object>,
}

/// `object` of kind `from` as a webhook of kind `to` receives it: converted as the apiserver's
/// scheme converts it where the versions differ in shape (`schema::convert`), else relabelled.
pub(crate) fn convert_object(
    object: &Value,
    from: &GroupVersionKind,
    to: &GroupVersionKind,
    release: crate::KubeVersion,
) -> Value {
    if schema::convert::converts(from, to)
        && let Some(converted) =
            schema::convert::convert(Schema::for_release(release), object, from, to)
    {
        return converted;
    }
    review::relabel(object, from, to)
}

/// An object's JSON for review bodies: the text it was given as, or its serialisation as the
/// apiserver's (of `kind`, in `release`), made once into `cache`.
fn object_text<'a>(
    o: &'a Option<Arc<Object>>,
    cache: &'a mut Option<String>,
    kind: &GroupVersionKind,
    release: crate::KubeVersion,
) -> &'a str {
    match o.as_deref().and_then(Object::json) {
        Some(text) => text,
        None => cache.get_or_insert_with(|| review::typed_object_text(o.as_deref(), kind, release)),
    }
}

/// What the policy plugins read besides the request: the engine's registry and authorizer, the
/// request context's namespaces and parameter objects.
fn policy_env<'a>(
    engine: &'a Engine,
    namespaces: &'a dyn super::attributes::NamespaceSource,
) -> policy::PolicyEnv<'a> {
    policy::PolicyEnv {
        registry: &engine.options.registry,
        namespaces,
        params: namespaces.param_source().unwrap_or(&policy::NoParams),
        authorizer: &engine.options.authorizer,
    }
}

impl<'e, 'c> Run<'e, 'c> {
    pub(super) fn new(
        engine: &'e Engine,
        attrs: Cow<'c, Attributes>,
        ctx: RequestContext<'c>,
    ) -> Self {
        Run {
            engine,
            attrs,
            ctx,
            annotations: Annotations::default(),
            warnings: Warnings::default(),
            // A request's usual steps: phases, a match, a review and its reply, a verdict.
            trace: Vec::with_capacity(if engine.options.trace { 8 } else { 0 }),
            // One record per webhook considered: at most every hook once, reinvocation aside.
            calls: Vec::with_capacity(engine.mutating.len() + engine.validating.len()),
            elapsed: Duration::ZERO,
            previously_invoked: BTreeSet::new(),
            reinvoke: BTreeSet::new(),
            should_reinvoke: false,
            webhook_output: None,
            policy_reinvocation: Default::default(),
            current_call: None,
            object_json: None,
            old_object_json: None,
            normal_object: None,
            decoded_once: false,
            object_typed: false,
            own_invocation: None,
            invocations: Vec::new(),
            versioned: None,
        }
    }

    /// The current object converted to `kind` (an equivalent invocation's): the one a webhook of
    /// that version last received or patched while the object has not changed since, else a
    /// fresh conversion.
    fn versioned_object(&mut self, kind: &Arc<GroupVersionKind>) -> Option<Arc<Object>> {
        let current = self.attrs.object.as_ref()?;
        if let Some(v) = &self.versioned
            && v.kind == *kind
            && Arc::ptr_eq(&v.source, current)
        {
            return Some(Arc::clone(&v.object));
        }
        let release = self.engine.options.kube_version;
        let object = Arc::new(Object::new(convert_object(
            current.value(),
            &self.attrs.kind,
            kind,
            release,
        )));
        self.versioned = Some(Versioned {
            kind: Arc::clone(kind),
            source: Arc::clone(current),
            object: Arc::clone(&object),
        });
        Some(object)
    }

    pub(super) async fn run<R: Replier + Send>(mut self, replier: &mut R) -> Outcome {
        let mut reinvoked = false;
        let mut reinvoke_set = BTreeSet::new();
        let result = match self.exemption() {
            Some(reason) => {
                self.step(Entry::RequestExempt {
                    reason: reason.into(),
                });
                Ok(())
            }
            None => {
                self.run_phases(replier, &mut reinvoked, &mut reinvoke_set)
                    .await
            }
        };
        let (allowed, status) = match result {
            Ok(()) => (true, None),
            Err(s) => (false, Some(s)),
        };
        self.step(Entry::Verdict { allowed });
        self.calls.shrink_to_fit();
        Outcome {
            allowed,
            trace: super::Trace::from_steps(self.trace, status.as_ref()),
            status: status.map(Box::new),
            object: match self.attrs {
                Cow::Owned(a) => a.object,
                Cow::Borrowed(a) => a.object.clone(),
            },
            annotations: self.annotations.into_vec(),
            warnings: self.warnings.texts().map(String::from).collect(),
            calls: self.calls,
            reinvoked,
            reinvoke_set,
            elapsed: self.elapsed,
        }
    }

    async fn run_phases<R: Replier + Send>(
        &mut self,
        replier: &mut R,
        reinvoked: &mut bool,
        reinvoke_set: &mut BTreeSet<String>,
    ) -> Result<(), Status> {
        let phases = self.ctx.phases;
        if phases != Phases::ValidatingOnly {
            let before_admission = self.attrs.object.clone();
            self.mutating_policy_plugin(0)?;
            self.mutating_plugin(0, replier).await?;
            *reinvoke_set = self.reinvoke.clone();
            if phases == Phases::All && self.should_reinvoke {
                *reinvoked = true;
                self.mutating_policy_plugin(1)?;
                self.mutating_plugin(1, replier).await?;
            }
            self.managed_fields_after_admission(before_admission.as_ref());
        }
        if phases != Phases::MutatingOnly {
            // `rest.BeforeCreate` / `rest.BeforeUpdate`: the store's fields, the strategy and its
            // warnings, before the validating plugins (the policies' included) see the object.
            self.fill_system_fields();
            self.scale_for_validation();
            let unprepared = self.attrs.object.clone();
            self.prepare_for_validation();
            self.strategy_warnings(unprepared.as_deref());
            self.policy_plugin()?;
            self.validating_plugin(replier).await?;
        }
        Ok(())
    }

    /// The field manager's check around mutating admission
    /// (`fieldmanager.NewManagedFieldsValidatingAdmissionController`, which wraps the admission
    /// of creates, updates and patches): when the mutating plugins (policies or webhooks) left
    /// `metadata.managedFields` undecodable, they are reset to what they were before admission,
    /// with a warning; the validating plugins and the store see the reset ones. The changes the
    /// plugins made are never attributed to a manager (the field manager ran before admission).
    fn managed_fields_after_admission(&mut self, before: Option<&Arc<Object>>) {
        if !matches!(self.attrs.operation, Operation::Create | Operation::Update) {
            return;
        }
        let (Some(before), Some(after)) = (before, self.attrs.object.as_ref()) else {
            return;
        };
        if Arc::ptr_eq(before, after) {
            return;
        }
        let error = match after.value().pointer("/metadata/managedFields") {
            None | Some(Value::Null) => return,
            Some(managed) => match crate::apply::ManagedFields::from_value(managed) {
                Ok(_) => return,
                Err(crate::apply::ApplyError::ManagedFields(e)) => e,
                Err(e) => e.to_string(),
            },
        };
        let previous = before.value().pointer("/metadata/managedFields").cloned();
        let mut value = after.value().clone();
        if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            match previous {
                Some(p) => meta.insert("managedFields".into(), p),
                None => meta.remove("managedFields"),
            };
        }
        self.attrs.to_mut().object = Some(Arc::new(Object::new(value)));
        let text = format!(
            ".metadata.managedFields was in an invalid state after admission; this could be caused by an outdated mutating admission controller; please fix your requests: {error}"
        );
        // Not a webhook's warning: no trace step names it; the client gets it.
        self.warnings.add(&text);
    }

    /// The MutatingAdmissionPolicy plugin (`policy/mutating`) in `round`: pure evaluation, no
    /// replier. Runs only when the engine has mutating policies, for the operations the plugin
    /// handles (CREATE, UPDATE, CONNECT).
    fn mutating_policy_plugin(&mut self, round: u8) -> Result<(), Status> {
        let engine = self.engine;
        if engine.mutating_policies.is_empty()
            || !matches!(
                self.attrs.operation,
                Operation::Create | Operation::Update | Operation::Connect
            )
        {
            return Ok(());
        }
        self.step(Entry::PolicyPhaseStarted);
        let start = self.elapsed;
        let env = policy_env(engine, self.ctx.namespaces);
        let result = policy::mutating::dispatch(
            &engine.mutating_policies,
            &self.attrs,
            &env,
            round,
            &mut self.policy_reinvocation,
            engine.options.kube_version,
        );
        let mut index = 0;
        let mut last_call: CallIx = 0;
        let mut denied_call: Option<CallIx> = None;
        for event in result.events {
            use policy::mutating::{MutatingEvent, MutationOutcome};
            match event {
                MutatingEvent::Considered {
                    policy,
                    binding,
                    failure_policy,
                    outcome,
                    call,
                    patches,
                    after,
                } => {
                    let (decision, skip_reason, allowed, error, mutated) = match outcome {
                        MutationOutcome::NotMatched(why) | MutationOutcome::NotReinvoked(why) => (
                            CallDecision::Skipped,
                            Some(engine.shared_text(why)),
                            None,
                            None,
                            false,
                        ),
                        MutationOutcome::Applied { changed } => {
                            (CallDecision::Called, None, Some(true), None, changed)
                        }
                        MutationOutcome::Failed(m) => (
                            CallDecision::Called,
                            None,
                            Some(false),
                            Some(m.into()),
                            false,
                        ),
                        MutationOutcome::ErrorIgnored(m) => (
                            CallDecision::Called,
                            None,
                            Some(true),
                            Some(m.into()),
                            false,
                        ),
                    };
                    let patch = (!patches.is_empty()).then(|| {
                        let value = match <[Value; 1]>::try_from(patches) {
                            Ok([one]) => one,
                            Err(many) => Value::Array(many),
                        };
                        value.to_string().into_boxed_str()
                    });
                    last_call = self.push_policy_call(
                        CallRecord {
                            phase: WebhookKind::Mutating,
                            round,
                            index,
                            configuration: policy,
                            webhook: binding.unwrap_or_else(|| Arc::from("")),
                            decision,
                            skip_reason,
                            allowed,
                            mutated,
                            patch,
                            error,
                            failure_policy,
                            duration_ms: 0.0,
                            policy: Some(call),
                        },
                        &mut denied_call,
                    );
                    index += 1;
                    if let Some(after) = after {
                        let before = self.attrs.object.clone().unwrap_or_default();
                        self.step(Entry::PatchApplied {
                            call: last_call,
                            changed: mutated,
                            before,
                            after: Arc::clone(&after),
                        });
                        self.attrs.to_mut().object = Some(after);
                        self.object_json = None;
                    }
                }
                MutatingEvent::Check {
                    policy,
                    binding,
                    error_type,
                } => self.ctx.metrics.observe_mutating_check(
                    &policy,
                    &binding,
                    error_type,
                    policy::CHECK_DURATION,
                ),
                MutatingEvent::ConditionError { policy } => {
                    self.observe_policy_condition(&policy, true)
                }
                MutatingEvent::ConditionEvaluation { policy } => {
                    self.observe_policy_condition(&policy, false)
                }
            }
        }
        if result.should_reinvoke {
            self.should_reinvoke = true;
        }
        self.end_policy_plugin(
            WebhookType::MutatingPolicy,
            start,
            result.denied,
            denied_call.unwrap_or(last_call),
        )
    }

    /// Records a policy binding's call and its step; the first denying one is `denied_call`.
    fn push_policy_call(&mut self, record: CallRecord, denied_call: &mut Option<CallIx>) -> CallIx {
        let denies = record.allowed == Some(false);
        self.calls.push(record);
        let ix = CallIx::try_from(self.calls.len() - 1).unwrap_or(CallIx::MAX);
        if denies && denied_call.is_none() {
            *denied_call = Some(ix);
        }
        self.step(Entry::PolicyEvaluated { call: ix });
        ix
    }

    /// A policy's matchConditions in the metrics: an error, or conditions not all true. Both
    /// plugins count them as `kind="policy"`, `type="validate"`, as upstream builds the matcher.
    fn observe_policy_condition(&mut self, policy: &str, error: bool) {
        let op = self.attrs.operation;
        let ty = WebhookType::ValidatingPolicy;
        if error {
            self.ctx
                .metrics
                .observe_match_condition_error(policy, ty, op);
        } else {
            (self.ctx.metrics).observe_match_condition_evaluation(
                policy,
                ty,
                op,
                policy::CHECK_DURATION,
            );
        }
    }

    /// The end of a policy plugin started at `start`: its controller metric and, when `denied`,
    /// the denial step (at `call`) and the admission step it ends.
    fn end_policy_plugin(
        &mut self,
        plugin: WebhookType,
        start: Duration,
        denied: Option<Status>,
        call: CallIx,
    ) -> Result<(), Status> {
        let op = self.attrs.operation;
        let took = self.elapsed - start;
        (self.ctx.metrics).observe_controller(plugin, op, denied.is_some(), took);
        let Some(status) = denied else {
            return Ok(());
        };
        self.step(Entry::Denied {
            call,
            status: Some(Box::new(status.clone())),
        });
        // The admission step ends here: the plugins after it are not run.
        let step = match plugin {
            WebhookType::MutatingPolicy => WebhookType::Admit,
            _ => WebhookType::Validating,
        };
        self.ctx.metrics.observe_step(step, op, true, took);
        Err(status)
    }

    /// The ValidatingAdmissionPolicy plugin (`policy/validating`), on the final object: pure
    /// evaluation, no replier. Runs only when the engine has policies.
    fn policy_plugin(&mut self) -> Result<(), Status> {
        let engine = self.engine;
        if engine.policies.is_empty() {
            return Ok(());
        }
        self.step(Entry::PolicyPhaseStarted);
        self.fill_system_fields();
        let start = self.elapsed;
        let env = policy_env(engine, self.ctx.namespaces);
        let result = policy::dispatch(&engine.policies, &self.attrs, &env);
        let legacy = !engine.options.kube_version.at_least(31);
        let mut last_call: CallIx = 0;
        let mut denied_call: Option<CallIx> = None;
        let mut index = 0;
        for event in result.events {
            match event {
                policy::PolicyEvent::Considered {
                    policy,
                    binding,
                    failure_policy,
                    outcome,
                    call,
                } => {
                    let (decision, skip_reason, allowed, error) = match outcome {
                        policy::PolicyOutcome::NotMatched(why) => (
                            CallDecision::Skipped,
                            Some(engine.shared_text(why)),
                            None,
                            None,
                        ),
                        policy::PolicyOutcome::Admitted => {
                            (CallDecision::Called, None, Some(true), None)
                        }
                        policy::PolicyOutcome::Denied => {
                            (CallDecision::Called, None, Some(false), None)
                        }
                        policy::PolicyOutcome::Failed(m) => {
                            (CallDecision::Called, None, Some(false), Some(m.into()))
                        }
                        policy::PolicyOutcome::ErrorIgnored(m) => {
                            (CallDecision::Called, None, Some(true), Some(m.into()))
                        }
                    };
                    last_call = self.push_policy_call(
                        CallRecord {
                            phase: WebhookKind::Validating,
                            round: 0,
                            index,
                            configuration: policy,
                            webhook: binding.unwrap_or_else(|| Arc::from("")),
                            decision,
                            skip_reason,
                            allowed,
                            mutated: false,
                            patch: None,
                            error,
                            failure_policy,
                            duration_ms: 0.0,
                            policy: Some(call),
                        },
                        &mut denied_call,
                    );
                    index += 1;
                }
                policy::PolicyEvent::Warning(text) => {
                    let kept = self.warnings.add(&text);
                    self.step(Entry::Warning {
                        call: last_call,
                        kept,
                        text: text.into(),
                    });
                }
                policy::PolicyEvent::Annotation(key, value) => {
                    self.annotate(key, value, AuditLevel::Metadata);
                }
                policy::PolicyEvent::Check {
                    policy,
                    binding,
                    action,
                    error_type,
                } => self.ctx.metrics.observe_policy_check(
                    PolicyCheckKey {
                        policy: policy.to_string(),
                        binding: binding.to_string(),
                        action,
                        error_type,
                        legacy,
                    },
                    policy::CHECK_DURATION,
                ),
                policy::PolicyEvent::ConditionError { policy } => {
                    self.observe_policy_condition(&policy, true)
                }
                policy::PolicyEvent::ConditionEvaluation { policy } => {
                    self.observe_policy_condition(&policy, false)
                }
            }
        }
        self.end_policy_plugin(
            WebhookType::ValidatingPolicy,
            start,
            result.denied,
            denied_call.unwrap_or(last_call),
        )
    }

    fn exemption(&self) -> Option<String> {
        let v = self.engine.options.kube_version;
        if matching::is_excluded_virtual_resource(&self.attrs.resource, v) {
            return Some(format!(
                "{} is a virtual authentication/authorization resource, excluded from all webhooks (ExcludeAdmissionWebhookVirtualResources, Kubernetes {v})",
                self.attrs.resource.group_resource()
            ));
        }
        let excluded = &self.engine.options.excluded_resources;
        if !excluded.is_empty() {
            let gr = self.attrs.resource.group_resource();
            if excluded.contains(&gr) {
                return Some(format!(
                    "{gr} is excluded from admission webhooks by configuration"
                ));
            }
        }
        if matching::is_exempt_kind(&self.attrs.kind, v) {
            return Some(format!(
                "{} objects are never sent to API-registered webhooks (they configure admission themselves)",
                self.attrs.kind.kind
            ));
        }
        None
    }

    fn step(&mut self, entry: Entry) {
        if self.engine.options.trace {
            self.trace.push(TraceStep::new(self.elapsed, entry));
        }
    }

    fn annotate(&mut self, key: String, value: String, level: AuditLevel) {
        let (key, value) = (self.engine.shared_text(key), self.engine.shared_text(value));
        match self.annotations.add_indexed(key, value, level) {
            Ok(index) => self.step(Entry::Annotation {
                index: u32::try_from(index).unwrap_or(u32::MAX),
            }),
            Err((key, error)) => self.step(Entry::AnnotationDropped {
                key_and_error: Box::new((key, error)),
            }),
        }
    }

    fn decide(&mut self, hook: &Hook, phase: WebhookKind) -> Decision {
        let versioned = self.versioned.as_ref().filter(|v| {
            self.attrs
                .object
                .as_ref()
                .is_some_and(|o| Arc::ptr_eq(&v.source, o))
        });
        let env = MatchEnv {
            registry: &self.engine.options.registry,
            namespaces: self.ctx.namespaces,
            authorizer: &self.engine.options.authorizer,
            release: self.engine.options.kube_version,
            versioned: versioned.map(|v| (&*v.kind, v.object.value())),
        };
        let mut stats = ConditionStats::default();
        let decision = matching::should_call_hook(hook, &self.attrs, &env, &mut stats);
        let ty = webhook_type(phase);
        let op = self.attrs.operation;
        let name = hook.webhook.name.as_str();
        for _ in 0..stats.errors {
            self.ctx.metrics.observe_match_condition_error(name, ty, op);
        }
        if stats.errors > 0 {
            self.step(Entry::Metric(MetricStep::ConditionErrors {
                webhook: Box::new(Arc::clone(&hook.webhook_name)),
            }));
        }
        if stats.excluded {
            self.ctx
                .metrics
                .observe_match_condition_exclusion(name, ty, op);
            self.step(Entry::Metric(MetricStep::ConditionExclusions {
                webhook: Box::new(Arc::clone(&hook.webhook_name)),
            }));
        }
        if stats.evaluated_not_all_true {
            self.ctx
                .metrics
                .observe_match_condition_evaluation(name, ty, op, Duration::ZERO);
        }
        decision
    }

    fn record_skip(
        &mut self,
        hook: &Hook,
        phase: WebhookKind,
        round: u8,
        index: usize,
        reason: SkipReason,
    ) {
        let text = matching::explain(hook, &self.attrs, self.ctx.namespaces, &reason);
        let call = self.push_record(hook, phase, round, index, CallDecision::Skipped);
        if let Some(c) = self.calls.last_mut() {
            c.skip_reason = Some(self.engine.shared_text(text));
        }
        self.step(Entry::Skipped {
            call,
            cause: Box::new(reason),
        });
    }

    /// Records a webhook whose matching failed the request.
    fn record_match_failure(
        &mut self,
        hook: &Hook,
        phase: WebhookKind,
        round: u8,
        index: usize,
        status: &Status,
    ) {
        let reason = SkipReason::RequestFailed {
            message: status.message.clone(),
        };
        self.record_skip(hook, phase, round, index, reason);
        if let Some(c) = self.calls.last_mut() {
            c.error = Some(status.message.as_str().into());
        }
    }

    /// Appends the record of a webhook considered; returns its index.
    fn push_record(
        &mut self,
        hook: &Hook,
        phase: WebhookKind,
        round: u8,
        index: usize,
        decision: CallDecision,
    ) -> CallIx {
        self.calls.push(CallRecord {
            phase,
            round,
            index,
            configuration: Arc::clone(&hook.configuration_name),
            webhook: Arc::clone(&hook.webhook_name),
            decision,
            skip_reason: None,
            allowed: None,
            mutated: false,
            patch: None,
            error: None,
            failure_policy: hook.failure_policy(),
            duration_ms: 0.0,
            policy: None,
        });
        CallIx::try_from(self.calls.len() - 1).unwrap_or(CallIx::MAX)
    }

    /// The record of the call being handled.
    fn call_record(&mut self) -> Option<&mut CallRecord> {
        self.current_call.and_then(|i| self.calls.get_mut(i))
    }

    /// The index of the record of the call being handled.
    fn current_ix(&self) -> CallIx {
        self.current_call
            .and_then(|i| CallIx::try_from(i).ok())
            .unwrap_or(CallIx::MAX)
    }

    /// Records a matching webhook: its call record (now the current one) and the step.
    fn record_match(
        &mut self,
        hook: &Hook,
        inv: &Invocation,
        phase: WebhookKind,
        round: u8,
        index: usize,
    ) -> Slot {
        let call = self.push_record(hook, phase, round, index, CallDecision::Called);
        self.current_call = Some(self.calls.len() - 1);
        if self.engine.options.trace {
            let engine = self.engine;
            let texts = Arc::clone(
                self.invocation_texts(inv)
                    .matched
                    .get_or_insert_with(|| engine.match_texts(inv)),
            );
            self.step(Entry::Matched {
                call,
                rule: u32::try_from(inv.rule).unwrap_or(u32::MAX),
                equivalent: inv.equivalent,
                texts,
            });
        }
        Slot {
            phase,
            round,
            index,
            call,
        }
    }

    /// Whether the invocation sends the request's own kind (always so for exact matches, which
    /// send the request's resource and kind: comparing the names each time costs more).
    fn sends_request_kind(&self, inv: &Invocation) -> bool {
        !inv.equivalent || inv.kind == self.attrs.kind
    }

    /// The texts calls share for an invocation, made the first time it is seen.
    fn invocation_texts(&mut self, inv: &Invocation) -> &mut InvocationTexts {
        if !inv.equivalent {
            return self.own_invocation.get_or_insert_default();
        }
        let same = |i: &Invocation| {
            i.kind == inv.kind
                && i.resource == inv.resource
                && short_eq(&i.sub_resource, &inv.sub_resource)
        };
        let at = match self.invocations.iter().position(|(i, _)| same(i)) {
            Some(at) => at,
            None => {
                self.invocations
                    .push((inv.clone(), InvocationTexts::default()));
                self.invocations.len() - 1
            }
        };
        &mut self.invocations[at].1
    }

    fn parent_done(&self) -> bool {
        self.ctx.deadline.is_some_and(|d| self.elapsed >= d)
    }

    /// Timeout of the next call and the `?timeout=` seconds sent.
    fn call_timeout(&self, hook: &Hook) -> (Duration, u64) {
        let webhook = hook
            .webhook
            .timeout_seconds
            .map(|s| Duration::from_secs(u64::try_from(s.max(0)).unwrap_or(0)));
        let remaining = self.ctx.deadline.map(|d| d.saturating_sub(self.elapsed));
        let effective = match (webhook, remaining) {
            (Some(w), Some(r)) => Some(w.min(r)),
            (w, r) => w.or(r),
        };
        match effective {
            Some(t) if !t.is_zero() => {
                let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
                (t.min(CLIENT_TIMEOUT), secs)
            }
            Some(_) => (Duration::ZERO, CLIENT_TIMEOUT.as_secs()),
            None => (CLIENT_TIMEOUT, CLIENT_TIMEOUT.as_secs()),
        }
    }

    /// Everything before the HTTP exchange: dry-run, version negotiation, endpoint, request.
    fn prepare_call(
        &mut self,
        hook: &Hook,
        inv: &Invocation,
        slot: Slot,
    ) -> Result<WebhookCall, CallError> {
        if self.attrs.dry_run {
            match hook.webhook.side_effects.as_deref() {
                None => {
                    return Err(CallError::Calling(CallingError {
                        reason: "Webhook SideEffects is nil".into(),
                        status: status::bad_request("Webhook SideEffects is nil"),
                        canceled: false,
                    }));
                }
                Some("None" | "NoneOnDryRun") => {}
                Some(_) => {
                    return Err(CallError::Other(status::bad_request(&format!(
                        "admission webhook {} does not support dry run",
                        go_quote(&hook.webhook.name)
                    ))));
                }
            }
        }
        let Some(version) =
            review::negotiate_version(hook.webhook.admission_review_versions.as_deref())
        else {
            return Err(CallError::Calling(CallingError {
                reason: "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)".into(),
                status: status::bad_request("error creating admission objects"),
                canceled: false,
            }));
        };
        let uid = self.ctx.ids.next_uid();
        let (timeout, timeout_secs) = self.call_timeout(hook);
        let kube_version = self.engine.options.kube_version;
        let endpoint = match &hook.timed_endpoint {
            Some((secs, endpoint)) if *secs == timeout_secs => Ok(Arc::clone(endpoint)),
            _ => hook.endpoint.clone().map(|mut endpoint| {
                super::endpoint::with_timeout(&mut endpoint, timeout_secs);
                Arc::new(endpoint)
            }),
        }
        .map_err(|e| {
            // Upstream's client builder returns its own ErrCallingWebhook, which the
            // dispatcher wraps again.
            CallError::Calling(CallingError {
                reason: format!(
                    "could not get REST client: failed calling webhook {}: {e}",
                    go_quote(&hook.webhook.name)
                ),
                status: review::rest_client_status(kube_version, &e),
                canceled: false,
            })
        })?;
        let texts = self.review_texts(inv);
        let (head, tail) = (texts.head(), &*texts.tail);
        let (body, object, old_object) = if self.sends_request_kind(inv) {
            let (kind, release) = (&self.attrs.kind, self.engine.options.kube_version);
            let object = object_text(&self.attrs.object, &mut self.object_json, kind, release);
            let old_object = object_text(
                &self.attrs.old_object,
                &mut self.old_object_json,
                kind,
                release,
            );
            let body = review::review_text(version, &uid, &head, object, old_object, tail);
            (
                body,
                self.attrs.object.clone(),
                self.attrs.old_object.clone(),
            )
        } else {
            let release = self.engine.options.kube_version;
            let object = self.versioned_object(&inv.kind);
            let old_object = self.attrs.old_object.as_deref().map(|o| {
                Arc::new(Object::new(convert_object(
                    o.value(),
                    &self.attrs.kind,
                    &inv.kind,
                    release,
                )))
            });
            let body = review::review_text(
                version,
                &uid,
                &head,
                &review::typed_object_json(
                    object.as_deref().map(Object::value),
                    &inv.kind,
                    self.engine.options.kube_version,
                ),
                &review::typed_object_json(
                    old_object.as_deref().map(Object::value),
                    &inv.kind,
                    self.engine.options.kube_version,
                ),
                tail,
            );
            (body, object, old_object)
        };
        if self.engine.options.trace {
            self.step(Entry::ReviewSent {
                call: slot.call,
                review: ReviewBody::new(ReviewParts {
                    version,
                    uid: uid.as_str().into(),
                    url: Arc::clone(&hook.url_base),
                    timeout_secs,
                    timeout,
                    texts: Arc::clone(&texts),
                    object,
                    old_object,
                    kind: inv.kind.clone(),
                    release: self.engine.options.kube_version,
                }),
            });
        }
        let body = body.into_bytes().into();
        Ok(WebhookCall {
            phase: slot.phase,
            round: slot.round,
            index: slot.index,
            configuration: Arc::clone(&hook.configuration_name),
            webhook: Arc::clone(&hook.webhook_name),
            uid: Arc::clone(&hook.call_uid),
            endpoint,
            ca_bundle: hook.ca_bundle.clone(),
            timeout,
            review_version: version,
            request_uid: uid,
            body,
        })
    }

    /// The shared review text of an invocation.
    fn review_texts(&mut self, inv: &Invocation) -> Arc<ReviewTexts> {
        if let Some(texts) = &self.invocation_texts(inv).review {
            return Arc::clone(texts);
        }
        let [kinds, user, tail] = self.engine.review_pieces(&self.attrs, inv);
        let texts = Arc::new(ReviewTexts {
            kinds,
            names: review::request_names(&self.attrs),
            user,
            tail,
        });
        self.invocation_texts(inv).review = Some(Arc::clone(&texts));
        texts
    }

    /// Normalises a reply: a call that ran past its timeout is a timeout, whatever the replier
    /// says it saw.
    fn normalise(call: &WebhookCall, mut reply: Reply) -> Reply {
        if reply.elapsed > call.timeout
            && !matches!(
                reply.outcome,
                ReplyOutcome::Transport(_) | ReplyOutcome::Canceled
            )
        {
            reply.outcome = ReplyOutcome::Transport(TransportError {
                kind: TransportErrorKind::Timeout,
                detail: "context deadline exceeded".into(),
            });
            reply.elapsed = call.timeout;
        }
        reply
    }

    fn record_reply(&mut self, slot: Slot, reply: &Reply) {
        if self.engine.options.trace {
            let failed = |error: String| Entry::ReplyFailed {
                call: slot.call,
                error: error.into_boxed_str(),
            };
            let entry = match &reply.outcome {
                ReplyOutcome::Http { status, body, .. } => Entry::ReplyReceived {
                    call: slot.call,
                    http_status: *status,
                    // `from_utf8_lossy` decodes byte by byte even when nothing is lost.
                    body: match std::str::from_utf8(body) {
                        Ok(text) => Arc::from(text),
                        Err(_) => Arc::from(String::from_utf8_lossy(body)),
                    },
                },
                ReplyOutcome::Transport(e) => failed(e.detail.clone()),
                ReplyOutcome::ClientConfig(e) => failed(format!("could not build client: {e}")),
                ReplyOutcome::Canceled => failed("context canceled".into()),
                ReplyOutcome::Panicked(p) => failed(format!("panic: {p}")),
            };
            self.step(entry);
        }
        if let Some(c) = self.call_record() {
            c.duration_ms = reply.elapsed.as_secs_f64() * 1000.0;
        }
    }

    /// After verification: audit annotations and warnings (also for denials), then the verdict.
    fn absorb_response(
        &mut self,
        hook: &Hook,
        slot: Slot,
        verified: &review::Verified,
    ) -> Result<(), CallError> {
        for (k, v) in &verified.audit_annotations {
            self.annotate(
                format!("{}/{}", hook.webhook.name, k),
                v.clone(),
                AuditLevel::Metadata,
            );
        }
        for w in &verified.warnings {
            let kept = self.warnings.add(w);
            self.step(Entry::Warning {
                call: slot.call,
                kept,
                text: w.as_str().into(),
            });
        }
        if let Some(c) = self.call_record() {
            c.allowed = Some(verified.allowed);
        }
        if !verified.allowed {
            return Err(CallError::Rejection(status::to_status_err(
                &hook.webhook.name,
                verified.result.as_ref(),
            )));
        }
        Ok(())
    }

    async fn mutating_plugin<R: Replier + Send>(
        &mut self,
        round: u8,
        replier: &mut R,
    ) -> Result<(), Status> {
        self.step(Entry::PhaseStarted {
            phase: WebhookKind::Mutating,
            round,
        });
        let engine = self.engine;
        let start = self.elapsed;
        let result = self.mutating_dispatch(engine, round, replier).await;
        self.observe_plugin(WebhookType::Admit, start, result.is_err());
        result
    }

    /// The plugin-level metrics of one plugin invocation (once per reinvocation round).
    fn observe_plugin(&mut self, ty: WebhookType, start: Duration, rejected: bool) {
        let op = self.attrs.operation;
        let took = self.elapsed - start;
        self.ctx.metrics.observe_controller(ty, op, rejected, took);
        self.ctx.metrics.observe_step(ty, op, rejected, took);
    }

    async fn mutating_dispatch<R: Replier + Send>(
        &mut self,
        engine: &Engine,
        round: u8,
        replier: &mut R,
    ) -> Result<(), Status> {
        let phase = WebhookKind::Mutating;
        // `IsOutputChangedSinceLastWebhookInvocation`: another plugin changed the object.
        if round == 1 && !self.same_as_webhook_output() {
            self.require_reinvoking_previously_invoked(Slot {
                phase,
                call: CallIx::try_from(self.calls.len().saturating_sub(1)).unwrap_or(CallIx::MAX),
                round,
                index: 0,
            });
        }
        let result = self.mutating_hooks(engine, round, replier).await;
        self.webhook_output = self.attrs.object.clone();
        result
    }

    /// Whether the object is (semantically) the one the mutating webhooks left.
    fn same_as_webhook_output(&self) -> bool {
        match (self.webhook_output.as_deref(), self.attrs.object.as_deref()) {
            (None, None) => true,
            (Some(a), Some(b)) if std::ptr::eq(a, b) => true,
            (Some(a), Some(b)) => {
                let release = self.engine.options.kube_version;
                let schema = Schema::for_release(release);
                let k = &self.attrs.kind;
                match schema.kind(&k.group, &k.version, &k.kind) {
                    Some(id) => schema::semantic_equal(schema, id, a.value(), b.value()),
                    None => a.value() == b.value(),
                }
            }
            _ => false,
        }
    }

    async fn mutating_hooks<R: Replier + Send>(
        &mut self,
        engine: &Engine,
        round: u8,
        replier: &mut R,
    ) -> Result<(), Status> {
        let phase = WebhookKind::Mutating;
        for (i, hook) in engine.mutating.iter().enumerate() {
            let inv = match self.decide(hook, phase) {
                Decision::Fail(s) => {
                    self.record_match_failure(hook, phase, round, i, &s);
                    return Err(s);
                }
                Decision::Skip(reason) => {
                    self.record_skip(hook, phase, round, i, reason);
                    continue;
                }
                Decision::Call(inv) => inv,
            };
            if round == 1 && !self.reinvoke.contains(&hook.uid) {
                let reason = SkipReason::NotReinvoked {
                    why: self.not_reinvoked_why(hook, i),
                };
                self.record_skip(hook, phase, round, i, reason);
                continue;
            }
            let slot = self.record_match(hook, &inv, phase, round, i);
            let (changed, err, elapsed) = self.call_mutating(hook, &inv, slot, replier).await;
            let mutation =
                mutation_annotation_value(&hook.configuration, &hook.webhook.name, changed);
            self.annotate(
                format!("mutation.webhook.admission.k8s.io/round_{round}_index_{i}"),
                mutation,
                AuditLevel::Metadata,
            );
            if let Some(c) = self.call_record() {
                c.mutated = changed;
            }
            self.observe_call(hook, phase, err.as_ref(), elapsed);
            if changed {
                self.require_reinvoking_previously_invoked(slot);
                self.should_reinvoke = true;
            }
            if hook.reinvoke_if_needed {
                self.previously_invoked.insert(hook.uid.clone());
            }
            let Some(err) = err else { continue };
            match err {
                CallError::Calling(e) => {
                    let message = format!(
                        "failed calling webhook {}: {}",
                        go_quote(&hook.webhook.name),
                        e.reason
                    );
                    self.fail_call(slot, &message, hook.ignore_failures);
                    if hook.ignore_failures {
                        if !e.canceled {
                            self.fail_open(hook, phase, format!("failed-open.mutation.webhook.admission.k8s.io/round_{round}_index_{i}"));
                        }
                        if self.parent_done() {
                            return Err(status::timeout_error(
                                "request did not complete within requested timeout",
                            ));
                        }
                        continue;
                    }
                    return Err(status::internal_error(&message));
                }
                CallError::Rejection(s) => {
                    self.step(Entry::Denied {
                        call: slot.call,
                        status: Some(Box::new(s.clone())),
                    });
                    return Err(s);
                }
                CallError::Other(s) => {
                    self.fail_call(slot, &s.message, false);
                    return Err(s);
                }
            }
        }
        Ok(())
    }

    /// Why the mutating webhook at `index`, matching in the reinvocation round, is not in the set
    /// to reinvoke, from what round 0 recorded of it.
    fn not_reinvoked_why(&self, hook: &Hook, index: usize) -> NotReinvokedWhy {
        let round0 = self.calls.iter().find(|c| {
            c.phase == WebhookKind::Mutating
                && c.policy.is_none()
                && c.round == 0
                && c.index == index
        });
        match round0 {
            Some(c) if c.decision == CallDecision::Called => {
                if hook.reinvoke_if_needed {
                    NotReinvokedWhy::NoLaterChange
                } else {
                    NotReinvokedWhy::PolicyNever
                }
            }
            other => NotReinvokedWhy::NotCalledInRound0 {
                round0: other.and_then(|c| c.skip_reason.as_deref().map(str::to_string)),
            },
        }
    }

    fn fail_call(&mut self, slot: Slot, message: &str, failed_open: bool) {
        if let Some(c) = self.calls.get_mut(slot.call as usize) {
            c.error = Some(message.into());
        }
        self.step(Entry::CallFailed {
            call: slot.call,
            failed_open,
        });
    }

    fn fail_open(&mut self, hook: &Hook, phase: WebhookKind, key: String) {
        self.ctx
            .metrics
            .observe_webhook_fail_open(&hook.webhook.name, webhook_type(phase));
        let call = self.current_ix();
        self.step(Entry::Metric(MetricStep::FailOpen { call }));
        self.annotate(key, hook.webhook.name.clone(), AuditLevel::Metadata);
    }

    fn require_reinvoking_previously_invoked(&mut self, slot: Slot) {
        if self.previously_invoked.is_empty() {
            return;
        }
        let moved = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(moved);
        self.step(Entry::Reinvocation {
            call: slot.call,
            reinvoke: self.reinvoke.iter().cloned().collect::<Vec<_>>().into(),
        });
    }

    /// Metrics for one call attempt, as both dispatchers record them.
    fn observe_call(
        &mut self,
        hook: &Hook,
        phase: WebhookKind,
        err: Option<&CallError>,
        elapsed: Duration,
    ) {
        let ty = webhook_type(phase);
        let op = self.attrs.operation;
        let name = hook.webhook.name.as_str();
        let (rejected, code, rejection) = match err {
            None => (false, 200, None),
            Some(CallError::Calling(e)) => {
                let rejected = !hook.ignore_failures;
                let rejection = (rejected && !e.canceled)
                    .then_some((RejectionErrorType::CallingWebhookError, e.status.code));
                (rejected, e.status.code, rejection)
            }
            Some(CallError::Rejection(s)) => {
                (true, s.code, Some((RejectionErrorType::NoError, s.code)))
            }
            Some(CallError::Other(_)) => (
                true,
                0,
                Some((RejectionErrorType::ApiserverInternalError, 0)),
            ),
        };
        if let Some((error_type, rcode)) = rejection {
            self.ctx
                .metrics
                .observe_webhook_rejection(name, ty, op, error_type, rcode);
            let call = self.current_ix();
            self.step(Entry::Metric(MetricStep::Rejection {
                call,
                error_type,
                code: rcode,
            }));
        }
        self.ctx
            .metrics
            .observe_webhook(name, ty, op, rejected, code, elapsed);
        let call = self.current_ix();
        self.step(Entry::Metric(MetricStep::Request {
            call,
            code,
            rejected,
        }));
    }

    /// One mutating call: returns (changed, error, duration).
    async fn call_mutating<R: Replier + Send>(
        &mut self,
        hook: &Hook,
        inv: &Invocation,
        slot: Slot,
        replier: &mut R,
    ) -> (bool, Option<CallError>, Duration) {
        let call = match self.prepare_call(hook, inv, slot) {
            Ok(c) => c,
            Err(e) => return (false, Some(e), Duration::ZERO),
        };
        let reply = replier
            .reply(std::slice::from_ref(&call))
            .await
            .into_iter()
            .next()
            .unwrap_or(Reply {
                outcome: ReplyOutcome::Transport(TransportError {
                    kind: TransportErrorKind::Other,
                    detail: "no reply".into(),
                }),
                elapsed: Duration::ZERO,
            });
        let reply = Self::normalise(&call, reply);
        self.elapsed += reply.elapsed;
        self.record_reply(slot, &reply);
        let elapsed = reply.elapsed;
        if let ReplyOutcome::Panicked(p) = &reply.outcome {
            return (
                false,
                Some(CallError::Other(status::internal_error(&format!(
                    "MutatingAdmissionWebhook/{} has panicked: {p}",
                    hook.webhook.name
                )))),
                elapsed,
            );
        }
        let verified = match review::interpret_reply(
            &reply.outcome,
            &call.endpoint.url,
            &call.request_uid,
            call.review_version,
            true,
            self.engine.options.kube_version,
        ) {
            Ok(v) => v,
            Err(e) => return (false, Some(CallError::Calling(e)), elapsed),
        };
        if let Err(e) = self.absorb_response(hook, slot, &verified) {
            return (false, Some(e), elapsed);
        }
        match self.apply_patch(hook, inv, slot, &verified) {
            Ok(changed) => {
                if !changed && verified.patch.is_none() {
                    self.step(Entry::Allowed { call: slot.call });
                }
                (changed, None, elapsed)
            }
            Err(e) => (false, Some(e), elapsed),
        }
    }

    fn apply_patch(
        &mut self,
        hook: &Hook,
        inv: &Invocation,
        slot: Slot,
        verified: &review::Verified,
    ) -> Result<bool, CallError> {
        let Some(bytes) = verified.patch.as_deref() else {
            return Ok(false);
        };
        let patch = match jsonpatch::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                self.step(Entry::PatchFailed {
                    call: slot.call,
                    error: format!("undecodable patch: {e}").into(),
                });
                return Err(if self.engine.options.kube_version.at_least(34) {
                    CallError::Calling(CallingError {
                        reason: format!("received undecodable patch in webhook response: {e}"),
                        status: status::service_unavailable(
                            "error decoding patch in webhook response",
                        ),
                        canceled: false,
                    })
                } else {
                    CallError::Other(status::internal_error(&e.to_string()))
                });
            }
        };
        if patch.is_empty() {
            return Ok(false);
        }
        if self.attrs.object.is_none() {
            let msg = format!(
                "admission webhook {} attempted to modify the object, which is not supported for this operation",
                go_quote(&hook.webhook.name)
            );
            self.step(Entry::PatchFailed {
                call: slot.call,
                error: msg.as_str().into(),
            });
            return Err(CallError::Other(status::internal_error(&msg)));
        }
        let patch_type = verified.patch_type.as_deref().unwrap_or("");
        if patch_type != "JSONPatch" {
            return Err(CallError::Calling(CallingError {
                reason: format!("unsupported patch type {}", go_quote(patch_type)),
                status: status::to_status_err(&hook.webhook.name, verified.result.as_ref()),
                canceled: false,
            }));
        }
        let Patched {
            value: patched,
            changed,
            json: patched_json,
            typed,
            plain,
            edited,
            normalized,
            members,
        } = match self.patch_object(&patch, inv) {
            Ok(p) => p,
            Err(e) => {
                self.step(Entry::PatchFailed {
                    call: slot.call,
                    error: e.as_str().into(),
                });
                return Err(CallError::Other(status::internal_error(&e)));
            }
        };
        let patch_json = patch.to_go_json();
        let value = patch_annotation_value(&hook.configuration, &hook.webhook.name, &patch_json);
        self.annotate(
            format!(
                "patch.webhook.admission.k8s.io/round_{}_index_{}",
                slot.round, slot.index
            ),
            value,
            AuditLevel::Request,
        );
        let same_kind = self.sends_request_kind(inv);
        // What a typed patch leaves was defaulted.
        let current = self.attrs.object.as_ref().filter(|_| same_kind);
        let after = Arc::new(match (same_kind, patched_json) {
            (true, None) if let Some((members, current)) = members.zip(current) => {
                Object::derived(current, members, None)
                    .known_plain()
                    .known_defaulted()
            }
            (true, Some(json)) => Object::with_json(patched, json),
            (true, None) if plain => Object::new(patched).known_plain().known_defaulted(),
            (true, None) if typed => Object::new(patched).known_defaulted(),
            (true, None) => Object::new(patched),
            (false, _) => {
                let converted = convert_object(
                    &patched,
                    &inv.kind,
                    &self.attrs.kind,
                    self.engine.options.kube_version,
                );
                let after = Object::new(converted);
                // Upstream keeps the patched object in the webhook's version; it is converted
                // back to the request's when a webhook of another version follows.
                self.versioned = Some(Versioned {
                    kind: inv.kind.clone(),
                    source: Arc::new(Object::new(Value::Null)),
                    object: Arc::new(Object::new(patched)),
                });
                after
            }
        });
        if let Some(v) = self.versioned.as_mut().filter(|_| !same_kind) {
            v.source = Arc::clone(&after);
        }
        if let Some(c) = self.call_record() {
            c.patch = Some(patch_json.into_boxed_str());
        }
        let before = self.attrs.to_mut().object.take().unwrap_or_default();
        // The text this webhook was sent, when hookscope encoded it (a captured text is sent as
        // it stands, Go's encoding of a decode is not), gives the next one its unchanged members.
        let old_text = self.object_json.take().filter(|_| before.json().is_none());
        self.object_json = match old_text {
            Some(old) if typed && same_kind => {
                let schema = Schema::for_release(self.engine.options.kube_version);
                let kind = &self.attrs.kind;
                let sent = schema
                    .kind(&kind.group, &kind.version, &kind.kind)
                    .filter(|_| normalized)
                    .and_then(|id| before.normalized(schema, id));
                // Known only when what was sent was normal.
                match sent {
                    Some((sent, _)) => {
                        self.patched_text(&old, |n| sent.get(n), &after, true, edited.as_deref())
                    }
                    None if !before.is_map() => None,
                    None => {
                        let normal = self.is_normal_object(&before);
                        self.patched_text(
                            &old,
                            |n| before.member(n),
                            &after,
                            normal,
                            edited.as_deref(),
                        )
                    }
                }
            }
            _ => None,
        };
        self.step(Entry::PatchApplied {
            call: slot.call,
            changed,
            before,
            after: Arc::clone(&after),
        });
        if typed && same_kind {
            self.normal_object = Some(Arc::clone(&after));
        }
        self.attrs.to_mut().object = Some(after);
        self.object_typed = typed && same_kind;
        Ok(changed)
    }

    /// Whether `object` (of the request's kind) is normal: the one a typed patch left, or one
    /// found to be.
    fn is_normal_object(&self, object: &Arc<Object>) -> bool {
        if self
            .normal_object
            .as_ref()
            .is_some_and(|n| Arc::ptr_eq(n, object))
        {
            return true;
        }
        let schema = Schema::for_release(self.engine.options.kube_version);
        let kind = &self.attrs.kind;
        schema
            .kind(&kind.group, &kind.version, &kind.kind)
            .is_some_and(|id| object.is_normal(schema, id))
    }

    /// The review text of a patched object from `old`, the text of the object `sent`: the
    /// members, at any depth, that the patch, the decode and the defaulting left equal keep
    /// their bytes, the others are encoded (`edited`, when known: the top-level members that
    /// can differ). None where the whole object is to be encoded.
    fn patched_text<'v>(
        &self,
        old: &str,
        sent: impl Fn(&str) -> Option<&'v Value>,
        patched: &'v Object,
        deep: bool,
        edited: Option<&[String]>,
    ) -> Option<String> {
        let schema = Schema::for_release(self.engine.options.kube_version);
        let kind = &self.attrs.kind;
        let id = schema.kind(&kind.group, &kind.version, &kind.kind)?;
        if !patched.is_map() {
            return None;
        }
        let text = schema::codec::encode_changed_members(
            schema,
            id,
            old,
            sent,
            |n| patched.member(n),
            deep,
            edited,
        )?
        .ok()?;
        debug_assert_eq!(
            Some(&text),
            schema::codec::encode_unremembered(schema, id, &patched.to_owned_value())
                .ok()
                .as_ref(),
            "a spliced review text is the whole encoding"
        );
        Some(text)
    }

    /// [`Run::patch_object`] without making the current object whole where that is not needed:
    /// a normal, plain object of the request's kind patched directly. A patch that edits only
    /// the `metadata` of an object known to be defaulted, whose kind's defaulting ignores
    /// `metadata`, makes the object with that member replaced: nothing else is copied. An object
    /// that is such a one (members replaced, not made whole) is copied member by member and
    /// compared by member. None where neither applies.
    fn patch_by_members(
        &mut self,
        patch: &jsonpatch::Patch,
        inv: &Invocation,
    ) -> Option<Result<Patched, String>> {
        if !self.sends_request_kind(inv) {
            return None;
        }
        let current = Arc::clone(self.attrs.object.as_ref()?);
        let release = self.engine.options.kube_version;
        let schema = Schema::for_release(release);
        let kind = &inv.kind;
        let id = schema.kind(&kind.group, &kind.version, &kind.kind)?;
        if current.json().is_some()
            || !self.is_normal_object(&current)
            || !current.is_plain()
            || !current.is_map()
        {
            return None;
        }
        let paths = patch.direct_edits();
        let metadata_only = current.is_known_defaulted()
            && !paths.is_empty()
            && paths
                .iter()
                .all(|(p, _)| p == "/metadata" || p.starts_with("/metadata/"))
            && crate::defaulting::ignores_metadata(&kind.group, &kind.version, &kind.kind);
        if !metadata_only && !current.members_only() {
            return None;
        }
        let plain = schema
            .nesting(id)
            .is_some_and(|n| n <= jsonpatch::MAX_DIRECT_NESTING);
        if !plain {
            return None;
        }
        let edits: Vec<schema::codec::Edit<'_>> = paths
            .iter()
            .map(|(path, resizes)| schema::codec::Edit::new(path, *resizes))
            .collect();
        // What the patch reads and writes: `metadata` alone, or the whole object.
        let metadata = metadata_only.then(|| {
            let mut shell = serde_json::Map::new();
            if let Some(m) = current.member("metadata") {
                shell.insert("metadata".into(), m.clone());
            }
            Value::Object(shell)
        });
        let mut decoded = match &metadata {
            Some(shell) => patch.apply_direct_to_plain(shell),
            None => patch.apply_direct_to_plain_owned(current.to_owned_value()),
        }?;
        let sent = |n: &str| match &metadata {
            Some(shell) => shell.get(n),
            None => current.member(n),
        };
        if let Err(e) =
            schema::codec::normalize_in_place_edited_members(schema, id, &mut decoded, sent, &edits)
        {
            return Some(Err(e.to_string()));
        }
        let times_truncated = first_decode_truncates_times(&mut self.decoded_once, &self.attrs);
        let changed = times_truncated
            || !schema::codec::semantic_equal_members(schema, id, sent, |n| decoded.get(n));
        let defaulted = !metadata_only
            && crate::defaulting::defaults(
                &kind.group,
                &kind.version,
                &kind.kind,
                &mut decoded,
                release,
            )
            .changed;
        let edited = (!defaulted).then(|| top_level_members(&edits));
        let members = metadata_only.then(|| {
            let metadata = decoded.as_object_mut().and_then(|m| m.remove("metadata"));
            vec![(Box::from("metadata"), metadata)]
        });
        if cfg!(debug_assertions) {
            let whole = match &members {
                Some(members) => {
                    let mut whole = current.to_owned_value();
                    if let (Value::Object(map), Some((_, metadata))) = (&mut whole, members.first())
                    {
                        match metadata {
                            Some(m) => map.insert("metadata".into(), m.clone()),
                            None => map.remove("metadata"),
                        };
                    }
                    whole
                }
                None => decoded.clone(),
            };
            let mut slow = patch
                .apply_prepared(&jsonpatch::Prepared::new(&current.to_owned_value()))
                .expect("a patch applied directly applies");
            schema::codec::normalize_in_place(schema, id, &mut slow).expect("normalises");
            crate::defaulting::defaults(&kind.group, &kind.version, &kind.kind, &mut slow, release);
            debug_assert_eq!(
                slow, whole,
                "a patch by members is the patch of the whole object"
            );
        }
        Some(Ok(Patched {
            value: if metadata_only { Value::Null } else { decoded },
            changed,
            json: None,
            typed: true,
            plain: true,
            edited,
            normalized: false,
            members,
        }))
    }

    /// Applies a patch to the current object as sent for the invocation `inv`, as upstream does:
    /// Go's marshalling of the object, evanphx's patch, a decode into the kind's Go type
    /// (unknown fields dropped; an unstructured object for kinds without one), `Semantic.DeepEqual`
    /// with the object sent, then the scheme's defaulting. Returns what that made, or the error's
    /// message.
    fn patch_object(
        &mut self,
        patch: &jsonpatch::Patch,
        inv: &Invocation,
    ) -> Result<Patched, String> {
        if let Some(patched) = self.patch_by_members(patch, inv) {
            return patched;
        }
        let versioned;
        let release = self.engine.options.kube_version;
        let schema = Schema::for_release(release);
        let kind = &inv.kind;
        let id = schema.kind(&kind.group, &kind.version, &kind.kind);
        // The object a typed patch left is normal, and so is most often one given (a capture of
        // what an apiserver sent, a decoded manifest): only what differs from it is normalised.
        let current = self
            .attrs
            .object
            .clone()
            .filter(|_| self.sends_request_kind(inv));
        let sent_normal = current
            .as_ref()
            .is_some_and(|current| self.is_normal_object(current));
        // Upstream patches what the webhook was sent, Go's encoding of its typed object
        // (`runtime.Encode`): it has every member Go writes (`status: {}`, a container's
        // `resources: {}`) and none it leaves out (an empty `labels`). An object given otherwise
        // is patched as that encoding, parsed (kept with the object for its next dispatch)...
        let normalized = match (current.as_deref(), id) {
            (Some(current), Some(id)) if !sent_normal && current.json().is_none() => {
                current.normalized(schema, id)
            }
            _ => None,
        };
        let sent_normalized = normalized.is_some();
        let sent_normal = sent_normal || sent_normalized;
        // ... else, where a patch reaches such a member, it is applied to the text hookscope sent.
        let encoded_sent = match self.object_json.as_deref() {
            Some(text)
                if !sent_normal
                    && self.sends_request_kind(inv)
                    && id.is_some()
                    && !patch
                        .agrees_on_shape(self.attrs.object_value().unwrap_or(&Value::Null)) =>
            {
                crate::json::from_str::<Value>(text).ok()
            }
            _ => None,
        };
        let sent = if let Some((normalized, _)) = normalized {
            normalized
        } else if let Some(encoded) = encoded_sent.as_ref() {
            encoded
        } else if self.sends_request_kind(inv) {
            self.attrs.object_value().unwrap_or(&Value::Null)
        } else {
            versioned = self.versioned_object(&inv.kind);
            versioned.as_deref().map_or(&Value::Null, Object::value)
        };
        let Some(id) = id else {
            // An unstructured object: a map, compared as one.
            let (patched, json) = patch
                .apply_prepared_json(&jsonpatch::Prepared::new(sent))
                .map_err(|e| e.to_string())?;
            decodable(&patched)?;
            let changed = *sent != patched;
            // A custom resource is then defaulted by its definition's schema (the object
            // defaulter of apiextensions-apiserver), as a built-in kind is by its scheme below.
            let crd = self
                .engine
                .options
                .registry
                .custom_resource_schema(&inv.resource)
                .filter(|_| matches!(inv.sub_resource.as_str(), "" | "status"));
            let Some(model) = crd.and_then(|c| crate::apply::CrdModel::new(schema, &c).ok()) else {
                return Ok(Patched::untyped(patched, changed, json));
            };
            let mut defaulted = patched.clone();
            model.default_object(&mut defaulted);
            if defaulted == patched {
                return Ok(Patched::untyped(patched, changed, json));
            }
            return Ok(Patched::untyped(defaulted, changed, None));
        };
        // The usual patch is made on the value; anything else the long way (the direct way's
        // results nest far less deeply than a decode refuses).
        let sent_object = current.as_deref().filter(|_| encoded_sent.is_none());
        let direct = match (normalized, sent_object) {
            (Some((_, plain)), _) => plain.then(|| patch.apply_direct_to_plain(sent)).flatten(),
            (None, Some(object)) if object.is_plain() => patch.apply_direct_to_plain(sent),
            (None, Some(_)) => None,
            (None, None) => patch.apply_direct(sent),
        };
        // What a patch applied directly to a plain object leaves, normalised and defaulted, is
        // plain: neither writes a float, and what they add nests no deeper than the kind.
        let plain = direct.is_some()
            && schema
                .nesting(id)
                .is_some_and(|n| n <= jsonpatch::MAX_DIRECT_NESTING);
        let (mut decoded, paths) = match direct {
            Some(patched) => (patched, Some(patch.direct_edits())),
            None => {
                let patched = patch
                    .apply_prepared(&jsonpatch::Prepared::new(sent))
                    .map_err(|e| e.to_string())?;
                decodable(&patched)?;
                (patched, None)
            }
        };
        let edits: Option<Vec<schema::codec::Edit<'_>>> = paths.as_ref().map(|paths| {
            paths
                .iter()
                .map(|(path, resizes)| schema::codec::Edit::new(path, *resizes))
                .collect()
        });
        let unnormalized = cfg!(debug_assertions).then(|| decoded.clone());
        let normalized = match (sent_normal, &edits) {
            (true, Some(edits)) => {
                schema::codec::normalize_in_place_edited(schema, id, &mut decoded, sent, edits)
            }
            (true, None) => schema::codec::normalize_in_place_like(schema, id, &mut decoded, sent),
            (false, _) => schema::codec::normalize_in_place(schema, id, &mut decoded),
        };
        if let Some(mut whole) = unnormalized {
            let result = schema::codec::normalize_in_place(schema, id, &mut whole);
            debug_assert_eq!(
                result.map(|()| &whole),
                normalized.clone().map(|()| &decoded),
                "what was normalised of a patched object is not its whole normalisation"
            );
        }
        normalized.map_err(|e| e.to_string())?;
        let times_truncated = first_decode_truncates_times(&mut self.decoded_once, &self.attrs);
        let changed = times_truncated || !schema::semantic_equal(schema, id, sent, &decoded);
        // The defaults are written in their Go types' form: a normal object stays normal (debug
        // builds, and so every test, check it).
        let defaulted = crate::defaulting::defaults(
            &kind.group,
            &kind.version,
            &kind.kind,
            &mut decoded,
            release,
        )
        .changed;
        if defaulted && cfg!(debug_assertions) {
            let mut normalized = decoded.clone();
            schema::codec::normalize_in_place(schema, id, &mut normalized)
                .map_err(|e| e.to_string())?;
            debug_assert_eq!(
                normalized, decoded,
                "defaulting wrote a value not in Go's form"
            );
        }
        // Only what the patch edited differs from the object sent when that was normal (the
        // decode changed only that) and the defaulting changed nothing.
        let edited = match (&edits, sent_normal && !defaulted) {
            (Some(edits), true) => Some(top_level_members(edits)),
            _ => None,
        };
        // Reviews encode it when a webhook is called with it.
        Ok(Patched {
            value: decoded,
            changed,
            json: None,
            typed: true,
            plain,
            edited,
            normalized: sent_normalized,
            members: None,
        })
    }

    async fn validating_plugin<R: Replier + Send>(
        &mut self,
        replier: &mut R,
    ) -> Result<(), Status> {
        self.step(Entry::PhaseStarted {
            phase: WebhookKind::Validating,
            round: 0,
        });
        let engine = self.engine;
        let start = self.elapsed;
        let result = self.validating_dispatch(engine, replier).await;
        self.observe_plugin(WebhookType::Validating, start, result.is_err());
        result
    }

    /// What the store sets on a created object before validation (`rest.BeforeCreate`'s
    /// `FillObjectMetaSystemFields`): a fresh `uid` (random upstream; here derived from the
    /// request, so that a request dispatched again sends the same) and the `creationTimestamp`.
    /// The time is the
    /// field manager's (the newest `managedFields` time, the same instant at second precision);
    /// an object without `managedFields` keeps its `creationTimestamp`.
    fn fill_system_fields(&mut self) {
        if self.attrs.operation != Operation::Create || !self.attrs.sub_resource.is_empty() {
            return;
        }
        let Some(current) = self.attrs.object.as_deref() else {
            return;
        };
        // A captured object's text is read and given the two members where Go's encoder writes
        // them, without decoding and encoding the whole object.
        if let Some(text) = current.json() {
            let metadata = match current.metadata_spans() {
                Some(recorded) => recorded_metadata(text, recorded),
                None => metadata_in_text(text),
            };
            debug_assert_eq!(
                metadata.as_ref().map(|m| (m.span, &m.members)),
                metadata_in_text(text)
                    .as_ref()
                    .map(|m| (m.span, &m.members)),
                "the metadata recorded with an object's text is where a scan finds it"
            );
            let Some(metadata) = metadata else {
                return;
            };
            let found = system_fields_in_text(text.as_bytes(), &metadata);
            let Some((uid, time)) = self.missing_system_fields(found) else {
                return;
            };
            let schema = Schema::for_release(self.engine.options.kube_version);
            let spliced = schema.by_name("meta/v1.ObjectMeta").and_then(|id| {
                let mut members = Vec::with_capacity(2);
                if let Some(uid) = &uid {
                    members.push(("uid", uid.as_str()));
                }
                if let Some(time) = &time {
                    members.push(("creationTimestamp", time.as_str()));
                }
                splice_metadata(text, &metadata, schema.get(id), &members)
            });
            if let Some(text) = spliced {
                self.attrs.to_mut().object =
                    Some(Arc::new(Object::from_checked_json(text.into_boxed_str())));
                self.object_json = None;
                self.object_typed = false;
                return;
            }
        }
        let Some(meta) = current.member("metadata").and_then(Value::as_object) else {
            return;
        };
        let times = meta
            .get("managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("time").and_then(Value::as_str));
        let found = SystemFields {
            has_uid: meta
                .get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| !u.is_empty()),
            has_time: meta.get("creationTimestamp").is_some_and(|t| !t.is_null()),
            newest_managed_time: times.max().map(String::from),
        };
        let Some((uid, time)) = self.missing_system_fields(found) else {
            return;
        };
        // Only the metadata is copied: the object is the current one with new metadata.
        let mut meta = meta.clone();
        if let Some(uid) = uid {
            meta.insert("uid".into(), Value::String(uid));
        }
        if let Some(time) = time {
            meta.insert("creationTimestamp".into(), Value::String(time));
        }
        let Some(current) = self.attrs.object.as_ref() else {
            return;
        };
        let meta = Value::Object(meta);
        let text = self.spliced_text(&[("metadata", Some(&meta))]);
        let derived = Object::derived(current, vec![("metadata".into(), Some(meta))], None);
        self.attrs.to_mut().object = Some(Arc::new(derived));
        self.object_json = text;
    }

    /// The review text of the current object with the top-level `members` replaced (None:
    /// removed), made from the current object's text when it is known, so that only those
    /// members are encoded.
    fn spliced_text(&self, members: &[(&str, Option<&Value>)]) -> Option<String> {
        let current = self.attrs.object.as_deref()?;
        let old = current.json().or(self.object_json.as_deref())?;
        let schema = Schema::for_release(self.engine.options.kube_version);
        let kind = &self.attrs.kind;
        let id = schema.kind(&kind.group, &kind.version, &kind.kind)?;
        schema::codec::encode_spliced(schema, id, old, members)?.ok()
    }

    /// The `uid` and `creationTimestamp` to set, if any is missing (the time only where the
    /// field manager's is known).
    fn missing_system_fields(
        &self,
        found: SystemFields,
    ) -> Option<(Option<String>, Option<String>)> {
        let uid = (!found.has_uid).then(|| created_uid(&self.attrs));
        let time = found.newest_managed_time.filter(|_| !found.has_time);
        (uid.is_some() || time.is_some()).then_some((uid, time))
    }

    /// What the kind's registry strategy changes before validation (see [`strategy`]): the
    /// generation, the status of a create, the status or spec an update cannot change.
    fn prepare_for_validation(&mut self) {
        let a = &self.attrs;
        let Some(current) = a.object.as_ref() else {
            return;
        };
        let custom = self
            .engine
            .options
            .registry
            .custom_resource(&a.resource.group, &a.resource.resource)
            .and_then(|versions| versions.iter().find(|v| v.name == a.resource.version))
            .map(|v| strategy::CustomResource { status: v.status });
        let Some(prepared) = strategy::prepare_members(
            self.engine.options.kube_version,
            a.operation,
            &a.resource,
            &a.sub_resource,
            &a.name,
            current,
            a.old_object_value(),
            custom,
            &self.engine.options.api_audiences,
        ) else {
            return;
        };
        let schema = Schema::for_release(self.engine.options.kube_version);
        let kind = &self.attrs.kind;
        let id = schema.kind(&kind.group, &kind.version, &kind.kind);
        // The object as the apiserver holds it: its Go type's encoding. When the rest already
        // is, only the members the strategy or the store changed are normalised; otherwise the
        // whole object is, when something first reads it whole.
        let (object, typed, text) = match (prepared, id) {
            (strategy::Prepared::Members(members), Some(id)) if self.object_typed => {
                // Other members (the spec, a pod template) only where the strategy changed
                // them (a disabled field dropped, a finalizer added).
                let mut names = vec!["metadata", "status"];
                for (name, _) in &members {
                    if !names.contains(name) {
                        names.push(name);
                    }
                }
                let changed_names = names.as_slice();
                let mut changed = serde_json::Map::new();
                for &name in changed_names {
                    let value = match members.iter().find(|(n, _)| *n == name) {
                        Some((_, v)) => Some(v.clone()),
                        None => current.member(name).cloned(),
                    };
                    if let Some(value) = value {
                        changed.insert(name.into(), value);
                    }
                }
                let mut changed = Value::Object(changed);
                let normalized = schema::codec::normalize_members_in_place(
                    schema,
                    id,
                    &mut changed,
                    changed_names,
                );
                let members = changed_names
                    .iter()
                    .map(|name| {
                        let value = changed.as_object_mut().and_then(|m| m.remove(*name));
                        (Box::from(*name), value)
                    })
                    .collect::<Vec<_>>();
                let text = self.spliced_text(&member_refs(&members));
                (
                    Object::derived(current, members, None),
                    normalized.is_ok(),
                    text,
                )
            }
            (strategy::Prepared::Members(members), id) => {
                let members = members
                    .into_iter()
                    .map(|(name, value)| (Box::from(name), Some(value)))
                    .collect::<Vec<_>>();
                let text = self.spliced_text(&member_refs(&members));
                let normalize = id.map(|id| (schema, id));
                (Object::derived(current, members, normalize), false, text)
            }
            (strategy::Prepared::Whole(mut prepared, members), id) => {
                let mut typed = false;
                if let Some(id) = id {
                    let normalized = if self.object_typed {
                        schema::codec::normalize_members_in_place(
                            schema,
                            id,
                            &mut prepared,
                            members,
                        )
                    } else {
                        schema::codec::normalize_in_place(schema, id, &mut prepared)
                    };
                    typed = normalized.is_ok();
                }
                (Object::new(prepared), typed, None)
            }
        };
        self.attrs.to_mut().object = Some(Arc::new(object));
        self.object_json = text;
        self.object_typed = typed;
    }

    /// The warnings the kind's strategy adds (`WarningsOnCreate` / `WarningsOnUpdate`, see
    /// [`strategy::strategy_warnings`]), on the object the strategy prepared (`unprepared`: as
    /// it was before, for what `PrepareForCreate` itself warns of). Not a webhook's
    /// warnings: no trace step names them; the client gets them.
    fn strategy_warnings(&mut self, unprepared: Option<&Object>) {
        let a = &self.attrs;
        // Reading a captured object's value parses its text: only for kinds that warn.
        if !strategy::warns_for(&a.resource.group, &a.resource.resource) {
            return;
        }
        let Some(object) = a.object.as_deref() else {
            return;
        };
        let texts = strategy::strategy_warnings(
            self.engine.options.kube_version,
            a.operation,
            &a.resource,
            &a.sub_resource,
            object,
            unprepared.unwrap_or(object),
            a.old_object_value(),
        );
        for text in texts {
            self.warnings.add(&text);
        }
    }

    /// The scale subresource (`toScaleUpdateValidation` in each registry, the custom resources'
    /// one included): validation sees Scales rebuilt from the parent that the mutated Scale
    /// updated, which carry no `managedFields`: the old Scale as it was, the new one with the
    /// mutated replicas and resourceVersion (whatever else mutation changed in the Scale is lost,
    /// as in the apiserver). Replicas of 0 are not written (`omitempty`); a custom resource's old
    /// Scale without replicas (the smallest int32 marking it for mutation) has 0.
    fn scale_for_validation(&mut self) {
        let a = &self.attrs;
        let scale =
            a.kind.group == "autoscaling" && a.kind.version == "v1" && a.kind.kind == "Scale";
        if a.operation != Operation::Update || a.sub_resource != "scale" || !scale {
            return;
        }
        let (Some(new), Some(old)) = (a.object_value(), a.old_object_value()) else {
            return;
        };
        let mut old = old.clone();
        if let Some(Value::Object(meta)) = old.get_mut("metadata") {
            meta.remove("managedFields");
        }
        let unset = |v: &Value| {
            v.as_i64()
                .is_some_and(|r| r == 0 || r == i64::from(i32::MIN))
        };
        if let Some(Value::Object(spec)) = old.get_mut("spec")
            && spec.get("replicas").is_some_and(unset)
        {
            spec.remove("replicas");
        }
        let mut rebuilt = old.clone();
        let replicas = new
            .pointer("/spec/replicas")
            .filter(|r| r.as_i64() != Some(0))
            .cloned();
        if let Some(Value::Object(spec)) = rebuilt.get_mut("spec") {
            match replicas {
                Some(r) => spec.insert("replicas".into(), r),
                None => spec.remove("replicas"),
            };
        }
        let rv = new.pointer("/metadata/resourceVersion").cloned();
        if let (Some(Value::Object(meta)), Some(rv)) = (rebuilt.get_mut("metadata"), rv) {
            meta.insert("resourceVersion".into(), rv);
        }
        let attrs = self.attrs.to_mut();
        attrs.object = Some(Arc::new(Object::new(rebuilt)));
        attrs.old_object = Some(Arc::new(Object::new(old)));
        self.object_json = None;
        self.object_typed = false;
        self.old_object_json = None;
    }

    async fn validating_dispatch<R: Replier + Send>(
        &mut self,
        engine: &Engine,
        replier: &mut R,
    ) -> Result<(), Status> {
        let phase = WebhookKind::Validating;
        let mut relevant: Vec<(&Hook, Invocation)> = Vec::with_capacity(engine.validating.len());
        for (i, hook) in engine.validating.iter().enumerate() {
            match self.decide(hook, phase) {
                Decision::Fail(s) => {
                    self.record_match_failure(hook, phase, 0, i, &s);
                    return Err(s);
                }
                Decision::Skip(reason) => self.record_skip(hook, phase, 0, i, reason),
                Decision::Call(inv) => relevant.push((hook, inv)),
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        if self.parent_done() {
            for (j, (hook, _)) in relevant.iter().enumerate() {
                self.record_skip(hook, phase, 0, j, SkipReason::TimedOutBeforeCall);
            }
            return Err(status::timeout_error(
                "request did not complete within requested timeout",
            ));
        }
        // Call records of the matching webhooks follow one another from here, in order.
        let first_record = self.calls.len();
        let mut batch: Vec<WebhookCall> = Vec::with_capacity(relevant.len());
        let mut prepared: Vec<Result<usize, CallError>> = Vec::with_capacity(relevant.len());
        for (j, (hook, inv)) in relevant.iter().enumerate() {
            let slot = self.record_match(hook, inv, phase, 0, j);
            prepared.push(self.prepare_call(hook, inv, slot).map(|call| {
                batch.push(call);
                batch.len() - 1
            }));
        }
        let mut replies = if batch.is_empty() {
            Vec::new()
        } else {
            replier.reply(&batch).await
        }
        .into_iter();
        let start = self.elapsed;
        let mut slowest = Duration::ZERO;
        let mut errors: Vec<Status> = Vec::new();
        for (j, prep) in prepared.into_iter().enumerate() {
            let (hook, _) = relevant[j];
            let slot = Slot {
                phase,
                round: 0,
                index: j,
                call: CallIx::try_from(first_record + j).unwrap_or(CallIx::MAX),
            };
            self.current_call = Some(first_record + j);
            let (err, elapsed, panicked) = match prep {
                Err(e) => (Some(e), Duration::ZERO, false),
                Ok(k) => {
                    let call = &batch[k];
                    let reply = replies.next().unwrap_or(Reply {
                        outcome: ReplyOutcome::Transport(TransportError {
                            kind: TransportErrorKind::Other,
                            detail: "no reply".into(),
                        }),
                        elapsed: Duration::ZERO,
                    });
                    let reply = Self::normalise(call, reply);
                    slowest = slowest.max(reply.elapsed);
                    self.elapsed = start + reply.elapsed;
                    self.record_reply(slot, &reply);
                    if let ReplyOutcome::Panicked(p) = &reply.outcome {
                        let msg = format!(
                            "ValidatingAdmissionWebhook/{} has panicked: {p}",
                            hook.webhook.name
                        );
                        (
                            Some(CallError::Other(status::internal_error(&msg))),
                            reply.elapsed,
                            true,
                        )
                    } else {
                        match review::interpret_reply(
                            &reply.outcome,
                            &call.endpoint.url,
                            &call.request_uid,
                            call.review_version,
                            false,
                            self.engine.options.kube_version,
                        ) {
                            Err(e) => (Some(CallError::Calling(e)), reply.elapsed, false),
                            Ok(v) => (
                                self.absorb_response(hook, slot, &v).err(),
                                reply.elapsed,
                                false,
                            ),
                        }
                    }
                }
            };
            if panicked {
                let message = match &err {
                    Some(CallError::Other(s)) => s.message.clone(),
                    _ => String::new(),
                };
                self.fail_call(slot, &message, hook.ignore_failures);
                if hook.ignore_failures {
                    self.fail_open(
                        hook,
                        phase,
                        format!(
                            "failed-open.validating.webhook.admission.k8s.io/round_0_index_{j}"
                        ),
                    );
                } else if let Some(CallError::Other(s)) = err {
                    errors.push(s);
                }
                continue;
            }
            self.observe_call(hook, phase, err.as_ref(), elapsed);
            match err {
                None => self.step(Entry::Allowed { call: slot.call }),
                Some(CallError::Calling(e)) => {
                    let message = format!(
                        "failed calling webhook {}: {}",
                        go_quote(&hook.webhook.name),
                        e.reason
                    );
                    self.fail_call(slot, &message, hook.ignore_failures);
                    if hook.ignore_failures {
                        if !e.canceled {
                            self.fail_open(hook, phase, format!("failed-open.validating.webhook.admission.k8s.io/round_0_index_{j}"));
                        }
                    } else {
                        errors.push(status::internal_error(&message));
                    }
                }
                Some(CallError::Rejection(s)) => {
                    self.step(Entry::Denied {
                        call: slot.call,
                        status: Some(Box::new(s.clone())),
                    });
                    errors.push(s);
                }
                Some(CallError::Other(s)) => {
                    self.fail_call(slot, &s.message, false);
                    errors.push(s);
                }
            }
        }
        self.elapsed = start + slowest;
        match errors.into_iter().next() {
            Some(s) => Err(s),
            None => Ok(()),
        }
    }
}

fn webhook_type(phase: WebhookKind) -> WebhookType {
    match phase {
        WebhookKind::Mutating => WebhookType::Admit,
        WebhookKind::Validating => WebhookType::Validating,
    }
}

/// What an object's `metadata` holds of the fields the store sets on create.
struct SystemFields {
    has_uid: bool,
    has_time: bool,
    newest_managed_time: Option<String>,
}

/// An object text's `metadata` object and its members, scanned once.
struct MetadataText<'t> {
    /// Where the `metadata` object lies.
    span: crate::scan::Span,
    /// Its members in text order: key and value span.
    members: Vec<(&'t [u8], crate::scan::Span)>,
}

/// The `metadata` of an object's JSON text (the last one when the name repeats, as Go decodes
/// it); None when it has none that is an object.
fn metadata_in_text(text: &str) -> Option<MetadataText<'_>> {
    use crate::scan;
    let buf = text.as_bytes();
    let mut metadata = None;
    // One pass: the members of `metadata` are found while the object is walked.
    let end = scan::object_members(buf, scan::skip_whitespace(buf, 0), |k, v| {
        if k != b"metadata" {
            return scan::value_end(buf, v);
        }
        if buf.get(v) != Some(&b'{') {
            metadata = None;
            return scan::value_end(buf, v);
        }
        let mut members = Vec::with_capacity(8);
        let end = scan::object_members(buf, v, |k, at| {
            let end = scan::value_end(buf, at)?;
            members.push((k, (at, end)));
            Ok(end)
        })?;
        metadata = Some(MetadataText {
            span: (v, end),
            members,
        });
        Ok(end)
    })
    .ok()?;
    if !scan::only_whitespace_after(buf, end) {
        return None;
    }
    metadata
}

/// The [`MetadataText`] of `text` from the places recorded when it was checked.
fn recorded_metadata<'t>(
    text: &'t str,
    recorded: &super::object::MetadataSpans,
) -> Option<MetadataText<'t>> {
    let (span, members) = recorded.found.as_ref()?;
    let buf = text.as_bytes();
    Some(MetadataText {
        span: *span,
        members: members
            .iter()
            .map(|&((from, to), value)| (&buf[from..to], value))
            .collect(),
    })
}

/// [`SystemFields`] of an object's `metadata` read from its text.
fn system_fields_in_text(buf: &[u8], found: &MetadataText<'_>) -> SystemFields {
    use crate::scan;
    let mut fields = SystemFields {
        has_uid: false,
        has_time: false,
        newest_managed_time: None,
    };
    let mut managed = None;
    for &(k, v) in &found.members {
        match k {
            b"uid" => fields.has_uid = scan::string(buf, v).is_some_and(|u| !u.is_empty()),
            b"creationTimestamp" => fields.has_time = !scan::is_null(buf, v),
            b"managedFields" => managed = Some(v),
            _ => {}
        }
    }
    if let Some(list) = managed.filter(|(start, _)| buf.get(*start) == Some(&b'[')) {
        let mut times: Vec<String> = Vec::new();
        let _ = scan::elements(buf, list, |_, entry| {
            let _ = scan::members(buf, entry, |k, v| {
                if k == b"time"
                    && let Some(t) = scan::string(buf, v)
                {
                    times.push(t.into_owned());
                }
            });
        });
        fields.newest_managed_time = times.into_iter().max();
    }
    fields
}

/// Replaced members as [`Run::spliced_text`] takes them.
fn member_refs(members: &[(Box<str>, Option<Value>)]) -> Vec<(&str, Option<&Value>)> {
    members
        .iter()
        .map(|(name, value)| (&**name, value.as_ref()))
        .collect()
}

/// `text` (an object's compact JSON, its `metadata` scanned into `found`) with string members
/// set in its `metadata`: a member that is there with `null` gets the value, one that is not is
/// inserted after the last member that Go's `ObjectMeta` writes before it. None when one of the
/// members is already there with a value.
fn splice_metadata(
    text: &str,
    found: &MetadataText<'_>,
    meta: &schema::Struct,
    members: &[(&str, &str)],
) -> Option<String> {
    let buf = text.as_bytes();
    let start = found.span.0 + 1;
    // (where, Go index, bytes replaced, the member's name when it is inserted, its value)
    let mut edits: Vec<(usize, usize, usize, Option<&str>, &str)> =
        Vec::with_capacity(members.len());
    for &(name, value) in members {
        if let Some(&(_, (at, end))) = found.members.iter().find(|(k, _)| *k == name.as_bytes()) {
            if &buf[at..end] != b"null" {
                return None;
            }
            edits.push((at, 0, end - at, None, value));
            continue;
        }
        let index = meta.index_of(name)?;
        // The members Go writes before this one: those whose field (the last of that name,
        // as `index_of` finds it) comes before it; names compared, not looked up.
        let after = found
            .members
            .iter()
            .filter(|(k, _)| {
                meta.fields
                    .iter()
                    .rposition(|f| f.name.as_bytes() == *k)
                    .is_some_and(|at| at < index)
            })
            .map(|(_, v)| v.1)
            .max();
        edits.push((after.unwrap_or(start), index, 0, Some(name), value));
    }
    // Several members inserted at one place keep Go's order.
    edits.sort_unstable_by_key(|e| (e.0, e.1));
    let extra: usize = members.iter().map(|(n, v)| n.len() + v.len() + 8).sum();
    let mut out = String::with_capacity(text.len() + extra);
    let mut copied = 0;
    for (i, &(at, _, replaced, name, value)) in edits.iter().enumerate() {
        out.push_str(&text[copied..at]);
        copied = at + replaced;
        let Some(name) = name else {
            push_plain_or_json_string(&mut out, value);
            continue;
        };
        if at != start {
            out.push(',');
        }
        out.push('"');
        out.push_str(name);
        out.push_str("\":");
        push_plain_or_json_string(&mut out, value);
        // At the start of metadata: a comma before what follows, another insert or a member.
        let next_here = edits.get(i + 1).is_some_and(|e| e.0 == at);
        if at == start && (next_here || !found.members.is_empty()) {
            out.push(',');
        }
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// `value` as Go's encoder writes a string: as it stands between quotes when it holds nothing
/// that encoder escapes (a uid, a timestamp), else through [`crate::gofmt::push_json_string`].
fn push_plain_or_json_string(out: &mut String, value: &str) {
    if crate::scan::html_string_stop(value.as_bytes(), 0).is_none() {
        out.reserve(value.len() + 2);
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        crate::gofmt::push_json_string(out, value);
    }
}

/// A uid for a created object, the same whenever the same request is dispatched: FNV-1a of the
/// resource, namespace and name, written as a version 4 UUID.
fn created_uid(attrs: &Attributes) -> String {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    // Two FNV-1a hashes of the same bytes from two seeds, in one pass.
    let mut hashes = [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4u64];
    let mut fnv = |bytes: &[u8]| {
        for &b in bytes {
            for h in &mut hashes {
                *h = (*h ^ u64::from(b)).wrapping_mul(PRIME);
            }
        }
    };
    for part in [
        &attrs.resource.group,
        &attrs.resource.resource,
        &attrs.namespace,
        &attrs.name,
    ] {
        fnv(part.as_bytes());
        fnv(&[0]);
    }
    // Each hash ends with its own index.
    for (i, h) in hashes.iter_mut().enumerate() {
        *h = (*h ^ i as u64).wrapping_mul(PRIME);
    }
    let n = (u128::from(hashes[0]) << 64) | u128::from(hashes[1]);
    let n = (n & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
    uuid_text(n)
}

/// `n` as a UUID's text: `{n:032x}` in groups of 8-4-4-4-12 digits.
fn uuid_text(n: u128) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    /// Where each byte's two digits go.
    const AT: [usize; 16] = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
    let mut uid = [b'-'; 36];
    for (b, at) in n.to_be_bytes().into_iter().zip(AT) {
        uid[at] = DIGITS[usize::from(b >> 4)];
        uid[at + 1] = DIGITS[usize::from(b & 0xf)];
    }
    String::from_utf8(uid.to_vec()).unwrap_or_default()
}

/// Whether this decode of a patched object of `attrs` is the first (`decoded_once` says whether
/// one was made, and is set) and truncates the `managedFields` times the field manager set for
/// the request, which makes the object differ from the one sent.
fn first_decode_truncates_times(decoded_once: &mut bool, attrs: &Attributes) -> bool {
    let first = !std::mem::replace(decoded_once, true);
    first && managed_fields_fresh(attrs)
}

/// Whether the field manager set a `managedFields` time for this request, which the apiserver
/// then holds at nanosecond precision until the first decode of a patched object truncates it:
/// an entry of the object whose manager, operation and time no entry of the old object has (any
/// entry on a create). The captured object shows the time at seconds only, so an entry the
/// request refreshed within the second of its previous time is not seen as refreshed.
fn managed_fields_fresh(attrs: &Attributes) -> bool {
    fn entries(o: Option<&Value>) -> &[Value] {
        o.and_then(|o| o.pointer("/metadata/managedFields"))
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    }
    fn key(e: &Value) -> [&str; 4] {
        ["manager", "operation", "subresource", "time"]
            .map(|name| e.get(name).and_then(Value::as_str).unwrap_or_default())
    }
    let old = entries(attrs.old_object_value());
    entries(attrs.object_value()).iter().any(|e| {
        e.get("time").is_some_and(Value::is_string) && !old.iter().any(|o| key(o) == key(e))
    })
}

/// `{"configuration":"<cfg>","webhook":"<name>","mutated":<bool>}`, as Go marshals it.
pub fn mutation_annotation_value(configuration: &str, webhook: &str, mutated: bool) -> String {
    let mut s = String::with_capacity(64 + configuration.len() + webhook.len());
    s.push_str("{\"configuration\":");
    go_json_string(&mut s, configuration);
    s.push_str(",\"webhook\":");
    go_json_string(&mut s, webhook);
    s.push_str(if mutated {
        ",\"mutated\":true}"
    } else {
        ",\"mutated\":false}"
    });
    s
}

/// `{"configuration":"<cfg>","webhook":"<name>","patch":<patch>,"patchType":"JSONPatch"}`, as Go
/// marshals it; `patch_json` is the decoded patch re-marshalled
/// ([`crate::jsonpatch::Patch::to_go_json`]).
pub fn patch_annotation_value(configuration: &str, webhook: &str, patch_json: &str) -> String {
    let mut value = String::with_capacity(patch_json.len() + 96);
    value.push_str("{\"configuration\":");
    go_json_string(&mut value, configuration);
    value.push_str(",\"webhook\":");
    go_json_string(&mut value, webhook);
    value.push_str(",\"patch\":");
    value.push_str(patch_json);
    value.push_str(",\"patchType\":\"JSONPatch\"}");
    value
}

/// The decode of a patched object (`jsonSerializer.Decode` of evanphx's result): its JSON text
/// is first read by Go's `encoding/json` for its kind, which stops at 10,000 levels, as a patch
/// adding a deep value to a deep place can make it. The engine's error message then.
fn decodable(patched: &Value) -> Result<(), String> {
    match crate::json::too_deep_value(patched, crate::json::MAX_DEPTH) {
        None => Ok(()),
        Some(bracket) => Err(crate::json::decode_depth_error(bracket)),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_groups_the_hex_digits() {
        for n in [
            0u128,
            1,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            let hex = format!("{n:032x}");
            let grouped = [
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..],
            ]
            .join("-");
            assert_eq!(uuid_text(n), grouped);
        }
    }

    /// The uid of a created object: FNV-1a over the object's group, resource, namespace and
    /// name, each followed by a zero byte, then the hash's index, from two seeds, one hash
    /// after the other (the definition the one-pass [`created_uid`] must keep).
    fn created_uid_by_definition(attrs: &Attributes) -> String {
        let mut hashes = [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4u64];
        for (i, h) in hashes.iter_mut().enumerate() {
            let parts = [
                &attrs.resource.group,
                &attrs.resource.resource,
                &attrs.namespace,
                &attrs.name,
            ];
            let mut bytes: Vec<u8> = Vec::new();
            for part in parts {
                bytes.extend_from_slice(part.as_bytes());
                bytes.push(0);
            }
            bytes.push(i as u8);
            for b in bytes {
                *h ^= u64::from(b);
                *h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        let n = (u128::from(hashes[0]) << 64) | u128::from(hashes[1]);
        let n = (n & !(0xf << 76) & !(0x3 << 62)) | (0x4 << 76) | (0x2 << 62);
        let hex = format!("{n:032x}");
        [
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..],
        ]
        .join("-")
    }

    #[test]
    fn created_uids_follow_their_definition() {
        let names = ["", "a", "cm-1", "é-ü", "a-name-longer-than-sixteen-bytes"];
        for (i, name) in names.iter().enumerate() {
            for group in ["", "apps", "example.com"] {
                let resource = ["configmaps", "pods", ""][i % 3];
                let namespace = ["", "bench", "kube-system"][(i + 1) % 3];
                let attrs: Attributes = serde_json::from_value(serde_json::json!({
                    "operation": "CREATE",
                    "kind": {"group": group, "version": "v1", "kind": "K"},
                    "resource": {
                        "group": group,
                        "version": "v1",
                        "resource": resource,
                    },
                    "namespace": namespace,
                    "name": name,
                }))
                .unwrap();
                assert_eq!(created_uid(&attrs), created_uid_by_definition(&attrs));
            }
        }
    }

    /// A metadata span and its members, as [`MetadataText`] holds them.
    type Scanned<'t> = (crate::scan::Span, Vec<(&'t [u8], crate::scan::Span)>);

    /// [`metadata_in_text`] by its definition: the object's members scanned, then those of
    /// the last `metadata` (when an object) scanned again.
    fn metadata_in_two_passes(text: &str) -> Option<Scanned<'_>> {
        let buf = text.as_bytes();
        let mut metadata = None;
        crate::scan::members(buf, (0, buf.len()), |k, v| {
            if k == b"metadata" {
                metadata = Some(v);
            }
        })
        .ok()?;
        let span = metadata.filter(|(start, _)| buf.get(*start) == Some(&b'{'))?;
        let mut members = Vec::new();
        crate::scan::members(buf, span, |k, v| members.push((k, v))).ok()?;
        Some((span, members))
    }

    /// Object texts, well-formed or not, with `metadata` where scans of it go wrong.
    const METADATA_TEXTS: &[&str] = &[
        r#"{}"#,
        r#"{"metadata":{}}"#,
        r#" { "metadata" : { "name" : "a" , "labels" : { "x" : "y" } } } "#,
        r#"{"kind":"X","metadata":{"labels":{"a":"b"}},"data":{"k":"{\"}"}}"#,
        r#"{"metadata":{"name":"n","creationTimestamp":null,"labels":{}}}"#,
        r#"{"metadata":{"name":"a"},"metadata":{"name":"b","uid":"u"}}"#,
        r#"{"metadata":{"name":"a"},"metadata":null}"#,
        r#"{"metadata":null,"metadata":{"name":"b"}}"#,
        r#"{"metadata":[1,2]}"#,
        r#"{"metadata":"text"}"#,
        r#"{"metadata":{"managedFields":[{"time":"t"}],"a\"b":1}}"#,
        r#"{"metadata":{"name":"a"}} x"#,
        r#"{"metadata":{"name":"a"}"#,
        r#"{"metadata":{"name" "a"}}"#,
        r#"{"metadata":{"name":"a",}}"#,
        r#"{"metadata":{"name":"a"}],"x":1}"#,
        r#"["metadata"]"#,
        r#""#,
    ];

    #[test]
    fn metadata_is_found_in_one_pass_as_in_two() {
        let texts = METADATA_TEXTS;
        for text in texts {
            let one = metadata_in_text(text).map(|m| (m.span, m.members));
            assert_eq!(one, metadata_in_two_passes(text), "{text}");
        }
    }

    #[test]
    fn the_metadata_recorded_while_checking_a_text_is_what_a_scan_finds() {
        let more = [
            r#"{"metad\\u0061ta":{"name":"a"}}"#,
            r#"{"metadata":{"managedFields":[{"time":"t"}],"c":[{"d":{}}]}}"#,
            r#"{"metadata":{"name":"a"},"spec":{"x":[1,2.5e3,true,false,null]}}"#,
            r#"{"metadata":{"name": "a"}}"#,
            r#"{ "metadata":{}}"#,
            r#"{"metadata":{"name":"\\x"}}"#,
            r#"{"metadata":{"name":01}}"#,
            r#"{"a":{"b":{"c":{}}}}"#,
        ];
        for text in METADATA_TEXTS.iter().chain(&more) {
            // Where a request holds it: the spans are the object's own.
            let line = format!(r#"{{"object":{text}}}"#);
            let v = "{\"object\":".len();
            let checked = crate::scan::checked_compact_value_end(line.as_bytes(), v, 2)
                .filter(|_| text.starts_with('{'));
            let recorded = Object::checked_compact(&line, v, 2);
            assert_eq!(recorded.as_ref().map(|r| r.1), checked, "{text}");
            let Some((object, end)) = recorded else {
                continue;
            };
            assert_eq!(object.json(), Some(&line[v..end]));
            let spans = object.metadata_spans().expect("recorded");
            let json = object.json().unwrap();
            let found = recorded_metadata(json, spans).map(|m| (m.span, m.members));
            let scanned = metadata_in_text(json).map(|m| (m.span, m.members));
            assert_eq!(found, scanned, "{text}");
        }
        // Nesting beyond the limit is refused as the plain check refuses it.
        for n in [100, 125, 126, 127, 200] {
            for member in ["a", "metadata"] {
                let (open, close) = ("[".repeat(n), "]".repeat(n));
                let deep = format!(r#"{{"o":{{"{member}":{{"b":{open}{close}}}}}}}"#);
                let v = "{\"o\":".len();
                assert_eq!(
                    Object::checked_compact(&deep, v, 2).map(|r| r.1),
                    crate::scan::checked_compact_value_end(deep.as_bytes(), v, 2),
                    "{n} {member}"
                );
            }
        }
    }

    #[test]
    fn plain_strings_are_written_as_go_writes_them() {
        let mut strings: Vec<String> = [
            "",
            "3443348f-dc01-4ea6-a1be-e84a6ecb30a4",
            "2024-01-02T03:04:05Z",
            "a b~",
            "<",
            ">",
            "&",
            "\"",
            "\\",
            "\n",
            "\u{1}",
            "\u{7f}",
            "é",
            "\u{2028}",
            "x\u{2029}y",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        strings.extend((0u8..=127).map(|b| format!("ab{}cd", char::from(b))));
        // Longer strings, read a word at a time, with the byte in each place of a word.
        for c in [
            '"', '\\', '<', '>', '&', '\n', '\u{7f}', 'é', '\u{2028}', '\u{2029}', 'x',
        ] {
            for at in 0..17 {
                let mut t: String = "0123456789abcdefghij".chars().take(at).collect();
                t.push(c);
                t.push_str("klmnopqrst");
                strings.push(t);
            }
        }
        for s in &strings {
            let (mut fast, mut slow) = (String::new(), String::new());
            push_plain_or_json_string(&mut fast, s);
            crate::gofmt::push_json_string(&mut slow, s);
            assert_eq!(fast, slow, "{s:?}");
        }
    }

    #[test]
    fn spliced_members_go_where_go_orders_every_metadata_field() {
        let schema = Schema::for_release(crate::KubeVersion::NEWEST);
        let meta = schema.get(schema.by_name("meta/v1.ObjectMeta").unwrap());
        for (name, value) in [("uid", "u"), ("creationTimestamp", "t")] {
            let at = meta.index_of(name).unwrap();
            for field in meta.fields.iter().filter(|f| &*f.name != name) {
                let text = format!(r#"{{"metadata":{{"{}":1,"zz-unknown":2}}}}"#, field.name);
                let found = metadata_in_text(&text).unwrap();
                let spliced = splice_metadata(&text, &found, meta, &[(name, value)]).unwrap();
                let before = meta.index_of(&field.name).unwrap() < at;
                let want = if before {
                    format!(
                        r#"{{"metadata":{{"{}":1,"{name}":"{value}","zz-unknown":2}}}}"#,
                        field.name
                    )
                } else {
                    format!(
                        r#"{{"metadata":{{"{name}":"{value}","{}":1,"zz-unknown":2}}}}"#,
                        field.name
                    )
                };
                assert_eq!(spliced, want, "{name} beside {}", field.name);
            }
        }
    }

    #[test]
    fn mutation_annotation_is_byte_identical() {
        assert_eq!(
            mutation_annotation_value("test-config", "test-webhook", true),
            r#"{"configuration":"test-config","webhook":"test-webhook","mutated":true}"#
        );
    }

    #[test]
    fn store_fields_are_spliced_where_go_writes_them() {
        let schema = Schema::for_release(crate::KubeVersion::NEWEST);
        let meta = schema.get(schema.by_name("meta/v1.ObjectMeta").unwrap());
        let fields = [("uid", "u"), ("creationTimestamp", "t")];
        let splice = |text: &str| {
            let found = metadata_in_text(text)?;
            splice_metadata(text, &found, meta, &fields)
        };
        assert_eq!(
            splice(r#"{"metadata":{}}"#).as_deref(),
            Some(r#"{"metadata":{"uid":"u","creationTimestamp":"t"}}"#)
        );
        assert_eq!(
            splice(r#"{"kind":"X","metadata":{"labels":{"a":"b"}},"data":{}}"#).as_deref(),
            Some(
                r#"{"kind":"X","metadata":{"uid":"u","creationTimestamp":"t","labels":{"a":"b"}},"data":{}}"#
            )
        );
        assert_eq!(
            splice(r#"{"metadata":{"name":"n","creationTimestamp":null,"labels":{}}}"#).as_deref(),
            Some(r#"{"metadata":{"name":"n","uid":"u","creationTimestamp":"t","labels":{}}}"#)
        );
        assert_eq!(
            splice(r#"{"metadata":{"uid":null,"generateName":"g-"}}"#).as_deref(),
            Some(r#"{"metadata":{"uid":"u","generateName":"g-","creationTimestamp":"t"}}"#)
        );
        let one = [("creationTimestamp", "a\"<b")];
        let found = metadata_in_text(r#"{"metadata":{"labels":{}},"data":{}}"#).unwrap();
        assert_eq!(
            splice_metadata(
                r#"{"metadata":{"labels":{}},"data":{}}"#,
                &found,
                meta,
                &one
            )
            .as_deref(),
            Some(r#"{"metadata":{"creationTimestamp":"a\"\u003cb","labels":{}},"data":{}}"#)
        );
        assert_eq!(splice(r#"{"metadata":{"uid":"x"}}"#), None);
        assert_eq!(splice(r#"{"spec":{}}"#), None);
        assert_eq!(
            crate::json::from_str::<Value>(&splice(r#"{"metadata":{"generation":2}}"#).unwrap())
                .unwrap(),
            serde_json::json!({"metadata": {"uid": "u", "generation": 2, "creationTimestamp": "t"}})
        );
    }

    /// A chain that labels a Pod known to be defaulted, then adds a container to it: the first
    /// patch copies only the metadata (the object after it reads its other members from the
    /// Pod given), the second copies the rest, and the outcome is the whole object.
    #[test]
    fn a_metadata_only_patch_copies_the_metadata_alone() {
        use crate::engine::{EngineOptions, Namespaces, Phases, RequestContext, SequentialIds};
        use crate::script::{ScriptedReplier, ScriptedReply};
        let hooks: Vec<String> = ["a", "b"]
            .iter()
            .map(|n| {
                format!(
                    "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: {n}}}\nwebhooks:\n- name: {n}.example.com\n  clientConfig: {{url: \"https://{n}.example.com/mutate\"}}\n  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
                )
            })
            .collect();
        let configs: Vec<_> = crate::config::parse_documents(&hooks.join("---\n"), "hooks.yaml")
            .into_iter()
            .map(|r| {
                let mut loaded = r.expect("loads");
                loaded.apply_defaults();
                loaded.configuration
            })
            .collect();
        let release = crate::KubeVersion::new(33).unwrap();
        let schema = Schema::for_release(release);
        let id = schema.kind("", "v1", "Pod").unwrap();
        let mut pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        crate::defaulting::default_object("", "v1", "Pod", &mut pod, release);
        let (pod, _) = schema::codec::normalize(schema, id, &pod).unwrap();
        let attrs: Attributes = serde_json::from_value(serde_json::json!({
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ns", "name": "p", "object": pod,
        }))
        .unwrap();
        let mut attrs = attrs;
        let given = Arc::new(Arc::unwrap_or_clone(attrs.object.take().unwrap()).known_defaulted());
        attrs.object = Some(Arc::clone(&given));
        let engine = Engine::new(&configs, EngineOptions::for_version(release));
        let mut replier = ScriptedReplier::new([
            (
                "a.example.com".to_string(),
                ScriptedReply::patch(serde_json::json!([
                    {"op": "add", "path": "/metadata/labels/injected", "value": "yes"}
                ])),
            ),
            (
                "b.example.com".to_string(),
                ScriptedReply::patch(serde_json::json!([
                    {"op": "add", "path": "/spec/containers/-", "value": {"name": "s", "image": "j"}}
                ])),
            ),
        ]);
        let (mut ids, mut metrics) = (SequentialIds::default(), crate::metrics::Metrics::new());
        let ns = Namespaces::default();
        let ctx = RequestContext {
            namespaces: &ns,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline: None,
            phases: Phases::MutatingOnly,
        };
        let outcome = engine.dispatch_blocking(attrs, ctx, &mut replier);
        assert!(outcome.allowed, "{:?}", outcome.status);
        let afters: Vec<Arc<Object>> = outcome
            .steps()
            .into_iter()
            .filter_map(|s| match s.kind {
                crate::engine::StepKind::PatchApplied { after, .. } => Some(after),
                _ => None,
            })
            .collect();
        assert_eq!(afters.len(), 2);
        assert!(
            afters[0].members_only(),
            "the labelled Pod is the given one, relabelled"
        );
        assert_eq!(afters[0].member("spec"), given.member("spec"));
        assert_eq!(
            afters[0].member("metadata").unwrap()["labels"]["injected"],
            "yes"
        );
        assert!(!afters[1].members_only());
        let object = outcome.object.expect("an object");
        assert_eq!(object["spec"]["containers"][1]["imagePullPolicy"], "Always");
        assert_eq!(object["metadata"]["labels"]["injected"], "yes");
    }
}

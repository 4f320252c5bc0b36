//! The MutatingAdmissionPolicy plugin (`k8s.io/apiserver/pkg/admission/plugin/policy/mutating`):
//! policies matched and their parameters collected as the generic policy dispatcher does (shared
//! with the validating plugin: each mutating policy is held as a validating policy without
//! validations), then each invocation's mutations applied in order to the object, with the
//! plugin's own reinvocation context.
//!
//! The patchers: an `ApplyConfiguration` is merged into the object with structured-merge-diff's
//! semantics over the kind's schema (atomic lists, maps and structs may not be set), a `JSONPatch`
//! is applied as evanphx's json-patch v4 applies it (a failed `test` leaves the object as it
//! was); the result is decoded into the kind's Go type and defaulted. Errors are collected per
//! invocation and, under `failurePolicy: Fail`, deny the request with upstream's
//! `policy '…' with binding '…' denied request: …`.
//!
//! Variables are evaluated lazily, once per mutation (upstream's `ForInput` of each patcher),
//! over the object as the mutations before it left it.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::{
    Binding, Compiled, ExpressionResult, PolicyCall, PolicyEnv, PolicyEvent, PolicyHook,
    collect_params, compile, eval_conditions, matches, namespace_object, param_name, param_scope,
    resource_name, split_api_version,
};
use crate::KubeVersion;
use crate::api::meta::short_eq;
use crate::api::policy::{
    BindingSpec, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, PolicySpec,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use crate::api::{GroupVersionKind, Status, StatusCause};
use crate::apply::typed::{self, Atom, ListRelationship, TypeModel};
use crate::apply::{GoModel, GoType};
use crate::cel;
use crate::engine::attributes::Attributes;
use crate::engine::matching::{self, cel_request};
use crate::engine::object::Object;
use crate::engine::status;
use crate::schema::{self, Schema};

/// Cost budget of one mutation (`RuntimeCELCostBudget`).
const RUNTIME_COST_BUDGET: u64 = 10_000_000;

/// How a mutation patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    ApplyConfiguration,
    JsonPatch,
}

/// One compiled mutation.
#[derive(Debug, Clone)]
struct Mutator {
    patch_type: PatchType,
    expression: String,
    program: Compiled,
}

/// A MutatingAdmissionPolicy with its bindings and compiled expressions.
#[derive(Debug, Clone)]
pub struct MutatingPolicyHook {
    /// The policy as configured (defaulted).
    pub policy: Arc<MutatingAdmissionPolicy>,
    /// Matching, parameters, matchConditions and variables, as a validating policy without
    /// validations (the generic dispatcher's part, which both plugins share).
    core: PolicyHook,
    mutators: Vec<Mutator>,
    reinvoke_if_needed: bool,
    needs_namespace: bool,
}

impl MutatingPolicyHook {
    /// The policy's name.
    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// Its bindings, in the order they are evaluated (each held in the validating binding's
    /// shape, without validationActions).
    pub fn bindings(&self) -> &[Binding] {
        &self.core.bindings
    }
}

/// Builds the hooks: every policy (by name) with the bindings that name it (by name); their
/// expressions compile as `release` compiles stored expressions.
pub fn build(
    policies: &[MutatingAdmissionPolicy],
    bindings: &[MutatingAdmissionPolicyBinding],
    release: crate::KubeVersion,
) -> Vec<MutatingPolicyHook> {
    let mut policies: Vec<&MutatingAdmissionPolicy> = policies.iter().collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));
    policies.dedup_by(|a, b| a.name == b.name);
    let as_validating: Vec<ValidatingAdmissionPolicyBinding> = bindings
        .iter()
        .map(|b| ValidatingAdmissionPolicyBinding {
            api_version: b.api_version.clone(),
            name: b.name.clone(),
            metadata: b.metadata.clone(),
            spec: BindingSpec {
                policy_name: b.spec.policy_name.clone(),
                param_ref: b.spec.param_ref.clone(),
                match_resources: b.spec.match_resources.clone(),
                validation_actions: Vec::new(),
            },
        })
        .collect();
    policies
        .into_iter()
        .map(|p| {
            let spec = &p.spec;
            let core_policy = ValidatingAdmissionPolicy {
                api_version: p.api_version.clone(),
                name: p.name.clone(),
                metadata: p.metadata.clone(),
                spec: PolicySpec {
                    param_kind: spec.param_kind.clone(),
                    match_constraints: spec.match_constraints.clone(),
                    validations: Vec::new(),
                    failure_policy: spec.failure_policy.clone(),
                    audit_annotations: Vec::new(),
                    match_conditions: spec.match_conditions.clone(),
                    variables: spec.variables.clone(),
                },
            };
            let core = super::build(std::slice::from_ref(&core_policy), &as_validating, release)
                .pop()
                .expect("one policy in, one hook out");
            let mut env = cel::Env::policy(spec.param_kind.is_some()).stored(release);
            for v in &spec.variables {
                match cel::compile_in(&v.expression, &env, cel::ReturnType::Any) {
                    Ok(p) => env.declare_variable(&v.name, &p),
                    Err(_) => env.declare_variable_unknown(&v.name),
                }
            }
            let env = env.with_patch_types();
            let mutators: Vec<Mutator> = spec
                .mutations
                .iter()
                .filter_map(|m| {
                    let (patch_type, expression, ret) = match m.patch_type.as_str() {
                        "ApplyConfiguration" => (
                            PatchType::ApplyConfiguration,
                            m.apply_configuration.as_ref()?,
                            cel::ReturnType::ApplyConfiguration,
                        ),
                        "JSONPatch" => (
                            PatchType::JsonPatch,
                            m.json_patch.as_ref()?,
                            cel::ReturnType::JsonPatches,
                        ),
                        _ => return None,
                    };
                    Some(Mutator {
                        patch_type,
                        expression: expression.clone(),
                        program: compile(expression, &env, ret),
                    })
                })
                .collect();
            let needs_namespace = core.needs_namespace
                || mutators
                    .iter()
                    .any(|m| m.program.as_ref().is_ok_and(|p| p.uses_namespace_object()));
            MutatingPolicyHook {
                policy: Arc::new(p.clone()),
                core,
                mutators,
                reinvoke_if_needed: spec.reinvocation_policy == "IfNeeded",
                needs_namespace,
            }
        })
        .collect()
}

/// The plugin's reinvocation context (`policyReinvokeContext`), kept across the two rounds of a
/// request.
#[derive(Debug, Clone, Default)]
pub struct ReinvocationContext {
    last_output: Option<Arc<Object>>,
    previously_invoked: BTreeSet<String>,
    reinvoke: BTreeSet<String>,
}

impl ReinvocationContext {
    fn require_reinvoking_previously_invoked(&mut self) {
        let moved = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(moved);
    }
}

/// What one policy with one binding (and parameter) did.
#[derive(Debug, Clone, PartialEq)]
pub enum MutationOutcome {
    /// Not matched (why), or a matchCondition is false.
    NotMatched(String),
    /// Matched in the reinvocation round but not reinvoked: its policy is `Never`, or nothing
    /// changed the object since it ran.
    NotReinvoked(String),
    /// Its mutations ran; whether they changed the object.
    Applied {
        /// Whether the object differs afterwards (`Semantic.DeepEqual`).
        changed: bool,
    },
    /// An error under failurePolicy Fail (the request is denied): the message.
    Failed(String),
    /// An error under failurePolicy Ignore: the message.
    ErrorIgnored(String),
}

/// One thing the plugin did, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum MutatingEvent {
    /// A policy with a binding (None: the policy alone, when it failed before its bindings).
    Considered {
        /// Policy name.
        policy: Arc<str>,
        /// Binding name.
        binding: Option<Arc<str>>,
        /// Fail or Ignore.
        failure_policy: &'static str,
        /// What it did.
        outcome: MutationOutcome,
        /// Expressions and parameters.
        call: Box<PolicyCall>,
        /// The patches applied: each mutation's apply configuration or JSON patch, as JSON.
        patches: Vec<Value>,
        /// The object after its mutations, when they ran.
        after: Option<Arc<Object>>,
    },
    /// A matchCondition error (`match_condition_evaluation_errors_total{kind="policy"}`).
    ConditionError {
        /// Policy name.
        policy: Arc<str>,
    },
    /// matchConditions that did not all come out true.
    ConditionEvaluation {
        /// Policy name.
        policy: Arc<str>,
    },
    /// One mutation evaluated (1.34 and later): `apiserver_mutating_admission_policy_check_total`
    /// and `_check_duration_seconds`.
    Check {
        /// Policy name.
        policy: Arc<str>,
        /// Binding name.
        binding: Arc<str>,
        /// `no_error`, `compile_error`, `invalid_error` or `out_of_budget`.
        error_type: &'static str,
    },
}

/// The plugin's result for one round.
#[derive(Debug, Clone, Default)]
pub struct MutatingDispatch {
    /// What happened, in order.
    pub events: Vec<MutatingEvent>,
    /// Whether the mutating plugins must run again (`SetShouldReinvoke`).
    pub should_reinvoke: bool,
    /// The status when an error under failurePolicy Fail denies the request.
    pub denied: Option<Status>,
}

/// An error collected for the final verdict (`PolicyError`).
struct PolicyError {
    policy: Arc<str>,
    binding: Option<Arc<str>>,
    message: String,
    reason: &'static str,
    ignored: bool,
}

impl PolicyError {
    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!(
                "policy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "policy {:?} denied request: {}",
                &*self.policy, self.message
            ),
        }
    }
}

/// One invocation: a policy, a binding that matched and one of its parameters.
struct Invocation<'h> {
    hook: &'h MutatingPolicyHook,
    binding: &'h Binding,
    param: Option<Arc<Value>>,
    resource: Arc<crate::api::GroupVersionResource>,
    kind: Arc<GroupVersionKind>,
}

impl Invocation<'_> {
    /// The reinvocation key: policy, binding and parameter.
    fn key(&self) -> String {
        format!(
            "{}\0{}\0{}",
            self.hook.name(),
            self.binding.name,
            self.param.as_deref().map(param_name).unwrap_or_default()
        )
    }
}

/// Runs the plugin once (round 0, or 1 when the mutating plugins are reinvoked) over `attrs`'
/// current object.
pub fn dispatch(
    hooks: &[MutatingPolicyHook],
    attrs: &Attributes,
    env: &PolicyEnv<'_>,
    round: u8,
    context: &mut ReinvocationContext,
    release: KubeVersion,
) -> MutatingDispatch {
    let mut out = MutatingDispatch::default();
    let mut errors: Vec<PolicyError> = Vec::new();
    let mut invocations: Vec<Invocation<'_>> = Vec::new();
    // The generic dispatcher: definitions, bindings, parameters.
    for hook in hooks {
        let core = &hook.core;
        let events = &mut out.events;
        let considered = |events: &mut Vec<MutatingEvent>,
                          binding: Option<&Binding>,
                          outcome: MutationOutcome| {
            events.push(MutatingEvent::Considered {
                policy: Arc::clone(&core.name),
                binding: binding.map(|b| Arc::clone(&b.name)),
                failure_policy: core.failure_policy,
                outcome,
                call: Box::new(empty_call()),
                patches: Vec::new(),
                after: None,
            });
        };
        let config_error = |events: &mut Vec<MutatingEvent>,
                            errors: &mut Vec<PolicyError>,
                            binding: Option<&Binding>,
                            err: String| {
            let message = match binding {
                None => format!("failed to configure policy: {err}"),
                Some(_) => format!("failed to configure binding: {err}"),
            };
            errors.push(PolicyError {
                policy: Arc::clone(&core.name),
                binding: binding.map(|b| Arc::clone(&b.name)),
                message: message.clone(),
                reason: "",
                ignored: core.ignore_failures,
            });
            considered(events, binding, failed(core, message));
        };
        let mut why = String::new();
        let Some(constraints) = &core.constraints else {
            config_error(
                events,
                &mut errors,
                None,
                "policy contained no match constraints, a required field".into(),
            );
            continue;
        };
        let (resource, kind) = match matches(constraints, attrs, env, &mut why) {
            Err(e) => {
                config_error(events, &mut errors, None, e);
                continue;
            }
            Ok(None) => {
                for b in &core.bindings {
                    considered(
                        events,
                        Some(b),
                        MutationOutcome::NotMatched(format!("policy matchConstraints: {why}")),
                    );
                }
                continue;
            }
            Ok(Some(m)) => m,
        };
        if let Some(k) = &core.policy.spec.param_kind
            && param_scope(k, env.registry).is_none()
        {
            let (group, version) = split_api_version(&k.api_version);
            config_error(
                events,
                &mut errors,
                None,
                format!(
                    "failed to find resource referenced by paramKind: '{}{version}, Kind={}'",
                    if group.is_empty() {
                        "/".to_string()
                    } else {
                        format!("{group}/")
                    },
                    k.kind
                ),
            );
            continue;
        }
        for b in &core.bindings {
            if let Some(c) = &b.criteria {
                match matches(c, attrs, env, &mut why) {
                    Err(e) => {
                        config_error(events, &mut errors, Some(b), e);
                        continue;
                    }
                    Ok(None) => {
                        considered(
                            events,
                            Some(b),
                            MutationOutcome::NotMatched(format!("binding matchResources: {why}")),
                        );
                        continue;
                    }
                    Ok(Some(_)) => {}
                }
            }
            match collect_params(core, b, attrs, env) {
                Ok(params) => invocations.extend(params.into_iter().map(|param| Invocation {
                    hook,
                    binding: b,
                    param,
                    resource: resource.clone(),
                    kind: kind.clone(),
                })),
                Err(e) => config_error(events, &mut errors, Some(b), e),
            }
        }
    }

    // `dispatchInvocations`.
    let mut current: Cow<'_, Attributes> = Cow::Borrowed(attrs);
    if round == 1
        && !same_object(
            context.last_output.as_deref(),
            current.object.as_deref(),
            attrs,
            release,
        )
    {
        context.require_reinvoking_previously_invoked();
    }
    let mut dirty = false;
    for inv in &invocations {
        // The invocation reads the objects in its version, converted where that differs in
        // shape from the request's; what it writes there cannot be converted back (below).
        let converted = converted_view(&current, &inv.kind, release);
        let no_conversion = unknown_conversion(&current.kind, &inv.kind, release);
        let hook = inv.hook;
        let core = &hook.core;
        let mut call = empty_call();
        if let Some(p) = &inv.param {
            call.params.push(param_name(p));
        }
        let matching_invocation = matching::Invocation {
            resource: current.resource.clone(),
            sub_resource: current.sub_resource.clone(),
            kind: inv.kind.clone(),
            rule: 0,
            equivalent: false,
        };
        let condition_request = cel_request(&current, &matching_invocation);
        let param_json = inv.param.as_deref();
        let mut condition_events = Vec::new();
        let matched = if core.conditions.is_empty() {
            Ok(true)
        } else {
            let base = activation(
                converted.as_ref().unwrap_or(&current),
                &condition_request,
                env,
            );
            let inputs = cel::Inputs::new(base, param_json, None);
            let mut validating_events = Vec::new();
            let r = eval_conditions(core, &inputs, &mut call, &mut validating_events);
            for e in validating_events {
                match e {
                    PolicyEvent::ConditionError { policy } => {
                        condition_events.push(MutatingEvent::ConditionError { policy })
                    }
                    PolicyEvent::ConditionEvaluation { policy } => {
                        condition_events.push(MutatingEvent::ConditionEvaluation { policy })
                    }
                    _ => {}
                }
            }
            r
        };
        out.events.extend(condition_events);
        let considered = |out: &mut MutatingDispatch,
                          outcome: MutationOutcome,
                          call: PolicyCall,
                          patches: Vec<Value>,
                          after: Option<Arc<Object>>| {
            out.events.push(MutatingEvent::Considered {
                policy: Arc::clone(&core.name),
                binding: Some(Arc::clone(&inv.binding.name)),
                failure_policy: core.failure_policy,
                outcome,
                call: Box::new(call),
                patches,
                after,
            });
        };
        match matched {
            Ok(true) => {}
            Ok(false) => {
                let name = call
                    .expressions
                    .iter()
                    .rev()
                    .find(|e| e.result == "false")
                    .map(|e| e.field.clone())
                    .unwrap_or_else(|| "an error ignored".into());
                let why = format!("matchConditions: {name} is false");
                considered(
                    &mut out,
                    MutationOutcome::NotMatched(why),
                    call,
                    Vec::new(),
                    None,
                );
                continue;
            }
            Err(e) => {
                errors.push(PolicyError {
                    policy: Arc::clone(&core.name),
                    binding: Some(Arc::clone(&inv.binding.name)),
                    message: e.clone(),
                    reason: "Invalid",
                    ignored: core.ignore_failures,
                });
                considered(&mut out, failed(core, e), call, Vec::new(), None);
                continue;
            }
        }
        let key = inv.key();
        if round == 1 && !context.reinvoke.contains(&key) {
            let why = if hook.reinvoke_if_needed {
                "reinvocationPolicy IfNeeded, and nothing changed the object since it ran"
            } else {
                "reinvocationPolicy Never"
            };
            considered(
                &mut out,
                MutationOutcome::NotReinvoked(why.into()),
                call,
                Vec::new(),
                None,
            );
            continue;
        }
        let before = current.object.clone();
        let mut patches = Vec::new();
        let mut failure: Option<String> = None;
        let mut applied = false;
        if current.object.is_some() {
            let ns = hook
                .needs_namespace
                .then(|| namespace_object(&current, env.namespaces))
                .flatten();
            let mut request = condition_request.clone();
            if let Some(m) = request.as_object_mut() {
                m.insert(
                    "resource".into(),
                    serde_json::to_value(&inv.resource).unwrap_or(Value::Null),
                );
            }
            for (i, m) in hook.mutators.iter().enumerate() {
                let result = {
                    let view = converted.as_ref().unwrap_or(&current);
                    let base = activation(view, &request, env);
                    let inputs = cel::Inputs::new(base, param_json, ns.as_ref());
                    // Each mutation is its own scope (`ForInput`), over the object as the
                    // mutations before it left it: its variables are evaluated again, lazily.
                    let variables = cel::Variables::new(&core.variables, &inputs);
                    let crd = env.registry.custom_resource_schema(&inv.resource);
                    mutate(m, &inputs, &variables, view, &inv.kind, crd, release)
                };
                // The patched object (of the invocation's version) is then converted to the
                // request's version directly (`ConvertToVersion`), which the scheme cannot do
                // between two versions: every mutation of such an invocation fails.
                let result = match (result, &no_conversion) {
                    (Ok(_), Some(e)) => Err(MutationError::Patcher(e.clone())),
                    (result, _) => result,
                };
                if release.at_least(34) {
                    out.events.push(MutatingEvent::Check {
                        policy: Arc::clone(&core.name),
                        binding: Arc::clone(&inv.binding.name),
                        error_type: match &result {
                            Ok(_) => "no_error",
                            Err(MutationError::Patcher(e)) => super::error_type(e),
                            Err(MutationError::Internal(_)) => "invalid_error",
                        },
                    });
                }
                let field = match m.patch_type {
                    PatchType::ApplyConfiguration => {
                        format!("mutations[{i}].applyConfiguration")
                    }
                    PatchType::JsonPatch => format!("mutations[{i}].jsonPatch"),
                };
                let result = match result {
                    Ok(r) => Ok(r),
                    Err(MutationError::Patcher(e)) => Err(e),
                    Err(MutationError::Internal(e)) => {
                        // A `StatusError` from the patcher ends the plugin at once, whatever
                        // the failure policy: the request fails with it.
                        let status = crate::engine::status::internal_error(&e);
                        call.expressions.push(ExpressionResult {
                            field: field.into(),
                            expression: m.expression.as_str().into(),
                            result: format!("error: {}", status.message).into(),
                        });
                        out.events.push(MutatingEvent::Considered {
                            policy: Arc::clone(&core.name),
                            binding: Some(Arc::clone(&inv.binding.name)),
                            failure_policy: core.failure_policy,
                            outcome: MutationOutcome::Failed(status.message.clone()),
                            call: Box::new(call),
                            patches,
                            after: None,
                        });
                        out.denied = Some(status);
                        return out;
                    }
                };
                match result {
                    Ok((patch, object)) => {
                        call.expressions.push(ExpressionResult {
                            field: field.into(),
                            expression: m.expression.as_str().into(),
                            result: patch.to_string().into(),
                        });
                        patches.push(patch);
                        applied = true;
                        current.to_mut().object = Some(Arc::new(Object::new(object)));
                    }
                    Err(e) => {
                        call.expressions.push(ExpressionResult {
                            field: field.into(),
                            expression: m.expression.as_str().into(),
                            result: format!("error: {e}").into(),
                        });
                        errors.push(PolicyError {
                            policy: Arc::clone(&core.name),
                            binding: Some(Arc::clone(&inv.binding.name)),
                            message: e.clone(),
                            reason: "Invalid",
                            ignored: core.ignore_failures,
                        });
                        failure.get_or_insert(e);
                    }
                }
            }
        }
        dirty |= applied;
        let changed = !same_object(before.as_deref(), current.object.as_deref(), attrs, release);
        if changed {
            context.require_reinvoking_previously_invoked();
            out.should_reinvoke = true;
        }
        if hook.reinvoke_if_needed {
            context.previously_invoked.insert(key);
        }
        let outcome = match failure {
            Some(e) => failed(core, e),
            None => MutationOutcome::Applied { changed },
        };
        let after = applied.then(|| current.object.clone()).flatten();
        considered(&mut out, outcome, call, patches, after);
    }
    if dirty {
        context.require_reinvoking_previously_invoked();
        out.should_reinvoke = true;
    }
    context.last_output = current.object.clone();
    let denials: Vec<&PolicyError> = errors.iter().filter(|e| !e.ignored).collect();
    out.denied = denials.first().map(|first| {
        let mut s = status::forbidden(
            &attrs.resource.group_resource(),
            &resource_name(attrs),
            "admission request denied by policy",
        );
        s.message = first.text();
        if !first.reason.is_empty() {
            s.reason = first.reason.into();
        }
        if let Some(details) = &mut s.details {
            for e in &denials {
                details.causes.push(StatusCause {
                    message: e.text(),
                    ..Default::default()
                });
            }
        }
        s
    });
    out
}

/// The variables of an evaluation over `attrs`' current objects.
fn activation<'a>(
    attrs: &'a Attributes,
    request: &'a Value,
    env: &'a PolicyEnv<'_>,
) -> cel::Activation<'a> {
    const NULL: &Value = &Value::Null;
    cel::Activation {
        object: attrs.object_value().unwrap_or(NULL),
        old_object: attrs.old_object_value().unwrap_or(NULL),
        request,
        authorizer: env.authorizer,
        user: &attrs.user_info,
    }
}

fn empty_call() -> PolicyCall {
    PolicyCall {
        params: Vec::new(),
        expressions: Vec::new(),
        validation_actions: Vec::new(),
        message: None,
    }
}

fn failed(core: &PolicyHook, message: String) -> MutationOutcome {
    if core.ignore_failures {
        MutationOutcome::ErrorIgnored(message)
    } else {
        MutationOutcome::Failed(message)
    }
}

/// The request as an invocation of `kind` reads it where `kind` differs in shape from the
/// request's kind: its objects converted to `kind` (the dispatcher's `VersionedAttribute`).
fn converted_view(
    current: &Attributes,
    kind: &GroupVersionKind,
    release: KubeVersion,
) -> Option<Attributes> {
    if !schema::convert::converts(&current.kind, kind) {
        return None;
    }
    let convert = |o: &Arc<Object>| {
        Arc::new(Object::new(crate::engine::dispatch::convert_object(
            o.value(),
            &current.kind,
            kind,
            release,
        )))
    };
    let mut view = current.clone();
    view.object = current.object.as_ref().map(convert);
    view.old_object = current.old_object.as_ref().map(convert);
    Some(view)
}

/// The error of `dispatchOne` for an invocation of `kind` on a request of `request` of another
/// group or version, both built-in kinds: the patched object, typed in `kind`'s version, is
/// converted with `ConvertToVersion` to the request's group and version, which the scheme cannot
/// do: it converts between two versions of a group only through the internal one, and not to
/// another group at all (core/v1 and events.k8s.io/v1 Events).
fn unknown_conversion(
    request: &GroupVersionKind,
    kind: &GroupVersionKind,
    release: KubeVersion,
) -> Option<String> {
    if short_eq(&request.group, &kind.group) && request.version == kind.version {
        return None;
    }
    let schema = Schema::for_release(release);
    let from = schema.get(schema.kind(&kind.group, &kind.version, &kind.kind)?);
    let to = schema.get(schema.kind(&request.group, &request.version, &request.kind)?);
    Some(if short_eq(&request.group, &kind.group) {
        format!(
            "converting ({}) to ({}): unknown conversion",
            from.go_name(),
            to.go_name()
        )
    } else {
        // `notRegisteredErr`, naming kube-apiserver's scheme by where it is made.
        format!(
            "{} is not suitable for converting to {} in scheme \"pkg/api/legacyscheme/scheme.go:30\"",
            from.go_name(),
            crate::gofmt::quote(&request.api_version())
        )
    })
}

/// `Semantic.DeepEqual` of two states of the request's object.
fn same_object(
    a: Option<&Object>,
    b: Option<&Object>,
    attrs: &Attributes,
    release: KubeVersion,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            if std::ptr::eq(a, b) {
                return true;
            }
            let schema = Schema::for_release(release);
            let k = &attrs.kind;
            match schema.kind(&k.group, &k.version, &k.kind) {
                Some(id) => schema::semantic_equal(schema, id, a.value(), b.value()),
                None => a.value() == b.value(),
            }
        }
        _ => false,
    }
}

/// Why a mutation failed.
enum MutationError {
    /// The patcher's error: the policy's failure, under its failure policy.
    Patcher(String),
    /// An internal error (the patched object does not decode strictly into its type): the
    /// request fails with it whatever the failure policy.
    Internal(String),
}

/// The JSON serializer's strict decode of a patched object into its kind's type: Go's decoding
/// error first, then every unknown field (`strict decoding error: unknown field "…", …`).
/// The object is left decoded (normalised) in place.
fn strict_decode(
    schema: &Schema,
    id: crate::schema::TypeId,
    patched: &mut Value,
) -> Result<(), String> {
    let unknown: Vec<String> = schema::codec::unknown_fields(schema, id, patched)
        .iter()
        .map(|path| format!("unknown field {path:?}"))
        .collect();
    schema::codec::normalize_in_place(schema, id, patched).map_err(|e| e.to_string())?;
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!("strict decoding error: {}", unknown.join(", ")))
    }
}

/// One mutation: the patch it evaluated to (as JSON) and the object it produced, or the error
/// as the patcher words it.
fn mutate(
    m: &Mutator,
    inputs: &cel::Inputs<'_>,
    variables: &cel::Variables,
    attrs: &Attributes,
    kind: &GroupVersionKind,
    crd: Option<std::sync::Arc<Value>>,
    release: KubeVersion,
) -> Result<(Value, Value), MutationError> {
    let program = match &m.program {
        Ok(p) => p,
        // The patcher returns the compile errors themselves.
        Err(e) => return Err(MutationError::Patcher(e.clone())),
    };
    let expression_error = |e: String| {
        if e.starts_with("type mismatch:")
            || e.starts_with("unsupported return type")
            || e.starts_with("JSONPath valueExpression")
            || e == cel::PER_CALL_LIMIT_EXCEEDED
        {
            e
        } else {
            format!("expression '{}' resulted in error: {e}", m.expression)
        }
    };
    let object = attrs.object_value().unwrap_or(&Value::Null);
    let schema = Schema::for_release(release);
    let id = schema.kind(&kind.group, &kind.version, &kind.kind);
    let patcher = MutationError::Patcher;
    let (patch, mut patched) = match m.patch_type {
        PatchType::ApplyConfiguration => {
            let (config, cost) =
                cel::evaluate_apply_configuration(program, inputs, Some(variables));
            if cost.saturating_add(variables.take_cost()) > RUNTIME_COST_BUDGET {
                return Err(patcher(cel::COST_BUDGET_EXHAUSTED.into()));
            }
            let config = config.map_err(expression_error).map_err(patcher)?;
            let merged = apply_configuration(schema, id, crd.as_deref(), object, &config)
                .map_err(patcher)?;
            (config, merged)
        }
        PatchType::JsonPatch => {
            let (ops, cost) = cel::evaluate_json_patch(program, inputs, Some(variables));
            if cost.saturating_add(variables.take_cost()) > RUNTIME_COST_BUDGET {
                return Err(patcher(cel::COST_BUDGET_EXHAUSTED.into()));
            }
            let ops = Value::Array(ops.map_err(expression_error).map_err(patcher)?);
            let patch = crate::jsonpatch::decode(ops.to_string().as_bytes())
                .map_err(|e| patcher(format!("JSON Patch: {e}")))?;
            let mut patched = match patch.apply_to_value(object) {
                Ok(v) => v,
                // `jsonpatch.ErrTestFailed`: the object is left as it was.
                Err(e) if e.message.ends_with("test failed") => object.clone(),
                Err(e) => return Err(patcher(format!("JSON Patch: {e}"))),
            };
            // The patched JSON is decoded strictly into the kind's type; an error there is an
            // internal error (a `StatusError`), not the policy's.
            if let Some(id) = id {
                strict_decode(schema, id, &mut patched).map_err(MutationError::Internal)?;
            }
            (ops, patched)
        }
    };
    if let Some(id) = id {
        // A JSON-patched object was decoded (normalised) strictly above.
        if m.patch_type == PatchType::ApplyConfiguration {
            schema::codec::normalize_in_place(schema, id, &mut patched)
                .map_err(|e| patcher(e.to_string()))?;
        }
        if crate::defaulting::default_object(
            &kind.group,
            &kind.version,
            &kind.kind,
            &mut patched,
            release,
        ) {
            schema::codec::normalize_in_place(schema, id, &mut patched)
                .map_err(|e| patcher(e.to_string()))?;
        }
    } else if let Some(crd) = crd.as_deref() {
        // A custom resource is defaulted by its schema's defaults (the object defaulter of
        // apiextensions-apiserver), after every mutation as a built-in kind is by its scheme.
        let model = crate::apply::CrdModel::new(schema, crd).map_err(|e| patcher(e.to_string()))?;
        model.default_object(&mut patched);
    }
    Ok((patch, patched))
}

/// `ApplyStructuredMergeDiff`: the apply configuration checked against the kind's schema,
/// refused where it sets atomic values, and merged into the object. A custom resource is typed
/// by its CustomResourceDefinition's schema (`crd`) as the apiserver's type converter types it;
/// without one here it is merged as structured-merge-diff merges a deduced type: maps member by
/// member, everything else replaced.
fn apply_configuration(
    schema: &Schema,
    id: Option<crate::schema::TypeId>,
    crd: Option<&Value>,
    object: &Value,
    config: &Value,
) -> Result<Value, String> {
    match (id, crd) {
        (Some(id), _) => {
            typed_apply_configuration(&GoModel(schema), GoType::Struct(id), object, config)
        }
        (None, Some(crd)) => {
            let model = crate::apply::CrdModel::new(schema, crd).map_err(|e| e.to_string())?;
            let root = model.root();
            typed_apply_configuration(&model, root, object, config)
        }
        (None, None) => Ok(deduced_merge(object, config)),
    }
}

fn typed_apply_configuration<M: TypeModel>(
    model: &M,
    ty: M::Type,
    object: &Value,
    config: &Value,
) -> Result<Value, String> {
    typed::validate(model, &ty, config).map_err(|e| {
        format!("error applying patch: failed to convert patch object to typed object: {e}")
    })?;
    let mut atomics = Vec::new();
    find_atomics(model, &ty, config, &mut String::new(), &mut atomics);
    if !atomics.is_empty() {
        return Err(format!(
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    typed::merge(model, &ty, Some(object), Some(config))
        .map(Option::unwrap_or_default)
        .map_err(|e| format!("error applying patch: failed to merge patch: {e}"))
}

fn deduced_merge(object: &Value, config: &Value) -> Value {
    match (object, config) {
        (Value::Object(o), Value::Object(c)) => {
            let mut out = o.clone();
            for (k, v) in c {
                let merged = match o.get(k) {
                    Some(existing) => deduced_merge(existing, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (_, c) => c.clone(),
    }
}

/// `findAtomics`: the paths of the atomic lists, maps and structs a patch sets, in
/// structured-merge-diff's path notation (`.spec.selector`, `[name="c"]`, `[0]`).
fn find_atomics<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    value: &Value,
    path: &mut String,
    out: &mut Vec<String>,
) {
    match (model.atom(ty), value) {
        (Atom::Map { atomic }, Value::Object(m)) => {
            if atomic {
                out.push(path.clone());
            }
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                if let Some((member, _)) = model.field(ty, k) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    find_atomics(model, &member, &m[k], path, out);
                    path.truncate(len);
                }
            }
        }
        (Atom::List(rel), Value::Array(items)) => {
            if matches!(rel, ListRelationship::Atomic) {
                out.push(path.clone());
            }
            if let Some(element) = model.element(ty) {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    find_atomics(model, &element, item, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

//! The ValidatingAdmissionPolicy plugin (`k8s.io/apiserver/pkg/admission/plugin/policy/
//! {generic,validating,matching}`): policies with their bindings, compiled once, evaluated
//! against a request without IO. [`dispatch`] returns what the plugin does, in order (one
//! [`PolicyEvent`] per binding considered, warning, audit annotation and metric) and the
//! denial, which the engine turns into trace steps, call records, warnings, annotations and
//! metrics.
//!
//! Upstream iterates policies and bindings in informer order (from a map: unspecified); here
//! policies are taken by name, and each policy's bindings by name. The `<policy>/<key>` audit
//! annotations are published by key (upstream: map order).

pub mod mutating;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use super::attributes::{Attributes, NamespaceLookup, NamespaceSource};
use super::matching::{self, cel_request, rule_matches};
use super::status;
use crate::api::meta::short_eq;
use crate::api::policy::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use crate::api::{GroupVersionKind, GroupVersionResource, Status, StatusCause};
use crate::cel;
use crate::registry::ResourceRegistry;
use crate::selector::Selector;

/// The longest value of an audit annotation a policy writes; longer ones are cut.
const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// The longest message a messageExpression may produce (`MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_EVALUATED_MESSAGE_BYTES: usize = 5 * 1024;

/// Cost budget of one policy evaluation (`RuntimeCELCostBudget`).
const RUNTIME_COST_BUDGET: u64 = 10_000_000;

/// Where policy evaluations find their parameter objects: the objects of a kind a cluster holds.
/// Implemented by the replay (objects from `--cluster` files and seen earlier in an audit log)
/// and by plain lists in tests.
pub trait ParamSource {
    /// The objects of `api_version`/`kind` in `namespace` (None: cluster-scoped objects).
    fn params(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Arc<Value>>;
}

/// No parameter objects at all.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoParams;

impl ParamSource for NoParams {
    fn params(&self, _: &str, _: &str, _: Option<&str>) -> Vec<Arc<Value>> {
        Vec::new()
    }
}

/// Parameter objects held in a list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamObjects {
    objects: Vec<Arc<Value>>,
}

impl ParamObjects {
    /// Objects as a cluster holds them (each with its `apiVersion`, `kind` and `metadata`).
    pub fn new(objects: Vec<Value>) -> Self {
        ParamObjects {
            objects: objects.into_iter().map(Arc::new).collect(),
        }
    }

    /// Adds or replaces (same apiVersion, kind, namespace and name) an object.
    pub fn upsert(&mut self, object: Value) {
        let key = object_key(&object);
        match self.objects.iter_mut().find(|o| object_key(o) == key) {
            Some(known) => *known = Arc::new(object),
            None => self.objects.push(Arc::new(object)),
        }
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

fn object_key(o: &Value) -> [&str; 4] {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default();
    [
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name"),
    ]
}

impl ParamSource for ParamObjects {
    fn params(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.objects
            .iter()
            .filter(|o| {
                let [av, k, ns, _] = object_key(o);
                av == api_version && k == kind && ns == namespace.unwrap_or_default()
            })
            .cloned()
            .collect()
    }
}

/// A policy's or a binding's match criteria, with their selectors parsed.
#[derive(Debug, Clone)]
struct Criteria {
    namespace_selector: Result<Selector, String>,
    object_selector: Result<Selector, String>,
    rules: Vec<NamedRuleWithOperations>,
    exclude: Vec<NamedRuleWithOperations>,
    equivalent: bool,
}

impl Criteria {
    fn new(m: &MatchResources) -> Criteria {
        let parse = |s: &Option<crate::api::LabelSelector>| {
            Selector::parse_optional(s.as_ref()).map_err(|e| e.to_string())
        };
        Criteria {
            namespace_selector: parse(&m.namespace_selector),
            object_selector: parse(&m.object_selector),
            rules: m.resource_rules.clone(),
            exclude: m.exclude_resource_rules.clone(),
            equivalent: m.match_policy.as_deref() != Some("Exact"),
        }
    }
}

/// A compiled expression: the program, or its compile error as upstream reports it at run time.
type Compiled = Result<Arc<cel::Program>, String>;

fn compile(expression: &str, env: &cel::Env, ret: cel::ReturnType) -> Compiled {
    cel::compile_in(expression, env, ret)
        .map(Arc::new)
        .map_err(|e| e.0)
}

/// One binding of a policy.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The binding as configured (defaulted).
    pub binding: Arc<ValidatingAdmissionPolicyBinding>,
    name: Arc<str>,
    criteria: Option<Criteria>,
    deny: bool,
    warn: bool,
    audit: bool,
}

/// One policy with its bindings and compiled expressions (what upstream's policy source caches
/// per policy; compiled once, when the engine is built).
#[derive(Debug, Clone)]
pub struct PolicyHook {
    /// The policy as configured (defaulted).
    pub policy: Arc<ValidatingAdmissionPolicy>,
    /// Its bindings, by name.
    pub bindings: Vec<Binding>,
    name: Arc<str>,
    constraints: Option<Criteria>,
    ignore_failures: bool,
    failure_policy: &'static str,
    variables: cel::CompiledVariables,
    conditions: Vec<(String, String, Compiled)>,
    validations: Vec<(Compiled, Option<Compiled>)>,
    /// Each validation's field (`validations[0]`) and expression, as the trace shows them.
    validation_texts: Vec<(Arc<str>, Arc<str>)>,
    audit_annotations: Vec<(String, String, Compiled)>,
    /// Whether an expression reads `namespaceObject` (only then is the namespace looked up).
    needs_namespace: bool,
    /// Whether a matchCondition, and whether another expression, reads the CEL `request` (only
    /// then is it made).
    conditions_need_request: bool,
    needs_request: bool,
}

impl PolicyHook {
    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether a compiled variable, validation, messageExpression or auditAnnotation satisfies
    /// `test`.
    fn any_program(&self, test: fn(&cel::Program) -> bool) -> bool {
        let compiled = |c: &Compiled| c.as_ref().is_ok_and(|p| test(p));
        self.variables
            .iter()
            .any(|(_, p)| p.as_ref().is_ok_and(test))
            || (self.validations.iter())
                .any(|(v, m)| compiled(v) || m.as_ref().is_some_and(compiled))
            || self.audit_annotations.iter().any(|(_, _, p)| compiled(p))
    }

    fn new(
        policy: &ValidatingAdmissionPolicy,
        bindings: Vec<Binding>,
        release: crate::KubeVersion,
    ) -> PolicyHook {
        let spec = &policy.spec;
        let mut env = cel::Env::policy(spec.param_kind.is_some()).stored(release);
        let mut variables = Vec::with_capacity(spec.variables.len());
        for v in &spec.variables {
            let program = cel::compile_in(&v.expression, &env, cel::ReturnType::Any);
            match &program {
                Ok(p) => env.declare_variable(&v.name, p),
                Err(_) => env.declare_variable_unknown(&v.name),
            }
            variables.push((v.name.clone(), program.map_err(|e| e.0)));
        }
        let message_env = env.without_authorizer();
        let failure_policy = match spec.failure_policy.as_deref() {
            Some("Ignore") => "Ignore",
            _ => "Fail",
        };
        let mut hook = PolicyHook {
            name: Arc::from(policy.name.as_str()),
            constraints: spec.match_constraints.as_ref().map(Criteria::new),
            ignore_failures: failure_policy == "Ignore",
            failure_policy,
            conditions: (spec.match_conditions.iter())
                .map(|c| {
                    let program = compile(&c.expression, &env, cel::ReturnType::Bool);
                    (c.name.clone(), c.expression.clone(), program)
                })
                .collect(),
            validations: (spec.validations.iter())
                .map(|v| {
                    let message = (!v.message_expression.trim().is_empty()).then(|| {
                        compile(&v.message_expression, &message_env, cel::ReturnType::String)
                    });
                    (compile(&v.expression, &env, cel::ReturnType::Bool), message)
                })
                .collect(),
            audit_annotations: (spec.audit_annotations.iter())
                .map(|a| {
                    let program = compile(
                        a.value_expression.trim(),
                        &env,
                        cel::ReturnType::StringOrNull,
                    );
                    (a.key.clone(), a.value_expression.clone(), program)
                })
                .collect(),
            variables: variables.into(),
            policy: Arc::new(policy.clone()),
            bindings,
            validation_texts: (spec.validations.iter().enumerate())
                .map(|(i, v)| {
                    (
                        Arc::from(format!("validations[{i}]")),
                        Arc::from(v.expression.as_str()),
                    )
                })
                .collect(),
            needs_namespace: false,
            conditions_need_request: false,
            needs_request: false,
        };
        hook.needs_namespace = hook.any_program(cel::Program::uses_namespace_object);
        hook.needs_request = hook.any_program(cel::Program::uses_request);
        hook.conditions_need_request = (hook.conditions.iter())
            .any(|(_, _, p)| p.as_ref().is_ok_and(|p| p.uses_request()))
            || (hook.variables.iter())
                .any(|(_, p)| p.as_ref().is_ok_and(cel::Program::uses_request));
        hook
    }
}

/// Builds the policy hooks: every policy (by name) with the bindings that name it (by name).
/// A binding whose policy is absent has no effect, as upstream.
/// Their expressions compile as `release` compiles stored expressions.
pub fn build(
    policies: &[ValidatingAdmissionPolicy],
    bindings: &[ValidatingAdmissionPolicyBinding],
    release: crate::KubeVersion,
) -> Vec<PolicyHook> {
    let mut policies: Vec<&ValidatingAdmissionPolicy> = policies.iter().collect();
    policies.sort_by(|a, b| a.name.cmp(&b.name));
    policies.dedup_by(|a, b| a.name == b.name);
    let mut bindings: Vec<&ValidatingAdmissionPolicyBinding> = bindings.iter().collect();
    bindings.sort_by(|a, b| a.name.cmp(&b.name));
    policies
        .into_iter()
        .map(|p| {
            let own = bindings
                .iter()
                .filter(|b| b.spec.policy_name == p.name)
                .map(|b| {
                    let has = |a: &str| b.spec.validation_actions.iter().any(|x| x == a);
                    Binding {
                        binding: Arc::new((*b).clone()),
                        name: Arc::from(b.name.as_str()),
                        criteria: b.spec.match_resources.as_ref().map(Criteria::new),
                        deny: has("Deny"),
                        warn: has("Warn"),
                        audit: has("Audit"),
                    }
                })
                .collect();
            PolicyHook::new(p, own, release)
        })
        .collect()
}

/// What one expression of a policy evaluated to, for the trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionResult {
    /// Which: `matchConditions[0]`, `variables[1]`, `validations[2]`, `auditAnnotations[0]`.
    pub field: Arc<str>,
    /// The expression.
    pub expression: Arc<str>,
    /// Its value (`true`, `false`, a string, `null`) or `error: …`.
    pub result: Cow<'static, str>,
}

/// What one policy with one binding did with a request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCall {
    /// The parameter objects evaluated with (`namespace/name`), none without paramKind.
    pub params: Vec<String>,
    /// Every expression evaluated, in order.
    pub expressions: Vec<ExpressionResult>,
    /// The binding's validationActions.
    pub validation_actions: Vec<String>,
    /// The message of the first failed validation (whatever its actions).
    pub message: Option<String>,
}

/// Whether a policy/binding pair applied to the request.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyOutcome {
    /// The policy or binding does not match (why), or a matchCondition is false.
    NotMatched(String),
    /// Evaluated: every validation passed (or failed only with Warn/Audit actions).
    Admitted,
    /// A failed validation with the Deny action (its message is the call's).
    Denied,
    /// A configuration or evaluation error under failurePolicy Fail: the message.
    Failed(String),
    /// An error ignored under failurePolicy Ignore.
    ErrorIgnored(String),
}

/// One thing the plugin did, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyEvent {
    /// A policy with a binding (None: the policy alone, when it failed before its bindings).
    Considered {
        /// Policy name.
        policy: Arc<str>,
        /// Binding name.
        binding: Option<Arc<str>>,
        /// Fail or Ignore.
        failure_policy: &'static str,
        /// What it did.
        outcome: PolicyOutcome,
        /// The details.
        call: Box<PolicyCall>,
    },
    /// A warning for the client (Warn action).
    Warning(String),
    /// An audit annotation (key, value).
    Annotation(String, String),
    /// `apiserver_validating_admission_policy_check_total` and `_check_duration_seconds`.
    Check {
        /// Policy name.
        policy: Arc<str>,
        /// Binding name.
        binding: Arc<str>,
        /// `allow`, `deny`, `warn` or `audit`.
        action: &'static str,
        /// `no_error`, `compile_error`, `invalid_error` or `out_of_budget`.
        error_type: &'static str,
    },
    /// A matchCondition error (`match_condition_evaluation_errors_total{kind="policy"}`).
    ConditionError {
        /// Policy name.
        policy: Arc<str>,
    },
    /// matchConditions that did not all come out true
    /// (`match_condition_evaluation_seconds{kind="policy"}`).
    ConditionEvaluation {
        /// Policy name.
        policy: Arc<str>,
    },
}

/// The plugin's result for one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyDispatch {
    /// What happened, in order.
    pub events: Vec<PolicyEvent>,
    /// The status the client receives when a policy denied the request.
    pub denied: Option<Status>,
}

/// Everything the plugin reads besides the policies and the request.
pub struct PolicyEnv<'a> {
    /// Equivalent resources and kinds.
    pub registry: &'a ResourceRegistry,
    /// Namespace labels.
    pub namespaces: &'a dyn NamespaceSource,
    /// Parameter objects.
    pub params: &'a dyn ParamSource,
    /// What `authorizer` answers.
    pub authorizer: &'a cel::Authorizer,
}

/// A denial on its way to the client.
struct Denial {
    policy: Arc<str>,
    binding: Option<Arc<str>>,
    message: String,
    reason: String,
}

/// Upstream's `extractResourceName`.
fn resource_name(attrs: &Attributes) -> String {
    if !attrs.name.is_empty() {
        return attrs.name.clone();
    }
    let Some(object) = attrs.object_value() else {
        return "Unknown".into();
    };
    let Some(meta) = object.get("metadata").and_then(Value::as_object) else {
        return "Unknown/errorGettingName".into();
    };
    let s = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    if !s("name").is_empty() {
        s("name").into()
    } else if !s("generateName").is_empty() {
        s("generateName").into()
    } else {
        "Unknown".into()
    }
}

/// `reasonToCode`.
fn reason_code(reason: &str) -> i32 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

fn denial_status(attrs: &Attributes, d: &Denial) -> Status {
    let message = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let mut s = status::forbidden(
        &attrs.resource.group_resource(),
        &resource_name(attrs),
        &message,
    );
    s.reason = if d.reason.is_empty() {
        "Invalid".into()
    } else {
        d.reason.clone()
    };
    s.code = reason_code(&s.reason);
    if let Some(details) = &mut s.details {
        details.causes.push(StatusCause {
            message,
            ..Default::default()
        });
    }
    s
}

/// `ErrorType` of a decision that is not `EvalAdmit` (every decision counted): the metrics'
/// `error_type` label, read from the message. A plain denial by a false validation is labelled
/// `invalid_error` too, as upstream labels it.
fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation") {
        "compile_error"
    } else if message.starts_with("validation failed due to running out of cost budget") {
        "out_of_budget"
    } else {
        "invalid_error"
    }
}

/// The resource and kind a request matched as: its own (shared), or an equivalent's.
type MatchedAs = (Arc<GroupVersionResource>, Arc<GroupVersionKind>);

/// Why a request matches criteria or not: `Ok(Some((resource, kind)))` matched as, `Ok(None)`
/// not matched (the reason in `why`), `Err` an error (a selector that does not parse, an
/// unknown namespace, an unknown kind).
fn matches(
    c: &Criteria,
    attrs: &Attributes,
    env: &PolicyEnv<'_>,
    why: &mut String,
) -> Result<Option<MatchedAs>, String> {
    let ns = match_namespace(c, attrs, env.namespaces);
    if let Ok(false) = ns {
        *why = "namespaceSelector does not match".into();
        return Ok(None);
    }
    let obj = match &c.object_selector {
        Err(e) => Err(e.clone()),
        Ok(s) if s.is_empty() => Ok(true),
        Ok(s) => {
            let m = |o: Option<&Value>| {
                o.and_then(|o| o.get("metadata"))
                    .and_then(Value::as_object)
                    .is_some_and(|meta| {
                        s.matches_json(meta.get("labels").and_then(Value::as_object))
                    })
            };
            Ok(m(attrs.object_value()) || m(attrs.old_object_value()))
        }
    };
    if let Ok(false) = obj {
        *why = "objectSelector does not match".into();
        return Ok(None);
    }
    match rules_match(&c.exclude, c.equivalent, attrs, env.registry) {
        Err(e) => return Err(e),
        Ok(Some(_)) => {
            *why = "excluded by excludeResourceRules".into();
            return Ok(None);
        }
        Ok(None) => {}
    }
    let matched = if c.rules.is_empty() {
        Some((attrs.resource.clone(), attrs.kind.clone()))
    } else {
        rules_match(&c.rules, c.equivalent, attrs, env.registry)?
    };
    let Some(matched) = matched else {
        *why = "no resourceRule matches".into();
        return Ok(None);
    };
    ns?;
    obj?;
    Ok(Some(matched))
}

fn match_namespace(
    c: &Criteria,
    attrs: &Attributes,
    namespaces: &dyn NamespaceSource,
) -> Result<bool, String> {
    if attrs.namespace.is_empty() && attrs.resource.resource != "namespaces" {
        return Ok(true);
    }
    let selector = c.namespace_selector.as_ref().map_err(Clone::clone)?;
    if selector.is_empty() {
        return Ok(true);
    }
    match namespace_labels(attrs, namespaces) {
        Ok(labels) => Ok(selector.matches(&labels)),
        Err(e) => Err(e),
    }
}

fn namespace_labels<'a>(
    attrs: &Attributes,
    namespaces: &'a dyn NamespaceSource,
) -> Result<Cow<'a, BTreeMap<String, String>>, String> {
    if attrs.is_namespace_resource()
        && matches!(
            attrs.operation,
            crate::api::Operation::Create | crate::api::Operation::Update
        )
    {
        return Ok(Cow::Owned(
            attrs
                .object_value()
                .and_then(|o| o.pointer("/metadata/labels"))
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
        ));
    }
    match namespaces.namespace(&attrs.namespace) {
        NamespaceLookup::Found(l) => Ok(l),
        NamespaceLookup::NotFound => Err(format!(
            "namespaces {} not found",
            crate::gofmt::quote(&attrs.namespace)
        )),
        NamespaceLookup::Error(e) => Err(e),
    }
}

/// `matchesResourceRules`.
fn rules_match(
    rules: &[NamedRuleWithOperations],
    equivalent: bool,
    attrs: &Attributes,
    registry: &ResourceRegistry,
) -> Result<Option<MatchedAs>, String> {
    // No rules (most excludeResourceRules): nothing to look up equivalents for.
    if rules.is_empty() {
        return Ok(None);
    }
    let named = |r: &NamedRuleWithOperations| {
        r.resource_names.is_empty() || r.resource_names.contains(&attrs.name)
    };
    for r in rules {
        if rule_matches(&r.rule, attrs, &attrs.resource) && named(r) {
            return Ok(Some((attrs.resource.clone(), attrs.kind.clone())));
        }
    }
    if !equivalent {
        return Ok(None);
    }
    let equivalents = registry.equivalent_resources(&attrs.resource, &attrs.sub_resource);
    for r in rules {
        for eq in equivalents.iter() {
            if *eq == *attrs.resource || !rule_matches(&r.rule, attrs, eq) {
                continue;
            }
            let Some(kind) = registry.kind_for(eq, &attrs.sub_resource) else {
                return Err(format!("unable to convert to {eq}: unknown kind"));
            };
            if named(r) {
                return Ok(Some((Arc::new(eq.clone()), Arc::new(kind))));
            }
        }
    }
    Ok(None)
}

/// The `namespaceObject` variable (`CreateNamespaceObject`): the namespace's name and labels,
/// which is what a replay knows of it.
fn namespace_object(attrs: &Attributes, namespaces: &dyn NamespaceSource) -> Option<Value> {
    let name = if attrs.kind.group.is_empty()
        && attrs.kind.version == "v1"
        && attrs.kind.kind == "Namespace"
    {
        ""
    } else {
        attrs.namespace.as_str()
    };
    if name.is_empty() {
        return None;
    }
    let labels = match namespaces.namespace(name) {
        NamespaceLookup::Found(l) => l.into_owned(),
        _ => return None,
    };
    let mut meta = Map::new();
    meta.insert("name".into(), Value::String(name.into()));
    if !labels.is_empty() {
        meta.insert(
            "labels".into(),
            Value::Object(
                labels
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect(),
            ),
        );
    }
    let mut ns = Map::new();
    ns.insert("metadata".into(), Value::Object(meta));
    ns.insert("spec".into(), Value::Object(Map::new()));
    ns.insert("status".into(), Value::Object(Map::new()));
    Some(Value::Object(ns))
}

/// `CollectParams`: the parameter objects of a binding (a single None without paramKind or
/// paramRef).
fn collect_params(
    hook: &PolicyHook,
    binding: &Binding,
    attrs: &Attributes,
    env: &PolicyEnv<'_>,
) -> Result<Vec<Option<Arc<Value>>>, String> {
    let (Some(kind), Some(r)) = (
        hook.policy.spec.param_kind.as_ref(),
        binding.binding.spec.param_ref.as_ref(),
    ) else {
        return Ok(vec![None]);
    };
    let Some(namespaced) = param_scope(kind, env.registry) else {
        return Err(format!(
            "paramKind kind `{}, Kind={}` not known",
            kind.api_version, kind.kind
        ));
    };
    let namespace = if namespaced {
        if !r.namespace.is_empty() {
            Some(r.namespace.as_str())
        } else if !attrs.namespace.is_empty() {
            Some(attrs.namespace.as_str())
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        }
    } else {
        if !r.namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        None
    };
    let all = env.params.params(&kind.api_version, &kind.kind, namespace);
    let found: Vec<Option<Arc<Value>>> = if !r.name.is_empty() {
        if r.selector.is_some() {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        all.into_iter()
            .filter(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(&r.name))
            .take(1)
            .map(Some)
            .collect()
    } else if let Some(sel) = &r.selector {
        let selector = Selector::parse(sel).map_err(|e| e.to_string())?;
        let mut matching: Vec<Arc<Value>> = all
            .into_iter()
            .filter(|o| {
                selector.matches_json(o.pointer("/metadata/labels").and_then(Value::as_object))
            })
            .collect();
        // A lister lists by key (namespace/name).
        matching.sort_by(|a, b| object_key(a)[3].cmp(object_key(b)[3]));
        matching.into_iter().map(Some).collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if found.is_empty() && r.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Whether the paramKind's resource is namespaced; None when the release (or the cluster's
/// custom resources) has no such kind.
fn param_scope(kind: &crate::api::policy::ParamKind, registry: &ResourceRegistry) -> Option<bool> {
    let (group, version) = split_api_version(&kind.api_version);
    registry
        .iter()
        .find(|i| {
            short_eq(&i.kind.group, group)
                && i.kind.version == version
                && i.kind.kind == kind.kind
                && i.subresource.is_empty()
        })
        .map(|i| i.namespaced)
}

fn output_text(o: &cel::Output) -> Cow<'static, str> {
    match o {
        cel::Output::Bool(true) => "true".into(),
        cel::Output::Bool(false) => "false".into(),
        cel::Output::String(s) => format!("{s:?}").into(),
        cel::Output::Null => "null".into(),
        cel::Output::Other(t) => format!("<{t}>").into(),
    }
}

/// One evaluation's result for one validation (upstream's `PolicyDecision`).
struct Decision {
    deny: bool,
    evaluation_error: bool,
    message: String,
    reason: String,
}

/// Runs the plugin for one request (upstream's `dispatcher.Dispatch`), given the request's
/// final object.
pub fn dispatch(hooks: &[PolicyHook], attrs: &Attributes, env: &PolicyEnv<'_>) -> PolicyDispatch {
    let mut events = Vec::new();
    let mut denials: Vec<Denial> = Vec::new();
    let null = Value::Null;
    let objects = cel::Objects::shared(attrs.object.clone(), attrs.old_object.clone());
    // The CEL `request` of matchConditions (`request.resource` is the request's) and of the
    // other expressions (the matched resource), each made when first read.
    type Requests = std::rc::Rc<(std::cell::OnceCell<Value>, std::cell::OnceCell<Value>)>;
    let mut cel_requests: Vec<(Arc<GroupVersionKind>, Arc<GroupVersionResource>, Requests)> =
        Vec::new();
    for hook in hooks {
        let policy = &hook.name;
        let consider = |events: &mut Vec<PolicyEvent>,
                        binding: Option<&Binding>,
                        outcome: PolicyOutcome,
                        call: PolicyCall| {
            events.push(PolicyEvent::Considered {
                policy: Arc::clone(policy),
                binding: binding.map(|b| Arc::clone(&b.name)),
                failure_policy: hook.failure_policy,
                outcome,
                call: Box::new(call),
            });
        };
        let empty_call = |b: Option<&Binding>| PolicyCall {
            params: Vec::new(),
            expressions: Vec::new(),
            validation_actions: b
                .map(|b| b.binding.spec.validation_actions.clone())
                .unwrap_or_default(),
            message: None,
        };
        // A configuration error: denied under Fail, ignored under Ignore.
        let config_error = |events: &mut Vec<PolicyEvent>,
                            denials: &mut Vec<Denial>,
                            binding: Option<&Binding>,
                            err: String| {
            let message = match binding {
                None => format!("failed to configure policy: {err}"),
                Some(_) => format!("failed to configure binding: {err}"),
            };
            let outcome = if hook.ignore_failures {
                PolicyOutcome::ErrorIgnored(message)
            } else {
                denials.push(Denial {
                    policy: Arc::clone(policy),
                    binding: binding.map(|b| Arc::clone(&b.name)),
                    message: message.clone(),
                    reason: String::new(),
                });
                PolicyOutcome::Failed(message)
            };
            events.push(PolicyEvent::Considered {
                policy: Arc::clone(policy),
                binding: binding.map(|b| Arc::clone(&b.name)),
                failure_policy: hook.failure_policy,
                outcome,
                call: Box::new(empty_call(binding)),
            });
        };
        let mut why = String::new();
        let Some(constraints) = &hook.constraints else {
            config_error(
                &mut events,
                &mut denials,
                None,
                "policy contained no match constraints, a required field".into(),
            );
            continue;
        };
        let (resource, kind) = match matches(constraints, attrs, env, &mut why) {
            Err(e) => {
                config_error(&mut events, &mut denials, None, e);
                continue;
            }
            Ok(None) => {
                for b in &hook.bindings {
                    consider(
                        &mut events,
                        Some(b),
                        PolicyOutcome::NotMatched(format!("policy matchConstraints: {why}")),
                        empty_call(Some(b)),
                    );
                }
                continue;
            }
            Ok(Some(m)) => m,
        };
        // The expressions read the objects in the matched version, converted where that differs
        // in shape from the request's (the dispatcher's `VersionedAttribute`).
        let converted_objects;
        let objects = if crate::schema::convert::converts(&attrs.kind, &kind) {
            let release = env.registry.release();
            let convert = |o: &Option<Arc<crate::engine::Object>>| {
                o.as_deref().map(|o| {
                    Arc::new(crate::engine::Object::new(super::dispatch::convert_object(
                        o.value(),
                        &attrs.kind,
                        &kind,
                        release,
                    )))
                })
            };
            converted_objects =
                cel::Objects::shared(convert(&attrs.object), convert(&attrs.old_object));
            &converted_objects
        } else {
            &objects
        };
        // The policy source could not resolve the paramKind (`hook.ConfigurationError`).
        if let Some(k) = &hook.policy.spec.param_kind
            && param_scope(k, env.registry).is_none()
        {
            let (group, version) = split_api_version(&k.api_version);
            config_error(
                &mut events,
                &mut denials,
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
        let mut published: Vec<(String, Vec<String>)> = Vec::new();
        let mut namespace: Option<Option<Value>> = None;
        for b in &hook.bindings {
            if let Some(c) = &b.criteria {
                match matches(c, attrs, env, &mut why) {
                    Err(e) => {
                        config_error(&mut events, &mut denials, Some(b), e);
                        continue;
                    }
                    Ok(None) => {
                        consider(
                            &mut events,
                            Some(b),
                            PolicyOutcome::NotMatched(format!("binding matchResources: {why}")),
                            empty_call(Some(b)),
                        );
                        continue;
                    }
                    Ok(Some(_)) => {}
                }
            }
            let params = match collect_params(hook, b, attrs, env) {
                Ok(p) => p,
                Err(e) => {
                    config_error(&mut events, &mut denials, Some(b), e);
                    continue;
                }
            };
            let ns = namespace.get_or_insert_with(|| {
                hook.needs_namespace
                    .then(|| namespace_object(attrs, env.namespaces))
                    .flatten()
            });
            let mut call = empty_call(Some(b));
            // The CEL `request` of matchConditions and of validations, made once per matched
            // kind and resource for all the bindings of the request, when an expression reads it.
            let requests = match cel_requests
                .iter()
                .find(|(k, r, _)| *k == kind && *r == resource)
            {
                Some((_, _, requests)) => std::rc::Rc::clone(requests),
                None => {
                    let requests = Requests::default();
                    cel_requests.push((
                        kind.clone(),
                        resource.clone(),
                        std::rc::Rc::clone(&requests),
                    ));
                    requests
                }
            };
            let condition_request = || {
                let invocation = matching::Invocation {
                    resource: attrs.resource.clone(),
                    sub_resource: attrs.sub_resource.clone(),
                    kind: kind.clone(),
                    rule: 0,
                    equivalent: false,
                };
                cel_request(attrs, &invocation)
            };
            let request = match hook.needs_request {
                false => &null,
                true => requests.1.get_or_init(|| {
                    let mut request = condition_request();
                    if let Some(m) = request.as_object_mut() {
                        m.insert("resource".into(), matching::resource_json(&resource));
                    }
                    request
                }),
            };
            let condition_request = match hook.conditions_need_request {
                false => &null,
                true => requests.0.get_or_init(condition_request),
            };
            let mut decisions: Vec<(usize, Decision)> = Vec::new();
            let mut annotations: Vec<(String, String)> = Vec::new();
            let mut not_matched: Option<String> = None;
            for param in &params {
                // The objects are read from `objects` (in place), not from here: reading the
                // values here would make a derived object whole.
                let base = cel::Activation {
                    object: &null,
                    old_object: &null,
                    request: condition_request,
                    authorizer: env.authorizer,
                    user: &attrs.user_info,
                };
                if let Some(p) = param {
                    call.params.push(param_name(p));
                }
                let param_json = param.as_deref();
                // matchConditions: `request.resource` is the request's, namespaceObject null.
                if !hook.conditions.is_empty() {
                    let inputs = cel::Inputs::new(base, param_json, None).sharing(objects);
                    match eval_conditions(hook, &inputs, &mut call, &mut events) {
                        Ok(true) => {}
                        Ok(false) => {
                            let name = call
                                .expressions
                                .iter()
                                .rev()
                                .find(|e| e.result == "false")
                                .map(|e| e.field.clone())
                                .unwrap_or_default();
                            not_matched = Some(format!("{name} is false"));
                            continue;
                        }
                        Err(e) => {
                            decisions.push((
                                0,
                                Decision {
                                    deny: !hook.ignore_failures,
                                    evaluation_error: true,
                                    message: e,
                                    reason: String::new(),
                                },
                            ));
                            continue;
                        }
                    }
                }
                let base = cel::Activation { request, ..base };
                let inputs = cel::Inputs::new(base, param_json, ns.as_ref()).sharing(objects);
                validate(hook, &inputs, &mut call, &mut decisions, &mut annotations);
            }
            let mut outcome = PolicyOutcome::Admitted;
            let mut after = Vec::new();
            let denied_by = |d: &Decision| {
                if d.evaluation_error {
                    PolicyOutcome::Failed(d.message.clone())
                } else {
                    PolicyOutcome::Denied
                }
            };
            let is_denied =
                |o: &PolicyOutcome| matches!(o, PolicyOutcome::Denied | PolicyOutcome::Failed(_));
            for (i, d) in &decisions {
                if !d.evaluation_error && call.message.is_none() {
                    call.message = Some(d.message.clone());
                }
                if !d.deny {
                    if d.evaluation_error {
                        outcome = PolicyOutcome::ErrorIgnored(d.message.clone());
                        after.push(check(hook, b, "allow", error_type(&d.message)));
                    }
                    continue;
                }
                let et = error_type(&d.message);
                if b.deny {
                    denials.push(Denial {
                        policy: Arc::clone(policy),
                        binding: Some(Arc::clone(&b.name)),
                        message: d.message.clone(),
                        reason: d.reason.clone(),
                    });
                    if !is_denied(&outcome) {
                        outcome = denied_by(d);
                    }
                    after.push(check(hook, b, "deny", et));
                }
                if b.audit {
                    after.push(PolicyEvent::Annotation(
                        "validation.policy.admission.k8s.io/validation_failure".into(),
                        validation_failure_value(b, *i, &d.message),
                    ));
                    after.push(check(hook, b, "audit", et));
                }
                if b.warn {
                    after.push(PolicyEvent::Warning(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{policy}' with binding '{}': {}",
                        b.name, d.message
                    )));
                    after.push(check(hook, b, "warn", et));
                }
            }
            for (key, value) in annotations {
                match key.strip_prefix('\0') {
                    // An auditAnnotation error under Fail: a denial whatever the actions.
                    Some(_) => {
                        denials.push(Denial {
                            policy: Arc::clone(policy),
                            binding: Some(Arc::clone(&b.name)),
                            message: value.clone(),
                            reason: String::new(),
                        });
                        if !is_denied(&outcome) {
                            outcome = PolicyOutcome::Failed(value.clone());
                        }
                        after.push(check(hook, b, "deny", error_type(&value)));
                    }
                    None => match published.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, values)) => {
                            if !values.contains(&value) {
                                values.push(value);
                            }
                        }
                        None => published.push((key, vec![value])),
                    },
                }
            }
            if decisions.is_empty()
                && let Some(why) = not_matched
                && call.params.len() <= 1
            {
                outcome = PolicyOutcome::NotMatched(format!("matchConditions: {why}"));
            }
            consider(&mut events, Some(b), outcome, call);
            events.extend(after);
        }
        published.sort();
        for (key, values) in published {
            events.push(PolicyEvent::Annotation(
                format!("{policy}/{key}"),
                values.join(", "),
            ));
        }
    }
    let denied = denials.first().map(|d| denial_status(attrs, d));
    PolicyDispatch { events, denied }
}

fn check(hook: &PolicyHook, b: &Binding, action: &'static str, et: &'static str) -> PolicyEvent {
    PolicyEvent::Check {
        policy: Arc::clone(&hook.name),
        binding: Arc::clone(&b.name),
        action,
        error_type: et,
    }
}

fn param_name(p: &Value) -> String {
    let s = |k: &str| {
        p.pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    if s("namespace").is_empty() {
        s("name").to_string()
    } else {
        format!("{}/{}", s("namespace"), s("name"))
    }
}

/// The value of `validation.policy.admission.k8s.io/validation_failure`, as Go's encoding/json
/// writes `[]ValidationFailureValue`.
fn validation_failure_value(b: &Binding, index: usize, message: &str) -> String {
    let q = crate::config::validation::go_json_string;
    let actions: Vec<String> = b
        .binding
        .spec
        .validation_actions
        .iter()
        .map(|a| q(a))
        .collect();
    format!(
        "[{{\"message\":{},\"policy\":{},\"binding\":{},\"expressionIndex\":{index},\"validationActions\":[{}]}}]",
        q(message),
        q(&b.binding.spec.policy_name),
        q(&b.name),
        actions.join(",")
    )
}

/// The policy's matchConditions (`matchconditions.Matcher.Match` with kind `policy`): Ok(true)
/// all true, Ok(false) one false, Err the error under Fail. An error under Ignore is Ok(false).
fn eval_conditions(
    hook: &PolicyHook,
    inputs: &cel::Inputs<'_>,
    call: &mut PolicyCall,
    events: &mut Vec<PolicyEvent>,
) -> Result<bool, String> {
    let vars = cel::Variables::new(&hook.variables, inputs);
    let mut errors: Vec<String> = Vec::new();
    let mut budget = cel::MATCH_CONDITIONS_COST_BUDGET;
    for (i, (_, expression, program)) in hook.conditions.iter().enumerate() {
        let result = match program {
            Ok(p) => {
                let mut ev = cel::evaluate_in(p, inputs, Some(&vars));
                // What the variables it read first cost is charged to it, as upstream's
                // composition context reports it.
                ev.cost = ev.cost.saturating_add(vars.take_cost());
                if cel::evaluation_cost_exceeded(budget, ev.cost) {
                    events.push(PolicyEvent::ConditionEvaluation {
                        policy: Arc::clone(&hook.name),
                    });
                    return failure(hook, cel::COST_BUDGET_EXHAUSTED.to_string());
                }
                budget -= ev.cost;
                ev.result
            }
            Err(e) => Err(format!("compilation error: {e}")),
        };
        call.expressions.push(ExpressionResult {
            field: format!("matchConditions[{i}]").into(),
            expression: expression.as_str().into(),
            result: match &result {
                Ok(o) => output_text(o),
                Err(e) => format!("error: {e}").into(),
            },
        });
        match result {
            Ok(cel::Output::Bool(true)) => {}
            Ok(cel::Output::Bool(false)) => {
                events.push(PolicyEvent::ConditionEvaluation {
                    policy: Arc::clone(&hook.name),
                });
                return Ok(false);
            }
            Ok(other) => errors.push(format!(
                "expression '{expression}' resulted in error: expression must evaluate to bool, got {}",
                output_text(&other)
            )),
            Err(e) => {
                events.push(PolicyEvent::ConditionError {
                    policy: Arc::clone(&hook.name),
                });
                let msg = format!("expression '{expression}' resulted in error: {e}");
                if !errors.contains(&msg) {
                    errors.push(msg);
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    events.push(PolicyEvent::ConditionEvaluation {
        policy: Arc::clone(&hook.name),
    });
    let err = if errors.len() == 1 {
        errors.remove(0)
    } else {
        format!("[{}]", errors.join(", "))
    };
    failure(hook, err)
}

fn failure(hook: &PolicyHook, err: String) -> Result<bool, String> {
    if hook.ignore_failures {
        Ok(false)
    } else {
        Err(err)
    }
}

/// `validator.Validate` for one parameter: the decisions of the validations and the audit
/// annotations (an error under Fail comes back as a key starting with NUL, the message as value).
fn validate(
    hook: &PolicyHook,
    inputs: &cel::Inputs<'_>,
    call: &mut PolicyCall,
    decisions: &mut Vec<(usize, Decision)>,
    annotations: &mut Vec<(String, String)>,
) {
    // Upstream evaluates the validations, the messageExpressions and the auditAnnotations in
    // three scopes (`ForInput` each), each with its own lazily evaluated variables; the last two
    // bind no `authorizer`. The validations share one cost budget, the messageExpressions (all
    // of them, whether their validation failed or not) what the validations left of it, and the
    // auditAnnotations a budget of their own. A budget running out ends the evaluation with one
    // error in place of every decision of this parameter (`validator.Validate`).
    let (first_decision, first_annotation) = (decisions.len(), annotations.len());
    let out_of_budget = |decisions: &mut Vec<(usize, Decision)>,
                         annotations: &mut Vec<(String, String)>| {
        decisions.truncate(first_decision);
        annotations.truncate(first_annotation);
        decisions.push((
            0,
            Decision {
                deny: !hook.ignore_failures,
                evaluation_error: true,
                message: cel::COST_BUDGET_EXHAUSTED.to_string(),
                reason: String::new(),
            },
        ));
    };
    let vars = cel::Variables::new(&hook.variables, inputs);
    let bare = inputs.without_authorizer_view();
    let spec = &hook.policy.spec;
    let mut budget = RUNTIME_COST_BUDGET;
    let mut results = Vec::with_capacity(hook.validations.len());
    for (((program, _), v), (field, expression)) in (hook.validations.iter())
        .zip(&spec.validations)
        .zip(&hook.validation_texts)
    {
        let result = match program {
            Ok(p) => {
                let mut ev = cel::evaluate_in(p, inputs, Some(&vars));
                ev.cost = ev.cost.saturating_add(vars.take_cost());
                if ev.cost > budget {
                    call.expressions.push(ExpressionResult {
                        field: Arc::clone(field),
                        expression: Arc::clone(expression),
                        result: format!("error: {}", cel::COST_BUDGET_EXHAUSTED).into(),
                    });
                    out_of_budget(decisions, annotations);
                    return;
                }
                budget -= ev.cost;
                ev.result
                    .map_err(|e| format!("expression '{}' resulted in error: {e}", v.expression))
            }
            Err(e) => Err(format!("compilation error: {e}")),
        };
        call.expressions.push(ExpressionResult {
            field: Arc::clone(field),
            expression: Arc::clone(expression),
            result: match &result {
                Ok(o) => output_text(o),
                Err(e) => format!("error: {e}").into(),
            },
        });
        results.push(result);
    }
    let mut message_vars: Option<cel::Variables> = None;
    // No allocation for the common policy without messageExpressions.
    let mut messages: Vec<Option<cel::Output>> = Vec::new();
    let mut messages_out_of_budget = false;
    let with_messages = (hook.validations.iter()).any(|(_, m)| matches!(m, Some(Ok(_))));
    for (i, ((_, message_program), v)) in (hook.validations.iter())
        .zip(&spec.validations)
        .enumerate()
        .filter(|_| with_messages)
    {
        let Some(Ok(mp)) = message_program else {
            messages.push(None);
            continue;
        };
        let vars = message_vars.get_or_insert_with(|| cel::Variables::new(&hook.variables, &bare));
        let ev = cel::evaluate_in(mp, &bare, Some(vars));
        let cost = ev.cost.saturating_add(vars.take_cost());
        call.expressions.push(ExpressionResult {
            field: format!("validations[{i}].messageExpression").into(),
            expression: v.message_expression.as_str().into(),
            result: match (&ev.result, cost > budget) {
                (_, true) => format!("error: {}", cel::COST_BUDGET_EXHAUSTED).into(),
                (Ok(o), false) => output_text(o),
                (Err(e), false) => format!("error: {e}").into(),
            },
        });
        if cost > budget {
            messages_out_of_budget = true;
            break;
        }
        budget -= cost;
        messages.push(ev.result.ok());
    }
    for (i, (result, v)) in results.into_iter().zip(&spec.validations).enumerate() {
        let decision = match result {
            Err(e) => Decision {
                deny: !hook.ignore_failures,
                evaluation_error: true,
                message: e,
                reason: String::new(),
            },
            Ok(_) if messages_out_of_budget => Decision {
                deny: !hook.ignore_failures,
                evaluation_error: true,
                message: format!("failed messageExpression: {}", cel::COST_BUDGET_EXHAUSTED),
                reason: String::new(),
            },
            Ok(cel::Output::Bool(true)) => continue,
            Ok(_) => {
                let mut message = String::new();
                if let Some(Some(cel::Output::String(s))) = messages.get(i) {
                    let s = s.trim();
                    if s.len() <= MAX_EVALUATED_MESSAGE_BYTES && !s.contains('\n') {
                        message = s.to_string();
                    }
                }
                if message.is_empty() && !v.message.is_empty() {
                    message = v.message.trim().to_string();
                }
                if message.is_empty() {
                    message = format!("failed expression: {}", v.expression.trim());
                }
                Decision {
                    deny: true,
                    evaluation_error: false,
                    message,
                    reason: v.reason.clone().unwrap_or_else(|| "Invalid".into()),
                }
            }
        };
        decisions.push((i, decision));
    }
    let audit_vars = cel::Variables::new(&hook.variables, &bare);
    let mut budget = RUNTIME_COST_BUDGET;
    for (i, (key, expression, program)) in hook.audit_annotations.iter().enumerate() {
        let result = match program {
            Ok(p) => {
                let ev = cel::evaluate_in(p, &bare, Some(&audit_vars));
                let cost = ev.cost.saturating_add(audit_vars.take_cost());
                if cost > budget {
                    call.expressions.push(ExpressionResult {
                        field: format!("auditAnnotations[{i}]").into(),
                        expression: expression.as_str().into(),
                        result: format!("error: {}", cel::COST_BUDGET_EXHAUSTED).into(),
                    });
                    out_of_budget(decisions, annotations);
                    return;
                }
                budget -= cost;
                ev.result
                    .map_err(|e| format!("expression '{}' resulted in error: {e}", expression))
            }
            Err(e) => Err(format!("compilation error: {e}")),
        };
        call.expressions.push(ExpressionResult {
            field: format!("auditAnnotations[{i}]").into(),
            expression: expression.as_str().into(),
            result: match &result {
                Ok(o) => output_text(o),
                Err(e) => format!("error: {e}").into(),
            },
        });
        let error = match result {
            Ok(cel::Output::String(s)) => {
                let s = s.trim();
                if !s.is_empty() {
                    let mut end = s.len().min(MAX_AUDIT_ANNOTATION_VALUE_LENGTH);
                    while !s.is_char_boundary(end) {
                        end -= 1;
                    }
                    annotations.push((key.clone(), s[..end].to_string()));
                }
                continue;
            }
            Ok(cel::Output::Null) => continue,
            Ok(other) => format!(
                "valueExpression '{expression}' resulted in unsupported return type: {}. Return type must be either string or null.",
                match other {
                    cel::Output::Bool(_) => "bool".to_string(),
                    cel::Output::Other(t) => t,
                    _ => String::new(),
                }
            ),
            Err(e) => e,
        };
        if !hook.ignore_failures {
            annotations.push((format!("\0{key}"), error));
        }
    }
}

/// How long a policy check took: evaluation is not timed (virtual time stands still in the
/// engine), so every observation is zero.
pub const CHECK_DURATION: Duration = Duration::ZERO;

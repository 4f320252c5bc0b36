//! Should this webhook be called for this request? Upstream's `ShouldCallHook`: namespace
//! selector, object selector, rules (exact, then equivalent), then matchConditions.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::attributes::{Attributes, NamespaceLookup, NamespaceSource};
use super::hooks::Hook;
use super::status;
use crate::api::meta::short_eq;
use crate::api::{
    GroupResource, GroupVersionKind, GroupVersionResource, RuleWithOperations, Status,
};
use crate::cel;
use crate::registry::ResourceRegistry;

/// How a matching webhook is invoked: the resource and kind it is sent (equivalent matches
/// send the equivalent resource).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Resource sent as `request.resource` (the request's own, shared, unless matched through
    /// an equivalent one).
    pub resource: Arc<GroupVersionResource>,
    /// Subresource sent.
    pub sub_resource: String,
    /// Kind sent as `request.kind` (shared like `resource`).
    pub kind: Arc<GroupVersionKind>,
    /// Index of the rule that matched.
    pub rule: usize,
    /// True when matched through matchPolicy Equivalent.
    pub equivalent: bool,
}

/// Why a webhook was not called. Rendered for people by `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The namespace selector did not select the request's namespace.
    NamespaceSelector,
    /// The object selector selected neither the object nor the old object.
    ObjectSelector,
    /// No rule matched the operation/resource/scope.
    Rules,
    /// A matchCondition evaluated to false.
    MatchConditionFalse {
        /// Name of the first false condition.
        name: String,
    },
    /// matchConditions failed to evaluate and failurePolicy is Ignore.
    MatchConditionErrorIgnored {
        /// The evaluation error.
        error: String,
    },
    /// Deciding whether to call it failed the request (a selector or namespace error, an
    /// equivalent resource without a kind, matchConditions that failed under failurePolicy Fail):
    /// the dispatcher stops there.
    RequestFailed {
        /// The message of the error the request fails with.
        message: String,
    },
    /// It matched, but the request had timed out before the validating webhooks were called:
    /// none is, and the request fails with a timeout.
    TimedOutBeforeCall,
    /// Reinvocation round: the webhook matches, but it is not among the webhooks to reinvoke
    /// (upstream's `ShouldReinvokeWebhook`).
    NotReinvoked {
        /// Why it is not.
        why: NotReinvokedWhy,
    },
}

/// Why a webhook that matches in the reinvocation round is not among the webhooks to reinvoke.
/// Only webhooks with `reinvocationPolicy: IfNeeded` that were called in round 0 enter that set,
/// and only when a webhook after them then changed the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReinvokedWhy {
    /// It was not called in round 0, and a webhook is never called for the first time in the
    /// reinvocation round.
    NotCalledInRound0 {
        /// Why it was not called in round 0, as that round's record says.
        round0: Option<String>,
    },
    /// It was called in round 0 and its `reinvocationPolicy` is `Never` (the default).
    PolicyNever,
    /// It was called in round 0 (`reinvocationPolicy: IfNeeded`), and no webhook after it changed
    /// the object in that round.
    NoLaterChange,
}

impl fmt::Display for SkipReason {
    /// A short account; [`explain`] gives the full one with the selector, labels and rules.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::NamespaceSelector => {
                f.write_str("namespaceSelector does not select the namespace")
            }
            SkipReason::ObjectSelector => {
                f.write_str("objectSelector selects neither the object nor the old object")
            }
            SkipReason::Rules => f.write_str("no rule matches"),
            SkipReason::MatchConditionFalse { name } => {
                write!(f, "matchCondition {name:?} evaluated to false")
            }
            SkipReason::MatchConditionErrorIgnored { error } => {
                write!(
                    f,
                    "matchConditions failed and failurePolicy is Ignore: {error}"
                )
            }
            SkipReason::RequestFailed { message } => write!(
                f,
                "deciding whether to call it failed the request, which stops here: {message}"
            ),
            SkipReason::TimedOutBeforeCall => f.write_str(
                "it matched, but the request had already timed out when the validating webhooks were to be called (the request fails: Timeout)",
            ),
            SkipReason::NotReinvoked { why } => write!(f, "not reinvoked: {why}"),
        }
    }
}

impl fmt::Display for NotReinvokedWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotReinvokedWhy::NotCalledInRound0 { round0 } => {
                f.write_str(
                    "it was not called in round 0, and a webhook is never called for the first time in the reinvocation round",
                )?;
                match round0 {
                    Some(why) => write!(f, " (round 0: {why})"),
                    None => Ok(()),
                }
            }
            NotReinvokedWhy::PolicyNever => f.write_str(
                "its reinvocationPolicy is Never (the default): it is called at most once per request",
            ),
            NotReinvokedWhy::NoLaterChange => f.write_str(
                "no webhook after it changed the object in round 0 (reinvocationPolicy IfNeeded reinvokes a webhook only then)",
            ),
        }
    }
}

/// The full, human-readable account of a skip: which selector requirement, label or rule
/// excluded the webhook. Computed on demand, off the matching hot path.
pub fn explain(
    hook: &Hook,
    attrs: &Attributes,
    namespaces: &dyn NamespaceSource,
    reason: &SkipReason,
) -> String {
    match reason {
        SkipReason::NamespaceSelector => {
            let (selector, detail) = explain_namespace_skip(hook, attrs, namespaces);
            format!(
                "namespaceSelector {{{selector}}} does not select namespace {:?}: {detail}",
                attrs.namespace
            )
        }
        SkipReason::ObjectSelector => {
            let (selector, detail) = explain_object_skip(hook, attrs);
            format!(
                "objectSelector {{{selector}}} selects neither the object nor the old object: {detail}"
            )
        }
        SkipReason::Rules => format!("no rule matches: {}", explain_rules(hook, attrs)),
        other => other.to_string(),
    }
}

/// The outcome of ShouldCallHook.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Call the webhook.
    Call(Invocation),
    /// Do not call it.
    Skip(SkipReason),
    /// The request fails with this status (selector/namespace errors, unknown equivalent kind,
    /// matchCondition errors under failurePolicy Fail).
    Fail(Status),
}

/// What matchCondition evaluation did, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConditionStats {
    /// Conditions were evaluated and did not all come out true.
    pub evaluated_not_all_true: bool,
    /// The webhook was excluded (a false condition, or an error under Ignore).
    pub excluded: bool,
    /// Number of conditions that errored.
    pub errors: usize,
}

/// Everything ShouldCallHook reads besides the hook and the request.
pub struct MatchEnv<'a> {
    /// Equivalence and kinds.
    pub registry: &'a ResourceRegistry,
    /// Namespace labels.
    pub namespaces: &'a dyn NamespaceSource,
    /// Authorizer stub for CEL.
    pub authorizer: &'a cel::Authorizer,
    /// The release modelled (what converting an object to an equivalent version gives).
    pub release: crate::KubeVersion,
    /// The object as a webhook of another version last received or patched it, while the
    /// request's object has not changed since: matchConditions of a webhook of that version
    /// read it (upstream's `VersionedAttributes`).
    pub versioned: Option<(&'a GroupVersionKind, &'a Value)>,
}

/// Upstream's `ShouldCallHook`. `stats` receives matchCondition bookkeeping.
pub fn should_call_hook(
    hook: &Hook,
    attrs: &Attributes,
    env: &MatchEnv<'_>,
    stats: &mut ConditionStats,
) -> Decision {
    // Selector errors do not end the evaluation: upstream reports them only once a rule matches.
    let ns_err = match match_namespace_selector(hook, attrs, env.namespaces) {
        Ok(true) => None,
        Ok(false) => return Decision::Skip(SkipReason::NamespaceSelector),
        Err(e) => Some(e),
    };
    let obj_err = match match_object_selector(hook, attrs) {
        Ok(true) => None,
        Ok(false) => return Decision::Skip(SkipReason::ObjectSelector),
        Err(e) => Some(e),
    };
    let invocation = match find_invocation(hook, attrs, env.registry) {
        Ok(Some(inv)) => inv,
        Ok(None) => {
            return Decision::Skip(SkipReason::Rules);
        }
        Err(status) => return Decision::Fail(status),
    };
    if let Some(e) = ns_err.or(obj_err) {
        return Decision::Fail(*e);
    }
    if hook.conditions.is_empty() {
        return Decision::Call(invocation);
    }
    match evaluate_conditions(hook, attrs, &invocation, env, stats) {
        ConditionResult::AllTrue => Decision::Call(invocation),
        ConditionResult::False(name) => {
            stats.excluded = true;
            Decision::Skip(SkipReason::MatchConditionFalse { name })
        }
        ConditionResult::Error(err) => {
            if hook.ignore_failures {
                stats.excluded = true;
                Decision::Skip(SkipReason::MatchConditionErrorIgnored { error: err })
            } else {
                Decision::Fail(status::forbidden(
                    &attrs.resource.group_resource(),
                    &attrs.name,
                    &err,
                ))
            }
        }
    }
}

/// Whether the namespace selector selects the request's namespace; an error (a selector that
/// does not parse, an unknown namespace) is boxed to keep the common path free of large moves.
fn match_namespace_selector(
    hook: &Hook,
    attrs: &Attributes,
    namespaces: &dyn NamespaceSource,
) -> Result<bool, Box<Status>> {
    if attrs.namespace.is_empty() && attrs.resource.resource != "namespaces" {
        return Ok(true);
    }
    let selector = match &hook.namespace_selector {
        Ok(s) => s,
        Err(e) => return Err(Box::new(status::internal_error(e))),
    };
    if selector.is_empty() {
        return Ok(true);
    }
    let labels = namespace_labels(attrs, namespaces)?;
    Ok(selector.matches(&labels))
}

/// Upstream's `GetNamespaceLabels`.
fn namespace_labels<'a>(
    attrs: &Attributes,
    namespaces: &'a dyn NamespaceSource,
) -> Result<Cow<'a, BTreeMap<String, String>>, Box<Status>> {
    if attrs.resource.resource == "namespaces"
        && attrs.sub_resource.is_empty()
        && matches!(
            attrs.operation,
            crate::api::Operation::Create | crate::api::Operation::Update
        )
    {
        return Ok(Cow::Owned(
            object_labels(attrs.object_value())
                .map(labels_to_map)
                .unwrap_or_default(),
        ));
    }
    match namespaces.namespace(&attrs.namespace) {
        NamespaceLookup::Found(l) => Ok(l),
        other => Err(namespace_lookup_error(attrs, other)),
    }
}

#[cold]
fn namespace_lookup_error(attrs: &Attributes, lookup: NamespaceLookup<'_>) -> Box<Status> {
    Box::new(match lookup {
        NamespaceLookup::Error(e) => status::internal_error(&e),
        NamespaceLookup::NotFound | NamespaceLookup::Found(_) => status::not_found(
            &GroupResource {
                group: String::new(),
                resource: "namespaces".into(),
            },
            &attrs.namespace,
        ),
    })
}

fn match_object_selector(hook: &Hook, attrs: &Attributes) -> Result<bool, Box<Status>> {
    let selector = match &hook.object_selector {
        Ok(s) => s,
        Err(e) => return Err(Box::new(status::internal_error(e))),
    };
    if selector.is_empty() {
        return Ok(true);
    }
    let m = |o: Option<&Value>| match metadata(o) {
        Some(meta) => selector.matches_json(meta.get("labels").and_then(Value::as_object)),
        None => false,
    };
    Ok(m(attrs.object_value()) || m(attrs.old_object_value()))
}

/// `metadata` of an object, or None when the object has none (meta.Accessor fails: options
/// objects of CONNECT, for instance).
fn metadata(o: Option<&Value>) -> Option<&Map<String, Value>> {
    o?.as_object()?.get("metadata")?.as_object()
}

fn object_labels(o: Option<&Value>) -> Option<&Map<String, Value>> {
    metadata(o)?.get("labels")?.as_object()
}

fn labels_to_map(m: &Map<String, Value>) -> BTreeMap<String, String> {
    m.iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect()
}

/// A rule matches when scope, operation, group, version and resource all match (`resource` may
/// be an equivalent of the request's).
pub fn rule_matches(
    rule: &RuleWithOperations,
    attrs: &Attributes,
    resource: &GroupVersionResource,
) -> bool {
    scope_matches(rule.scope.as_deref(), attrs, resource)
        && exact_or_wildcard(rule.operations.as_deref(), attrs.operation.as_str())
        && exact_or_wildcard(rule.api_groups.as_deref(), &resource.group)
        && exact_or_wildcard(rule.api_versions.as_deref(), &resource.version)
        && resource_matches(
            rule.resources.as_deref(),
            &resource.resource,
            &attrs.sub_resource,
        )
}

/// `*` or an exact, case-sensitive match.
pub fn exact_or_wildcard(items: Option<&[String]>, requested: &str) -> bool {
    items.is_some_and(|items| items.iter().any(|i| i == "*" || short_eq(i, requested)))
}

/// `res[/sub]` entries with `*` wildcards; an entry without `/` matches only the main resource.
pub fn resource_matches(items: Option<&[String]>, res: &str, sub: &str) -> bool {
    items.is_some_and(|items| {
        items.iter().any(|entry| {
            let (r, s) = entry.split_once('/').unwrap_or((entry.as_str(), ""));
            (r == "*" || short_eq(r, res)) && (s == "*" || short_eq(s, sub))
        })
    })
}

fn is_namespaces(r: &GroupVersionResource) -> bool {
    r.group.is_empty() && r.version == "v1" && r.resource == "namespaces"
}

/// `Namespaced`, `Cluster`, `*` or unset; Namespace objects are cluster-scoped.
pub fn scope_matches(
    scope: Option<&str>,
    attrs: &Attributes,
    resource: &GroupVersionResource,
) -> bool {
    match scope {
        None | Some("*") => true,
        Some("Namespaced") => !is_namespaces(resource) && !attrs.namespace.is_empty(),
        Some("Cluster") => is_namespaces(resource) || attrs.namespace.is_empty(),
        Some(_) => false,
    }
}

fn find_invocation(
    hook: &Hook,
    attrs: &Attributes,
    registry: &ResourceRegistry,
) -> Result<Option<Invocation>, Status> {
    let rules = hook.webhook.rules.as_deref().unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        if rule_matches(rule, attrs, &attrs.resource) {
            return Ok(Some(Invocation {
                resource: attrs.resource.clone(),
                sub_resource: attrs.sub_resource.clone(),
                kind: attrs.kind.clone(),
                rule: i,
                equivalent: false,
            }));
        }
    }
    if !hook.equivalent || rules.is_empty() {
        return Ok(None);
    }
    let equivalents = registry.equivalent_resources(&attrs.resource, &attrs.sub_resource);
    for (i, rule) in rules.iter().enumerate() {
        for eq in equivalents.iter() {
            if *eq == *attrs.resource {
                continue;
            }
            if rule_matches(rule, attrs, eq) {
                let Some(kind) = registry.kind_for(eq, &attrs.sub_resource) else {
                    return Err(status::internal_error(&format!(
                        "unable to convert to {eq}: unknown kind"
                    )));
                };
                return Ok(Some(Invocation {
                    resource: Arc::new(eq.clone()),
                    sub_resource: attrs.sub_resource.clone(),
                    kind: Arc::new(kind),
                    rule: i,
                    equivalent: true,
                }));
            }
        }
    }
    Ok(None)
}

fn explain_namespace_skip(
    hook: &Hook,
    attrs: &Attributes,
    namespaces: &dyn NamespaceSource,
) -> (String, String) {
    let (selector, detail) = match (
        &hook.namespace_selector,
        namespace_labels(attrs, namespaces),
    ) {
        (Ok(s), Ok(labels)) => (
            s.to_string(),
            s.explain_mismatch(&labels)
                .unwrap_or_else(|| "selects nothing".into()),
        ),
        (Ok(s), Err(_)) => (s.to_string(), "namespace unknown".into()),
        (Err(e), _) => (String::new(), e.clone()),
    };
    let selector = if hook.webhook.namespace_selector.is_none() {
        "<nil: selects nothing>".into()
    } else {
        selector
    };
    (selector, detail)
}

fn explain_object_skip(hook: &Hook, attrs: &Attributes) -> (String, String) {
    let selector = match (&hook.object_selector, &hook.webhook.object_selector) {
        (_, None) => "<nil: selects nothing>".to_string(),
        (Ok(s), _) => s.to_string(),
        (Err(e), _) => e.clone(),
    };
    let detail = match (
        &hook.object_selector,
        metadata(attrs.object_value()),
        metadata(attrs.old_object_value()),
    ) {
        (_, None, None) => "the request carries no object with metadata".to_string(),
        (Ok(s), obj, old) => {
            let explain = |m: Option<&Map<String, Value>>| {
                m.map(|m| {
                    let labels = m
                        .get("labels")
                        .and_then(Value::as_object)
                        .map(labels_to_map)
                        .unwrap_or_default();
                    s.explain_mismatch(&labels)
                        .unwrap_or_else(|| "selects nothing".into())
                })
            };
            match (explain(obj), explain(old)) {
                (Some(a), Some(b)) if a == b => a,
                (Some(a), Some(b)) => format!("object: {a}; old object: {b}"),
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => String::new(),
            }
        }
        (Err(e), _, _) => e.clone(),
    };
    (selector, detail)
}

/// A one-line account of why no rule matched, naming the first rule and the first check it
/// failed.
fn explain_rules(hook: &Hook, attrs: &Attributes) -> String {
    let rules = hook.webhook.rules.as_deref().unwrap_or_default();
    if rules.is_empty() {
        return "the webhook has no rules".into();
    }
    let request = format!(
        "{} {}{} ({}{})",
        attrs.operation,
        attrs.resource.resource,
        if attrs.sub_resource.is_empty() {
            String::new()
        } else {
            format!("/{}", attrs.sub_resource)
        },
        if attrs.resource.group.is_empty() {
            String::new()
        } else {
            format!("{}/", attrs.resource.group)
        },
        attrs.resource.version
    );
    let mut parts = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        // In the order upstream's rule matcher tests them: scope, operation, group, version,
        // resource; the first that fails is named.
        let why = if !scope_matches(r.scope.as_deref(), attrs, &attrs.resource) {
            format!(
                "scope {:?} ({})",
                r.scope.as_deref().unwrap_or("*"),
                if is_namespaces(&attrs.resource) || attrs.namespace.is_empty() {
                    "the request is cluster-scoped"
                } else {
                    "the request is namespaced"
                }
            )
        } else if !exact_or_wildcard(r.operations.as_deref(), attrs.operation.as_str()) {
            format!(
                "operations {:?}",
                r.operations.as_deref().unwrap_or_default()
            )
        } else if !exact_or_wildcard(r.api_groups.as_deref(), &attrs.resource.group) {
            format!(
                "apiGroups {:?}",
                r.api_groups.as_deref().unwrap_or_default()
            )
        } else if !exact_or_wildcard(r.api_versions.as_deref(), &attrs.resource.version) {
            format!(
                "apiVersions {:?}",
                r.api_versions.as_deref().unwrap_or_default()
            )
        } else {
            format!("resources {:?}", r.resources.as_deref().unwrap_or_default())
        };
        parts.push(format!("rules[{i}] {why}"));
    }
    let policy = if hook.equivalent {
        ""
    } else {
        " (matchPolicy Exact: equivalent resources not considered)"
    };
    format!("{request} is outside {}{policy}", parts.join(", "))
}

enum ConditionResult {
    AllTrue,
    False(String),
    Error(String),
}

/// The CEL `request` variable: like the AdmissionRequest, but `resource` and the sub-resource
/// come from the original request while `kind` is the invocation kind (upstream quirk).
pub(crate) fn cel_request(attrs: &Attributes, invocation: &Invocation) -> Value {
    let text = |s: &str| Value::String(s.to_string());
    let mut m = Map::new();
    m.insert("kind".into(), kind_json(&invocation.kind));
    m.insert("resource".into(), resource_json(&attrs.resource));
    m.insert("subResource".into(), text(&attrs.sub_resource));
    m.insert("requestKind".into(), kind_json(&attrs.kind));
    m.insert("requestResource".into(), resource_json(&attrs.resource));
    m.insert("requestSubResource".into(), text(&attrs.sub_resource));
    m.insert("name".into(), text(&attrs.name));
    m.insert("namespace".into(), text(&attrs.namespace));
    m.insert("operation".into(), text(attrs.operation.as_str()));
    m.insert("userInfo".into(), user_info_json(&attrs.user_info));
    m.insert("dryRun".into(), Value::Bool(attrs.dry_run));
    m.insert(
        "options".into(),
        attrs.options.as_deref().cloned().unwrap_or(Value::Null),
    );
    Value::Object(m)
}

/// A group, version and kind as JSON (its serde form, built without a serializer).
fn kind_json(k: &GroupVersionKind) -> Value {
    let mut m = Map::new();
    m.insert("group".into(), Value::String(k.group.clone()));
    m.insert("version".into(), Value::String(k.version.clone()));
    m.insert("kind".into(), Value::String(k.kind.clone()));
    Value::Object(m)
}

/// A group, version and resource as JSON (its serde form, built without a serializer).
pub(crate) fn resource_json(r: &GroupVersionResource) -> Value {
    let mut m = Map::new();
    m.insert("group".into(), Value::String(r.group.clone()));
    m.insert("version".into(), Value::String(r.version.clone()));
    m.insert("resource".into(), Value::String(r.resource.clone()));
    Value::Object(m)
}

/// A user as JSON (its serde form, empty members left out, built without a serializer).
fn user_info_json(u: &crate::api::UserInfo) -> Value {
    let strings =
        |items: &[String]| Value::Array(items.iter().cloned().map(Value::String).collect());
    let mut m = Map::new();
    if !u.username.is_empty() {
        m.insert("username".into(), Value::String(u.username.clone()));
    }
    if !u.uid.is_empty() {
        m.insert("uid".into(), Value::String(u.uid.clone()));
    }
    if !u.groups.is_empty() {
        m.insert("groups".into(), strings(&u.groups));
    }
    if !u.extra.is_empty() {
        let extra = u.extra.iter().map(|(k, v)| (k.clone(), strings(v)));
        m.insert("extra".into(), Value::Object(extra.collect()));
    }
    Value::Object(m)
}

fn evaluate_conditions(
    hook: &Hook,
    attrs: &Attributes,
    invocation: &Invocation,
    env: &MatchEnv<'_>,
    stats: &mut ConditionStats,
) -> ConditionResult {
    let request = cel_request(attrs, invocation);
    let null = Value::Null;
    // The conditions read the objects in the invocation's version, converted where that differs
    // in shape from the request's.
    let convert = |o: Option<&Value>| {
        let o = o?;
        crate::schema::convert::convert(
            crate::schema::Schema::for_release(env.release),
            o,
            &attrs.kind,
            &invocation.kind,
        )
    };
    let (object, old_object) = if crate::schema::convert::converts(&attrs.kind, &invocation.kind) {
        let object = match env.versioned {
            Some((kind, o)) if *kind == *invocation.kind => Some(o.clone()),
            _ => convert(attrs.object_value()),
        };
        (object, convert(attrs.old_object_value()))
    } else {
        (None, None)
    };
    let activation = cel::Activation {
        object: object.as_ref().or(attrs.object_value()).unwrap_or(&null),
        old_object: old_object
            .as_ref()
            .or(attrs.old_object_value())
            .unwrap_or(&null),
        request: &request,
        authorizer: env.authorizer,
        user: &attrs.user_info,
    };
    let mut first_false = None;
    let mut errors: Vec<String> = Vec::new();
    let mut budget = cel::MATCH_CONDITIONS_COST_BUDGET;
    for c in &hook.conditions {
        let result = match &c.program {
            Ok(p) => {
                let evaluation = cel::evaluate_with_cost(p, &activation);
                if cel::evaluation_cost_exceeded(budget, evaluation.cost) {
                    stats.evaluated_not_all_true = true;
                    return ConditionResult::Error(cel::COST_BUDGET_EXHAUSTED.to_string());
                }
                budget -= evaluation.cost;
                evaluation.result
            }
            Err(e) => Err(e.clone()),
        };
        match result {
            Ok(true) => {}
            Ok(false) => {
                if first_false.is_none() {
                    first_false = Some(c.name.clone());
                }
            }
            Err(e) => {
                stats.errors += 1;
                let msg = format!("expression '{}' resulted in error: {e}", c.expression);
                if !errors.contains(&msg) {
                    errors.push(msg);
                }
            }
        }
    }
    if let Some(name) = first_false {
        stats.evaluated_not_all_true = true;
        return ConditionResult::False(name);
    }
    if !errors.is_empty() {
        stats.evaluated_not_all_true = true;
        let err = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        return ConditionResult::Error(err);
    }
    ConditionResult::AllTrue
}

/// Kinds upstream never sends to API-registered webhooks (their own configuration objects).
pub fn is_exempt_kind(kind: &GroupVersionKind, version: crate::KubeVersion) -> bool {
    kind.group == "admissionregistration.k8s.io"
        && (matches!(
            kind.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
        ) || (version.at_least(32)
            && matches!(
                kind.kind.as_str(),
                "MutatingAdmissionPolicy" | "MutatingAdmissionPolicyBinding"
            )))
}

/// The auth/authz virtual resources excluded from all webhooks (ExcludeAdmissionWebhookVirtualResources, on by default from 1.37).
pub fn is_excluded_virtual_resource(
    resource: &GroupVersionResource,
    version: crate::KubeVersion,
) -> bool {
    version.at_least(37)
        && matches!(
            (resource.group.as_str(), resource.resource.as_str()),
            (
                "authentication.k8s.io",
                "selfsubjectreviews" | "tokenreviews"
            ) | (
                "authorization.k8s.io",
                "localsubjectaccessreviews"
                    | "selfsubjectaccessreviews"
                    | "selfsubjectrulesreviews"
                    | "subjectaccessreviews"
            )
        )
}

#[cfg(test)]
mod json_tests {
    use super::*;
    use crate::api::UserInfo;

    /// The request's parts are built by hand as serde would write them.
    #[test]
    fn request_parts_are_their_serde_forms() {
        let kind = GroupVersionKind::new("apps", "v1", "Deployment");
        assert_eq!(kind_json(&kind), serde_json::to_value(&kind).unwrap());
        let resource = GroupVersionResource::new("", "v1", "pods");
        assert_eq!(
            resource_json(&resource),
            serde_json::to_value(&resource).unwrap()
        );
        let mut user = UserInfo::default();
        assert_eq!(user_info_json(&user), serde_json::to_value(&user).unwrap());
        user.username = "alice".into();
        user.uid = "u-1".into();
        user.groups = vec!["a".into(), "b".into()];
        user.extra.insert("scopes".into(), vec!["x".into()]);
        user.extra.insert("empty".into(), vec![]);
        assert_eq!(user_info_json(&user), serde_json::to_value(&user).unwrap());
    }
}

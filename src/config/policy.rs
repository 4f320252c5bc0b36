//! ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings as kube-apiserver stores
//! them: the defaults of `SetObjectDefaults_ValidatingAdmissionPolicy(Binding)`, the field errors
//! of `ValidateValidatingAdmissionPolicy(Binding)` (`pkg/apis/admissionregistration/validation`),
//! CEL compile and type errors included, and which apiVersions each release serves.

use std::collections::HashSet;

use super::Source;
use super::validate::{
    FieldError, validate_label_selector, validate_match_conditions, validate_object_meta,
    validate_rule,
};
use super::validation::{go_json_strings, go_quote, is_dns1123_subdomain, is_qualified_name};
use crate::KubeVersion;
use crate::api::policy::{
    MatchResources, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, MutatingPolicySpec,
    Mutation, ParamRef, PolicySpec, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    Variable,
};
use crate::cel;

/// A policy or a binding.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyObject {
    /// A ValidatingAdmissionPolicy.
    Policy(ValidatingAdmissionPolicy),
    /// A ValidatingAdmissionPolicyBinding.
    Binding(ValidatingAdmissionPolicyBinding),
    /// A MutatingAdmissionPolicy.
    MutatingPolicy(MutatingAdmissionPolicy),
    /// A MutatingAdmissionPolicyBinding.
    MutatingBinding(MutatingAdmissionPolicyBinding),
}

impl PolicyObject {
    /// The kind.
    pub fn kind(&self) -> &'static str {
        match self {
            PolicyObject::Policy(_) => "ValidatingAdmissionPolicy",
            PolicyObject::Binding(_) => "ValidatingAdmissionPolicyBinding",
            PolicyObject::MutatingPolicy(_) => "MutatingAdmissionPolicy",
            PolicyObject::MutatingBinding(_) => "MutatingAdmissionPolicyBinding",
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        match self {
            PolicyObject::Policy(p) => &p.name,
            PolicyObject::Binding(b) => &b.name,
            PolicyObject::MutatingPolicy(p) => &p.name,
            PolicyObject::MutatingBinding(b) => &b.name,
        }
    }

    /// The apiVersion as written.
    pub fn api_version(&self) -> &str {
        match self {
            PolicyObject::Policy(p) => &p.api_version,
            PolicyObject::Binding(b) => &b.api_version,
            PolicyObject::MutatingPolicy(p) => &p.api_version,
            PolicyObject::MutatingBinding(b) => &b.api_version,
        }
    }

    fn metadata_mut(&mut self) -> &mut serde_json::Value {
        match self {
            PolicyObject::Policy(p) => &mut p.metadata,
            PolicyObject::Binding(b) => &mut b.metadata,
            PolicyObject::MutatingPolicy(p) => &mut p.metadata,
            PolicyObject::MutatingBinding(b) => &mut b.metadata,
        }
    }
}

/// Admission policies and bindings, a later one of a kind and name replacing an earlier one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicySet {
    /// ValidatingAdmissionPolicies.
    pub validating: Vec<ValidatingAdmissionPolicy>,
    /// ValidatingAdmissionPolicyBindings.
    pub validating_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    /// MutatingAdmissionPolicies.
    pub mutating: Vec<MutatingAdmissionPolicy>,
    /// MutatingAdmissionPolicyBindings.
    pub mutating_bindings: Vec<MutatingAdmissionPolicyBinding>,
}

impl PolicySet {
    /// Adds `object`, replacing one of the same kind and name.
    pub fn insert(&mut self, object: PolicyObject) {
        fn upsert<T>(list: &mut Vec<T>, item: T, name: impl Fn(&T) -> &str) {
            list.retain(|q| name(q) != name(&item));
            list.push(item);
        }
        match object {
            PolicyObject::Policy(p) => upsert(&mut self.validating, p, |q| &q.name),
            PolicyObject::Binding(b) => upsert(&mut self.validating_bindings, b, |q| &q.name),
            PolicyObject::MutatingPolicy(p) => upsert(&mut self.mutating, p, |q| &q.name),
            PolicyObject::MutatingBinding(b) => upsert(&mut self.mutating_bindings, b, |q| &q.name),
        }
    }
}

/// A policy or binding with where it came from and what defaulting did.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedPolicy {
    /// Where it was read.
    pub source: Source,
    /// The object.
    pub object: PolicyObject,
    /// Defaults applied (`spec.failurePolicy: Fail`), once [`LoadedPolicy::apply_defaults`] ran.
    pub defaulted: Vec<String>,
    /// Field paths the API does not know.
    pub unknown_fields: Vec<String>,
}

impl LoadedPolicy {
    /// Clears the namespace of this cluster-scoped object and applies the defaults, as the
    /// apiserver does before validating a create; records both in `defaulted`.
    pub fn apply_defaults(&mut self) {
        if let Some(meta) = self.object.metadata_mut().as_object_mut()
            && let Some(serde_json::Value::String(ns)) = meta.get("namespace")
            && !ns.is_empty()
        {
            self.defaulted.push(format!(
                "metadata.namespace: \"\" (was {ns:?}: cluster-scoped, the apiserver clears it)"
            ));
            meta.remove("namespace");
        }
        let applied = match &mut self.object {
            PolicyObject::Policy(p) => default_policy(p),
            PolicyObject::Binding(b) => default_binding(b),
            PolicyObject::MutatingPolicy(p) => default_mutating_policy(p),
            PolicyObject::MutatingBinding(b) => default_mutating_binding(b),
        };
        self.defaulted.extend(applied);
    }
}

/// `SetObjectDefaults_ValidatingAdmissionPolicy`: failurePolicy `Fail`, and the matchConstraints'
/// defaults. Returns what was set.
pub fn default_policy(p: &mut ValidatingAdmissionPolicy) -> Vec<String> {
    let mut out = Vec::new();
    if p.spec.failure_policy.is_none() {
        p.spec.failure_policy = Some("Fail".into());
        out.push("spec.failurePolicy: Fail".into());
    }
    if let Some(m) = &mut p.spec.match_constraints {
        default_match_resources(m, "spec.matchConstraints", &mut out);
    }
    out
}

/// `SetObjectDefaults_ValidatingAdmissionPolicyBinding`: the matchResources' defaults.
pub fn default_binding(b: &mut ValidatingAdmissionPolicyBinding) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(m) = &mut b.spec.match_resources {
        default_match_resources(m, "spec.matchResources", &mut out);
    }
    out
}

/// `SetObjectDefaults_MutatingAdmissionPolicy`: failurePolicy `Fail`, and the matchConstraints'
/// defaults. Returns what was set.
pub fn default_mutating_policy(p: &mut MutatingAdmissionPolicy) -> Vec<String> {
    let mut out = Vec::new();
    if p.spec.failure_policy.is_none() {
        p.spec.failure_policy = Some("Fail".into());
        out.push("spec.failurePolicy: Fail".into());
    }
    if let Some(m) = &mut p.spec.match_constraints {
        default_match_resources(m, "spec.matchConstraints", &mut out);
    }
    out
}

/// `SetObjectDefaults_MutatingAdmissionPolicyBinding`: the matchResources' defaults and the
/// paramRef's `parameterNotFoundAction: Deny`.
pub fn default_mutating_binding(b: &mut MutatingAdmissionPolicyBinding) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = &mut b.spec.param_ref
        && r.parameter_not_found_action.is_none()
    {
        r.parameter_not_found_action = Some("Deny".into());
        out.push("spec.paramRef.parameterNotFoundAction: Deny".into());
    }
    if let Some(m) = &mut b.spec.match_resources {
        default_match_resources(m, "spec.matchResources", &mut out);
    }
    out
}

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` of each rule.
fn default_match_resources(m: &mut MatchResources, p: &str, out: &mut Vec<String>) {
    if m.match_policy.is_none() {
        m.match_policy = Some("Equivalent".into());
        out.push(format!("{p}.matchPolicy: Equivalent"));
    }
    if m.namespace_selector.is_none() {
        m.namespace_selector = Some(Default::default());
        out.push(format!("{p}.namespaceSelector: {{}}"));
    }
    if m.object_selector.is_none() {
        m.object_selector = Some(Default::default());
        out.push(format!("{p}.objectSelector: {{}}"));
    }
    for (list, name) in [
        (&mut m.resource_rules, "resourceRules"),
        (&mut m.exclude_resource_rules, "excludeResourceRules"),
    ] {
        for (i, r) in list.iter_mut().enumerate() {
            if r.rule.scope.is_none() {
                r.rule.scope = Some("*".into());
                out.push(format!("{p}.{name}[{i}].scope: *"));
            }
        }
    }
}

/// The apiVersions of the validating policy kinds and the releases that serve them (from each
/// release's `pkg/registry/admissionregistration/rest/storage_apiserver.go`): v1alpha1 from 1.26
/// to 1.31, v1beta1 from 1.28, v1 from 1.30. Before 1.30 the plugin and its APIs are off unless
/// the feature gate `ValidatingAdmissionPolicy` and the API version are enabled.
const SERVED: [(&str, u32, Option<u32>); 3] = [
    ("admissionregistration.k8s.io/v1alpha1", 26, Some(31)),
    ("admissionregistration.k8s.io/v1beta1", 28, None),
    ("admissionregistration.k8s.io/v1", 30, None),
];

/// The apiVersions of the mutating policy kinds and the releases that serve them: v1alpha1 from
/// 1.32 (behind the `MutatingAdmissionPolicy` feature gate and its runtime-config), v1beta1 from
/// 1.34, v1 from 1.36 (GA, on by default).
const SERVED_MUTATING: [(&str, u32, Option<u32>); 3] = [
    ("admissionregistration.k8s.io/v1alpha1", 32, None),
    ("admissionregistration.k8s.io/v1beta1", 34, None),
    ("admissionregistration.k8s.io/v1", 36, None),
];

fn is_mutating(object: &PolicyObject) -> bool {
    matches!(
        object,
        PolicyObject::MutatingPolicy(_) | PolicyObject::MutatingBinding(_)
    )
}

/// The newest apiVersion (`admissionregistration.k8s.io/v1beta1`) under which a cluster of
/// `version` serves the policy kind `kind` (a policy's or a binding's); None when it serves none.
pub fn served_api_version(kind: &str, version: KubeVersion) -> Option<&'static str> {
    let table = if kind.starts_with("Mutating") {
        &SERVED_MUTATING
    } else {
        &SERVED
    };
    let minor = version.minor();
    // The tables list the versions oldest first.
    (table.iter().rev())
        .find(|(_, from, until)| minor >= *from && until.is_none_or(|u| minor <= u))
        .map(|(a, ..)| *a)
}

/// Why `object` cannot exist in a cluster of `version`: its apiVersion is not served there.
pub fn unserved(object: &PolicyObject, version: KubeVersion) -> Option<String> {
    let api_version = object.api_version();
    let kind = object.kind();
    let (table, which) = if is_mutating(object) {
        (&SERVED_MUTATING, "mutating")
    } else {
        (&SERVED, "validating")
    };
    let served_by = |v: u32| {
        table
            .iter()
            .filter(|(_, from, until)| v >= *from && until.is_none_or(|u| v <= u))
            .map(|(a, ..)| *a)
            .collect::<Vec<_>>()
    };
    let minor = version.minor();
    match table.iter().find(|(a, ..)| *a == api_version) {
        None => Some(format!(
            "{kind} is not served as apiVersion {api_version:?} by any release"
        )),
        Some((_, from, until)) if minor < *from || until.is_some_and(|u| minor > u) => {
            let others = served_by(minor);
            let when = match until {
                Some(u) => format!("Kubernetes 1.{from} to 1.{u}"),
                None => format!("Kubernetes 1.{from} and later"),
            };
            Some(format!(
                "{api_version} {kind} is served by {when} (modelled: {version}): kubectl apply fails with 'no matches for kind \"{kind}\" in version \"{api_version}\"'; {}",
                if others.is_empty() {
                    format!("this release serves no {which} admission policies")
                } else {
                    format!("write it as {}", others.last().copied().unwrap_or_default())
                }
            ))
        }
        Some(_) => None,
    }
}

/// What a release needs switched on for the validating policies to run at all: before 1.30 the
/// `ValidatingAdmissionPolicy` feature gate (off by default) and the API version.
pub fn needs_enabling(object: &PolicyObject, version: KubeVersion) -> Option<String> {
    if is_mutating(object) {
        return (version.minor() < 36).then(|| {
            format!(
                "Kubernetes {version} runs MutatingAdmissionPolicies only with --feature-gates=MutatingAdmissionPolicy=true --runtime-config={}=true (both off by default before 1.36); modelled as enabled",
                object.api_version()
            )
        });
    }
    (version.minor() < 30).then(|| {
        format!(
            "Kubernetes {version} runs ValidatingAdmissionPolicies only with --feature-gates=ValidatingAdmissionPolicy=true --runtime-config={}=true (both off by default before 1.30); modelled as enabled",
            object.api_version()
        )
    })
}

const FAILURE_POLICIES: [&str; 2] = ["Fail", "Ignore"];
const MATCH_POLICIES: [&str; 2] = ["Equivalent", "Exact"];
const REASONS: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];
const VALIDATION_ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
const MAX_AUDIT_ANNOTATIONS: usize = 20;
const MAX_VALUE_EXPRESSION_LEN: usize = 5 * 1024;

/// Validates a policy or binding as the apiserver does on create (run the defaults first), in
/// the newest modelled release.
pub fn validate_policy_object(object: &PolicyObject) -> Vec<FieldError> {
    validate_policy_object_in(object, KubeVersion::NEWEST)
}

/// [`validate_policy_object`] in a cluster of release `version` (whose CEL environment differs).
pub fn validate_policy_object_in(object: &PolicyObject, version: KubeVersion) -> Vec<FieldError> {
    match object {
        PolicyObject::Policy(p) => validate_policy_in(p, version),
        PolicyObject::Binding(b) => validate_binding(b),
        PolicyObject::MutatingPolicy(p) => validate_mutating_policy(p),
        PolicyObject::MutatingBinding(b) => validate_mutating_binding(b),
    }
}

/// Validates a policy or binding as the apiserver does on an update of `old` (both defaulted):
/// as on create, except that a policy's matchConditions are not validated again when neither
/// they nor the paramKind they see changed (`ignoreValidatingAdmissionPolicyMatchConditions`,
/// `ignoreMutatingAdmissionPolicyMatchConditions`): a condition stored under an older release's
/// rules stays valid until it is edited.
pub fn validate_policy_object_update(object: &PolicyObject, old: &PolicyObject) -> Vec<FieldError> {
    validate_policy_object_update_in(object, old, KubeVersion::NEWEST)
}

/// [`validate_policy_object_update`] as the apiserver of `version` validates (its environment
/// for new expressions).
pub fn validate_policy_object_update_in(
    object: &PolicyObject,
    old: &PolicyObject,
    version: KubeVersion,
) -> Vec<FieldError> {
    let unchanged = match (object, old) {
        (PolicyObject::Policy(n), PolicyObject::Policy(o)) => {
            n.spec.param_kind == o.spec.param_kind
                && n.spec.match_conditions == o.spec.match_conditions
        }
        (PolicyObject::MutatingPolicy(n), PolicyObject::MutatingPolicy(o)) => {
            n.spec.param_kind == o.spec.param_kind
                && n.spec.match_conditions == o.spec.match_conditions
        }
        _ => false,
    };
    let mut errs = validate_policy_object_in(object, version);
    if unchanged {
        errs.retain(|e| !e.field.starts_with("spec.matchConditions"));
    }
    errs
}

/// `ValidateValidatingAdmissionPolicy`: every error, in upstream's order.
pub fn validate_policy(p: &ValidatingAdmissionPolicy) -> Vec<FieldError> {
    validate_policy_in(p, KubeVersion::NEWEST)
}

fn validate_policy_in(p: &ValidatingAdmissionPolicy, version: KubeVersion) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&p.name, &p.metadata, &mut errs);
    validate_policy_spec(&p.name, &p.spec, version, &mut errs);
    errs
}

fn validate_policy_spec(
    name: &str,
    spec: &PolicySpec,
    version: KubeVersion,
    errs: &mut Vec<FieldError>,
) {
    let env = validate_spec_head(
        SpecHead {
            release: version,
            failure_policy: spec.failure_policy.as_deref(),
            param_kind: spec.param_kind.as_ref(),
            match_constraints: spec.match_constraints.as_ref(),
            match_conditions: &spec.match_conditions,
            variables: &spec.variables,
            mutating: false,
        },
        errs,
    );
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", why));
        errs.push(FieldError::required("spec.auditAnnotations", why));
        return;
    }
    let message_env = env.without_authorizer();
    for (i, v) in spec.validations.iter().enumerate() {
        let p = format!("spec.validations[{i}]");
        if v.expression.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.expression"),
                "expression is not specified",
            ));
        } else if let Err(e) = cel::compile_in(&v.expression, &env, cel::ReturnType::Bool) {
            errs.push(FieldError::invalid(
                format!("{p}.expression"),
                go_quote(&v.expression),
                &e.0,
            ));
        }
        let trimmed_message_expression = v.message_expression.trim();
        if !v.message_expression.is_empty() && trimmed_message_expression.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.messageExpression"),
                go_quote(&v.message_expression),
                "must be non-empty if specified",
            ));
        } else if !trimmed_message_expression.is_empty()
            && let Err(e) =
                cel::compile_in(&v.message_expression, &message_env, cel::ReturnType::String)
        {
            errs.push(FieldError::invalid(
                format!("{p}.messageExpression"),
                go_quote(&v.message_expression),
                &e.0,
            ));
        }
        let trimmed_message = v.message.trim();
        if !v.message.is_empty() && trimmed_message.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.message"),
                go_quote(&v.message),
                "message must be non-empty if specified",
            ));
        } else if trimmed_message.contains(['\n', '\r']) {
            errs.push(FieldError::invalid(
                format!("{p}.message"),
                go_quote(&v.message),
                "message must not contain line breaks",
            ));
        }
        if let Some(r) = v.reason.as_deref()
            && !REASONS.contains(&r)
        {
            errs.push(FieldError::not_supported(
                format!("{p}.reason"),
                r,
                &REASONS,
            ));
        }
    }
    if spec.audit_annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            "spec.auditAnnotations",
            format!("{} items", spec.audit_annotations.len()),
            &format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys = HashSet::new();
    for (i, a) in spec.audit_annotations.iter().enumerate() {
        let p = format!("spec.auditAnnotations[{i}]");
        if name.is_empty() {
            errs.push(FieldError::invalid(
                format!("{p}.key"),
                go_quote(&a.key),
                "requires metadata.name be non-empty",
            ));
        } else {
            let full = format!("{name}/{}", a.key);
            for msg in is_qualified_name(&full) {
                errs.push(FieldError::invalid(
                    format!("{p}.key"),
                    go_quote(&full),
                    &msg,
                ));
            }
        }
        let trimmed = a.value_expression.trim();
        if trimmed.is_empty() {
            errs.push(FieldError::required(
                format!("{p}.valueExpression"),
                "valueExpression is not specified",
            ));
        } else if trimmed.len() > MAX_VALUE_EXPRESSION_LEN {
            errs.push(FieldError::required(
                format!("{p}.valueExpression"),
                &format!("must not exceed {MAX_VALUE_EXPRESSION_LEN} bytes in length"),
            ));
        } else if let Err(e) = cel::compile_in(trimmed, &env, cel::ReturnType::StringOrNull) {
            errs.push(FieldError::invalid(
                format!("{p}.valueExpression"),
                go_quote(&a.value_expression),
                &e.0,
            ));
        }
        if !keys.insert(a.key.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}.key"), &a.key));
        }
    }
}

/// What both policy kinds' specs validate first, in upstream's order.
struct SpecHead<'a> {
    failure_policy: Option<&'a str>,
    param_kind: Option<&'a crate::api::policy::ParamKind>,
    match_constraints: Option<&'a MatchResources>,
    match_conditions: &'a [crate::api::MatchCondition],
    variables: &'a [Variable],
    /// A mutating policy's rules may not name DELETE.
    mutating: bool,
    /// The release whose CEL environment compiles the expressions.
    release: KubeVersion,
}

/// failurePolicy, paramKind, matchConstraints, matchConditions and variables; returns the CEL
/// environment of the rest of the spec (params and the variables declared).
fn validate_spec_head(h: SpecHead<'_>, errs: &mut Vec<FieldError>) -> cel::Env {
    match h.failure_policy {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some(f) if !FAILURE_POLICIES.contains(&f) => errs.push(FieldError::not_supported(
            "spec.failurePolicy",
            f,
            &FAILURE_POLICIES,
        )),
        Some(_) => {}
    }
    if let Some(k) = h.param_kind {
        validate_param_kind(&k.api_version, &k.kind, errs);
    }
    match h.match_constraints {
        None => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(m) => {
            validate_match_resources(m, "spec.matchConstraints", errs);
            if m.resource_rules.is_empty() {
                errs.push(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
            if h.mutating {
                validate_mutating_operations(m, "spec.matchConstraints", errs);
            }
        }
    }
    let env = cel::Env::policy(h.param_kind.is_some()).for_release(h.release);
    validate_match_conditions(h.match_conditions, &env, "spec.matchConditions", errs);
    validate_variables(h.variables, env, errs)
}

/// The variables' field errors, in order; returns `env` with each variable declared.
fn validate_variables(
    variables: &[Variable],
    env: cel::Env,
    errs: &mut Vec<FieldError>,
) -> cel::Env {
    let mut env = env;
    for (i, v) in variables.iter().enumerate() {
        let p = format!("spec.variables[{i}]");
        if v.name.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(&v.name) {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                go_quote(&v.name),
                "name is not a valid CEL identifier",
            ));
        }
        if v.expression.trim().is_empty() {
            errs.push(FieldError::required(
                format!("{p}.expression"),
                "expression is not specified",
            ));
        } else {
            match cel::compile_in(&v.expression, &env, cel::ReturnType::Any) {
                Ok(program) => env.declare_variable(&v.name, &program),
                Err(e) => {
                    env.declare_variable_unknown(&v.name);
                    errs.push(FieldError::invalid(
                        format!("{p}.expression"),
                        go_quote(&v.expression),
                        &e.0,
                    ));
                }
            }
        }
    }
    env
}

/// `ValidateMutatingAdmissionPolicy`: every error, in upstream's order.
pub fn validate_mutating_policy(p: &MutatingAdmissionPolicy) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&p.name, &p.metadata, &mut errs);
    validate_mutating_policy_spec(&p.spec, &mut errs);
    errs
}

const MUTATING_OPERATIONS: [&str; 4] = ["*", "CONNECT", "CREATE", "UPDATE"];
const PATCH_TYPES: [&str; 2] = ["ApplyConfiguration", "JSONPatch"];
const REINVOCATION_POLICIES: [&str; 2] = ["IfNeeded", "Never"];

/// `DELETE` is refused in a mutating policy's or binding's rules.
fn validate_mutating_operations(m: &MatchResources, p: &str, errs: &mut Vec<FieldError>) {
    for r in &m.resource_rules {
        for op in r.rule.operations.iter().flatten() {
            if !MUTATING_OPERATIONS.contains(&op.as_str()) {
                errs.push(FieldError::not_supported(
                    format!("{p}.resourceRules.operations"),
                    op,
                    &MUTATING_OPERATIONS,
                ));
            }
        }
    }
}

fn validate_mutating_policy_spec(spec: &MutatingPolicySpec, errs: &mut Vec<FieldError>) {
    let env = validate_spec_head(
        SpecHead {
            failure_policy: spec.failure_policy.as_deref(),
            param_kind: spec.param_kind.as_ref(),
            match_constraints: spec.match_constraints.as_ref(),
            match_conditions: &spec.match_conditions,
            variables: &spec.variables,
            mutating: true,
            release: KubeVersion::NEWEST,
        },
        errs,
    )
    .with_patch_types();
    if spec.mutations.is_empty() {
        errs.push(FieldError::required(
            "spec.mutations",
            "mutations must contain at least one item",
        ));
    }
    for (i, m) in spec.mutations.iter().enumerate() {
        validate_mutation(m, &env, &format!("spec.mutations[{i}]"), errs);
    }
    if spec.reinvocation_policy.is_empty() {
        errs.push(FieldError::required("spec.reinvocationPolicy", ""));
    } else if !REINVOCATION_POLICIES.contains(&spec.reinvocation_policy.as_str()) {
        errs.push(FieldError::not_supported(
            "spec.reinvocationPolicy",
            &spec.reinvocation_policy,
            &REINVOCATION_POLICIES,
        ));
    }
}

fn validate_mutation(m: &Mutation, env: &cel::Env, p: &str, errs: &mut Vec<FieldError>) {
    let (own, own_name, other, other_name, ret) = match m.patch_type.as_str() {
        "" => {
            errs.push(FieldError::required(format!("{p}.patchType"), ""));
            return;
        }
        "JSONPatch" => (
            &m.json_patch,
            "jsonPatch",
            &m.apply_configuration,
            "applyConfiguration",
            cel::ReturnType::JsonPatches,
        ),
        "ApplyConfiguration" => (
            &m.apply_configuration,
            "applyConfiguration",
            &m.json_patch,
            "jsonPatch",
            cel::ReturnType::ApplyConfiguration,
        ),
        other => {
            errs.push(FieldError::not_supported(
                format!("{p}.patchType"),
                other,
                &PATCH_TYPES,
            ));
            return;
        }
    };
    match own {
        None => errs.push(FieldError::required(
            format!("{p}.{own_name}"),
            &format!("must be specified when patchType is {}", m.patch_type),
        )),
        Some(expression) => {
            let trimmed = expression.trim();
            if trimmed.is_empty() {
                errs.push(FieldError::required(
                    format!("{p}.{own_name}.expression"),
                    "",
                ));
            } else if let Err(e) = cel::compile_in(trimmed, env, ret) {
                errs.push(FieldError::invalid(
                    format!("{p}.{own_name}.expression"),
                    go_quote(trimmed),
                    &e.0,
                ));
            }
        }
    }
    if other.is_some() {
        errs.push(FieldError::invalid(
            format!("{p}.{other_name}"),
            format!("{{{other_name}}}"),
            &format!("must not be specified when patchType is {}", m.patch_type),
        ));
    }
}

/// `ValidateMutatingAdmissionPolicyBinding`: every error, in upstream's order.
pub fn validate_mutating_binding(b: &MutatingAdmissionPolicyBinding) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&b.name, &b.metadata, &mut errs);
    let spec = &b.spec;
    validate_binding_reference(&spec.policy_name, spec.param_ref.as_ref(), &mut errs);
    if let Some(m) = &spec.match_resources {
        validate_match_resources(m, "spec.matchResources", &mut errs);
        validate_mutating_operations(m, "spec.matchResources", &mut errs);
    }
    errs
}

/// CEL's `IDENT` minus its reserved words (`isCELIdentifier`).
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !cel::RESERVED_WORDS.contains(&name)
}

fn validate_param_kind(api_version: &str, kind: &str, errs: &mut Vec<FieldError>) {
    let p = "spec.paramKind.apiVersion";
    if api_version.is_empty() {
        errs.push(FieldError::required(p, ""));
    } else if api_version.matches('/').count() > 1 {
        errs.push(FieldError::invalid(
            p,
            go_quote(api_version),
            &format!("unexpected GroupVersion string: {api_version}"),
        ));
    } else if api_version != "/" {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if !group.is_empty() {
            let dns = is_dns1123_subdomain(group);
            if !dns.is_empty() {
                errs.push(FieldError::invalid(p, go_quote(group), &dns.join(",")));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                p,
                go_quote(api_version),
                "version must be specified",
            ));
        } else {
            let dns = super::validation::is_dns1035_label(version);
            if !dns.is_empty() {
                errs.push(FieldError::invalid(p, go_quote(version), &dns.join(",")));
            }
        }
    }
    let p = "spec.paramKind.kind";
    if kind.is_empty() {
        errs.push(FieldError::required(p, ""));
    } else {
        let dns = super::validation::is_dns1035_label(&kind.to_lowercase());
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                p,
                go_quote(kind),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    dns.join(",")
                ),
            ));
        }
    }
}

/// `path.ValidatePathSegmentName` (not as a prefix).
fn path_segment_errors(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if name == "." || name == ".." {
        out.push(format!("may not be '{name}'"));
    }
    for illegal in ["/", "%"] {
        if name.contains(illegal) {
            out.push(format!("may not contain '{illegal}'"));
        }
    }
    out
}

fn validate_match_resources(m: &MatchResources, p: &str, errs: &mut Vec<FieldError>) {
    match m.match_policy.as_deref() {
        None => errs.push(FieldError::required(format!("{p}.matchPolicy"), "")),
        Some(mp) if !MATCH_POLICIES.contains(&mp) => errs.push(FieldError::not_supported(
            format!("{p}.matchPolicy"),
            mp,
            &MATCH_POLICIES,
        )),
        Some(_) => {}
    }
    for (sel, name) in [
        (&m.namespace_selector, "namespaceSelector"),
        (&m.object_selector, "objectSelector"),
    ] {
        match sel {
            None => errs.push(FieldError::required(format!("{p}.{name}"), "")),
            Some(s) => validate_label_selector(s, true, &format!("{p}.{name}"), errs),
        }
    }
    for (list, name) in [
        (&m.resource_rules, "resourceRules"),
        (&m.exclude_resource_rules, "excludeResourceRules"),
    ] {
        for (i, r) in list.iter().enumerate() {
            let rp = format!("{p}.{name}[{i}]");
            let mut seen = HashSet::new();
            for (j, n) in r.resource_names.iter().enumerate() {
                for msg in path_segment_errors(n) {
                    errs.push(FieldError::invalid(
                        format!("{rp}.resourceNames[{j}]"),
                        go_quote(n),
                        &msg,
                    ));
                }
                if !seen.insert(n.as_str()) {
                    errs.push(FieldError::duplicate(format!("{rp}.resourceNames[{j}]"), n));
                }
            }
            validate_rule(&r.rule, &rp, errs);
        }
    }
}

/// `ValidateValidatingAdmissionPolicyBinding`: every error, in upstream's order.
pub fn validate_binding(b: &ValidatingAdmissionPolicyBinding) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_object_meta(&b.name, &b.metadata, &mut errs);
    let spec = &b.spec;
    validate_binding_reference(&spec.policy_name, spec.param_ref.as_ref(), &mut errs);
    if let Some(m) = &spec.match_resources {
        validate_match_resources(m, "spec.matchResources", &mut errs);
    }
    validate_validation_actions(&spec.validation_actions, &mut errs);
    errs
}

/// A binding's policyName and paramRef, whatever the policy's kind.
fn validate_binding_reference(
    policy_name: &str,
    param_ref: Option<&ParamRef>,
    errs: &mut Vec<FieldError>,
) {
    if policy_name.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    } else {
        for msg in is_dns1123_subdomain(policy_name) {
            errs.push(FieldError::invalid(
                "spec.policyName",
                go_quote(policy_name),
                &msg,
            ));
        }
    }
    if let Some(r) = param_ref {
        validate_param_ref(r, errs);
    }
}

fn validate_param_ref(r: &ParamRef, errs: &mut Vec<FieldError>) {
    let p = "spec.paramRef";
    if !r.name.is_empty() {
        for msg in path_segment_errors(&r.name) {
            errs.push(FieldError::invalid(
                format!("{p}.name"),
                go_quote(&r.name),
                &msg,
            ));
        }
        if r.selector.is_some() {
            errs.push(FieldError::forbidden(
                format!("{p}.name"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(s) = &r.selector {
        validate_label_selector(s, true, &format!("{p}.selector"), errs);
        if !r.name.is_empty() {
            errs.push(FieldError::forbidden(
                format!("{p}.selector"),
                "name and selector are mutually exclusive",
            ));
        }
    }
    if r.name.is_empty() && r.selector.is_none() {
        errs.push(FieldError::required(
            p,
            "one of name or selector must be specified",
        ));
    }
    match r.parameter_not_found_action.as_deref() {
        None | Some("") => errs.push(FieldError::required(
            format!("{p}.parameterNotFoundAction"),
            "",
        )),
        Some("Deny" | "Allow") => {}
        Some(other) => errs.push(FieldError::not_supported(
            format!("{p}.parameterNotFoundAction"),
            other,
            &["Deny", "Allow"],
        )),
    }
}

fn validate_validation_actions(actions: &[String], errs: &mut Vec<FieldError>) {
    let p = "spec.validationActions";
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !VALIDATION_ACTIONS.contains(&a.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{p}[{i}]"),
                a,
                &VALIDATION_ACTIONS,
            ));
        }
        if !seen.insert(a.as_str()) {
            errs.push(FieldError::duplicate(format!("{p}[{i}]"), a));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            p,
            go_json_strings(Some(actions)),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            p,
            "at least one validation action is required",
        ));
    }
}

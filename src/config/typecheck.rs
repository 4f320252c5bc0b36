//! The type checking of a ValidatingAdmissionPolicy's expressions against the schemas of the
//! kinds it matches, as the ValidatingAdmissionPolicy status controller does it
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/validating/typechecking.go`) and reports it in
//! `status.typeChecking.expressionWarnings`.
//!
//! For each validation's `expression` and `messageExpression`, the expression is compiled once
//! per kind that the policy's `matchConstraints.resourceRules` name without wildcards (at most
//! ten, sorted by group, version and kind), with `object` and `oldObject` of that kind's type and
//! `params` of the `paramKind`'s type; what fails to compile becomes a warning
//! `<group>/<version>, Kind=<kind>: <cel-go's issues>` (one line per kind, each ending in a
//! newline). No result type is required here (the apiserver checks that on create).

use crate::KubeVersion;
use crate::api::meta::{GroupVersionKind, GroupVersionResource};
use crate::api::policy::{ValidatingAdmissionPolicy, Variable};
use crate::cel;
use crate::registry::ResourceRegistry;
use crate::schema::Schema;

/// Upstream's `maxTypesToCheck`: the kinds checked per policy.
const MAX_TYPES_TO_CHECK: usize = 10;

/// One entry of `status.typeChecking.expressionWarnings`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionWarning {
    /// The expression's path, as `spec.validations[0].expression`.
    pub field_ref: String,
    /// The issues, per kind.
    pub warning: String,
}

/// `status.typeChecking.expressionWarnings` of `policy` in a cluster of release `version`
/// (empty when every expression type-checks, or when no kind can be resolved).
pub fn type_check(
    policy: &ValidatingAdmissionPolicy,
    version: KubeVersion,
) -> Vec<ExpressionWarning> {
    let schema = Schema::for_release(version);
    let kinds: Vec<(GroupVersionKind, cel::Env)> = kinds_to_check(policy, version)
        .into_iter()
        .filter_map(|gvk| {
            let id = schema.kind(&gvk.group, &gvk.version, &gvk.kind)?;
            Some((gvk, id))
        })
        .map(|(gvk, id)| {
            // A paramKind whose schema is not known here (a custom resource's) leaves `params`
            // dynamic, where upstream would type it from the CRD's schema.
            let mut env = cel::Env::policy(policy.spec.param_kind.is_some())
                .for_release(version)
                .with_object_type(schema, id);
            if let Some(params) = params_type(policy, schema) {
                env = env.with_params_type(schema, params);
            }
            let env = declare_variables(env, &policy.spec.variables);
            (gvk, env)
        })
        .collect();
    let mut warnings = Vec::new();
    for (i, v) in policy.spec.validations.iter().enumerate() {
        let fields = [
            ("expression", v.expression.as_str()),
            ("messageExpression", v.message_expression.as_str()),
        ];
        for (field, expression) in fields {
            if field == "messageExpression" && expression.is_empty() {
                continue;
            }
            let results: Vec<String> = kinds
                .iter()
                .filter_map(|(gvk, env)| {
                    let issues = cel::type_check(expression, env)?;
                    Some(format!("{}: {issues}\n", gvk_string(gvk)))
                })
                .collect();
            if !results.is_empty() {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].{field}"),
                    warning: results.join("\n"),
                });
            }
        }
    }
    warnings
}

/// The variables compiled in order, each declared with its type (or unknown when it does not
/// compile: upstream reports no warning for variables).
fn declare_variables(mut env: cel::Env, variables: &[Variable]) -> cel::Env {
    for v in variables {
        match cel::compile_in(&v.expression, &env, cel::ReturnType::Any) {
            Ok(program) => env.declare_variable(&v.name, &program),
            Err(_) => env.declare_variable_unknown(&v.name),
        }
    }
    env
}

/// Go's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
fn gvk_string(gvk: &GroupVersionKind) -> String {
    format!("{}/{}, Kind={}", gvk.group, gvk.version, gvk.kind)
}

fn params_type(
    policy: &ValidatingAdmissionPolicy,
    schema: &'static Schema,
) -> Option<crate::schema::TypeId> {
    let kind = policy.spec.param_kind.as_ref()?;
    let (group, version) = kind
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", kind.api_version.as_str()));
    schema.kind(group, version, &kind.kind)
}

/// Upstream's `typesToCheck`: for each resource rule without a wildcard group or version, every
/// group × version × resource (sorted; resources with `*` or a subresource left out) resolved to
/// its kinds, until ten are found; sorted by group, version and kind.
pub fn kinds_to_check(
    policy: &ValidatingAdmissionPolicy,
    version: KubeVersion,
) -> Vec<GroupVersionKind> {
    let Some(constraints) = &policy.spec.match_constraints else {
        return Vec::new();
    };
    let registry = ResourceRegistry::builtin(version);
    let mut found: Vec<GroupVersionKind> = Vec::new();
    let mut count = 0;
    for named in &constraints.resource_rules {
        let rule = &named.rule;
        let groups = sorted(&rule.api_groups, &['*'], true);
        let versions = sorted(&rule.api_versions, &['*'], true);
        let resources = sorted(&rule.resources, &['*', '/'], false);
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let gvr = GroupVersionResource {
                        group: (*group).to_string(),
                        version: (*version).to_string(),
                        resource: (*resource).to_string(),
                    };
                    let Some(gvk) = registry.kind_for(&gvr, "") else {
                        continue;
                    };
                    if !found.contains(&gvk) {
                        found.push(gvk);
                    }
                    count += 1;
                    if count == MAX_TYPES_TO_CHECK {
                        return sorted_kinds(found);
                    }
                }
            }
        }
    }
    sorted_kinds(found)
}

/// A rule's list sorted, without the entries containing one of `skip`; empty when `whole` and
/// any entry contains one.
fn sorted<'a>(list: &'a Option<Vec<String>>, skip: &[char], whole: bool) -> Vec<&'a str> {
    let list = list.as_deref().unwrap_or_default();
    if whole && list.iter().any(|s| s.contains(skip)) {
        return Vec::new();
    }
    let mut out: Vec<&str> = list
        .iter()
        .filter(|s| !s.contains(skip))
        .map(String::as_str)
        .collect();
    out.sort_unstable();
    out
}

fn sorted_kinds(mut kinds: Vec<GroupVersionKind>) -> Vec<GroupVersionKind> {
    kinds.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    kinds
}

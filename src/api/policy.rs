//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io
//! `v1`, `v1beta1` and `v1alpha1`, which share one shape here). Optional fields stay `None` like
//! Go's nil pointers until defaulting sets them.

use serde::{Deserialize, Serialize};

use super::{LabelSelector, MatchCondition, RuleWithOperations};

/// A ValidatingAdmissionPolicy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingAdmissionPolicy {
    /// `admissionregistration.k8s.io/v1`, `/v1beta1` or `/v1alpha1`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole `metadata` as written.
    pub metadata: serde_json::Value,
    /// `spec`.
    pub spec: PolicySpec,
}

/// `ValidatingAdmissionPolicySpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySpec {
    /// The kind of the parameter objects.
    pub param_kind: Option<ParamKind>,
    /// The resources the policy applies to (required).
    pub match_constraints: Option<MatchResources>,
    /// The checks.
    pub validations: Vec<Validation>,
    /// `Fail` (default) or `Ignore`: what a configuration or evaluation error does.
    pub failure_policy: Option<String>,
    /// Audit annotations written when the policy matches.
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Conditions that must all be true for the validations to run.
    pub match_conditions: Vec<MatchCondition>,
    /// Named expressions available as `variables.<name>`.
    pub variables: Vec<Variable>,
}

/// `ParamKind`: apiVersion and kind of the parameter objects.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamKind {
    /// `group/version` or `version`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

/// `MatchResources` of a policy's matchConstraints or a binding's matchResources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchResources {
    /// Selects the namespaces of namespaced requests (defaulted to `{}`).
    pub namespace_selector: Option<LabelSelector>,
    /// Selects objects by their labels, old or new (defaulted to `{}`).
    pub object_selector: Option<LabelSelector>,
    /// Operations on resources that match.
    pub resource_rules: Vec<NamedRuleWithOperations>,
    /// Operations on resources excluded even when they match `resourceRules`.
    pub exclude_resource_rules: Vec<NamedRuleWithOperations>,
    /// `Exact` or `Equivalent` (default).
    pub match_policy: Option<String>,
}

/// `NamedRuleWithOperations`: a rule, optionally limited to object names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NamedRuleWithOperations {
    /// Names of the objects the rule is limited to; empty: any.
    pub resource_names: Vec<String>,
    /// The operations, groups, versions, resources and scope.
    #[serde(flatten)]
    pub rule: RuleWithOperations,
}

/// One validation of a policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    /// CEL expression that must evaluate to true.
    pub expression: String,
    /// The message of a failure.
    pub message: String,
    /// `Unauthorized`, `Forbidden`, `Invalid` or `RequestEntityTooLarge`; unset: `Invalid`.
    pub reason: Option<String>,
    /// CEL expression computing the message of a failure.
    pub message_expression: String,
}

/// One audit annotation of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditAnnotation {
    /// The key; the annotation is written as `<policy name>/<key>`.
    pub key: String,
    /// CEL expression evaluating to a string or null.
    pub value_expression: String,
}

/// One variable of a policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Variable {
    /// The name, a CEL identifier.
    pub name: String,
    /// The CEL expression.
    pub expression: String,
}

/// A ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatingAdmissionPolicyBinding {
    /// `admissionregistration.k8s.io/v1`, `/v1beta1` or `/v1alpha1`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole `metadata` as written.
    pub metadata: serde_json::Value,
    /// `spec`.
    pub spec: BindingSpec,
}

/// `ValidatingAdmissionPolicyBindingSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Where the parameters come from.
    pub param_ref: Option<ParamRef>,
    /// Further limits on the requests the policy applies to.
    pub match_resources: Option<MatchResources>,
    /// `Deny`, `Warn` and/or `Audit`.
    pub validation_actions: Vec<String>,
}

/// `ParamRef`: the parameter objects of a binding, by name or by label selector.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParamRef {
    /// One object by name.
    pub name: String,
    /// The namespace of namespaced parameters; empty: the request's.
    pub namespace: String,
    /// Every object whose labels match.
    pub selector: Option<LabelSelector>,
    /// `Allow` or `Deny`: what happens when no parameter is found.
    pub parameter_not_found_action: Option<String>,
}

/// A MutatingAdmissionPolicy (admissionregistration.k8s.io `v1alpha1` in 1.32–1.33, `v1beta1`
/// from 1.34, `v1` from 1.36, which share one shape here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MutatingAdmissionPolicy {
    /// `admissionregistration.k8s.io/v1alpha1`, `/v1beta1` or `/v1`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole `metadata` as written.
    pub metadata: serde_json::Value,
    /// `spec`.
    pub spec: MutatingPolicySpec,
}

/// `MutatingAdmissionPolicySpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MutatingPolicySpec {
    /// The kind of the parameter objects.
    pub param_kind: Option<ParamKind>,
    /// The resources the policy applies to (required).
    pub match_constraints: Option<MatchResources>,
    /// Named expressions available as `variables.<name>`.
    pub variables: Vec<Variable>,
    /// The mutations, applied in order.
    pub mutations: Vec<Mutation>,
    /// `Fail` (default) or `Ignore`: what a configuration or evaluation error does.
    pub failure_policy: Option<String>,
    /// Conditions that must all be true for the mutations to run.
    pub match_conditions: Vec<MatchCondition>,
    /// `Never` or `IfNeeded` (required).
    pub reinvocation_policy: String,
}

/// One mutation of a MutatingAdmissionPolicy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mutation {
    /// `ApplyConfiguration` or `JSONPatch`.
    pub patch_type: String,
    /// The CEL expression of an `ApplyConfiguration` mutation (None: the field is absent).
    pub apply_configuration: Option<String>,
    /// The CEL expression of a `JSONPatch` mutation (None: the field is absent).
    pub json_patch: Option<String>,
}

/// A MutatingAdmissionPolicyBinding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MutatingAdmissionPolicyBinding {
    /// `admissionregistration.k8s.io/v1alpha1`, `/v1beta1` or `/v1`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole `metadata` as written.
    pub metadata: serde_json::Value,
    /// `spec`.
    pub spec: MutatingBindingSpec,
}

/// `MutatingAdmissionPolicyBindingSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MutatingBindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Where the parameters come from.
    pub param_ref: Option<ParamRef>,
    /// Further limits on the requests the policy applies to.
    pub match_resources: Option<MatchResources>,
}

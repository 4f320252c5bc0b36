//! Decoding Validating- and MutatingAdmissionPolicies and their bindings with the webhook
//! configurations' decoder: the same errors (file, document, List item, field) and unknown-field
//! notes.

use serde_json::{Map, Value};

use super::{Decoder, join, json_type};
use crate::api::MatchCondition;
use crate::api::policy::{
    AuditAnnotation, BindingSpec, MatchResources, MutatingAdmissionPolicy,
    MutatingAdmissionPolicyBinding, MutatingBindingSpec, MutatingPolicySpec, Mutation,
    NamedRuleWithOperations, ParamKind, ParamRef, PolicySpec, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, Validation, Variable,
};
use crate::config::policy::{LoadedPolicy, PolicyObject};
use crate::config::{LoadError, Source};

/// The kinds this module reads.
pub(crate) const POLICY_KINDS: [&str; 4] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

impl Decoder {
    fn list<T>(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
        mut each: impl FnMut(&mut Self, &Map<String, Value>, &str) -> Result<T, LoadError>,
    ) -> Result<Vec<T>, LoadError> {
        let Some(items) = self.array(obj, key, path)? else {
            return Ok(Vec::new());
        };
        let items = items.to_vec();
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let p = format!("{}[{i}]", join(path, key));
                let m = self.element(v, &p)?.clone();
                each(self, &m, &p)
            })
            .collect()
    }

    fn match_resources(
        &mut self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<MatchResources>, LoadError> {
        let Some(m) = self.object(obj, key, path)? else {
            return Ok(None);
        };
        let m = m.clone();
        let p = join(path, key);
        self.check_keys(
            &m,
            &p,
            &[
                "namespaceSelector",
                "objectSelector",
                "resourceRules",
                "excludeResourceRules",
                "matchPolicy",
            ],
        );
        Ok(Some(MatchResources {
            namespace_selector: self.selector(&m, "namespaceSelector", &p)?,
            object_selector: self.selector(&m, "objectSelector", &p)?,
            resource_rules: self.list(&m, "resourceRules", &p, Self::named_rule)?,
            exclude_resource_rules: self.list(&m, "excludeResourceRules", &p, Self::named_rule)?,
            match_policy: self.string(&m, "matchPolicy", &p)?,
        }))
    }

    fn named_rule(
        &mut self,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<NamedRuleWithOperations, LoadError> {
        let resource_names = self.strings(m, "resourceNames", path)?.unwrap_or_default();
        let mut rest = m.clone();
        rest.remove("resourceNames");
        Ok(NamedRuleWithOperations {
            resource_names,
            rule: self.rule(&Value::Object(rest), path)?,
        })
    }

    fn policy_spec(&mut self, spec: &Map<String, Value>) -> Result<PolicySpec, LoadError> {
        let p = "spec";
        self.check_keys(
            spec,
            p,
            &[
                "paramKind",
                "matchConstraints",
                "validations",
                "failurePolicy",
                "auditAnnotations",
                "matchConditions",
                "variables",
            ],
        );
        let param_kind = self.param_kind(spec, p)?;
        Ok(PolicySpec {
            param_kind,
            match_constraints: self.match_resources(spec, "matchConstraints", p)?,
            validations: self.list(spec, "validations", p, |d, m, vp| {
                d.check_keys(
                    m,
                    vp,
                    &["expression", "message", "reason", "messageExpression"],
                );
                Ok(Validation {
                    expression: d.string(m, "expression", vp)?.unwrap_or_default(),
                    message: d.string(m, "message", vp)?.unwrap_or_default(),
                    reason: d.string(m, "reason", vp)?,
                    message_expression: d.string(m, "messageExpression", vp)?.unwrap_or_default(),
                })
            })?,
            failure_policy: self.string(spec, "failurePolicy", p)?,
            audit_annotations: self.list(spec, "auditAnnotations", p, |d, m, ap| {
                d.check_keys(m, ap, &["key", "valueExpression"]);
                Ok(AuditAnnotation {
                    key: d.string(m, "key", ap)?.unwrap_or_default(),
                    value_expression: d.string(m, "valueExpression", ap)?.unwrap_or_default(),
                })
            })?,
            match_conditions: self.match_conditions_of(spec, p)?,
            variables: self.variables(spec, p)?,
        })
    }

    fn param_kind(
        &mut self,
        spec: &Map<String, Value>,
        p: &str,
    ) -> Result<Option<ParamKind>, LoadError> {
        let Some(k) = self.object(spec, "paramKind", p)? else {
            return Ok(None);
        };
        let k = k.clone();
        let kp = join(p, "paramKind");
        self.check_keys(&k, &kp, &["apiVersion", "kind"]);
        Ok(Some(ParamKind {
            api_version: self.string(&k, "apiVersion", &kp)?.unwrap_or_default(),
            kind: self.string(&k, "kind", &kp)?.unwrap_or_default(),
        }))
    }

    fn match_conditions_of(
        &mut self,
        spec: &Map<String, Value>,
        p: &str,
    ) -> Result<Vec<MatchCondition>, LoadError> {
        self.list(spec, "matchConditions", p, |d, m, cp| {
            d.check_keys(m, cp, &["name", "expression"]);
            Ok(MatchCondition {
                name: d.string(m, "name", cp)?.unwrap_or_default(),
                expression: d.string(m, "expression", cp)?.unwrap_or_default(),
            })
        })
    }

    fn variables(
        &mut self,
        spec: &Map<String, Value>,
        p: &str,
    ) -> Result<Vec<Variable>, LoadError> {
        self.list(spec, "variables", p, |d, m, vp| {
            d.check_keys(m, vp, &["name", "expression"]);
            Ok(Variable {
                name: d.string(m, "name", vp)?.unwrap_or_default(),
                expression: d.string(m, "expression", vp)?.unwrap_or_default(),
            })
        })
    }

    /// `{expression: …}` at `key` (None: absent).
    fn expression_holder(
        &mut self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<String>, LoadError> {
        let Some(holder) = self.object(m, key, path)? else {
            return Ok(None);
        };
        let holder = holder.clone();
        let hp = join(path, key);
        self.check_keys(&holder, &hp, &["expression"]);
        Ok(Some(
            self.string(&holder, "expression", &hp)?.unwrap_or_default(),
        ))
    }

    fn mutating_policy_spec(
        &mut self,
        spec: &Map<String, Value>,
    ) -> Result<MutatingPolicySpec, LoadError> {
        let p = "spec";
        self.check_keys(
            spec,
            p,
            &[
                "paramKind",
                "matchConstraints",
                "variables",
                "mutations",
                "failurePolicy",
                "matchConditions",
                "reinvocationPolicy",
            ],
        );
        Ok(MutatingPolicySpec {
            param_kind: self.param_kind(spec, p)?,
            match_constraints: self.match_resources(spec, "matchConstraints", p)?,
            variables: self.variables(spec, p)?,
            mutations: self.list(spec, "mutations", p, |d, m, mp| {
                d.check_keys(m, mp, &["patchType", "applyConfiguration", "jsonPatch"]);
                Ok(Mutation {
                    patch_type: d.string(m, "patchType", mp)?.unwrap_or_default(),
                    apply_configuration: d.expression_holder(m, "applyConfiguration", mp)?,
                    json_patch: d.expression_holder(m, "jsonPatch", mp)?,
                })
            })?,
            failure_policy: self.string(spec, "failurePolicy", p)?,
            match_conditions: self.match_conditions_of(spec, p)?,
            reinvocation_policy: self
                .string(spec, "reinvocationPolicy", p)?
                .unwrap_or_default(),
        })
    }

    fn binding_spec(&mut self, spec: &Map<String, Value>) -> Result<BindingSpec, LoadError> {
        let p = "spec";
        self.check_keys(
            spec,
            p,
            &[
                "policyName",
                "paramRef",
                "matchResources",
                "validationActions",
            ],
        );
        let param_ref = self.param_ref(spec, p)?;
        Ok(BindingSpec {
            policy_name: self.string(spec, "policyName", p)?.unwrap_or_default(),
            param_ref,
            match_resources: self.match_resources(spec, "matchResources", p)?,
            validation_actions: self
                .strings(spec, "validationActions", p)?
                .unwrap_or_default(),
        })
    }

    fn param_ref(
        &mut self,
        spec: &Map<String, Value>,
        p: &str,
    ) -> Result<Option<ParamRef>, LoadError> {
        let Some(r) = self.object(spec, "paramRef", p)? else {
            return Ok(None);
        };
        let r = r.clone();
        let rp = join(p, "paramRef");
        self.check_keys(
            &r,
            &rp,
            &["name", "namespace", "selector", "parameterNotFoundAction"],
        );
        Ok(Some(ParamRef {
            name: self.string(&r, "name", &rp)?.unwrap_or_default(),
            namespace: self.string(&r, "namespace", &rp)?.unwrap_or_default(),
            selector: self.selector(&r, "selector", &rp)?,
            parameter_not_found_action: self.string(&r, "parameterNotFoundAction", &rp)?,
        }))
    }

    fn mutating_binding_spec(
        &mut self,
        spec: &Map<String, Value>,
    ) -> Result<MutatingBindingSpec, LoadError> {
        let p = "spec";
        self.check_keys(spec, p, &["policyName", "paramRef", "matchResources"]);
        Ok(MutatingBindingSpec {
            policy_name: self.string(spec, "policyName", p)?.unwrap_or_default(),
            param_ref: self.param_ref(spec, p)?,
            match_resources: self.match_resources(spec, "matchResources", p)?,
        })
    }
}

/// Decodes one object into a policy or binding; `Ok(None)` for any other kind.
pub(super) fn decode_policy_object(
    value: Value,
    source: Source,
    item: Option<usize>,
) -> Result<Option<LoadedPolicy>, LoadError> {
    let Value::Object(obj) = &value else {
        return Ok(None);
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    if group != super::GROUP || !POLICY_KINDS.contains(&kind) {
        return Ok(None);
    }
    let mut d = Decoder {
        source,
        unknown: Vec::new(),
        item,
    };
    let (kind, api_version) = (kind.to_string(), api_version.to_string());
    d.check_keys(
        obj,
        "",
        &["apiVersion", "kind", "metadata", "spec", "status"],
    );
    let (metadata, name) = d.metadata_and_name(obj)?;
    let empty = Map::new();
    let spec = match obj.get("spec") {
        None | Some(Value::Null) => empty,
        Some(Value::Object(m)) => m.clone(),
        Some(v) => {
            return Err(LoadError::FieldType {
                at: d.source.clone(),
                item,
                field: "spec".into(),
                message: format!("expected a mapping, found {}", json_type(v)),
            });
        }
    };
    let object = match kind.as_str() {
        "ValidatingAdmissionPolicy" => PolicyObject::Policy(ValidatingAdmissionPolicy {
            api_version,
            name,
            metadata,
            spec: d.policy_spec(&spec)?,
        }),
        "ValidatingAdmissionPolicyBinding" => {
            PolicyObject::Binding(ValidatingAdmissionPolicyBinding {
                api_version,
                name,
                metadata,
                spec: d.binding_spec(&spec)?,
            })
        }
        "MutatingAdmissionPolicy" => PolicyObject::MutatingPolicy(MutatingAdmissionPolicy {
            api_version,
            name,
            metadata,
            spec: d.mutating_policy_spec(&spec)?,
        }),
        _ => PolicyObject::MutatingBinding(MutatingAdmissionPolicyBinding {
            api_version,
            name,
            metadata,
            spec: d.mutating_binding_spec(&spec)?,
        }),
    };
    Ok(Some(LoadedPolicy {
        source: d.source,
        object,
        defaulted: Vec::new(),
        unknown_fields: d.unknown,
    }))
}

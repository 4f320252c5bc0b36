//! The smaller groups: autoscaling/v1 and v2, networking/v1, discovery/v1, scheduling/v1, rbac/v1,
//! storage/v1.

use serde_json::{Map, Value, json};

use super::features::Features;
use super::go::{Lit, Unset, apply, elements, field, pointer, set_default, value_struct, wrote};

type Object = Map<String, Value>;

/// Defaults a HorizontalPodAutoscaler of autoscaling/`version` (`v1` or `v2`).
pub(super) fn horizontal_pod_autoscaler(version: &str, hpa: &mut Object, f: &Features) -> bool {
    if version != "v1" && version != "v2" {
        return false;
    }
    let Some(spec) = value_struct(hpa, "spec") else {
        return true;
    };
    set_default(spec, "minReplicas", Unset::Nil, Value::from(1));
    if version == "v1" {
        return true;
    }
    let cpu = json!([{
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }]);
    set_default(spec, "metrics", Unset::Empty, cpu);
    if let Some(behavior) = pointer(spec, "behavior") {
        let scale_up = json!({
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        });
        let scale_down = json!({
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        });
        for (key, defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
            let rules = scaling_rules(behavior.get(key), defaults, f);
            if behavior.get(key) != Some(&rules) {
                behavior.insert(key.into(), rules);
                wrote();
            }
        }
    }
    true
}

/// `copyHPAScalingRules`: a fresh copy of the default rules, with each field the object sets.
fn scaling_rules(set: Option<&Value>, defaults: Value, f: &Features) -> Value {
    let Value::Object(mut rules) = defaults else {
        return defaults;
    };
    if let Some(Value::Object(set)) = set {
        let tolerance = f.hpa_scaling_tolerance.then_some("tolerance");
        for key in ["selectPolicy", "stabilizationWindowSeconds", "policies"]
            .into_iter()
            .chain(tolerance)
        {
            if let Some(value) = set.get(key).filter(|v| !v.is_null()) {
                rules.insert(key.into(), value.clone());
            }
        }
    }
    Value::Object(rules)
}

/// Defaults a networking/v1 object of `kind`; false when the kind has no defaulting.
pub(super) fn networking(kind: &str, object: &mut Object) -> bool {
    match kind {
        "NetworkPolicy" => {
            let Some(spec) = value_struct(object, "spec") else {
                return true;
            };
            if Unset::Empty.holds(spec.get("policyTypes")) {
                let mut types = vec![Value::from("Ingress")];
                if !Unset::Empty.holds(spec.get("egress")) {
                    types.push(Value::from("Egress"));
                }
                spec.insert("policyTypes".into(), Value::Array(types));
                wrote();
            }
            for direction in ["ingress", "egress"] {
                for rule in elements(spec, direction) {
                    for port in elements(rule, "ports") {
                        set_default(port, "protocol", Unset::Nil, Value::from("TCP"));
                    }
                }
            }
        }
        "IngressClass" => {
            if let Some(parameters) = pointer(object, "spec").and_then(|s| pointer(s, "parameters"))
            {
                set_default(parameters, "scope", Unset::Nil, Value::from("Cluster"));
            }
        }
        _ => return false,
    }
    true
}

/// Defaults a discovery/v1 EndpointSlice.
pub(super) fn endpoint_slice(slice: &mut Object) {
    for port in elements(slice, "ports") {
        apply(
            port,
            &[
                field("name", Unset::Nil, Lit::Str("")),
                field("protocol", Unset::Nil, Lit::Str("TCP")),
            ],
        );
    }
}

/// Defaults a scheduling/v1 PriorityClass.
pub(super) fn priority_class(class: &mut Object) {
    set_default(
        class,
        "preemptionPolicy",
        Unset::Nil,
        Value::from("PreemptLowerPriority"),
    );
}

/// Defaults an rbac.authorization.k8s.io/v1 RoleBinding or ClusterRoleBinding; false for the
/// other kinds.
pub(super) fn rbac(kind: &str, binding: &mut Object) -> bool {
    if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
        return false;
    }
    const GROUP: &str = "rbac.authorization.k8s.io";
    if let Some(role_ref) = value_struct(binding, "roleRef") {
        set_default(role_ref, "apiGroup", Unset::Empty, Value::from(GROUP));
    }
    for subject in elements(binding, "subjects") {
        let group = match subject.get("kind").and_then(Value::as_str) {
            Some("ServiceAccount") => "",
            Some("User" | "Group") => GROUP,
            _ => continue,
        };
        set_default(subject, "apiGroup", Unset::Empty, Value::from(group));
    }
    true
}

/// Defaults a storage.k8s.io/v1 StorageClass or CSIDriver; false for the other kinds.
pub(super) fn storage(kind: &str, object: &mut Object) -> bool {
    match kind {
        "StorageClass" => apply(
            object,
            &[
                field("reclaimPolicy", Unset::Nil, Lit::Str("Delete")),
                field("volumeBindingMode", Unset::Nil, Lit::Str("Immediate")),
            ],
        ),
        "CSIDriver" => {
            let Some(spec) = value_struct(object, "spec") else {
                return true;
            };
            apply(
                spec,
                &[
                    field("attachRequired", Unset::Nil, Lit::Bool(true)),
                    field("podInfoOnMount", Unset::Nil, Lit::Bool(false)),
                    field("storageCapacity", Unset::Nil, Lit::Bool(false)),
                    field(
                        "fsGroupPolicy",
                        Unset::Nil,
                        Lit::Str("ReadWriteOnceWithFSType"),
                    ),
                ],
            );
            set_default(
                spec,
                "volumeLifecycleModes",
                Unset::Empty,
                json!(["Persistent"]),
            );
            apply(
                spec,
                &[
                    field("requiresRepublish", Unset::Nil, Lit::Bool(false)),
                    field("seLinuxMount", Unset::Nil, Lit::Bool(false)),
                ],
            );
        }
        _ => return false,
    }
    true
}

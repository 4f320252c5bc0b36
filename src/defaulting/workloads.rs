//! apps/v1 and batch/v1: `pkg/apis/{apps,batch}/v1/defaults.go`, then the pod template's defaults.

use serde_json::{Map, Value};

use super::core::{persistent_volume_claim, pod_template_spec, template_labels};
use super::features::Features;
use super::go::{
    FieldDefault, Lit, Unset, apply, elements, field, non_nil, pointer, pointer_or_new,
    set_default, string_at, value_struct, wrote,
};

type Object = Map<String, Value>;

const REPLICAS: FieldDefault = field("replicas", Unset::Nil, Lit::Int(1));
const REVISION_HISTORY_LIMIT: FieldDefault =
    field("revisionHistoryLimit", Unset::Nil, Lit::Int(10));
const ROLLING_UPDATE: &str = "RollingUpdate";

/// Defaults an apps/v1 object of `kind`; false when the kind has no defaulting.
pub(super) fn apps(kind: &str, object: &mut Object, f: &Features) -> bool {
    let spec_defaults: fn(&mut Object, &Features) = match kind {
        "Deployment" => |spec, _| deployment(spec),
        "DaemonSet" => |spec, _| daemon_set(spec),
        "StatefulSet" => stateful_set,
        "ReplicaSet" => |spec, _| apply(spec, &[REPLICAS]),
        _ => return false,
    };
    let Some(spec) = value_struct(object, "spec") else {
        return true;
    };
    spec_defaults(spec, f);
    if let Some(template) = value_struct(spec, "template") {
        pod_template_spec(template, f);
    }
    if kind == "StatefulSet" {
        for claim in elements(spec, "volumeClaimTemplates") {
            persistent_volume_claim(claim);
        }
    }
    true
}

/// Makes `strategy.type` default to `RollingUpdate` and, when it is that, defaults the
/// `rollingUpdate` fields in `table` (creating `rollingUpdate` if nil).
fn rolling_update_strategy(spec: &mut Object, key: &str, table: &[FieldDefault]) {
    let Some(strategy) = value_struct(spec, key) else {
        return;
    };
    set_default(
        strategy,
        "type",
        Unset::EmptyString,
        Value::from(ROLLING_UPDATE),
    );
    if string_at(strategy, "type") == ROLLING_UPDATE
        && let Some(rolling) = pointer_or_new(strategy, "rollingUpdate")
    {
        apply(rolling, table);
    }
}

fn deployment(spec: &mut Object) {
    apply(spec, &[REPLICAS]);
    rolling_update_strategy(
        spec,
        "strategy",
        &[
            field("maxUnavailable", Unset::Nil, Lit::Str("25%")),
            field("maxSurge", Unset::Nil, Lit::Str("25%")),
        ],
    );
    apply(
        spec,
        &[
            REVISION_HISTORY_LIMIT,
            field("progressDeadlineSeconds", Unset::Nil, Lit::Int(600)),
        ],
    );
}

fn daemon_set(spec: &mut Object) {
    rolling_update_strategy(
        spec,
        "updateStrategy",
        &[
            field("maxUnavailable", Unset::Nil, Lit::Int(1)),
            field("maxSurge", Unset::Nil, Lit::Int(0)),
        ],
    );
    apply(spec, &[REVISION_HISTORY_LIMIT]);
}

fn stateful_set(spec: &mut Object, f: &Features) {
    set_default(
        spec,
        "podManagementPolicy",
        Unset::Empty,
        Value::from("OrderedReady"),
    );
    if let Some(strategy) = value_struct(spec, "updateStrategy") {
        if Unset::EmptyString.holds(strategy.get("type")) {
            strategy.insert("type".into(), Value::from(ROLLING_UPDATE));
            wrote();
            set_default(
                strategy,
                "rollingUpdate",
                Unset::Nil,
                Value::Object(Map::new()),
            );
        }
        if string_at(strategy, "type") == ROLLING_UPDATE
            && let Some(rolling) = pointer(strategy, "rollingUpdate")
        {
            set_default(rolling, "partition", Unset::Nil, Value::from(0));
            if f.max_unavailable_stateful_set {
                set_default(rolling, "maxUnavailable", Unset::Nil, Value::from(1));
            }
        }
    }
    if let Some(policy) = pointer_or_new(spec, "persistentVolumeClaimRetentionPolicy") {
        for key in ["whenDeleted", "whenScaled"] {
            set_default(policy, key, Unset::Empty, Value::from("Retain"));
        }
    }
    apply(spec, &[REPLICAS, REVISION_HISTORY_LIMIT]);
}

/// Defaults a batch/v1 object of `kind`; false when the kind has no defaulting.
pub(super) fn batch(kind: &str, object: &mut Object, f: &Features) -> bool {
    match kind {
        "Job" => job(object, f),
        "CronJob" => cron_job(object, f),
        _ => return false,
    }
    true
}

fn job(object: &mut Object, f: &Features) {
    let Some(spec) = value_struct(object, "spec") else {
        return;
    };
    if !non_nil(spec, "completions") && !non_nil(spec, "parallelism") {
        spec.insert("completions".into(), Value::from(1));
        wrote();
    }
    set_default(spec, "parallelism", Unset::Nil, Value::from(1));
    let backoff = if non_nil(spec, "backoffLimitPerIndex") {
        i64::from(i32::MAX)
    } else {
        6
    };
    set_default(spec, "backoffLimit", Unset::Nil, Value::from(backoff));
    let template_labels = template_labels(spec);
    set_default(
        spec,
        "completionMode",
        Unset::Nil,
        Value::from("NonIndexed"),
    );
    set_default(spec, "suspend", Unset::Nil, Value::Bool(false));
    let has_pod_failure_policy = if let Some(policy) = pointer(spec, "podFailurePolicy") {
        for rule in elements(policy, "rules") {
            for pattern in elements(rule, "onPodConditions") {
                set_default(pattern, "status", Unset::EmptyString, Value::from("True"));
            }
        }
        true
    } else {
        false
    };
    if f.job_pod_replacement_policy {
        let policy = if has_pod_failure_policy {
            "Failed"
        } else {
            "TerminatingOrFailed"
        };
        set_default(
            spec,
            "podReplacementPolicy",
            Unset::Nil,
            Value::from(policy),
        );
    }
    if f.job_manual_selector {
        set_default(spec, "manualSelector", Unset::Nil, Value::Bool(false));
    }
    if let Some(template) = value_struct(spec, "template") {
        pod_template_spec(template, f);
    }
    if let Some(labels) = template_labels
        && let Some(metadata) = value_struct(object, "metadata")
    {
        set_default(metadata, "labels", Unset::Empty, labels);
    }
}

fn cron_job(object: &mut Object, f: &Features) {
    let Some(spec) = value_struct(object, "spec") else {
        return;
    };
    apply(
        spec,
        &[
            field("concurrencyPolicy", Unset::EmptyString, Lit::Str("Allow")),
            field("suspend", Unset::Nil, Lit::Bool(false)),
            field("successfulJobsHistoryLimit", Unset::Nil, Lit::Int(3)),
            field("failedJobsHistoryLimit", Unset::Nil, Lit::Int(1)),
        ],
    );
    let template = value_struct(spec, "jobTemplate")
        .and_then(|t| value_struct(t, "spec"))
        .and_then(|s| value_struct(s, "template"));
    if let Some(template) = template {
        pod_template_spec(template, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_daemon_set_gets_a_rolling_update() {
        let mut spec = Map::new();
        daemon_set(&mut spec);
        assert_eq!(
            spec["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 1, "maxSurge": 0})
        );
    }
}

//! The fields a registry strategy drops when the feature gate that guards them is off
//! (`dropDisabledFields` of `pkg/api/pod`, called by `DropDisabledPodFields` and
//! `DropDisabledTemplateFields`; `DropDisabledFields` of `pkg/api/persistentvolumeclaim`;
//! `dropServiceDisabledFields`), with each release's default feature gates ([`gates`]).
//!
//! A field is dropped only when the old object (on an update) does not use it already, as
//! upstream keeps what is stored. Each rule is data: the gate, the fields it drops (paths in the
//! spec: `*` is every item of a list, `CONTAINERS` every container, init container and ephemeral
//! container) and the fields whose use in the old object keeps them.

use serde_json::{Map, Value};

use super::gates;
use crate::KubeVersion;
use crate::api::meta::short_eq;

/// What a rule does to the fields it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Removes them (Go sets the pointer, slice or map to nil).
    Drop,
    /// `dropContainerStopSignals`: removes `lifecycle.stopSignal`, and the `lifecycle` it leaves
    /// empty.
    StopSignal,
    /// `dropPodLifecycleSleepAction`: removes the `sleep` of `preStop` and `postStart`, the
    /// handler it leaves without an action, and a `lifecycle` left without `preStop`,
    /// `postStart` and `stopSignal`.
    Sleep,
    /// `dropImageVolumes`: removes the volumes with an `image` source and the mounts of them.
    ImageVolumes,
    /// `dropDisabledProcMountField`: a `procMount` that is set becomes `Default`.
    ProcMountDefault,
}

/// One `dropDisabled*` rule.
struct Rule {
    gate: &'static str,
    action: Action,
    /// The fields dropped.
    fields: &'static [&'static str],
    /// The fields whose use in the old object keeps the new object's (empty: `fields`).
    in_use: &'static [&'static str],
    /// The value an `in_use` field must have to count (`None`: any value but null or an empty
    /// list).
    in_use_value: Option<&'static str>,
    /// Whether an empty map in an `in_use` field does not count (a map checked by `len`, not a
    /// pointer to a struct checked against nil).
    in_use_maps: bool,
    /// Whether only `PrepareForCreate` drops the fields.
    create_only: bool,
}

const fn rule(gate: &'static str, action: Action, fields: &'static [&'static str]) -> Rule {
    Rule {
        gate,
        action,
        fields,
        in_use: &[],
        in_use_value: None,
        in_use_maps: false,
        create_only: false,
    }
}

const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];

/// `dropDisabledFields` of a PodSpec, in upstream's order (1.33).
const POD_SPEC: &[Rule] = &[
    rule("UserNamespacesSupport", Action::Drop, &["hostUsers"]),
    rule(
        "SupplementalGroupsPolicy",
        Action::Drop,
        &["securityContext.supplementalGroupsPolicy"],
    ),
    Rule {
        in_use: &["resources.requests", "resources.limits"],
        in_use_maps: true,
        ..rule("PodLevelResources", Action::Drop, &["resources"])
    },
    Rule {
        // In use only with a value other than the default.
        in_use_value: Some("Unmasked"),
        ..rule(
            "ProcMountType",
            Action::ProcMountDefault,
            &["CONTAINERS.*.securityContext.procMount"],
        )
    },
    rule(
        "NodeInclusionPolicyInPodTopologySpread",
        Action::Drop,
        &["topologySpreadConstraints.*.nodeTaintsPolicy"],
    ),
    rule(
        "NodeInclusionPolicyInPodTopologySpread",
        Action::Drop,
        &["topologySpreadConstraints.*.nodeAffinityPolicy"],
    ),
    rule(
        "MatchLabelKeysInPodTopologySpread",
        Action::Drop,
        &["topologySpreadConstraints.*.matchLabelKeys"],
    ),
    rule(
        "MatchLabelKeysInPodAffinity",
        Action::Drop,
        &[
            "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.*.matchLabelKeys",
            "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.*.mismatchLabelKeys",
            "affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.*.podAffinityTerm.matchLabelKeys",
            "affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.*.podAffinityTerm.mismatchLabelKeys",
            "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.*.matchLabelKeys",
            "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution.*.mismatchLabelKeys",
            "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.*.podAffinityTerm.matchLabelKeys",
            "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.*.podAffinityTerm.mismatchLabelKeys",
        ],
    ),
    Rule {
        in_use: &["resourceClaims"],
        ..rule(
            "DynamicResourceAllocation",
            Action::Drop,
            &["CONTAINERS.*.resources.claims", "resourceClaims"],
        )
    },
    rule(
        "ClusterTrustBundleProjection",
        Action::Drop,
        &["volumes.*.projected.sources.*.clusterTrustBundle"],
    ),
    Rule {
        in_use: &["containers.*.resizePolicy", "initContainers.*.resizePolicy"],
        ..rule(
            "InPlacePodVerticalScaling",
            Action::Drop,
            &["CONTAINERS.*.resizePolicy"],
        )
    },
    Rule {
        in_use_value: Some("Always"),
        ..rule(
            "SidecarContainers",
            Action::Drop,
            &["initContainers.*.restartPolicy"],
        )
    },
    rule(
        "RecursiveReadOnlyMounts",
        Action::Drop,
        &["CONTAINERS.*.volumeMounts.*.recursiveReadOnly"],
    ),
    rule(
        "PodLifecycleSleepAction",
        Action::Sleep,
        &[
            "CONTAINERS.*.lifecycle.preStop.sleep",
            "CONTAINERS.*.lifecycle.postStart.sleep",
        ],
    ),
    rule("ImageVolume", Action::ImageVolumes, &["volumes.*.image"]),
    rule(
        "SELinuxChangePolicy",
        Action::Drop,
        &["securityContext.seLinuxChangePolicy"],
    ),
    rule(
        "ContainerStopSignals",
        Action::StopSignal,
        &["CONTAINERS.*.lifecycle.stopSignal"],
    ),
];

/// `pvcutil.DropDisabledFields` of a PersistentVolumeClaimSpec.
const PVC_SPEC: &[Rule] = &[rule(
    "VolumeAttributesClass",
    Action::Drop,
    &["volumeAttributesClassName"],
)];

/// `dropServiceDisabledFields` of a ServiceSpec.
const SERVICE_SPEC: &[Rule] = &[rule(
    "ServiceTrafficDistribution",
    Action::Drop,
    &["trafficDistribution"],
)];

/// `dropStatefulSetDisabledFields` of a StatefulSetSpec.
const STATEFUL_SET_SPEC: &[Rule] = &[
    rule(
        "StatefulSetAutoDeletePVC",
        Action::Drop,
        &["persistentVolumeClaimRetentionPolicy"],
    ),
    rule(
        "MaxUnavailableStatefulSet",
        Action::Drop,
        &["updateStrategy.rollingUpdate.maxUnavailable"],
    ),
    rule("StatefulSetStartOrdinal", Action::Drop, &["ordinals"]),
];

/// `jobStrategy`'s drops from a JobSpec (`PrepareForCreate`; `PrepareForUpdate` keeps what the
/// old Job has, and never drops `managedBy`). The `FailIndex` rules of a pod failure policy that
/// `JobBackoffLimitPerIndex` also drops are not modelled.
const JOB_SPEC: &[Rule] = &[
    Rule {
        create_only: true,
        ..rule("JobManagedBy", Action::Drop, &["managedBy"])
    },
    rule("JobSuccessPolicy", Action::Drop, &["successPolicy"]),
    rule(
        "JobBackoffLimitPerIndex",
        Action::Drop,
        &["backoffLimitPerIndex"],
    ),
    rule(
        "JobBackoffLimitPerIndex",
        Action::Drop,
        &["maxFailedIndexes"],
    ),
    rule(
        "JobPodReplacementPolicy",
        Action::Drop,
        &["podReplacementPolicy"],
    ),
];

/// Where a resource's strategy drops disabled fields: the object's top-level member that holds
/// the spec, the path of the spec in it, and the rules.
type Place = (
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [Rule],
);

const TEMPLATE: &[&str] = &["template", "spec"];

const RESOURCES: &[Place] = &[
    ("", "pods", "spec", &[], POD_SPEC),
    ("", "podtemplates", "template", &["spec"], POD_SPEC),
    ("", "replicationcontrollers", "spec", TEMPLATE, POD_SPEC),
    ("apps", "deployments", "spec", TEMPLATE, POD_SPEC),
    ("apps", "replicasets", "spec", TEMPLATE, POD_SPEC),
    ("apps", "statefulsets", "spec", &[], STATEFUL_SET_SPEC),
    ("apps", "statefulsets", "spec", TEMPLATE, POD_SPEC),
    ("apps", "daemonsets", "spec", TEMPLATE, POD_SPEC),
    ("batch", "jobs", "spec", &[], JOB_SPEC),
    ("batch", "jobs", "spec", TEMPLATE, POD_SPEC),
    (
        "batch",
        "cronjobs",
        "spec",
        &["jobTemplate", "spec", "template", "spec"],
        POD_SPEC,
    ),
    ("", "persistentvolumeclaims", "spec", &[], PVC_SPEC),
    ("", "services", "spec", &[], SERVICE_SPEC),
];

/// Whether the release's default feature gates turn `gate` on; `None` for a release whose
/// defaults are not modelled (after 1.33: nothing is dropped).
fn enabled(release: KubeVersion, gate: &str) -> Option<bool> {
    let column = gates::RELEASES.iter().position(|m| *m == release.minor())?;
    let flags = gates::GATES
        .binary_search_by(|(name, _)| (*name).cmp(gate))
        .ok()
        .map(|i| gates::GATES[i].1.as_bytes()[column]);
    // A gate the release does not list guards nothing of it (the field is not in its types).
    Some(matches!(flags, Some(b'+') | None))
}

/// Whether `gate` is on by default in `release`, for what a strategy does (rather than drops)
/// when it is: the gates asked about are on in 1.33 and later releases, whose defaults are not
/// modelled.
pub(super) fn gate_on(release: KubeVersion, gate: &str) -> bool {
    enabled(release, gate).unwrap_or(true)
}

/// Whether `gate` is off by default in `release` (never for a release whose defaults are not
/// modelled, as [`gate_on`] and the drops).
pub(super) fn gate_off(release: KubeVersion, gate: &str) -> bool {
    enabled(release, gate) == Some(false)
}

/// The top-level member of `resource`'s objects that holds what its strategy may drop.
pub(crate) fn member(group: &str, resource: &str) -> Option<&'static str> {
    places(group, resource).next().map(|p| p.2)
}

/// The places of `resource` (a StatefulSet's and a Job's spec, then their pod template), all in
/// the same member.
fn places<'a>(group: &'a str, resource: &'a str) -> impl Iterator<Item = &'static Place> + 'a {
    RESOURCES
        .iter()
        .filter(move |(g, r, _, _, _)| short_eq(g, group) && short_eq(r, resource))
}

/// The rules of `resource` that drop in `release`, given the old object's [`member`]: gate off
/// and the fields not in use in the old object.
fn active<'a>(
    release: KubeVersion,
    place: &'a Place,
    old_member: Option<&'a Value>,
) -> impl Iterator<Item = &'static Rule> + 'a {
    let old_spec = old_member.and_then(|o| place.3.iter().try_fold(o, |v, k| v.get(*k)));
    place.4.iter().filter(move |rule| {
        if enabled(release, rule.gate) != Some(false) || (rule.create_only && old_member.is_some())
        {
            return false;
        }
        let in_use = if rule.in_use.is_empty() {
            rule.fields
        } else {
            rule.in_use
        };
        !old_spec.is_some_and(|old| in_use.iter().any(|p| used(old, &split(p), rule)))
    })
}

/// Whether [`drop_disabled_fields`] would change `member` (read only: a create's member is
/// copied only when it would).
pub(crate) fn would_drop(
    release: KubeVersion,
    group: &str,
    resource: &str,
    member: &Value,
    old_member: Option<&Value>,
) -> bool {
    places(group, resource).any(|place| {
        let Some(spec) = place.3.iter().try_fold(member, |v, k| v.get(*k)) else {
            return false;
        };
        active(release, place, old_member).any(|rule| {
            rule.fields.iter().flat_map(|p| split(p)).any(|path| {
                let mut found = false;
                visit(spec, &path, &mut |v| {
                    found |= match rule.action {
                        Action::ProcMountDefault => !v.is_null() && v.as_str() != Some("Default"),
                        _ => !v.is_null(),
                    };
                });
                found
            })
        })
    })
}

/// Drops from `member` (the object's [`member`], as validation will see it) the fields its
/// resource's strategy drops in `release`, keeping what the old object's member already uses.
/// Returns whether it changed.
pub(crate) fn drop_disabled_fields(
    release: KubeVersion,
    group: &str,
    resource: &str,
    member: &mut Value,
    old_member: Option<&Value>,
) -> bool {
    let mut changed = false;
    for place in places(group, resource) {
        let Some(spec) = place.3.iter().try_fold(&mut *member, |v, k| v.get_mut(*k)) else {
            continue;
        };
        for rule in active(release, place, old_member) {
            changed |= apply(rule, spec);
        }
    }
    changed
}

/// The segments of a path, `CONTAINERS` expanded into the three lists of containers.
fn split(path: &str) -> Vec<Vec<&str>> {
    match path.strip_prefix("CONTAINERS.") {
        Some(rest) => CONTAINERS
            .iter()
            .map(|c| std::iter::once(*c).chain(rest.split('.')).collect())
            .collect(),
        None => vec![path.split('.').collect()],
    }
}

/// Whether a value counts as a use: not null, not an empty list, and, for a map counted by its
/// length, not an empty map (a pointer to an empty struct is a use).
fn set(v: &Value, maps: bool) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !maps || !m.is_empty(),
        _ => true,
    }
}

/// Whether any of `paths` is in use in `spec` as `rule` counts a use.
fn used(spec: &Value, paths: &[Vec<&str>], rule: &Rule) -> bool {
    paths.iter().any(|path| {
        let mut found = false;
        visit(spec, path, &mut |v| {
            found |= match rule.in_use_value {
                Some(want) => v.as_str() == Some(want),
                None => set(v, rule.in_use_maps),
            };
        });
        found
    })
}

/// Calls `f` with every value at `path` in `v`.
fn visit<'v>(v: &'v Value, path: &[&str], f: &mut dyn FnMut(&'v Value)) {
    match path.split_first() {
        None => f(v),
        Some((&"*", rest)) => {
            for item in v.as_array().into_iter().flatten() {
                visit(item, rest, f);
            }
        }
        Some((key, rest)) => {
            if let Some(next) = v.get(*key) {
                visit(next, rest, f);
            }
        }
    }
}

/// Calls `f` with every map that holds the last segment of `path`, and that segment.
fn visit_parents(v: &mut Value, path: &[&str], f: &mut dyn FnMut(&mut Map<String, Value>, &str)) {
    match path {
        [] => {}
        [last] => {
            if let Value::Object(m) = v {
                f(m, last);
            }
        }
        ["*", rest @ ..] => {
            if let Value::Array(items) = v {
                for item in items {
                    visit_parents(item, rest, f);
                }
            }
        }
        [key, rest @ ..] => {
            if let Some(next) = v.get_mut(*key) {
                visit_parents(next, rest, f);
            }
        }
    }
}

/// What one rule drops from `spec`; whether it changed anything.
fn apply(rule: &Rule, spec: &mut Value) -> bool {
    let mut changed = false;
    match rule.action {
        Action::Drop => {
            for path in rule.fields.iter().flat_map(|p| split(p)) {
                visit_parents(spec, &path, &mut |m, k| {
                    changed |= m.remove(k).is_some();
                });
            }
        }
        Action::ProcMountDefault => {
            for path in rule.fields.iter().flat_map(|p| split(p)) {
                visit_parents(spec, &path, &mut |m, k| {
                    if let Some(v) = m.get_mut(k)
                        && !v.is_null()
                        && v.as_str() != Some("Default")
                    {
                        *v = Value::from("Default");
                        changed = true;
                    }
                });
            }
        }
        Action::StopSignal | Action::Sleep => {
            for list in CONTAINERS {
                let Some(Value::Array(containers)) = spec.get_mut(list) else {
                    continue;
                };
                for container in containers {
                    changed |= prune_lifecycle(container, rule.action);
                }
            }
        }
        Action::ImageVolumes => changed = drop_image_volumes(spec),
    }
    changed
}

/// The lifecycle part of [`Action::StopSignal`] and [`Action::Sleep`] on one container.
fn prune_lifecycle(container: &mut Value, action: Action) -> bool {
    let Value::Object(c) = container else {
        return false;
    };
    let Some(Value::Object(lifecycle)) = c.get_mut("lifecycle") else {
        return false;
    };
    let mut changed = false;
    match action {
        Action::StopSignal => {
            changed = lifecycle.remove("stopSignal").is_some();
            if changed && lifecycle.values().all(|v| v.is_null()) {
                c.remove("lifecycle");
            }
        }
        _ => {
            for hook in ["preStop", "postStart"] {
                let Some(Value::Object(handler)) = lifecycle.get_mut(hook) else {
                    continue;
                };
                if handler.remove("sleep").is_some() {
                    changed = true;
                    let acts = ["exec", "httpGet", "tcpSocket"];
                    if !acts
                        .iter()
                        .any(|a| handler.get(*a).is_some_and(|v| !v.is_null()))
                    {
                        lifecycle.remove(hook);
                    }
                }
            }
            let keeps = ["preStop", "postStart", "stopSignal"];
            if !keeps
                .iter()
                .any(|k| lifecycle.get(*k).is_some_and(|v| !v.is_null()))
            {
                c.remove("lifecycle");
            }
        }
    }
    changed
}

/// [`Action::ImageVolumes`]: the volumes with an image source go, and every mount of them.
fn drop_image_volumes(spec: &mut Value) -> bool {
    let Some(Value::Array(volumes)) = spec.get_mut("volumes") else {
        return false;
    };
    let mut names = Vec::new();
    volumes.retain(|v| {
        let image = v.get("image").is_some_and(|i| !i.is_null());
        if image {
            names.push(
                v.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            );
        }
        !image
    });
    if names.is_empty() {
        return false;
    }
    if volumes.is_empty()
        && let Value::Object(s) = spec
    {
        s.remove("volumes");
    }
    for list in CONTAINERS {
        let Some(Value::Array(containers)) = spec.get_mut(list) else {
            continue;
        };
        for c in containers {
            let Value::Object(c) = c else {
                continue;
            };
            if let Some(Value::Array(mounts)) = c.get_mut("volumeMounts") {
                mounts.retain(|m| {
                    let name = m.get("name").and_then(Value::as_str).unwrap_or("");
                    !names.iter().any(|n| n == name)
                });
                if mounts.is_empty() {
                    c.remove("volumeMounts");
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Upstream's tables (`tests/fixtures/strategies/drop-disabled.json`, see its `about`).
    const TABLES: &str = include_str!("../../../tests/fixtures/strategies/drop-disabled.json");

    /// A resource and how it holds a spec.
    type Wrap = (&'static str, &'static str, fn(Value) -> Value);

    /// Runs the drop of `resource` at `minor` on `new` with `old`, the spec wrapped as each
    /// resource holds it: a Pod's spec as a Pod, a Deployment's and a CronJob's template too.
    fn dropped(minor: u32, resource: &str, new: &Value, old: Option<&Value>) -> Vec<Value> {
        let release = KubeVersion::new(minor).unwrap();
        let wraps: &[Wrap] = match resource {
            "pods" => &[
                ("", "pods", |s| s),
                ("apps", "deployments", |s| json!({"template": {"spec": s}})),
                (
                    "batch",
                    "cronjobs",
                    |s| json!({"jobTemplate": {"spec": {"template": {"spec": s}}}}),
                ),
                ("", "podtemplates", |s| json!({"spec": s})),
            ],
            "persistentvolumeclaims" => &[("", "persistentvolumeclaims", |s| s)],
            "statefulsets" => &[("apps", "statefulsets", |s| s)],
            "jobs" => &[("batch", "jobs", |s| s)],
            _ => &[("", "services", |s| s)],
        };
        wraps
            .iter()
            .map(|(group, resource, wrap)| {
                let mut member = wrap(new.clone());
                let old = old.map(|o| wrap(o.clone()));
                let would = would_drop(release, group, resource, &member, old.as_ref());
                let changed =
                    drop_disabled_fields(release, group, resource, &mut member, old.as_ref());
                assert_eq!(
                    would, changed,
                    "would_drop agrees with the drop: {resource}"
                );
                // Unwrapped again, to compare with the table's spec.
                let place = places(group, resource).last().unwrap();
                place
                    .3
                    .iter()
                    .try_fold(&member, |v, k| v.get(*k))
                    .cloned()
                    .unwrap_or(member.clone())
            })
            .collect()
    }

    #[test]
    fn upstream_drop_disabled_tables_hold_at_each_release() {
        let tables: Value = crate::json::from_str(TABLES).unwrap();
        let mut checked = 0;
        for gate in tables["gates"].as_array().unwrap() {
            let test = gate["test"].as_str().unwrap();
            let resource = gate["resource"].as_str().unwrap();
            let (with, without, gone) = (&gate["with"], &gate["without"], &gate["dropped"]);
            let mut releases = vec![(gate["off"].as_u64().unwrap() as u32, false)];
            if let Some(on) = gate["on"].as_u64() {
                releases.push((on as u32, true));
            }
            // The gate's default is what the table says, in the generated table.
            let name = gate["gate"].as_str().unwrap();
            for &(minor, on) in &releases {
                assert_eq!(
                    enabled(KubeVersion::new(minor).unwrap(), name),
                    Some(on),
                    "{name} in 1.{minor}"
                );
            }
            for &(minor, on) in &releases {
                for old in [None, Some(with), Some(without)] {
                    for new in [with, without] {
                        let keep = on
                            || old == Some(with)
                            || (gate["createOnly"] == true && old.is_some());
                        let want = if new == with && !keep { gone } else { new };
                        for got in dropped(minor, resource, new, old) {
                            assert_eq!(&got, want, "{test} at 1.{minor}, old {old:?}, new {new}");
                            checked += 1;
                        }
                    }
                }
                for case in gate["cases"].as_array().into_iter().flatten() {
                    if case["enabled"] != on {
                        continue;
                    }
                    let old = Some(&case["old"]).filter(|o| !o.is_null());
                    for got in dropped(minor, resource, &case["new"], old) {
                        assert_eq!(got, case["expected"], "{test} at 1.{minor}: {case}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 300, "{checked}");
    }

    /// Releases after the newest whose default gates are modelled drop nothing.
    #[test]
    fn releases_without_modelled_gates_drop_nothing() {
        let spec = json!({"resources": {"limits": {"cpu": "1"}}});
        let release = KubeVersion::new(KubeVersion::NEWEST.minor()).unwrap();
        let mut member = spec.clone();
        assert!(!drop_disabled_fields(
            release,
            "",
            "pods",
            &mut member,
            None
        ));
        assert_eq!(enabled(release, "PodLevelResources"), None);
    }
}

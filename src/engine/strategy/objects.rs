//! The parts of the registry strategies (and of a Service's allocator) that follow from the
//! object itself: a Pod's scheduling-gated condition, its AppArmor fields and annotations and
//! the label selectors its pod-affinity `matchLabelKeys` extend; a Job's generated selector; a
//! PersistentVolumeClaim's data sources; a Service's fields that its type no longer uses and
//! the cluster IPs and IP families its allocator fills in from what the object says.
//!
//! Each function works on a whole object (JSON as its Go type encodes it) and says whether it
//! changed it.

use serde_json::{Map, Value, json};

use super::drop;
use crate::KubeVersion;

/// What `podStrategy.PrepareForCreate` does after the status and the dropped fields:
/// `applySchedulingGatedCondition`, `mutatePodAffinity`, `applyAppArmorVersionSkew`.
pub(super) fn pod_create(release: KubeVersion, pod: &mut Value) -> bool {
    let mut changed = scheduling_gated(release, pod);
    if drop::gate_on(release, "MatchLabelKeysInPodAffinity") {
        changed |= pod_affinity_label_keys(pod);
    }
    if release.at_least(30) {
        changed |= app_armor_version_skew(pod);
    }
    changed
}

/// Whether `pod_create` may change `pod` (read without copying it).
pub(super) fn pod_create_applies(pod: &crate::engine::object::Object) -> bool {
    let spec = pod.member("spec");
    let gated = spec
        .and_then(|s| s.get("schedulingGates"))
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    let affinity = spec.and_then(|s| s.get("affinity")).is_some();
    let annotated = pod
        .member("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .is_some_and(|a| a.keys().any(|k| k.starts_with(APPARMOR_PREFIX)));
    let profiled = spec.is_some_and(|s| {
        s.get("securityContext")
            .and_then(|c| c.get("appArmorProfile"))
            .is_some()
            || containers(s).any(|c| {
                c.get("securityContext")
                    .and_then(|c| c.get("appArmorProfile"))
                    .is_some()
            })
    });
    gated || affinity || annotated || profiled
}

/// The containers of every kind in `spec` (`podutil.AllFeatureEnabledContainers`), in the
/// order `VisitContainers` visits them.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|k| spec.get(k).and_then(Value::as_array))
        .flatten()
}

/// A created Pod with scheduling gates starts with a `PodScheduled` condition that says so;
/// from 1.31 (`podutil.UpdatePodCondition`) it carries the creation time as its transition
/// time, before that none.
fn scheduling_gated(release: KubeVersion, pod: &mut Value) -> bool {
    let gated = pod["spec"]
        .get("schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if !gated {
        return false;
    }
    let time = if release.at_least(31) {
        pod["metadata"]
            .get("creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let Some(status) = pod.get_mut("status").and_then(Value::as_object_mut) else {
        return false;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conditions.as_array_mut() else {
        return false;
    };
    if list.iter().any(|c| c["type"] == "PodScheduled") {
        return false;
    }
    list.push(json!({
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": null,
        "lastTransitionTime": time,
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
    }));
    true
}

/// `mutatePodAffinity`: every pod (anti-)affinity term with a label selector gets, for each of
/// its `matchLabelKeys` the Pod has a label for, `key In (value)` appended to the selector's
/// `matchExpressions`, and `key NotIn (value)` for each of its `mismatchLabelKeys`.
fn pod_affinity_label_keys(pod: &mut Value) -> bool {
    let labels = pod["metadata"]
        .get("labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(affinity) = pod["spec"].get_mut("affinity") else {
        return false;
    };
    let mut changed = false;
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(a) = affinity.get_mut(kind) else {
            continue;
        };
        if let Some(terms) = a
            .get_mut("preferredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array_mut)
        {
            for weighted in terms {
                if let Some(term) = weighted.get_mut("podAffinityTerm") {
                    changed |= apply_label_keys(term, &labels);
                }
            }
        }
        if let Some(terms) = a
            .get_mut("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(Value::as_array_mut)
        {
            for term in terms {
                changed |= apply_label_keys(term, &labels);
            }
        }
    }
    changed
}

fn apply_label_keys(term: &mut Value, labels: &Map<String, Value>) -> bool {
    let keys = |name: &str| -> Vec<String> {
        term.get(name)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|k| k.as_str().map(String::from))
            .collect()
    };
    let (matching, mismatching) = (keys("matchLabelKeys"), keys("mismatchLabelKeys"));
    // A nil selector matches nothing and is left so.
    let Some(selector) = term.get_mut("labelSelector").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut added = Vec::new();
    for (list, operator) in [(&matching, "In"), (&mismatching, "NotIn")] {
        for key in list {
            if let Some(value) = labels.get(key) {
                added.push(json!({"key": key, "operator": operator, "values": [value]}));
            }
        }
    }
    if added.is_empty() {
        return false;
    }
    let expressions = selector
        .entry("matchExpressions")
        .or_insert_with(|| json!([]));
    if !expressions.is_array() {
        *expressions = json!([]);
    }
    if let Some(list) = expressions.as_array_mut() {
        list.extend(added);
    }
    true
}

/// The prefix of the deprecated per-container AppArmor annotations.
const APPARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `applyAppArmorVersionSkew` (from 1.30): on a Pod not for Windows, a container without its
/// AppArmor annotation gets one from its profile (or the Pod's); a container with the
/// annotation and no profile of its own gets the profile the annotation names, unless that is
/// the Pod's or the annotation names none. (The deprecation warning upstream adds then is
/// [`app_armor_warnings`].)
fn app_armor_version_skew(pod: &mut Value) -> bool {
    if pod["spec"].get("os").and_then(|o| o.get("name")) == Some(&json!("windows")) {
        return false;
    }
    let pod_profile = pod["spec"]
        .get("securityContext")
        .and_then(|c| c.get("appArmorProfile"))
        .filter(|p| !p.is_null())
        .cloned();
    let mut annotations = pod["metadata"]
        .get("annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut changed = false;
    let mut annotations_changed = false;
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        for kind in ["initContainers", "containers", "ephemeralContainers"] {
            let Some(list) = spec.get_mut(kind).and_then(Value::as_array_mut) else {
                continue;
            };
            for container in list {
                let Some(name) = container.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let key = format!("{APPARMOR_PREFIX}{name}");
                let own = container
                    .get("securityContext")
                    .and_then(|c| c.get("appArmorProfile"))
                    .filter(|p| !p.is_null())
                    .cloned();
                match annotations.get(&key) {
                    None => {
                        let value = own
                            .as_ref()
                            .or(pod_profile.as_ref())
                            .and_then(annotation_for_profile);
                        if let Some(value) = value {
                            annotations.insert(key, Value::String(value));
                            annotations_changed = true;
                        }
                    }
                    Some(annotation) if own.is_none() => {
                        let field = annotation.as_str().and_then(profile_for_annotation);
                        if let Some(field) = field.filter(|f| Some(f) != pod_profile.as_ref()) {
                            let Some(c) = container.as_object_mut() else {
                                continue;
                            };
                            let context = c.entry("securityContext").or_insert_with(|| json!({}));
                            if !context.is_object() {
                                *context = json!({});
                            }
                            context["appArmorProfile"] = field;
                            changed = true;
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    if annotations_changed && let Some(meta) = pod["metadata"].as_object_mut() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    changed || annotations_changed
}

/// The warnings `applyAppArmorVersionSkew` adds to a Pod's create (from 1.30, before the
/// strategy's `WarningsOnCreate`), from the Pod as it was before: each container with the
/// deprecated annotation and no profile of its own, unless the annotation names the Pod's
/// profile.
pub(super) fn app_armor_warnings(
    release: KubeVersion,
    pod: &(impl super::warnings::Doc + ?Sized),
) -> Vec<String> {
    let null = Value::Null;
    let spec = pod.member("spec").unwrap_or(&null);
    let os = super::warnings::get_in(spec, &["os", "name"]);
    if !release.at_least(30) || os.and_then(Value::as_str) == Some("windows") {
        return Vec::new();
    }
    // Each warning names an annotation with the prefix: none, no warnings.
    let annotations = pod.at("/metadata/annotations");
    let prefixed = |a: &Value| {
        a.as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with(APPARMOR_PREFIX)))
    };
    if !annotations.is_some_and(prefixed) {
        return Vec::new();
    }
    let profile = |v: Option<&Value>| v.filter(|p| !p.is_null()).cloned();
    let pod_profile = profile(spec.pointer("/securityContext/appArmorProfile"));
    let mut warnings = Vec::new();
    for kind in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec
            .get(kind)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(name) = container.get("name").and_then(Value::as_str) else {
                continue;
            };
            let key = format!("{APPARMOR_PREFIX}{name}");
            let Some(annotation) = annotations.and_then(|a| a.get(&key)) else {
                continue;
            };
            if profile(container.pointer("/securityContext/appArmorProfile")).is_some() {
                continue;
            }
            let field = annotation.as_str().and_then(profile_for_annotation);
            if field.is_none() || field != pod_profile {
                warnings.push(format!(
                    r#"metadata.annotations[{key}]: deprecated since v1.30; use the "appArmorProfile" field instead"#
                ));
            }
        }
    }
    warnings
}

/// `appArmorAnnotationForField`.
fn annotation_for_profile(profile: &Value) -> Option<String> {
    match profile.get("type")?.as_str()? {
        "Unconfined" => Some("unconfined".into()),
        "RuntimeDefault" => Some("runtime/default".into()),
        "Localhost" => profile
            .get("localhostProfile")?
            .as_str()
            .map(|p| format!("localhost/{p}")),
        _ => None,
    }
}

/// `apparmorFieldForAnnotation`, with what `ValidateAppArmorProfileField` refuses left out.
fn profile_for_annotation(annotation: &str) -> Option<Value> {
    match annotation {
        "unconfined" => Some(json!({"type": "Unconfined"})),
        "runtime/default" => Some(json!({"type": "RuntimeDefault"})),
        _ => {
            let profile = annotation.strip_prefix("localhost/")?;
            // Validation refuses a profile name that is blank or longer than 4095 bytes.
            (!profile.trim().is_empty() && profile.len() <= 4095)
                .then(|| json!({"type": "Localhost", "localhostProfile": profile}))
        }
    }
}

/// The labels of a Job's generated selector (`batch.LegacyJobNameLabel`, `JobNameLabel`,
/// `LegacyControllerUidLabel`, `ControllerUidLabel`).
const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];
const CONTROLLER_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];

/// `generateSelector` of a Job created without `manualSelector: true`: its pod template gets
/// the job-name and controller-uid labels it lacks (the name and the uid the store gave it),
/// and its selector the `batch.kubernetes.io/controller-uid` label.
pub(super) fn job_selector(job: &mut Value) -> bool {
    if job["spec"].get("manualSelector") == Some(&Value::Bool(true)) {
        return false;
    }
    let [name, uid] = ["name", "uid"].map(|field| {
        let value = job["metadata"].get(field).and_then(Value::as_str);
        value.unwrap_or_default().to_string()
    });
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut changed = false;
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if let Some(template) = template.as_object_mut() {
        let meta = template.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if !labels.is_object() {
                *labels = json!({});
            }
            if let Some(labels) = labels.as_object_mut() {
                for (keys, value) in [(JOB_NAME_LABELS, &name), (CONTROLLER_UID_LABELS, &uid)] {
                    for key in keys {
                        if !labels.contains_key(key) {
                            labels.insert(key.into(), Value::String(value.clone()));
                            changed = true;
                        }
                    }
                }
            }
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if !selector.is_object() {
        *selector = json!({});
    }
    let match_labels = selector
        .as_object_mut()
        .map(|s| s.entry("matchLabels").or_insert_with(|| json!({})));
    if let Some(match_labels) = match_labels {
        if !match_labels.is_object() {
            *match_labels = json!({});
        }
        if let Some(m) = match_labels.as_object_mut()
            && !m.contains_key(CONTROLLER_UID_LABELS[1])
        {
            m.insert(CONTROLLER_UID_LABELS[1].into(), Value::String(uid));
            changed = true;
        }
    }
    changed
}

/// A PersistentVolumeClaim's data sources: what `DropDisabledFields` drops of them (a
/// `dataSourceRef` without `AnyVolumeDataSource`, one to another namespace without
/// `CrossNamespaceVolumeDataSource`, unless the old claim has one), then
/// `EnforceDataSourceBackwardsCompatibility` and `NormalizeDataSources` (with
/// `AnyVolumeDataSource` on): unless the old claim had a data source or the new one has a
/// `dataSourceRef`, a `dataSource` other than a claim or a volume snapshot is dropped; then
/// whichever of `dataSource` and `dataSourceRef` is missing is copied from the other (a
/// `dataSourceRef` to another namespace is not copied).
pub(super) fn claim_data_sources(
    release: KubeVersion,
    claim: &mut Value,
    old: Option<&Value>,
) -> bool {
    let gates = DataSourceGates {
        any: drop::gate_on(release, "AnyVolumeDataSource"),
        cross_namespace: !drop::gate_off(release, "CrossNamespaceVolumeDataSource"),
    };
    claim_data_sources_gated(gates, claim, old)
}

/// The two gates [`claim_data_sources`] follows.
#[derive(Clone, Copy)]
struct DataSourceGates {
    any: bool,
    cross_namespace: bool,
}

fn claim_data_sources_gated(
    gates: DataSourceGates,
    claim: &mut Value,
    old: Option<&Value>,
) -> bool {
    let set = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    let in_use = old
        .is_some_and(|o| set(o["spec"].get("dataSource")) || set(o["spec"].get("dataSourceRef")));
    let ref_in_use = old.is_some_and(|o| set(o["spec"].get("dataSourceRef")));
    let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) else {
        return false;
    };
    let mut changed = false;
    let other_namespace = spec
        .get("dataSourceRef")
        .and_then(|r| r.get("namespace"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !ref_in_use
        && set(spec.get("dataSourceRef"))
        && (!gates.any || (!gates.cross_namespace && other_namespace))
    {
        spec.remove("dataSourceRef");
        changed = true;
    }
    if !in_use && !set(spec.get("dataSourceRef")) && set(spec.get("dataSource")) {
        let source = &spec["dataSource"];
        let group = source.get("apiGroup").and_then(Value::as_str).unwrap_or("");
        let kind = source.get("kind").and_then(Value::as_str).unwrap_or("");
        let known = (kind == "PersistentVolumeClaim" && group.is_empty())
            || (kind == "VolumeSnapshot" && group == "snapshot.storage.k8s.io");
        if !known {
            spec.remove("dataSource");
            changed = true;
        }
    }
    if !gates.any {
        return changed;
    }
    let copy = |from: &Value| {
        let mut to = Map::new();
        if let Some(group) = from.get("apiGroup").filter(|g| !g.is_null()) {
            to.insert("apiGroup".into(), group.clone());
        }
        for field in ["kind", "name"] {
            to.insert(field.into(), from.get(field).cloned().unwrap_or(json!("")));
        }
        Value::Object(to)
    };
    match (set(spec.get("dataSource")), set(spec.get("dataSourceRef"))) {
        (true, false) => {
            let to = copy(&spec["dataSource"]);
            spec.insert("dataSourceRef".into(), to);
            changed = true;
        }
        (false, true) => {
            let namespaced = spec["dataSourceRef"]
                .get("namespace")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            if !namespaced {
                let to = copy(&spec["dataSourceRef"]);
                spec.insert("dataSource".into(), to);
                changed = true;
            }
        }
        _ => {}
    }
    changed
}

/// The IP family of a cluster IP (`IPv6` when it has a colon).
fn family_of(ip: &str) -> &'static str {
    if ip.contains(':') { "IPv6" } else { "IPv4" }
}

fn svc_type(svc: &Value) -> &str {
    svc["spec"]
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn needs_cluster_ip(svc: &Value) -> bool {
    svc_type(svc) != "ExternalName"
}

fn needs_node_port(svc: &Value) -> bool {
    matches!(svc_type(svc), "NodePort" | "LoadBalancer")
}

fn text<'v>(svc: &'v Value, field: &str) -> &'v str {
    svc["spec"].get(field).and_then(Value::as_str).unwrap_or("")
}

fn list(svc: &Value, field: &str) -> Vec<Value> {
    svc["spec"]
        .get(field)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn node_ports(svc: &Value) -> Vec<i64> {
    list(svc, "ports")
        .iter()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|p| *p != 0)
        .collect()
}

/// What a Service's REST does with the fields its allocator owns before the strategy
/// (`beginCreate`, `beginUpdate`: `patchAllocatedValues`, `normalizeClusterIPs`, and the IP
/// family fields `initIPFamilyFields` fills in), for a single-stack IPv4 cluster and for what
/// the object says: `clusterIPs` from `clusterIP`, an update's cluster IPs and node ports the
/// request leaves out kept from the old object, `ipFamilyPolicy` (the old one, else
/// `SingleStack`, `RequireDualStack` for a headless Service without selector) and
/// `ipFamilies` (the families of the cluster IPs, else the cluster's). What is allocated afresh
/// (a cluster IP or node port the object does not name) is not modelled.
pub(super) fn service_allocated(svc: &mut Value, old: Option<&Value>) -> bool {
    if !needs_cluster_ip(svc) || !svc["spec"].is_object() {
        return false;
    }
    let before = svc.clone();
    if let Some(old) = old {
        // patchAllocatedValues
        if needs_cluster_ip(old) {
            if text(svc, "clusterIP").is_empty() && !text(old, "clusterIP").is_empty() {
                svc["spec"]["clusterIP"] = old["spec"]["clusterIP"].clone();
            }
            if list(svc, "clusterIPs").is_empty() && !list(old, "clusterIPs").is_empty() {
                svc["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
            }
        }
        if needs_node_port(old) && needs_node_port(svc) {
            let old_ports = node_ports(old);
            let used: Vec<i64> = node_ports(svc)
                .into_iter()
                .filter(|p| old_ports.contains(p))
                .collect();
            let by_name: Vec<(String, i64)> = list(old, "ports")
                .iter()
                .map(|p| {
                    (
                        p.get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        p.get("nodePort").and_then(Value::as_i64).unwrap_or(0),
                    )
                })
                .collect();
            if let Some(ports) = svc["spec"].get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports {
                    if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                        continue;
                    }
                    let name = port.get("name").and_then(Value::as_str).unwrap_or("");
                    // The last port of that name wins, as a Go map filled in order.
                    let old_value = by_name
                        .iter()
                        .rev()
                        .find(|(n, _)| n == name)
                        .map_or(0, |(_, p)| *p);
                    if !used.contains(&old_value) && old_value != 0 {
                        port["nodePort"] = json!(old_value);
                    }
                }
            }
        }
        // normalizeClusterIPs of an update: an old client's patch without `clusterIPs`.
        if !list(old, "clusterIPs").is_empty()
            && list(svc, "clusterIPs").is_empty()
            && text(old, "clusterIP") == text(svc, "clusterIP")
        {
            svc["spec"]["clusterIPs"] = old["spec"]["clusterIPs"].clone();
        }
    } else if !text(svc, "clusterIP").is_empty() && list(svc, "clusterIPs").is_empty() {
        svc["spec"]["clusterIPs"] = json!([text(svc, "clusterIP")]);
    }
    // initIPFamilyFields
    let policy_set = svc["spec"]
        .get("ipFamilyPolicy")
        .is_some_and(|p| !p.is_null());
    if !policy_set {
        let old_policy = old
            .and_then(|o| o["spec"].get("ipFamilyPolicy"))
            .filter(|p| !p.is_null())
            .cloned();
        let headless_without_selector = text(svc, "clusterIP") == "None"
            && svc["spec"]
                .get("selector")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty);
        svc["spec"]["ipFamilyPolicy"] = old_policy.unwrap_or_else(|| {
            json!(if headless_without_selector {
                "RequireDualStack"
            } else {
                "SingleStack"
            })
        });
    }
    let mut families = list(svc, "ipFamilies");
    for (i, ip) in list(svc, "clusterIPs").iter().enumerate() {
        let Some(ip) = ip.as_str() else { break };
        if ip == "None" {
            break;
        }
        if i >= families.len() {
            families.push(json!(family_of(ip)));
        }
    }
    if families.is_empty() {
        families.push(json!("IPv4"));
    }
    let headless_without_selector = text(svc, "clusterIP") == "None"
        && svc["spec"]
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
    if headless_without_selector
        && families.len() < 2
        && svc["spec"]["ipFamilyPolicy"] != json!("SingleStack")
    {
        let other = if families[0] == json!("IPv4") {
            "IPv6"
        } else {
            "IPv4"
        };
        families.push(json!(other));
    }
    svc["spec"]["ipFamilies"] = Value::Array(families);
    *svc != before
}

/// `dropTypeDependentFields` of a Service update: what the new type no longer uses and the
/// request did not change (cluster IPs and IP families, node ports, the health check node
/// port, `allocateLoadBalancerNodePorts`, `loadBalancerClass`, `externalTrafficPolicy`) is
/// cleared, and the load balancer status of a Service that is no longer one.
pub(super) fn service_type_dependent(svc: &mut Value, old: &Value) -> bool {
    let before = svc.clone();
    let field = |s: &Value, f: &str| s["spec"].get(f).cloned().filter(|v| !v.is_null());
    if needs_cluster_ip(old) && !needs_cluster_ip(svc) {
        let same_ips = text(old, "clusterIP") == text(svc, "clusterIP")
            && list(old, "clusterIPs") == list(svc, "clusterIPs");
        let spec = &mut svc["spec"];
        if same_ips {
            spec["clusterIP"] = json!("");
            spec["clusterIPs"] = Value::Null;
        }
        if field(old, "ipFamilies") == field(&before, "ipFamilies") {
            spec["ipFamilies"] = Value::Null;
        }
        if field(old, "ipFamilyPolicy") == field(&before, "ipFamilyPolicy") {
            spec["ipFamilyPolicy"] = Value::Null;
        }
    }
    let new_ports = node_ports(svc);
    let old_ports = node_ports(old);
    if needs_node_port(old)
        && !needs_node_port(svc)
        && new_ports.iter().all(|p| old_ports.contains(p))
        && let Some(ports) = svc["spec"].get_mut("ports").and_then(Value::as_array_mut)
    {
        for port in ports {
            if let Some(p) = port.as_object_mut() {
                p.remove("nodePort");
            }
        }
    }
    let local = |s: &Value| text(s, "externalTrafficPolicy") == "Local";
    let needs_health_check = |s: &Value| svc_type(s) == "LoadBalancer" && local(s);
    if needs_health_check(old)
        && !needs_health_check(svc)
        && field(old, "healthCheckNodePort") == field(svc, "healthCheckNodePort")
    {
        svc["spec"]["healthCheckNodePort"] = Value::Null;
    }
    let balancer = |s: &Value| svc_type(s) == "LoadBalancer";
    if balancer(old) && !balancer(svc) {
        let allocate = field(svc, "allocateLoadBalancerNodePorts");
        if allocate.is_some() && allocate == field(old, "allocateLoadBalancerNodePorts") {
            svc["spec"]["allocateLoadBalancerNodePorts"] = Value::Null;
        }
        if field(old, "loadBalancerClass") == field(svc, "loadBalancerClass") {
            svc["spec"]["loadBalancerClass"] = Value::Null;
        }
    }
    let external = |s: &Value| {
        matches!(svc_type(s), "LoadBalancer" | "NodePort")
            || (svc_type(s) == "ClusterIP" && !list(s, "externalIPs").is_empty())
    };
    if external(old)
        && !external(svc)
        && text(old, "externalTrafficPolicy") == text(svc, "externalTrafficPolicy")
    {
        svc["spec"]["externalTrafficPolicy"] = Value::Null;
    }
    if !balancer(svc)
        && let Some(status) = svc.get_mut("status").and_then(Value::as_object_mut)
    {
        status.insert("loadBalancer".into(), json!({}));
    }
    // Members set to null are absent from the Go type's encoding.
    if let Some(spec) = svc["spec"].as_object_mut() {
        spec.retain(|k, v| !v.is_null() || before["spec"].get(k).is_some_and(Value::is_null));
    }
    *svc != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(minor: u32) -> KubeVersion {
        KubeVersion::new(minor).unwrap()
    }

    fn pod() -> Value {
        json!({
            "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"app": "web"}},
            "spec": {
                "schedulingGates": [{"name": "g"}],
                "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "k", "labelSelector": {}, "matchLabelKeys": ["app", "absent"], "mismatchLabelKeys": ["app"]},
                    {"topologyKey": "k", "matchLabelKeys": ["app"]}
                ]}},
                "containers": [{"name": "c", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}]
            },
            "status": {"phase": "Pending"}
        })
    }

    /// The scheduling-gated condition has no transition time before 1.31 (it was appended,
    /// not set with `UpdatePodCondition`); the affinity's label keys apply where
    /// `MatchLabelKeysInPodAffinity` is on by default (1.31 on); AppArmor's skew from 1.30.
    #[test]
    fn a_pod_create_follows_its_release() {
        let mut old = pod();
        assert!(pod_create(at(28), &mut old));
        let condition = &old["status"]["conditions"][0];
        assert_eq!(condition["reason"], "SchedulingGated");
        assert!(condition["lastTransitionTime"].is_null());
        let terms = &old["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert!(terms[0]["labelSelector"].get("matchExpressions").is_none());
        assert!(old["metadata"].get("annotations").is_none());

        let mut new = pod();
        assert!(pod_create(at(33), &mut new));
        assert_eq!(
            new["status"]["conditions"][0]["lastTransitionTime"],
            "2026-01-02T03:04:05Z"
        );
        let terms = &new["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(
            terms[0]["labelSelector"]["matchExpressions"],
            json!([
                {"key": "app", "operator": "In", "values": ["web"]},
                {"key": "app", "operator": "NotIn", "values": ["web"]}
            ])
        );
        // Without a selector the term matches nothing and stays so.
        assert!(terms[1].get("labelSelector").is_none());
        assert_eq!(
            new["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/c"],
            "unconfined"
        );
    }

    const APPARMOR_TABLE: &str =
        include_str!("../../../tests/fixtures/strategies/apparmor-version-skew.json");
    const CLAIM_TABLE: &str =
        include_str!("../../../tests/fixtures/strategies/claim-data-sources.json");
    const SERVICE_TABLE: &str =
        include_str!("../../../tests/fixtures/strategies/service-type-dependent.json");
    const AFFINITY_TABLE: &str =
        include_str!("../../../tests/fixtures/strategies/pod-affinity-label-keys.json");

    /// The `count` cases of an upstream table kept as data.
    fn cases_of(table: &str, count: usize) -> Vec<Value> {
        let table: Value = crate::json::from_str(table).expect("a table");
        let cases = table["cases"].as_array().expect("cases").clone();
        assert_eq!(cases.len(), count);
        cases
    }

    /// Upstream's `Test_mutatePodAffinity` (`tests/fixtures/strategies/
    /// pod-affinity-label-keys.json`), at 1.30 (the gate off) and 1.33 (on) through the Pod
    /// create.
    #[test]
    fn upstream_pod_affinity_label_keys_table_holds() {
        for case in cases_of(AFFINITY_TABLE, 4) {
            let name = case["name"].as_str().unwrap();
            let mut pod = case["pod"].clone();
            let release = if case["gate"] == true { at(33) } else { at(30) };
            pod_create(release, &mut pod);
            assert_eq!(pod["spec"]["affinity"], case["wantAffinity"], "{name}");
        }
    }

    /// Applies one of the tweaks of upstream's `TestDropTypeDependentFields` to a Service.
    fn tweak(svc: &mut Value, name: &str) {
        let spec = svc["spec"].as_object_mut().unwrap();
        let ports = |spec: &mut Map<String, Value>| -> Vec<Value> {
            spec["ports"].as_array().cloned().unwrap_or_default()
        };
        let node_port = |p: &Value| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0);
        let mut set = |k: &str, v: Value| {
            spec.insert(k.into(), v);
        };
        match name {
            "setTypeExternalName" => set("type", json!("ExternalName")),
            "setTypeNodePort" => set("type", json!("NodePort")),
            "setTypeClusterIP" => set("type", json!("ClusterIP")),
            "setTypeLoadBalancer" => set("type", json!("LoadBalancer")),
            "setExternalIPs" => set("externalIPs", json!(["1.1.1.1"])),
            "setExternalTrafficPolicyCluster" => set("externalTrafficPolicy", json!("Cluster")),
            "changeIPFamilyPolicy" => set("ipFamilyPolicy", json!("SingleStack")),
            "setAllocateLoadBalancerNodePortsTrue" => {
                set("allocateLoadBalancerNodePorts", json!(true))
            }
            "setAllocateLoadBalancerNodePortsFalse" => {
                set("allocateLoadBalancerNodePorts", json!(false))
            }
            "setLoadBalancerClass" => set("loadBalancerClass", json!("test-load-balancer-class")),
            "changeLoadBalancerClass" => set(
                "loadBalancerClass",
                json!("test-load-balancer-class-changed"),
            ),
            "setHCNodePort" => {
                set("externalTrafficPolicy", json!("Local"));
                set("healthCheckNodePort", json!(32000));
            }
            "changeHCNodePort" => {
                let port = spec["healthCheckNodePort"].as_i64().unwrap_or(0);
                spec.insert("healthCheckNodePort".into(), json!(port + 100));
            }
            "clearClusterIPs" => {
                spec.insert("clusterIP".into(), json!(""));
                spec.remove("clusterIPs");
            }
            "changeClusterIPs" => {
                let ip = format!("{}0", spec["clusterIP"].as_str().unwrap());
                let first = format!("{}0", spec["clusterIPs"][0].as_str().unwrap());
                spec.insert("clusterIP".into(), json!(ip));
                spec["clusterIPs"][0] = json!(first);
            }
            "changeIPFamilies" => spec["ipFamilies"][0] = spec["ipFamilies"][1].clone(),
            "clearIPFamilies"
            | "clearIPFamilyPolicy"
            | "clearExternalIPs"
            | "clearExternalTrafficPolicy"
            | "clearAllocateLoadBalancerNodePorts"
            | "clearLoadBalancerClass" => {
                let field = match name {
                    "clearIPFamilies" => "ipFamilies",
                    "clearIPFamilyPolicy" => "ipFamilyPolicy",
                    "clearExternalIPs" => "externalIPs",
                    "clearExternalTrafficPolicy" => "externalTrafficPolicy",
                    "clearAllocateLoadBalancerNodePorts" => "allocateLoadBalancerNodePorts",
                    _ => "loadBalancerClass",
                };
                spec.remove(field);
            }
            "setNodePorts" | "changeNodePorts" => {
                let mut list = ports(spec);
                for (i, p) in list.iter_mut().enumerate() {
                    let value = if name == "setNodePorts" {
                        30000 + i as i64
                    } else {
                        node_port(p) + 100
                    };
                    p["nodePort"] = json!(value);
                }
                spec.insert("ports".into(), Value::Array(list));
            }
            "addPort" => {
                let mut list = ports(spec);
                list.push(json!({"name": "new", "protocol": "TCP", "port": 0, "targetPort": 0}));
                spec.insert("ports".into(), Value::Array(list));
            }
            "delPort" => {
                let mut list = ports(spec);
                list.pop();
                spec.insert("ports".into(), Value::Array(list));
            }
            "changePort" => {
                let mut list = ports(spec);
                let port = list[0]["port"].as_i64().unwrap();
                list[0]["port"] = json!(port + 100);
                list[0]["protocol"] = json!("UDP");
                spec.insert("ports".into(), Value::Array(list));
            }
            other => panic!("no tweak {other}"),
        }
    }

    /// Upstream's `TestDropTypeDependentFields`
    /// (`tests/fixtures/strategies/service-type-dependent.json`).
    #[test]
    fn upstream_service_type_dependent_fields_table_holds() {
        let table: Value = crate::json::from_str(SERVICE_TABLE).unwrap();
        let base = &table["base"];
        let build = |tweaks: &Value| {
            let mut svc = base.clone();
            for t in tweaks.as_array().unwrap() {
                tweak(&mut svc, t.as_str().unwrap());
            }
            svc
        };
        // A zero value and an absent member alike, as Go's fields compare.
        let field = |svc: &Value, name: &str| match svc["spec"].get(name) {
            None | Some(Value::Null) => Value::Null,
            Some(v) if v == "" || v == 0 => Value::Null,
            Some(v) => v.clone(),
        };
        for case in cases_of(SERVICE_TABLE, 31) {
            let name = case["name"].as_str().unwrap();
            let old = build(&case["svc"]);
            let mut new = old.clone();
            for t in case["patch"].as_array().into_iter().flatten() {
                tweak(&mut new, t.as_str().unwrap());
            }
            service_type_dependent(&mut new, &old);
            let expect = build(&case["expect"]);
            for f in [
                "clusterIP",
                "clusterIPs",
                "ipFamilies",
                "ipFamilyPolicy",
                "healthCheckNodePort",
                "allocateLoadBalancerNodePorts",
                "loadBalancerClass",
                "externalTrafficPolicy",
            ] {
                assert_eq!(field(&new, f), field(&expect, f), "{name}: {f}");
            }
            let node_ports = |svc: &Value| -> Vec<i64> {
                svc["spec"]["ports"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0))
                    .collect()
            };
            assert_eq!(node_ports(&new), node_ports(&expect), "{name}: nodePorts");
        }
    }

    /// Upstream's `TestApplyAppArmorVersionSkew` (`tests/fixtures/strategies/
    /// apparmor-version-skew.json`): the annotations and every container's security context
    /// afterwards.
    #[test]
    fn upstream_app_armor_version_skew_table_holds() {
        for case in cases_of(APPARMOR_TABLE, 23) {
            let name = case["description"].as_str().unwrap();
            let mut pod = case["pod"].clone();
            app_armor_version_skew(&mut pod);
            let annotations = pod["metadata"]
                .get("annotations")
                .cloned()
                .unwrap_or(json!({}));
            assert_eq!(annotations, case["annotations"], "{name}");
            let spec = &pod["spec"];
            for container in containers(spec) {
                let id = container["name"].as_str().unwrap();
                let got = container
                    .get("securityContext")
                    .cloned()
                    .unwrap_or(Value::Null);
                assert_eq!(got, case["containers"][id], "{name}: {id}");
            }
        }
    }

    /// Upstream's `TestPrepareForCreate` of PersistentVolumeClaims
    /// (`tests/fixtures/strategies/claim-data-sources.json`), each gate on and off.
    #[test]
    fn upstream_claim_data_source_table_holds() {
        for case in cases_of(CLAIM_TABLE, 34) {
            let name = case["name"].as_str().unwrap();
            let mut claim = json!({"spec": {}});
            for field in ["dataSource", "dataSourceRef"] {
                if !case[field].is_null() {
                    claim["spec"][field] = case[field].clone();
                }
            }
            let gates = DataSourceGates {
                any: case["any"] == true,
                cross_namespace: case["xns"] == true,
            };
            claim_data_sources_gated(gates, &mut claim, None);
            let get = |f: &str| claim["spec"].get(f).cloned().unwrap_or(Value::Null);
            assert_eq!(get("dataSource"), case["want"], "{name}");
            assert_eq!(get("dataSourceRef"), case["wantRef"], "{name}");
        }
    }

    /// An annotation naming no valid profile, or the Pod's own profile, leaves the container's
    /// field unset; a Windows Pod is left alone.
    #[test]
    fn app_armor_annotations_become_fields_only_when_valid_and_different() {
        let key = |c: &str| format!("{APPARMOR_PREFIX}{c}");
        let mut pod = json!({
            "metadata": {"annotations": {key("a"): "localhost/", key("b"): "runtime/default", key("c"): "localhost/x"}},
            "spec": {
                "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]
            }
        });
        let mut windows = pod.clone();
        windows["spec"]["os"] = json!({"name": "windows"});
        assert!(!app_armor_version_skew(&mut windows));
        assert!(app_armor_version_skew(&mut pod));
        let containers = &pod["spec"]["containers"];
        assert!(containers[0].get("securityContext").is_none());
        assert!(containers[1].get("securityContext").is_none());
        assert_eq!(
            containers[2]["securityContext"]["appArmorProfile"],
            json!({"type": "Localhost", "localhostProfile": "x"})
        );
    }

    /// `dropTypeDependentFields`: a LoadBalancer turned ClusterIP loses what it no longer uses
    /// when the request kept it, keeps what the request changed.
    #[test]
    fn a_service_that_changes_type_loses_what_the_new_type_does_not_use() {
        let old = json!({"spec": {
            "type": "LoadBalancer", "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"],
            "ports": [{"port": 80, "nodePort": 30001}], "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 30002, "allocateLoadBalancerNodePorts": true,
            "loadBalancerClass": "example.com/lb"
        }, "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}});
        let mut new = old.clone();
        new["spec"]["type"] = json!("ClusterIP");
        assert!(service_type_dependent(&mut new, &old));
        assert_eq!(
            new,
            json!({"spec": {"type": "ClusterIP", "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1"], "ports": [{"port": 80}]},
                   "status": {"loadBalancer": {}}})
        );
        // A new node port the old Service did not have: the ports stay (validation refuses).
        let mut changed = old.clone();
        changed["spec"]["type"] = json!("ClusterIP");
        changed["spec"]["ports"][0]["nodePort"] = json!(30009);
        service_type_dependent(&mut changed, &old);
        assert_eq!(changed["spec"]["ports"][0]["nodePort"], 30009);
        // To ExternalName: the cluster IPs go too.
        let mut external = old.clone();
        external["spec"]["type"] = json!("ExternalName");
        service_type_dependent(&mut external, &old);
        assert!(external["spec"].get("clusterIPs").is_none());
        assert_eq!(external["spec"]["clusterIP"], "");
    }

    #[test]
    fn claims_data_sources_are_normalised_unless_the_old_claim_had_one() {
        let release = at(33);
        let mut namespaced =
            json!({"spec": {"dataSourceRef": {"kind": "K", "name": "n", "namespace": "other"}}});
        // CrossNamespaceVolumeDataSource is off by default: a reference to another namespace
        // is dropped, unless the old claim has one.
        assert!(claim_data_sources(release, &mut namespaced.clone(), None));
        let kept = namespaced.clone();
        assert!(!claim_data_sources(release, &mut namespaced, Some(&kept)));
        let old =
            json!({"spec": {"dataSource": {"apiGroup": "example.com", "kind": "K", "name": "n"}}});
        let mut kept = old.clone();
        assert!(claim_data_sources(release, &mut kept, Some(&old)));
        assert_eq!(
            kept["spec"]["dataSourceRef"],
            json!({"apiGroup": "example.com", "kind": "K", "name": "n"})
        );
        let mut snapshot = json!({"spec": {"dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s"}}});
        assert!(claim_data_sources(release, &mut snapshot, None));
        assert_eq!(snapshot["spec"]["dataSourceRef"]["kind"], "VolumeSnapshot");
    }
}

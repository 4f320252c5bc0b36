//! core/v1: `pkg/apis/core/v1/defaults.go` and the generated `SetObjectDefaults_<Kind>` functions
//! that walk each kind's nested structs.

use serde_json::{Map, Value};

use super::features::Features;
use super::go::{
    FieldDefault, Lit, Unset, apply, elements, field, pointer, pointer_or_new, set_default,
    string_at, value_struct, wrote,
};
use super::image::default_pull_policy;
use super::quantity::round_resource_lists;

type Object = Map<String, Value>;

const POD_SPEC: &[FieldDefault] = &[
    field("dnsPolicy", Unset::EmptyString, Lit::Str("ClusterFirst")),
    field("restartPolicy", Unset::EmptyString, Lit::Str("Always")),
    field("securityContext", Unset::Nil, Lit::EmptyObject),
    field("terminationGracePeriodSeconds", Unset::Nil, Lit::Int(30)),
    field(
        "schedulerName",
        Unset::EmptyString,
        Lit::Str("default-scheduler"),
    ),
];

const CONTAINER: &[FieldDefault] = &[
    field(
        "terminationMessagePath",
        Unset::EmptyString,
        Lit::Str("/dev/termination-log"),
    ),
    field(
        "terminationMessagePolicy",
        Unset::EmptyString,
        Lit::Str("File"),
    ),
];

const PROTOCOL_TCP: &[FieldDefault] = &[field("protocol", Unset::EmptyString, Lit::Str("TCP"))];

const PROBE: &[FieldDefault] = &[
    field("timeoutSeconds", Unset::Zero, Lit::Int(1)),
    field("periodSeconds", Unset::Zero, Lit::Int(10)),
    field("successThreshold", Unset::Zero, Lit::Int(1)),
    field("failureThreshold", Unset::Zero, Lit::Int(3)),
];

const HTTP_GET: &[FieldDefault] = &[
    field("path", Unset::EmptyString, Lit::Str("/")),
    field("scheme", Unset::EmptyString, Lit::Str("HTTP")),
];

const GRPC: &[FieldDefault] = &[field("service", Unset::Nil, Lit::Str(""))];

const FIELD_REF: &[FieldDefault] = &[field("apiVersion", Unset::EmptyString, Lit::Str("v1"))];

const FILE_KEY_REF: &[FieldDefault] = &[field("optional", Unset::Nil, Lit::Bool(false))];

const DEFAULT_MODE: &[FieldDefault] = &[field("defaultMode", Unset::Nil, Lit::Int(0o644))];

const SERVICE_ACCOUNT_TOKEN: &[FieldDefault] =
    &[field("expirationSeconds", Unset::Nil, Lit::Int(3600))];

const PVC_SPEC: &[FieldDefault] = &[field("volumeMode", Unset::Nil, Lit::Str("Filesystem"))];

const PHASE_PENDING: &[FieldDefault] = &[field("phase", Unset::EmptyString, Lit::Str("Pending"))];

/// The defaults of each volume source (the same for a Pod's volumes and, for the sources a
/// PersistentVolume has too, for PersistentVolumes), by the source's JSON name.
const VOLUME_SOURCES: &[(&str, &[FieldDefault])] = &[
    ("hostPath", &[field("type", Unset::Nil, Lit::Str(""))]),
    ("secret", DEFAULT_MODE),
    (
        "iscsi",
        &[field(
            "iscsiInterface",
            Unset::EmptyString,
            Lit::Str("default"),
        )],
    ),
    (
        "rbd",
        &[
            field("pool", Unset::EmptyString, Lit::Str("rbd")),
            field("user", Unset::EmptyString, Lit::Str("admin")),
            field("keyring", Unset::EmptyString, Lit::Str("/etc/ceph/keyring")),
        ],
    ),
    ("downwardAPI", DEFAULT_MODE),
    ("configMap", DEFAULT_MODE),
    (
        "azureDisk",
        &[
            field("cachingMode", Unset::Nil, Lit::Str("ReadWrite")),
            field("fsType", Unset::Nil, Lit::Str("ext4")),
            field("readOnly", Unset::Nil, Lit::Bool(false)),
            field("kind", Unset::Nil, Lit::Str("Shared")),
        ],
    ),
    ("projected", DEFAULT_MODE),
    (
        "scaleIO",
        &[
            field(
                "storageMode",
                Unset::EmptyString,
                Lit::Str("ThinProvisioned"),
            ),
            field("fsType", Unset::EmptyString, Lit::Str("xfs")),
        ],
    ),
];

/// The sources of a PersistentVolume that have defaults.
const PERSISTENT_VOLUME_SOURCES: &[&str] = &["hostPath", "rbd", "iscsi", "azureDisk", "scaleIO"];

/// Every pointer field of `VolumeSource` (`image` from 1.31): a volume with none set becomes an
/// `emptyDir`.
const VOLUME_SOURCE_FIELDS: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
];

const CONTAINER_LISTS: &[&str] = &["initContainers", "containers", "ephemeralContainers"];
const CONTAINER_STATUS_LISTS: &[&str] = &[
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
];
const LIMITS_AND_REQUESTS: &[&str] = &["limits", "requests"];

/// `SetObjectDefaults_Pod`.
pub(super) fn pod(pod: &mut Object, f: &Features) {
    let Some(spec) = value_struct(pod, "spec") else {
        return;
    };
    set_defaults_pod(spec, f);
    pod_spec(spec, f);
    if let Some(status) = pointer(pod, "status") {
        for list in CONTAINER_STATUS_LISTS {
            for s in elements(status, list) {
                round_resource_lists(s, &["allocatedResources"]);
                if let Some(r) = pointer(s, "resources") {
                    round_resource_lists(r, LIMITS_AND_REQUESTS);
                }
            }
        }
    }
}

/// `SetDefaults_Pod`: what only a Pod gets, not a pod template.
fn set_defaults_pod(spec: &mut Object, f: &Features) {
    for list in ["containers", "initContainers"] {
        for c in elements(spec, list) {
            if let Some(resources) = pointer(c, "resources") {
                requests_from_limits(resources);
            }
        }
    }
    if f.pod_level_resources {
        super::pod_resources::default_pod_level_resources(spec);
    }
    set_default(spec, "enableServiceLinks", Unset::Nil, Value::Bool(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for list in ["containers", "initContainers"] {
            for c in elements(spec, list) {
                for port in elements(c, "ports") {
                    let container_port = match port.get("containerPort") {
                        None | Some(Value::Null) => Value::from(0),
                        Some(n @ Value::Number(_)) => n.clone(),
                        Some(_) => continue,
                    };
                    set_default(port, "hostPort", Unset::Zero, container_port);
                }
            }
        }
    }
}

/// Requests missing from a container's non-nil limits are copied from them.
fn requests_from_limits(resources: &mut Object) {
    let Some(Value::Object(limits)) = resources.get("limits") else {
        return;
    };
    let requests = resources.get("requests").and_then(Value::as_object);
    let missing: Vec<(String, Value)> = limits
        .iter()
        .filter(|(name, _)| !requests.is_some_and(|r| r.contains_key(*name)))
        .map(|(name, quantity)| (name.clone(), quantity.clone()))
        .collect();
    if let Some(requests) = pointer_or_new(resources, "requests")
        && !missing.is_empty()
    {
        requests.extend(missing);
        wrote();
    }
}

/// The defaults of a `PodTemplateSpec` (a workload's pod template): the PodSpec's, without
/// `SetDefaults_Pod`.
pub(super) fn pod_template_spec(template: &mut Object, f: &Features) {
    if let Some(spec) = value_struct(template, "spec") {
        pod_spec(spec, f);
    }
}

/// `SetDefaults_PodSpec` and the defaults of every struct under a PodSpec.
fn pod_spec(spec: &mut Object, f: &Features) {
    apply(spec, POD_SPEC);
    for v in elements(spec, "volumes") {
        volume(v, f);
    }
    for list in CONTAINER_LISTS {
        for c in elements(spec, list) {
            container(c, f);
        }
    }
    round_resource_lists(spec, &["overhead"]);
    if f.pod_level_resources_field
        && let Some(r) = pointer(spec, "resources")
    {
        round_resource_lists(r, LIMITS_AND_REQUESTS);
    }
}

/// `SetDefaults_Container` (also for init and ephemeral containers) and the structs under it.
/// Each field is defaulted on its own, so the members are visited once, in the map's order,
/// instead of each being looked up by name.
fn container(c: &mut Object, f: &Features) {
    let mut pull_policy_unset = true;
    for (key, value) in c.iter_mut() {
        match key.as_str() {
            "imagePullPolicy" => pull_policy_unset = Unset::EmptyString.holds(Some(value)),
            "ports" => {
                for port in struct_elements(value) {
                    apply(port, PROTOCOL_TCP);
                }
            }
            "env" => {
                for env in struct_elements(value) {
                    env_var(env, f);
                }
            }
            "resources" => {
                if let Some(r) = value.as_object_mut() {
                    round_resource_lists(r, LIMITS_AND_REQUESTS);
                }
            }
            "livenessProbe" | "readinessProbe" | "startupProbe" => {
                if let Some(probe) = value.as_object_mut() {
                    apply(probe, PROBE);
                    if let Some(h) = pointer(probe, "httpGet") {
                        apply(h, HTTP_GET);
                    }
                    if let Some(g) = pointer(probe, "grpc") {
                        apply(g, GRPC);
                    }
                }
            }
            "lifecycle" => {
                if let Some(lifecycle) = value.as_object_mut() {
                    for key in ["postStart", "preStop"] {
                        if let Some(h) = pointer(lifecycle, key).and_then(|h| pointer(h, "httpGet"))
                        {
                            apply(h, HTTP_GET);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if pull_policy_unset {
        let policy = default_pull_policy(string_at(c, "image"));
        c.insert("imagePullPolicy".into(), Value::from(policy));
        wrote();
    }
    apply(c, CONTAINER);
}

/// The defaults under an `EnvVar`'s `valueFrom`.
fn env_var(env: &mut Object, f: &Features) {
    let Some(from) = pointer(env, "valueFrom") else {
        return;
    };
    if let Some(r) = pointer(from, "fieldRef") {
        apply(r, FIELD_REF);
    }
    if f.file_key_ref
        && let Some(r) = pointer(from, "fileKeyRef")
    {
        apply(r, FILE_KEY_REF);
    }
}

/// The struct elements of a slice field's value (elements of another type are skipped).
fn struct_elements(value: &mut Value) -> impl Iterator<Item = &mut Object> {
    value
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// `SetDefaults_Volume` and the defaults of the volume's source.
fn volume(v: &mut Object, f: &Features) {
    let is_source =
        |k: &str| VOLUME_SOURCE_FIELDS.contains(&k) || (f.image_volume_source && k == "image");
    let all_nil = v.iter().all(|(k, value)| value.is_null() || !is_source(k));
    if all_nil {
        v.insert("emptyDir".into(), Value::Object(Map::new()));
        wrote();
    }
    if f.image_volume_pull_policy
        && let Some(image) = pointer(v, "image")
        && Unset::EmptyString.holds(image.get("pullPolicy"))
    {
        let policy = default_pull_policy(string_at(image, "reference"));
        image.insert("pullPolicy".into(), Value::from(policy));
        wrote();
    }
    volume_sources(v, |_| true);
    if let Some(d) = pointer(v, "downwardAPI") {
        downward_api_items(d);
    }
    if let Some(p) = pointer(v, "projected") {
        for source in elements(p, "sources") {
            if let Some(d) = pointer(source, "downwardAPI") {
                downward_api_items(d);
            }
            if let Some(t) = pointer(source, "serviceAccountToken") {
                apply(t, SERVICE_ACCOUNT_TOKEN);
            }
        }
    }
    if let Some(spec) = pointer(v, "ephemeral")
        .and_then(|e| pointer(e, "volumeClaimTemplate"))
        .and_then(|t| value_struct(t, "spec"))
    {
        pvc_spec(spec);
    }
}

/// The defaults of the volume sources present in `v` whose names are `among` those wanted.
fn volume_sources(v: &mut Object, among: impl Fn(&str) -> bool) {
    for (key, source) in v.iter_mut() {
        if let Some(source) = source.as_object_mut()
            && among(key)
            && let Some((_, table)) = VOLUME_SOURCES.iter().find(|(k, _)| k == key)
        {
            apply(source, table);
        }
    }
}

fn downward_api_items(d: &mut Object) {
    for item in elements(d, "items") {
        if let Some(r) = pointer(item, "fieldRef") {
            apply(r, FIELD_REF);
        }
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec` and the rounding of its resources.
fn pvc_spec(spec: &mut Object) {
    apply(spec, PVC_SPEC);
    if let Some(r) = pointer(spec, "resources") {
        round_resource_lists(r, LIMITS_AND_REQUESTS);
    }
}

/// `SetObjectDefaults_PersistentVolumeClaim` (also for a StatefulSet's volume claim templates).
pub(super) fn persistent_volume_claim(pvc: &mut Object) {
    if let Some(status) = value_struct(pvc, "status") {
        apply(status, PHASE_PENDING);
        round_resource_lists(status, &["capacity", "allocatedResources"]);
    }
    if let Some(spec) = value_struct(pvc, "spec") {
        pvc_spec(spec);
    }
}

/// `SetObjectDefaults_PersistentVolume`.
fn persistent_volume(pv: &mut Object) {
    if let Some(status) = value_struct(pv, "status") {
        apply(status, PHASE_PENDING);
    }
    let Some(spec) = value_struct(pv, "spec") else {
        return;
    };
    apply(
        spec,
        &[
            field(
                "persistentVolumeReclaimPolicy",
                Unset::EmptyString,
                Lit::Str("Retain"),
            ),
            field("volumeMode", Unset::Nil, Lit::Str("Filesystem")),
        ],
    );
    round_resource_lists(spec, &["capacity"]);
    volume_sources(spec, |k| PERSISTENT_VOLUME_SOURCES.contains(&k));
}

/// `SetObjectDefaults_ReplicationController`.
fn replication_controller(rc: &mut Object, f: &Features) {
    let Some(spec) = value_struct(rc, "spec") else {
        return;
    };
    if let Some(labels) = template_labels(spec) {
        set_default(spec, "selector", Unset::Empty, labels.clone());
        if let Some(metadata) = value_struct(rc, "metadata") {
            set_default(metadata, "labels", Unset::Empty, labels);
        }
    }
    let Some(spec) = pointer(rc, "spec") else {
        return;
    };
    set_default(spec, "replicas", Unset::Nil, Value::from(1));
    if let Some(template) = pointer(spec, "template") {
        pod_template_spec(template, f);
    }
}

/// The labels of `spec.template`, when the template and its labels map are non-nil.
pub(super) fn template_labels(spec: &mut Object) -> Option<Value> {
    pointer(spec, "template")
        .and_then(|t| pointer(t, "metadata"))
        .and_then(|m| m.get("labels"))
        .filter(|l| l.is_object())
        .cloned()
}

/// `SetObjectDefaults_Service`.
fn service(svc: &mut Object, f: &Features) {
    let Some(spec) = value_struct(svc, "spec") else {
        return;
    };
    set_default(
        spec,
        "sessionAffinity",
        Unset::EmptyString,
        Value::from("None"),
    );
    let affinity = string_at(spec, "sessionAffinity");
    let (none, client_ip) = (affinity == "None", affinity == "ClientIP");
    if none && spec.remove("sessionAffinityConfig").is_some() {
        wrote();
    } else if client_ip {
        let timeout = pointer(spec, "sessionAffinityConfig")
            .and_then(|c| pointer(c, "clientIP"))
            .and_then(|c| c.get("timeoutSeconds"));
        if Unset::Nil.holds(timeout) {
            let config = serde_json::json!({"clientIP": {"timeoutSeconds": 10800}});
            spec.insert("sessionAffinityConfig".into(), config);
            wrote();
        }
    }
    set_default(spec, "type", Unset::EmptyString, Value::from("ClusterIP"));
    for port in elements(spec, "ports") {
        apply(port, PROTOCOL_TCP);
        let target = port.get("targetPort");
        if Unset::Zero.holds(target) || Unset::EmptyString.holds(target) {
            let number = port.get("port").filter(|p| p.is_number()).cloned();
            port.insert("targetPort".into(), number.unwrap_or(Value::from(0)));
            wrote();
        }
    }
    let service_type = string_at(spec, "type").to_string();
    let externally_accessible = match service_type.as_str() {
        "LoadBalancer" | "NodePort" => true,
        "ClusterIP" => {
            f.external_traffic_policy_for_external_ips
                && !Unset::Empty.holds(spec.get("externalIPs"))
        }
        _ => false,
    };
    if externally_accessible {
        set_default(
            spec,
            "externalTrafficPolicy",
            Unset::EmptyString,
            Value::from("Cluster"),
        );
    }
    if matches!(
        service_type.as_str(),
        "NodePort" | "LoadBalancer" | "ClusterIP"
    ) {
        set_default(
            spec,
            "internalTrafficPolicy",
            Unset::Nil,
            Value::from("Cluster"),
        );
    }
    if service_type != "LoadBalancer" {
        return;
    }
    set_default(
        spec,
        "allocateLoadBalancerNodePorts",
        Unset::Nil,
        Value::Bool(true),
    );
    if !f.load_balancer_ip_mode {
        return;
    }
    let Some(lb) = pointer(svc, "status").and_then(|s| pointer(s, "loadBalancer")) else {
        return;
    };
    for ingress in elements(lb, "ingress") {
        if !string_at(ingress, "ip").is_empty() {
            set_default(ingress, "ipMode", Unset::Nil, Value::from("VIP"));
        }
    }
}

/// `SetDefaults_Namespace` and `SetDefaults_NamespaceStatus`.
fn namespace(ns: &mut Object) {
    if let Some(metadata) = value_struct(ns, "metadata") {
        let name = string_at(metadata, "name").to_string();
        if !name.is_empty() {
            set_default(metadata, "labels", Unset::Nil, Value::Object(Map::new()));
            if let Some(labels) = pointer(metadata, "labels")
                && labels
                    .get("kubernetes.io/metadata.name")
                    .and_then(Value::as_str)
                    != Some(name.as_str())
            {
                labels.insert("kubernetes.io/metadata.name".into(), Value::from(name));
                wrote();
            }
        }
    }
    if let Some(status) = value_struct(ns, "status") {
        set_default(status, "phase", Unset::EmptyString, Value::from("Active"));
    }
}

/// `SetDefaults_LimitRangeItem` and the rounding of its quantities.
fn limit_range(lr: &mut Object) {
    let Some(spec) = pointer(lr, "spec") else {
        return;
    };
    for item in elements(spec, "limits") {
        if string_at(item, "type") == "Container" {
            for key in ["default", "defaultRequest"] {
                set_default(item, key, Unset::Nil, Value::Object(Map::new()));
            }
            copy_missing(item, "max", "default");
            copy_missing(item, "default", "defaultRequest");
            copy_missing(item, "min", "defaultRequest");
        }
        round_resource_lists(
            item,
            &[
                "max",
                "min",
                "default",
                "defaultRequest",
                "maxLimitRequestRatio",
            ],
        );
    }
}

/// Copies the entries of the map `from` that the map `to` lacks.
fn copy_missing(object: &mut Object, from: &str, to: &str) {
    let Some(Value::Object(source)) = object.get(from) else {
        return;
    };
    let source = source.clone();
    if let Some(target) = pointer(object, to) {
        for (k, v) in source {
            if let serde_json::map::Entry::Vacant(e) = target.entry(k) {
                e.insert(v);
                wrote();
            }
        }
    }
}

/// `SetDefaults_NodeStatus` and the rounding of its quantities.
fn node(node: &mut Object) {
    let Some(status) = pointer(node, "status") else {
        return;
    };
    if Unset::Nil.holds(status.get("allocatable"))
        && let Some(capacity @ Value::Object(_)) = status.get("capacity")
    {
        let capacity = capacity.clone();
        status.insert("allocatable".into(), capacity);
        wrote();
    }
    round_resource_lists(status, &["capacity", "allocatable"]);
}

/// Defaults a core/v1 object of `kind`; false when the kind has no defaulting.
pub(super) fn default(kind: &str, object: &mut Object, f: &Features) -> bool {
    match kind {
        "Pod" => pod(object, f),
        "PodTemplate" => {
            if let Some(t) = value_struct(object, "template") {
                pod_template_spec(t, f);
            }
        }
        "ReplicationController" => replication_controller(object, f),
        "Service" => service(object, f),
        "Secret" => set_default(object, "type", Unset::EmptyString, Value::from("Opaque")),
        "ConfigMap" => set_default(object, "data", Unset::Nil, Value::Object(Map::new())),
        "Namespace" => namespace(object),
        "Endpoints" => {
            for subset in elements(object, "subsets") {
                for port in elements(subset, "ports") {
                    apply(port, PROTOCOL_TCP);
                }
            }
        }
        "PersistentVolumeClaim" => persistent_volume_claim(object),
        "PersistentVolume" => persistent_volume(object),
        "LimitRange" => limit_range(object),
        "ResourceQuota" => {
            if let Some(spec) = pointer(object, "spec") {
                round_resource_lists(spec, &["hard"]);
            }
            if let Some(status) = pointer(object, "status") {
                round_resource_lists(status, &["hard", "used"]);
            }
        }
        "Node" => node(object),
        _ => return false,
    }
    true
}

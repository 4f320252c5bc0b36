//! Scheme defaulting against upstream's defaulting tests, ported as data
//! (`tests/fixtures/defaulting/`, see its README), at every release each case applies to.

use std::path::Path;

use hookscope::KubeVersion;
use hookscope::defaulting::{default_object, ignores_metadata, is_defaulted};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One fixture case: `input` defaulted as `apiVersion`/`kind` must equal `expected` when given,
/// have every pointer of `expect` at its value and none of `absent`.
struct Case {
    file: String,
    name: String,
    group: String,
    version: String,
    kind: String,
    releases: (u32, u32),
    defaulted: bool,
    input: Value,
    expected: Option<Value>,
    expect: Vec<(String, Value)>,
    absent: Vec<String>,
}

fn minor(v: &Value) -> u32 {
    let text = v.as_str().expect("release is a string");
    text.parse::<KubeVersion>()
        .expect("release is modelled")
        .minor()
}

fn load_cases() -> Vec<Case> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/defaulting");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixture folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("fixture file");
        let doc: Value = serde_json::from_str(&text).expect("fixture JSON");
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for c in doc["cases"].as_array().expect("cases") {
            let api_version = c["apiVersion"].as_str().expect("apiVersion");
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let releases = match c.get("releases") {
                Some(r) => (minor(&r[0]), minor(&r[1])),
                None => (KubeVersion::OLDEST.minor(), KubeVersion::NEWEST.minor()),
            };
            let map = |key: &str| -> Vec<(String, Value)> {
                c.get(key)
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                    .unwrap_or_default()
            };
            cases.push(Case {
                file: file.clone(),
                name: c["name"].as_str().expect("name").to_string(),
                group: group.to_string(),
                version: version.to_string(),
                kind: c["kind"].as_str().expect("kind").to_string(),
                releases,
                defaulted: c.get("defaulted").and_then(Value::as_bool).unwrap_or(true),
                input: c["input"].clone(),
                expected: c.get("expected").cloned(),
                expect: map("expect"),
                absent: c
                    .get("absent")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|p| p.as_str().expect("pointer").to_string())
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
    }
    cases
}

/// The failures of `case` at release `1.minor`, as messages.
fn check(case: &Case, minor: u32) -> Vec<String> {
    let release = KubeVersion::new(minor).unwrap();
    let mut object = case.input.clone();
    let mut failures = Vec::new();
    let at = format!("{} / {} @1.{minor}", case.file, case.name);
    let defaulted = default_object(&case.group, &case.version, &case.kind, &mut object, release);
    if defaulted != case.defaulted {
        failures.push(format!("{at}: default_object returned {defaulted}"));
    }
    if let Some(expected) = &case.expected
        && &object != expected
    {
        failures.push(format!(
            "{at}:\n  expected {}\n  got      {}",
            serde_json::to_string(expected).unwrap(),
            serde_json::to_string(&object).unwrap()
        ));
    }
    for (pointer, value) in &case.expect {
        if object.pointer(pointer) != Some(value) {
            failures.push(format!(
                "{at}: {pointer} is {:?}, expected {value}",
                object.pointer(pointer)
            ));
        }
    }
    for pointer in &case.absent {
        if let Some(v) = object.pointer(pointer) {
            failures.push(format!("{at}: {pointer} should be absent, is {v}"));
        }
    }
    failures
}

#[test]
fn upstream_defaulting_tables_hold_at_every_release() {
    let cases = load_cases();
    assert!(cases.len() > 120, "only {} cases loaded", cases.len());
    let mut runs = 0;
    let mut failures = Vec::new();
    for case in &cases {
        for minor in case.releases.0..=case.releases.1 {
            runs += 1;
            failures.extend(check(case, minor));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A mutating webhook adds a sidecar with only a name and an image; the apiserver's round trip
/// gives it exactly these fields (plus `resources: {}`, which is encoding, not defaulting), and
/// leaves the already defaulted containers as they were.
#[test]
fn a_sidecar_added_by_a_webhook_gets_the_apiservers_fields() {
    let app = json!({
        "name": "app",
        "image": "registry.example.com/shop/web:2.4.1",
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
    });
    for minor in KubeVersion::OLDEST.minor()..=KubeVersion::NEWEST.minor() {
        let release = KubeVersion::new(minor).unwrap();
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"containers": [app.clone(), {"name": "envoy", "image": "envoyproxy/envoy:v1.31.0"}]},
        });
        default_object("", "v1", "Pod", &mut pod, release);
        let containers = &pod["spec"]["containers"];
        assert_eq!(containers[0], app, "1.{minor}");
        assert_eq!(
            containers[1],
            json!({
                "name": "envoy",
                "image": "envoyproxy/envoy:v1.31.0",
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }),
            "1.{minor}"
        );

        let mut pod = json!({"spec": {"containers": [{"name": "debug", "image": "busybox"}]}});
        default_object("", "v1", "Pod", &mut pod, release);
        assert_eq!(
            pod["spec"]["containers"][0]["imagePullPolicy"], "Always",
            "1.{minor}"
        );
    }
}

/// An injected proxy with ports, probes and env gets every nested default, and a field a webhook
/// removes from an already defaulted Pod comes back on the next round trip.
#[test]
fn an_injected_proxy_gets_nested_defaults_and_removed_defaults_come_back() {
    let proxy = json!({
        "name": "istio-proxy",
        "image": "docker.io/istio/proxyv2:1.22.0",
        "ports": [{"containerPort": 15090, "name": "http-envoy-prom"}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "readinessProbe": {"httpGet": {"path": "/healthz/ready", "port": 15021}, "periodSeconds": 15},
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "100m"}},
    });
    let mut pod = json!({"spec": {"containers": [proxy]}});
    default_object("", "v1", "Pod", &mut pod, KubeVersion::NEWEST);
    assert_eq!(
        pod["spec"]["containers"][0],
        json!({
            "name": "istio-proxy",
            "image": "docker.io/istio/proxyv2:1.22.0",
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "ports": [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}}],
            "readinessProbe": {
                "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
                "periodSeconds": 15,
                "timeoutSeconds": 1,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
            "resources": {
                "limits": {"cpu": "2", "memory": "1Gi"},
                "requests": {"cpu": "100m", "memory": "1Gi"},
            },
        })
    );

    let defaulted = pod.clone();
    let spec = pod["spec"].as_object_mut().unwrap();
    spec.remove("terminationGracePeriodSeconds");
    spec.remove("dnsPolicy");
    spec["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("imagePullPolicy");
    default_object("", "v1", "Pod", &mut pod, KubeVersion::NEWEST);
    assert_eq!(pod, defaulted);
}

/// Defaulting an already defaulted object changes nothing, at every release, for every case.
#[test]
fn defaulting_is_idempotent() {
    for case in load_cases() {
        for minor in case.releases.0..=case.releases.1 {
            let release = KubeVersion::new(minor).unwrap();
            let mut once = case.input.clone();
            default_object(&case.group, &case.version, &case.kind, &mut once, release);
            let mut twice = once.clone();
            default_object(&case.group, &case.version, &case.kind, &mut twice, release);
            assert_eq!(once, twice, "{} / {} @1.{minor}", case.file, case.name);
        }
    }
}

/// Values of a type Go could not have decoded are left alone, and nothing panics.
#[test]
fn values_of_the_wrong_type_are_left_alone() {
    for (group, version, kind) in [
        ("", "v1", "Pod"),
        ("", "v1", "Service"),
        ("", "v1", "ReplicationController"),
        ("apps", "v1", "Deployment"),
        ("apps", "v1", "StatefulSet"),
        ("batch", "v1", "CronJob"),
        ("autoscaling", "v2", "HorizontalPodAutoscaler"),
    ] {
        for input in [
            json!(null),
            json!("pod"),
            json!([1, 2]),
            json!({"spec": "x", "metadata": 3, "status": []}),
            json!({"spec": {"containers": "x", "template": 1, "ports": {"a": 1}, "strategy": "x"}}),
            json!({"spec": {"containers": [1, null, {"image": 3, "ports": [{"containerPort": "80"}]}]}}),
        ] {
            let mut object = input.clone();
            default_object(group, version, kind, &mut object, KubeVersion::NEWEST);
            if !input.is_object() || input.get("spec").is_some_and(|s| !s.is_object()) {
                assert_eq!(object, input, "{kind}: {input}");
            }
        }
    }
    let mut pod = json!({"spec": {"dnsPolicy": 7, "containers": [{"image": 3, "terminationMessagePath": false}]}});
    default_object("", "v1", "Pod", &mut pod, KubeVersion::NEWEST);
    assert_eq!(pod["spec"]["dnsPolicy"], 7);
    assert_eq!(
        pod["spec"]["containers"][0]["terminationMessagePath"],
        false
    );
}

#[test]
fn kinds_without_defaulting_say_so() {
    for (group, version, kind) in [
        ("", "v1", "ServiceAccount"),
        ("networking.k8s.io", "v1", "Ingress"),
        ("policy", "v1", "PodDisruptionBudget"),
        ("example.com", "v1", "Widget"),
    ] {
        assert!(!is_defaulted(group, version, kind), "{kind}");
    }
    for (group, version, kind) in [
        ("", "v1", "Pod"),
        ("apps", "v1", "Deployment"),
        ("batch", "v1", "CronJob"),
    ] {
        assert!(is_defaulted(group, version, kind), "{kind}");
    }
}

/// Field names the defaulting code looks at, so that random objects reach deep into it.
const KEYS: &[&str] = &[
    "spec",
    "template",
    "jobTemplate",
    "metadata",
    "labels",
    "status",
    "containers",
    "initContainers",
    "ephemeralContainers",
    "volumes",
    "resources",
    "limits",
    "requests",
    "ports",
    "env",
    "valueFrom",
    "fieldRef",
    "image",
    "livenessProbe",
    "httpGet",
    "grpc",
    "lifecycle",
    "postStart",
    "hostNetwork",
    "containerPort",
    "restartPolicy",
    "projected",
    "sources",
    "downwardAPI",
    "items",
    "ephemeral",
    "volumeClaimTemplate",
    "secret",
    "hostPath",
    "type",
    "strategy",
    "updateStrategy",
    "rollingUpdate",
    "behavior",
    "scaleUp",
    "metrics",
    "policyTypes",
    "egress",
    "sessionAffinity",
    "sessionAffinityConfig",
    "clientIP",
    "targetPort",
    "port",
    "loadBalancer",
    "ingress",
    "ip",
    "podFailurePolicy",
    "rules",
    "onPodConditions",
    "hugepages-2Mi",
    "cpu",
    "memory",
    "capacity",
    "name",
];

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop_oneof![
            Just("Always"),
            Just("1Gi"),
            Just("100u"),
            Just(""),
            Just("ClientIP"),
            Just("LoadBalancer"),
            Just("1.5Ki"),
            Just("x:latest")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                )
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any JSON, at any release, for every defaulted kind: no panic, and defaulting twice is
    /// defaulting once.
    #[test]
    fn arbitrary_objects_never_panic(object in arbitrary_json(), minor in 28u32..=37) {
        let release = KubeVersion::new(minor).unwrap();
        for (group, version, kind) in [
            ("", "v1", "Pod"), ("", "v1", "PodTemplate"), ("", "v1", "ReplicationController"),
            ("", "v1", "Service"), ("", "v1", "Namespace"), ("", "v1", "LimitRange"), ("", "v1", "Node"),
            ("", "v1", "PersistentVolume"), ("apps", "v1", "StatefulSet"), ("apps", "v1", "Deployment"),
            ("apps", "v1", "DaemonSet"), ("batch", "v1", "Job"), ("batch", "v1", "CronJob"),
            ("autoscaling", "v2", "HorizontalPodAutoscaler"), ("networking.k8s.io", "v1", "NetworkPolicy"),
        ] {
            let mut once = object.clone();
            default_object(group, version, kind, &mut once, release);
            let mut twice = once.clone();
            default_object(group, version, kind, &mut twice, release);
            prop_assert_eq!(&once, &twice, "{} not idempotent", kind);
        }
    }

    /// An object defaulted, then given any other `metadata` (or none), is left as it is by
    /// defaulting it again, for every kind whose defaulting says it ignores `metadata`.
    #[test]
    fn defaulting_ignores_metadata_where_it_says_so(
        object in arbitrary_json(),
        metadata in proptest::option::of(arbitrary_json()),
        minor in 28u32..=37,
    ) {
        let release = KubeVersion::new(minor).unwrap();
        for (group, version, kind) in DEFAULTED_KINDS {
            if !ignores_metadata(group, version, kind) {
                continue;
            }
            let mut changed = object.clone();
            default_object(group, version, kind, &mut changed, release);
            if let Value::Object(members) = &mut changed {
                match &metadata {
                    Some(m) => members.insert("metadata".into(), m.clone()),
                    None => members.remove("metadata"),
                };
            }
            let mut again = changed.clone();
            default_object(group, version, kind, &mut again, release);
            prop_assert_eq!(&again, &changed, "{} reads or writes metadata", kind);
        }
    }
}

/// The kinds defaulted, for the properties above.
const DEFAULTED_KINDS: [(&str, &str, &str); 15] = [
    ("", "v1", "Pod"),
    ("", "v1", "PodTemplate"),
    ("", "v1", "ReplicationController"),
    ("", "v1", "Service"),
    ("", "v1", "Namespace"),
    ("", "v1", "LimitRange"),
    ("", "v1", "Node"),
    ("", "v1", "PersistentVolume"),
    ("apps", "v1", "StatefulSet"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "DaemonSet"),
    ("batch", "v1", "Job"),
    ("batch", "v1", "CronJob"),
    ("autoscaling", "v2", "HorizontalPodAutoscaler"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
];

/// Every upstream case whose kind's defaulting says it ignores `metadata` is left as it is,
/// once defaulted, when its labels, annotations or name change or its `metadata` goes; every
/// kind that says otherwise changes in one case at least.
#[test]
fn the_kinds_whose_defaulting_reads_metadata_say_so() {
    let mut reads = std::collections::BTreeSet::new();
    for case in load_cases() {
        for minor in case.releases.0..=case.releases.1 {
            let release = KubeVersion::new(minor).unwrap();
            let mut defaulted = case.input.clone();
            default_object(
                &case.group,
                &case.version,
                &case.kind,
                &mut defaulted,
                release,
            );
            let changes: [fn(&mut Value); 4] = [
                |o| {
                    o.as_object_mut().map(|m| m.remove("metadata"));
                },
                |o| o["metadata"] = json!({"name": "other", "labels": {}}),
                |o| o["metadata"] = json!({"labels": {"injected": "yes"}}),
                |o| o["metadata"] = json!({"name": "x", "annotations": {"a": "b"}}),
            ];
            for change in changes {
                let mut changed = defaulted.clone();
                change(&mut changed);
                let mut again = changed.clone();
                default_object(&case.group, &case.version, &case.kind, &mut again, release);
                let ignores = ignores_metadata(&case.group, &case.version, &case.kind);
                if again != changed {
                    assert!(
                        !ignores,
                        "{} / {} @1.{minor}: {again}",
                        case.file, case.name
                    );
                    reads.insert(case.kind.clone());
                }
            }
        }
    }
    for (group, version, kind) in DEFAULTED_KINDS {
        if !ignores_metadata(group, version, kind) {
            assert!(
                reads.contains(kind),
                "no case shows {kind} reading metadata"
            );
        }
    }
}

/// Every member of `v`'s objects, as JSON pointers (keys escaped).
fn member_pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let path = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(path.clone());
                member_pointers(child, &path, out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                member_pointers(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `defaults` says whether the object changed, which the engine relies on to
/// compare only what a patch edited: a defaulted object is reported unchanged, and the same
/// object with any one member removed is reported changed whenever defaulting puts something
/// back.
#[test]
fn defaulting_says_whether_it_changed_the_object() {
    use hookscope::defaulting::defaults;
    let mut removals = 0;
    for case in load_cases() {
        for minor in case.releases.0..=case.releases.1 {
            let release = KubeVersion::new(minor).unwrap();
            let at = format!("{} / {} @1.{minor}", case.file, case.name);
            let default = |object: &mut Value| {
                defaults(&case.group, &case.version, &case.kind, object, release).changed
            };
            let mut once = case.input.clone();
            let changed = default(&mut once);
            assert!(changed || once == case.input, "{at}: changed, said not");
            let mut twice = once.clone();
            assert!(
                !default(&mut twice),
                "{at}: a defaulted object said changed"
            );
            let mut pointers = Vec::new();
            member_pointers(&once, "", &mut pointers);
            for pointer in pointers {
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                let mut without = once.clone();
                let Some(Value::Object(m)) = without.pointer_mut(parent) else {
                    continue;
                };
                m.remove(&key.replace("~1", "/").replace("~0", "~"));
                let mut again = without.clone();
                let changed = default(&mut again);
                assert!(
                    changed || again == without,
                    "{at}: without {pointer}, changed but said not"
                );
                removals += 1;
            }
        }
    }
    assert!(removals > 10_000, "{removals}");
}

/// A quantity finer than a milli is rounded by defaulting, and that is a change too.
#[test]
fn rounding_a_quantity_is_a_change() {
    use hookscope::defaulting::defaults;
    let release = KubeVersion::NEWEST;
    let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "a:1",
        "resources": {"limits": {"cpu": "1"}}}]}});
    defaults("", "v1", "Pod", &mut pod, release);
    pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("100u");
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("100u");
    assert!(defaults("", "v1", "Pod", &mut pod, release).changed);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "1m"
    );
    assert!(!defaults("", "v1", "Pod", &mut pod, release).changed);
}

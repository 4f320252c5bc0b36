//! The per-release Go types (src/schema) and the Go round trip they give, checked against what a
//! real kube-apiserver v1.32 encoded (its audit log and the AdmissionReviews its webhooks got).

use hookscope::KubeVersion;
use hookscope::schema::{self, ListType, Schema, Type};
use serde::Deserialize;
use serde_json::value::RawValue;

fn release(minor: u32) -> KubeVersion {
    KubeVersion::new(minor).unwrap()
}

#[test]
fn every_release_has_its_kinds_in_go_field_order() {
    for minor in KubeVersion::OLDEST.minor()..=KubeVersion::NEWEST.minor() {
        let s = Schema::for_release(release(minor));
        assert!(s.len() > 800, "1.{minor}: {} types", s.len());
        let pod = s.kind("", "v1", "Pod").expect("Pod");
        let names: Vec<&str> = s.get(pod).fields.iter().map(|f| &*f.name).collect();
        assert_eq!(
            names,
            ["kind", "apiVersion", "metadata", "spec", "status"],
            "1.{minor}"
        );
        let container = s.by_name("core/v1.Container").unwrap();
        let c = s.get(container);
        assert_eq!(&*c.fields[0].name, "name");
        assert_eq!(&*c.fields[1].name, "image");
        let ports = c.field("ports").unwrap();
        assert_eq!(ports.patch_merge_key.as_deref(), Some("containerPort"));
        assert_eq!(ports.list_type, Some(ListType::Map));
        assert_eq!(
            ports.list_map_keys.iter().map(|k| &**k).collect::<Vec<_>>(),
            ["containerPort", "protocol"]
        );
        assert!(s.kind("apps", "v1", "Deployment").is_some());
        assert!(s.kind("batch", "v1", "CronJob").is_some());
    }
}

#[test]
fn releases_differ_where_the_go_types_do() {
    // ValidatingAdmissionPolicy went GA (admissionregistration/v1) in 1.30.
    assert!(
        Schema::for_release(release(29))
            .kind(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy"
            )
            .is_none()
    );
    assert!(
        Schema::for_release(release(30))
            .kind(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy"
            )
            .is_some()
    );
    // MutatingAdmissionPolicy: v1alpha1 from 1.32, v1beta1 from 1.34.
    let map = |minor, version| {
        Schema::for_release(release(minor))
            .kind(
                "admissionregistration.k8s.io",
                version,
                "MutatingAdmissionPolicy",
            )
            .is_some()
    };
    assert!(
        !map(31, "v1alpha1") && map(32, "v1alpha1") && !map(33, "v1beta1") && map(34, "v1beta1")
    );
    // Container.resizePolicy came in 1.27 and Container.restartPolicy (sidecars) in 1.28.
    let s = Schema::for_release(release(28));
    let c = s.get(s.by_name("core/v1.Container").unwrap());
    assert!(matches!(c.field("restartPolicy").unwrap().ty, Type::Ptr(_)));
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    verb: &'a str,
    #[serde(borrow)]
    request_object: Option<&'a RawValue>,
    #[serde(borrow)]
    response_object: Option<&'a RawValue>,
}

/// Splits `apiVersion` into group and version.
fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// Encodes `raw` through its kind's Go type; None when the kind is not a built-in one.
fn round_trip(s: &Schema, raw: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(raw).unwrap();
    let (group, version) = group_version(value["apiVersion"].as_str()?);
    let id = s.kind(group, version, value["kind"].as_str()?)?;
    Some(schema::encode(s, id, &value).unwrap())
}

#[test]
fn the_round_trip_gives_the_apiservers_bytes_for_every_object_of_its_audit_log() {
    let s = Schema::for_release(release(32));
    let log = std::fs::read_to_string("tests/fixtures/oracle-v1.32/audit.log").unwrap();
    let mut compared = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for (i, line) in log.lines().enumerate() {
        let event: Event = serde_json::from_str(line).unwrap();
        // The request of a patch is the patch, not an object.
        let request = event
            .request_object
            .filter(|_| matches!(event.verb, "create" | "update"));
        for raw in [request, event.response_object].into_iter().flatten() {
            let Some(encoded) = round_trip(s, raw.get()) else {
                continue;
            };
            assert_eq!(encoded, raw.get(), "line {}", i + 1);
            let v: serde_json::Value = serde_json::from_str(raw.get()).unwrap();
            kinds.insert(v["kind"].as_str().unwrap().to_string());
            compared += 1;
        }
    }
    assert!(compared >= 390, "{compared} objects compared");
    assert!(kinds.len() > 30, "{kinds:?}");
}

#[test]
fn the_round_trip_gives_the_bytes_webhooks_received() {
    let s = Schema::for_release(release(32));
    let mut compared = 0;
    for entry in std::fs::read_dir("tests/fixtures/oracle-v1.32/received").unwrap() {
        let path = entry.unwrap().path();
        if !path.to_string_lossy().ends_with("-req.json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        #[derive(Deserialize)]
        struct Review<'a> {
            #[serde(borrow)]
            request: Request<'a>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Request<'a> {
            #[serde(borrow)]
            object: Option<&'a RawValue>,
        }
        let review: Review = serde_json::from_str(&text).unwrap();
        let raw = review.request.object.unwrap().get();
        assert_eq!(round_trip(s, raw).unwrap(), raw, "{}", path.display());
        compared += 1;
    }
    assert!(compared >= 19, "{compared}");
}

#[test]
fn decoding_drops_unknown_fields_and_encoding_applies_omitempty() {
    let s = Schema::for_release(release(33));
    let pod = s.kind("", "v1", "Pod").unwrap();
    let input = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {}, "Labels": {"a": "b"}, "unknown": 1},
        "spec": {"containers": [{"image": "nginx", "name": "c", "ports": [], "stdin": false}],
                 "nodeName": "", "priority": 0, "hostNetwork": null},
        "status": null
    });
    assert_eq!(
        schema::encode(s, pod, &input).unwrap(),
        r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","creationTimestamp":null},"spec":{"containers":[{"name":"c","image":"nginx","resources":{}}],"priority":0},"status":{}}"#
    );
}

#[test]
fn special_types_decode_and_encode_as_go_does() {
    let s = Schema::for_release(release(33));
    let svc = s.kind("", "v1", "Service").unwrap();
    let input = serde_json::json!({
        "metadata": {"creationTimestamp": "2026-11-21T06:36:02.5+01:00"},
        "spec": {"ports": [{"port": 80}, {"port": 81, "targetPort": "http"}, {"port": 82, "targetPort": 8080}]}
    });
    assert_eq!(
        schema::encode(s, svc, &input).unwrap(),
        r#"{"metadata":{"creationTimestamp":"2026-11-21T05:36:02Z"},"spec":{"ports":[{"port":80,"targetPort":0},{"port":81,"targetPort":"http"},{"port":82,"targetPort":8080}]},"status":{"loadBalancer":{}}}"#
    );
    let secret = s.kind("", "v1", "Secret").unwrap();
    let bad = serde_json::json!({"data": {"k": "not base64!"}});
    assert_eq!(
        schema::encode(s, secret, &bad).unwrap_err().to_string(),
        "illegal base64 data at input byte 3"
    );
    let wrong = serde_json::json!({"spec": {"containers": [{"name": 1}]}});
    let pod = s.kind("", "v1", "Pod").unwrap();
    assert_eq!(
        schema::encode(s, pod, &wrong).unwrap_err().to_string(),
        "json: cannot unmarshal number into Go struct field Container.spec.containers.name of type string"
    );
    let float = serde_json::json!({"spec": {"priority": 1.5}});
    assert_eq!(
        schema::encode(s, pod, &float).unwrap_err().to_string(),
        "json: cannot unmarshal number 1.5 into Go struct field PodSpec.spec.priority of type int32"
    );
}

#[test]
fn semantic_equality_is_apimachinerys() {
    let s = Schema::for_release(release(33));
    let pod = s.kind("", "v1", "Pod").unwrap();
    let eq = |a: serde_json::Value, b: serde_json::Value| schema::semantic_equal(s, pod, &a, &b);
    // nil and empty slices and maps are equal, and absent is Go's zero value
    assert!(eq(
        serde_json::json!({"spec": {"containers": null}}),
        serde_json::json!({"spec": {"containers": []}})
    ));
    assert!(eq(
        serde_json::json!({"metadata": {"labels": {}}}),
        serde_json::json!({"metadata": {}})
    ));
    assert!(eq(
        serde_json::json!({"spec": {"hostNetwork": false, "nodeName": ""}}),
        serde_json::json!({"spec": {}})
    ));
    // a nil pointer and a pointer to a zero value are not
    assert!(!eq(
        serde_json::json!({"spec": {"securityContext": {}}}),
        serde_json::json!({"spec": {}})
    ));
    assert!(!eq(
        serde_json::json!({"spec": {"containers": [{"name": "a"}]}}),
        serde_json::json!({"spec": {"containers": [{"name": "b"}]}})
    ));
}

#[test]
fn strategic_merge_reads_the_go_types_patch_strategies() {
    use hookscope::schema::patchmeta::PatchNode;
    use hookscope::strategicpatch::strategic_merge_patch;
    let s = Schema::for_release(release(33));
    let node = PatchNode::new(s, s.kind("apps", "v1", "Deployment").unwrap());
    let old = serde_json::json!({"spec": {"template": {"spec": {
        "containers": [{"name": "a", "image": "x", "env": [{"name": "E", "value": "1"}]},
                       {"name": "b", "image": "y"}],
        "volumes": [{"name": "v", "emptyDir": {}}]}}}});
    // What `kubectl apply` sends: containers merged by name, in the order given.
    let patch = serde_json::json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
        "containers": [{"name": "a", "image": "x2", "env": [{"name": "F", "value": "2"}]}],
        "volumes": [{"name": "v", "$retainKeys": ["configMap", "name"], "configMap": {"name": "cm"}}]}}}});
    let patched = strategic_merge_patch(old, patch, &node).unwrap();
    assert_eq!(
        patched["spec"]["template"]["spec"],
        serde_json::json!({
            "containers": [{"name": "b", "image": "y"},
                           {"name": "a", "image": "x2", "env": [{"name": "F", "value": "2"}, {"name": "E", "value": "1"}]}],
            "volumes": [{"name": "v", "configMap": {"name": "cm"}}]})
    );
    // A field the Go type does not have, as upstream's struct-tag lookup words it.
    let bad = serde_json::json!({"spec": {"template": {"spec": {"sidecars": [{"name": "x"}]}}}});
    let old = serde_json::json!({"spec": {"template": {"spec": {"sidecars": [{"name": "y"}]}}}});
    assert_eq!(
        strategic_merge_patch(old, bad, &node)
            .unwrap_err()
            .to_string(),
        "unable to find api field in struct PodSpec for the json field \"sidecars\""
    );
}

#[test]
fn quantities_come_back_canonical_and_compare_by_value() {
    let s = Schema::for_release(release(33));
    let pod = s.kind("", "v1", "Pod").unwrap();
    let with = |limits: serde_json::Value| serde_json::json!({"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}});
    let (decoded, _) = schema::codec::normalize(
        s,
        pod,
        &with(serde_json::json!({"cpu": "0.5", "memory": "1024Mi", "ephemeral-storage": 2000})),
    )
    .unwrap();
    assert_eq!(
        decoded["spec"]["containers"][0]["resources"]["limits"],
        serde_json::json!({"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "2k"})
    );
    assert!(schema::semantic_equal(
        s,
        pod,
        &with(serde_json::json!({"memory": "1Gi"})),
        &with(serde_json::json!({"memory": "1073741824"}))
    ));
    assert!(!schema::semantic_equal(
        s,
        pod,
        &with(serde_json::json!({"cpu": "1"})),
        &with(serde_json::json!({"cpu": "1001m"}))
    ));
    let bad = with(serde_json::json!({"cpu": "lots"}));
    assert_eq!(
        schema::encode(s, pod, &bad).unwrap_err().to_string(),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
}

/// The in-place normalisation the engine uses gives what encoding and decoding again gives, on
/// every object of the real audit log and on the same objects damaged: fields Go does not know,
/// nulls, empty lists and maps, numbers where strings go.
#[test]
fn normalising_in_place_equals_the_round_trip() {
    let s = Schema::for_release(release(32));
    let log = std::fs::read_to_string("tests/fixtures/oracle-v1.32/audit.log").unwrap();
    let mut compared = 0;
    let damage = |v: &mut serde_json::Value, n: usize| {
        fn walk(v: &mut serde_json::Value, n: &mut usize) {
            if let serde_json::Value::Object(m) = v {
                *n += 1;
                match *n % 5 {
                    0 => {
                        m.insert("notAField".into(), serde_json::json!({"x": 1}));
                    }
                    1 => {
                        if let Some(k) = m.keys().next().cloned() {
                            m.insert(k, serde_json::Value::Null);
                        }
                    }
                    2 => {
                        m.insert("labels".into(), serde_json::json!({}));
                        m.insert("finalizers".into(), serde_json::json!([]));
                    }
                    _ => {}
                }
                for child in m.values_mut() {
                    walk(child, n);
                }
            } else if let serde_json::Value::Array(items) = v {
                for item in items {
                    walk(item, n);
                }
            }
        }
        let mut n = n;
        walk(v, &mut n);
    };
    for line in log.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(object) = event.get("responseObject") else {
            continue;
        };
        let Some((group, version)) = object["apiVersion"].as_str().map(group_version) else {
            continue;
        };
        let Some(id) = s.kind(group, version, object["kind"].as_str().unwrap_or_default()) else {
            continue;
        };
        for n in 0..5 {
            let mut input = object.clone();
            if n > 0 {
                damage(&mut input, n);
            }
            let round_trip = schema::codec::normalize(s, id, &input).map(|(v, _)| v);
            let mut in_place = input.clone();
            let result = schema::codec::normalize_in_place(s, id, &mut in_place);
            match round_trip {
                Ok(v) => {
                    assert!(result.is_ok(), "{result:?}");
                    assert_eq!(in_place, v, "{input}");
                }
                // Both refuse it; which error comes first can differ: Go's decoder meets the
                // members in the order of the patched document (sorted, as evanphx writes it),
                // which is the order the in-place walk follows.
                Err(_) => assert!(result.is_err()),
            }
            compared += 1;
        }
    }
    assert!(compared > 1000, "{compared}");
}

/// Every place of `v` a patch can name: its members and elements, a new member of each object,
/// and the end of each list.
fn patch_paths(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            out.push(format!("{at}/notAField"));
            for (k, child) in m {
                let path = format!("{at}/{k}");
                out.push(path.clone());
                patch_paths(child, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            out.push(format!("{at}/-"));
            for (i, child) in items.iter().enumerate() {
                let path = format!("{at}/{i}");
                out.push(path.clone());
                patch_paths(child, &path, out);
            }
        }
        _ => {}
    }
}

/// The objects of the real audit log, normalised, with their kinds.
fn normal_objects(s: &Schema) -> Vec<(schema::TypeId, serde_json::Value)> {
    let log = std::fs::read_to_string("tests/fixtures/oracle-v1.32/audit.log").unwrap();
    log.lines()
        .filter_map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            let object = event.get("responseObject")?;
            let (group, version) = object["apiVersion"].as_str().map(group_version)?;
            let id = s.kind(group, version, object["kind"].as_str()?)?;
            let (normal, _) = schema::codec::normalize(s, id, object).ok()?;
            Some((id, normal))
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

    /// What the engine normalises of a patched normal object (what the patch's paths reach)
    /// gives the whole normalisation: the same object, or the same refusal. The patches add,
    /// replace and remove anywhere, values of every shape, several at a time.
    #[test]
    fn normalising_what_a_patch_edited_equals_normalising_the_whole(
        object in 0usize..1000,
        ops in proptest::collection::vec((0usize..3, 0usize..10_000, 0usize..14), 1..5),
    ) {
        use std::sync::OnceLock;
        static OBJECTS: OnceLock<Vec<(schema::TypeId, serde_json::Value)>> = OnceLock::new();
        let s = Schema::for_release(release(32));
        let objects = OBJECTS.get_or_init(|| normal_objects(s));
        let (id, normal) = &objects[object % objects.len()];
        let mut paths = Vec::new();
        patch_paths(normal, "", &mut paths);
        let subtree = |n: usize| {
            let path = &paths[n % paths.len()];
            normal.pointer(path).cloned().unwrap_or(serde_json::Value::Null)
        };
        let ops: Vec<serde_json::Value> = ops
            .iter()
            .map(|&(kind, at, value)| {
                let value = match value {
                    0 => serde_json::json!("x"),
                    1 => serde_json::json!(0),
                    2 => serde_json::json!(7),
                    3 => serde_json::Value::Null,
                    4 => serde_json::json!(true),
                    5 => serde_json::json!({}),
                    6 => serde_json::json!([]),
                    7 => serde_json::json!({"notAField": 1, "name": "n"}),
                    8 => serde_json::json!("1000m"),
                    9 => serde_json::json!(["a"]),
                    10 => serde_json::json!({"a": "b"}),
                    n => subtree(at.wrapping_add(n)),
                };
                let path = &paths[at % paths.len()];
                match kind {
                    0 => serde_json::json!({"op": "add", "path": path, "value": value}),
                    1 => serde_json::json!({"op": "replace", "path": path, "value": value}),
                    _ => serde_json::json!({"op": "remove", "path": path}),
                }
            })
            .collect();
        let patch = hookscope::jsonpatch::decode(&serde_json::to_vec(&ops).unwrap()).unwrap();
        let Some(patched) = patch.apply_direct(normal) else {
            return Ok(());
        };
        let edits = patch.direct_edits();
        let edits: Vec<schema::codec::Edit<'_>> = edits
            .iter()
            .map(|(path, resizes)| schema::codec::Edit::new(path, *resizes))
            .collect();
        let mut whole = patched.clone();
        let whole_result = schema::codec::normalize_in_place(s, *id, &mut whole);
        let mut edited = patched.clone();
        let edited_result =
            schema::codec::normalize_in_place_edited(s, *id, &mut edited, normal, &edits);
        proptest::prop_assert_eq!(&edited_result, &whole_result, "{}", serde_json::Value::Array(ops.clone()));
        // The same, the object patched read member by member; and compared so.
        let mut by_members = patched.clone();
        let members_result = schema::codec::normalize_in_place_edited_members(
            s, *id, &mut by_members, |n| normal.get(n), &edits,
        );
        proptest::prop_assert_eq!(&members_result, &whole_result, "{}", serde_json::Value::Array(ops.clone()));
        if whole_result.is_ok() {
            proptest::prop_assert_eq!(&by_members, &whole, "{}", serde_json::Value::Array(ops.clone()));
            proptest::prop_assert_eq!(
                schema::codec::semantic_equal_members(s, *id, |n| normal.get(n), |n| whole.get(n)),
                schema::semantic_equal(s, *id, normal, &whole)
            );
            proptest::prop_assert_eq!(edited, whole, "{}", serde_json::Value::Array(ops));
        }
    }
}

/// How deep a kind's values nest: bounded for a Pod (its containers' fields are a few levels
/// down), unbounded for a kind whose types contain themselves.
#[test]
fn a_kinds_nesting_is_bounded_unless_its_types_contain_themselves() {
    let s = Schema::for_release(release(33));
    let pod = s.kind("", "v1", "Pod").expect("Pod");
    let depth = s
        .nesting(pod)
        .expect("a Pod's types do not contain themselves");
    // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    // .nodeSelectorTerms[].matchExpressions[].values alone is ten levels.
    assert!((10..20).contains(&depth), "{depth}");
    let config_map = s.kind("", "v1", "ConfigMap").expect("ConfigMap");
    // ConfigMap, ObjectMeta, managedFields' list, ManagedFieldsEntry (fieldsV1 not counted).
    assert_eq!(s.nesting(config_map), Some(4));
    let newest = Schema::for_release(KubeVersion::NEWEST);
    let workload = newest
        .kind("scheduling.k8s.io", "v1alpha3", "Workload")
        .expect("Workload");
    assert_eq!(
        newest.nesting(workload),
        None,
        "a CompositePodGroupTemplate holds CompositePodGroupTemplates"
    );
}

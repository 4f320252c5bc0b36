//! Conversion between the versions of a kind that differ in shape (`schema::convert`), as the
//! apiserver's scheme converts for `matchPolicy: Equivalent`: against what a real v1.33.3
//! apiserver returns when an object is read through the other version, and upstream's conversion
//! test tables.

use hookscope::KubeVersion;
use hookscope::api::GroupVersionKind;
use hookscope::schema::{Schema, convert};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/convert");

fn read(file: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/{file}")).expect("fixture");
    serde_json::from_str(&text).expect("JSON")
}

fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::new(group, version, kind)
}

/// The items of a `kubectl get -o json` list by name.
fn items(file: &str) -> Vec<(String, Value)> {
    read(file)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_string(),
                i.clone(),
            )
        })
        .collect()
}

/// Converts every object of list `a` to the version of list `b` and compares it with the same
/// object as the apiserver returned it there; `lossy` names the objects whose conversion does not
/// give back what was read, with the members that differ.
fn converted_as_read(a: &str, b: &str, kind: &str, lossy: &[(&str, &str, Value)]) {
    let schema = Schema::for_release(KubeVersion::new(33).unwrap());
    let theirs = items(b);
    let ours = items(a);
    assert_eq!(ours.len(), theirs.len());
    for ((name, object), (other, want)) in ours.iter().zip(&theirs) {
        assert_eq!(name, other);
        let from = gvk_of(object["apiVersion"].as_str().unwrap(), kind);
        let to = gvk_of(want["apiVersion"].as_str().unwrap(), kind);
        assert!(convert::converts(&from, &to), "{from:?} → {to:?}");
        let mut got = convert::convert(schema, object, &from, &to).expect("converts");
        let mut want = want.clone();
        for (n, pointer, value) in lossy.iter().filter(|(n, ..)| n == name) {
            assert_eq!(want.pointer(pointer), None, "{n} {pointer}");
            assert_eq!(got.pointer(pointer), Some(value), "{n} {pointer}");
            let (parent, member) = pointer.rsplit_once('/').unwrap();
            want.pointer_mut(parent).unwrap()[member] = value.clone();
        }
        // kubectl's list items lack nothing the conversion writes but Go's zero values, which
        // normalising for the kind gives both.
        let id = schema.kind(&to.group, &to.version, &to.kind).unwrap();
        hookscope::schema::codec::normalize_in_place(schema, id, &mut want).unwrap();
        hookscope::schema::codec::normalize_in_place(schema, id, &mut got).unwrap();
        assert_eq!(got, want, "{name}: {from:?} → {to:?}");
    }
}

/// HPAs created through v2 and v1 (metrics of every type, two CPU metrics, a behavior, a status
/// with current metrics and conditions, annotations a v2 object carries and v1 objects written
/// by hand) read through autoscaling/v1 are what converting the v2 reads gives.
#[test]
fn hpas_read_through_v1_are_their_v2_reads_converted() {
    converted_as_read("hpa-v2.json", "hpa-v1.json", "HorizontalPodAutoscaler", &[]);
}

/// And the other way, but where v1 cannot say what v2 said: an Object metric's AverageValue
/// target and an External metric's current average have no value in v2, and v1's `targetValue`
/// and `currentValue` (not pointers) come back as zero values.
#[test]
fn hpas_read_through_v2_are_their_v1_reads_converted_but_for_what_v1_loses() {
    converted_as_read(
        "hpa-v1.json",
        "hpa-v2.json",
        "HorizontalPodAutoscaler",
        &[
            (
                "h3",
                "/spec/metrics/0/object/target/value",
                Value::String("0".into()),
            ),
            (
                "h1",
                "/status/currentMetrics/3/external/current/value",
                Value::String("0".into()),
            ),
        ],
    );
}

/// core/v1 Events read through events.k8s.io/v1 and back.
#[test]
fn events_read_through_the_other_group_are_converted() {
    converted_as_read(
        "events-core-v1.json",
        "events-events.k8s.io-v1.json",
        "Event",
        &[],
    );
    converted_as_read(
        "events-events.k8s.io-v1.json",
        "events-core-v1.json",
        "Event",
        &[],
    );
}

/// Upstream's conversion tables and the cases the conversion code spells out
/// (`cases.json`), per release.
#[test]
fn upstream_conversion_cases() {
    let cases = read("cases.json");
    let cases = cases["cases"].as_array().expect("cases");
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let minor: u32 = case["release"].as_str().unwrap()[2..].parse().unwrap();
        let schema = Schema::for_release(KubeVersion::new(minor).unwrap());
        let kind = case["in"]["kind"].as_str().unwrap();
        let from = gvk_of(case["from"].as_str().unwrap(), kind);
        let to = gvk_of(case["to"].as_str().unwrap(), kind);
        let got = convert::convert(schema, &case["in"], &from, &to)
            .unwrap_or_else(|| panic!("{name}: not converted"));
        assert_eq!(got["apiVersion"], case["to"], "{name}");
        for (member, want) in case["want"].as_object().unwrap() {
            assert_eq!(&got[member], want, "{name} ({}): {member}", case["release"]);
        }
    }
}

/// Kinds whose versions differ only in label are relabelled, not converted.
#[test]
fn kinds_alike_in_every_version_are_not_converted() {
    let fc = |v: &str, k: &str| GroupVersionKind::new("flowcontrol.apiserver.k8s.io", v, k);
    assert!(!convert::converts(
        &fc("v1beta3", "FlowSchema"),
        &fc("v1", "FlowSchema")
    ));
    assert!(convert::converts(
        &fc("v1beta3", "PriorityLevelConfiguration"),
        &fc("v1", "PriorityLevelConfiguration")
    ));
    let hpa = |v: &str| GroupVersionKind::new("autoscaling", v, "HorizontalPodAutoscaler");
    assert!(!convert::converts(&hpa("v2"), &hpa("v2")));
    assert!(!convert::converts(
        &GroupVersionKind::new("apps", "v1", "Deployment"),
        &GroupVersionKind::new("extensions", "v1beta1", "Deployment")
    ));
}

/// The one change of shape kubernetes/api makes to the equivalent pairs from 1.34 to 1.37:
/// `HorizontalPodAutoscalerCondition.observedGeneration`, new in 1.37 in both autoscaling
/// versions. Converted to v1 it travels in the conditions annotation (v1's own condition type,
/// marshalled) and comes back to v2; a release whose types lack it drops it.
#[test]
fn a_1_37_condition_keeps_its_observed_generation_through_v1() {
    let v2 = gvk_of("autoscaling/v2", "HorizontalPodAutoscaler");
    let v1 = gvk_of("autoscaling/v1", "HorizontalPodAutoscaler");
    let hpa: Value = serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "h", "namespace": "default"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"}, "maxReplicas": 3},
        "status": {"desiredReplicas": 1, "conditions": [{
            "type": "AbleToScale", "status": "True", "observedGeneration": 4,
            "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "ReadyForNewScale"
        }]}
    });
    for (minor, kept) in [(36, false), (37, true)] {
        let schema = Schema::for_release(KubeVersion::new(minor).unwrap());
        let as_v1 = convert::convert(schema, &hpa, &v2, &v1).expect("converts");
        let annotation = as_v1["metadata"]["annotations"][convert::CONDITIONS_ANNOTATION]
            .as_str()
            .expect("conditions annotation");
        assert_eq!(
            annotation.contains(r#""observedGeneration":4"#),
            kept,
            "1.{minor}: {annotation}"
        );
        let back = convert::convert(schema, &as_v1, &v1, &v2).expect("converts");
        let condition = &back["status"]["conditions"][0];
        assert_eq!(
            condition.get("observedGeneration").is_some(),
            kept,
            "1.{minor}: {back}"
        );
        assert_eq!(condition["reason"], "ReadyForNewScale");
    }
}

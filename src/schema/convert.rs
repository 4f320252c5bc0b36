//! Conversion of a built-in object between two versions of its kind, as kube-apiserver's scheme
//! converts it for a webhook or policy matched through `matchPolicy: Equivalent` (the admission
//! dispatchers' `ConvertToGVK`): from the version it is in to the internal version, then to the
//! version asked for.
//!
//! Modelled: the pairs of equivalent built-in versions served by default in 1.28–1.37 whose
//! shapes differ (see `docs/typed-objects.md`); every other pair differs only in label.
//!
//! * `autoscaling/v1` ↔ `autoscaling/v2` HorizontalPodAutoscaler (`pkg/apis/autoscaling/v1/
//!   conversion.go`, `v2/conversion.go`). The internal version is held here as the v2 shape (the
//!   internal types are v2's, field for field), so v2 ↔ internal only drops the round-trip
//!   annotations, and v1 ↔ internal carries the fields v1 lacks in annotations:
//!   `autoscaling.alpha.kubernetes.io/metrics` (the metrics other than a CPU utilization target,
//!   as v1 `MetricSpec`s), `…/current-metrics` (every current metric, as v1 `MetricStatus`es),
//!   `…/behavior` (the internal `HorizontalPodAutoscalerBehavior` as Go marshals a struct without
//!   JSON tags) and `…/conditions`.
//! * flowcontrol PriorityLevelConfiguration v1beta2 / v1beta3 / v1 (the concurrency shares'
//!   name, pointer and v1beta3's preserve-zero annotation).
//! * core/v1 ↔ events.k8s.io/v1 Event (members renamed).
//!
//! Pure: no IO. The result is normalised for the target kind (Go's field order, `omitempty`).

use serde_json::{Map, Value, json};

use super::{Schema, Type, TypeId, codec};
use crate::api::meta::GroupVersionKind;
use crate::jsonpatch::gostr;

/// The annotation holding the metrics other than a CPU utilization target in v1.
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// The annotation holding the current metrics in v1.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// The annotation holding the conditions in v1.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// The annotation holding the scaling behavior in v1.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// From 1.33: dropped with the others (`DropRoundTripHorizontalPodAutoscalerAnnotations`).
const TOLERANCE_ANNOTATIONS: [&str; 2] = [
    "autoscaling.alpha.kubernetes.io/scale-down-tolerance",
    "autoscaling.alpha.kubernetes.io/scale-up-tolerance",
];
/// `autoscaling.DefaultCPUUtilization`: the target v1 conversion gives an HPA without metrics.
const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Whether converting between these two kinds changes more than `apiVersion` and `kind`
/// (a modelled conversion): for every other pair the object is relabelled.
pub fn converts(from: &GroupVersionKind, to: &GroupVersionKind) -> bool {
    from != to && version_of(from).is_some_and(|f| version_of(to).is_some_and(|t| f.same_kind(t)))
}

/// `object` (of kind `from`) converted to `to` through the internal version, normalised for
/// `to`; `None` when the pair has no modelled conversion ([`converts`]) or the object does not
/// decode into `from`'s Go type.
pub fn convert(
    schema: &Schema,
    object: &Value,
    from: &GroupVersionKind,
    to: &GroupVersionKind,
) -> Option<Value> {
    if !converts(from, to) {
        return None;
    }
    let from_id = schema.kind(&from.group, &from.version, &from.kind)?;
    let to_id = schema.kind(&to.group, &to.version, &to.kind)?;
    let mut object = object.clone();
    codec::normalize_in_place(schema, from_id, &mut object).ok()?;
    let hpa = Hpa { schema };
    let release = schema.release();
    let internal = match version_of(from)? {
        Version::HpaV1 => hpa.v1_to_internal(&object),
        Version::HpaV2 => hpa.v2_to_internal(object),
        Version::PriorityLevel(v) => priority_level_to_internal(object, v, release),
        Version::Event(v) => event_convert(object, v, EventVersion::Core),
    };
    let mut out = match version_of(to)? {
        Version::HpaV1 => hpa.internal_to_v1(&internal),
        Version::HpaV2 => hpa.v2_to_internal(internal),
        Version::PriorityLevel(v) => priority_level_from_internal(internal, v, release),
        Version::Event(v) => event_convert(internal, EventVersion::Core, v),
    };
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(to.api_version()));
        m.insert("kind".into(), Value::String(to.kind.clone()));
    }
    codec::normalize_in_place(schema, to_id, &mut out).ok()?;
    Some(out)
}

/// A version of a kind whose versions differ in shape.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    HpaV1,
    HpaV2,
    PriorityLevel(PriorityLevelVersion),
    Event(EventVersion),
}

impl Version {
    fn same_kind(self, other: Version) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
            || matches!(
                (self, other),
                (Version::HpaV1, Version::HpaV2) | (Version::HpaV2, Version::HpaV1)
            )
    }
}

/// The served versions of flowcontrol's PriorityLevelConfiguration (1.28: v1beta2 and v1beta3;
/// 1.29–1.31: v1beta3 and v1).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PriorityLevelVersion {
    /// `assuredConcurrencyShares` for v1beta3's `nominalConcurrencyShares`.
    V1beta2,
    /// `nominalConcurrencyShares` an `int32`; from 1.29 a zero is marked by an annotation.
    V1beta3,
    /// `nominalConcurrencyShares` a pointer.
    V1,
}

/// core/v1 Event and events.k8s.io/v1 Event, which share storage.
#[derive(Clone, Copy, PartialEq, Eq)]
enum EventVersion {
    Core,
    Events,
}

fn version_of(gvk: &GroupVersionKind) -> Option<Version> {
    match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => Some(Version::HpaV1),
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => Some(Version::HpaV2),
        ("flowcontrol.apiserver.k8s.io", v, "PriorityLevelConfiguration") => match v {
            "v1beta2" => Some(Version::PriorityLevel(PriorityLevelVersion::V1beta2)),
            "v1beta3" => Some(Version::PriorityLevel(PriorityLevelVersion::V1beta3)),
            "v1" => Some(Version::PriorityLevel(PriorityLevelVersion::V1)),
            _ => None,
        },
        ("", "v1", "Event") => Some(Version::Event(EventVersion::Core)),
        ("events.k8s.io", "v1", "Event") => Some(Version::Event(EventVersion::Events)),
        _ => None,
    }
}

/// `flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares` (from 1.29): v1beta3 marks a
/// zero `nominalConcurrencyShares` that is not to be defaulted.
pub const PRESERVE_ZERO_SHARES_ANNOTATION: &str =
    "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares";

/// The limited configuration of a priority level, when it has one.
fn limited_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object.get_mut("spec")?.get_mut("limited")?.as_object_mut()
}

/// A PriorityLevelConfiguration to the internal version, held as v1beta3's shape without the
/// annotation (`pkg/apis/flowcontrol/v1beta2/conversion.go`, `v1beta3/conversion.go`, and v1's
/// generated `Convert_Pointer_int32_To_int32`: nil is 0).
fn priority_level_to_internal(
    mut object: Value,
    from: PriorityLevelVersion,
    release: crate::KubeVersion,
) -> Value {
    if let Some(limited) = limited_mut(&mut object) {
        let shares = match from {
            PriorityLevelVersion::V1beta2 => limited.remove("assuredConcurrencyShares"),
            _ => limited.remove("nominalConcurrencyShares"),
        };
        let shares = shares.filter(|v| !v.is_null()).unwrap_or(json!(0));
        limited.insert("nominalConcurrencyShares".into(), shares);
    }
    if from == PriorityLevelVersion::V1beta3 && release.at_least(29) {
        remove_annotation(&mut object, PRESERVE_ZERO_SHARES_ANNOTATION);
    }
    object
}

/// The internal PriorityLevelConfiguration to `to`.
fn priority_level_from_internal(
    mut object: Value,
    to: PriorityLevelVersion,
    release: crate::KubeVersion,
) -> Value {
    let mut zero = false;
    if let Some(limited) = limited_mut(&mut object) {
        let shares = limited
            .remove("nominalConcurrencyShares")
            .unwrap_or(json!(0));
        zero = shares.as_i64() == Some(0);
        let name = match to {
            PriorityLevelVersion::V1beta2 => "assuredConcurrencyShares",
            _ => "nominalConcurrencyShares",
        };
        limited.insert(name.into(), shares);
    }
    if to == PriorityLevelVersion::V1beta3 && zero && release.at_least(29) {
        set_annotation(&mut object, PRESERVE_ZERO_SHARES_ANNOTATION, "", false);
    }
    object
}

/// The members events.k8s.io/v1 names differently from core/v1 (`pkg/apis/events/v1/
/// conversion.go`; core's internal `ReportingController` is core/v1's `reportingComponent`):
/// (events.k8s.io, core).
const EVENT_RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

/// An Event of `from` to `to` (core/v1's shape being the internal version's, field for field).
fn event_convert(mut object: Value, from: EventVersion, to: EventVersion) -> Value {
    if from != to
        && let Some(m) = object.as_object_mut()
    {
        for (events, core) in EVENT_RENAMES {
            let (old, new) = if from == EventVersion::Events {
                (events, core)
            } else {
                (core, events)
            };
            if let Some(v) = m.remove(old) {
                m.insert(new.into(), v);
            }
        }
    }
    object
}

/// Removes an annotation.
fn remove_annotation(object: &mut Value, key: &str) {
    if let Some(a) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(key);
    }
}

/// Sets an annotation (`replace`: over one already there; else only when absent), making the
/// map when there is none.
fn set_annotation(object: &mut Value, key: &str, value: &str, replace: bool) {
    let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
    if !annotations.is_object() {
        *annotations = json!({});
    }
    if let Some(a) = annotations.as_object_mut()
        && (replace || !a.contains_key(key))
    {
        a.insert(key.into(), Value::String(value.into()));
    }
}

/// A member that is present and not `null` (Go's non-nil pointer, slice or map).
fn get<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    v.get(key).filter(|v| !v.is_null())
}

/// Inserts `value` unless it is absent (nil).
fn put(out: &mut Map<String, Value>, key: &str, value: Option<&Value>) {
    if let Some(v) = value.filter(|v| !v.is_null()) {
        out.insert(key.into(), v.clone());
    }
}

/// A `resource.Quantity` (not a pointer): its value, or the zero quantity.
fn quantity_or_zero(v: Option<&Value>) -> Value {
    v.filter(|v| !v.is_null())
        .cloned()
        .unwrap_or_else(|| json!("0"))
}

/// A non-empty list member.
fn non_empty_list<'v>(v: &'v Value, key: &str) -> Option<&'v Vec<Value>> {
    get(v, key)?.as_array().filter(|a| !a.is_empty())
}

/// `out.Annotations, _ = DropRoundTripHorizontalPodAutoscalerAnnotations(out.Annotations)`.
fn drop_round_trip_annotations(object: &mut Value, with_tolerance: bool) {
    let Some(annotations) = object
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for key in [
        METRIC_SPECS_ANNOTATION,
        BEHAVIOR_ANNOTATION,
        METRIC_STATUSES_ANNOTATION,
        CONDITIONS_ANNOTATION,
    ] {
        annotations.remove(key);
    }
    if with_tolerance {
        for key in TOLERANCE_ANNOTATIONS {
            annotations.remove(key);
        }
    }
}

struct Hpa<'s> {
    schema: &'s Schema,
}

impl Hpa<'_> {
    fn has_tolerance(&self) -> bool {
        self.schema.release().at_least(33)
    }

    fn ty(&self, name: &str) -> Option<TypeId> {
        self.schema.by_name(name)
    }

    /// `Convert_v2_HorizontalPodAutoscaler_To_autoscaling_…` (and back: the same).
    fn v2_to_internal(&self, mut object: Value) -> Value {
        drop_round_trip_annotations(&mut object, self.has_tolerance());
        object
    }

    /// `Convert_v1_HorizontalPodAutoscaler_To_autoscaling_HorizontalPodAutoscaler`.
    fn v1_to_internal(&self, v1: &Value) -> Value {
        let mut out = Map::new();
        put(&mut out, "metadata", v1.get("metadata"));
        let spec_in = v1.get("spec").cloned().unwrap_or(Value::Null);
        let status_in = v1.get("status").cloned().unwrap_or(Value::Null);

        let mut spec = Map::new();
        copy_members(&mut spec, &spec_in, &SPEC_SHARED);
        let mut metrics: Option<Vec<Value>> = get(&spec_in, "targetCPUUtilizationPercentage")
            .map(|cpu| vec![cpu_utilization_metric(cpu.clone())]);

        let mut status = Map::new();
        copy_members(&mut status, &status_in, &STATUS_SHARED);
        let mut current: Option<Vec<Value>> = get(&status_in, "currentCPUUtilizationPercentage")
            .map(|cpu| {
                vec![json!({"type": "Resource", "resource": {
                    "name": "cpu", "current": {"averageUtilization": cpu}}})]
            });
        let mut conditions: Option<Value> = None;
        let mut behavior: Option<Value> = None;

        let annotation = |key: &str| {
            v1.get("metadata")
                .and_then(|m| get(m, "annotations"))
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
        };
        if let Some(text) = annotation(METRIC_SPECS_ANNOTATION)
            && let Some(other) = self.unmarshal_list(text, "autoscaling/v1.MetricSpec")
        {
            let mut all: Vec<Value> = other.iter().map(|m| metric_from_v1(m, &SPEC)).collect();
            if let Some(cpu) = metrics.as_ref().and_then(|m| m.first()) {
                all.push(cpu.clone());
            }
            metrics = Some(all);
        }
        if let Some(text) = annotation(BEHAVIOR_ANNOTATION)
            && let Some(b) = self.unmarshal_behavior(text)
        {
            behavior = Some(b);
        }
        if let Some(text) = annotation(METRIC_STATUSES_ANNOTATION)
            && let Some(list) = self.unmarshal_list(text, "autoscaling/v1.MetricStatus")
        {
            current = Some(list.iter().map(|m| metric_from_v1(m, &STATUS)).collect());
        }
        if metrics.as_ref().is_none_or(Vec::is_empty) {
            metrics = Some(vec![cpu_utilization_metric(json!(DEFAULT_CPU_UTILIZATION))]);
        }
        if let Some(text) = annotation(CONDITIONS_ANNOTATION)
            && let Some(list) =
                self.unmarshal_list(text, "autoscaling/v1.HorizontalPodAutoscalerCondition")
        {
            conditions = Some(Value::Array(list));
        }
        if let Some(m) = metrics {
            spec.insert("metrics".into(), Value::Array(m));
        }
        put(&mut spec, "behavior", behavior.as_ref());
        if let Some(c) = current {
            status.insert("currentMetrics".into(), Value::Array(c));
        }
        put(&mut status, "conditions", conditions.as_ref());
        out.insert("spec".into(), Value::Object(spec));
        out.insert("status".into(), Value::Object(status));
        let mut out = Value::Object(out);
        drop_round_trip_annotations(&mut out, self.has_tolerance());
        out
    }

    /// `Convert_autoscaling_HorizontalPodAutoscaler_To_v1_HorizontalPodAutoscaler`.
    fn internal_to_v1(&self, internal: &Value) -> Value {
        let mut out = Map::new();
        let metadata = internal.get("metadata").cloned().unwrap_or(json!({}));
        let spec_in = internal.get("spec").cloned().unwrap_or(Value::Null);
        let status_in = internal.get("status").cloned().unwrap_or(Value::Null);
        let metrics = non_empty_list(&spec_in, "metrics");
        let is_cpu_utilization = |m: &Value| {
            m.get("type").and_then(Value::as_str) == Some("Resource")
                && get(m, "resource").is_some_and(|r| {
                    r.get("name").and_then(Value::as_str) == Some("cpu")
                        && r.get("target")
                            .is_some_and(|t| get(t, "averageUtilization").is_some())
                })
        };

        let mut spec = Map::new();
        copy_members(&mut spec, &spec_in, &SPEC_SHARED);
        if let Some(cpu) = metrics.and_then(|m| m.iter().find(|m| is_cpu_utilization(m))) {
            put(
                &mut spec,
                "targetCPUUtilizationPercentage",
                cpu.pointer("/resource/target/averageUtilization"),
            );
        }

        let mut status = Map::new();
        copy_members(&mut status, &status_in, &STATUS_SHARED);
        let current = non_empty_list(&status_in, "currentMetrics");
        // The last CPU metric with a utilization wins (the loop does not stop at the first).
        for m in current.into_iter().flatten() {
            if m.get("type").and_then(Value::as_str) == Some("Resource")
                && get(m, "resource")
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                    == Some("cpu")
                && let Some(u) = m
                    .pointer("/resource/current/averageUtilization")
                    .filter(|u| !u.is_null())
            {
                status.insert("currentCPUUtilizationPercentage".into(), u.clone());
            }
        }

        let mut added: Vec<(&str, String)> = Vec::new();
        let other: Vec<Value> = metrics
            .into_iter()
            .flatten()
            .filter(|m| !is_cpu_utilization(m))
            .map(|m| metric_to_v1(m, &SPEC))
            .collect();
        if !other.is_empty()
            && let Some(text) = self.marshal_list(&other, "autoscaling/v1.MetricSpec")
        {
            added.push((METRIC_SPECS_ANNOTATION, text));
        }
        if let Some(current) = current {
            let list: Vec<Value> = current.iter().map(|m| metric_to_v1(m, &STATUS)).collect();
            if let Some(text) = self.marshal_list(&list, "autoscaling/v1.MetricStatus") {
                added.push((METRIC_STATUSES_ANNOTATION, text));
            }
        }
        if let Some(b) = get(&spec_in, "behavior") {
            added.push((BEHAVIOR_ANNOTATION, self.marshal_behavior(b)));
        }
        if let Some(conditions) = non_empty_list(&status_in, "conditions")
            && let Some(text) = self.marshal_list(
                conditions,
                "autoscaling/v1.HorizontalPodAutoscalerCondition",
            )
        {
            added.push((CONDITIONS_ANNOTATION, text));
        }
        // `DropRoundTripHorizontalPodAutoscalerAnnotations`, then the ones this conversion makes.
        let mut holder = json!({ "metadata": metadata });
        drop_round_trip_annotations(&mut holder, self.has_tolerance());
        for (k, v) in added {
            set_annotation(&mut holder, k, &v, true);
        }
        let metadata = holder["metadata"].take();
        out.insert("metadata".into(), metadata);
        out.insert("spec".into(), Value::Object(spec));
        out.insert("status".into(), Value::Object(status));
        Value::Object(out)
    }

    /// `json.Marshal` of a slice of the struct type `name`.
    fn marshal_list(&self, items: &[Value], name: &str) -> Option<String> {
        let id = self.ty(name)?;
        let mut out = String::from("[");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&codec::encode(self.schema, id, item).ok()?);
        }
        out.push(']');
        Some(out)
    }

    /// `json.Unmarshal` (encoding/json: member names matched case-insensitively) of a slice of
    /// the struct type `name`; `None` on an error, which the conversion ignores.
    fn unmarshal_list(&self, text: &str, name: &str) -> Option<Vec<Value>> {
        let id = self.ty(name)?;
        let value: Value = crate::json::from_str(text).ok()?;
        let items = match value {
            Value::Null => return Some(Vec::new()),
            Value::Array(items) => items,
            _ => return None,
        };
        let mut out = Vec::with_capacity(items.len());
        for mut item in items {
            if item.is_null() {
                item = json!({});
            }
            if !item.is_object() {
                return None;
            }
            fold_keys(self.schema, &Type::Struct(id), &mut item);
            codec::normalize_in_place(self.schema, id, &mut item).ok()?;
            out.push(item);
        }
        Some(out)
    }

    /// The internal `HorizontalPodAutoscalerBehavior` (fields without JSON tags: Go's names)
    /// as `json.Marshal` writes it, from the v2-shaped behavior.
    fn marshal_behavior(&self, b: &Value) -> String {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"ScaleUp\":");
        self.marshal_rules(&mut out, get(b, "scaleUp"));
        out.extend_from_slice(b",\"ScaleDown\":");
        self.marshal_rules(&mut out, get(b, "scaleDown"));
        out.push(b'}');
        String::from_utf8(out).unwrap_or_default()
    }

    fn marshal_rules(&self, out: &mut Vec<u8>, rules: Option<&Value>) {
        let Some(r) = rules else {
            out.extend_from_slice(b"null");
            return;
        };
        let raw = |out: &mut Vec<u8>, v: Option<&Value>| match v {
            Some(v) => out.extend_from_slice(v.to_string().as_bytes()),
            None => out.extend_from_slice(b"null"),
        };
        let string = |out: &mut Vec<u8>, v: Option<&Value>| match v.and_then(Value::as_str) {
            Some(s) => {
                gostr::append_string_html(out, s);
            }
            None => out.extend_from_slice(b"null"),
        };
        out.extend_from_slice(b"{\"StabilizationWindowSeconds\":");
        raw(out, get(r, "stabilizationWindowSeconds"));
        out.extend_from_slice(b",\"SelectPolicy\":");
        string(out, get(r, "selectPolicy"));
        out.extend_from_slice(b",\"Policies\":");
        match get(r, "policies").and_then(Value::as_array) {
            None => out.extend_from_slice(b"null"),
            Some(policies) => {
                out.push(b'[');
                for (i, p) in policies.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"Type\":");
                    gostr::append_string_html(
                        out,
                        p.get("type").and_then(Value::as_str).unwrap_or(""),
                    );
                    out.extend_from_slice(b",\"Value\":");
                    raw(out, Some(p.get("value").unwrap_or(&json!(0))));
                    out.extend_from_slice(b",\"PeriodSeconds\":");
                    raw(out, Some(p.get("periodSeconds").unwrap_or(&json!(0))));
                    out.push(b'}');
                }
                out.push(b']');
            }
        }
        if self.has_tolerance() {
            out.extend_from_slice(b",\"Tolerance\":");
            match get(r, "tolerance") {
                Some(q) => string(out, Some(q)),
                None => out.extend_from_slice(b"null"),
            }
        }
        out.push(b'}');
    }

    /// `json.Unmarshal` of the behavior annotation into the internal type: the v2-shaped
    /// behavior when it decodes and is not empty.
    fn unmarshal_behavior(&self, text: &str) -> Option<Value> {
        let id = self.ty("autoscaling/v2.HorizontalPodAutoscalerBehavior")?;
        let mut value: Value = crate::json::from_str(text).ok()?;
        if value.is_null() {
            return None;
        }
        if !value.is_object() {
            return None;
        }
        // The internal type has no JSON tags: Go's field names, which fold to v2's.
        fold_keys(self.schema, &Type::Struct(id), &mut value);
        if !self.has_tolerance() {
            for rules in ["scaleUp", "scaleDown"] {
                if let Some(r) = value.get_mut(rules).and_then(Value::as_object_mut) {
                    r.remove("tolerance");
                }
            }
        }
        codec::normalize_in_place(self.schema, id, &mut value).ok()?;
        if get(&value, "scaleUp").is_none() && get(&value, "scaleDown").is_none() {
            return None;
        }
        Some(value)
    }
}

/// Renames the members of `value` to the field names of its type that they match as
/// `encoding/json` matches them: exactly, else ignoring case.
fn fold_keys(schema: &Schema, ty: &Type, value: &mut Value) {
    match (ty, value) {
        (Type::Ptr(inner), v) => fold_keys(schema, inner, v),
        (Type::List(inner), Value::Array(items)) => {
            for item in items {
                fold_keys(schema, inner, item);
            }
        }
        (Type::Map(inner), Value::Object(m)) => {
            for v in m.values_mut() {
                fold_keys(schema, inner, v);
            }
        }
        (Type::Struct(id), Value::Object(m)) => {
            let st = schema.get(*id);
            let members = std::mem::take(m);
            for (k, mut v) in members {
                let field = st
                    .field(&k)
                    .or_else(|| st.fields.iter().find(|f| f.name.eq_ignore_ascii_case(&k)));
                let Some(field) = field else { continue };
                fold_keys(schema, &field.ty, &mut v);
                // A later member of the same field replaces an earlier one, as in Go.
                m.insert(field.name.to_string(), v);
            }
        }
        _ => {}
    }
}

/// The internal metric for a CPU utilization target.
fn cpu_utilization_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": utilization}}})
}

/// `{kind, name, apiVersion}` of a cross-version object reference.
fn reference(v: Option<&Value>) -> Value {
    let mut out = Map::new();
    if let Some(v) = v {
        put(&mut out, "kind", v.get("kind"));
        put(&mut out, "name", v.get("name"));
        put(&mut out, "apiVersion", v.get("apiVersion"));
    }
    Value::Object(out)
}

/// `{name, selector}` of a metric identifier.
fn identifier(name: Option<&Value>, selector: Option<&Value>) -> Value {
    let mut out = Map::new();
    put(&mut out, "name", name);
    put(&mut out, "selector", selector);
    Value::Object(out)
}

/// The names one side of a metric (its spec's target or its status's current value) has in v1
/// and internally, and where the two sides' conversions differ.
struct Side {
    /// `target` or `current`: the internal member holding the value.
    inner: &'static str,
    /// v1's member for the Object and External metrics' value.
    value: &'static str,
    /// v1's member for an average value.
    average_value: &'static str,
    /// v1's member for a Resource or ContainerResource average utilization.
    average_utilization: &'static str,
    /// Whether the internal value has a `type` (targets do; current values do not).
    typed: bool,
    /// Whether v1's Resource average value and External value are quantities (status), not
    /// pointers (spec): absent they are zero.
    zero_values: bool,
}

/// A metric's target (`MetricSpec`).
const SPEC: Side = Side {
    inner: "target",
    value: "targetValue",
    average_value: "targetAverageValue",
    average_utilization: "targetAverageUtilization",
    typed: true,
    zero_values: false,
};

/// A metric's current value (`MetricStatus`).
const STATUS: Side = Side {
    inner: "current",
    value: "currentValue",
    average_value: "currentAverageValue",
    average_utilization: "currentAverageUtilization",
    typed: false,
    zero_values: true,
};

/// The members of the spec both versions have, alike.
const SPEC_SHARED: [&str; 3] = ["scaleTargetRef", "minReplicas", "maxReplicas"];
/// The members of the status both versions have, alike.
const STATUS_SHARED: [&str; 4] = [
    "observedGeneration",
    "lastScaleTime",
    "currentReplicas",
    "desiredReplicas",
];

/// Copies the members `keys` of `from` that are set.
fn copy_members(out: &mut Map<String, Value>, from: &Value, keys: &[&str]) {
    for key in keys {
        put(out, key, from.get(*key));
    }
}

/// A quantity v1 holds as a value where `zero` (absent is zero), else as a pointer.
fn put_quantity(out: &mut Map<String, Value>, key: &str, v: Option<&Value>, zero: bool) {
    if zero {
        out.insert(key.into(), quantity_or_zero(v));
    } else {
        put(out, key, v);
    }
}

/// `Convert_autoscaling_MetricSpec_To_v1_MetricSpec` (with [`SPEC`]) and
/// `Convert_autoscaling_MetricStatus_To_v1_MetricStatus` (with [`STATUS`]).
fn metric_to_v1(m: &Value, side: &Side) -> Value {
    let inner = |v: &Value, key: &str| v.get(side.inner).and_then(|t| get(t, key)).cloned();
    let mut out = Map::new();
    put(&mut out, "type", m.get("type"));
    if let Some(o) = get(m, "object") {
        let mut v = Map::new();
        v.insert("target".into(), reference(o.get("describedObject")));
        put(&mut v, "metricName", o.pointer("/metric/name"));
        v.insert(
            side.value.into(),
            quantity_or_zero(inner(o, "value").as_ref()),
        );
        put(&mut v, "selector", o.pointer("/metric/selector"));
        put(&mut v, "averageValue", inner(o, "averageValue").as_ref());
        out.insert("object".into(), Value::Object(v));
    }
    if let Some(p) = get(m, "pods") {
        let mut v = Map::new();
        put(&mut v, "metricName", p.pointer("/metric/name"));
        let average = inner(p, "averageValue");
        v.insert(
            side.average_value.into(),
            quantity_or_zero(average.as_ref()),
        );
        put(&mut v, "selector", p.pointer("/metric/selector"));
        out.insert("pods".into(), Value::Object(v));
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = get(m, key) {
            let mut v = Map::new();
            put(&mut v, "name", r.get("name"));
            let utilization = inner(r, "averageUtilization");
            put(&mut v, side.average_utilization, utilization.as_ref());
            let average = inner(r, "averageValue");
            put_quantity(
                &mut v,
                side.average_value,
                average.as_ref(),
                side.zero_values,
            );
            put(&mut v, "container", r.get("container"));
            out.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(e) = get(m, "external") {
        let mut v = Map::new();
        put(&mut v, "metricName", e.pointer("/metric/name"));
        put(&mut v, "metricSelector", e.pointer("/metric/selector"));
        let value = inner(e, "value");
        put_quantity(&mut v, side.value, value.as_ref(), side.zero_values);
        put(
            &mut v,
            side.average_value,
            inner(e, "averageValue").as_ref(),
        );
        out.insert("external".into(), Value::Object(v));
    }
    Value::Object(out)
}

/// An internal metric source or status of a metric identifier: `{metric, target|current}`.
fn measured(metric: Value, side: &Side, inner: Map<String, Value>) -> Map<String, Value> {
    let mut v = Map::new();
    v.insert("metric".into(), metric);
    v.insert(side.inner.into(), Value::Object(inner));
    v
}

/// `Convert_v1_MetricSpec_To_autoscaling_MetricSpec` (with [`SPEC`]) and
/// `Convert_v1_MetricStatus_To_autoscaling_MetricStatus` (with [`STATUS`]).
fn metric_from_v1(m: &Value, side: &Side) -> Value {
    // The internal target's `type`, for targets: `set` when the member deciding it is set.
    let typed = |inner: &mut Map<String, Value>, set: bool, set_ty: &str, unset_ty: &str| {
        if side.typed {
            inner.insert("type".into(), json!(if set { set_ty } else { unset_ty }));
        }
    };
    let mut out = Map::new();
    put(&mut out, "type", m.get("type"));
    if let Some(o) = get(m, "object") {
        let average = get(o, "averageValue");
        let mut inner = Map::new();
        typed(&mut inner, average.is_some(), "AverageValue", "Value");
        inner.insert("value".into(), quantity_or_zero(o.get(side.value)));
        put(&mut inner, "averageValue", average);
        let mut v = measured(
            identifier(o.get("metricName"), o.get("selector")),
            side,
            inner,
        );
        v.insert("describedObject".into(), reference(o.get("target")));
        out.insert("object".into(), Value::Object(v));
    }
    if let Some(p) = get(m, "pods") {
        let mut inner = Map::new();
        typed(&mut inner, true, "AverageValue", "AverageValue");
        inner.insert(
            "averageValue".into(),
            quantity_or_zero(p.get(side.average_value)),
        );
        let v = measured(
            identifier(p.get("metricName"), p.get("selector")),
            side,
            inner,
        );
        out.insert("pods".into(), Value::Object(v));
    }
    for key in ["resource", "containerResource"] {
        if let Some(r) = get(m, key) {
            let utilization = get(r, side.average_utilization);
            let mut inner = Map::new();
            typed(
                &mut inner,
                utilization.is_some(),
                "Utilization",
                "AverageValue",
            );
            put_quantity(
                &mut inner,
                "averageValue",
                r.get(side.average_value),
                side.zero_values,
            );
            put(&mut inner, "averageUtilization", utilization);
            let mut v = Map::new();
            put(&mut v, "name", r.get("name"));
            v.insert(side.inner.into(), Value::Object(inner));
            put(&mut v, "container", r.get("container"));
            out.insert(key.into(), Value::Object(v));
        }
    }
    if let Some(e) = get(m, "external") {
        let value = get(e, side.value);
        let mut inner = Map::new();
        typed(&mut inner, value.is_some(), "Value", "AverageValue");
        put_quantity(&mut inner, "value", value, side.zero_values);
        put(&mut inner, "averageValue", e.get(side.average_value));
        let metric = identifier(e.get("metricName"), e.get("metricSelector"));
        out.insert(
            "external".into(),
            Value::Object(measured(metric, side, inner)),
        );
    }
    Value::Object(out)
}

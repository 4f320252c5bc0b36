//! What kube-apiserver's registry strategies do to an object between mutating and validating
//! admission (`rest.BeforeCreate` and `rest.BeforeUpdate` run `PrepareForCreate` and
//! `PrepareForUpdate` after the mutating webhooks and before validation, so validating webhooks
//! see their work): the `generation` a create starts at and an update of the spec bumps, the
//! status a create starts with, the status an update of the main resource cannot change and the
//! spec an update of `status` cannot change, the fields a feature gate off by default in the
//! release drops ([`drop`], with the defaults of [`gates`]), a DaemonSet's template generation
//! annotation and a Namespace's `kubernetes` finalizer; what `rest.BeforeUpdate` keeps of every
//! updated object's metadata; and what follows from the object itself ([`objects`]: a Pod's
//! conditions, AppArmor fields and affinity, a Job's selector, a claim's data sources, a
//! Service's allocated and type-dependent fields).
//!
//! Only what is visible to webhooks and follows from the objects and the release is modelled; each
//! entry of [`STRATEGIES`] names the upstream strategy it follows (`pkg/registry/*/*/strategy.go`).

mod drop;
mod gates;
mod objects;
mod warnings;

pub(crate) use warnings::{strategy_warnings, warns_for};

use serde_json::{Map, Value};

use drop::drop_disabled_fields;

/// Drops from a whole `object` of `group`/`resource` what a feature gate off by default in
/// `release` drops before validation (see [`drop`]), keeping what `old` already uses.
pub(crate) fn drop_disabled(
    release: KubeVersion,
    group: &str,
    resource: &str,
    object: &mut Value,
    old: Option<&Value>,
) -> bool {
    let Some(top) = drop::member(group, resource) else {
        return false;
    };
    let old = old.and_then(|o| o.get(top));
    match object.get_mut(top) {
        Some(member) => drop_disabled_fields(release, group, resource, member, old),
        None => false,
    }
}

use super::object::Object;
use crate::KubeVersion;
use crate::api::meta::short_eq;
use crate::api::{GroupVersionResource, Operation};

/// The status a create starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CreateStatus {
    /// Left as the request has it.
    Keep,
    /// Cleared (`obj.Status = XStatus{}`).
    Empty,
    /// A Pod's: `{phase: Pending, qosClass: …}`.
    PodPending,
    /// A Namespace's: `{phase: Active}`.
    NamespaceActive,
}

/// One kind's strategy: group, resource, the first minor release that keeps `generation`
/// (0: none), and its create status.
struct Strategy {
    group: &'static str,
    resource: &'static str,
    generation_since: u32,
    create_status: CreateStatus,
    /// Whether an update of the main resource keeps the old status (the kind has a `status`
    /// subresource).
    keeps_status: bool,
}

const fn s(
    group: &'static str,
    resource: &'static str,
    generation_since: u32,
    create_status: CreateStatus,
    keeps_status: bool,
) -> Strategy {
    Strategy {
        group,
        resource,
        generation_since,
        create_status,
        keeps_status,
    }
}

use CreateStatus::{Empty, Keep, NamespaceActive, PodPending};

/// Every release hookscope models keeps `generation` for these kinds, since 1.0.
const ALWAYS: u32 = 1;

/// The strategies modelled, from upstream's `pkg/registry`.
const STRATEGIES: &[Strategy] = &[
    s("apps", "deployments", ALWAYS, Empty, true),
    s("apps", "statefulsets", ALWAYS, Empty, true),
    s("apps", "daemonsets", ALWAYS, Empty, true),
    s("apps", "replicasets", ALWAYS, Empty, true),
    s("", "replicationcontrollers", ALWAYS, Empty, true),
    s("batch", "jobs", ALWAYS, Empty, true),
    s("batch", "cronjobs", ALWAYS, Empty, true),
    s("policy", "poddisruptionbudgets", ALWAYS, Empty, true),
    s("networking.k8s.io", "ingresses", ALWAYS, Empty, true),
    s("networking.k8s.io", "networkpolicies", ALWAYS, Keep, false),
    s("networking.k8s.io", "ingressclasses", ALWAYS, Keep, false),
    s("scheduling.k8s.io", "priorityclasses", ALWAYS, Keep, false),
    // Pods keep a generation from 1.33 (KEP-5067).
    s("", "pods", 33, PodPending, true),
    s("", "services", 0, Empty, true),
    s("", "persistentvolumeclaims", 0, Empty, true),
    s("autoscaling", "horizontalpodautoscalers", 0, Empty, true),
    s("", "namespaces", 0, NamespaceActive, true),
    // Only their disabled fields are dropped.
    s("", "podtemplates", 0, Keep, false),
];

/// The annotation that carries a DaemonSet's `spec.templateGeneration` in `apps/v1`
/// (`DeprecatedTemplateGeneration`, written by the conversion from the internal type).
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// The finalizer a Namespace is created with (`api.FinalizerKubernetes`).
const NAMESPACE_FINALIZER: &str = "kubernetes";

/// The subresources whose strategy bumps a Pod's generation when they change its spec
/// (`updatePodGeneration`).
const POD_SPEC_SUBRESOURCES: &[&str] = &["", "ephemeralcontainers", "resize"];

/// What a strategy changes.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// The top-level members a create's strategy replaces (the others are the object's own).
    Members(Vec<(&'static str, Value)>),
    /// The whole object, and the top-level members the strategy may have changed.
    Whole(Value, &'static [&'static str]),
}

impl Prepared {
    /// The object after the strategy.
    #[cfg(test)]
    fn apply(self, object: &Value) -> Value {
        match self {
            Prepared::Whole(new, _) => new,
            Prepared::Members(members) => {
                let mut new = object.clone();
                if let Value::Object(map) = &mut new {
                    for (name, value) in members {
                        map.insert(name.into(), value);
                    }
                }
                new
            }
        }
    }
}

/// What the strategy of `resource` changes in the object validation sees, or `None` when it
/// changes nothing webhooks see. `old` is the object before the update; `custom` says that the
/// resource is a custom resource, and whether its version has the `status` subresource;
/// `audiences` are the apiserver's `--api-audiences`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_members(
    release: KubeVersion,
    operation: Operation,
    resource: &GroupVersionResource,
    subresource: &str,
    name: &str,
    object: &Object,
    old: Option<&Value>,
    custom: Option<CustomResource>,
    audiences: &[String],
) -> Option<Prepared> {
    // `rest.BeforeUpdate` before the strategy, for every kind (the scale subresource's Scales
    // are rebuilt from the parent instead).
    let fixed = match (operation, old) {
        (Operation::Update, Some(old)) if subresource != "scale" => {
            before_update(object.value(), old).map(Object::new)
        }
        _ => None,
    };
    let request = Request {
        release,
        operation,
        resource,
        subresource,
        name,
        old,
        custom,
        audiences,
    };
    let prepared = prepare_kind(&request, fixed.as_ref().unwrap_or(object));
    match (prepared, fixed) {
        (None, Some(fixed)) => Some(Prepared::Whole(fixed.value().clone(), &["metadata"])),
        (prepared, _) => prepared,
    }
}

/// What `rest.BeforeUpdate` does to every updated object before the strategy: the generation is
/// the old one (the strategy may bump it), the uid the old one when the request has none, and
/// the creation and deletion timestamps and a deletion grace period are kept. `None` when
/// nothing changes.
fn before_update(object: &Value, old: &Value) -> Option<Value> {
    let old_meta = old.get("metadata")?.as_object()?;
    let meta = object.get("metadata")?.as_object()?;
    let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_str() == Some(""));
    let generation = old_meta.get("generation").filter(|g| g.as_i64() != Some(0));
    let grace = "deletionGracePeriodSeconds";
    // What changes, found without copying anything (most updates change nothing here).
    let mut set: Vec<(&str, Option<&Value>)> = Vec::new();
    if meta.get("generation").filter(|g| g.as_i64() != Some(0)) != generation {
        set.push(("generation", generation));
    }
    if empty(meta.get("uid")) && !empty(old_meta.get("uid")) {
        set.push(("uid", old_meta.get("uid")));
    }
    for field in ["creationTimestamp", "deletionTimestamp"] {
        if !empty(old_meta.get(field)) && meta.get(field) != old_meta.get(field) {
            set.push((field, old_meta.get(field)));
        }
    }
    if !empty(old_meta.get(grace)) && empty(meta.get(grace)) {
        set.push((grace, old_meta.get(grace)));
    }
    if set.is_empty() {
        return None;
    }
    let mut new = object.clone();
    let new_meta = new.get_mut("metadata")?.as_object_mut()?;
    for (field, value) in set {
        match value {
            Some(value) => new_meta.insert(field.into(), value.clone()),
            None => new_meta.remove(field),
        };
    }
    Some(new)
}

/// The arguments of [`prepare_members`] but the object.
#[derive(Clone, Copy)]
struct Request<'a> {
    release: KubeVersion,
    operation: Operation,
    resource: &'a GroupVersionResource,
    subresource: &'a str,
    name: &'a str,
    old: Option<&'a Value>,
    custom: Option<CustomResource>,
    audiences: &'a [String],
}

/// [`prepare_members`] after `rest.BeforeUpdate`: the kind's own strategy.
fn prepare_kind(request: &Request<'_>, object: &Object) -> Option<Prepared> {
    let (release, operation, old) = (request.release, request.operation, request.old);
    let (resource, subresource) = (request.resource, request.subresource);
    if let Some(custom) = request.custom {
        return prepare_custom(custom, operation, subresource, object, old);
    }
    let (name, audiences) = (request.name, request.audiences);
    if operation == Operation::Create
        && resource.group.is_empty()
        && resource.resource == "serviceaccounts"
        && subresource == "token"
    {
        return token_request(name, object.value(), audiences)
            .map(|new| Prepared::Whole(new, &["metadata", "spec"]));
    }
    let strategy = STRATEGIES
        .iter()
        .find(|s| short_eq(s.group, &resource.group) && short_eq(s.resource, &resource.resource))?;
    let generation = strategy.generation_since != 0 && release.at_least(strategy.generation_since);
    if operation == Operation::Create && subresource.is_empty() {
        return prepare_create(release, strategy, generation, object).map(Prepared::Members);
    }
    let object = object.value();
    let mut new = object.clone();
    match operation {
        Operation::Update => {
            let old_value = old?;
            let old = old_value.as_object()?;
            if subresource.is_empty() && is(strategy, "", "services") {
                // The REST's allocator (`beginUpdate`) runs before the strategy.
                objects::service_allocated(&mut new, Some(old_value));
            }
            let map = new.as_object_mut()?;
            match subresource {
                "" if strategy.keeps_status => match old.get("status") {
                    Some(status) => {
                        map.insert("status".into(), status.clone());
                    }
                    None => {
                        map.remove("status");
                    }
                },
                "status" => {
                    match old.get("spec") {
                        Some(spec) => map.insert("spec".into(), spec.clone()),
                        None => map.remove("spec"),
                    };
                    // `deploymentStatusStrategy` keeps the labels too.
                    if is(strategy, "apps", "deployments") {
                        let labels = old.get("metadata").and_then(|m| m.get("labels")).cloned();
                        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                            match labels {
                                Some(labels) => meta.insert("labels".into(), labels),
                                None => meta.remove("labels"),
                            };
                        }
                    }
                }
                // `namespaceFinalizeStrategy`: the new finalizers, the old status.
                "finalize" if strategy.create_status == NamespaceActive => {
                    match old.get("status") {
                        Some(status) => map.insert("status".into(), status.clone()),
                        None => map.remove("status"),
                    };
                }
                _ => {}
            }
            if subresource.is_empty() {
                if let Some(top) = drop::member(strategy.group, strategy.resource)
                    && let Some(member) = map.get_mut(top)
                {
                    drop_disabled_fields(
                        release,
                        strategy.group,
                        strategy.resource,
                        member,
                        old.get(top),
                    );
                }
                if strategy.create_status == NamespaceActive {
                    keep_finalizers(map, old);
                }
                if is(strategy, "apps", "daemonsets") {
                    next_template_generation(map, old);
                }
            }
            if subresource.is_empty() {
                if is(strategy, "", "services") {
                    objects::service_type_dependent(&mut new, old_value);
                }
                if is(strategy, "", "persistentvolumeclaims") {
                    objects::claim_data_sources(release, &mut new, Some(old_value));
                }
            }
            let map = new.as_object_mut()?;
            let bumps = if resource.group.is_empty() && resource.resource == "pods" {
                POD_SPEC_SUBRESOURCES.contains(&subresource)
            } else {
                subresource.is_empty()
            };
            if generation && bumps && changed(strategy, map, old) {
                set_generation(map, generation_of(old) + 1);
            }
        }
        _ => return None,
    }
    // `template`: a PodTemplate's, where the drop of disabled fields happens.
    (new != *object).then_some(Prepared::Whole(
        new,
        &["metadata", "spec", "status", "template"],
    ))
}

/// A custom resource as its strategy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CustomResource {
    /// The version served has the `status` subresource.
    pub status: bool,
}

/// apiextensions-apiserver's `customResourceStrategy` and `statusStrategy`: a create starts at
/// generation 1 (without a status when the status subresource exists); an update of the main
/// resource keeps the old status (idem) and bumps the generation when anything but `metadata`
/// changed; an update of `status` is the old object with the new status and `managedFields`.
fn prepare_custom(
    custom: CustomResource,
    operation: Operation,
    subresource: &str,
    object: &Object,
    old: Option<&Value>,
) -> Option<Prepared> {
    let object = object.value();
    let mut new = object.clone();
    let map = new.as_object_mut()?;
    match (operation, subresource) {
        (Operation::Create, "") => {
            if custom.status {
                map.remove("status");
            }
            set_generation(map, 1);
        }
        (Operation::Update, "") => {
            let old = old?.as_object()?;
            if custom.status {
                match old.get("status") {
                    Some(status) => {
                        map.insert("status".into(), status.clone());
                    }
                    None => {
                        map.remove("status");
                    }
                }
            }
            let content = |m: &Map<String, Value>| {
                m.iter()
                    .filter(|(k, _)| *k != "metadata")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<Map<String, Value>>()
            };
            if content(map) != content(old) {
                set_generation(map, generation_of(old) + 1);
            }
        }
        (Operation::Update, "status") => {
            let old = old?.as_object()?;
            let status = map.get("status").cloned();
            let managed = map
                .get("metadata")
                .and_then(|m| m.get("managedFields"))
                .cloned();
            let mut replaced = old.clone();
            if let Some(Value::Object(meta)) = replaced.get_mut("metadata") {
                match managed {
                    Some(managed) => meta.insert("managedFields".into(), managed),
                    None => meta.remove("managedFields"),
                };
            }
            match status {
                Some(status) => replaced.insert("status".into(), status),
                None => replaced.remove("status"),
            };
            *map = replaced;
        }
        _ => return None,
    }
    (new != *object).then_some(Prepared::Whole(new, &["metadata", "spec", "status"]))
}

/// The generation an object's metadata holds (0 when none).
fn generation_of(object: &Map<String, Value>) -> i64 {
    object
        .get("metadata")
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// A create's strategy: the generation it starts at, its status, the fields a disabled feature
/// gate drops, a DaemonSet's template generation and a Namespace's finalizer, as the members
/// that differ from the object's (read without copying the rest).
fn prepare_create(
    release: KubeVersion,
    strategy: &Strategy,
    generation: bool,
    object: &Object,
) -> Option<Vec<(&'static str, Value)>> {
    if !object.is_map() {
        return None;
    }
    let mut members = Vec::new();
    let mut meta = None::<Map<String, Value>>;
    let original = || match object.member("metadata") {
        Some(Value::Object(meta)) => Some(meta.clone()),
        _ => None,
    };
    if generation
        && let Some(Value::Object(m)) = object.member("metadata")
        && m.get("generation").is_none_or(|g| g.as_u64() != Some(1))
    {
        let mut m = m.clone();
        m.insert("generation".into(), Value::from(1));
        meta = Some(m);
    }
    let generation_changed = meta.is_some();
    if is(strategy, "apps", "daemonsets")
        && let Some(mut m) = meta.take().or_else(original)
    {
        // `TemplateGeneration` starts at 1 unless the object asks for more.
        let changed = match template_generation(&m) {
            Some(asked) => {
                let start = asked.max(1).to_string();
                let differs = annotation(&m).and_then(Value::as_str) != Some(start.as_str());
                if differs {
                    set_annotation(&mut m, TEMPLATE_GENERATION, &start);
                }
                differs
            }
            None => false,
        };
        meta = Some(m).filter(|_| changed || generation_changed);
    }
    if let Some(m) = meta {
        members.push(("metadata", Value::Object(m)));
    }
    if let Some(top) = drop::member(strategy.group, strategy.resource)
        && let Some(member) = object.member(top)
        && drop::would_drop(release, strategy.group, strategy.resource, member, None)
    {
        let mut member = member.clone();
        drop_disabled_fields(
            release,
            strategy.group,
            strategy.resource,
            &mut member,
            None,
        );
        members.push((top, member));
    }
    if strategy.create_status == NamespaceActive
        && let Some(spec) = with_kubernetes_finalizer(object.member("spec"))
    {
        members.push(("spec", spec));
    }
    let status = match strategy.create_status {
        Keep => None,
        Empty => Some(Value::Object(Map::new())),
        PodPending => {
            let spec = members
                .iter()
                .find(|(n, _)| *n == "spec")
                .map(|(_, v)| v)
                .or(object.member("spec"));
            let qos = pod_qos(spec);
            let mut status = Map::new();
            status.insert("phase".into(), "Pending".into());
            status.insert("qosClass".into(), qos.into());
            Some(Value::Object(status))
        }
        NamespaceActive => {
            let mut status = Map::new();
            status.insert("phase".into(), "Active".into());
            Some(Value::Object(status))
        }
    };
    if let Some(status) = status.filter(|status| object.member("status") != Some(status)) {
        members.push(("status", status));
    }
    kind_create(release, strategy, object, &mut members);
    (!members.is_empty()).then_some(members)
}

/// The rest of a create's strategy that follows from the whole object (a Pod's conditions,
/// AppArmor fields and affinity, a Job's selector, a PersistentVolumeClaim's data sources, a
/// Service's allocated fields; see [`objects`]), as changed members.
fn kind_create(
    release: KubeVersion,
    strategy: &Strategy,
    object: &Object,
    members: &mut Vec<(&'static str, Value)>,
) {
    let applies = match (strategy.group, strategy.resource) {
        ("", "pods") => objects::pod_create_applies(object),
        ("batch", "jobs") | ("", "services") => true,
        ("", "persistentvolumeclaims") => object
            .member("spec")
            .is_some_and(|s| s.get("dataSource").is_some() || s.get("dataSourceRef").is_some()),
        _ => false,
    };
    if !applies {
        return;
    }
    let mut whole = object.value().clone();
    let Some(map) = whole.as_object_mut() else {
        return;
    };
    for (name, value) in members.iter() {
        map.insert((*name).into(), value.clone());
    }
    let changed = match strategy.resource {
        "pods" => objects::pod_create(release, &mut whole),
        "jobs" => objects::job_selector(&mut whole),
        "services" => objects::service_allocated(&mut whole, None),
        _ => objects::claim_data_sources(release, &mut whole, None),
    };
    if !changed {
        return;
    }
    for name in ["metadata", "spec", "status"] {
        let now = whole.get(name);
        let was = members
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
            .or(object.member(name));
        if now != was
            && let Some(now) = now
        {
            let now = now.clone();
            match members.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = now,
                None => members.push((name, now)),
            }
        }
    }
}

fn is(strategy: &Strategy, group: &str, resource: &str) -> bool {
    short_eq(strategy.group, group) && short_eq(strategy.resource, resource)
}

/// The DaemonSet template generation annotation of `meta`, if any.
fn annotation(meta: &Map<String, Value>) -> Option<&Value> {
    meta.get("annotations")?.get(TEMPLATE_GENERATION)
}

/// `spec.templateGeneration` as the conversion from `apps/v1` reads it: the annotation's
/// integer, 0 without the annotation; `None` when it is not an integer (the decode fails
/// upstream; hookscope leaves the object alone).
fn template_generation(meta: &Map<String, Value>) -> Option<i64> {
    match annotation(meta) {
        None => Some(0),
        Some(v) => v.as_str()?.parse().ok(),
    }
}

fn set_annotation(meta: &mut Map<String, Value>, key: &str, value: &str) {
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Value::Object(a) = annotations {
        a.insert(key.into(), Value::from(value));
    }
}

/// A DaemonSet update keeps the old `templateGeneration`, one more when the pod template
/// changed (`daemonSetStrategy.PrepareForUpdate`), written back as the annotation.
fn next_template_generation(new: &mut Map<String, Value>, old: &Map<String, Value>) {
    let Some(Value::Object(old_meta)) = old.get("metadata") else {
        return;
    };
    let Some(old_generation) = template_generation(old_meta) else {
        return;
    };
    let template = |m: &Map<String, Value>| m.get("spec").and_then(|s| s.get("template")).cloned();
    let changed = template(new) != template(old);
    let generation = old_generation + i64::from(changed);
    if let Some(Value::Object(meta)) = new.get_mut("metadata")
        && template_generation(meta).is_some()
    {
        set_annotation(meta, TEMPLATE_GENERATION, &generation.to_string());
    }
}

/// A Namespace's spec with `kubernetes` appended to its finalizers where it is missing, or
/// `None` when it is there (`namespaceStrategy.PrepareForCreate`).
fn with_kubernetes_finalizer(spec: Option<&Value>) -> Option<Value> {
    let finalizers = spec
        .and_then(|s| s.get("finalizers"))
        .and_then(Value::as_array);
    if finalizers.is_some_and(|f| f.iter().any(|f| f == NAMESPACE_FINALIZER)) {
        return None;
    }
    let mut spec = match spec {
        Some(Value::Object(s)) => s.clone(),
        _ => Map::new(),
    };
    let mut list = finalizers.cloned().unwrap_or_default();
    list.push(Value::from(NAMESPACE_FINALIZER));
    spec.insert("finalizers".into(), Value::Array(list));
    Some(Value::Object(spec))
}

/// A Namespace update keeps the old finalizers (`namespaceStrategy.PrepareForUpdate`).
fn keep_finalizers(new: &mut Map<String, Value>, old: &Map<String, Value>) {
    let finalizers = old.get("spec").and_then(|s| s.get("finalizers")).cloned();
    let spec = new
        .entry("spec")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(spec) = spec {
        match finalizers {
            Some(f) => {
                spec.insert("finalizers".into(), f);
            }
            None => {
                spec.remove("finalizers");
            }
        }
    }
}

/// The token REST's `Create` before validation: the name and namespace of the service account
/// where the request has none (the namespace is already the URL's), the creation time (the
/// field manager's, the same instant at second precision), and the server's audiences where
/// the request names none.
fn token_request(name: &str, object: &Value, audiences: &[String]) -> Option<Value> {
    let mut new = object.clone();
    let map = new.as_object_mut()?;
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        if meta
            .get("name")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
            && !name.is_empty()
        {
            meta.insert("name".into(), Value::String(name.into()));
        }
        let newest = meta
            .get("managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("time").and_then(Value::as_str))
            .max()
            .map(String::from);
        if let Some(time) = newest {
            meta.insert("creationTimestamp".into(), Value::String(time));
        }
    }
    if let Some(Value::Object(spec)) = map.get_mut("spec") {
        let empty = spec
            .get("audiences")
            .is_none_or(|a| a.as_array().is_none_or(Vec::is_empty));
        if empty {
            spec.insert(
                "audiences".into(),
                Value::Array(audiences.iter().map(|a| Value::from(a.as_str())).collect()),
            );
        }
    }
    (new != *object).then_some(new)
}

/// Whether the update changes what bumps the kind's generation: the spec (and, for a
/// Deployment, the annotations, which it copies to its ReplicaSets).
fn changed(strategy: &Strategy, new: &Map<String, Value>, old: &Map<String, Value>) -> bool {
    let annotations = |m: &Map<String, Value>| {
        m.get("metadata")
            .and_then(|meta| meta.get("annotations"))
            .filter(|a| a.as_object().is_some_and(|a| !a.is_empty()))
            .cloned()
    };
    new.get("spec") != old.get("spec")
        || (strategy.resource == "deployments" && annotations(new) != annotations(old))
}

fn set_generation(map: &mut Map<String, Value>, generation: i64) {
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        meta.insert("generation".into(), Value::from(generation));
    }
}

/// `qos.GetPodQOS` on the containers and init containers of `spec` (requests already defaulted
/// from limits): `BestEffort` without any cpu or memory request or limit, `Guaranteed` when
/// every container limits cpu and memory and requests what it limits, else `Burstable`.
fn pod_qos(spec: Option<&Value>) -> &'static str {
    const COMPUTE: [&str; 2] = ["cpu", "memory"];
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| spec.and_then(|s| s.get(*k)).and_then(Value::as_array))
        .flatten();
    // A quantity that is set and not zero, with the JSON it was given as.
    fn quantity<'v>(
        c: &'v Value,
        kind: &str,
        name: &str,
    ) -> Option<(&'v Value, crate::quantity::Quantity)> {
        let q = c.get("resources")?.get(kind)?.get(name)?;
        let text = match q.as_str() {
            Some(s) => std::borrow::Cow::Borrowed(s),
            None => std::borrow::Cow::Owned(q.to_string()),
        };
        crate::quantity::Quantity::parse(&text)
            .ok()
            .filter(|q| !q.is_zero())
            .map(|parsed| (q, parsed))
    }
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        for name in COMPUTE {
            let request = quantity(c, "requests", name);
            let limit = quantity(c, "limits", name);
            any |= request.is_some() || limit.is_some();
            // A request equals its limit when their canonical texts do (the same JSON has the
            // same text, without printing it).
            let equal = match (&request, &limit) {
                (Some((rj, rq)), Some((lj, lq))) => rj == lj || rq.to_string() == lq.to_string(),
                (None, None) => true,
                _ => false,
            };
            if limit.is_none() || !equal {
                guaranteed = false;
            }
            // Nothing later can change the answer.
            if any && !guaranteed {
                return "Burstable";
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pods() -> GroupVersionResource {
        GroupVersionResource::new("", "v1", "pods")
    }

    /// Every combination of a few requests and limits over two containers: the class is the one
    /// given by comparing every quantity's canonical text, container by container.
    #[test]
    fn pod_qos_stops_early_with_the_answer_of_the_whole_walk() {
        fn canonical(c: &Value, kind: &str, name: &str) -> Option<String> {
            let q = c.get("resources")?.get(kind)?.get(name)?;
            let text = q
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| q.to_string());
            crate::quantity::Quantity::parse(&text)
                .ok()
                .filter(|q| !q.is_zero())
                .map(|q| q.to_string())
        }
        fn whole_walk(spec: &Value) -> &'static str {
            let (mut any, mut guaranteed) = (false, true);
            for k in ["containers", "initContainers"] {
                for c in spec[k].as_array().into_iter().flatten() {
                    for name in ["cpu", "memory"] {
                        let (r, l) = (canonical(c, "requests", name), canonical(c, "limits", name));
                        any |= r.is_some() || l.is_some();
                        guaranteed &= l.is_some() && r == l;
                    }
                }
            }
            match (any, guaranteed) {
                (false, _) => "BestEffort",
                (true, true) => "Guaranteed",
                _ => "Burstable",
            }
        }
        let values = [
            None,
            Some(json!("1")),
            Some(json!("1000m")),
            Some(json!(1)),
            Some(json!("0")),
            Some(json!("x")),
            Some(json!("1Gi")),
        ];
        let mut resources = Vec::new();
        for r in &values {
            for l in &values {
                let mut res = json!({"requests": {}, "limits": {}});
                if let Some(r) = r {
                    res["requests"]["cpu"] = r.clone();
                    res["requests"]["memory"] = json!("1Gi");
                }
                if let Some(l) = l {
                    res["limits"]["cpu"] = l.clone();
                    res["limits"]["memory"] = json!("1Gi");
                }
                resources.push(res);
            }
        }
        let mut classes = std::collections::BTreeSet::new();
        for a in &resources {
            for b in resources.iter().step_by(3) {
                let spec =
                    json!({"containers": [{"resources": a}], "initContainers": [{"resources": b}]});
                let class = pod_qos(Some(&spec));
                assert_eq!(class, whole_walk(&spec), "{spec}");
                classes.insert(class);
            }
        }
        assert_eq!(classes.len(), 3);
    }

    #[test]
    fn pod_qos_classes() {
        let c = |resources: Value| json!({"containers": [{"name": "c", "resources": resources}]});
        assert_eq!(pod_qos(Some(&c(json!({})))), "BestEffort");
        assert_eq!(
            pod_qos(Some(&c(json!({"requests": {"cpu": "100m"}})))),
            "Burstable"
        );
        let equal = json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1Gi"}});
        assert_eq!(pod_qos(Some(&c(equal))), "Guaranteed");
        let unequal = json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(pod_qos(Some(&c(unequal))), "Burstable");
    }

    #[test]
    fn a_pod_create_starts_pending_with_generation_one_from_1_33() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running"}});
        let at = |minor| {
            prepare_members(
                KubeVersion::new(minor).unwrap(),
                Operation::Create,
                &pods(),
                "",
                "p",
                &Object::new(pod.clone()),
                None,
                None,
                &[],
            )
            .unwrap()
            .apply(&pod)
        };
        let new = at(33);
        assert_eq!(new["metadata"]["generation"], 1);
        assert_eq!(
            new["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"})
        );
        assert!(at(32)["metadata"].get("generation").is_none());
    }

    #[test]
    fn updates_keep_the_status_and_bump_the_generation_on_spec_changes() {
        let deployments = GroupVersionResource::new("apps", "v1", "deployments");
        let old = json!({"metadata": {"name": "d", "generation": 4}, "spec": {"replicas": 1}, "status": {"replicas": 1}});
        let scaled = json!({"metadata": {"name": "d", "generation": 4}, "spec": {"replicas": 2}, "status": {"replicas": 9}});
        let release = KubeVersion::new(33).unwrap();
        let new = prepare_members(
            release,
            Operation::Update,
            &deployments,
            "",
            "d",
            &Object::new(scaled.clone()),
            Some(&old),
            None,
            &[],
        )
        .unwrap()
        .apply(&scaled);
        assert_eq!(new["metadata"]["generation"], 5);
        assert_eq!(new["status"], json!({"replicas": 1}));

        // A status update keeps the spec and the generation.
        let status = json!({"metadata": {"name": "d", "generation": 4}, "spec": {"replicas": 7}, "status": {"replicas": 3}});
        let new = prepare_members(
            release,
            Operation::Update,
            &deployments,
            "status",
            "d",
            &Object::new(status.clone()),
            Some(&old),
            None,
            &[],
        )
        .unwrap()
        .apply(&status);
        assert_eq!(new["spec"], json!({"replicas": 1}));
        assert_eq!(new["metadata"]["generation"], 4);

        // Nothing changed: nothing to do.
        assert!(
            prepare_members(
                release,
                Operation::Update,
                &deployments,
                "",
                "d",
                &Object::new(old.clone()),
                Some(&old),
                None,
                &[],
            )
            .is_none()
        );
    }

    #[test]
    fn custom_resources_start_at_generation_one_and_bump_it_on_any_content_change() {
        let widgets = GroupVersionResource::new("example.com", "v1", "widgets");
        let release = KubeVersion::new(33).unwrap();
        let run = |custom, op, sub: &str, object: &Value, old: Option<&Value>| {
            prepare_members(
                release,
                op,
                &widgets,
                sub,
                "w",
                &Object::new(object.clone()),
                old,
                Some(CustomResource { status: custom }),
                &[],
            )
            .map(|p| p.apply(object))
        };
        let created =
            json!({"metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": 5}});
        let new = run(true, Operation::Create, "", &created, None).unwrap();
        assert_eq!(new["metadata"]["generation"], 1);
        assert!(new.get("status").is_none(), "{new}");
        let new = run(false, Operation::Create, "", &created, None).unwrap();
        assert_eq!(new["status"], json!({"ready": 5}));

        let old = json!({"metadata": {"name": "w", "generation": 2, "labels": {"a": "b"}}, "spec": {"size": 1}, "status": {"ready": 1}});
        // Only the status differs: kept from the old object, no bump.
        let status_only = json!({"metadata": {"name": "w", "generation": 2, "labels": {"a": "b"}}, "spec": {"size": 1}, "status": {"ready": 9}});
        let new = run(true, Operation::Update, "", &status_only, Some(&old)).unwrap();
        assert_eq!(new, old);
        // Without the status subresource the status is content: bumped.
        let new = run(false, Operation::Update, "", &status_only, Some(&old));
        assert_eq!(new.unwrap()["metadata"]["generation"], 3);
        // Metadata alone never bumps.
        let relabelled = json!({"metadata": {"name": "w", "generation": 2, "labels": {"a": "c"}}, "spec": {"size": 1}, "status": {"ready": 1}});
        assert!(run(true, Operation::Update, "", &relabelled, Some(&old)).is_none());
        // A status update is the old object with the new status.
        let status = json!({"metadata": {"name": "w", "generation": 2, "labels": {"x": "y"}}, "spec": {"size": 7}, "status": {"ready": 2}});
        let new = run(true, Operation::Update, "status", &status, Some(&old)).unwrap();
        assert_eq!(
            new,
            json!({"metadata": {"name": "w", "generation": 2, "labels": {"a": "b"}}, "spec": {"size": 1}, "status": {"ready": 2}})
        );
    }

    fn run(
        resource: &GroupVersionResource,
        operation: Operation,
        subresource: &str,
        object: &Value,
        old: Option<&Value>,
    ) -> Value {
        prepare_members(
            KubeVersion::new(33).unwrap(),
            operation,
            resource,
            subresource,
            "x",
            &Object::new(object.clone()),
            old,
            None,
            &[],
        )
        .map_or_else(|| object.clone(), |p| p.apply(object))
    }

    /// `rest.BeforeUpdate`, for a kind without a strategy of its own: the request cannot set
    /// the generation or change the creation and deletion timestamps, and a missing uid or grace
    /// period is the old one; a subresource's Scale is left alone.
    #[test]
    fn every_update_keeps_the_system_metadata_of_the_old_object() {
        let configmaps = GroupVersionResource::new("", "v1", "configmaps");
        let old = json!({"metadata": {"name": "c", "uid": "u-1", "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-02T00:00:00Z",
            "deletionGracePeriodSeconds": 30}, "data": {"a": "1"}});
        let new = json!({"metadata": {"name": "c", "generation": 9, "creationTimestamp": null,
            "deletionTimestamp": "2027-01-01T00:00:00Z"}, "data": {"a": "2"}});
        let got = run(&configmaps, Operation::Update, "", &new, Some(&old));
        let mut want = old.clone();
        want["data"] = json!({"a": "2"});
        assert_eq!(got, want);
        // Nothing to keep: nothing changes.
        assert!(
            prepare_members(
                KubeVersion::new(33).unwrap(),
                Operation::Update,
                &configmaps,
                "",
                "c",
                &Object::new(want.clone()),
                Some(&old),
                None,
                &[],
            )
            .is_none()
        );
        let deployments = GroupVersionResource::new("apps", "v1", "deployments");
        let scale = json!({"metadata": {"name": "c"}, "spec": {"replicas": 3}});
        assert_eq!(
            run(&deployments, Operation::Update, "scale", &scale, Some(&old)),
            scale
        );
    }

    /// Upstream's `TestNamespaceStrategy`, `TestNamespaceStatusStrategy` and
    /// `TestNamespaceFinalizeStrategy` (`pkg/registry/core/namespace/strategy_test.go`).
    #[test]
    fn namespaces_are_created_active_with_the_kubernetes_finalizer_and_updates_keep_it() {
        let namespaces = GroupVersionResource::new("", "v1", "namespaces");
        let created = run(
            &namespaces,
            Operation::Create,
            "",
            &json!({"metadata": {"name": "foo"}, "status": {"phase": "Terminating"}}),
            None,
        );
        assert_eq!(created["status"], json!({"phase": "Active"}));
        assert_eq!(created["spec"], json!({"finalizers": ["kubernetes"]}));
        // Appended after the request's own, not repeated.
        let created = run(
            &namespaces,
            Operation::Create,
            "",
            &json!({"metadata": {"name": "foo"}, "spec": {"finalizers": ["example.com/a"]}}),
            None,
        );
        assert_eq!(
            created["spec"]["finalizers"],
            json!(["example.com/a", "kubernetes"])
        );
        let again = run(&namespaces, Operation::Create, "", &created, None);
        assert_eq!(again["spec"], created["spec"]);

        // An update keeps the old finalizers and status.
        let updated = run(
            &namespaces,
            Operation::Update,
            "",
            &json!({"metadata": {"name": "bar"}}),
            Some(&created),
        );
        assert_eq!(
            updated["spec"]["finalizers"],
            json!(["example.com/a", "kubernetes"])
        );
        assert_eq!(updated["status"], created["status"]);

        // The status subresource changes the phase, not the finalizers.
        let old = json!({"metadata": {"name": "foo"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let status = run(
            &namespaces,
            Operation::Update,
            "status",
            &json!({"metadata": {"name": "foo"}, "status": {"phase": "Terminating"}}),
            Some(&old),
        );
        assert_eq!(status["status"]["phase"], "Terminating");
        assert_eq!(status["spec"]["finalizers"], json!(["kubernetes"]));

        // The finalize subresource changes the finalizers, not the phase.
        let old = json!({"metadata": {"name": "foo"}, "spec": {"finalizers": ["kubernetes", "example.com/org"]}, "status": {"phase": "Active"}});
        let finalized = run(
            &namespaces,
            Operation::Update,
            "finalize",
            &json!({"metadata": {"name": "foo"}, "spec": {"finalizers": ["example.com/foo"]}, "status": {"phase": "Terminating"}}),
            Some(&old),
        );
        assert_eq!(finalized["status"]["phase"], "Active");
        assert_eq!(finalized["spec"]["finalizers"], json!(["example.com/foo"]));
    }

    /// `daemonSetStrategy`: the template generation starts at 1 (or what the object asks
    /// for), and an update keeps the old one, plus one when the pod template changed.
    #[test]
    fn a_daemonset_carries_its_template_generation_as_the_annotation() {
        let daemonsets = GroupVersionResource::new("apps", "v1", "daemonsets");
        let ds = |generation: Option<&str>, image: &str| {
            let mut meta = json!({"name": "agent", "generation": 1});
            if let Some(g) = generation {
                meta["annotations"] = json!({TEMPLATE_GENERATION: g});
            }
            json!({"metadata": meta, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": image}]}}}})
        };
        let annotation = |v: &Value| v["metadata"]["annotations"][TEMPLATE_GENERATION].clone();
        for (asked, start) in [(None, "1"), (Some("0"), "1"), (Some("5"), "5")] {
            let created = run(&daemonsets, Operation::Create, "", &ds(asked, "a:1"), None);
            assert_eq!(annotation(&created), start, "{asked:?}");
            assert_eq!(created["metadata"]["generation"], 1);
        }
        // Not an integer: the apiserver fails to decode it; left alone.
        let created = run(
            &daemonsets,
            Operation::Create,
            "",
            &ds(Some("x"), "a:1"),
            None,
        );
        assert_eq!(annotation(&created), "x");

        let old = ds(Some("3"), "a:1");
        // A template change: one more; whatever the request's annotation says.
        for asked in [Some("3"), Some("0"), Some("9")] {
            let new = run(
                &daemonsets,
                Operation::Update,
                "",
                &ds(asked, "a:2"),
                Some(&old),
            );
            assert_eq!(annotation(&new), "4", "{asked:?}");
            assert_eq!(new["metadata"]["generation"], 2);
        }
        // No template change: the old one.
        let mut labelled = ds(Some("0"), "a:1");
        labelled["metadata"]["labels"] = json!({"tier": "node"});
        let new = run(&daemonsets, Operation::Update, "", &labelled, Some(&old));
        assert_eq!(annotation(&new), "3");
        assert_eq!(new["metadata"]["generation"], 1);
    }
}

//! Pod-level resources (`PodLevelResources`, on by default from 1.34): when a Pod sets
//! `spec.resources`, its pod-level hugepage limits and its requests are defaulted from the
//! containers' (`defaultHugePagePodLimits` and `defaultPodRequests` of the 1.33 code, run after the
//! containers' own requests were copied from their limits).
//!
//! The containers' resources are aggregated as the component helpers do it: regular containers
//! and restartable (sidecar) init containers add up, each other init container needs its own
//! amount plus the sidecars started before it, and the pod needs the larger of the two.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::go::pointer;
use super::quantity::{Format, canonical, nanos};

type Object = Map<String, Value>;

/// A resource amount during aggregation: its value, the format it is written back in, and its
/// original JSON while it is a plain copy of one container's (Go keeps that text).
#[derive(Debug, Clone)]
struct Amount {
    nanos: i128,
    format: Format,
    original: Option<Value>,
}

impl Amount {
    fn to_value(&self) -> Value {
        match &self.original {
            Some(v) => v.clone(),
            None => Value::String(canonical(self.nanos, self.format)),
        }
    }
}

type ResourceList = BTreeMap<String, Amount>;

fn resource_list(value: Option<&Value>) -> ResourceList {
    let Some(Value::Object(list)) = value else {
        return ResourceList::new();
    };
    list.iter()
        .filter_map(|(name, v)| {
            let (nanos, format) = nanos(v)?;
            Some((
                name.clone(),
                Amount {
                    nanos,
                    format,
                    original: Some(v.clone()),
                },
            ))
        })
        .collect()
}

/// `addResourceList`: a copy for a new name, a sum (taking the addend's format when the sum so far
/// is zero) for an existing one.
fn add(list: &mut ResourceList, other: &ResourceList) {
    for (name, amount) in other {
        match list.get_mut(name) {
            None => {
                list.insert(name.clone(), amount.clone());
            }
            Some(sum) => {
                if sum.nanos == 0 {
                    sum.format = amount.format;
                }
                sum.nanos = sum.nanos.saturating_add(amount.nanos);
                sum.original = None;
            }
        }
    }
}

/// `maxResourceList`: the larger of the two for each name.
fn max(list: &mut ResourceList, other: &ResourceList) {
    for (name, amount) in other {
        if list
            .get(name)
            .is_none_or(|current| amount.nanos > current.nanos)
        {
            list.insert(name.clone(), amount.clone());
        }
    }
}

/// `AggregateContainerRequests`/`AggregateContainerLimits` of the pod spec, for `which`
/// (`requests` or `limits`).
fn aggregate(spec: &Object, which: &str) -> ResourceList {
    let of = |c: &Object| resource_list(c.get("resources").and_then(|r| r.get(which)));
    let containers = |key: &str| -> Vec<Object> {
        spec.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_object().cloned())
            .collect()
    };
    let mut total = ResourceList::new();
    for c in containers("containers") {
        add(&mut total, &of(&c));
    }
    let mut sidecars = ResourceList::new();
    let mut init = ResourceList::new();
    for c in containers("initContainers") {
        let own = of(&c);
        let needed = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut needed = ResourceList::new();
            add(&mut needed, &own);
            add(&mut needed, &sidecars);
            needed
        };
        max(&mut init, &needed);
    }
    max(&mut total, &init);
    total
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

fn is_supported(name: &str) -> bool {
    name == "cpu" || name == "memory" || is_hugepages(name)
}

fn non_empty(resources: &Object, key: &str) -> bool {
    resources
        .get(key)
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty())
}

/// Defaults the pod-level requests and limits of a Pod's `spec`.
pub(super) fn default_pod_level_resources(spec: &mut Object) {
    let Some(resources) = spec.get("resources").and_then(Value::as_object) else {
        return;
    };
    if !non_empty(resources, "limits") && !non_empty(resources, "requests") {
        return;
    }
    let aggregated_limits = aggregate(spec, "limits");
    let defaults: Vec<(String, Value)> = aggregated_limits
        .iter()
        .filter(|(name, _)| is_hugepages(name))
        .map(|(name, amount)| (name.clone(), amount.to_value()))
        .collect();
    fill(spec, "limits", defaults);

    let Some(resources) = spec.get("resources").and_then(Value::as_object) else {
        return;
    };
    if !non_empty(resources, "limits") {
        return;
    }
    let pod_limits = resources
        .get("limits")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut defaults: Vec<(String, Value)> = aggregate(spec, "requests")
        .iter()
        .filter(|(name, _)| is_supported(name) && !is_hugepages(name))
        .map(|(name, amount)| (name.clone(), amount.to_value()))
        .collect();
    defaults.extend(
        pod_limits
            .into_iter()
            .filter(|(name, _)| is_supported(name)),
    );
    fill(spec, "requests", defaults);
}

/// Adds each `(name, value)` of `defaults` missing from `spec.resources.<key>`, in order, creating
/// the map only when something is added.
fn fill(spec: &mut Object, key: &str, defaults: Vec<(String, Value)>) {
    let Some(resources) = pointer(spec, "resources") else {
        return;
    };
    let mut list = match resources.get(key) {
        Some(Value::Object(m)) => m.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return,
    };
    let mut added = false;
    for (name, value) in defaults {
        if let serde_json::map::Entry::Vacant(e) = list.entry(name) {
            e.insert(value);
            added = true;
        }
    }
    if added {
        resources.insert(key.into(), Value::Object(list));
        super::go::wrote();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaulted(spec: Value) -> Value {
        let mut spec = spec;
        default_pod_level_resources(spec.as_object_mut().unwrap());
        spec
    }

    #[test]
    fn pod_requests_come_from_the_containers_then_from_the_pod_limits() {
        let spec = defaulted(json!({
            "resources": {"limits": {"cpu": "4", "memory": "8Mi"}},
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "1500m"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        }));
        assert_eq!(
            spec["resources"],
            json!({"limits": {"cpu": "4", "memory": "8Mi"}, "requests": {"cpu": "2", "memory": "8Mi"}})
        );
    }

    #[test]
    fn sidecars_add_up_and_hugepage_limits_come_from_the_containers() {
        let spec = defaulted(json!({
            "resources": {"requests": {"cpu": "1"}},
            "containers": [{"name": "a", "resources": {"limits": {"hugepages-2Mi": "2Mi"}, "requests": {"cpu": "100m"}}}],
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"limits": {"hugepages-2Mi": "2Mi"}}},
            ],
        }));
        assert_eq!(spec["resources"]["limits"], json!({"hugepages-2Mi": "4Mi"}));
        assert_eq!(
            spec["resources"]["requests"],
            json!({"cpu": "1", "hugepages-2Mi": "4Mi"})
        );
    }

    #[test]
    fn nothing_without_pod_level_resources() {
        let input = json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(defaulted(input.clone()), input);
        let input = json!({"resources": {}, "containers": [{"name": "a"}]});
        assert_eq!(defaulted(input.clone()), input);
    }
}

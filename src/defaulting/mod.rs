//! Scheme defaulting: what kube-apiserver does to an object right after decoding it into its Go
//! type — and so after every webhook patch — before it reaches the next webhook or storage.
//!
//! Upstream, defaulting is the generated `SetObjectDefaults_<Kind>` functions
//! (`pkg/apis/<group>/<version>/zz_generated.defaults.go`): they call the hand-written
//! `SetDefaults_<Type>` functions (`defaults.go`) for the object and for every nested struct that
//! has one, and apply the declarative `+default=` markers of the Go types. This module does the
//! same over JSON values, per release ([`KubeVersion`]), with feature gates at their default state
//! in that release.
//!
//! The input is the object as the apiserver holds it after decoding and before defaulting. Where
//! the Go code tests a field for "unset", the test is Go's for that field's type: a pointer is nil
//! only when the field is absent or `null` (so an explicit `0` or `false` is kept), a string is
//! unset when absent, `null` or `""`, an integer when absent, `null` or `0`. Values of the wrong
//! JSON type are left alone (they could not have been decoded). Defaulting writes what Go writes,
//! empty structs and maps included; dropping empty values on encoding (`omitempty`) is not done
//! here.
//!
//! Defaults applied by the registry strategies (`PrepareForCreate`, e.g. a Service's cluster IPs,
//! `ipFamilies` and `ipFamilyPolicy`, a Pod's generated fields) run after mutating admission and
//! are not part of this. `docs/defaulting.md` lists the kinds and the differences between releases.

mod core;
mod features;
mod go;
mod image;
mod other;
mod pod_resources;
mod quantity;
mod workloads;

use serde_json::Value;

use crate::KubeVersion;
use features::Features;

/// Applies kube-apiserver's scheme defaulting for `group`/`version`, `kind` at `release` to
/// `object`, in place. Returns whether that kind has any defaulting at all (false for kinds whose
/// scheme registers none, such as ServiceAccount, Ingress or PodDisruptionBudget, and for kinds
/// not modelled); a non-object `object` is left alone.
///
/// ```
/// use hookscope::KubeVersion;
/// use hookscope::defaulting::default_object;
/// use serde_json::json;
///
/// let mut pod = json!({"spec": {"containers": [{"name": "sidecar", "image": "envoy:v1.31"}]}});
/// assert!(default_object("", "v1", "Pod", &mut pod, KubeVersion::NEWEST));
/// assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
/// assert_eq!(pod["spec"]["containers"][0]["terminationMessagePath"], "/dev/termination-log");
/// ```
pub fn default_object(
    group: &str,
    version: &str,
    kind: &str,
    object: &mut Value,
    release: KubeVersion,
) -> bool {
    defaults(group, version, kind, object, release).has_defaults
}

/// What [`defaults`] did to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Defaulted {
    /// Whether the kind has any defaulting ([`default_object`]'s answer).
    pub has_defaults: bool,
    /// Whether the object may have changed: false when it is as it was (the defaults were all
    /// there already, or the kind has none).
    pub changed: bool,
}

/// [`default_object`], telling also whether it changed `object`. Every write is noted
/// ([`go::wrote`]); debug builds check that what was not noted did not change.
pub fn defaults(
    group: &str,
    version: &str,
    kind: &str,
    object: &mut Value,
    release: KubeVersion,
) -> Defaulted {
    go::take_wrote();
    let before = cfg!(debug_assertions).then(|| object.clone());
    let has_defaults = apply_defaults(group, version, kind, object, release);
    let changed = go::take_wrote();
    if let Some(before) = before {
        debug_assert!(
            changed || before == *object,
            "defaulting changed a {group}/{version} {kind} without noting it"
        );
    }
    Defaulted {
        has_defaults,
        changed,
    }
}

fn apply_defaults(
    group: &str,
    version: &str,
    kind: &str,
    object: &mut Value,
    release: KubeVersion,
) -> bool {
    let f = Features::of(release);
    let Some(object) = object.as_object_mut() else {
        return is_defaulted(group, version, kind);
    };
    match (group, version) {
        ("", "v1") => core::default(kind, object, &f),
        ("apps", "v1") => workloads::apps(kind, object, &f),
        ("batch", "v1") => workloads::batch(kind, object, &f),
        ("autoscaling", v) if kind == "HorizontalPodAutoscaler" => {
            other::horizontal_pod_autoscaler(v, object, &f)
        }
        ("networking.k8s.io", "v1") => other::networking(kind, object),
        ("discovery.k8s.io", "v1") if kind == "EndpointSlice" => {
            other::endpoint_slice(object);
            true
        }
        ("rbac.authorization.k8s.io", "v1") => other::rbac(kind, object),
        ("storage.k8s.io", "v1") => other::storage(kind, object),
        ("scheduling.k8s.io", "v1") if kind == "PriorityClass" => {
            other::priority_class(object);
            true
        }
        _ => false,
    }
}

/// Whether [`default_object`] defaults `group`/`version`, `kind` (at every modelled release).
pub fn is_defaulted(group: &str, version: &str, kind: &str) -> bool {
    default_object(
        group,
        version,
        kind,
        &mut Value::Object(Default::default()),
        KubeVersion::NEWEST,
    )
}

/// Whether the defaulting of `group`/`version`, `kind` neither reads nor writes the object's
/// `metadata`: an object it defaulted, changed since only in its `metadata` (a label, an
/// annotation added by a webhook), is left as it is by defaulting it again. False for the kinds
/// whose `metadata.labels` default to their template's (ReplicationController, Job) or to their
/// name (Namespace).
pub fn ignores_metadata(group: &str, version: &str, kind: &str) -> bool {
    !matches!(
        (group, version, kind),
        ("", "v1", "ReplicationController" | "Namespace") | ("batch", "v1", "Job")
    )
}

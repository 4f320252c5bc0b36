//! The warnings kube-apiserver's registry strategies add to a create or update of a Pod or of a
//! kind with a pod template (`WarningsOnCreate` / `WarningsOnUpdate`, which call
//! `GetWarningsForPod` and `GetWarningsForPodTemplate` of `pkg/api/pod/warnings.go`).
//! `rest.BeforeCreate` and `rest.BeforeUpdate` add them after the strategy prepared the object
//! and validation passed, so after mutating admission and before the validating plugins: they
//! are the client's warnings between the mutating and the validating ones.
//!
//! What each release adds (`warnings.go` of 1.28.3, 1.30.0, 1.31.2 and 1.33.3 compared; 1.32 is
//! not among them, so what 1.31.2 lacks and 1.33.3 has is taken to start in 1.33; later
//! releases as 1.33): from 1.30 the env warning's `, which may be dropped when using apply` and
//! the AppArmor annotation of a template (behind `AppArmorFields`, on by default from 1.30);
//! from 1.33 the label values of preferred node affinity terms, overlapping volume paths,
//! duplicate port names, non-standard IP addresses and the `gitRepo` message of the disabled
//! driver; a CronJob's schedule with a time zone is warned of on create and update with 1.28's
//! words, on update only with 1.30's. See [`Since`].
//!
//! Computed over the object's JSON as the apiserver holds it (defaulted). Where upstream ranges
//! over a Go map (`nodeSelector`), the keys are taken in sorted order: Go's order is random.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::Value;

use crate::KubeVersion;
use crate::api::meta::short_eq;
use crate::api::{GroupVersionResource, Operation};
use crate::gofmt::quote;
use crate::quantity::Quantity;

/// Deprecated node labels and what upstream says of each (`pkg/api/node/util.go`).
const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    (
        "beta.kubernetes.io/arch",
        r#"deprecated since v1.14; use "kubernetes.io/arch" instead"#,
    ),
    (
        "beta.kubernetes.io/os",
        r#"deprecated since v1.14; use "kubernetes.io/os" instead"#,
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        r#"deprecated since v1.17; use "topology.kubernetes.io/region" instead"#,
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        r#"deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#,
    ),
    (
        "beta.kubernetes.io/instance-type",
        r#"deprecated since v1.17; use "node.kubernetes.io/instance-type" instead"#,
    ),
    ("app.kubernetes.io/created-by", "deprecated since v1.9"),
    (
        "scheduler.alpha.kubernetes.io/preferAvoidPods",
        "deprecated since v1.22; use Taints and Tolerations instead",
    ),
    (
        "node-role.kubernetes.io/master",
        r#"use "node-role.kubernetes.io/control-plane" instead"#,
    ),
];

/// Deprecated Pod annotations (`deprecatedAnnotations`).
const DEPRECATED_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        r#"non-functional in v1.16+; use the "priorityClassName" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
];

/// Deprecated and removed volume sources with their warning (in upstream's order; `gitRepo`
/// depends on the release, see [`git_repo_message`]).
const DEPRECATED_VOLUMES: [(&str, &str); 10] = [
    (
        "photonPersistentDisk",
        "deprecated in v1.11, non-functional in v1.16+",
    ),
    ("gitRepo", ""),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("flocker", "deprecated in v1.22, non-functional in v1.25+"),
    ("storageOS", "deprecated in v1.22, non-functional in v1.25+"),
    ("quobyte", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("ephemeral", ""),
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
];

const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_CONTAINER: &str = "container.apparmor.security.beta.kubernetes.io/";

/// The warnings of `resource`'s strategy for a create or update (of the main resource) whose
/// object after the strategy is `object` (`unprepared`: before it; `old`: before the update),
/// in upstream's order, or none for a kind without them.
/// An object read member by member: a request's object need not be made whole to be read.
pub(crate) trait Doc {
    /// The top-level member `name`.
    fn member(&self, name: &str) -> Option<&Value>;

    /// The value at a JSON pointer (`/spec/template`), read from its first member down.
    fn at(&self, pointer: &str) -> Option<&Value> {
        let rest = pointer.strip_prefix('/')?;
        let Some((first, mut rest)) = rest.split_once('/') else {
            return self.member(rest);
        };
        let mut value = self.member(first)?;
        // Members of maps by name; an escaped name or an array's index as pointers read them.
        loop {
            let (token, next) = rest.split_once('/').unwrap_or((rest, ""));
            match value {
                Value::Object(members) if !token.contains('~') => value = members.get(token)?,
                _ => return value.pointer(&pointer[pointer.len() - rest.len() - 1..]),
            }
            if token.len() == rest.len() {
                return Some(value);
            }
            rest = next;
        }
    }
}

impl Doc for Value {
    fn member(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

impl Doc for crate::engine::object::Object {
    fn member(&self, name: &str) -> Option<&Value> {
        crate::engine::object::Object::member(self, name)
    }
}

/// Whether the strategy of `resource` (of group `group`) warns at all: the kinds with a pod
/// template and Pods. Others need not have their object read.
pub(crate) fn warns_for(group: &str, resource: &str) -> bool {
    matches!(
        (group, resource),
        ("", "pods" | "replicationcontrollers" | "podtemplates")
            | (
                "apps",
                "deployments" | "replicasets" | "daemonsets" | "statefulsets"
            )
            | ("batch", "jobs" | "cronjobs")
    )
}

pub(crate) fn strategy_warnings(
    release: KubeVersion,
    operation: Operation,
    resource: &GroupVersionResource,
    subresource: &str,
    object: &(impl Doc + ?Sized),
    unprepared: &(impl Doc + ?Sized),
    old: Option<&Value>,
) -> Vec<String> {
    if !subresource.is_empty() {
        return Vec::new();
    }
    let (group, name) = (resource.group.as_str(), resource.resource.as_str());
    let mut warnings = Vec::new();
    let generation_changed = |member: &str| {
        let get = |v: Option<&Value>| v.and_then(Value::as_i64).unwrap_or(0);
        old.is_some_and(|old| get(old.pointer(member)) != get(object.at(member)))
    };
    let name_warning = |warnings: &mut Vec<String>, what: &str| {
        let object_name = object
            .at("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let msgs = crate::config::validation::is_dns1123_label(object_name);
        if !msgs.is_empty() {
            warnings.push(format!(
                "metadata.name: this is used in {what}, which can result in surprising behavior; a DNS label is recommended: [{}]",
                msgs.join(" ")
            ));
        }
    };
    let template = |path: &str, pointer: &str| {
        object
            .at(pointer)
            .map(|t| for_spec_and_meta(release, Some(path), t))
            .unwrap_or_default()
    };
    match (group, name, operation) {
        ("", "pods", Operation::Create) => {
            // `PrepareForCreate`'s own, before `WarningsOnCreate`.
            warnings.extend(super::objects::app_armor_warnings(release, unprepared));
            name_warning(&mut warnings, "the Pod's hostname");
            warnings.extend(for_spec_and_meta(release, None, object));
        }
        ("apps", "deployments" | "replicasets", Operation::Create)
        | ("", "replicationcontrollers", Operation::Create) => {
            name_warning(&mut warnings, "Pod names and hostnames");
            warnings.extend(template("spec.template", "/spec/template"));
        }
        ("apps", "deployments" | "replicasets", Operation::Update)
            if generation_changed("/metadata/generation") =>
        {
            warnings.extend(template("spec.template", "/spec/template"));
        }
        // `rcStrategy.WarningsOnUpdate` hands the old template where the new one belongs: the
        // warnings are the old object's.
        ("", "replicationcontrollers", Operation::Update)
            if generation_changed("/metadata/generation") =>
        {
            if let Some(t) = old.and_then(|old| old.pointer("/spec/template")) {
                warnings.extend(for_spec_and_meta(release, Some("spec.template"), t));
            }
        }
        ("apps", "daemonsets", Operation::Create) => {
            warnings.extend(template("spec.template", "/spec/template"));
        }
        ("apps", "daemonsets", Operation::Update)
            if generation_changed("/spec/templateGeneration") =>
        {
            warnings.extend(template("spec.template", "/spec/template"));
        }
        ("apps", "statefulsets", Operation::Create | Operation::Update) => {
            if operation == Operation::Create || generation_changed("/metadata/generation") {
                warnings.extend(template("spec.template", "/spec/template"));
            }
            // The update's path names the claim's `Spec` in Go's spelling, as upstream writes it.
            let suffix = if operation == Operation::Create {
                ""
            } else {
                ".Spec"
            };
            let claims = object.at("/spec/volumeClaimTemplates");
            for (i, claim) in items(claims).iter().enumerate() {
                let at = format!("spec.volumeClaimTemplates[{i}]{suffix}");
                claim_spec_warnings(
                    &mut warnings,
                    &at,
                    claim.get("spec").unwrap_or(&Value::Null),
                );
            }
            let limit = object
                .at("/spec/revisionHistoryLimit")
                .and_then(Value::as_i64);
            if limit.is_some_and(|l| l < 0) {
                warnings.push("spec.revisionHistoryLimit: a negative value retains all historical revisions; a value >= 0 is recommended".into());
            }
        }
        ("batch", "jobs", Operation::Create) => {
            name_warning(&mut warnings, "Pod names and hostnames");
            warnings.extend(job_spec(release, "spec", object.member("spec")));
        }
        ("batch", "jobs", Operation::Update) if generation_changed("/metadata/generation") => {
            warnings.extend(job_spec(release, "spec", object.member("spec")));
        }
        ("batch", "cronjobs", Operation::Create | Operation::Update) => {
            let job = object.at("/spec/jobTemplate/spec");
            if operation == Operation::Create {
                name_warning(&mut warnings, "Pod names and hostnames");
                warnings.extend(job_spec(release, "spec.jobTemplate.spec", job));
            } else if generation_changed("/metadata/generation") {
                warnings.extend(job_spec(release, "spec.jobTemplate.spec", job));
            }
            let schedule = object.at("/spec/schedule").and_then(Value::as_str);
            // From 1.30 validation refuses a create with a time zone in the schedule; the
            // warning of an update names `timeZone`. (The path is upstream's, `spec.spec`.)
            let tz = schedule.is_some_and(|s| s.contains("TZ"));
            let docs = "see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details";
            if tz && !release.at_least(Since::CRONJOB_TIME_ZONE) {
                warnings.push(format!(
                    "CRON_TZ or TZ used in spec.spec.schedule is not officially supported, {docs}"
                ));
            } else if tz && operation == Operation::Update {
                warnings.push(format!(
                    "cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, {docs}"
                ));
            }
        }
        ("", "podtemplates", Operation::Create) => {
            warnings.extend(template("template", "/template"));
        }
        ("", "podtemplates", Operation::Update) if generation_changed("/metadata/generation") => {
            warnings.extend(template("template", "/template"));
        }
        _ => {}
    }
    warnings
}

/// `WarningsForJobSpec` (`pkg/api/job`): an Indexed Job whose completions and parallelism are
/// beyond what the controller can track, then its pod template's warnings.
fn job_spec(release: KubeVersion, at: &str, spec: Option<&Value>) -> Vec<String> {
    let Some(spec) = spec else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let number = |key: &str| spec.get(key).and_then(Value::as_i64).unwrap_or(0);
    let indexed = spec.get("completionMode").and_then(Value::as_str) == Some("Indexed");
    if indexed && number("completions") > 100_000 && number("parallelism") > 10_000 {
        warnings.push(format!("{at}: In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail"));
    }
    if let Some(template) = spec.get("template") {
        let path = format!("{at}.template");
        warnings.extend(for_spec_and_meta(release, Some(&path), template));
    }
    warnings
}

/// `parts` joined, in one allocation (`concat`'s code is inlined or not from build to build,
/// which made the cost of a Pod's many port warnings change with unrelated code).
#[inline(never)]
fn joined(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.push_str(part);
    }
    out
}

/// A field path as `field.Path` writes it: `prefix` (none for a Pod) followed by `rest`.
fn path(prefix: Option<&str>, rest: &str) -> String {
    match prefix {
        Some(p) => format!("{p}.{rest}"),
        None => rest.to_string(),
    }
}

fn deprecated_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, m)| *m)
}

/// The value under `keys`, map member by map member: what the JSON pointer of those keys reads
/// (they are names, not indices, and need no escaping), without writing the pointer.
pub(super) fn get_in<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(v, |v, key| v.as_object()?.get(*key))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The members `names` of the object `v` (None for those it lacks, or when it is no object),
/// found in one pass over its members instead of a search of the map for each.
fn pick<'a, const N: usize>(v: &'a Value, names: &[&str; N]) -> [Option<&'a Value>; N] {
    let mut found = [None; N];
    for (k, member) in v.as_object().into_iter().flatten() {
        if let Some(i) = names.iter().position(|n| *n == k) {
            found[i] = Some(member);
        }
    }
    found
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn present(v: Option<&Value>) -> bool {
    v.is_some_and(|v| !v.is_null())
}

/// `gitRepo`'s warning: from 1.33 the volume driver is off by default (`GitRepoVolumeDriver`).
fn git_repo_message(release: KubeVersion) -> &'static str {
    if release.at_least(33) {
        "deprecated in v1.11, and disabled by default in v1.33+"
    } else {
        "deprecated in v1.11"
    }
}

/// The first minor release with each warning that not every modelled release has.
struct Since;

impl Since {
    const APPLY_HINT: u32 = 30;
    const TEMPLATE_APPARMOR: u32 = 30;
    const LABEL_VALUES: u32 = 33;
    const OVERLAPPING_PATHS: u32 = 33;
    const PORT_NAMES: u32 = 33;
    const IP_FORMATS: u32 = 33;
    const CRONJOB_TIME_ZONE: u32 = 30;
}

/// Whether a memory or ephemeral-storage quantity is not a whole number of bytes as upstream
/// judges it (`MilliValue() % 1000 != 0`, the milli value rounded up).
fn fractional(q: &Value) -> Option<String> {
    if q.as_str().is_some_and(whole_bytes) {
        return None;
    }
    fractional_parsed(q)
}

/// [`fractional`] told by parsing the quantity.
fn fractional_parsed(q: &Value) -> Option<String> {
    let quantity = Quantity::from_json(q).ok().flatten()?;
    let mut milli = quantity.clone();
    milli.round_up(-3);
    let mut whole = milli.clone();
    whole.round_up(0);
    (whole.cmp_value(&milli) != std::cmp::Ordering::Equal).then(|| quantity.to_string())
}

/// Whether a quantity's text is digits with no suffix or a suffix of whole multiples (`256Mi`,
/// `2G`): a whole number of bytes, told without parsing it.
fn whole_bytes(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && matches!(
            &text[digits..],
            "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "k" | "M" | "G" | "T" | "P" | "E"
        )
}

/// `warningsForPodSpecAndMeta`: `template` is a Pod or a pod template (`metadata` and `spec`),
/// `prefix` the template's field path (none for a Pod).
pub(crate) fn for_spec_and_meta(
    release: KubeVersion,
    prefix: Option<&str>,
    template: &(impl Doc + ?Sized),
) -> Vec<String> {
    let null = Value::Null;
    let spec = template.member("spec").unwrap_or(&null);
    let [
        node_selector,
        affinity,
        topology_spread,
        volumes,
        host_aliases,
        pull_secrets,
        overhead,
        pod_security,
        grace_period,
        dns_config,
    ] = pick(
        spec,
        &[
            "nodeSelector",
            "affinity",
            "topologySpreadConstraints",
            "volumes",
            "hostAliases",
            "imagePullSecrets",
            "overhead",
            "securityContext",
            "terminationGracePeriodSeconds",
            "dnsConfig",
        ],
    );
    let annotations = template
        .at("/metadata/annotations")
        .and_then(Value::as_object);
    let has_annotation = |key: &str| annotations.is_some_and(|a| a.contains_key(key));
    let p = |rest: &str| path(prefix, rest);
    let mut warnings = Vec::new();

    // Deprecated node labels in the nodeSelector, node affinity and topology spread.
    if let Some(selector) = node_selector.and_then(Value::as_object) {
        let sorted: BTreeMap<_, _> = selector.iter().collect();
        for key in sorted.keys() {
            if let Some(msg) = deprecated_label(key) {
                warnings.push(format!(
                    "{}: {msg}",
                    p(&format!("spec.nodeSelector[{key}]"))
                ));
            }
        }
    }
    if let Some(node) = affinity.and_then(|a| a.get("nodeAffinity")) {
        let required = get_in(
            node,
            &[
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
            ],
        );
        for (i, term) in items(required).iter().enumerate() {
            let at = p(&format!(
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
            ));
            node_selector_term(&mut warnings, term, false, &at);
        }
        let preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution");
        for (i, term) in items(preferred).iter().enumerate() {
            let at = p(&format!(
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"
            ));
            node_selector_term(
                &mut warnings,
                term.get("preference").unwrap_or(&null),
                release.at_least(Since::LABEL_VALUES),
                &at,
            );
        }
    }
    for (i, t) in items(topology_spread).iter().enumerate() {
        let key = str_of(t, "topologyKey");
        if let Some(msg) = deprecated_label(key) {
            warnings.push(format!(
                "{}: {key} is {msg}",
                p(&format!("spec.topologySpreadConstraints[{i}].topologyKey"))
            ));
        }
        if !present(t.get("labelSelector")) {
            warnings.push(format!(
                "{}: a null labelSelector results in matching no pod",
                p(&format!(
                    "spec.topologySpreadConstraints[{i}].labelSelector"
                ))
            ));
        }
    }

    // Deprecated annotations.
    for (key, msg) in DEPRECATED_ANNOTATIONS {
        if has_annotation(key) {
            warnings.push(format!(
                "{}: {msg}",
                p(&format!("metadata.annotations[{key}]"))
            ));
        }
    }

    // Deprecated and removed volume plugins.
    for (i, v) in items(volumes).iter().enumerate() {
        let sources = pick(v, &DEPRECATED_VOLUMES.map(|(source, _)| source));
        for ((source, msg), found) in DEPRECATED_VOLUMES.iter().zip(sources) {
            if !present(found) {
                continue;
            }
            let msg = match *source {
                "gitRepo" => git_repo_message(release),
                "ephemeral" => {
                    if let Some(claim) = get_in(v, &["ephemeral", "volumeClaimTemplate"])
                        && !claim.is_null()
                    {
                        let at = p(&format!(
                            "spec.volumes[{i}].ephemeral.volumeClaimTemplate.spec"
                        ));
                        claim_spec_warnings(&mut warnings, &at, claim.get("spec").unwrap_or(&null));
                    }
                    continue;
                }
                _ => msg,
            };
            warnings.push(format!(
                "{}: {msg}",
                p(&format!("spec.volumes[{i}].{source}"))
            ));
        }
    }
    if release.at_least(Since::OVERLAPPING_PATHS) {
        overlapping_virtual_paths(&mut warnings, items(volumes));
    }

    // Duplicate hostAliases and imagePullSecrets; imagePullSecrets with an empty name.
    let aliases = items(host_aliases);
    let secrets = items(pull_secrets);
    for (list, member, what) in [
        (aliases, "ip", "spec.hostAliases"),
        (secrets, "name", "spec.imagePullSecrets"),
    ] {
        if list.len() < 2 {
            continue;
        }
        let mut seen = HashSet::new();
        for (i, item) in list.iter().enumerate() {
            let value = str_of(item, member);
            if !seen.insert(value) {
                warnings.push(format!(
                    "{}: duplicate {member} {}",
                    p(&format!("{what}[{i}].{member}")),
                    quote(value)
                ));
            }
        }
    }
    for (i, s) in secrets.iter().enumerate() {
        if str_of(s, "name").is_empty() {
            warnings.push(format!(
                "{}: invalid empty name \"\"",
                p(&format!("spec.imagePullSecrets[{i}].name"))
            ));
        }
    }

    // Fractional bytes in the overhead.
    for resource in ["memory", "ephemeral-storage"] {
        if let Some(text) = overhead.and_then(|o| o.get(resource)).and_then(fractional) {
            warnings.push(format!(
                "{}: fractional byte value {} is invalid, must be an integer",
                p(&format!("spec.overhead[{resource}]")),
                quote(&text)
            ));
        }
    }

    // The Pod's seccomp annotation without the field.
    let pod_security = pod_security.unwrap_or(&null);
    if !present(pod_security.get("seccompProfile")) && has_annotation(SECCOMP_POD) {
        warnings.push(format!(
            r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            p(&format!("metadata.annotations[{SECCOMP_POD}]"))
        ));
    }
    let pod_apparmor = present(pod_security.get("appArmorProfile"));
    let containers = containers(spec, prefix);

    // Per-container annotations are looked up only when some annotation has their prefix.
    let has_prefix =
        |prefix: &str| annotations.is_some_and(|a| a.keys().any(|k| k.starts_with(prefix)));
    let (seccomp_keys, apparmor_keys) = (
        has_prefix(SECCOMP_CONTAINER),
        has_prefix(APPARMOR_CONTAINER),
    );
    // Each container's ports, read once for the two passes over them below.
    let mut ports = Vec::with_capacity(containers.len());
    for (c, at) in &containers {
        let [name, security, resources, env, container_ports] =
            pick(c, &["name", "securityContext", "resources", "env", "ports"]);
        ports.push(items(container_ports));
        let name = name.and_then(Value::as_str).unwrap_or("");
        let security = || security.unwrap_or(&null);
        let key = || [SECCOMP_CONTAINER, name].concat();
        if seccomp_keys && !present(security().get("seccompProfile")) && has_annotation(&key()) {
            warnings.push(format!(
                r#"{}: non-functional in v1.27+; use the "seccompProfile" field instead"#,
                p(&format!("metadata.annotations[{}]", key()))
            ));
        }
        // A Pod's AppArmor warning comes from `applyAppArmorVersionSkew` instead.
        let has_field = || pod_apparmor || present(security().get("appArmorProfile"));
        let key = || [APPARMOR_CONTAINER, name].concat();
        let template_apparmor = release.at_least(Since::TEMPLATE_APPARMOR);
        if apparmor_keys
            && template_apparmor
            && prefix.is_some()
            && !has_field()
            && has_annotation(&key())
        {
            warnings.push(format!(
                r#"{}: deprecated since v1.30; use the "appArmorProfile" field instead"#,
                p(&format!("metadata.annotations[{}]", key()))
            ));
        }
        let [limits, requests] = resources.map_or([None; 2], |r| pick(r, &["limits", "requests"]));
        fn bytes(amounts: Option<&Value>) -> [Option<&Value>; 2] {
            amounts.map_or([None; 2], |a| pick(a, &["memory", "ephemeral-storage"]))
        }
        let ([limits_memory, limits_storage], [requests_memory, requests_storage]) =
            (bytes(limits), bytes(requests));
        for (kind, value, resource) in [
            ("limits", limits_memory, "memory"),
            ("requests", requests_memory, "memory"),
            ("limits", limits_storage, "ephemeral-storage"),
            ("requests", requests_storage, "ephemeral-storage"),
        ] {
            if let Some(text) = value.and_then(fractional) {
                warnings.push(format!(
                    "{at}.resources.{kind}[{resource}]: fractional byte value {} is invalid, must be an integer",
                    quote(&text)
                ));
            }
        }
        let env = items(env);
        if env.len() > 1 {
            let mut seen = foldhash::HashSet::default();
            for (i, item) in env.iter().enumerate() {
                let name = str_of(item, "name");
                if seen.insert(name) {
                    continue;
                }
                let reference = format!("$({name})");
                let value = str_of(item, "value");
                let bad = present(item.get("valueFrom"))
                    || value == reference
                    || !value.contains(&reference);
                if bad {
                    let hint = if release.at_least(Since::APPLY_HINT) {
                        ", which may be dropped when using apply"
                    } else {
                        ""
                    };
                    warnings.push(format!(
                        "{at}.env[{i}]: hides previous definition of {}{hint}",
                        quote(name)
                    ));
                }
            }
        }
    }

    // Ports across all containers, keyed by number and protocol; a port's path is written when
    // a warning first names it.
    let port_at = |c: usize, i: usize| {
        let (at, index) = (&containers[c].1, i.to_string());
        joined(&[at, ".ports[", &index, "]"])
    };
    // Where a port is and what is compared of it: its host IP and port.
    type Seen<'v> = (usize, usize, Option<String>, &'v str, i64);
    let mut all_ports: foldhash::HashMap<(i64, &str), Vec<Seen<'_>>> = Default::default();
    for (ci, container_ports) in ports.iter().enumerate() {
        for (i, port) in container_ports.iter().enumerate() {
            let mut here = None;
            let (mut host_ip, mut host_port, mut container_port, mut protocol) = ("", 0, 0, "");
            if let Some(members) = port.as_object() {
                for (k, v) in members {
                    match k.as_str() {
                        "hostIP" => host_ip = v.as_str().unwrap_or(""),
                        "hostPort" => host_port = v.as_i64().unwrap_or(0),
                        "containerPort" => container_port = v.as_i64().unwrap_or(0),
                        "protocol" => protocol = v.as_str().unwrap_or(""),
                        _ => {}
                    }
                }
            }
            if !host_ip.is_empty() && host_port == 0 {
                warnings.push(format!(
                    "{}: hostIP set without hostPort: {{Name:{} HostPort:{host_port} ContainerPort:{container_port} Protocol:{protocol} HostIP:{host_ip}}}",
                    here.get_or_insert_with(|| port_at(ci, i)),
                    str_of(port, "name"),
                ));
            }
            let others = all_ports.entry((container_port, protocol)).or_default();
            for (oc, oi, other_at, other_ip, other_port) in others.iter_mut() {
                let (other_ip, other_port) = (*other_ip, *other_port);
                let what = if short_eq(host_ip, other_ip) && host_port == other_port {
                    "duplicate"
                } else if host_port == 0 || other_port == 0 {
                    "overlapping"
                } else if host_port == other_port && (host_ip.is_empty() != other_ip.is_empty()) {
                    "dangerously ambiguous"
                } else {
                    continue;
                };
                let here = here.get_or_insert_with(|| port_at(ci, i));
                let other_at = other_at.get_or_insert_with(|| port_at(*oc, *oi));
                warnings.push(joined(&[
                    here,
                    ": ",
                    what,
                    " port definition with ",
                    other_at,
                ]));
            }
            others.push((ci, i, here, host_ip, host_port));
        }
    }
    let mut port_names: HashMap<&str, String> = HashMap::new();
    let port_name_containers = if release.at_least(Since::PORT_NAMES) {
        containers.as_slice()
    } else {
        &[]
    };
    for ((_, at), container_ports) in port_name_containers.iter().zip(&ports) {
        for (i, port) in container_ports.iter().enumerate() {
            let name = str_of(port, "name");
            if name.is_empty() {
                continue;
            }
            let here = format!("{at}.ports[{i}]");
            match port_names.get(name) {
                Some(other) => warnings.push(format!(
                    "{here}: duplicate port name {} with {other}, services and probes that select ports by name will use {other}",
                    quote(name)
                )),
                None => {
                    port_names.insert(name, here);
                }
            }
        }
    }

    if grace_period.and_then(Value::as_i64).is_some_and(|g| g < 0) {
        warnings.push(format!(
            "{}: must be >= 0; negative values are invalid and will be treated as 1",
            p("spec.terminationGracePeriodSeconds")
        ));
    }

    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(affinity) = affinity.and_then(|a| a.get(kind)) else {
            continue;
        };
        let terms = [
            ("required", "labelSelector"),
            ("preferred", "podAffinityTerm.labelSelector"),
        ];
        for (when, selector) in terms {
            let list = format!("{when}DuringSchedulingIgnoredDuringExecution");
            for (i, t) in items(affinity.get(&list)).iter().enumerate() {
                if !present(t.pointer(&format!("/{}", selector.replace('.', "/")))) {
                    warnings.push(format!(
                        "{}: a null labelSelector results in matching no pod",
                        p(&format!("spec.affinity.{kind}.{list}[{i}].{selector}"))
                    ));
                }
            }
        }
    }

    // Deprecated IP address formats.
    if !release.at_least(Since::IP_FORMATS) {
        return warnings;
    }
    let nameservers = dns_config.and_then(|d| d.get("nameservers"));
    for (i, ns) in items(nameservers).iter().enumerate() {
        let at = p(&format!("spec.dnsConfig.nameservers[{i}]"));
        warnings.extend(ip_warning(&at, ns.as_str().unwrap_or("")));
    }
    for (i, alias) in aliases.iter().enumerate() {
        let at = p(&format!("spec.hostAliases[{i}].ip"));
        warnings.extend(ip_warning(&at, str_of(alias, "ip")));
    }
    warnings
}

/// apimachinery's `GetWarningsForIP`: an IPv4 address with leading zeros or an IPv4-mapped IPv6
/// address (which the legacy parser accepts) is non-standard; another IPv6 address should be
/// in RFC 5952's canonical form. Nothing for what does not parse.
fn ip_warning(at: &str, value: &str) -> Option<String> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let non_standard = |preferred: String| {
        format!(
            "{at}: non-standard IP address {} will be considered invalid in a future Kubernetes release: use {}",
            quote(value),
            quote(&preferred)
        )
    };
    if value.contains(':') {
        let ip: Ipv6Addr = value.parse().ok()?;
        if let Some(v4) = ip.to_ipv4_mapped() {
            return Some(non_standard(v4.to_string()));
        }
        let canonical = ip.to_string();
        return (canonical != value).then(|| {
            format!(
                "{at}: IPv6 address {} should be in RFC 5952 canonical format ({})",
                quote(value),
                quote(&canonical)
            )
        });
    }
    if value.parse::<Ipv4Addr>().is_ok() {
        return None;
    }
    // The legacy parser reads each of the four parts as decimal, leading zeros allowed.
    let parts = value
        .split('.')
        .map(|part| {
            let digits =
                !part.is_empty() && part.len() <= 3 && part.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| part.parse::<u8>().ok()).flatten()
        })
        .collect::<Option<Vec<u8>>>()?;
    let octets: [u8; 4] = parts.try_into().ok()?;
    Some(non_standard(Ipv4Addr::from(octets).to_string()))
}

/// `GetWarningsForPersistentVolumeClaimSpec`: a storage request or limit that is not a whole
/// number of bytes.
fn claim_spec_warnings(warnings: &mut Vec<String>, at: &str, spec: &Value) {
    for kind in ["requests", "limits"] {
        let value = get_in(spec, &["resources", kind, "storage"]);
        if let Some(text) = value.and_then(fractional) {
            warnings.push(format!(
                "{at}.resources.{kind}[storage]: fractional byte value {} is invalid, must be an integer",
                quote(&text)
            ));
        }
    }
}

/// The containers in `VisitContainersWithPath`'s order, with their field paths.
fn containers<'a>(spec: &'a Value, prefix: Option<&str>) -> Vec<(&'a Value, String)> {
    let mut out = Vec::new();
    const LISTS: [&str; 3] = ["initContainers", "containers", "ephemeralContainers"];
    for (list, found) in LISTS.into_iter().zip(pick(spec, &LISTS)) {
        for (i, c) in items(found).iter().enumerate() {
            let (dot, prefix) = prefix.map_or(("", ""), |p| (".", p));
            let index = i.to_string();
            out.push((c, [prefix, dot, "spec.", list, "[", &index, "]"].concat()));
        }
    }
    out
}

/// `GetWarningsForNodeSelectorTerm`.
fn node_selector_term(warnings: &mut Vec<String>, term: &Value, check_values: bool, at: &str) {
    for (i, expression) in items(term.get("matchExpressions")).iter().enumerate() {
        let key = str_of(expression, "key");
        if let Some(msg) = deprecated_label(key) {
            warnings.push(format!("{at}.matchExpressions[{i}].key: {key} is {msg}"));
        }
        if check_values {
            for (j, value) in items(expression.get("values")).iter().enumerate() {
                let value = value.as_str().unwrap_or("");
                for msg in crate::config::validation::is_valid_label_value(value) {
                    warnings.push(format!(
                        "{at}.matchExpressions[{i}].values[{j}]: {value} is invalid, {msg}"
                    ));
                }
            }
        }
    }
}

/// A path of a volume's items and where it came from (`pathAndSource`).
#[derive(Clone, PartialEq)]
struct Source {
    path: String,
    source: String,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.source.is_empty() {
            write!(f, "{}", quote(&self.path))
        } else {
            write!(f, "{} ({})", quote(&self.path), self.source)
        }
    }
}

fn paths_of(list: Option<&Value>, source: &str) -> Vec<Source> {
    items(list)
        .iter()
        .map(|item| Source {
            path: str_of(item, "path").to_string(),
            source: source.to_string(),
        })
        .collect()
}

/// `checkForOverlap`.
fn overlaps<'a>(haystack: &'a [Source], needle: &Source) -> Vec<&'a Source> {
    if needle.path.is_empty() {
        return Vec::new();
    }
    let n = format!("{}/", needle.path);
    haystack
        .iter()
        .filter(|item| {
            if item.path.is_empty() {
                return false;
            }
            let h = format!("{}/", item.path);
            *item == needle || h.starts_with(&n) || n.starts_with(&h)
        })
        .collect()
}

/// `checkVolumeMappingForOverlap` and the projected volumes' own walk: each path (trailing `/`
/// trimmed) against the ones before it.
fn walk(paths: Vec<Source>, all: &mut Vec<Source>, mut found: impl FnMut(&Source, &Source)) {
    for mut ps in paths {
        ps.path = ps.path.trim_end_matches('/').to_string();
        for c in overlaps(all, &ps) {
            found(&ps, c);
        }
        all.push(ps);
    }
}

/// `warningsForOverlappingVirtualPaths`.
fn overlapping_virtual_paths(warnings: &mut Vec<String>, volumes: &[Value]) {
    let warn = |name: &str, desc: &str, body: String| {
        format!("volume {} ({desc}): overlapping paths: {body}", quote(name))
    };
    for v in volumes {
        let name = str_of(v, "name");
        // The description is written only for a source with items.
        let simple = |source: &Value, desc: &dyn Fn() -> String, warnings: &mut Vec<String>| {
            if let Some(list) = source.get("items").filter(|l| !l.is_null()) {
                let desc = desc();
                walk(paths_of(Some(list), ""), &mut Vec::new(), |ps, c| {
                    warnings.push(warn(name, &desc, format!("{ps} with {c}")));
                });
            }
        };
        if let Some(cm) = v.get("configMap") {
            let desc = || format!("ConfigMap {}", quote(str_of(cm, "name")));
            simple(cm, &desc, warnings);
        }
        if let Some(s) = v.get("secret") {
            let desc = || format!("Secret {}", quote(str_of(s, "secretName")));
            simple(s, &desc, warnings);
        }
        if let Some(d) = v.get("downwardAPI") {
            simple(d, &|| "DownwardAPI".into(), warnings);
        }
        let Some(projected) = v.get("projected").filter(|p| !p.is_null()) else {
            continue;
        };
        let mut all = Vec::new();
        let mut source_paths: Vec<Source> = Vec::new();
        for source in items(projected.get("sources")) {
            if source
                .as_object()
                .is_none_or(|m| m.values().all(Value::is_null))
            {
                warnings.push(format!(
                    "volume {} (Projected) has no sources provided",
                    quote(name)
                ));
                continue;
            }
            let with_items = |key: &str| source.get(key).filter(|s| present(s.get("items")));
            // Like upstream, a source that yields no paths keeps the previous source's.
            if let Some(cm) = with_items("configMap") {
                source_paths = paths_of(
                    cm.get("items"),
                    &format!("ConfigMap {}", quote(str_of(cm, "name"))),
                );
            } else if let Some(s) = with_items("secret") {
                source_paths = paths_of(
                    s.get("items"),
                    &format!("Secret {}", quote(str_of(s, "name"))),
                );
            } else if let Some(d) = with_items("downwardAPI") {
                source_paths = paths_of(d.get("items"), "DownwardAPI");
            } else if let Some(t) = source.get("serviceAccountToken").filter(|t| !t.is_null()) {
                source_paths = vec![Source {
                    path: str_of(t, "path").into(),
                    source: "ServiceAccountToken".into(),
                }];
            } else if let Some(b) = source.get("clusterTrustBundle").filter(|b| !b.is_null()) {
                let bundle = b
                    .get("name")
                    .and_then(Value::as_str)
                    .or_else(|| b.get("signerName").and_then(Value::as_str))
                    .unwrap_or("");
                source_paths = vec![Source {
                    path: str_of(b, "path").into(),
                    source: format!("ClusterTrustBundle {}", quote(bundle)),
                }];
            }
            walk(source_paths.clone(), &mut all, |ps, c| {
                warnings.push(warn(name, "Projected", format!("{ps} with {c}")));
            });
        }
    }
}

#[cfg(test)]
mod tests {

    /// Every kind the strategies warn for is let through; a ConfigMap's object is never read.
    #[test]
    fn pointers_read_member_by_member_read_what_json_pointers_read() {
        use serde_json::json;
        let docs = [
            json!({"spec": {"a": {"b": 1, "c~d": 2, "e/f": 3, "": {"": 4}}, "list": [{"x": 5}, 6],
                            "0": {"1": 7}, "n": null, "s": "t"}}),
            json!({"spec": [{"a": 1}]}),
            json!({"spec": "x"}),
            json!({}),
        ];
        let pointers = [
            "/spec",
            "/spec/a",
            "/spec/a/b",
            "/spec/a/c~0d",
            "/spec/a/e~1f",
            "/spec/a/",
            "/spec/a//",
            "/spec/list/0/x",
            "/spec/list/1",
            "/spec/list/01",
            "/spec/list/-",
            "/spec/0/1",
            "/spec/n/x",
            "/spec/s/x",
            "/spec/0",
            "/spec/a/b/c",
            "/spec/",
            "/nothing/a",
            "spec/a",
            "",
            "/",
        ];
        for doc in &docs {
            for pointer in pointers {
                let by_pointer =
                    pointer
                        .strip_prefix('/')
                        .and_then(|rest| match rest.split_once('/') {
                            None => doc.get(rest),
                            Some((first, _)) => doc.get(first)?.pointer(&rest[first.len()..]),
                        });
                assert_eq!(doc.at(pointer), by_pointer, "{pointer} of {doc}");
            }
            for keys in [
                &["spec", "a", "b"][..],
                &["spec", "list", "x"],
                &["spec", "s"],
                &[],
            ] {
                let pointer: String = keys.iter().map(|k| format!("/{k}")).collect();
                assert_eq!(
                    get_in(doc, keys),
                    doc.pointer(&pointer),
                    "{keys:?} of {doc}"
                );
            }
        }
    }

    #[test]
    fn a_quantity_read_as_whole_bytes_without_parsing_is_whole_when_parsed() {
        let mut whole = 0;
        let suffixes = [
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m", "n", "u",
            "e3", "E3", "e-3", "K", "ki", "i", " ", "Mi ",
        ];
        for digits in [
            "0",
            "1",
            "007",
            "999",
            "1.5",
            ".5",
            "5.",
            "+5",
            "-5",
            "",
            "123456789012345678901234567890",
        ] {
            for suffix in suffixes {
                let text = format!("{digits}{suffix}");
                let q = Value::String(text.clone());
                assert_eq!(fractional(&q), fractional_parsed(&q), "{text}");
                if whole_bytes(&text) {
                    whole += 1;
                    assert_eq!(fractional_parsed(&q), None, "{text}");
                }
            }
        }
        assert_eq!(whole, 5 * 13);
        assert_eq!(fractional(&Value::from("1m")).as_deref(), Some("1m"));
    }

    #[test]
    fn only_pods_and_kinds_with_a_pod_template_are_read_for_warnings() {
        for (group, resource) in [
            ("", "pods"),
            ("", "replicationcontrollers"),
            ("", "podtemplates"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "daemonsets"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
            ("batch", "cronjobs"),
        ] {
            assert!(warns_for(group, resource), "{group}/{resource}");
        }
        for (group, resource) in [("", "configmaps"), ("", "services"), ("apps", "pods")] {
            assert!(!warns_for(group, resource), "{group}/{resource}");
        }
    }

    use super::*;

    /// Upstream's `TestWarnings` and `TestTemplateOnlyWarnings` (`pkg/api/pod/warnings_test.go`
    /// of 1.33), ported as data: every case as a pod template (no field path; `template` for the
    /// template-only cases) and as a Pod, compared as upstream compares them (the same warnings,
    /// as many of them).
    #[test]
    fn upstream_warnings_table() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pod-warnings/warnings_test.json"
        );
        let text = std::fs::read(path).expect("the ported table");
        let table: Value = crate::json::from_slice(&text).expect("the table is JSON");
        let mut ran = 0;
        for (test, prefix) in [
            ("TestWarnings", None),
            ("TestTemplateOnlyWarnings", Some("template")),
        ] {
            for case in table[test].as_array().expect("cases") {
                let name = case["name"].as_str().unwrap_or("");
                let disabled = case["gitRepoPluginDisabled"].as_bool().unwrap_or(false);
                // The table is 1.33's; `GitRepoVolumeDriver` is on by default before 1.33 only,
                // so a case with the driver on runs as 1.31 (its other warnings are the same).
                let git_repo = case.to_string().contains("\"gitRepo\"");
                let minor = if git_repo && !disabled { 31 } else { 33 };
                let release = KubeVersion::new(minor).expect("release");
                let mut expected: Vec<String> = case["expected"]
                    .as_array()
                    .map(|e| {
                        e.iter()
                            .filter_map(|w| w.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                expected.sort();
                let Some(template) = case.get("template") else {
                    continue;
                };
                let mut got = for_spec_and_meta(release, prefix, template);
                got.sort();
                assert_eq!(got, expected, "{test} podspec_{name}");
                let pod = for_spec_and_meta(release, None, template);
                if prefix.is_none() {
                    let mut pod = pod;
                    pod.sort();
                    assert_eq!(pod, expected, "{test} pod_{name}");
                } else {
                    assert!(pod.is_empty(), "{test} pod_{name}: {pod:?}");
                }
                ran += 1;
            }
        }
        assert!(ran >= 80, "only {ran} cases ran");
    }

    /// What the releases before 1.33 do not warn about, or word otherwise (from the
    /// differences between the releases' `warnings.go`).
    #[test]
    fn earlier_releases_warn_less() {
        let template = serde_json::json!({
            "metadata": {"annotations": {
                "container.apparmor.security.beta.kubernetes.io/a": "unconfined"
            }},
            "spec": {
                "hostAliases": [{"ip": "010.0.0.1"}],
                "containers": [
                    {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "X", "value": "2"}],
                     "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}]},
                    {"name": "b", "ports": [{"containerPort": 81, "protocol": "TCP", "name": "http"}]}
                ],
            },
        });
        let warnings = |minor| {
            for_spec_and_meta(
                KubeVersion::new(minor).unwrap(),
                Some("spec.template"),
                &template,
            )
        };
        let env = "spec.template.spec.containers[0].env[1]: hides previous definition of \"X\"";
        let apparmor = "spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: deprecated since v1.30; use the \"appArmorProfile\" field instead";
        let port = "spec.template.spec.containers[1].ports[0]: duplicate port name \"http\" with spec.template.spec.containers[0].ports[0], services and probes that select ports by name will use spec.template.spec.containers[0].ports[0]";
        let ip = "spec.template.spec.hostAliases[0].ip: non-standard IP address \"010.0.0.1\" will be considered invalid in a future Kubernetes release: use \"10.0.0.1\"";
        let hinted = format!("{env}, which may be dropped when using apply");
        assert_eq!(warnings(28), vec![env.to_string()]);
        assert_eq!(warnings(31), vec![apparmor.to_string(), hinted.clone()]);
        assert_eq!(
            warnings(33),
            vec![
                apparmor.to_string(),
                hinted,
                port.to_string(),
                ip.to_string()
            ]
        );
    }
}

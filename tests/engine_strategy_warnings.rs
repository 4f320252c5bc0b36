//! The registry strategies' own warnings through the engine: on which creates and updates
//! `WarningsOnCreate` / `WarningsOnUpdate` warn (`pkg/registry/*/*/strategy.go`), computed on
//! the object the strategy prepared.

mod common;

use hookscope::KubeVersion;
use hookscope::engine::{Attributes, Engine, EngineOptions};
use hookscope::script::ScriptedReplier;
use serde_json::{Value, json};

const DEPRECATED: &str = r#"spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; use "kubernetes.io/os" instead"#;

/// The warnings of a request of `operation` on `resource` (`group/version/kind`) with no
/// webhook or policy configured, as 1.33 answers it.
fn warnings(
    operation: &str,
    gvk: (&str, &str, &str),
    resource: &str,
    object: Value,
    old: Option<Value>,
) -> Vec<String> {
    warnings_in(33, operation, gvk, resource, object, old)
}

/// [`warnings`] as `release` answers.
fn warnings_in(
    release: u32,
    operation: &str,
    gvk: (&str, &str, &str),
    resource: &str,
    object: Value,
    old: Option<Value>,
) -> Vec<String> {
    let (group, version, kind) = gvk;
    let attrs: Attributes = serde_json::from_value(json!({
        "operation": operation,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": "shop", "name": object["metadata"]["name"],
        "object": object, "oldObject": old,
    }))
    .expect("attributes");
    let engine = Engine::new(
        &[],
        EngineOptions::for_version(KubeVersion::new(release).unwrap()),
    );
    let mut replier = ScriptedReplier::new(Vec::<(String, _)>::new());
    common::dispatch_on_runtime(&engine, attrs, &mut replier)
        .0
        .warnings
}

fn template(node_os: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "nodeSelector": {node_os: "linux"},
            "containers": [{"name": "web", "image": "nginx:1.27"}],
        },
    })
}

fn workload(kind: &str, api_version: &str, generation: i64, node_os: &str, label: &str) -> Value {
    json!({
        "kind": kind, "apiVersion": api_version,
        "metadata": {"name": "web", "namespace": "shop", "generation": generation,
                     "labels": {"tier": label}, "uid": "u-1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": template(node_os)},
    })
}

fn template_warning() -> String {
    format!("spec.template.{DEPRECATED}")
}

#[test]
fn a_deployment_update_warns_only_when_its_generation_changes() {
    let gvk = ("apps", "v1", "Deployment");
    let old = workload("Deployment", "apps/v1", 3, "kubernetes.io/os", "a");
    // The template changes: the strategy bumps the generation, the new template is warned of.
    let new = workload("Deployment", "apps/v1", 3, "beta.kubernetes.io/os", "a");
    let got = warnings("UPDATE", gvk, "deployments", new, Some(old));
    assert_eq!(got, vec![template_warning()]);
    // Only the labels change: no new generation, no warning, deprecated label or not.
    let old = workload("Deployment", "apps/v1", 3, "beta.kubernetes.io/os", "a");
    let new = workload("Deployment", "apps/v1", 3, "beta.kubernetes.io/os", "b");
    assert!(warnings("UPDATE", gvk, "deployments", new, Some(old)).is_empty());
    // A create warns.
    let new = workload("Deployment", "apps/v1", 0, "beta.kubernetes.io/os", "a");
    assert_eq!(
        warnings("CREATE", gvk, "deployments", new, None),
        vec![template_warning()]
    );
}

#[test]
fn a_replication_controller_update_warns_of_the_old_template() {
    let gvk = ("", "v1", "ReplicationController");
    let rc = |node_os| {
        let mut rc = workload("ReplicationController", "v1", 3, node_os, "a");
        rc["spec"]["selector"] = json!({"app": "web"});
        rc
    };
    // `rcStrategy.WarningsOnUpdate` hands the templates over swapped.
    let update = |new, old| {
        warnings(
            "UPDATE",
            gvk,
            "replicationcontrollers",
            rc(new),
            Some(rc(old)),
        )
    };
    let (current, deprecated) = ("kubernetes.io/os", "beta.kubernetes.io/os");
    assert_eq!(update(current, deprecated), vec![template_warning()]);
    assert!(update(deprecated, current).is_empty());
}

#[test]
fn a_pod_warns_on_create_only() {
    let gvk = ("", "v1", "Pod");
    let pod = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "web.0", "namespace": "shop", "uid": "u-1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": template("beta.kubernetes.io/os")["spec"].clone(),
    });
    let got = warnings("CREATE", gvk, "pods", pod.clone(), None);
    assert_eq!(
        got,
        vec![
            "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]".to_string(),
            DEPRECATED.to_string(),
        ]
    );
    let mut new = pod.clone();
    new["spec"]["activeDeadlineSeconds"] = json!(30);
    assert!(warnings("UPDATE", gvk, "pods", new, Some(pod)).is_empty());
}

#[test]
fn jobs_and_cronjobs_warn_of_their_job_spec_and_schedule() {
    let job_spec = json!({
        "completionMode": "Indexed", "completions": 100_001, "parallelism": 10_001,
        "template": template("beta.kubernetes.io/os"),
    });
    let job = json!({
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": {"name": "batch", "namespace": "shop"},
        "spec": job_spec,
    });
    let indexed = "In Indexed Jobs with a number of completions higher than 10^5 and a parallelism higher than 10^4, Kubernetes might not be able to track completedIndexes when a big number of indexes fail";
    assert_eq!(
        warnings("CREATE", ("batch", "v1", "Job"), "jobs", job, None),
        vec![format!("spec: {indexed}"), template_warning()]
    );
    let cronjob = |schedule: &str| {
        json!({
            "kind": "CronJob", "apiVersion": "batch/v1",
            "metadata": {"name": "nightly", "namespace": "shop", "generation": 2, "uid": "u-1",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": job_spec.clone()}},
        })
    };
    let gvk = ("batch", "v1", "CronJob");
    let docs =
        "see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details";
    // The schedule is the spec: the update bumps the generation, and the job spec is warned of
    // again before the time zone.
    let got = warnings(
        "UPDATE",
        gvk,
        "cronjobs",
        cronjob("CRON_TZ=UTC 0 0 * * *"),
        Some(cronjob("0 0 * * *")),
    );
    assert_eq!(
        got,
        vec![
            format!("spec.jobTemplate.spec: {indexed}"),
            format!("spec.jobTemplate.{}", template_warning()),
            format!("cannot use TZ or CRON_TZ in spec.spec.schedule, use timeZone instead, {docs}"),
        ]
    );
    // 1.28 warned of it on create too, in other words.
    let got = warnings_in(
        28,
        "CREATE",
        gvk,
        "cronjobs",
        cronjob("TZ=UTC 0 0 * * *"),
        None,
    );
    assert_eq!(
        got,
        vec![
            format!("spec.jobTemplate.spec: {indexed}"),
            format!("spec.jobTemplate.{}", template_warning()),
            format!("CRON_TZ or TZ used in spec.spec.schedule is not officially supported, {docs}"),
        ]
    );
}

#[test]
fn a_pod_created_with_an_apparmor_annotation_is_warned_before_the_strategy_warnings() {
    let gvk = ("", "v1", "Pod");
    let pod = |pod_profile: Value| {
        json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web.0", "namespace": "shop", "annotations": {
                "container.apparmor.security.beta.kubernetes.io/web": "unconfined",
                "container.apparmor.security.beta.kubernetes.io/side": "localhost/custom"}},
            "spec": {
                "securityContext": {"appArmorProfile": pod_profile},
                "containers": [
                    {"name": "web", "image": "nginx:1.27"},
                    {"name": "side", "image": "nginx:1.27",
                     "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
                ],
            },
        })
    };
    let apparmor = r#"metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: deprecated since v1.30; use the "appArmorProfile" field instead"#;
    let name = "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must not contain dots]";
    // The annotation's profile is copied to the container (which has none): warned, first.
    let create =
        |minor, pod_profile| warnings_in(minor, "CREATE", gvk, "pods", pod(pod_profile), None);
    assert_eq!(
        create(33, json!({"type": "RuntimeDefault"})),
        vec![apparmor.to_string(), name.to_string()]
    );
    // It names the Pod's profile: nothing to copy, no warning; the container with a profile of
    // its own is never warned of.
    assert_eq!(
        create(33, json!({"type": "Unconfined"})),
        vec![name.to_string()]
    );
    // Before 1.30 there is no version skew to warn of.
    assert_eq!(create(29, json!(null)), vec![name.to_string()]);
}

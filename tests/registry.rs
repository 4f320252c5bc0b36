//! The resource registry: upstream EquivalentResourceRegistry semantics, built-in data per
//! release, custom resources.

use hookscope::KubeVersion;
use hookscope::api::{GroupVersionKind, GroupVersionResource};
use hookscope::registry::{RegistryError, ResourceRegistry, load_custom_resources};

fn gvr(g: &str, v: &str, r: &str) -> GroupVersionResource {
    GroupVersionResource::new(g, v, r)
}

fn gvk(g: &str, v: &str, k: &str) -> GroupVersionKind {
    GroupVersionKind::new(g, v, k)
}

fn release(minor: u32) -> ResourceRegistry {
    ResourceRegistry::builtin(KubeVersion::new(minor).expect("modelled release"))
}

/// The registry of upstream `TestShouldCallHook` (`should-call-hook` cases): deployments of every
/// group share the key `/deployments`, others use the default group/resource key.
fn should_call_hook_registry() -> ResourceRegistry {
    let regs: &[(&str, &str, &str, &str, &str, &str, &str)] = &[
        (
            "extensions",
            "v1beta1",
            "deployments",
            "",
            "extensions",
            "v1beta1",
            "Deployment",
        ),
        ("apps", "v1", "deployments", "", "apps", "v1", "Deployment"),
        (
            "apps",
            "v1beta1",
            "deployments",
            "",
            "apps",
            "v1beta1",
            "Deployment",
        ),
        (
            "apps",
            "v1alpha1",
            "deployments",
            "",
            "apps",
            "v1alpha1",
            "Deployment",
        ),
        (
            "extensions",
            "v1beta1",
            "deployments",
            "scale",
            "extensions",
            "v1beta1",
            "Scale",
        ),
        (
            "apps",
            "v1",
            "deployments",
            "scale",
            "autoscaling",
            "v1",
            "Scale",
        ),
        (
            "apps",
            "v1beta1",
            "deployments",
            "scale",
            "apps",
            "v1beta1",
            "Scale",
        ),
        (
            "apps",
            "v1alpha1",
            "deployments",
            "scale",
            "apps",
            "v1alpha1",
            "Scale",
        ),
        ("example.com", "v1", "widgets", "", "", "", ""),
        ("example.com", "v2", "widgets", "", "", "", ""),
    ];
    let mut reg = ResourceRegistry::empty();
    for (g, v, r, sub, kg, kv, k) in regs {
        let key = if *r == "deployments" {
            "/deployments"
        } else {
            ""
        };
        reg.register(gvr(g, v, r), sub, gvk(kg, kv, k), true, key);
    }
    reg
}

/// ShouldCallHook step 4 reduced to the registry part: for each rule (exact GVR) in order, the
/// first equivalent (registry order, skipping the request's own resource) that the rule names.
fn equivalent_match(
    reg: &ResourceRegistry,
    request: &GroupVersionResource,
    sub: &str,
    rules: &[GroupVersionResource],
) -> Option<(GroupVersionResource, Option<GroupVersionKind>)> {
    for rule in rules {
        for eq in reg.equivalent_resources(request, sub) {
            if eq != request && eq == rule {
                return Some((eq.clone(), reg.kind_for(eq, sub)));
            }
        }
    }
    None
}

#[test]
fn should_call_hook_registry_order_and_kinds() {
    let reg = should_call_hook_registry();
    let apps_v1 = gvr("apps", "v1", "deployments");
    let all = [
        gvr("extensions", "v1beta1", "deployments"),
        gvr("apps", "v1", "deployments"),
        gvr("apps", "v1beta1", "deployments"),
        gvr("apps", "v1alpha1", "deployments"),
    ];
    assert_eq!(reg.equivalent_resources(&apps_v1, ""), &all);
    assert_eq!(reg.equivalent_resources(&apps_v1, "scale"), &all);
    assert_eq!(
        reg.equivalent_resources(&apps_v1, "status"),
        &[] as &[GroupVersionResource]
    );
    assert_eq!(
        reg.kind_for(&apps_v1, "scale"),
        Some(gvk("autoscaling", "v1", "Scale"))
    );
    assert_eq!(
        reg.kind_for(&gvr("extensions", "v1beta1", "deployments"), "scale"),
        Some(gvk("extensions", "v1beta1", "Scale"))
    );

    // "specific rules, equivalent match, prefer extensions" / "... prefer apps"
    let ext = gvr("extensions", "v1beta1", "deployments");
    let beta = gvr("apps", "v1beta1", "deployments");
    let hit = equivalent_match(&reg, &apps_v1, "", &[ext.clone(), beta.clone()]);
    assert_eq!(
        hit,
        Some((
            ext.clone(),
            Some(gvk("extensions", "v1beta1", "Deployment"))
        ))
    );
    let hit = equivalent_match(&reg, &apps_v1, "", &[beta.clone(), ext.clone()]);
    assert_eq!(
        hit,
        Some((beta.clone(), Some(gvk("apps", "v1beta1", "Deployment"))))
    );
    // subresource variants
    let hit = equivalent_match(&reg, &apps_v1, "scale", &[ext.clone(), beta.clone()]);
    assert_eq!(
        hit,
        Some((ext, Some(gvk("extensions", "v1beta1", "Scale"))))
    );
    let hit = equivalent_match(&reg, &apps_v1, "scale", std::slice::from_ref(&beta));
    assert_eq!(hit, Some((beta, Some(gvk("apps", "v1beta1", "Scale")))));

    // "invalid kind lookup": widgets v1/v2 are equivalent (default key) and have no kind.
    let v2 = gvr("example.com", "v2", "widgets");
    let v1 = gvr("example.com", "v1", "widgets");
    assert_eq!(reg.equivalent_resources(&v2, ""), &[v1.clone(), v2.clone()]);
    assert_eq!(
        equivalent_match(&reg, &v2, "", std::slice::from_ref(&v1)),
        Some((v1, None))
    );
    assert_eq!(reg.storage_key(&v2), Some("widgets.example.com"));
}

#[test]
fn deployments_scale_and_status_kinds() {
    for minor in 28..=37 {
        let reg = release(minor);
        let d = gvr("apps", "v1", "deployments");
        assert_eq!(
            reg.equivalent_resources(&d, ""),
            std::slice::from_ref(&d),
            "1.{minor}"
        );
        assert_eq!(reg.kind_for(&d, ""), Some(gvk("apps", "v1", "Deployment")));
        assert_eq!(
            reg.kind_for(&d, "status"),
            Some(gvk("apps", "v1", "Deployment"))
        );
        for r in ["deployments", "statefulsets", "replicasets"] {
            assert_eq!(
                reg.kind_for(&gvr("apps", "v1", r), "scale"),
                Some(gvk("autoscaling", "v1", "Scale"))
            );
        }
        let rc = gvr("", "v1", "replicationcontrollers");
        assert_eq!(
            reg.kind_for(&rc, "scale"),
            Some(gvk("autoscaling", "v1", "Scale"))
        );
        assert_eq!(reg.storage_key(&rc), Some("controllers"));
        // extensions/v1beta1 deployments were removed in 1.16
        assert!(
            reg.info(&gvr("extensions", "v1beta1", "deployments"), "")
                .is_none()
        );
        assert_eq!(
            reg.kind_for(&gvr("apps", "v1", "daemonsets"), "scale"),
            None
        );
    }
}

#[test]
fn pod_subresource_kinds() {
    let reg = release(37);
    let pods = gvr("", "v1", "pods");
    let kind = |sub: &str| reg.kind_for(&pods, sub);
    assert_eq!(kind("exec"), Some(gvk("", "v1", "PodExecOptions")));
    assert_eq!(kind("attach"), Some(gvk("", "v1", "PodAttachOptions")));
    assert_eq!(
        kind("portforward"),
        Some(gvk("", "v1", "PodPortForwardOptions"))
    );
    assert_eq!(kind("proxy"), Some(gvk("", "v1", "PodProxyOptions")));
    assert_eq!(kind("eviction"), Some(gvk("policy", "v1", "Eviction")));
    assert_eq!(kind("binding"), Some(gvk("", "v1", "Binding")));
    assert_eq!(kind("log"), Some(gvk("", "v1", "Pod")));
    assert_eq!(kind("ephemeralcontainers"), Some(gvk("", "v1", "Pod")));
    assert_eq!(kind("status"), Some(gvk("", "v1", "Pod")));
    assert_eq!(kind("nonexistent"), None);
    assert_eq!(
        reg.kind_for(&gvr("", "v1", "serviceaccounts"), "token"),
        Some(gvk("authentication.k8s.io", "v1", "TokenRequest"))
    );
    assert_eq!(
        reg.kind_for(&gvr("", "v1", "nodes"), "proxy"),
        Some(gvk("", "v1", "NodeProxyOptions"))
    );
    assert_eq!(
        reg.kind_for(&gvr("", "v1", "services"), "proxy"),
        Some(gvk("", "v1", "ServiceProxyOptions"))
    );
    assert_eq!(
        reg.kind_for(&gvr("", "v1", "namespaces"), "finalize"),
        Some(gvk("", "v1", "Namespace"))
    );
    assert_eq!(
        reg.kind_for(
            &gvr("certificates.k8s.io", "v1", "certificatesigningrequests"),
            "approval"
        ),
        Some(gvk(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest"
        ))
    );
    assert_eq!(
        reg.kind_for(
            &gvr("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            "status"
        ),
        Some(gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition"
        ))
    );
}

#[test]
fn events_share_storage_core_first() {
    for minor in [28, 33, 37] {
        let reg = release(minor);
        let core = gvr("", "v1", "events");
        let new = gvr("events.k8s.io", "v1", "events");
        let expected = [core.clone(), new.clone()];
        assert_eq!(reg.equivalent_resources(&core, ""), &expected);
        assert_eq!(reg.equivalent_resources(&new, ""), &expected);
        assert_eq!(
            reg.kind_for(&new, ""),
            Some(gvk("events.k8s.io", "v1", "Event"))
        );
    }
}

#[test]
fn autoscaling_versions_in_priority_order() {
    let reg = release(30);
    let v1 = gvr("autoscaling", "v1", "horizontalpodautoscalers");
    let v2 = gvr("autoscaling", "v2", "horizontalpodautoscalers");
    assert_eq!(reg.equivalent_resources(&v1, ""), &[v2.clone(), v1.clone()]);
    assert_eq!(reg.equivalent_resources(&v1, "status"), &[v2.clone(), v1]);
    assert_eq!(
        reg.preferred_version("autoscaling", "horizontalpodautoscalers"),
        Some(v2)
    );
    assert_eq!(
        reg.preferred_version("apps", "deployments"),
        Some(gvr("apps", "v1", "deployments"))
    );
    assert_eq!(reg.preferred_version("apps", "widgets"), None);
}

#[test]
fn scopes() {
    let reg = release(37);
    let ns = |g: &str, r: &str| reg.is_namespaced(g, r);
    assert_eq!(ns("", "namespaces"), Some(false));
    assert_eq!(ns("", "nodes"), Some(false));
    assert_eq!(ns("", "persistentvolumes"), Some(false));
    assert_eq!(ns("", "pods"), Some(true));
    assert_eq!(ns("", "configmaps"), Some(true));
    assert_eq!(ns("apps", "deployments"), Some(true));
    assert_eq!(ns("rbac.authorization.k8s.io", "clusterroles"), Some(false));
    assert_eq!(ns("rbac.authorization.k8s.io", "roles"), Some(true));
    assert_eq!(
        ns(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations"
        ),
        Some(false)
    );
    assert_eq!(
        ns("authorization.k8s.io", "localsubjectaccessreviews"),
        Some(true)
    );
    assert_eq!(ns("nope", "things"), None);
    let finalize = reg
        .info(&gvr("", "v1", "namespaces"), "finalize")
        .expect("registered");
    assert!(!finalize.namespaced);
    let exec = reg
        .info(&gvr("", "v1", "pods"), "exec")
        .expect("registered");
    assert!(exec.namespaced);
}

#[test]
fn flowcontrol_versions_per_release() {
    let fs = |v: &str| gvr("flowcontrol.apiserver.k8s.io", v, "flowschemas");
    assert_eq!(
        release(28).equivalent_resources(&fs("v1"), ""),
        &[fs("v1beta3"), fs("v1beta2")]
    );
    assert!(release(28).info(&fs("v1"), "").is_none());
    assert_eq!(
        release(29).equivalent_resources(&fs("v1"), ""),
        &[fs("v1"), fs("v1beta3")]
    );
    assert_eq!(
        release(31).equivalent_resources(&fs("v1beta3"), "status"),
        &[fs("v1"), fs("v1beta3")]
    );
    assert_eq!(release(32).equivalent_resources(&fs("v1"), ""), &[fs("v1")]);
    assert_eq!(
        release(28).preferred_version("flowcontrol.apiserver.k8s.io", "flowschemas"),
        Some(fs("v1beta3"))
    );
}

#[test]
fn resources_added_between_releases() {
    let present =
        |minor: u32, r: &GroupVersionResource, sub: &str| release(minor).info(r, sub).is_some();
    let vap = gvr(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
    );
    assert!(!present(29, &vap, "") && present(30, &vap, "") && present(30, &vap, "status"));
    let map = gvr(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicies",
    );
    assert!(!present(35, &map, "") && present(36, &map, ""));
    let pods = gvr("", "v1", "pods");
    assert!(!present(32, &pods, "resize") && present(33, &pods, "resize"));
    let claims = gvr("resource.k8s.io", "v1", "resourceclaims");
    assert!(!present(33, &claims, "") && present(34, &claims, "status"));
    let cidrs = gvr("networking.k8s.io", "v1", "servicecidrs");
    assert!(!present(32, &cidrs, "") && present(33, &cidrs, ""));
    let vac = gvr("storage.k8s.io", "v1", "volumeattributesclasses");
    assert!(!present(33, &vac, "") && present(34, &vac, ""));
    assert!(release(28).len() < release(37).len());
}

#[test]
fn unknown_resources_are_empty() {
    let reg = release(37);
    let w = gvr("example.com", "v1", "widgets");
    assert!(reg.equivalent_resources(&w, "").is_empty());
    assert_eq!(reg.kind_for(&w, ""), None);
    assert!(reg.info(&w, "").is_none());
    assert!(ResourceRegistry::empty().is_empty());
}

const CRONTAB_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  versions:
    - name: v1beta1
      served: true
      storage: false
      schema:
        openAPIV3Schema:
          type: object
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                cronSpec: {type: string}
                replicas: {type: integer}
            status:
              type: object
              properties:
                replicas: {type: integer}
                labelSelector: {type: string}
      subresources:
        status: {}
        scale:
          specReplicasPath: .spec.replicas
          statusReplicasPath: .status.replicas
          labelSelectorPath: .status.labelSelector
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames:
    - ct
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterwidgets.example.io
spec:
  group: example.io
  scope: Cluster
  names: {plural: clusterwidgets, kind: ClusterWidget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
"#;

#[test]
fn real_crd_yaml_registers_equivalent_versions() {
    let specs = load_custom_resources(CRONTAB_CRD).expect("valid CRDs");
    assert_eq!(specs.len(), 2);
    let mut reg = release(37);
    for s in &specs {
        reg.add_custom_resource(s);
    }
    let v1 = gvr("stable.example.com", "v1", "crontabs");
    let b1 = gvr("stable.example.com", "v1beta1", "crontabs");
    assert_eq!(reg.equivalent_resources(&v1, ""), &[b1.clone(), v1.clone()]);
    // only v1 has the subresources
    assert_eq!(
        reg.equivalent_resources(&b1, "status"),
        std::slice::from_ref(&v1)
    );
    assert_eq!(
        reg.kind_for(&v1, "scale"),
        Some(gvk("autoscaling", "v1", "Scale"))
    );
    assert_eq!(
        reg.kind_for(&b1, ""),
        Some(gvk("stable.example.com", "v1beta1", "CronTab"))
    );
    assert_eq!(reg.kind_for(&b1, "status"), None);
    assert_eq!(
        reg.is_namespaced("stable.example.com", "crontabs"),
        Some(true)
    );
    assert_eq!(
        reg.is_namespaced("example.io", "clusterwidgets"),
        Some(false)
    );
    assert_eq!(
        reg.preferred_version("stable.example.com", "crontabs"),
        Some(b1)
    );
}

#[test]
fn register_custom_resource_directly() {
    let mut reg = ResourceRegistry::empty();
    reg.register_custom_resource(
        "example.com",
        &["v1", "v2"],
        "widgets",
        "Widget",
        true,
        &["status"],
    );
    let v2 = gvr("example.com", "v2", "widgets");
    assert_eq!(reg.equivalent_resources(&v2, "status").len(), 2);
    assert_eq!(
        reg.kind_for(&v2, "status"),
        Some(gvk("example.com", "v2", "Widget"))
    );
}

#[test]
fn loader_errors_and_json() {
    let json = r#"[{"group":"a.io","names":{"plural":"as","kind":"A"},"scope":"Cluster","versions":[{"name":"v1","subresources":["status"]}]}]"#;
    let specs = load_custom_resources(json).expect("json list");
    assert!(!specs[0].namespaced && specs[0].versions[0].status);
    let err =
        load_custom_resources("- group: a.io\n  names: {plural: as}\n  versions: [{name: v1}]\n")
            .expect_err("kind missing");
    assert!(
        matches!(err, RegistryError::MissingField { document: 1, ref field, .. } if field == "names.kind")
    );
    assert!(matches!(
        load_custom_resources("a: [b"),
        Err(RegistryError::Parse(_))
    ));
    let err = load_custom_resources("- group: a.io\n  names: {plural: as, kind: A}\n  versions: [{name: v1, subresources: [logs]}]\n")
        .expect_err("unknown subresource");
    assert!(
        err.to_string().contains("versions[0].subresources"),
        "{err}"
    );
}

//! The embedded demo: five webhooks (a sidecar injector with reinvocationPolicy IfNeeded, a label
//! defaulter that makes it run again, a slow quota check that fails open, a policy validator that
//! denies, a deprecation warner), a ValidatingAdmissionPolicy between them (a replica limit on the
//! shop's Deployments) and a few dozen captured requests across namespaces. The webhooks
//! are served in process over real HTTPS on 127.0.0.1 with a CA minted at start
//! ([`start`]), or answered in process without a socket and with fixed durations
//! ([`offline`], for tests and reproducible screens). Nothing is written to disk.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::source::{ConfigDocument, ConsoleReplier, DocumentOrigin, ReplayInput, ReplaySource};
use crate::KubeVersion;
use crate::api::WebhookConfiguration;
use crate::engine::{
    Attributes, Engine, EngineOptions, Replier, Reply, ReplyOutcome, TransportError,
    TransportErrorKind, WebhookCall,
};
use crate::replay::input::Interner;
use crate::replay::replier::AnyReplier;
use crate::replay::run::IdMode;
use crate::replay::run::{ReplaySettings, Replayer};
use crate::replay::{CapturedRequest, IndexUnit, InputItem, NamespaceState, SourceRef};
use crate::transport::{HttpsOptions, HttpsReplier};
use crate::webhook_server::{
    Answer, Behaviour, Behaviours, Pki, ServerError, ServerOptions, WebhookServer,
};

/// The configurations, with `${URL}` and `${CA}` to fill in.
pub const WEBHOOKS_YAML: &str = include_str!("webhooks.yaml");

/// The demo's ValidatingAdmissionPolicy and its binding, which run between the mutating and the
/// validating webhooks.
pub const POLICIES_YAML: &str = include_str!("policies.yaml");

/// The name the demo's policy text goes by.
pub const POLICIES_FILE: &str = "demo-policies.yaml";

/// The demo's policies and bindings for the newest release, defaulted (and valid, as the
/// apiserver stores them).
pub fn policies() -> crate::config::policy::PolicySet {
    policies_for(KubeVersion::default())
}

/// The demo's policies and bindings for `version` ([`policies_text`]), defaulted and valid.
pub fn policies_for(version: KubeVersion) -> crate::config::policy::PolicySet {
    let mut set = crate::config::policy::PolicySet::default();
    for object in policy_objects(&policies_text(version)) {
        set.insert(object);
    }
    set
}

/// The demo's policy text as a cluster of `version` takes it: each kind under the newest
/// apiVersion the release serves (MutatingAdmissionPolicy v1alpha1 in 1.32 and 1.33, v1beta1
/// in 1.34 and 1.35; ValidatingAdmissionPolicy v1beta1 before 1.30), and without the kinds it
/// serves under none (MutatingAdmissionPolicy before 1.32), so that the demo runs what that
/// release would and an edit of the text is checked as it would.
pub fn policies_text(version: KubeVersion) -> String {
    let mut text = POLICIES_YAML.to_string();
    for kind in ["MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"] {
        let written = format!("admissionregistration.k8s.io/v1\nkind: {kind}");
        match crate::config::policy::served_api_version(kind, version) {
            // The binding's `kind: …Binding` starts as its policy's does.
            Some(api) => text = text.replace(&written, &format!("{api}\nkind: {kind}")),
            None => {
                text = text
                    .split("---\n")
                    .filter(|document| !document.contains(&written))
                    .collect::<Vec<_>>()
                    .join("---\n");
            }
        }
    }
    text
}

/// The policies and bindings of a demo policy text in text order, defaulted and valid.
fn policy_objects(text: &str) -> Vec<crate::config::policy::PolicyObject> {
    crate::config::parse_policy_documents(text, POLICIES_FILE)
        .into_iter()
        .filter_map(|loaded| {
            let mut loaded = loaded.ok()?;
            loaded.apply_defaults();
            crate::config::policy::validate_policy_object(&loaded.object)
                .is_empty()
                .then_some(loaded.object)
        })
        .collect()
}

/// The demo's policies as an editable document: editing it re-evaluates every request.
fn policies_document(version: KubeVersion) -> ConfigDocument {
    let text = policies_text(version);
    ConfigDocument {
        origin: DocumentOrigin::Embedded(POLICIES_FILE.into()),
        configurations: Vec::new(),
        policies: policy_objects(&text),
        text,
    }
}

/// How long the slow webhook takes (its timeoutSeconds is 1).
pub const SLOW_DELAY: Duration = Duration::from_millis(1500);

/// Starting the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Minting the CA failed.
    #[error("demo CA: {0}")]
    Pki(#[from] crate::webhook_server::PkiError),
    /// The server did not start.
    #[error("demo webhook server: {0}")]
    Server(#[from] ServerError),
    /// The embedded configurations did not load (a build defect).
    #[error("demo configurations: {0}")]
    Config(String),
}

/// The demo's configuration text pointing at `base_url` (`https://127.0.0.1:PORT`) with
/// `ca_pem` as caBundle.
pub fn configuration_text(base_url: &str, ca_pem: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    // The file's leading comment is about the template, not the filled-in text.
    let body: String = WEBHOOKS_YAML
        .split_inclusive('\n')
        .skip_while(|l| l.starts_with('#'))
        .collect();
    body.replace("${URL}", base_url).replace("${CA}", &ca)
}

/// The demo's configurations pointing at `base_url` (`https://127.0.0.1:PORT`) with `ca_pem` as
/// caBundle, defaulted as the apiserver stores them.
pub fn configurations(
    base_url: &str,
    ca_pem: &str,
) -> Result<Vec<WebhookConfiguration>, DemoError> {
    parse(&configuration_text(base_url, ca_pem))
}

fn parse(text: &str) -> Result<Vec<WebhookConfiguration>, DemoError> {
    crate::config::parse_documents(text, DEMO_FILE)
        .into_iter()
        .map(|l| {
            let mut l = l.map_err(|e| DemoError::Config(e.to_string()))?;
            l.apply_defaults();
            Ok(l.configuration)
        })
        .collect()
}

/// The name the demo's configuration text goes by.
pub const DEMO_FILE: &str = "demo-webhooks.yaml";

/// The demo's configurations as an editable document.
fn document(base_url: &str, ca_pem: &str) -> Result<ConfigDocument, DemoError> {
    let text = configuration_text(base_url, ca_pem);
    Ok(ConfigDocument {
        origin: DocumentOrigin::Embedded(DEMO_FILE.into()),
        configurations: parse(&text)?,
        text,
        policies: Vec::new(),
    })
}

/// What the demo's webhooks answer, by URL path. `None`: the path is the slow one.
fn answer(path: &str, operation: &str, object: Option<&Value>, old: Option<&Value>) -> Answer {
    let obj = object.or(old).cloned().unwrap_or(Value::Null);
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let labels = obj["metadata"]["labels"].as_object();
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let containers: Vec<&Value> = obj["spec"]["containers"]
        .as_array()
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    let has_proxy = containers.iter().any(|c| c["name"] == "proxy");
    match path {
        "/inject" => {
            if has_proxy {
                return Answer::allow();
            }
            let patch = json!([{"op": "add", "path": "/spec/containers/-", "value": {
                "name": "proxy", "image": "registry.demo/proxy:1.4",
                "ports": [{"containerPort": 15001}]}}]);
            Answer::allow()
                .with_patch(patch.to_string())
                .with_audit_annotation("injected", "proxy:1.4")
        }
        "/labels" => {
            let mut add = BTreeMap::new();
            if label("team").is_none() {
                add.insert("team", format!("{namespace}-owners"));
            }
            if kind == "Pod" && namespace == "shop" && label("sidecar.demo/inject").is_none() {
                add.insert("sidecar.demo/inject", "true".to_string());
            }
            if add.is_empty() {
                return Answer::allow();
            }
            let ops: Vec<Value> = if labels.is_none() {
                vec![json!({"op": "add", "path": "/metadata/labels", "value": add})]
            } else {
                add.iter()
                    .map(|(k, v)| {
                        json!({"op": "add",
                            "path": format!("/metadata/labels/{}", k.replace('~', "~0").replace('/', "~1")),
                            "value": v})
                    })
                    .collect()
            };
            Answer::allow().with_patch(Value::Array(ops).to_string())
        }
        "/policy" => match kind {
            "Pod" => {
                for c in &containers {
                    let image = c["image"].as_str().unwrap_or_default();
                    let tagged = image.rsplit('/').next().is_some_and(|i| i.contains(':'));
                    if image.ends_with(":latest") || !tagged {
                        return Answer::deny(
                            403,
                            format!(
                                "container {:?} uses image {image:?}: pin a version, :latest is not allowed",
                                c["name"].as_str().unwrap_or_default()
                            ),
                        );
                    }
                }
                if label("sidecar.demo/inject") == Some("true") && !has_proxy {
                    return Answer::deny(
                        403,
                        format!("pod {name} is labelled sidecar.demo/inject=true but has no proxy container"),
                    );
                }
                Answer::allow()
            }
            "ConfigMap" if operation == "DELETE" && name.ends_with("-locked") => {
                Answer::deny(409, format!("configmap {name} is locked against deletion"))
            }
            "ConfigMap" if namespace == "payments" => {
                let data = obj["data"].as_object();
                match data.and_then(|d| d.keys().find(|k| k.contains("password"))) {
                    Some(k) => Answer::deny(
                        422,
                        format!("configmaps in payments must not hold passwords (key {k:?}); use a Secret"),
                    ),
                    None => Answer::allow(),
                }
            }
            "Secret" => Answer::allow().with_audit_annotation("checked", "secret-shape"),
            _ => Answer::allow(),
        },
        "/warn" => match kind {
            "Deployment" if obj["spec"]["revisionHistoryLimit"].is_null() => Answer::allow()
                .with_warning(format!(
                    "deployment {name}: no spec.revisionHistoryLimit, 10 old ReplicaSets will be kept"
                )),
            "Service" if obj["spec"]["type"] == "NodePort" => Answer::allow().with_warning(
                format!("service {name} uses NodePort: prefer a LoadBalancer or an Ingress"),
            ),
            _ => Answer::allow(),
        },
        _ => Answer::allow(),
    }
}

fn server_answer(path: &'static str) -> Behaviour {
    Behaviour::custom(move |r| {
        let parse = |raw: Option<&serde_json::value::RawValue>| {
            raw.and_then(|v| crate::json::from_str::<Value>(v.get()).ok())
        };
        let (object, old) = (parse(r.object), parse(r.old_object));
        answer(
            path,
            r.operation.unwrap_or_default(),
            object.as_ref(),
            old.as_ref(),
        )
    })
}

/// The demo's webhook server behaviours.
pub fn behaviours() -> Behaviours {
    Behaviours::new()
        .route("/inject", server_answer("/inject"))
        .route("/labels", server_answer("/labels"))
        .route("/policy", server_answer("/policy"))
        .route("/warn", server_answer("/warn"))
        .route("/slow", Behaviour::Slow(SLOW_DELAY))
}

/// The demo's webhooks answered in process: the same answers as the server, with fixed
/// durations, and a timeout for the slow webhook. Deterministic.
#[derive(Debug, Clone, Default)]
pub struct DemoReplier;

/// The AdmissionReview response body of an answer.
fn response_body(api_version: &str, uid: &str, a: &Answer) -> Vec<u8> {
    let mut response = json!({"uid": uid, "allowed": a.allowed});
    if let Some(s) = &a.status {
        response["status"] = json!({"code": s.code, "message": s.message});
    }
    if let Some(p) = &a.patch {
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(p));
        response["patchType"] = json!("JSONPatch");
    }
    if !a.audit_annotations.is_empty() {
        response["auditAnnotations"] = json!(a.audit_annotations);
    }
    if !a.warnings.is_empty() {
        response["warnings"] = json!(a.warnings);
    }
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})
        .to_string()
        .into_bytes()
}

impl DemoReplier {
    fn one(call: &WebhookCall) -> Reply {
        let path = call
            .endpoint
            .url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or("/")
            .split('?')
            .next()
            .unwrap_or("/");
        if path == "/slow" {
            return Reply {
                outcome: ReplyOutcome::Transport(TransportError {
                    kind: TransportErrorKind::Timeout,
                    detail:
                        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                            .into(),
                }),
                elapsed: call.timeout,
            };
        }
        let body: Value = crate::json::from_slice(&call.body).unwrap_or(Value::Null);
        let req = &body["request"];
        let nonnull = |v: &Value| (!v.is_null()).then(|| v.clone());
        let a = answer(
            path,
            req["operation"].as_str().unwrap_or_default(),
            nonnull(&req["object"]).as_ref(),
            nonnull(&req["oldObject"]).as_ref(),
        );
        let ms = match path {
            "/inject" => 4,
            "/labels" => 2,
            "/policy" => 3,
            _ => 1,
        };
        Reply {
            outcome: ReplyOutcome::Http {
                status: 200,
                content_type: Some("application/json".into()),
                body: response_body(
                    body["apiVersion"].as_str().unwrap_or("admission.k8s.io/v1"),
                    req["uid"].as_str().unwrap_or_default(),
                    &a,
                ),
            },
            elapsed: Duration::from_millis(ms),
        }
    }
}

impl Replier for DemoReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies: Vec<Reply> = calls.iter().map(DemoReplier::one).collect();
        std::future::ready(replies)
    }
}

/// Labels of the demo's namespaces.
fn namespace_labels(ns: &str) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.to_string())]);
    let extra = match ns {
        "shop" => Some(("mesh", "enabled")),
        "payments" => Some(("compliance", "pci")),
        "batch" => Some(("tier", "batch")),
        _ => None,
    };
    if let Some((k, v)) = extra {
        l.insert(k.into(), v.into());
    }
    l
}

fn pod(ns: &str, name: &str, labels: Value, images: &[&str]) -> Value {
    let containers: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, img)| {
            let name = match i {
                _ if img.contains("/proxy:") => "proxy".to_string(),
                0 => "app".to_string(),
                _ => format!("app-{i}"),
            };
            json!({"name": name, "image": img})
        })
        .collect();
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"containers": containers}});
    if !labels.is_null() {
        p["metadata"]["labels"] = labels;
    }
    p
}

fn configmap(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"team": format!("{ns}-owners")}},
        "data": data})
}

fn deployment(ns: &str, name: &str, replicas: u32, history: Option<u32>) -> Value {
    let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": format!("registry.demo/{name}:2.1")}]}}}});
    if let Some(h) = history {
        d["spec"]["revisionHistoryLimit"] = json!(h);
    }
    d
}

fn service(ns: &str, name: &str, ty: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": ty, "selector": {"app": name}, "ports": [{"port": 80}]}})
}

/// Op, object, old object, dry run.
struct Capture {
    op: &'static str,
    object: Option<Value>,
    old: Option<Value>,
    dry_run: bool,
    user: &'static str,
}

fn create(object: Value) -> Capture {
    Capture {
        op: "CREATE",
        object: Some(object),
        old: None,
        dry_run: false,
        user: "alice@demo",
    }
}

fn update(old: Value, object: Value) -> Capture {
    Capture {
        op: "UPDATE",
        object: Some(object),
        old: Some(old),
        dry_run: false,
        user: "bob@demo",
    }
}

fn delete(old: Value) -> Capture {
    Capture {
        op: "DELETE",
        object: None,
        old: Some(old),
        dry_run: false,
        user: "carol@demo",
    }
}

fn dry(mut c: Capture) -> Capture {
    c.dry_run = true;
    c
}

fn with_label(mut v: Value, k: &str, val: &str) -> Value {
    v["metadata"]["labels"][k] = json!(val);
    v
}

/// The demo's captured requests, in order.
pub fn requests() -> Vec<InputItem> {
    let inject = json!({"sidecar.demo/inject": "true", "app": "web"});
    let captures = vec![
        create(pod(
            "shop",
            "web-1",
            inject.clone(),
            &["registry.demo/web:3.2"],
        )),
        create(pod(
            "shop",
            "cart-1",
            json!({"app": "cart"}),
            &["registry.demo/cart:1.9"],
        )),
        create(pod(
            "shop",
            "web-2",
            json!({"sidecar.demo/inject": "true", "team": "web"}),
            &["registry.demo/web:3.2"],
        )),
        create(pod(
            "shop",
            "api-1",
            inject.clone(),
            &["registry.demo/api:latest"],
        )),
        create(configmap("shop", "settings", json!({"theme": "dark"}))),
        create(deployment("shop", "web", 3, None)),
        dry(create(pod(
            "shop",
            "web-3",
            inject.clone(),
            &["registry.demo/web:3.3"],
        ))),
        create(service("shop", "web", "ClusterIP")),
        create(service("shop", "admin", "NodePort")),
        update(
            pod(
                "shop",
                "web-2",
                json!({"sidecar.demo/inject": "true", "team": "web"}),
                &["registry.demo/web:3.2", "registry.demo/proxy:1.4"],
            ),
            pod(
                "shop",
                "web-2",
                json!({"sidecar.demo/inject": "true", "team": "web", "tier": "front"}),
                &["registry.demo/web:3.2", "registry.demo/proxy:1.4"],
            ),
        ),
        create(pod(
            "shop",
            "cart-2",
            json!({"app": "cart", "team": "cart", "sidecar.demo/inject": "false"}),
            &["registry.demo/cart:2.0"],
        )),
        delete(pod(
            "shop",
            "web-1",
            inject.clone(),
            &["registry.demo/web:3.2"],
        )),
        create(configmap(
            "payments",
            "db-config",
            json!({"host": "db.payments", "password": "hunter2"}),
        )),
        create(
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "db-credentials", "namespace": "payments"},
            "data": {"username": "YXBw", "password": "aHVudGVyMg=="}}),
        ),
        update(
            configmap("payments", "feature-flags", json!({"refunds": "off"})),
            configmap("payments", "feature-flags", json!({"refunds": "on"})),
        ),
        delete(configmap(
            "payments",
            "ledger-locked",
            json!({"year": "2025"}),
        )),
        dry(delete(configmap(
            "payments",
            "ledger-locked",
            json!({"year": "2025"}),
        ))),
        create(pod(
            "payments",
            "processor-1",
            json!({"team": "payments"}),
            &["registry.demo/processor:2.3"],
        )),
        create(deployment("payments", "processor", 2, Some(5))),
        dry(create(configmap(
            "payments",
            "limits",
            json!({"daily": "10000"}),
        ))),
        create(pod(
            "batch",
            "report-1",
            json!({"team": "reports"}),
            &["registry.demo/reporter:latest"],
        )),
        create(json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "nightly", "namespace": "batch"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "job", "image": "registry.demo/job:1.0"}]}}}})),
        update(
            deployment("batch", "cron-runner", 1, None),
            deployment("batch", "cron-runner", 2, None),
        ),
        create(configmap(
            "batch",
            "job-template",
            json!({"schedule": "0 2 * * *"}),
        )),
        create(pod(
            "batch",
            "report-2",
            json!(null),
            &["registry.demo/reporter:4.0", "registry.demo/uploader:1.1"],
        )),
        create(pod(
            "default",
            "debug",
            json!({"sidecar.demo/inject": "true"}),
            &["busybox:1.36"],
        )),
        update(
            configmap("default", "app-config", json!({"level": "info"})),
            configmap("default", "app-config", json!({"level": "debug"})),
        ),
        delete(deployment("default", "old-app", 1, None)),
        create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sandbox"}})),
        create(with_label(
            pod(
                "kube-system",
                "coredns-1",
                json!({"sidecar.demo/inject": "true"}),
                &["registry.demo/coredns:latest"],
            ),
            "k8s-app",
            "kube-dns",
        )),
        update(
            configmap("kube-system", "coredns", json!({"Corefile": ".:53"})),
            configmap(
                "kube-system",
                "coredns",
                json!({"Corefile": ".:53 { log }"}),
            ),
        ),
        create(pod(
            "shop",
            "cart-3",
            json!({"app": "cart"}),
            &["registry.demo/cart:2.0"],
        )),
        dry(create(deployment("shop", "cart", 2, Some(3)))),
        create(pod("default", "nginx", json!({"app": "nginx"}), &["nginx"])),
    ];
    let mut intern = Interner::default();
    captures
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut r = captured(i, c);
            intern.request(&mut r);
            InputItem::Request(Box::new(r))
        })
        .collect()
}

fn captured(i: usize, c: Capture) -> CapturedRequest {
    let obj = c
        .object
        .as_ref()
        .or(c.old.as_ref())
        .cloned()
        .unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let api_version = obj["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = format!("{}s", kind.to_lowercase());
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let is_namespace = kind == "Namespace";
    let namespace = if is_namespace {
        name.clone()
    } else {
        obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let options = match c.op {
        "CREATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
        "UPDATE" => json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}),
        _ => json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
    };
    let attrs: Attributes = serde_json::from_value(json!({
        "operation": c.op,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": namespace, "name": name,
        "object": c.object, "oldObject": c.old, "dryRun": c.dry_run, "options": options,
        "userInfo": {"username": c.user, "groups": ["system:authenticated", "demo:developers"]},
    }))
    .unwrap_or_else(|e| unreachable!("demo request {i} is well formed: {e}"));
    CapturedRequest {
        source: SourceRef {
            file: "demo".into(),
            index: i + 1,
            unit: IndexUnit::Document,
            audit_id: None,
            line: None,
        },
        uid: format!("00000000-0000-4000-a000-{:012x}", i + 1),
        namespace: if is_namespace || namespace.is_empty() {
            NamespaceState::NotApplicable
        } else {
            NamespaceState::Known(Arc::new(namespace_labels(&namespace)))
        },
        attrs,
        audit: None,
        notes: Vec::new(),
        params: None,
    }
}

fn source(
    document: ConfigDocument,
    version: KubeVersion,
    replier: ConsoleReplier,
    concurrency: usize,
    ids: IdMode,
    label: &str,
) -> ReplaySource {
    let set = policies_for(version);
    let engine = Arc::new(
        Engine::new(
            &document.configurations,
            EngineOptions::for_version(version),
        )
        .with_policies(&set.validating, &set.validating_bindings)
        .with_mutating_policies(&set.mutating, &set.mutating_bindings),
    );
    let settings = ReplaySettings {
        concurrency,
        ..ReplaySettings::default()
    };
    ReplaySource {
        label: label.into(),
        replayer: Replayer::new(engine, settings),
        input: ReplayInput::Items(requests()),
        replier,
        ids,
        problems: Vec::new(),
        server: None,
        documents: vec![document, policies_document(version)],
    }
}

/// The demo over real HTTPS: mints a CA, starts the webhook server on 127.0.0.1 (on the current
/// tokio runtime) and returns a source that replays the capture against it.
pub async fn start(version: KubeVersion) -> Result<ReplaySource, DemoError> {
    let pki = Pki::mint(&[])?;
    let server = WebhookServer::start(&pki, behaviours(), ServerOptions::default()).await?;
    let document = document(&server.url(""), pki.ca_pem())?;
    let replier = ConsoleReplier::Replay(AnyReplier::Https(HttpsReplier::new(
        HttpsOptions::default(),
    )));
    let mut s = source(
        document,
        version,
        replier,
        4,
        IdMode::Random,
        "demo (https 127.0.0.1)",
    );
    s.server = Some(server);
    Ok(s)
}

/// The demo answered in process with fixed durations and sequential uids: the same screens on
/// every run.
pub fn offline(version: KubeVersion) -> ReplaySource {
    let document = document("https://127.0.0.1:8443", "demo-ca")
        .unwrap_or_else(|e| unreachable!("embedded demo configurations load: {e}"));
    source(
        document,
        version,
        ConsoleReplier::Demo(DemoReplier),
        1,
        IdMode::Sequential,
        "demo (offline)",
    )
}

#[cfg(test)]
mod policy_tests {
    #[test]
    fn embedded_policies_are_valid() {
        let set = super::policies();
        let counts = [
            set.validating.len(),
            set.validating_bindings.len(),
            set.mutating.len(),
            set.mutating_bindings.len(),
        ];
        assert_eq!(counts, [1, 1, 1, 1]);
    }

    /// Each release gets the demo's policies as it serves them, and its text checks clean for
    /// it (what an edit of it is checked against).
    #[test]
    fn the_policy_text_is_written_as_each_release_serves_it() {
        for minor in crate::KubeVersion::OLDEST.minor()..=crate::KubeVersion::NEWEST.minor() {
            let version = crate::KubeVersion::new(minor).unwrap();
            let text = super::policies_text(version);
            let checked = crate::edit::check_for(&text, "demo-policies.yaml", (&[], &[]), version);
            let errors: Vec<String> = checked.errors().map(ToString::to_string).collect();
            assert!(errors.is_empty(), "1.{minor}: {errors:?}");
            let set = super::policies_for(version);
            let mutating = usize::from(minor >= 32);
            assert_eq!(
                (
                    set.validating.len(),
                    set.mutating.len(),
                    set.mutating_bindings.len()
                ),
                (1, mutating, mutating),
                "1.{minor}"
            );
        }
        let v133 = super::policies_text("1.33".parse().unwrap());
        assert!(v133.contains(
            "admissionregistration.k8s.io/v1alpha1\nkind: MutatingAdmissionPolicyBinding"
        ));
        assert!(
            v133.contains("admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n")
        );
    }
}

//! The bodies of hookscope's fuzz targets, one function per parser a user feeds: the binaries in
//! `fuzz_targets/` call them under libFuzzer, and `tests/fuzz_corpus.rs` runs every file of the
//! seed corpora through them in the ordinary test suite. Each must return (any result, any
//! error) and never panic, overflow its stack or run away in time or memory.

use std::sync::OnceLock;

use hookscope::KubeVersion;
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::schema::Schema;
use serde_json::{Value, json};

/// `--input`: AdmissionReviews, audit events and logs, their envelopes, manifests, in any of
/// the formats the reader detects. They may nest as deep as kube-apiserver reads (10,000
/// levels): read on the stack the command gives them.
pub fn input(data: &[u8]) {
    hookscope::json::with_stack(|| {
        let mut reader = Reader::new(ClusterState::new());
        let mut items = 0usize;
        let _ = reader.read("fuzz", &mut &data[..], &mut |_| items += 1);
        reader.finish(&mut |_| items += 1);
    });
}

/// `--webhooks`: webhook configurations (and the other kinds of a release manifest) in YAML or
/// JSON, defaulted and validated; on the stack the command gives them, as they may nest as deep
/// as go-yaml reads (10,000 levels).
pub fn configurations(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        hookscope::json::with_stack(|| {
            let _ = hookscope::config::parse_documents(text, "fuzz");
            admission_policies(text);
        });
    }
}

/// The admission policies of a `--webhooks` file: read, defaulted and validated (their CEL
/// compiled); the valid ones run over a Pod's create (matching, CEL evaluation, mutations).
fn admission_policies(text: &str) {
    let mut set = hookscope::config::policy::PolicySet::default();
    for mut loaded in hookscope::config::parse_policy_documents(text, "fuzz")
        .into_iter()
        .flatten()
    {
        loaded.apply_defaults();
        if hookscope::config::policy::validate_policy_object(&loaded.object).is_empty() {
            set.insert(loaded.object);
        }
    }
    if set.validating.is_empty() && set.mutating.is_empty() {
        return;
    }
    use hookscope::engine::{Engine, EngineOptions, Namespaces, Phases, RequestContext};
    let engine = Engine::new(&[], EngineOptions::for_version(KubeVersion::NEWEST))
        .with_policies(&set.validating, &set.validating_bindings)
        .with_mutating_policies(&set.mutating, &set.mutating_bindings);
    let Ok(attrs) = serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "",
        "namespace": "default",
        "name": "p",
        "object": pod(),
        "oldObject": null,
        "dryRun": false,
        "options": null,
        "userInfo": {"username": "fuzz"},
    })) else {
        return;
    };
    let mut namespaces = Namespaces::default();
    namespaces.insert("default", Default::default());
    let mut metrics = hookscope::metrics::Metrics::new();
    let mut ids = hookscope::engine::SequentialIds::default();
    let _ = engine.dispatch_blocking(
        attrs,
        RequestContext {
            namespaces: &namespaces,
            ids: &mut ids,
            metrics: &mut metrics,
            deadline: None,
            phases: Phases::All,
        },
        &mut hookscope::script::ScriptedReplier::new([]),
    );
}

fn pod() -> &'static Value {
    static POD: OnceLock<Value> = OnceLock::new();
    POD.get_or_init(|| {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}]}],
                "volumes": [{"name": "data", "emptyDir": {}}],
            },
        })
    })
}

/// A webhook's JSON patch (evanphx's decoding and application) on a Pod, as bytes and as a
/// value.
pub fn json_patch(data: &[u8]) {
    if let Ok(patch) = hookscope::jsonpatch::decode(data) {
        let doc = serde_json::to_vec(pod()).unwrap_or_default();
        let _ = patch.apply(&doc);
        let _ = patch.apply_to_value(pod());
    }
}

fn release() -> KubeVersion {
    KubeVersion::new(33).unwrap_or_default()
}

/// An audit log's strategic merge patch of a Pod, over the Pod's Go type.
pub fn strategic_merge(data: &[u8]) {
    let Ok(patch) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let schema = Schema::for_release(release());
    if let Some(id) = schema.kind("", "v1", "Pod") {
        let meta = hookscope::schema::patchmeta::PatchNode::new(schema, id);
        let _ = hookscope::strategicpatch::strategic_merge_patch(pod().clone(), patch, &meta);
    }
}

/// An audit log's server-side apply of a Pod configuration onto a live Pod.
pub fn apply(data: &[u8]) {
    let Ok(config) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let schema = Schema::for_release(release());
    let Some(id) = schema.kind("", "v1", "Pod") else {
        return;
    };
    let req = hookscope::apply::Request {
        manager: "fuzz",
        api_version: "v1",
        kind: "Pod",
        time: "2024-01-01T00:00:00Z",
        force: data.len().is_multiple_of(2),
        subresource: "",
        reset_fields: None,
    };
    let managed = hookscope::apply::ManagedFields::default();
    let _ = hookscope::apply::apply(schema, id, Some(pod()), &config, &req, &managed);
}

/// A scraped `/metrics` text.
pub fn metrics_text(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = hookscope::live::metrics::parse_admission(text);
    }
}

/// The small files: `--script`, `--expect`, `--webhook-auth` (kubeconfig format), `live`'s
/// kubeconfig and the context chosen from it, the console's settings and theme files, and
/// quantities. The first byte picks the parser.
pub fn small_files(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    hookscope::json::with_stack(|| small_file(which, text));
}

fn small_file(which: u8, text: &str) {
    match which % 7 {
        0 => drop(hookscope::script::ScriptedReplier::from_yaml(text)),
        1 => drop(hookscope::replay::expect::Expectations::parse(text, "fuzz")),
        2 => drop(hookscope::transport::WebhookAuth::parse(text)),
        3 => drop(hookscope::tui::config::parse("fuzz", text)),
        4 => drop(hookscope::tui::theme::Theme::from_toml("fuzz", text)),
        5 => drop(hookscope::quantity::Quantity::parse(text)),
        _ => {
            if let Ok(kubeconfig) = kube::config::Kubeconfig::from_yaml(text) {
                let wanted = kubeconfig.contexts.first().map(|c| c.name.clone());
                let _ = hookscope::live::cluster::select_context(&kubeconfig, None);
                let _ = hookscope::live::cluster::select_context(&kubeconfig, wanted.as_deref());
                let _ = kubeconfig.clone().merge(kubeconfig);
            }
        }
    }
}

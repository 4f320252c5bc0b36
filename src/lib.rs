//! hookscope: a faithful re-implementation of kube-apiserver's admission webhook dispatcher
//! (MutatingAdmissionWebhook and ValidatingAdmissionWebhook), and the tools built on it.
//!
//! The [`engine`] does no IO: configurations, the request, namespace labels, ids and webhook
//! replies are its inputs; the verdict, the final object, audit annotations, warnings, metrics and
//! a step-by-step [`engine::trace`] are its outputs. The [`transport`] is one IO shell that
//! answers the engine's calls over real HTTPS.
//!
//! ```
//! use std::time::Duration;
//! use hookscope::config;
//! use hookscope::engine::{Attributes, AuditLevel, Engine, EngineOptions, Namespaces, Phases, RequestContext, SequentialIds};
//! use hookscope::metrics::Metrics;
//! use hookscope::script::{ScriptedReplier, ScriptedReply};
//! use serde_json::json;
//!
//! let yaml = r#"
//! apiVersion: admissionregistration.k8s.io/v1
//! kind: MutatingWebhookConfiguration
//! metadata: {name: injector}
//! webhooks:
//! - name: sidecar.example.com
//!   clientConfig: {url: "https://127.0.0.1:8443/inject"}
//!   rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
//!   sideEffects: None
//!   admissionReviewVersions: [v1]
//! "#;
//! let mut loaded = config::parse_documents(yaml, "inline.yaml").remove(0).unwrap();
//! loaded.apply_defaults();
//! let engine = Engine::new(&[loaded.configuration], EngineOptions::default());
//!
//! let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}});
//! let request: Attributes = serde_json::from_value(json!({
//!     "operation": "CREATE",
//!     "kind": {"group": "", "version": "v1", "kind": "Pod"},
//!     "resource": {"group": "", "version": "v1", "resource": "pods"},
//!     "namespace": "shop", "name": "web", "object": pod,
//! })).unwrap();
//!
//! let mut webhooks = ScriptedReplier::new([(
//!     "sidecar.example.com".to_string(),
//!     ScriptedReply::patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"injected": "yes"}}])),
//! )]);
//! let (mut ids, mut metrics) = (SequentialIds::default(), Metrics::new());
//! let ctx = RequestContext {
//!     namespaces: &Namespaces::default(),
//!     ids: &mut ids,
//!     metrics: &mut metrics,
//!     deadline: Some(Duration::from_secs(60)),
//!     phases: Phases::All,
//! };
//! let outcome = engine.dispatch_blocking(request, ctx, &mut webhooks);
//!
//! assert!(outcome.allowed);
//! assert_eq!(outcome.object.as_ref().unwrap()["metadata"]["labels"]["injected"], "yes");
//! assert_eq!(
//!     outcome.annotations_at(AuditLevel::Metadata)["mutation.webhook.admission.k8s.io/round_0_index_0"],
//!     r#"{"configuration":"injector","webhook":"sidecar.example.com","mutated":true}"#
//! );
//! ```

#![forbid(unsafe_code)]

pub mod api;
pub mod apply;
pub mod cel;
pub mod config;
pub mod defaulting;
pub mod edit;
pub mod engine;
pub mod fake_apiserver;
pub mod gofmt;
pub mod json;
pub mod jsonpatch;
pub mod live;
pub mod metrics;
pub mod quantity;
pub mod registry;
pub mod replay;
mod scan;
pub mod schema;
pub mod script;
pub mod selector;
pub mod strategicpatch;
pub mod transport;
pub mod tui;
pub mod version;
pub mod webhook_server;
pub mod yaml;

pub use version::{KubeVersion, ServerRelease};

#[cfg(test)]
pub(crate) mod testing {
    /// A small xorshift generator: the same sequence on every run, for tests over many inputs.
    pub(crate) fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }
}

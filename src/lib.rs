//! hookscope: a faithful re-implementation of kube-apiserver's admission webhook dispatcher
//! (MutatingAdmissionWebhook and ValidatingAdmissionWebhook), and the tools built on it.
//!
//! The [`engine`] does no IO: configurations, the request, namespace labels, ids and webhook
//! replies are its inputs; the verdict, the final object, audit annotations, warnings, metrics and
//! a step-by-step [`engine::trace`] are its outputs. The [`transport`] is one IO shell that
//! answers the engine's calls over real HTTPS.

pub mod api;
pub mod cel;
pub mod config;
pub mod engine;
pub mod jsonpatch;
pub mod metrics;
pub mod registry;
pub mod script;
pub mod selector;
pub mod transport;
pub mod version;

pub use version::KubeVersion;

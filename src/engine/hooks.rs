//! The flattened, ordered webhook list and the per-webhook state upstream memoises in its
//! accessors (parsed selectors, compiled conditions, the client endpoint).

use std::sync::Arc;

use crate::api::{Webhook, WebhookConfiguration, WebhookKind};
use crate::cel;
use crate::selector::Selector;

/// One webhook ready for dispatch.
#[derive(Debug, Clone)]
pub struct Hook {
    /// `<configuration>/<webhook>/<n>`.
    pub uid: String,
    /// Owning configuration's name.
    pub configuration: String,
    /// The webhook as configured.
    pub webhook: Webhook,
    /// Position in the flattened list of its kind.
    pub position: usize,
    pub(crate) ignore_failures: bool,
    pub(crate) equivalent: bool,
    pub(crate) reinvoke_if_needed: bool,
    pub(crate) namespace_selector: Result<Selector, String>,
    pub(crate) object_selector: Result<Selector, String>,
    pub(crate) conditions: Vec<Condition>,
    /// Where calls go, before the per-call timeout is appended; Err: the client cannot be built.
    pub(crate) endpoint: Result<crate::engine::Endpoint, String>,
    /// `configuration` and `webhook.name`, shared by every trace step and call record.
    pub(crate) configuration_name: Arc<str>,
    /// The endpoint's URL before `?timeout=`, shared by the trace of every call.
    pub(crate) url_base: Arc<str>,
    pub(crate) webhook_name: Arc<str>,
    /// `uid`, shared by every call.
    pub(crate) call_uid: Arc<str>,
    /// The configured caBundle, shared by every call.
    pub(crate) ca_bundle: Option<Arc<[u8]>>,
    /// The endpoint with `?timeout=` for the webhook's own timeout (the usual case): its seconds
    /// and the endpoint every such call shares.
    pub(crate) timed_endpoint: Option<(u64, Arc<crate::engine::Endpoint>)>,
}

/// A compiled matchCondition.
#[derive(Debug, Clone)]
pub(crate) struct Condition {
    pub name: String,
    pub expression: String,
    pub program: Result<Arc<cel::Program>, String>,
}

impl Hook {
    fn new(
        configuration: &str,
        webhook: &Webhook,
        uid: String,
        position: usize,
        env: &cel::Env,
    ) -> Hook {
        let selector = |s: &Option<crate::api::LabelSelector>| match s {
            None => Ok(Selector::nothing()),
            Some(s) => Selector::parse(s).map_err(|e| e.to_string()),
        };
        let conditions = webhook
            .match_conditions
            .iter()
            .flatten()
            .map(|c| Condition {
                name: c.name.clone(),
                expression: c.expression.clone(),
                program: cel::compile_in(&c.expression, env, cel::ReturnType::Bool)
                    .map(Arc::new)
                    .map_err(|e| e.to_string()),
            })
            .collect();
        let endpoint = super::endpoint::untimed_endpoint(&webhook.client_config);
        let timed_endpoint = endpoint.as_ref().ok().map(|e| {
            let secs = match webhook.timeout_seconds {
                Some(s) if s > 0 => s.unsigned_abs().into(),
                _ => super::dispatch::CLIENT_TIMEOUT.as_secs(),
            };
            let mut e = e.clone();
            super::endpoint::with_timeout(&mut e, secs);
            (secs, Arc::new(e))
        });
        Hook {
            call_uid: Arc::from(uid.as_str()),
            ca_bundle: webhook.client_config.ca_bundle.as_deref().map(Arc::from),
            timed_endpoint,
            uid,
            configuration: configuration.into(),
            webhook: webhook.clone(),
            position,
            ignore_failures: webhook.failure_policy.as_deref() == Some("Ignore"),
            equivalent: webhook.match_policy.as_deref() == Some("Equivalent"),
            reinvoke_if_needed: webhook.reinvocation_policy.as_deref() == Some("IfNeeded"),
            namespace_selector: selector(&webhook.namespace_selector),
            object_selector: selector(&webhook.object_selector),
            conditions,
            url_base: endpoint
                .as_ref()
                .map(|e| Arc::from(e.url.as_str()))
                .unwrap_or_else(|_| Arc::from("")),
            endpoint,
            configuration_name: Arc::from(configuration),
            webhook_name: Arc::from(webhook.name.as_str()),
        }
    }

    /// The failure policy in force (`Fail` when unset).
    pub fn failure_policy(&self) -> &'static str {
        if self.ignore_failures {
            "Ignore"
        } else {
            "Fail"
        }
    }
}

/// Flattens configurations of one kind as upstream does: configurations sorted by name
/// (byte-wise, stable), webhooks in list order; UIDs count repeated webhook names. The
/// matchConditions compile as `release` compiles stored expressions.
pub fn flatten(
    configs: &[WebhookConfiguration],
    kind: WebhookKind,
    release: crate::KubeVersion,
) -> Vec<Hook> {
    let env = cel::Env::match_conditions().stored(release);
    let mut ordered: Vec<&WebhookConfiguration> =
        configs.iter().filter(|c| c.kind == kind).collect();
    ordered.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut hooks = Vec::new();
    for cfg in ordered {
        let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for w in &cfg.webhooks {
            let n = seen.entry(w.name.as_str()).or_insert(0);
            let uid = format!("{}/{}/{}", cfg.name, w.name, n);
            *n += 1;
            let position = hooks.len();
            hooks.push(Hook::new(&cfg.name, w, uid, position, &env));
        }
    }
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A webhook's matchConditions compile as the modelled release compiles what it stored: a
    /// release's own libraries (the semver library from 1.33).
    #[test]
    fn match_conditions_compile_with_the_release_libraries() {
        let text = r#"{"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "semver"},
            "webhooks": [{"name": "semver.example.com", "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://127.0.0.1:8443/"},
                "matchConditions": [{"name": "semver", "expression": "isSemver('1.0.0')"}]}]}"#;
        let mut loaded = crate::config::parse_documents(text, "semver.json")
            .remove(0)
            .expect("a configuration");
        loaded.apply_defaults();
        let configs = [loaded.configuration];
        let compiled = |minor: u32| {
            let release = crate::KubeVersion::new(minor).expect("a modelled release");
            flatten(&configs, WebhookKind::Validating, release)[0].conditions[0]
                .program
                .clone()
        };
        assert!(compiled(33).is_ok());
        let err = compiled(32).expect_err("no semver library in 1.32");
        assert!(err.contains("undeclared reference to 'isSemver'"), "{err}");
    }
}

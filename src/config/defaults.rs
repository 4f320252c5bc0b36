//! Defaulting (`pkg/apis/admissionregistration/v1/defaults.go` and `.../v1beta1/defaults.go`).

use super::load::V1BETA1;
use crate::api::{LabelSelector, WebhookConfiguration, WebhookKind};

/// Apply the defaults of the configuration's apiVersion (`v1beta1` when it says so, `v1`
/// otherwise), filling only unset fields, and return what was filled as `path: value` lines.
///
/// | field | v1 | v1beta1 |
/// | --- | --- | --- |
/// | failurePolicy | Fail | Ignore |
/// | matchPolicy | Equivalent | Exact |
/// | namespaceSelector, objectSelector | `{}` | `{}` |
/// | sideEffects | — (required) | Unknown |
/// | timeoutSeconds | 10 | 30 |
/// | admissionReviewVersions | — (required) | `["v1beta1"]` |
/// | reinvocationPolicy (mutating) | Never | Never |
/// | rules[].scope | `*` | `*` |
/// | clientConfig.service.port | 443 | 443 |
pub fn apply_defaults(cfg: &mut WebhookConfiguration) -> Vec<String> {
    let beta = cfg.api_version == V1BETA1;
    let mutating = cfg.kind == WebhookKind::Mutating;
    let mut applied = Vec::new();
    for (i, hook) in cfg.webhooks.iter_mut().enumerate() {
        let p = format!("webhooks[{i}]");
        let mut note = |field: &str, value: &str| applied.push(format!("{p}.{field}: {value}"));
        if hook.failure_policy.is_none() {
            let v = if beta { "Ignore" } else { "Fail" };
            hook.failure_policy = Some(v.into());
            note("failurePolicy", v);
        }
        if hook.match_policy.is_none() {
            let v = if beta { "Exact" } else { "Equivalent" };
            hook.match_policy = Some(v.into());
            note("matchPolicy", v);
        }
        if hook.namespace_selector.is_none() {
            hook.namespace_selector = Some(LabelSelector::default());
            note("namespaceSelector", "{}");
        }
        if hook.object_selector.is_none() {
            hook.object_selector = Some(LabelSelector::default());
            note("objectSelector", "{}");
        }
        if beta && hook.side_effects.is_none() {
            hook.side_effects = Some("Unknown".into());
            note("sideEffects", "Unknown");
        }
        if hook.timeout_seconds.is_none() {
            let v = if beta { 30 } else { 10 };
            hook.timeout_seconds = Some(v);
            note("timeoutSeconds", &v.to_string());
        }
        if beta
            && hook
                .admission_review_versions
                .as_ref()
                .is_none_or(Vec::is_empty)
        {
            hook.admission_review_versions = Some(vec!["v1beta1".into()]);
            note("admissionReviewVersions", "[\"v1beta1\"]");
        }
        if mutating && hook.reinvocation_policy.is_none() {
            hook.reinvocation_policy = Some("Never".into());
            note("reinvocationPolicy", "Never");
        }
        for (r, rule) in hook.rules.iter_mut().flatten().enumerate() {
            if rule.scope.is_none() {
                rule.scope = Some("*".into());
                note(&format!("rules[{r}].scope"), "\"*\"");
            }
        }
        if let Some(svc) = hook.client_config.service.as_mut()
            && svc.port.is_none()
        {
            svc.port = Some(443);
            note("clientConfig.service.port", "443");
        }
    }
    applied
}

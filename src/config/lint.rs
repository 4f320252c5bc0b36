//! Best-practice warnings drawn from the Dynamic Admission Control documentation (not errors: the
//! apiserver accepts all of these).

use std::fmt;

use crate::api::{LabelSelector, Webhook, WebhookConfiguration, WebhookKind};

/// One best-practice warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// The webhook field concerned, e.g. `webhooks[0].namespaceSelector`.
    pub field: String,
    /// What is risky and what the documentation advises.
    pub message: String,
}

impl fmt::Display for Lint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Timeouts above this many seconds are reported: the documentation asks for "a small timeout"
/// and calls typically answer in milliseconds; 10 s is the v1 default.
const LONG_TIMEOUT_SECONDS: i32 = 10;

/// Best-practice warnings for a (defaulted or not) configuration.
pub fn lint(cfg: &WebhookConfiguration) -> Vec<Lint> {
    let mut out = Vec::new();
    let beta = cfg.api_version == super::V1BETA1;
    for (i, hook) in cfg.webhooks.iter().enumerate() {
        let p = format!("webhooks[{i}]");
        let mut push = |field: &str, message: String| {
            out.push(Lint {
                field: format!("{p}{field}"),
                message,
            });
        };
        if intercepts_namespaced(hook) && !excludes_kube_system(hook.namespace_selector.as_ref()) {
            push(
                ".namespaceSelector",
                "does not exclude kube-system: a webhook that is down or slow can block the control plane and its own pods (deadlock); exclude system namespaces and the webhook's own namespace, e.g. matchExpressions [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]".into(),
            );
        }
        if hook.object_selector.as_ref().is_some_and(|s| !s.is_empty())
            && !is_opt_in(hook.object_selector.as_ref())
        {
            push(
                ".objectSelector",
                "lets object authors opt out by setting labels: use the object selector only if the webhook is opt-in, because end users may skip the admission webhook by setting the labels".into(),
            );
        }
        let match_policy =
            hook.match_policy
                .as_deref()
                .unwrap_or(if beta { "Exact" } else { "Equivalent" });
        if match_policy == "Exact" {
            push(
                ".matchPolicy",
                "is Exact: requests through other versions of the same resource (e.g. extensions/v1beta1 for apps/v1) are not sent to the webhook; setting Equivalent is recommended so the webhook keeps intercepting the resources it expects when upgrades add versions".into(),
            );
        }
        let timeout = hook.timeout_seconds.unwrap_or(if beta { 30 } else { 10 });
        if timeout > LONG_TIMEOUT_SECONDS {
            push(
                ".timeoutSeconds",
                format!(
                    "is {timeout}s: webhooks add to API request latency and should answer in milliseconds; a small timeout is encouraged (a slow webhook with failurePolicy Fail blocks requests for that long)"
                ),
            );
        }
        let failure_policy =
            hook.failure_policy
                .as_deref()
                .unwrap_or(if beta { "Ignore" } else { "Fail" });
        if failure_policy == "Ignore" {
            push(
                ".failurePolicy",
                "is Ignore: errors and timeouts calling the webhook are silently skipped, so the policy it enforces can be bypassed whenever the webhook is unavailable; use Fail for webhooks that enforce policy, and watch the apiserver's webhook rejection/failure metrics".into(),
            );
        }
        match hook.side_effects.as_deref() {
            Some("None") | Some("NoneOnDryRun") => {}
            other => push(
                ".sideEffects",
                format!(
                    "is {}: dry-run requests that match this webhook are rejected; set None if the webhook has no side effects, or NoneOnDryRun if it suppresses them when dryRun is true",
                    other.unwrap_or("unset (Unknown)")
                ),
            ),
        }
        if cfg.kind == WebhookKind::Mutating
            && hook.reinvocation_policy.as_deref() == Some("IfNeeded")
        {
            push(
                ".reinvocationPolicy",
                "is IfNeeded: the webhook may be called again after later mutations, so it must be idempotent (able to admit an object it has already modified)".into(),
            );
        }
        if !hook
            .admission_review_versions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|v| v == "v1")
        {
            push(
                ".admissionReviewVersions",
                "does not include v1: the v1beta1 AdmissionReview is deprecated; accept v1 first"
                    .into(),
            );
        }
        if hook.client_config.url.is_some() && hook.client_config.ca_bundle.is_none() {
            push(
                ".clientConfig.caBundle",
                "is unset: the webhook's certificate is checked against the apiserver's system roots".into(),
            );
        }
    }
    out
}

fn intercepts_namespaced(hook: &Webhook) -> bool {
    hook.rules
        .iter()
        .flatten()
        .any(|r| r.scope.as_deref().is_none_or(|s| s != "Cluster"))
}

/// True when the selector cannot match `kube-system`: a `NotIn`/`DoesNotExist` on
/// `kubernetes.io/metadata.name` naming it, or any positive requirement (`In`, `Exists`,
/// `matchLabels`) that kube-system does not carry by default.
fn excludes_kube_system(sel: Option<&LabelSelector>) -> bool {
    let Some(sel) = sel else {
        return true;
    };
    const NAME: &str = "kubernetes.io/metadata.name";
    if sel
        .match_labels
        .iter()
        .flatten()
        .any(|(k, v)| k != NAME || v != "kube-system")
    {
        return true;
    }
    sel.match_expressions.iter().flatten().any(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "NotIn" => e.key == NAME && values.iter().any(|v| v == "kube-system"),
            "In" => e.key != NAME || !values.iter().any(|v| v == "kube-system"),
            "Exists" => e.key != NAME,
            _ => false,
        }
    })
}

/// Opt-in: the object must carry a label (`In`, `Exists`, or `matchLabels`), so an author who does
/// nothing is not intercepted. A selector made only of `NotIn`/`DoesNotExist` is opt-out.
fn is_opt_in(sel: Option<&LabelSelector>) -> bool {
    let Some(sel) = sel else {
        return true;
    };
    sel.match_labels.as_ref().is_some_and(|m| !m.is_empty())
        || sel
            .match_expressions
            .iter()
            .flatten()
            .any(|e| matches!(e.operator.as_str(), "In" | "Exists"))
}

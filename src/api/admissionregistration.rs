//! `admissionregistration.k8s.io` Mutating/ValidatingWebhookConfiguration, in the shape shared by
//! `v1` and `v1beta1`.
//!
//! Fields are kept as the API writes them: optional fields stay `None` until defaulting (see
//! [`crate::config`]) fills them, and enumerations stay strings so that validation can name an
//! unsupported value. The engine interprets `None` as upstream interprets a nil pointer.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::meta::LabelSelector;

/// Mutating or validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum WebhookKind {
    /// MutatingWebhookConfiguration / MutatingAdmissionWebhook.
    Mutating,
    /// ValidatingWebhookConfiguration / ValidatingAdmissionWebhook.
    Validating,
}

impl WebhookKind {
    /// The configuration kind: `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration`.
    pub fn configuration_kind(self) -> &'static str {
        match self {
            WebhookKind::Mutating => "MutatingWebhookConfiguration",
            WebhookKind::Validating => "ValidatingWebhookConfiguration",
        }
    }

    /// The API resource: `mutatingwebhookconfigurations` or `validatingwebhookconfigurations`.
    pub fn resource(self) -> &'static str {
        match self {
            WebhookKind::Mutating => "mutatingwebhookconfigurations",
            WebhookKind::Validating => "validatingwebhookconfigurations",
        }
    }
}

impl fmt::Display for WebhookKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WebhookKind::Mutating => "mutating",
            WebhookKind::Validating => "validating",
        })
    }
}

/// A Mutating- or ValidatingWebhookConfiguration.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfiguration {
    /// Which of the two kinds.
    pub kind: WebhookKind,
    /// `admissionregistration.k8s.io/v1` or `admissionregistration.k8s.io/v1beta1`.
    pub api_version: String,
    /// `metadata.name`.
    pub name: String,
    /// The whole `metadata` as written (labels, annotations, …).
    pub metadata: serde_json::Value,
    /// The webhooks, in list order.
    pub webhooks: Vec<Webhook>,
}

/// One webhook of a configuration. The mutating-only field `reinvocationPolicy` is `None` for
/// validating webhooks.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// Fully qualified name, e.g. `sidecar-injector.example.com`.
    #[serde(default)]
    pub name: String,
    /// How to reach the webhook.
    #[serde(default)]
    pub client_config: WebhookClientConfig,
    /// Operations and resources the webhook cares about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<RuleWithOperations>>,
    /// `Fail` or `Ignore` (None behaves as `Fail`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    /// `Exact` or `Equivalent` (None behaves as `Exact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
    /// Namespace label selector (None selects nothing, `{}` everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Object label selector (None selects nothing, `{}` everything).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    /// `None`, `NoneOnDryRun`, `Unknown` or `Some`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<String>,
    /// Per-call timeout in seconds (None: only the request deadline and the client's 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview versions the webhook accepts, in order of preference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_review_versions: Option<Vec<String>>,
    /// Mutating only: `Never` or `IfNeeded` (None behaves as `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// CEL conditions, all of which must be true for the webhook to be called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_conditions: Option<Vec<MatchCondition>>,
}

/// `WebhookClientConfig`: a URL or a service reference, and the CA bundle.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// `https://host[:port]/path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An in-cluster service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// PEM CA bundle (base64 on the wire).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "base64_bytes"
    )]
    pub ca_bundle: Option<Vec<u8>>,
}

/// `ServiceReference`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// Service namespace.
    #[serde(default)]
    pub namespace: String,
    /// Service name.
    #[serde(default)]
    pub name: String,
    /// URL path (None or empty: `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Port (None behaves as 443).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `RuleWithOperations`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleWithOperations {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<String>>,
    /// API groups (`""` is core, `*` all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_groups: Option<Vec<String>>,
    /// API versions (`*` all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_versions: Option<Vec<String>>,
    /// Resources, `res` or `res/sub`, with `*` wildcards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// `Cluster`, `Namespaced` or `*` (None behaves as `*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// A named CEL expression.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MatchCondition {
    /// Name, unique within the webhook.
    #[serde(default)]
    pub name: String,
    /// CEL expression that must evaluate to a bool.
    #[serde(default)]
    pub expression: String,
}

/// `[]byte` fields as Go's encoding/json writes them: standard, padded base64.
pub mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes bytes as a base64 string.
    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&STANDARD.encode(b)),
            None => s.serialize_none(),
        }
    }

    /// Deserializes a base64 string (or null) into bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        match s {
            None => Ok(None),
            Some(s) => STANDARD
                .decode(s.trim())
                .map(Some)
                .map_err(|e| serde::de::Error::custom(format!("illegal base64 data: {e}"))),
        }
    }
}

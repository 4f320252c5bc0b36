//! Scripted replies: declared answers per webhook, for tests and what-if replays. IO-free: a
//! declared delay is reported as the call's duration, not slept.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::call::{
    Replier, Reply, ReplyOutcome, TransportError, TransportErrorKind, WebhookCall,
};

/// What a scripted webhook answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptedReply {
    /// The verdict (default true).
    #[serde(default = "yes")]
    pub allowed: bool,
    /// `status.code` of a denial.
    #[serde(default)]
    pub code: Option<i32>,
    /// `status.message` of a denial.
    #[serde(default)]
    pub message: Option<String>,
    /// `status.reason` of a denial.
    #[serde(default)]
    pub reason: Option<String>,
    /// A JSON patch to return (mutating webhooks).
    #[serde(default)]
    pub patch: Option<Value>,
    /// Warnings to return.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// auditAnnotations to return.
    #[serde(default)]
    pub audit_annotations: BTreeMap<String, String>,
    /// How long the call takes, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Instead of answering: `refused`, `timeout`, `tls`, `reset`, or an HTTP status (`http:500`).
    #[serde(default)]
    pub error: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for ScriptedReply {
    fn default() -> Self {
        Self {
            allowed: true,
            code: None,
            message: None,
            reason: None,
            patch: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            delay_ms: 0,
            error: None,
        }
    }
}

impl ScriptedReply {
    /// Allows.
    pub fn allow() -> Self {
        Self::default()
    }

    /// Denies with a code and message.
    pub fn deny(code: i32, message: &str) -> Self {
        Self {
            allowed: false,
            code: Some(code),
            message: Some(message.into()),
            ..Self::default()
        }
    }

    /// Allows with a JSON patch.
    pub fn patch(patch: Value) -> Self {
        Self {
            patch: Some(patch),
            ..Self::default()
        }
    }

    /// The reply to `call`, as a well-behaved webhook would write it in the version it was sent.
    pub fn reply_to(&self, call: &WebhookCall) -> Reply {
        let elapsed = Duration::from_millis(self.delay_ms);
        if let Some(e) = &self.error {
            let transport =
                |kind, detail: String| ReplyOutcome::Transport(TransportError { kind, detail });
            let outcome = match e.as_str() {
                "refused" => transport(
                    TransportErrorKind::Connect,
                    format!("dial tcp {}:{}: connect: connection refused", call.endpoint.server_name, call.endpoint.port),
                ),
                "timeout" => transport(TransportErrorKind::Timeout, "context deadline exceeded".into()),
                "tls" => transport(
                    TransportErrorKind::Tls,
                    "tls: failed to verify certificate: x509: certificate signed by unknown authority".into(),
                ),
                "reset" => transport(TransportErrorKind::Reset, "read: connection reset by peer".into()),
                other => match other.strip_prefix("http:").and_then(|c| c.parse::<u16>().ok()) {
                    Some(code) => ReplyOutcome::Http {
                        status: code,
                        content_type: Some("text/plain; charset=utf-8".into()),
                        body: format!("scripted error {code}\n").into_bytes(),
                    },
                    None => transport(TransportErrorKind::Other, other.to_string()),
                },
            };
            let elapsed = if e == "timeout" {
                call.timeout.max(elapsed)
            } else {
                elapsed
            };
            return Reply { outcome, elapsed };
        }
        Reply {
            outcome: ReplyOutcome::Http {
                status: 200,
                content_type: Some("application/json".into()),
                body: self.body(call.review_version, &call.request_uid),
            },
            elapsed,
        }
    }

    /// The AdmissionReview answered, in `version`, for the request `uid`.
    fn body(&self, version: &str, uid: &str) -> Vec<u8> {
        let status = (!self.allowed || self.code.is_some() || self.message.is_some()).then_some(
            ReplyStatus {
                code: self.code,
                message: self.message.as_deref(),
                reason: self.reason.as_deref(),
            },
        );
        let patch = self.patch.as_ref().map(|p| {
            let bytes = serde_json::to_vec(p).unwrap_or_default();
            base64::engine::general_purpose::STANDARD.encode(bytes)
        });
        let review = ReplyReview {
            api_version: match version {
                "v1" => Cow::Borrowed("admission.k8s.io/v1"),
                "v1beta1" => Cow::Borrowed("admission.k8s.io/v1beta1"),
                other => Cow::Owned(format!("admission.k8s.io/{other}")),
            },
            kind: "AdmissionReview",
            response: ReplyResponse {
                allowed: self.allowed,
                audit_annotations: &self.audit_annotations,
                patch_type: patch.as_ref().map(|_| "JSONPatch"),
                patch,
                status,
                uid,
                warnings: &self.warnings,
            },
        };
        serde_json::to_vec(&review).unwrap_or_default()
    }
}

/// The AdmissionReview a scripted webhook answers, its members in the order serde_json writes
/// a map's (sorted), as a JSON value of it would be written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplyReview<'a> {
    api_version: Cow<'static, str>,
    kind: &'static str,
    response: ReplyResponse<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplyResponse<'a> {
    allowed: bool,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<ReplyStatus<'a>>,
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Serialize)]
struct ReplyStatus<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

/// Answers by webhook name; webhooks without a script allow.
#[derive(Debug, Clone, Default)]
pub struct ScriptedReplier {
    /// Replies by webhook name, shared by clones (a replay clones its replier per request).
    pub replies: Arc<BTreeMap<String, ScriptedReply>>,
    /// Every call seen, in order.
    pub seen: Vec<WebhookCall>,
}

impl ScriptedReplier {
    /// A replier with these scripts.
    pub fn new(replies: impl IntoIterator<Item = (String, ScriptedReply)>) -> Self {
        Self {
            replies: Arc::new(replies.into_iter().collect()),
            seen: Vec::new(),
        }
    }

    /// Parses a YAML or JSON mapping of webhook name to reply.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        let replies: BTreeMap<String, ScriptedReply> =
            crate::yaml::from_str(text).map_err(|e| e.to_string())?;
        Ok(Self::new(replies))
    }
}

impl Replier for ScriptedReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let replies: Vec<Reply> = calls
            .iter()
            .map(|c| match self.replies.get(&*c.webhook) {
                Some(script) => script.reply_to(c),
                None => ScriptedReply::allow().reply_to(c),
            })
            .collect();
        self.seen.extend(calls.iter().cloned());
        std::future::ready(replies)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reply as a JSON value of it is written: what [`ScriptedReply::body`] must equal.
    fn as_value(r: &ScriptedReply, version: &str, uid: &str) -> Vec<u8> {
        let mut response = json!({ "uid": uid, "allowed": r.allowed });
        if !r.allowed || r.code.is_some() || r.message.is_some() {
            let mut status = serde_json::Map::new();
            if let Some(c) = r.code {
                status.insert("code".into(), json!(c));
            }
            if let Some(m) = &r.message {
                status.insert("message".into(), json!(m));
            }
            if let Some(m) = &r.reason {
                status.insert("reason".into(), json!(m));
            }
            response["status"] = Value::Object(status);
        }
        if let Some(p) = &r.patch {
            let bytes = serde_json::to_vec(p).unwrap_or_default();
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            response["patchType"] = json!("JSONPatch");
        }
        if !r.warnings.is_empty() {
            response["warnings"] = json!(r.warnings);
        }
        if !r.audit_annotations.is_empty() {
            response["auditAnnotations"] = json!(r.audit_annotations);
        }
        let review = json!({
            "apiVersion": format!("admission.k8s.io/{version}"),
            "kind": "AdmissionReview",
            "response": response,
        });
        serde_json::to_vec(&review).unwrap_or_default()
    }

    #[test]
    fn replies_are_written_as_their_json_values_would_be() {
        let mut scripts = vec![
            ScriptedReply::allow(),
            ScriptedReply::deny(403, "no \"sidecars\" <here>"),
            ScriptedReply::patch(json!([{"op": "add", "path": "/a", "value": "é"}])),
            ScriptedReply {
                allowed: false,
                ..ScriptedReply::default()
            },
            ScriptedReply {
                code: Some(200),
                reason: Some("Because".into()),
                warnings: vec!["one".into(), "two\n".into()],
                audit_annotations: BTreeMap::from([
                    ("k".into(), "v".into()),
                    ("a".into(), "b".into()),
                ]),
                ..ScriptedReply::default()
            },
        ];
        scripts.push(ScriptedReply {
            message: Some("only a message".into()),
            ..scripts[2].clone()
        });
        for r in &scripts {
            for version in ["v1", "v1beta1", "v2"] {
                for uid in ["", "0b7c-uid", "quote\"d"] {
                    assert_eq!(
                        String::from_utf8_lossy(&r.body(version, uid)),
                        String::from_utf8_lossy(&as_value(r, version, uid)),
                        "{r:?} {version} {uid}"
                    );
                }
            }
        }
    }
}

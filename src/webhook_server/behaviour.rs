//! What the server answers on each path, and the AdmissionReview bytes it writes.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::api::Status;

/// A closure answering a review (see [`Behaviour::Custom`]).
pub type CustomFn = Arc<dyn Fn(&Review<'_>) -> Answer + Send + Sync>;

/// How the server answers the AdmissionReviews posted to one path.
#[derive(Clone)]
pub enum Behaviour {
    /// `allowed: true`.
    Allow,
    /// `allowed: false` with a status carrying this code and message.
    Deny {
        /// HTTP-like status code the API client sees (e.g. 403).
        code: u16,
        /// The message.
        message: String,
    },
    /// Allows with a JSON patch setting `metadata.labels[key] = value` on the received object:
    /// one `add` of the whole `/metadata/labels` map when the object has no labels, else one `add`
    /// of `/metadata/labels/<key>` (the key escaped as a JSON pointer token).
    AddLabel {
        /// Label key.
        key: String,
        /// Label value.
        value: String,
    },
    /// Allows with this warning.
    Warn(String),
    /// Waits this long, then allows.
    Slow(Duration),
    /// Answers with this fixed response (its uid is replaced by the request's).
    Respond(Box<Answer>),
    /// Asks the closure.
    Custom(CustomFn),
}

impl Behaviour {
    /// [`Behaviour::Deny`].
    pub fn deny(code: u16, message: impl Into<String>) -> Self {
        Behaviour::Deny {
            code,
            message: message.into(),
        }
    }

    /// [`Behaviour::AddLabel`].
    pub fn add_label(key: impl Into<String>, value: impl Into<String>) -> Self {
        Behaviour::AddLabel {
            key: key.into(),
            value: value.into(),
        }
    }

    /// [`Behaviour::Warn`].
    pub fn warn(text: impl Into<String>) -> Self {
        Behaviour::Warn(text.into())
    }

    /// [`Behaviour::Respond`].
    pub fn respond(answer: Answer) -> Self {
        Behaviour::Respond(Box::new(answer))
    }

    /// [`Behaviour::Custom`].
    pub fn custom(f: impl Fn(&Review<'_>) -> Answer + Send + Sync + 'static) -> Self {
        Behaviour::Custom(Arc::new(f))
    }
}

impl fmt::Debug for Behaviour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Behaviour::Allow => f.write_str("Allow"),
            Behaviour::Deny { code, message } => f
                .debug_struct("Deny")
                .field("code", code)
                .field("message", message)
                .finish(),
            Behaviour::AddLabel { key, value } => f
                .debug_struct("AddLabel")
                .field("key", key)
                .field("value", value)
                .finish(),
            Behaviour::Warn(text) => f.debug_tuple("Warn").field(text).finish(),
            Behaviour::Slow(delay) => f.debug_tuple("Slow").field(delay).finish(),
            Behaviour::Respond(answer) => f.debug_tuple("Respond").field(answer).finish(),
            Behaviour::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The behaviours of a server, by URL path (without the query).
#[derive(Debug, Clone, Default)]
pub struct Behaviours {
    pub(crate) routes: Vec<(String, Behaviour)>,
}

impl Behaviours {
    /// No paths: every request is answered 404.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers requests to `path` (e.g. `/allow`; a missing leading `/` is added) with
    /// `behaviour`. A path given twice keeps the later behaviour.
    pub fn route(mut self, path: impl Into<String>, behaviour: Behaviour) -> Self {
        let mut path = path.into();
        if !path.starts_with('/') {
            path.insert(0, '/');
        }
        self.routes.retain(|(p, _)| *p != path);
        self.routes.push((path, behaviour));
        self
    }

    /// `/allow`, `/deny` (403 "denied by hookscope webhook server"), `/add-label`
    /// (`hookscope.dev/webhook=added`), `/warn` and `/slow` (100 ms, then allow).
    pub fn standard() -> Self {
        Self::new()
            .route("/allow", Behaviour::Allow)
            .route(
                "/deny",
                Behaviour::deny(403, "denied by hookscope webhook server"),
            )
            .route(
                "/add-label",
                Behaviour::add_label("hookscope.dev/webhook", "added"),
            )
            .route(
                "/warn",
                Behaviour::warn("warning from hookscope webhook server"),
            )
            .route("/slow", Behaviour::Slow(Duration::from_millis(100)))
    }

    /// The configured paths, in the order given.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|(p, _)| p.as_str())
    }
}

/// An AdmissionReview response, everything but `uid` (always the request's).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Answer {
    /// The verdict.
    pub allowed: bool,
    /// Why (for a denial): code and message as the API client would see them.
    pub status: Option<Status>,
    /// A JSON patch (the JSON text, base64-encoded on the wire with `patchType: JSONPatch`).
    pub patch: Option<Vec<u8>>,
    /// Audit annotations (keys without the webhook-name prefix).
    pub audit_annotations: BTreeMap<String, String>,
    /// Warnings for the API client.
    pub warnings: Vec<String>,
}

impl Answer {
    /// Allowed, nothing else.
    pub fn allow() -> Self {
        Answer {
            allowed: true,
            ..Answer::default()
        }
    }

    /// Denied with a status of this code and message.
    pub fn deny(code: u16, message: impl Into<String>) -> Self {
        Answer {
            allowed: false,
            status: Some(Status {
                code: i32::from(code),
                message: message.into(),
                ..Status::default()
            }),
            ..Answer::default()
        }
    }

    /// Adds a JSON patch (its JSON text).
    pub fn with_patch(mut self, patch_json: impl Into<Vec<u8>>) -> Self {
        self.patch = Some(patch_json.into());
        self
    }

    /// Adds a warning.
    pub fn with_warning(mut self, text: impl Into<String>) -> Self {
        self.warnings.push(text.into());
        self
    }

    /// Adds an audit annotation.
    pub fn with_audit_annotation(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.audit_annotations.insert(key.into(), value.into());
        self
    }

    /// The response object's members after `uid`, as JSON text starting with `,` and ending
    /// with the closing braces of the response and the review.
    fn tail(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            allowed: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            status: Option<&'a Status>,
            #[serde(skip_serializing_if = "Option::is_none")]
            patch: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            patch_type: Option<&'static str>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            audit_annotations: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            warnings: &'a [String],
        }
        let wire = Wire {
            allowed: self.allowed,
            status: self.status.as_ref(),
            patch: self
                .patch
                .as_ref()
                .map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
            patch_type: self.patch.as_ref().map(|_| "JSONPatch"),
            audit_annotations: &self.audit_annotations,
            warnings: &self.warnings,
        };
        // Serializing these types cannot fail (string keys, no custom serializers).
        let object = serde_json::to_vec(&wire).unwrap_or_else(|_| b"{}".to_vec());
        let mut tail = Vec::with_capacity(object.len() + 2);
        tail.push(b',');
        tail.extend_from_slice(&object[1..]);
        tail.push(b'}');
        tail
    }
}

/// The parts of a received AdmissionReview handed to a [`Behaviour::Custom`] closure.
#[derive(Debug)]
pub struct Review<'a> {
    /// The URL path it was posted to (without the query).
    pub path: &'a str,
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1` (the answer uses the same).
    pub api_version: &'a str,
    /// `request.uid`.
    pub uid: &'a str,
    /// `request.operation`, when present.
    pub operation: Option<&'a str>,
    /// `request.object`, unparsed.
    pub object: Option<&'a RawValue>,
    /// `request.oldObject`, unparsed.
    pub old_object: Option<&'a RawValue>,
    /// The whole body as received.
    pub body: &'a [u8],
}

/// What is read from every review: just enough to answer.
#[derive(Deserialize)]
struct WireReview<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    request: Option<WireRequest<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest<'a> {
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    operation: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
}

/// `object.metadata.labels`: only whether it is there.
#[derive(Deserialize)]
struct WireObject {
    #[serde(default)]
    metadata: Option<WireMeta>,
}

#[derive(Deserialize)]
struct WireMeta {
    #[serde(default)]
    labels: Option<serde::de::IgnoredAny>,
}

/// Why a body could not be answered as an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadReview {
    #[error("request body is not an AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("unsupported AdmissionReview apiVersion {0:?}")]
    Version(String),
}

const V1: &str = "admission.k8s.io/v1";
const V1BETA1: &str = "admission.k8s.io/v1beta1";
const PREFIX_V1: &[u8] =
    b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";
const PREFIX_V1BETA1: &[u8] = b"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";

/// A behaviour prepared for answering: fixed answers are rendered once.
pub(crate) enum Prepared {
    Fixed {
        delay: Option<Duration>,
        tail: Vec<u8>,
    },
    AddLabel {
        /// Tail when the object has no labels.
        absent: Vec<u8>,
        /// Tail when it has.
        present: Vec<u8>,
    },
    Custom(CustomFn),
}

impl Prepared {
    pub(crate) fn new(behaviour: &Behaviour) -> Prepared {
        let fixed = |answer: Answer, delay| Prepared::Fixed {
            delay,
            tail: answer.tail(),
        };
        match behaviour {
            Behaviour::Allow => fixed(Answer::allow(), None),
            Behaviour::Deny { code, message } => fixed(Answer::deny(*code, message.clone()), None),
            Behaviour::Warn(text) => fixed(Answer::allow().with_warning(text.clone()), None),
            Behaviour::Slow(delay) => fixed(Answer::allow(), Some(*delay)),
            Behaviour::Respond(answer) => fixed(Answer::clone(answer), None),
            Behaviour::AddLabel { key, value } => {
                let absent = serde_json::json!([{
                    "op": "add", "path": "/metadata/labels", "value": {key.as_str(): value},
                }]);
                let present = serde_json::json!([{
                    "op": "add",
                    "path": format!("/metadata/labels/{}", key.replace('~', "~0").replace('/', "~1")),
                    "value": value,
                }]);
                Prepared::AddLabel {
                    absent: Answer::allow().with_patch(absent.to_string()).tail(),
                    present: Answer::allow().with_patch(present.to_string()).tail(),
                }
            }
            Behaviour::Custom(f) => Prepared::Custom(f.clone()),
        }
    }

    /// How long to wait before answering.
    pub(crate) fn delay(&self) -> Option<Duration> {
        match self {
            Prepared::Fixed { delay, .. } => *delay,
            _ => None,
        }
    }

    /// The response body for a request body posted to `path`.
    pub(crate) fn answer(&self, path: &str, body: &[u8]) -> Result<Vec<u8>, BadReview> {
        let review: WireReview<'_> = crate::json::from_slice(body)?;
        let request = review.request.ok_or(BadReview::NoRequest)?;
        let (api_version, prefix) = match review.api_version.as_deref() {
            None | Some(V1) => (V1, PREFIX_V1),
            Some(V1BETA1) => (V1BETA1, PREFIX_V1BETA1),
            Some(other) => return Err(BadReview::Version(other.to_string())),
        };
        let uid = request.uid.as_deref().unwrap_or_default();
        let custom;
        let tail: &[u8] = match self {
            Prepared::Fixed { tail, .. } => tail,
            Prepared::AddLabel { absent, present } => {
                let labelled = request
                    .object
                    .and_then(|o| crate::json::from_str::<WireObject>(o.get()).ok())
                    .and_then(|o| o.metadata)
                    .is_some_and(|m| m.labels.is_some());
                if labelled { present } else { absent }
            }
            Prepared::Custom(f) => {
                let view = Review {
                    path,
                    api_version,
                    uid,
                    operation: request.operation.as_deref(),
                    object: request.object,
                    old_object: request.old_object,
                    body,
                };
                custom = f(&view).tail();
                &custom
            }
        };
        let mut out = Vec::with_capacity(prefix.len() + uid.len() + 2 + tail.len());
        out.extend_from_slice(prefix);
        write_json_string(&mut out, uid);
        out.extend_from_slice(tail);
        Ok(out)
    }
}

/// Appends `s` as a JSON string literal.
fn write_json_string(out: &mut Vec<u8>, s: &str) {
    let plain = s
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f);
    if plain {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(b: &Behaviour, body: &str) -> serde_json::Value {
        let out = Prepared::new(b).answer("/p", body.as_bytes()).unwrap();
        crate::json::from_slice(&out).unwrap()
    }

    fn patch_of(v: &serde_json::Value) -> serde_json::Value {
        let b64 = v["response"]["patch"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        crate::json::from_slice(&bytes).unwrap()
    }

    #[test]
    fn allow_echoes_uid_and_version() {
        let v = answer(
            &Behaviour::Allow,
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a\"b"}}"#,
        );
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                "response": {"uid": "a\"b", "allowed": true}})
        );
    }

    #[test]
    fn add_label_adds_the_map_or_one_escaped_key() {
        let b = Behaviour::add_label("example.com/a~b", "x");
        let none = answer(
            &b,
            r#"{"request":{"uid":"u","object":{"metadata":{"name":"n"}}}}"#,
        );
        assert_eq!(
            patch_of(&none),
            serde_json::json!([{"op": "add", "path": "/metadata/labels", "value": {"example.com/a~b": "x"}}])
        );
        assert_eq!(none["response"]["patchType"], "JSONPatch");
        let some = answer(
            &b,
            r#"{"request":{"uid":"u","object":{"metadata":{"labels":{"k":"v"}}}}}"#,
        );
        assert_eq!(
            patch_of(&some),
            serde_json::json!([{"op": "add", "path": "/metadata/labels/example.com~1a~0b", "value": "x"}])
        );
    }

    #[test]
    fn deny_and_warn() {
        let v = answer(&Behaviour::deny(403, "no"), r#"{"request":{"uid":"u"}}"#);
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(
            v["response"]["status"],
            serde_json::json!({"code": 403, "message": "no"})
        );
        let v = answer(&Behaviour::warn("careful"), r#"{"request":{"uid":"u"}}"#);
        assert_eq!(v["response"]["warnings"], serde_json::json!(["careful"]));
    }

    #[test]
    fn bad_bodies() {
        let p = Prepared::new(&Behaviour::Allow);
        assert!(matches!(p.answer("/", b"nope"), Err(BadReview::Json(_))));
        assert!(matches!(p.answer("/", b"{}"), Err(BadReview::NoRequest)));
        assert!(matches!(
            p.answer("/", br#"{"apiVersion":"x","request":{}}"#),
            Err(BadReview::Version(_))
        ));
    }
}

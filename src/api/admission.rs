//! `admission.k8s.io` AdmissionReview, v1 and v1beta1, as they travel on the wire.
//!
//! The request side is written exactly as kube-apiserver writes it; the response side is read as
//! leniently as Go's encoding/json reads it (`patch` as base64 or as a byte array, every field
//! optional) so that verification, not decoding, decides what is wrong with a reply.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::meta::{GroupVersionKind, GroupVersionResource, Status, UserInfo};

/// `admission.k8s.io/v1` (or `v1beta1`) `AdmissionReview` as sent to a webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewRequest {
    /// `AdmissionReview` (Go writes `kind` before `apiVersion`).
    pub kind: String,
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`.
    pub api_version: String,
    /// The request.
    pub request: AdmissionRequest,
}

/// `AdmissionRequest`, with the fields in the order kube-apiserver writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Fresh UUID for this call.
    pub uid: String,
    /// Kind of the object as the webhook sees it (after conversion for equivalent matches).
    pub kind: GroupVersionKind,
    /// Resource as the webhook sees it.
    pub resource: GroupVersionResource,
    /// Subresource, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub_resource: String,
    /// Kind of the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    /// Resource of the original request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    /// Subresource of the original request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request_sub_resource: String,
    /// Object name (may be empty for CREATE with generateName).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace (for Namespace objects, the namespace's own name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// Requesting user.
    pub user_info: UserInfo,
    /// New object (null for DELETE).
    #[serde(default)]
    pub object: Value,
    /// Old object (null for CREATE and CONNECT).
    #[serde(default)]
    pub old_object: Value,
    /// Always present.
    #[serde(default)]
    pub dry_run: bool,
    /// Operation options (`CreateOptions`, …) or null.
    #[serde(default)]
    pub options: Value,
}

/// An AdmissionReview as a webhook answered it, before verification.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewReply {
    /// As written by the webhook (may be absent).
    #[serde(default)]
    pub api_version: Option<String>,
    /// As written by the webhook (may be absent).
    #[serde(default)]
    pub kind: Option<String>,
    /// The response; absent is an error the verifier reports.
    #[serde(default)]
    pub response: Option<AdmissionResponse>,
}

/// `AdmissionResponse` as read from a webhook.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// Must echo the request uid (v1).
    #[serde(default)]
    pub uid: String,
    /// The verdict.
    #[serde(default)]
    pub allowed: bool,
    /// Why it was denied (v1 calls it `status`, Go's field is `Result`).
    #[serde(default)]
    pub status: Option<Status>,
    /// Patch bytes (base64 string or byte array on the wire).
    #[serde(default, deserialize_with = "deserialize_patch")]
    pub patch: Option<Vec<u8>>,
    /// `JSONPatch`.
    #[serde(default)]
    pub patch_type: Option<String>,
    /// Annotations to add to the audit event, keyed without the webhook-name prefix.
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Warnings for the API client.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// Reads Go's `[]byte`: a padded standard base64 string, an array of byte values, or null.
fn deserialize_patch<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    use base64::Engine as _;
    use serde::de::Error;
    let v = Value::deserialize(d)?;
    match v {
        Value::Null => Ok(None),
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(Some)
            .map_err(|e| D::Error::custom(format!("illegal base64 data: {e}"))),
        Value::Array(items) => items
            .into_iter()
            .map(|i| {
                i.as_u64()
                    .and_then(|n| u8::try_from(n).ok())
                    .ok_or_else(|| {
                        D::Error::custom(format!(
                            "cannot unmarshal {i} into Go value of type uint8"
                        ))
                    })
            })
            .collect::<Result<Vec<u8>, _>>()
            .map(Some),
        other => Err(D::Error::custom(format!(
            "cannot unmarshal {} into Go struct field AdmissionResponse.response.patch of type []uint8",
            go_json_type(&other)
        ))),
    }
}

/// The name Go's encoding/json uses for a JSON value's type in unmarshal errors.
pub fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

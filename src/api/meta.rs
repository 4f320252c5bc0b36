//! The `meta/v1` vocabulary: group/version/kind and resource triples, operations, label selectors,
//! user info and `Status`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// A group, version and kind (`apps/v1, Kind=Deployment`).
#[derive(Debug, Clone, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

impl PartialEq for GroupVersionKind {
    fn eq(&self, other: &Self) -> bool {
        short_eq(&self.kind, &other.kind)
            && short_eq(&self.version, &other.version)
            && short_eq(&self.group, &other.group)
    }
}

// Equal values hash alike: equality is field by field, like the derived one, only faster.
impl std::hash::Hash for GroupVersionKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.group, &self.version, &self.kind).hash(state);
    }
}

impl std::hash::Hash for GroupVersionResource {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.group, &self.version, &self.resource).hash(state);
    }
}

impl PartialEq for GroupVersionResource {
    fn eq(&self, other: &Self) -> bool {
        short_eq(&self.resource, &other.resource)
            && short_eq(&self.version, &other.version)
            && short_eq(&self.group, &other.group)
    }
}

/// Whether two strings are equal, compared in place rather than through the C library's
/// `memcmp`.
///
/// Rust compares byte slices with `memcmp` even when both are empty, and an empty string's
/// pointer is dangling (`0x1`, for literals too). glibc's AVX-512 `memcmp` reads operands of up
/// to 32 bytes with a masked load, and a masked load of an unmapped address, even with nothing
/// unmasked, costs a fault-suppression assist: ~75 ns against ~2 ns, measured on an AMD EPYC
/// (docs/benchmarks.md, session 31). The core group, an absent subresource and most defaults
/// are empty strings, so hot comparisons of such names go through here.
#[inline]
pub fn short_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if a.len() > 64 {
        return a == b;
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

impl GroupVersionKind {
    /// Builds a GVK from its parts.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// `apiVersion` as written in objects: `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// True when no part is set.
    pub fn is_empty(&self) -> bool {
        self.group.is_empty() && self.version.is_empty() && self.kind.is_empty()
    }
}

impl fmt::Display for GroupVersionKind {
    /// Go's `schema.GroupVersionKind.String()`: `apps/v1, Kind=Deployment`, `/v1, Kind=Pod`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A group, version and resource (`apps/v1, Resource=deployments`).
#[derive(Debug, Clone, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Resource (plural, lowercase).
    #[serde(default)]
    pub resource: String,
}

impl GroupVersionResource {
    /// Builds a GVR from its parts.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// The group and resource without the version.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.resource.clone(),
        }
    }
}

impl fmt::Display for GroupVersionResource {
    /// Go's `schema.GroupVersionResource.String()`: `apps/v1, Resource=deployments`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Resource={}",
            self.group, self.version, self.resource
        )
    }
}

/// A group and resource, as used in API error messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
pub struct GroupResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Resource.
    pub resource: String,
}

impl fmt::Display for GroupResource {
    /// Go's `schema.GroupResource.String()`: `deployments.apps`, or `pods` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// The admission operations webhooks see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// CREATE
    Create,
    /// UPDATE (also PATCH requests)
    Update,
    /// DELETE (also each item of a DELETECOLLECTION)
    Delete,
    /// CONNECT (exec, attach, port-forward, proxy)
    Connect,
}

impl Operation {
    /// The wire spelling: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    /// Parses the wire spelling (exact, upper case).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `metav1.LabelSelector`. `None` fields and empty fields are distinct on the wire but equivalent
/// in meaning; a whole selector that is absent (`Option<LabelSelector>::None`) selects nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Equality requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<LabelSelectorRequirement>>,
}

impl LabelSelector {
    /// True for `{}`: no requirement at all, which selects everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && self.match_expressions.as_ref().is_none_or(|e| e.is_empty())
    }
}

/// One set-based requirement of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// Label key.
    #[serde(default)]
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (kept as written so validation can report others).
    #[serde(default)]
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// `authentication/v1.UserInfo` of the requesting user.
#[derive(Debug, Clone, Eq, Default, Serialize, Deserialize)]
pub struct UserInfo {
    /// User name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// User UID.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

// Equal values hash alike: equality is field by field, like the derived one. A user's `uid` is
// most often empty, and compared through `short_eq`.
impl PartialEq for UserInfo {
    fn eq(&self, other: &Self) -> bool {
        short_eq(&self.username, &other.username)
            && short_eq(&self.uid, &other.uid)
            && self.groups == other.groups
            && self.extra == other.extra
    }
}

impl std::hash::Hash for UserInfo {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.username, &self.uid, &self.groups, &self.extra).hash(state);
    }
}

/// `metav1.Status`, the error body an API client receives.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `Success` or `Failure`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason (`Forbidden`, `InternalError`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extended data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// HTTP status code.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Group of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Kind (resource) of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Suggested retry delay.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_after_seconds: i32,
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCause {
    /// Machine-readable cause.
    #[serde(default, rename = "reason", skip_serializing_if = "String::is_empty")]
    pub cause_type: String,
    /// Human-readable cause.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Field the cause concerns.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_eq_agrees_with_string_equality() {
        let long = "x".repeat(100);
        let long_other = format!("{}y", "x".repeat(99));
        let cases = [
            ("", ""),
            ("", "v1"),
            ("v1", "v1"),
            ("v1", "v2"),
            ("configmaps", "configmaps"),
            ("configmaps", "configmapz"),
            ("pods", "podss"),
            (long.as_str(), long.as_str()),
            (long.as_str(), long_other.as_str()),
        ];
        for (a, b) in cases {
            assert_eq!(short_eq(a, b), a == b, "{a:?} vs {b:?}");
        }
        let gvk = GroupVersionKind::new("apps", "v1", "Deployment");
        assert_eq!(gvk, GroupVersionKind::new("apps", "v1", "Deployment"));
        assert_ne!(gvk, GroupVersionKind::new("apps", "v1beta1", "Deployment"));
        assert_ne!(gvk, GroupVersionKind::new("", "v1", "Deployment"));
    }
}

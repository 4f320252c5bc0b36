//! `--audit-log`: one audit.k8s.io/v1 `Event` per replayed request, as the apiserver's log backend
//! writes them (JSON lines, stage `ResponseComplete`), carrying the replay's annotations.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{Map, Value};

use super::report::{SecretPolicy, is_secret, redact_secret};
use super::run::Replayed;
use crate::api::{Operation, UserInfo};
use crate::engine::{AuditLevel, Object};

/// An audit event, fields in the order the apiserver writes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// `Event`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level.
    pub level: String,
    /// The original `auditID`, or the captured uid.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// `ResponseComplete`.
    pub stage: &'static str,
    /// The original request URI, or one built from the request.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The original verb, or the one matching the operation.
    pub verb: String,
    /// The user admission saw.
    pub user: UserInfo,
    /// `sourceIPs`.
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// `userAgent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The object concerned.
    pub object_ref: ObjectReference,
    /// The response status.
    pub response_status: ResponseStatus,
    /// The request body (level Request and above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response body (level RequestResponse).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request was received.
    pub request_received_timestamp: String,
    /// When this stage was reached.
    pub stage_timestamp: String,
    /// The audit annotations of the replay.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `audit.k8s.io/v1` `ObjectReference`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Resource.
    pub resource: String,
    /// Namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The `metav1.Status` an audit event records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseStatus {
    /// Always empty.
    pub metadata: Map<String, Value>,
    /// `Failure` for refused requests.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<crate::api::StatusDetails>,
    /// HTTP code.
    pub code: i32,
}

fn verb_of(op: Operation) -> &'static str {
    match op {
        Operation::Create | Operation::Connect => "create",
        Operation::Update => "update",
        Operation::Delete => "delete",
    }
}

/// The request path the apiserver would have served for a request.
pub fn request_uri(r: &Replayed) -> String {
    let a = &r.request.attrs;
    let mut uri = if a.resource.group.is_empty() {
        format!("/api/{}", a.resource.version)
    } else {
        format!("/apis/{}/{}", a.resource.group, a.resource.version)
    };
    if !a.namespace.is_empty() && !a.is_namespace_resource() {
        uri.push_str(&format!("/namespaces/{}", a.namespace));
    }
    uri.push('/');
    uri.push_str(&a.resource.resource);
    if !a.name.is_empty() && a.operation != Operation::Create {
        uri.push('/');
        uri.push_str(&a.name);
    }
    if !a.sub_resource.is_empty() {
        uri.push('/');
        uri.push_str(&a.sub_resource);
    }
    if a.dry_run {
        uri.push_str("?dryRun=All");
    }
    uri
}

impl AuditEvent {
    /// The event for a replayed request at `level`; None at level `None`.
    pub fn new(
        r: &Replayed,
        level: AuditLevel,
        secrets: SecretPolicy,
        now: SystemTime,
    ) -> Option<Self> {
        if level == AuditLevel::None {
            return None;
        }
        let a = &r.request.attrs;
        let origin = r.request.audit.as_ref();
        let redact = secrets == SecretPolicy::Redact && is_secret(&r.request);
        let outcome = &r.outcome;
        let response_status = match &outcome.status {
            Some(s) => ResponseStatus {
                metadata: Map::new(),
                status: "Failure".into(),
                message: s.message.clone(),
                reason: s.reason.clone(),
                details: s.details.clone(),
                code: s.code,
            },
            None => ResponseStatus {
                metadata: Map::new(),
                status: String::new(),
                message: String::new(),
                reason: String::new(),
                details: None,
                code: match origin.and_then(|o| o.response_code) {
                    Some(c) if (200..300).contains(&c) => c,
                    _ if a.operation == Operation::Create => 201,
                    _ => 200,
                },
            },
        };
        let request_object = (level >= AuditLevel::Request
            && matches!(a.operation, Operation::Create | Operation::Update))
        .then(|| a.object_value().cloned())
        .flatten()
        .map(|mut o| {
            if redact {
                redact_secret(&mut o);
            }
            o
        });
        let response_object = (level >= AuditLevel::RequestResponse)
            .then(|| match &outcome.status {
                Some(s) => {
                    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        m.insert("kind".into(), "Status".into());
                        m.insert("apiVersion".into(), "v1".into());
                        m.insert("metadata".into(), Value::Object(Map::new()));
                    }
                    Some(v)
                }
                None => outcome
                    .object
                    .as_deref()
                    .map(Object::value)
                    .cloned()
                    .map(|mut o| {
                        if redact {
                            redact_secret(&mut o);
                        }
                        o
                    }),
            })
            .flatten();
        let stamp = rfc3339_micros(now);
        Some(AuditEvent {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: level.to_string(),
            audit_id: origin
                .map(|o| o.audit_id.clone())
                .unwrap_or_else(|| r.request.uid.clone()),
            stage: "ResponseComplete",
            request_uri: origin
                .map(|o| o.request_uri.clone())
                .unwrap_or_else(|| request_uri(r)),
            verb: origin
                .map(|o| o.verb.clone())
                .unwrap_or_else(|| verb_of(a.operation).into()),
            user: (*a.user_info).clone(),
            source_ips: origin.map(|o| o.source_ips.clone()).unwrap_or_default(),
            user_agent: origin.and_then(|o| o.user_agent.clone()),
            object_ref: ObjectReference {
                resource: a.resource.resource.clone(),
                namespace: a.namespace.clone(),
                name: a.name.clone(),
                api_group: a.resource.group.clone(),
                api_version: a.resource.version.clone(),
                subresource: a.sub_resource.clone(),
            },
            response_status,
            request_object,
            response_object,
            request_received_timestamp: origin
                .and_then(|o| o.request_received_timestamp.clone())
                .unwrap_or_else(|| stamp.clone()),
            stage_timestamp: origin
                .and_then(|o| o.stage_timestamp.clone())
                .unwrap_or(stamp),
            annotations: outcome.annotations_at(level),
        })
    }
}

/// `2026-11-21T10:04:05.123456Z`, the timestamp format of audit events.
pub fn rfc3339_micros(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_with_microseconds() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_262_645_123_456);
        assert_eq!(rfc3339_micros(t), "2026-11-21T12:04:05.123456Z");
        assert_eq!(rfc3339_micros(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339_micros(leap), "2000-02-29T00:00:00.000000Z");
    }
}

//! Replay: captured requests (AdmissionReviews, audit logs) run through the [`crate::engine`]
//! against real, recorded or scripted webhooks. This is the IO shell shared by `hookscope replay`
//! and the console: loaders turn files into [`CapturedRequest`]s, a runner dispatches them, and
//! outputs render the results.

pub mod audit_log;
pub mod expect;
pub mod input;
pub mod junit;
pub mod record;
pub mod replier;
pub mod report;
pub mod run;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::engine::Attributes;

/// Where a captured request (or a problem) was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceRef {
    /// File name as given on the command line (`-` for stdin).
    pub file: String,
    /// 1-based line for JSON lines input, 1-based document otherwise.
    pub index: usize,
    /// Whether `index` counts lines or documents.
    #[serde(skip)]
    pub unit: IndexUnit,
    /// The audit event's `auditID`, when the request came from an audit log.
    #[serde(rename = "auditID", skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    /// The 1-based line of the input a problem of a document points at (the field it names),
    /// when it is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// What a [`SourceRef::index`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexUnit {
    /// Lines of a JSON lines file.
    Line,
    /// Documents of a JSON or YAML stream.
    #[default]
    Document,
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            IndexUnit::Line => "line",
            IndexUnit::Document => "document",
        };
        // Index 0 stands for the input as a whole.
        if self.index == 0 {
            write!(f, "{}", self.file)?;
        } else {
            write!(f, "{} {unit} {}", self.file, self.index)?;
        }
        if let Some(line) = self.line.filter(|_| self.unit == IndexUnit::Document) {
            write!(f, " line {line}")?;
        }
        if let Some(id) = &self.audit_id {
            write!(f, " (auditID {id})")?;
        }
        Ok(())
    }
}

/// What the namespace of a request looked like when it was captured.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NamespaceState {
    /// Not a namespaced request (or a Namespace object, whose own labels are used).
    #[default]
    NotApplicable,
    /// The namespace's labels, from `--cluster` or learned from the audit log; shared by the
    /// requests captured while the namespace had them.
    Known(Arc<BTreeMap<String, String>>),
    /// Nothing is known about the namespace: the replay treats its labels as empty and says so.
    Unknown,
    /// The cluster's labels could not be read (the namespace list is forbidden, not listed yet,
    /// or the namespace is gone): `labels` are the best known otherwise (learned from the
    /// input, or empty), and a replay whose namespace selector reads them says `why`.
    Unconfirmed {
        /// The labels the replay uses.
        labels: Arc<BTreeMap<String, String>>,
        /// Why they are not the cluster's, as the replay's note says it.
        why: Arc<str>,
    },
}

/// Audit-log details of a request, kept to write `--audit-log` events like the original.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AuditOrigin {
    /// `auditID`.
    pub audit_id: String,
    /// `verb` (create, update, patch, delete, deletecollection, get for connect, …).
    pub verb: String,
    /// `requestURI`.
    pub request_uri: String,
    /// `sourceIPs`.
    pub source_ips: Vec<String>,
    /// `userAgent`.
    pub user_agent: Option<String>,
    /// `requestReceivedTimestamp`.
    pub request_received_timestamp: Option<String>,
    /// `stageTimestamp` of the replayed stage.
    pub stage_timestamp: Option<String>,
    /// `annotations` the apiserver recorded, to compare against the replay.
    pub annotations: BTreeMap<String, String>,
    /// `responseStatus.code` recorded.
    pub response_code: Option<i32>,
    /// The authenticated `user` when the request impersonated someone (`impersonatedUser`);
    /// `attrs.user_info` is then the impersonated user, as admission saw it.
    pub impersonator: Option<crate::api::UserInfo>,
}

/// One request ready to be dispatched.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedRequest {
    /// Where it came from.
    pub source: SourceRef,
    /// The captured `request.uid` (an AdmissionReview's, or the audit event's `auditID`).
    pub uid: String,
    /// The request as the dispatcher sees it.
    pub attrs: Attributes,
    /// Labels of `attrs.namespace` at capture time.
    pub namespace: NamespaceState,
    /// Present when the request came from an audit log (boxed: most captures have none).
    pub audit: Option<Box<AuditOrigin>>,
    /// What the loader could not take from the capture as is and how it filled the gap (e.g. an
    /// audit event whose final stage never arrived); empty when the request is as captured.
    pub notes: Vec<String>,
    /// The objects of the ValidatingAdmissionPolicies' paramKinds known when the request was
    /// captured (from `--cluster` and the audit log before it); shared by the requests captured
    /// while they were the same. None when no policy takes parameters.
    pub params: Option<Arc<crate::engine::policy::ParamObjects>>,
}

impl CapturedRequest {
    /// The note of a request whose namespace is unknown ([`NamespaceState::Unknown`]) when a
    /// webhook's namespace selector read its labels, taken as empty.
    pub fn unknown_namespace_note(&self) -> String {
        format!(
            "namespace {:?} is not known (not in --cluster nor learned from the input): its labels were taken as empty",
            self.attrs.namespace
        )
    }
}

/// A problem with the input, named by file, position and field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputProblem {
    /// Where.
    pub source: SourceRef,
    /// JSON path of the offending field (`request.kind`, `requestObject.metadata`), or empty.
    pub field: String,
    /// What is wrong, or why the request cannot be replayed faithfully.
    pub message: String,
}

impl fmt::Display for InputProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// One item read from the input, in input order.
#[derive(Debug, Clone, PartialEq)]
pub enum InputItem {
    /// A request to replay.
    Request(Box<CapturedRequest>),
    /// A request that went through admission but cannot be replayed faithfully (a strategic
    /// merge patch without a known old object, …). Counted and explained in the report.
    NotReplayable(InputProblem),
    /// Input that could not be read at all (a truncated line, invalid JSON, an unknown kind).
    Invalid(InputProblem),
}

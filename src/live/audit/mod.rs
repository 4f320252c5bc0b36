//! Audit events from a live cluster: a followed audit log, or the apiserver's audit webhook backend.
//!
//! Two producers feed one bounded channel of [`AuditFeed`] messages:
//! * [`follow`] reads an audit log file (`--audit-log-format=json`) as it grows, across rotations;
//! * [`AuditWebhookServer`] is the HTTPS endpoint of the apiserver's `--audit-webhook-config-file`,
//!   receiving `audit.k8s.io/v1` `EventList` batches.
//!
//! Both send each event as received ([`RawEvent`]) and never drop one: a full channel makes the
//! follower stop reading and the webhook handler wait. The consumer hands each raw event to an
//! [`Ingester`], which decodes what the console shows ([`AuditEvent`], with the admission
//! annotations parsed) and feeds the replay [`Reader`](crate::replay::input::Reader) one event at
//! a time for the replayable [`InputItem`](crate::replay::InputItem)s; and, when the user asks, to
//! a [`CaptureWriter`], which saves the stream as an audit log the replay reads back.

mod capture;
mod follow;
mod ingest;
mod webhook;

use std::path::PathBuf;

use bytes::Bytes;

use crate::replay::{IndexUnit, SourceRef};

pub use capture::{CaptureError, CaptureOptions, CaptureWriter};
pub use follow::{FollowOptions, follow};
pub use ingest::{
    AdmissionAnnotation, AnnotationKind, AuditEvent, AuditObjectRef, AuditUser, Ingested, Ingester,
};
pub use webhook::{
    AuditWebhookError, AuditWebhookOptions, AuditWebhookServer, WEBHOOK_SOURCE, WebhookTls,
};

/// One message of the audit feed.
#[derive(Debug, Clone, PartialEq)]
pub enum AuditFeed {
    /// An event, as received.
    Event(RawEvent),
    /// Something the user should know about the source (following, rotated, an error).
    Notice(Notice),
}

/// One audit event exactly as received: a line of the log (without its newline) or one item of a
/// webhook `EventList`.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEvent {
    /// Where it came from.
    pub origin: Origin,
    /// The event's JSON text.
    pub text: Bytes,
}

/// Where a raw event came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The followed path as given, or [`WEBHOOK_SOURCE`].
    pub source: String,
    /// A log: the 1-based line of the current file (counted from where following started when it
    /// started at the end). The webhook: the 1-based number of the event since the server started.
    pub index: usize,
    /// [`IndexUnit::Line`] for a log, [`IndexUnit::Document`] for the webhook.
    pub unit: IndexUnit,
}

impl Origin {
    /// The replay's [`SourceRef`] for this origin (the `auditID` is filled in by the reader).
    pub fn source_ref(&self) -> SourceRef {
        SourceRef {
            file: self.source.clone(),
            index: self.index,
            unit: self.unit,
            audit_id: None,
            line: None,
        }
    }
}

/// How a followed file was rotated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// The file was renamed (or removed) and a new one created at the path: the old file was read
    /// to its end first, then the new one from its start.
    Renamed,
    /// The file shrank in place (`copytruncate`): reading starts again from offset 0.
    Truncated,
}

/// A notice about a source of audit events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Following `path` from byte `offset` (0: from the start).
    Following {
        /// The followed path.
        path: PathBuf,
        /// Where reading started.
        offset: u64,
    },
    /// `path` does not exist (yet): checked again at every poll.
    WaitingForFile {
        /// The followed path.
        path: PathBuf,
    },
    /// `path` was rotated.
    Rotated {
        /// The followed path.
        path: PathBuf,
        /// How.
        rotation: Rotation,
    },
    /// Bytes that never became a complete line (the end of a rotated or truncated file, or a line
    /// over the size limit) were skipped.
    Skipped {
        /// The followed path.
        path: PathBuf,
        /// The 1-based line they would have been.
        line: usize,
        /// How many bytes.
        bytes: usize,
        /// Why.
        reason: String,
    },
    /// A source failed; it keeps retrying (a follower) or serving (the webhook).
    Error {
        /// The path, or [`WEBHOOK_SOURCE`].
        source: String,
        /// What went wrong.
        message: String,
    },
    /// A source that had failed works again.
    Recovered {
        /// The path, or [`WEBHOOK_SOURCE`].
        source: String,
    },
    /// The webhook backend answered a POST with an error status: the apiserver retries the batch
    /// with backoff (and drops it after its last try).
    BatchRefused {
        /// The HTTP status sent.
        status: u16,
        /// The message sent in the body.
        message: String,
    },
}

impl std::fmt::Display for Notice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Notice::Following { path, offset: 0 } => {
                write!(f, "following {} from the start", path.display())
            }
            Notice::Following { path, offset } => {
                write!(f, "following {} from byte {offset}", path.display())
            }
            Notice::WaitingForFile { path } => {
                write!(f, "waiting for {} to appear", path.display())
            }
            Notice::Rotated {
                path,
                rotation: Rotation::Renamed,
            } => write!(f, "{} was rotated: reading the new file", path.display()),
            Notice::Rotated {
                path,
                rotation: Rotation::Truncated,
            } => write!(
                f,
                "{} was truncated: reading from the start",
                path.display()
            ),
            Notice::Skipped {
                path,
                line,
                bytes,
                reason,
            } => write!(
                f,
                "{} line {line}: skipped {bytes} bytes: {reason}",
                path.display()
            ),
            Notice::Error { source, message } => write!(f, "{source}: {message}"),
            Notice::Recovered { source } => write!(f, "{source}: working again"),
            Notice::BatchRefused { status, message } => {
                write!(f, "{WEBHOOK_SOURCE}: answered {status}: {message}")
            }
        }
    }
}

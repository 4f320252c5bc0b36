//! Recording webhook exchanges, and answering calls from a recording offline.
//!
//! [`Recorder`] wraps any [`Replier`] (usually the HTTPS transport) and saves every exchange it
//! passes on: the AdmissionReview sent, what came back (or why nothing did) and how long it took.
//! [`RecordedReplies`] loads such a recording and answers the engine's calls from it without any
//! network, so a recorded run replayed offline produces the same report.
//!
//! # Layout
//!
//! ```text
//! DIR/
//!   index.jsonl                                   one line per exchange
//!   000001-<configuration>-<webhook>-<phase>-r<round>/
//!     request.json                                the AdmissionReview sent
//!     reply.json                                  what came back, and how long it took
//!   000002-…/
//! ```
//!
//! Exchanges are numbered from 1 in the order the calls reached the recorder (a batch abandoned
//! before it completed, because its request was cancelled, leaves a gap). Folder names carry
//! the configuration and webhook names with every character other than ASCII letters, digits,
//! `.`, `_` and `-` replaced by `_` (each cut to 60 characters), the phase (`mutating` or
//! `validating`) and the reinvocation round.
//!
//! **`index.jsonl`** has one JSON object per line, appended as exchanges complete (so an
//! interrupted recording stays usable up to its last complete batch; lines of concurrent requests
//! may be out of order). Fields: `seq` (the number), `dir` (the folder name, a plain name inside
//! `DIR`), `phase`, `configuration`, `webhook`, and for reading only `round`, `index`,
//! `requestUid`, `url`, `outcome` (a summary such as `http 200` or `transport timeout`) and
//! `elapsedMs`. A hand-written index needs only the first five.
//!
//! **`request.json`** is the AdmissionReview exactly as it was sent, indented (two spaces a
//! level, up to 64 levels): only whitespace outside strings was added, keys keep their order.
//! Its `request.uid` is the recorded uid.
//!
//! **`reply.json`** is an object with
//!
//! - `outcome`: `http` (a response arrived), `transport` (the request failed below HTTP),
//!   `clientConfig` (no client could be built for the webhook), `canceled` (the parent request
//!   was cancelled) or `panicked` (preparing the call panicked);
//! - for `http`: `status`, `contentType` (absent when the response had none) and the body as
//!   exactly one of
//!   - `body` holding a JSON object or array: the body verbatim (the common case, readable as
//!     is), followed by `bodyTrailer` (a string, e.g. `"\n"`) when the body ended with
//!     whitespace,
//!   - `body` holding a string: the body as text,
//!   - `bodyBase64`: the body, base64, when it is not UTF-8;
//! - for `transport`: `errorKind` (`connect`, `dns`, `tls`, `timeout`, `reset`, `malformed` or
//!   `other`) and `error`, the cause as Go phrases it;
//! - for `clientConfig` and `panicked`: `error`, the message;
//! - `elapsedNanos`: how long the call took, exactly, and `elapsedMs`, the same in milliseconds
//!   for reading. A hand-written reply may give either (neither: zero); when both are given they
//!   must agree to the microsecond.
//!
//! Unknown fields are refused, so that a misspelt field is not silently ignored. The recorder
//! checks that every body it writes reads back byte for byte.
//!
//! # Matching
//!
//! A call is answered by a recorded exchange of the same webhook (configuration name, webhook
//! name and phase) whose request has the same content once `request.uid` is set aside (objects
//! are compared as JSON values, so indentation and key order do not matter). When the same call
//! was recorded several times, a reply recorded for the same `request.uid` is preferred (so a
//! replay that reproduces the recorded uids gets each request its own reply, even when identical
//! requests were recorded concurrently); otherwise the replies are given in recorded order. Once
//! all have been given, the last one is repeated.
//!
//! The engine requires `response.uid` to echo the new call's `request.uid`. When the recorded
//! response echoed the recorded request's uid, that string (and nothing else in the body) is
//! replaced by the new call's uid; a response that did not echo it is replayed unchanged, so the
//! webhook's mistake is reported again.
//!
//! A call without a recorded reply fails as a transport error (`no recorded reply for …`), which
//! the webhook's failure policy then handles, and is listed by [`RecordedReplies::missing`].

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File};
use std::future::Future;
use std::hash::BuildHasherDefault;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::api::WebhookKind;
use crate::api::meta::short_eq;
use crate::engine::call::{
    Replier, Reply, ReplyOutcome, TransportError, TransportErrorKind, WebhookCall,
};
use crate::registry::FxHasher;

/// The index file of a recording.
pub const INDEX_FILE: &str = "index.jsonl";
/// The request file of an exchange folder.
pub const REQUEST_FILE: &str = "request.json";
/// The reply file of an exchange folder.
pub const REPLY_FILE: &str = "reply.json";

/// Longest piece of a configuration or webhook name kept in a folder name.
const NAME_LIMIT: usize = 60;

const REPLY_FIELDS: &[&str] = &[
    "outcome",
    "status",
    "contentType",
    "body",
    "bodyTrailer",
    "bodyBase64",
    "errorKind",
    "error",
    "elapsedNanos",
    "elapsedMs",
];

const INDEX_FIELDS: &[&str] = &[
    "seq",
    "dir",
    "phase",
    "configuration",
    "webhook",
    "round",
    "index",
    "requestUid",
    "url",
    "outcome",
    "elapsedMs",
];

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a recording could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Reading or writing a file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A recording was to be written into a directory that already holds files.
    #[error("{}: already holds files; record into a new or empty directory", .dir.display())]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// The directory to load holds no recording.
    #[error("{}: no recording here ({INDEX_FILE} is missing)", .dir.display())]
    NoRecording {
        /// The directory.
        dir: PathBuf,
    },
    /// A recording file is malformed.
    #[error("{}", invalid_text(.path, .line, .field, .message))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The 1-based line, for `index.jsonl`.
        line: Option<usize>,
        /// The offending field (`status`, `body`, `request.uid`), or empty when the file as a
        /// whole is unreadable.
        field: String,
        /// What is wrong.
        message: String,
    },
}

fn invalid_text(path: &Path, line: &Option<usize>, field: &str, message: &str) -> String {
    let mut s = path.display().to_string();
    if let Some(l) = line {
        s.push_str(&format!(" line {l}"));
    }
    if !field.is_empty() {
        s.push_str(": ");
        s.push_str(field);
    }
    s.push_str(": ");
    s.push_str(message);
    s
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where in a recording a value was read, to name it in errors.
struct Place<'a> {
    path: &'a Path,
    line: Option<usize>,
}

impl Place<'_> {
    fn invalid(&self, field: &str, message: impl Into<String>) -> RecordError {
        RecordError::Invalid {
            path: self.path.to_path_buf(),
            line: self.line,
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// Parses a JSON object, refusing fields not in `known`.
    fn object(&self, text: &[u8], known: &[&str]) -> Result<Map<String, Value>, RecordError> {
        let value: Value = crate::json::from_slice(text)
            .map_err(|e| self.invalid("", format!("not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(self.invalid("", "expected a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(self.invalid(
                unknown,
                format!("unknown field; expected one of {}", known.join(", ")),
            ));
        }
        Ok(map)
    }

    fn string<'m>(&self, map: &'m Map<String, Value>, field: &str) -> Result<&'m str, RecordError> {
        match map.get(field) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(self.invalid(field, format!("expected a string, got {other}"))),
            None => Err(self.invalid(field, "missing")),
        }
    }

    fn optional_string<'m>(
        &self,
        map: &'m Map<String, Value>,
        field: &str,
    ) -> Result<Option<&'m str>, RecordError> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(map, field).map(Some),
        }
    }

    fn unsigned(&self, map: &Map<String, Value>, field: &str) -> Result<Option<u64>, RecordError> {
        match map.get(field) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                self.invalid(field, format!("expected a whole number ≥ 0, got {v}"))
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recording
// ---------------------------------------------------------------------------------------------

/// Wraps any replier and saves every exchange under a directory (see the [module
/// docs](self) for the layout).
///
/// The inner replier answers each batch as it would alone (the HTTPS replier still runs the calls
/// of a batch concurrently); the exchanges are written once the batch is complete, a few small
/// files per call, synchronously. A recorder over a `Clone` replier is `Clone`, and clones write
/// into the same recording, so concurrent requests can share it. Write failures do not disturb
/// the run: the first is returned by the first [`Recorder::finish`] among the clones.
#[derive(Debug, Clone)]
pub struct Recorder<R> {
    inner: R,
    shared: Arc<RecordShared>,
}

#[derive(Debug)]
struct RecordShared {
    dir: PathBuf,
    next: AtomicU64,
    index: Mutex<BufWriter<File>>,
    error: Mutex<Option<RecordError>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<R: Replier + Send> Recorder<R> {
    /// Starts a recording in `dir`, which is created when absent and must otherwise be empty.
    pub fn new(inner: R, dir: &Path) -> Result<Self, RecordError> {
        match fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(RecordError::NotEmpty {
                        dir: dir.to_path_buf(),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(io_error(dir))?;
            }
            Err(e) => return Err(io_error(dir)(e)),
        }
        let index_path = dir.join(INDEX_FILE);
        let index = File::options()
            .write(true)
            .create_new(true)
            .open(&index_path)
            .map_err(io_error(&index_path))?;
        Ok(Self {
            inner,
            shared: Arc::new(RecordShared {
                dir: dir.to_path_buf(),
                next: AtomicU64::new(1),
                index: Mutex::new(BufWriter::new(index)),
                error: Mutex::new(None),
            }),
        })
    }

    /// The directory being recorded into.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Flushes the index and gives the inner replier back, or the first error met while
    /// recording (by this recorder or any of its clones).
    pub fn finish(self) -> Result<R, RecordError> {
        let index_path = self.shared.dir.join(INDEX_FILE);
        let flushed = lock(&self.shared.index).flush();
        if let Some(e) = lock(&self.shared.error).take() {
            return Err(e);
        }
        flushed.map_err(io_error(&index_path))?;
        Ok(self.inner)
    }
}

impl<R: Replier + Send> Replier for Recorder<R> {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let first = self
            .shared
            .next
            .fetch_add(calls.len() as u64, Ordering::Relaxed);
        let shared = Arc::clone(&self.shared);
        let pending = self.inner.reply(calls);
        async move {
            let replies = pending.await;
            shared.record(first, calls, &replies);
            replies
        }
    }
}

impl RecordShared {
    fn record(&self, first: u64, calls: &[WebhookCall], replies: &[Reply]) {
        let mut lines = String::new();
        let mut failure = None;
        for (seq, (call, reply)) in (first..).zip(calls.iter().zip(replies)) {
            match self.write_exchange(seq, call, reply) {
                Ok(line) => {
                    lines.push_str(&line);
                    lines.push('\n');
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        let index_path = self.dir.join(INDEX_FILE);
        let written = {
            let mut index = lock(&self.index);
            index
                .write_all(lines.as_bytes())
                .and_then(|()| index.flush())
        };
        if let Err(e) = written {
            failure.get_or_insert(io_error(&index_path)(e));
        }
        if let Some(e) = failure {
            lock(&self.error).get_or_insert(e);
        }
    }

    /// Writes one exchange folder and returns its index line.
    fn write_exchange(
        &self,
        seq: u64,
        call: &WebhookCall,
        reply: &Reply,
    ) -> Result<String, RecordError> {
        let name = folder_name(seq, call);
        let folder = self.dir.join(&name);
        fs::create_dir(&folder).map_err(io_error(&folder))?;
        let request_path = folder.join(REQUEST_FILE);
        let mut request = indent_json(&call.body);
        request.push(b'\n');
        fs::write(&request_path, request).map_err(io_error(&request_path))?;
        let reply_path = folder.join(REPLY_FILE);
        fs::write(&reply_path, render_reply(reply)).map_err(io_error(&reply_path))?;
        let line = IndexLine {
            seq,
            dir: &name,
            phase: call.phase.to_string(),
            configuration: &call.configuration,
            webhook: &call.webhook,
            round: call.round,
            index: call.index,
            request_uid: &call.request_uid,
            url: &call.endpoint.url,
            outcome: outcome_summary(&reply.outcome),
            elapsed_ms: millis(reply.elapsed),
        };
        serde_json::to_string(&line).map_err(|e| io_error(&self.dir.join(INDEX_FILE))(e.into()))
    }
}

/// One line of `index.jsonl`, as written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexLine<'a> {
    seq: u64,
    dir: &'a str,
    phase: String,
    configuration: &'a str,
    webhook: &'a str,
    round: u8,
    index: usize,
    request_uid: &'a str,
    url: &'a str,
    outcome: String,
    elapsed_ms: f64,
}

fn folder_name(seq: u64, call: &WebhookCall) -> String {
    format!(
        "{seq:06}-{}-{}-{}-r{}",
        sanitize(&call.configuration),
        sanitize(&call.webhook),
        call.phase,
        call.round
    )
}

/// A name safe in any file system: ASCII letters, digits, `.`, `_` and `-`, at most
/// [`NAME_LIMIT`] characters.
fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .take(NAME_LIMIT)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".into() } else { s }
}

fn millis(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

fn outcome_name(o: &ReplyOutcome) -> &'static str {
    match o {
        ReplyOutcome::Http { .. } => "http",
        ReplyOutcome::ClientConfig(_) => "clientConfig",
        ReplyOutcome::Transport(_) => "transport",
        ReplyOutcome::Canceled => "canceled",
        ReplyOutcome::Panicked(_) => "panicked",
    }
}

fn outcome_summary(o: &ReplyOutcome) -> String {
    match o {
        ReplyOutcome::Http { status, .. } => format!("http {status}"),
        ReplyOutcome::Transport(e) => format!("transport {}", kind_name(e.kind)),
        other => outcome_name(other).to_string(),
    }
}

const KINDS: &[(TransportErrorKind, &str)] = &[
    (TransportErrorKind::Connect, "connect"),
    (TransportErrorKind::Dns, "dns"),
    (TransportErrorKind::Tls, "tls"),
    (TransportErrorKind::Timeout, "timeout"),
    (TransportErrorKind::Reset, "reset"),
    (TransportErrorKind::Malformed, "malformed"),
    (TransportErrorKind::Other, "other"),
];

fn kind_name(kind: TransportErrorKind) -> &'static str {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("other", |(_, n)| n)
}

/// Levels of nesting the indentation of recorded bodies follows; deeper lines are indented as
/// this level, so that a body nested as deep as kube-apiserver reads (10,000 levels) takes space
/// in proportion to its size (fully indented, one such body would take 200 MB).
const INDENTED_LEVELS: usize = 64;

/// Indents a JSON text without reordering or re-encoding anything: only whitespace outside
/// strings changes, up to [`INDENTED_LEVELS`]. Text that is not JSON is returned as is.
fn indent_json(text: &[u8]) -> Vec<u8> {
    // A review sent holds its objects two levels down.
    if crate::json::from_slice_within::<serde::de::IgnoredAny>(text, 2).is_err() {
        return text.to_vec();
    }
    let mut out = Vec::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', depth.min(INDENTED_LEVELS) * 2));
    };
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        i += 1;
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'"' => {
                in_string = true;
                out.push(b);
            }
            b'{' | b'[' => {
                out.push(b);
                let next = text[i..]
                    .iter()
                    .position(|c| !c.is_ascii_whitespace())
                    .map(|p| i + p);
                if let Some(n) = next.filter(|&n| matches!(text[n], b'}' | b']')) {
                    out.push(text[n]);
                    i = n + 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            _ => out.push(b),
        }
    }
    out
}

/// How a body is written into `reply.json`.
#[derive(Clone, Copy, PartialEq)]
enum BodyForm {
    /// A JSON object or array embedded verbatim, plus trailing whitespace.
    Json,
    /// A JSON string.
    Text,
    /// Base64.
    Base64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplyFile<'a> {
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_trailer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    elapsed_ms: f64,
    elapsed_nanos: u64,
}

/// `reply.json` for a reply, in the most readable form whose body reads back byte for byte.
fn render_reply(reply: &Reply) -> Vec<u8> {
    let forms = [BodyForm::Json, BodyForm::Text, BodyForm::Base64];
    let mut rendered = Vec::new();
    for form in forms {
        let Some(text) = render_reply_as(reply, form) else {
            continue;
        };
        rendered = text;
        let here = Place {
            path: Path::new(REPLY_FILE),
            line: None,
        };
        if parse_reply(&here, &rendered).ok().as_ref() == Some(reply) {
            break;
        }
    }
    rendered.push(b'\n');
    rendered
}

fn render_reply_as(reply: &Reply, form: BodyForm) -> Option<Vec<u8>> {
    let mut file = ReplyFile {
        outcome: outcome_name(&reply.outcome),
        status: None,
        content_type: None,
        body: None,
        body_trailer: None,
        body_base64: None,
        error_kind: None,
        error: None,
        elapsed_nanos: u64::try_from(reply.elapsed.as_nanos()).unwrap_or(u64::MAX),
        elapsed_ms: millis(reply.elapsed),
    };
    match &reply.outcome {
        ReplyOutcome::Http {
            status,
            content_type,
            body,
        } => {
            file.status = Some(*status);
            file.content_type = content_type.as_deref();
            match form {
                BodyForm::Json => {
                    let text = std::str::from_utf8(body).ok()?;
                    let core = text.trim_end_matches([' ', '\t', '\n', '\r']);
                    if !core.starts_with(['{', '[']) {
                        return None;
                    }
                    file.body = Some(RawValue::from_string(core.to_string()).ok()?);
                    let trailer = &text[core.len()..];
                    file.body_trailer = (!trailer.is_empty()).then_some(trailer);
                }
                BodyForm::Text => {
                    let text = std::str::from_utf8(body).ok()?;
                    file.body =
                        Some(RawValue::from_string(serde_json::to_string(text).ok()?).ok()?);
                }
                BodyForm::Base64 => {
                    file.body_base64 = Some(base64::engine::general_purpose::STANDARD.encode(body));
                }
            }
        }
        ReplyOutcome::ClientConfig(m) | ReplyOutcome::Panicked(m) => file.error = Some(m),
        ReplyOutcome::Transport(e) => {
            file.error_kind = Some(kind_name(e.kind));
            file.error = Some(&e.detail);
        }
        ReplyOutcome::Canceled => {}
    }
    serde_json::to_vec_pretty(&file).ok()
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// The body field of `reply.json`, verbatim.
#[derive(Deserialize)]
struct RawBody<'a> {
    #[serde(borrow, default)]
    body: Option<&'a RawValue>,
}

/// Reads `reply.json`.
fn parse_reply(place: &Place<'_>, text: &[u8]) -> Result<Reply, RecordError> {
    let map = place.object(text, REPLY_FIELDS)?;
    let outcome = match place.string(&map, "outcome")? {
        "http" => {
            let status = place
                .unsigned(&map, "status")?
                .ok_or_else(|| place.invalid("status", "missing"))?;
            let status = u16::try_from(status).map_err(|_| {
                place.invalid(
                    "status",
                    format!("expected an HTTP status code, got {status}"),
                )
            })?;
            let content_type = place
                .optional_string(&map, "contentType")?
                .map(str::to_string);
            let body = parse_body(place, text, &map)?;
            ReplyOutcome::Http {
                status,
                content_type,
                body,
            }
        }
        "transport" => {
            let kind = place.string(&map, "errorKind")?;
            let kind = KINDS
                .iter()
                .find(|(_, n)| *n == kind)
                .map(|(k, _)| *k)
                .ok_or_else(|| {
                    let names: Vec<&str> = KINDS.iter().map(|(_, n)| *n).collect();
                    place.invalid(
                        "errorKind",
                        format!(
                            "unknown kind {kind:?}; expected one of {}",
                            names.join(", ")
                        ),
                    )
                })?;
            ReplyOutcome::Transport(TransportError {
                kind,
                detail: place.string(&map, "error")?.to_string(),
            })
        }
        "clientConfig" => ReplyOutcome::ClientConfig(place.string(&map, "error")?.to_string()),
        "panicked" => ReplyOutcome::Panicked(place.string(&map, "error")?.to_string()),
        "canceled" => ReplyOutcome::Canceled,
        other => {
            return Err(place.invalid(
                "outcome",
                format!(
                    "unknown outcome {other:?}; expected http, transport, clientConfig, canceled or panicked"
                ),
            ));
        }
    };
    if !matches!(outcome, ReplyOutcome::Http { .. }) {
        let stray = ["status", "contentType", "body", "bodyTrailer", "bodyBase64"]
            .into_iter()
            .find(|f| map.contains_key(*f));
        if let Some(f) = stray {
            return Err(place.invalid(f, "only an http outcome has a status, content type or body"));
        }
    }
    if !matches!(outcome, ReplyOutcome::Transport(_)) && map.contains_key("errorKind") {
        return Err(place.invalid("errorKind", "only a transport outcome has an error kind"));
    }
    Ok(Reply {
        outcome,
        elapsed: parse_elapsed(place, &map)?,
    })
}

fn parse_body(
    place: &Place<'_>,
    text: &[u8],
    map: &Map<String, Value>,
) -> Result<Vec<u8>, RecordError> {
    let trailer = place
        .optional_string(map, "bodyTrailer")?
        .unwrap_or_default();
    if let Some(encoded) = place.optional_string(map, "bodyBase64")? {
        if map.contains_key("body") {
            return Err(place.invalid("body", "give either body or bodyBase64, not both"));
        }
        if !trailer.is_empty() {
            return Err(place.invalid("bodyTrailer", "only goes with a JSON body"));
        }
        return base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| place.invalid("bodyBase64", format!("not base64: {e}")));
    }
    let raw: RawBody<'_> =
        crate::json::from_slice(text).map_err(|e| place.invalid("body", e.to_string()))?;
    let Some(raw) = raw.body else {
        return Err(place.invalid("body", "missing (an empty body is \"\")"));
    };
    let raw = raw.get();
    if raw.starts_with('"') {
        if !trailer.is_empty() {
            return Err(place.invalid("bodyTrailer", "only goes with a JSON body"));
        }
        let s: String =
            crate::json::from_str(raw).map_err(|e| place.invalid("body", e.to_string()))?;
        return Ok(s.into_bytes());
    }
    if !raw.starts_with(['{', '[']) {
        return Err(place.invalid(
            "body",
            format!("expected a JSON object or array (the body) or a string (the body as text), got {raw}"),
        ));
    }
    if !trailer.bytes().all(|b| b.is_ascii_whitespace()) {
        return Err(place.invalid("bodyTrailer", "may only hold whitespace"));
    }
    let mut body = raw.as_bytes().to_vec();
    body.extend_from_slice(trailer.as_bytes());
    Ok(body)
}

fn parse_elapsed(place: &Place<'_>, map: &Map<String, Value>) -> Result<Duration, RecordError> {
    let nanos = place.unsigned(map, "elapsedNanos")?;
    let ms = match map.get("elapsedMs") {
        None => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|m| m.is_finite() && *m >= 0.0 && *m < 1e15)
                .ok_or_else(|| {
                    place.invalid("elapsedMs", format!("expected milliseconds ≥ 0, got {v}"))
                })?,
        ),
    };
    match (nanos, ms) {
        (Some(n), Some(m)) if (m * 1e6 - n as f64).abs() > 1000.0 => Err(place.invalid(
            "elapsedMs",
            format!("{m} disagrees with elapsedNanos {n}; change one and remove the other"),
        )),
        (Some(n), _) => Ok(Duration::from_nanos(n)),
        (None, Some(m)) => Ok(Duration::from_nanos((m * 1e6).round() as u64)),
        (None, None) => Ok(Duration::ZERO),
    }
}

/// What identifies a call for matching: the webhook and the request without its uid.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct MatchKey {
    configuration: String,
    webhook: String,
    phase: WebhookKind,
    content: String,
}

/// The request content a call is matched on: `review` without `request.uid`, as canonical JSON.
fn content_key(mut review: Value) -> String {
    if let Some(request) = review.get_mut("request").and_then(Value::as_object_mut) {
        request.remove("uid");
    }
    let mut out = String::new();
    canonical(&review, &mut out);
    out
}

/// JSON with object keys sorted at every level and no whitespace.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The byte range of the `response.uid` string in a response body (the one a JSON decoder
/// keeps), when it equals `uid`.
fn echoed_uid_span(body: &[u8], uid: &str) -> Option<Range<usize>> {
    let top: HashMap<String, &RawValue> = crate::json::from_slice(body).ok()?;
    let response: HashMap<String, &RawValue> =
        crate::json::from_str(top.get("response")?.get()).ok()?;
    let raw = response.get("uid")?.get();
    let value: String = crate::json::from_str(raw).ok()?;
    if value != uid {
        return None;
    }
    let start = (raw.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let span = start..start + raw.len();
    (body.get(span.clone()) == Some(raw.as_bytes())).then_some(span)
}

/// One recorded reply, ready to be replayed.
#[derive(Debug)]
struct Recorded {
    reply: Reply,
    /// The recorded `request.uid`.
    request_uid: String,
    /// Where the body echoes the recorded `request.uid` (to be replaced by the new one).
    uid_span: Option<Range<usize>>,
}

impl Recorded {
    fn reply_to(&self, call: &WebhookCall) -> Reply {
        let (
            Some(span),
            ReplyOutcome::Http {
                status,
                content_type,
                body,
            },
        ) = (&self.uid_span, &self.reply.outcome)
        else {
            return self.reply.clone();
        };
        let (Some(before), Some(after)) = (body.get(..span.start), body.get(span.end..)) else {
            return self.reply.clone();
        };
        let uid = Value::from(call.request_uid.as_str()).to_string();
        let mut spliced = Vec::with_capacity(before.len() + uid.len() + after.len());
        spliced.extend_from_slice(before);
        spliced.extend_from_slice(uid.as_bytes());
        spliced.extend_from_slice(after);
        Reply {
            outcome: ReplyOutcome::Http {
                status: *status,
                content_type: content_type.clone(),
                body: spliced,
            },
            elapsed: self.reply.elapsed,
        }
    }
}

/// The replies recorded for one key, in order.
#[derive(Debug, Default)]
struct Queue {
    replies: Vec<Recorded>,
    /// Positions in `replies` by recorded `request.uid`.
    by_uid: HashMap<String, Vec<usize>>,
    state: Mutex<QueueState>,
}

/// Which replies of a queue have been given.
#[derive(Debug, Default)]
struct QueueState {
    taken: Vec<bool>,
    /// No reply before this one is left.
    next: usize,
}

impl Queue {
    fn push(&mut self, recorded: Recorded) {
        self.by_uid
            .entry(recorded.request_uid.clone())
            .or_default()
            .push(self.replies.len());
        self.replies.push(recorded);
        lock(&self.state).taken.push(false);
    }

    /// The reply for a call with `request_uid`: the first one left that was recorded with the same
    /// uid, else the first one left, else (all given) the last one with the same uid or the last.
    fn pick(&self, request_uid: &str) -> Option<&Recorded> {
        let same_uid = self.by_uid.get(request_uid);
        let mut state = lock(&self.state);
        let st = &mut *state;
        let left = same_uid
            .and_then(|ids| ids.iter().copied().find(|&i| !st.taken[i]))
            .or_else(|| {
                while st.taken.get(st.next) == Some(&true) {
                    st.next += 1;
                }
                (st.next < st.taken.len()).then_some(st.next)
            });
        let i = match left {
            Some(i) => {
                st.taken[i] = true;
                i
            }
            None => same_uid
                .and_then(|ids| ids.last().copied())
                .unwrap_or(self.replies.len().checked_sub(1)?),
        };
        self.replies.get(i)
    }
}

/// A call that had no recorded reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingReply {
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name.
    pub webhook: String,
    /// Mutating or validating.
    pub phase: WebhookKind,
    /// The reinvocation round.
    pub round: u8,
    /// The `request.uid` of the call.
    pub request_uid: String,
    /// The request in short, e.g. `CREATE v1/pods default/web-0`.
    pub description: String,
}

impl fmt::Display for MissingReply {
    /// `<configuration>/<webhook> (<phase>, <description>)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let round = if self.round > 0 { " reinvocation" } else { "" };
        write!(
            f,
            "{}/{} ({}{round}, {})",
            self.configuration, self.webhook, self.phase, self.description
        )
    }
}

/// `CREATE apps/v1/deployments/scale shop/web` from an AdmissionReview.
fn describe(review: &Value) -> String {
    let request = &review["request"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let operation = text(&request["operation"]);
    let resource = &request["resource"];
    let mut what = [
        text(&resource["group"]),
        text(&resource["version"]),
        text(&resource["resource"]),
        text(&request["subResource"]),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join("/");
    if what.is_empty() {
        what = "(unknown resource)".into();
    }
    let name = text(&request["name"]);
    let name = if name.is_empty() {
        "(no name)".into()
    } else {
        name
    };
    let namespace = text(&request["namespace"]);
    let target = if namespace.is_empty() {
        name
    } else {
        format!("{namespace}/{name}")
    };
    let operation = if operation.is_empty() {
        "(no operation)".to_string()
    } else {
        operation
    };
    format!("{operation} {what} {target}")
}

/// Answers calls from a recording, offline (see the [module docs](self) for the layout and the
/// matching rules). Replies come back at once, with the recorded durations. Clones share the
/// recording, the position in each sequence of repeated calls and the list of missing replies.
#[derive(Debug, Clone)]
pub struct RecordedReplies {
    inner: Arc<Replay>,
}

#[derive(Debug)]
struct Replay {
    /// Recorded replies, one queue per distinct call.
    queues: Vec<Queue>,
    /// Canonical call content → its queue.
    by_content: HashMap<MatchKey, usize>,
    /// Exact request bytes (without the uid value) → the queue, so a call the engine renders
    /// exactly as recorded is answered without parsing, canonicalising or copying it.
    exact: ExactIndex,
    exchanges: usize,
    missing: Mutex<Vec<MissingReply>>,
}

/// One line of `index.jsonl`.
struct IndexEntry {
    line: usize,
    seq: u64,
    dir: String,
    phase: WebhookKind,
    configuration: String,
    webhook: String,
}

fn parse_index_line(place: &Place<'_>, text: &str) -> Result<IndexEntry, RecordError> {
    let map = place.object(text.as_bytes(), INDEX_FIELDS)?;
    let seq = place
        .unsigned(&map, "seq")?
        .ok_or_else(|| place.invalid("seq", "missing"))?;
    let dir = place.string(&map, "dir")?;
    let plain = Path::new(dir)
        .components()
        .map(|c| matches!(c, std::path::Component::Normal(_)))
        .eq([true]);
    if !plain {
        return Err(place.invalid(
            "dir",
            format!("{dir:?} is not the name of a folder of the recording"),
        ));
    }
    let phase = match place.string(&map, "phase")? {
        "mutating" => WebhookKind::Mutating,
        "validating" => WebhookKind::Validating,
        other => {
            return Err(place.invalid(
                "phase",
                format!("expected mutating or validating, got {other:?}"),
            ));
        }
    };
    Ok(IndexEntry {
        line: place.line.unwrap_or_default(),
        seq,
        dir: dir.to_string(),
        phase,
        configuration: place.string(&map, "configuration")?.to_string(),
        webhook: place.string(&map, "webhook")?.to_string(),
    })
}

fn read(path: &Path) -> Result<Vec<u8>, RecordError> {
    fs::read(path).map_err(io_error(path))
}

impl RecordedReplies {
    /// Loads the recording in `dir`.
    pub fn load(dir: &Path) -> Result<Self, RecordError> {
        let index_path = dir.join(INDEX_FILE);
        let index = match fs::read(&index_path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(RecordError::NoRecording {
                    dir: dir.to_path_buf(),
                });
            }
            Err(e) => return Err(io_error(&index_path)(e)),
        };
        let index = String::from_utf8(index).map_err(|e| RecordError::Invalid {
            path: index_path.clone(),
            line: None,
            field: String::new(),
            message: format!("not UTF-8: {e}"),
        })?;
        let mut entries = Vec::new();
        for (n, text) in index.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let place = Place {
                path: &index_path,
                line: Some(n + 1),
            };
            entries.push(parse_index_line(&place, text)?);
        }
        entries.sort_by_key(|e| e.seq);
        for pair in entries.windows(2) {
            if pair[0].seq == pair[1].seq {
                return Err(RecordError::Invalid {
                    path: index_path,
                    line: Some(pair[1].line),
                    field: "seq".into(),
                    message: format!("{} is also used on line {}", pair[1].seq, pair[0].line),
                });
            }
        }
        let mut queues: Vec<Queue> = Vec::new();
        let mut by_content: HashMap<MatchKey, usize> = HashMap::new();
        let mut exact = ExactIndex::default();
        for entry in &entries {
            let (key, recorded, request) = load_exchange(dir, entry)?;
            let at = *by_content.entry(key).or_insert_with(|| {
                queues.push(Queue::default());
                queues.len() - 1
            });
            exact.insert(
                ExactCall {
                    phase: entry.phase,
                    configuration: &entry.configuration,
                    webhook: &entry.webhook,
                    body: &compact_json(&request),
                    request_uid: &recorded.request_uid,
                },
                at,
            );
            queues[at].push(recorded);
        }
        Ok(Self {
            inner: Arc::new(Replay {
                queues,
                by_content,
                exact,
                exchanges: entries.len(),
                missing: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Calls that had no recorded reply so far, in the order they were made (a snapshot: clones
    /// share the list).
    pub fn missing(&self) -> Vec<MissingReply> {
        lock(&self.inner.missing).clone()
    }

    /// How many exchanges the recording holds.
    pub fn len(&self) -> usize {
        self.inner.exchanges
    }

    /// Whether the recording holds no exchange.
    pub fn is_empty(&self) -> bool {
        self.inner.exchanges == 0
    }

    /// The reply to one call.
    fn answer(&self, call: &WebhookCall) -> Reply {
        let inner = &*self.inner;
        let fast = inner.exact.get(ExactCall {
            phase: call.phase,
            configuration: &call.configuration,
            webhook: &call.webhook,
            body: &call.body,
            request_uid: &call.request_uid,
        });
        if let Some(recorded) = fast
            .and_then(|at| inner.queues.get(at))
            .and_then(|q| q.pick(&call.request_uid))
        {
            return recorded.reply_to(call);
        }
        // The review sent: its objects are two levels down.
        let review: Value = crate::json::from_slice_within(&call.body, 2)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&call.body).into_owned()));
        let description = describe(&review);
        let key = MatchKey {
            configuration: call.configuration.to_string(),
            webhook: call.webhook.to_string(),
            phase: call.phase,
            content: content_key(review),
        };
        if let Some(recorded) = inner
            .by_content
            .get(&key)
            .and_then(|&at| inner.queues.get(at))
            .and_then(|q| q.pick(&call.request_uid))
        {
            return recorded.reply_to(call);
        }
        let missing = MissingReply {
            configuration: call.configuration.to_string(),
            webhook: call.webhook.to_string(),
            phase: call.phase,
            round: call.round,
            request_uid: call.request_uid.clone(),
            description,
        };
        let detail = format!("no recorded reply for {missing}");
        lock(&self.inner.missing).push(missing);
        Reply {
            outcome: ReplyOutcome::Transport(TransportError {
                kind: TransportErrorKind::Other,
                detail,
            }),
            elapsed: Duration::ZERO,
        }
    }
}

/// Reads one exchange folder.
fn load_exchange(
    dir: &Path,
    entry: &IndexEntry,
) -> Result<(MatchKey, Recorded, Vec<u8>), RecordError> {
    let folder = dir.join(&entry.dir);
    let request_path = folder.join(REQUEST_FILE);
    let request_place = Place {
        path: &request_path,
        line: None,
    };
    let request_bytes = read(&request_path)?;
    let review: Value = crate::json::from_slice_within(&request_bytes, 2)
        .map_err(|e| request_place.invalid("", format!("not valid JSON: {e}")))?;
    let uid = match review.get("request") {
        Some(Value::Object(r)) => match r.get("uid") {
            Some(Value::String(u)) => u.clone(),
            Some(other) => {
                return Err(
                    request_place.invalid("request.uid", format!("expected a string, got {other}"))
                );
            }
            None => return Err(request_place.invalid("request.uid", "missing")),
        },
        Some(_) => return Err(request_place.invalid("request", "expected an object")),
        None => return Err(request_place.invalid("request", "missing")),
    };
    let reply_path = folder.join(REPLY_FILE);
    let reply = parse_reply(
        &Place {
            path: &reply_path,
            line: None,
        },
        &read(&reply_path)?,
    )?;
    let uid_span = match &reply.outcome {
        ReplyOutcome::Http { body, .. } => echoed_uid_span(body, &uid),
        _ => None,
    };
    let key = MatchKey {
        configuration: entry.configuration.clone(),
        webhook: entry.webhook.clone(),
        phase: entry.phase,
        content: content_key(review),
    };
    let recorded = Recorded {
        reply,
        request_uid: uid,
        uid_span,
    };
    Ok((key, recorded, request_bytes))
}

/// A call as the fast path sees it: the webhook and the exact bytes of its review.
#[derive(Clone, Copy)]
struct ExactCall<'a> {
    phase: WebhookKind,
    configuration: &'a str,
    webhook: &'a str,
    body: &'a [u8],
    request_uid: &'a str,
}

impl ExactCall<'_> {
    /// The review around the value of its `request.uid` (see [`around_uid`]) and the digest of
    /// the call without that value.
    fn key(&self) -> Option<(&[u8], &[u8], u64)> {
        use std::hash::{Hash, Hasher};
        let (before, after) = around_uid(self.body, self.request_uid)?;
        // A review sent ends with the newline Go's JSON encoder writes after it, which the
        // recording's compacted text no longer has.
        let after = after.trim_ascii_end();
        let mut h = FxHasher::default();
        self.phase.hash(&mut h);
        self.configuration.hash(&mut h);
        self.webhook.hash(&mut h);
        before.hash(&mut h);
        after.hash(&mut h);
        Some((before, after, h.finish()))
    }
}

/// One recorded review on the fast path.
#[derive(Debug)]
struct ExactEntry {
    phase: WebhookKind,
    configuration: String,
    webhook: String,
    /// The compact review without its uid value: the text before it, then the text after it.
    text: Vec<u8>,
    split: usize,
    queue: usize,
}

impl ExactEntry {
    /// Whether this is the entry of `call`, whose review is `before` and `after` its uid.
    fn is(&self, call: &ExactCall<'_>, before: &[u8], after: &[u8]) -> bool {
        self.phase == call.phase
            && short_eq(&self.webhook, call.webhook)
            && short_eq(&self.configuration, call.configuration)
            && self.text[..self.split] == *before
            && self.text[self.split..] == *after
    }
}

/// Recorded reviews by their exact bytes with the `request.uid` value left out, looked up
/// without copying the call's body.
#[derive(Debug, Default)]
struct ExactIndex {
    /// By [`ExactCall::key`]'s digest, folded again ([`Folded`]): an Fx digest of texts that
    /// differ in a few bytes varies mostly in its high bits, which the table's probing does not
    /// use.
    by_digest: HashMap<u64, Vec<ExactEntry>, BuildHasherDefault<Folded>>,
}

/// Hashes a digest by folding the high half of its product with a large odd constant into
/// the low half: every input bit reaches the bits the table uses, for a multiplication rather
/// than a keyed hash of eight bytes.
#[derive(Default)]
struct Folded(u64);

impl std::hash::Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(n ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl ExactIndex {
    fn insert(&mut self, call: ExactCall<'_>, queue: usize) {
        let Some((before, after, digest)) = call.key() else {
            return;
        };
        let entries = self.by_digest.entry(digest).or_default();
        if let Some(e) = entries.iter_mut().find(|e| e.is(&call, before, after)) {
            e.queue = queue;
            return;
        }
        entries.push(ExactEntry {
            phase: call.phase,
            configuration: call.configuration.to_string(),
            webhook: call.webhook.to_string(),
            text: [before, after].concat(),
            split: before.len(),
            queue,
        });
    }

    fn get(&self, call: ExactCall<'_>) -> Option<usize> {
        let (before, after, digest) = call.key()?;
        self.by_digest
            .get(&digest)?
            .iter()
            .find(|e| e.is(&call, before, after))
            .map(|e| e.queue)
    }
}

/// The review before and after the value of its first `"uid":"<uid>"` member (the member's
/// name stays in the first part), or None when the member is not spelled that way (the
/// canonical match still applies then).
fn around_uid<'b>(body: &'b [u8], uid: &str) -> Option<(&'b [u8], &'b [u8])> {
    const NAME: &[u8] = b"\"uid\":";
    let quoted;
    let value: &[u8] = if uid.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        // Spelled as is between quotes; checked below without building the text.
        uid.as_bytes()
    } else {
        quoted = Value::from(uid).to_string();
        quoted.as_bytes()
    };
    let plain = value.len() == uid.len();
    let width = NAME.len() + value.len() + if plain { 2 } else { 0 };
    let mut from = 0;
    while let Some(i) = body
        .get(from..)?
        .windows(NAME.len())
        .position(|w| w == NAME)
    {
        let at = from + i;
        let rest = body.get(at + NAME.len()..)?;
        let found = if plain {
            rest.first() == Some(&b'"')
                && rest.get(1..=value.len()) == Some(value)
                && rest.get(value.len() + 1) == Some(&b'"')
        } else {
            rest.starts_with(value)
        };
        if found {
            return Some((&body[..at + NAME.len()], &body[at + width..]));
        }
        from = at + 1;
    }
    None
}

/// JSON text without the whitespace outside strings (undoes the recorder's indentation).
fn compact_json(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
            if b == b'"' {
                in_string = true;
            }
            out.push(b);
        }
    }
    out
}

impl Replier for RecordedReplies {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        std::future::ready(calls.iter().map(|c| self.answer(c)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_review_is_found_by_its_bytes_though_the_call_ends_with_a_newline() {
        let sent = b"{\"request\":{\"uid\":\"u-1\",\"a\":\"x\"}}\n";
        let recorded = compact_json(&indent_json(sent));
        let mut index = ExactIndex::default();
        let call = |body| ExactCall {
            phase: WebhookKind::Mutating,
            configuration: "c",
            webhook: "w",
            body,
            request_uid: "u-1",
        };
        index.insert(call(&recorded), 7);
        assert_eq!(index.get(call(sent)), Some(7));
        assert_eq!(index.get(call(&recorded)), Some(7));
        assert_eq!(
            index.get(call(b"{\"request\":{\"uid\":\"u-1\",\"a\":\"y\"}}\n")),
            None
        );
    }

    #[test]
    fn compacting_undoes_indenting_and_the_uid_value_is_emptied() {
        let text = br#"{"request":{"uid":"u-1","a":"x \" y","b":[1, 2]}}"#;
        assert_eq!(
            compact_json(&indent_json(text)),
            br#"{"request":{"uid":"u-1","a":"x \" y","b":[1,2]}}"#
        );
        let compact = compact_json(text);
        let (before, after) = around_uid(&compact, "u-1").unwrap();
        assert_eq!(
            [before, b"\"\"", after].concat(),
            br#"{"request":{"uid":"","a":"x \" y","b":[1,2]}}"#
        );
        assert_eq!(around_uid(text, "u-2"), None);
    }

    #[test]
    fn reviews_that_differ_by_a_few_bytes_get_their_own_digest() {
        let mut index = ExactIndex::default();
        for i in 0..2000 {
            let body = format!(
                r#"{{"request":{{"uid":"u-{i}","namespace":"team-{}","object":{{"metadata":{{"name":"settings-{i}"}},"data":{{"replicas":"{}"}}}},"dryRun":false}}}}"#,
                i % 10,
                i % 7
            );
            let call = ExactCall {
                phase: WebhookKind::Mutating,
                configuration: "labels",
                webhook: "team.labels.example.com",
                body: body.as_bytes(),
                request_uid: &format!("u-{i}"),
            };
            index.insert(call, i);
            assert_eq!(index.get(call), Some(i));
        }
        let largest = index.by_digest.values().map(Vec::len).max();
        assert_eq!(index.by_digest.len(), 2000, "largest bucket {largest:?}");
    }

    #[test]
    fn the_uid_value_is_found_only_where_spelled_whole() {
        let text = br#"{"uid":"u-10","request":{"uid":"u-1","q":"\"uid\":\"u-1\""}}"#;
        let (before, after) = around_uid(text, "u-1").unwrap();
        assert_eq!(before, br#"{"uid":"u-10","request":{"uid":"#);
        assert_eq!(after, br#","q":"\"uid\":\"u-1\""}}"#);
        let escaped = br#"{"request":{"uid":"a\"b"}}"#;
        let (before, after) = around_uid(escaped, "a\"b").unwrap();
        assert_eq!((before, after), (&br#"{"request":{"uid":"#[..], &b"}}"[..]));
    }

    #[test]
    fn indenting_keeps_the_text_but_whitespace() {
        let text = br#"{"b":[1,{"x":"a, {b}: \"c\""}],"a":{},"c":[ ],"d":null}"#;
        let out = indent_json(text);
        let v: Value = crate::json::from_slice(&out).unwrap();
        assert_eq!(v, crate::json::from_slice::<Value>(text).unwrap());
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("{\n  \"b\": [\n    1,\n    {\n      \"x\": \"a, {b}: \\\"c\\\"\""));
        assert!(s.contains("\"a\": {},\n  \"c\": [],"));
        assert_eq!(indent_json(b"not json"), b"not json");
    }

    #[test]
    fn canonical_content_ignores_uid_order_and_spacing() {
        let a: Value =
            crate::json::from_str(r#"{"request":{"uid":"1","b":1,"a":[{"y":1,"x":2}]}}"#).unwrap();
        let b: Value = crate::json::from_str(
            r#"{ "request" : { "a" : [ { "x" : 2 , "y" : 1 } ], "b" : 1, "uid" : "2" } }"#,
        )
        .unwrap();
        assert_eq!(content_key(a), content_key(b.clone()));
        assert_eq!(content_key(b), r#"{"request":{"a":[{"x":2,"y":1}],"b":1}}"#);
    }

    #[test]
    fn echoed_uid_is_found_where_a_decoder_finds_it() {
        let body = br#"{"response":{"uid":"old","uid":"u\u0031"}, "x":1}"#;
        let span = echoed_uid_span(body, "u1").unwrap();
        assert_eq!(&body[span], br#""u\u0031""#);
        assert_eq!(echoed_uid_span(body, "old"), None);
        assert_eq!(echoed_uid_span(b"[1]", "u1"), None);
    }

    #[test]
    fn folder_names_are_safe() {
        assert_eq!(sanitize("a/b c:ü.x-y_z"), "a_b_c__.x-y_z");
        assert_eq!(sanitize(""), "_");
        assert_eq!(sanitize(&"x".repeat(100)).len(), NAME_LIMIT);
    }
}

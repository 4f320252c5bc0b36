//! Saving the live stream as an audit log that `hookscope replay` and the console read back.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{AuditObjectRef, RawEvent};
use crate::replay::report::{redact_patch, redact_secret};

/// Writing a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be created or written.
    #[error("capture {path}: {source}")]
    Io {
        /// The capture file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// How to capture.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Keep Secret `data` and `stringData` values (`--show-secrets`); redacted by default.
    pub show_secrets: bool,
    /// Add to an existing file instead of replacing it.
    pub append: bool,
    /// How often the file is synced to disk (each line is written to the file as it comes, so a
    /// crash of the process loses at most a partial last line). Default 1 s.
    pub sync_interval: Duration,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            show_secrets: false,
            append: false,
            sync_interval: Duration::from_secs(1),
        }
    }
}

/// Writes raw events as JSON lines of `audit.k8s.io/v1` Events: each as received, with `kind` and
/// `apiVersion` added where the sender left them out (the items of a webhook `EventList`),
/// line breaks inside the JSON text turned into spaces, and Secret values redacted unless
/// [`CaptureOptions::show_secrets`].
#[derive(Debug)]
pub struct CaptureWriter {
    file: File,
    path: PathBuf,
    options: CaptureOptions,
    line: Vec<u8>,
    last_sync: Instant,
    written: u64,
}

impl CaptureWriter {
    /// Creates (or, with [`CaptureOptions::append`], opens for appending) the capture file.
    pub fn create(path: &Path, options: CaptureOptions) -> Result<Self, CaptureError> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .append(options.append)
            .truncate(!options.append)
            .open(path)
            .map_err(|source| CaptureError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(CaptureWriter {
            file,
            path: path.to_path_buf(),
            options,
            line: Vec::new(),
            last_sync: Instant::now(),
            written: 0,
        })
    }

    /// Appends one event as one line (written to the file at once), syncing when the interval
    /// has passed. An event that is not a JSON object is written as received.
    pub fn write(&mut self, raw: &RawEvent) -> Result<(), CaptureError> {
        self.line.clear();
        capture_line(&raw.text, self.options.show_secrets, &mut self.line);
        if self.line.is_empty() {
            return Ok(());
        }
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .map_err(|source| self.error(source))?;
        self.written += 1;
        if self.last_sync.elapsed() >= self.options.sync_interval {
            self.sync()?;
        }
        Ok(())
    }

    /// Syncs what was written to disk.
    pub fn sync(&mut self) -> Result<(), CaptureError> {
        self.last_sync = Instant::now();
        self.file.sync_data().map_err(|source| self.error(source))
    }

    /// Events written so far.
    pub fn events_written(&self) -> u64 {
        self.written
    }

    /// The capture file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Syncs and closes the file; returns the number of events written.
    pub fn finish(mut self) -> Result<u64, CaptureError> {
        self.sync()?;
        Ok(self.written)
    }

    fn error(&self, source: io::Error) -> CaptureError {
        CaptureError::Io {
            path: self.path.clone(),
            source,
        }
    }
}

/// What the capture needs to know of an event.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head<'a> {
    #[serde(borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    api_version: Option<&'a RawValue>,
    object_ref: Option<AuditObjectRef>,
}

/// The capture line of one event (without its newline) into `out`; empty for a blank event.
fn capture_line(text: &[u8], show_secrets: bool, out: &mut Vec<u8>) {
    let text = text.trim_ascii();
    if text.is_empty() {
        return;
    }
    let Ok(head) = crate::json::from_slice::<Head<'_>>(text) else {
        return push_one_line(text, out);
    };
    let secret = head
        .object_ref
        .as_ref()
        .is_some_and(|o| o.api_group.is_empty() && o.resource == "secrets");
    if secret
        && !show_secrets
        // The event wraps the request body one level down.
        && let Ok(Value::Object(mut event)) = crate::json::from_slice_within::<Value>(text, 1)
    {
        for field in ["requestObject", "responseObject"] {
            if let Some(object) = event.get_mut(field) {
                redact_object(object);
            }
        }
        if let Some(Value::Object(annotations)) = event.get_mut("annotations") {
            for (key, value) in annotations.iter_mut() {
                if key.starts_with("patch.webhook.admission.k8s.io/")
                    && let Value::String(s) = value
                {
                    redact_patch_annotation(s);
                }
            }
        }
        event
            .entry("kind")
            .or_insert_with(|| Value::String("Event".into()));
        event
            .entry("apiVersion")
            .or_insert_with(|| Value::String("audit.k8s.io/v1".into()));
        // Serializing a map of JSON values cannot fail.
        let _ = serde_json::to_writer(&mut *out, &event);
        return;
    }
    match (head.kind, head.api_version) {
        (None, None) => {
            out.extend_from_slice(br#"{"kind":"Event","apiVersion":"audit.k8s.io/v1""#);
            let rest = &text[1..];
            if rest.trim_ascii_start().first() != Some(&b'}') {
                out.push(b',');
            }
            push_one_line(rest, out);
        }
        (None, Some(_)) => {
            out.extend_from_slice(br#"{"kind":"Event","#);
            push_one_line(&text[1..], out);
        }
        (Some(_), None) => {
            out.extend_from_slice(br#"{"apiVersion":"audit.k8s.io/v1","#);
            push_one_line(&text[1..], out);
        }
        (Some(_), Some(_)) => push_one_line(text, out),
    }
}

/// JSON text on one line: outside strings a line break is whitespace, and inside a valid string
/// there is none, so each becomes a space.
fn push_one_line(text: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(text);
    for b in &mut out[start..] {
        if matches!(*b, b'\n' | b'\r') {
            *b = b' ';
        }
    }
}

/// Redacts a Secret, a list of them, or a patch written to one.
fn redact_object(object: &mut Value) {
    match object {
        Value::Array(_) => redact_patch(object),
        Value::Object(m) => {
            if let Some(Value::Array(items)) = m.get_mut("items") {
                items.iter_mut().for_each(redact_secret);
            }
            redact_secret(object);
        }
        _ => {}
    }
}

/// Redacts the patch inside a `patch.webhook.admission.k8s.io` annotation value.
fn redact_patch_annotation(value: &mut String) {
    let Ok(Value::Object(mut v)) = crate::json::from_str::<Value>(value) else {
        return;
    };
    if let Some(patch) = v.get_mut("patch") {
        redact_patch(patch);
    }
    if let Ok(text) = serde_json::to_string(&v) {
        *value = text;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str, show: bool) -> String {
        let mut out = Vec::new();
        capture_line(text.as_bytes(), show, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn type_meta_added_where_missing() {
        assert_eq!(
            line(r#"{"auditID":"a"}"#, false),
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a"}"#
        );
        assert_eq!(
            line("{\n}", false),
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1" }"#
        );
        let whole = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a"}"#;
        assert_eq!(line(whole, false), whole);
    }

    #[test]
    fn secrets_redacted_unless_shown() {
        let ev = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","objectRef":{"resource":"secrets"},"requestObject":{"kind":"Secret","data":{"k":"c2VjcmV0"}},"responseObject":{"kind":"SecretList","items":[{"stringData":{"a":"b"}}]}}"#;
        let redacted = line(ev, false);
        assert!(!redacted.contains("c2VjcmV0") && !redacted.contains(r#""a":"b""#));
        assert_eq!(line(ev, true), ev);
    }
}

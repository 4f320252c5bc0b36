//! Unsaved buffers kept on disk so that nothing typed is lost when the console (or the terminal)
//! dies: one JSON file per buffer in `$XDG_STATE_HOME/hookscope/recovery` (else
//! `~/.local/state/hookscope/recovery`), replaced atomically on every write, listed at start and
//! discarded once the buffer is saved or the user lets it go.
//!
//! Writes are not flushed to disk (the console calls [`RecoveryStore::write`] often): an entry
//! survives any crash or kill of the process; after a power loss the operating system may have
//! kept the previous entry instead.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::save::replace_file;

/// Which buffer an entry belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "id")]
pub enum BufferKey {
    /// A configuration file, by path (made absolute when the entry is written).
    File(PathBuf),
    /// A configuration embedded in hookscope (the demo's), by name.
    Embedded(String),
    /// A buffer not yet saved anywhere, by an identifier the console chooses.
    New(String),
    /// An object of a live cluster, as `RESOURCE/NAME`
    /// (`mutatingwebhookconfigurations/sidecar-injector`).
    Cluster(String),
}

impl fmt::Display for BufferKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferKey::File(p) => write!(f, "{}", p.display()),
            BufferKey::Embedded(name) => write!(f, "embedded configuration {name}"),
            BufferKey::New(id) => write!(f, "new buffer {id}"),
            BufferKey::Cluster(id) => write!(f, "cluster object {id}"),
        }
    }
}

impl BufferKey {
    /// The key with a file path made absolute (relative to the current directory), so that the
    /// same file is the same key wherever the console is started from.
    fn normalized(&self) -> BufferKey {
        match self {
            BufferKey::File(p) if p.is_relative() => {
                BufferKey::File(std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            }
            other => other.clone(),
        }
    }

    /// The entry's file name: a stable 64-bit FNV-1a hash of the key.
    fn file_name(&self) -> String {
        let h = content_hash(&serde_json::to_string(self).unwrap_or_default());
        let kind = match self {
            BufferKey::File(_) => "file",
            BufferKey::Embedded(_) => "embedded",
            BufferKey::New(_) => "new",
            BufferKey::Cluster(_) => "cluster",
        };
        format!("{kind}-{h:016x}.json")
    }
}

/// A stable 64-bit FNV-1a hash of a text: which version of a file an entry's edits started from.
pub fn content_hash(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A recovery store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error("no place for recovery files: neither XDG_STATE_HOME nor HOME is set")]
    NoStateDir,
    /// A file or directory operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The step.
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// An entry is not a recovery file of this version.
    #[error("{}: not a readable recovery entry: {message}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> RecoveryError {
    let path = path.to_path_buf();
    move |source| RecoveryError::Io {
        path,
        action,
        source,
    }
}

/// How long an entry is kept: older ones are pruned when the console starts (an unsaved edit
/// untouched for two weeks is not coming back).
pub const MAX_AGE: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// The on-disk form of an entry.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    version: u32,
    key: BufferKey,
    saved_at_ms: u64,
    pid: u32,
    text: String,
    /// [`content_hash`] of the text the edits started from (absent in older entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_hash: Option<u64>,
}

const RECORD_VERSION: u32 = 1;

/// One unsaved buffer found in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryEntry {
    /// Which buffer.
    pub key: BufferKey,
    /// The text as last written.
    pub text: String,
    /// When it was written.
    pub saved_at: SystemTime,
    /// The configuration file the buffer edits, for [`BufferKey::File`].
    pub original: Option<PathBuf>,
    /// The process that wrote it (another console may still be running).
    pub pid: u32,
    /// [`content_hash`] of the text the edits started from, when recorded.
    pub base_hash: Option<u64>,
    /// The recovery file.
    pub file: PathBuf,
}

/// A directory of recovery entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryStore {
    dir: PathBuf,
}

impl RecoveryStore {
    /// The default directory: `$XDG_STATE_HOME/hookscope/recovery`, else
    /// `$HOME/.local/state/hookscope/recovery`.
    pub fn default_dir() -> Result<PathBuf, RecoveryError> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let state = match (var("XDG_STATE_HOME"), var("HOME")) {
            (Some(s), _) => PathBuf::from(s),
            (None, Some(h)) => PathBuf::from(h).join(".local").join("state"),
            (None, None) => return Err(RecoveryError::NoStateDir),
        };
        Ok(state.join("hookscope").join("recovery"))
    }

    /// The store at the default directory.
    pub fn open_default() -> Result<RecoveryStore, RecoveryError> {
        Ok(RecoveryStore::new(RecoveryStore::default_dir()?))
    }

    /// A store in `dir` (created on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> RecoveryStore {
        RecoveryStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keeps `text` as the unsaved content of `key`, replacing what was kept before. Returns the
    /// entry's file.
    pub fn write(&self, key: &BufferKey, text: &str) -> Result<PathBuf, RecoveryError> {
        self.write_from(key, text, None)
    }

    /// As [`RecoveryStore::write`], recording which text the edits started from (`base`: the
    /// file as loaded or saved), so that they are offered only against that same text.
    pub fn write_from(
        &self,
        key: &BufferKey,
        text: &str,
        base: Option<&str>,
    ) -> Result<PathBuf, RecoveryError> {
        fs::create_dir_all(&self.dir).map_err(io_error("creating", &self.dir))?;
        let key = key.normalized();
        let path = self.dir.join(key.file_name());
        let saved_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let record = Record {
            version: RECORD_VERSION,
            key,
            saved_at_ms,
            pid: std::process::id(),
            text: text.to_string(),
            base_hash: base.map(content_hash),
        };
        let bytes = serde_json::to_vec(&record).map_err(|e| RecoveryError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        replace_file(&path, &bytes, None, false).map_err(|e| RecoveryError::Io {
            path: e.path,
            action: e.action,
            source: e.source,
        })?;
        Ok(path)
    }

    /// Every entry, oldest first, and the files that could not be read. A missing directory is
    /// an empty store.
    pub fn list(&self) -> Result<(Vec<RecoveryEntry>, Vec<RecoveryError>), RecoveryError> {
        let dir = match fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
            Err(e) => return Err(io_error("reading", &self.dir)(e)),
        };
        let mut entries = Vec::new();
        let mut problems = Vec::new();
        for item in dir {
            let path = item.map_err(io_error("reading", &self.dir))?.path();
            // Temporary files of a write in progress (or interrupted) start with a dot.
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            match read_entry(&path) {
                Ok(e) => entries.push(e),
                Err(e) => problems.push(e),
            }
        }
        entries.sort_by(|a, b| (a.saved_at, &a.file).cmp(&(b.saved_at, &b.file)));
        Ok((entries, problems))
    }

    /// Removes the entries last written more than `max_age` before `now`, and the files of the
    /// directory that are not readable entries (or a write's leftover temporary files) whose
    /// modification time is that old. Returns the files removed. A missing directory has
    /// nothing to prune.
    pub fn prune_older_than(
        &self,
        max_age: Duration,
        now: SystemTime,
    ) -> Result<Vec<PathBuf>, RecoveryError> {
        let Some(limit) = now.checked_sub(max_age) else {
            return Ok(Vec::new());
        };
        let dir = match fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("reading", &self.dir)(e)),
        };
        let mut removed = Vec::new();
        for item in dir {
            let item = item.map_err(io_error("reading", &self.dir))?;
            let path = item.path();
            if !item.file_type().is_ok_and(|t| t.is_file()) {
                continue;
            }
            let written = match read_entry(&path) {
                Ok(e) => e.saved_at,
                Err(_) => match item.metadata().and_then(|m| m.modified()) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
            };
            if written < limit {
                fs::remove_file(&path).map_err(io_error("removing", &path))?;
                removed.push(path);
            }
        }
        removed.sort();
        Ok(removed)
    }

    /// The entry of one buffer, if any.
    pub fn get(&self, key: &BufferKey) -> Result<Option<RecoveryEntry>, RecoveryError> {
        let path = self.dir.join(key.normalized().file_name());
        match read_entry(&path) {
            Err(RecoveryError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(None)
            }
            other => other.map(Some),
        }
    }

    /// Forgets the entry of `key` (after a save, or when the user declines to recover it).
    /// Returns whether there was one.
    pub fn discard(&self, key: &BufferKey) -> Result<bool, RecoveryError> {
        let path = self.dir.join(key.normalized().file_name());
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("removing", &path)(e)),
        }
    }
}

fn read_entry(path: &Path) -> Result<RecoveryEntry, RecoveryError> {
    let bytes = fs::read(path).map_err(io_error("reading", path))?;
    let corrupt = |message: String| RecoveryError::Corrupt {
        path: path.to_path_buf(),
        message,
    };
    let record: Record = crate::json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if record.version != RECORD_VERSION {
        return Err(corrupt(format!("version {}", record.version)));
    }
    let original = match &record.key {
        BufferKey::File(p) => Some(p.clone()),
        _ => None,
    };
    Ok(RecoveryEntry {
        key: record.key,
        text: record.text,
        saved_at: UNIX_EPOCH + Duration::from_millis(record.saved_at_ms),
        original,
        pid: record.pid,
        base_hash: record.base_hash,
        file: path.to_path_buf(),
    })
}

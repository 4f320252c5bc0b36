//! Saving an edited configuration without ever leaving a half-written file: a temporary file in
//! the same directory, flushed to disk, renamed over the original; the previous content is kept
//! next to it as `<file>.bak`.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::hash::ContentHash;

/// A failed save, naming the file and the step.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct SaveError {
    /// The file the step concerned.
    pub path: PathBuf,
    /// The step, e.g. `writing`, `renaming over`.
    pub action: &'static str,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

impl SaveError {
    fn new(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> SaveError {
        let path = path.to_path_buf();
        move |source| SaveError {
            path,
            action,
            source,
        }
    }
}

/// What a save did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The file written (a symbolic link's target when the path named a link).
    pub path: PathBuf,
    /// Where the previous content was kept (None: the file did not exist before).
    pub backup: Option<PathBuf>,
    /// Bytes written.
    pub bytes: u64,
    /// Hash of the content written, to recognise this write when a file watcher reports it.
    pub hash: ContentHash,
}

/// The backup of `path`: `<file>.bak` in the same directory.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

/// A temporary name next to `path`, unique within this process.
fn temporary_path(path: &Path, what: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{what}.{}.{n}.tmp", std::process::id()))
}

/// Writes `bytes` to a new file `path` (which must not exist), with `permissions` when given,
/// flushed to disk when `sync` is set.
pub(crate) fn write_new(
    path: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
    sync: bool,
) -> io::Result<()> {
    let mut f: File = OpenOptions::new().write(true).create_new(true).open(path)?;
    let result = (|| {
        f.write_all(bytes)?;
        if let Some(p) = permissions {
            f.set_permissions(p)?;
        }
        if sync {
            f.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(path);
    }
    result
}

/// Writes `bytes` to a temporary file next to `path` and renames it over `path`.
pub(crate) fn replace_file(
    path: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
    sync: bool,
) -> Result<(), SaveError> {
    let tmp = temporary_path(path, "new");
    write_new(&tmp, bytes, permissions, sync).map_err(SaveError::new("writing", &tmp))?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(SaveError::new("renaming over", path)(e));
    }
    if sync && let Some(dir) = path.parent() {
        // The rename is durable once the directory is flushed; where directories cannot be
        // opened for that, the rename has still happened.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Saves `text` to `path` atomically: readers see the old content or the new, never a mix. The
/// previous content (when the file existed) is kept as [`backup_path`], the file keeps its
/// permissions, and a symbolic link is followed (its target is replaced, the link stays).
pub fn save_atomic(path: &Path, text: &str) -> Result<Saved, SaveError> {
    let target = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(path).map_err(SaveError::new("resolving the link", path))?
        }
        _ => path.to_path_buf(),
    };
    if target.file_name().is_none() {
        return Err(SaveError::new("saving", path)(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        )));
    }
    let previous = match fs::read(&target) {
        Ok(bytes) => {
            let meta = fs::metadata(&target).map_err(SaveError::new("reading", &target))?;
            Some((bytes, meta.permissions()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(SaveError::new("reading", &target)(e)),
    };
    let backup = match &previous {
        Some((old, perms)) => {
            let backup = backup_path(&target);
            replace_file(&backup, old, Some(perms.clone()), true)?;
            Some(backup)
        }
        None => None,
    };
    let permissions = previous.map(|(_, p)| p);
    replace_file(&target, text.as_bytes(), permissions, true)?;
    Ok(Saved {
        path: target,
        backup,
        bytes: text.len() as u64,
        hash: ContentHash::of(text.as_bytes()),
    })
}

//! The IO the console's editing needs, done off the update path: saving atomically with a
//! backup, recovery copies of unsaved text, the user's editor, and watching files.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use super::app::{Msg, RecoveredText};

/// Writes `text` to `path` atomically: a temporary file in the same folder, flushed to disk,
/// renamed over the original; the previous content is kept as `<file>.bak`. Returns the backup
/// path when there was a previous version.
pub fn save_atomic(path: &Path, text: &str) -> Result<Option<PathBuf>, String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?
        .to_string_lossy()
        .to_string();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!(".{name}.hookscope-{}", std::process::id()));
    let fail = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let previous = std::fs::metadata(path).ok();
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| fail("cannot write", e))?;
        let written = f
            .write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| fail("cannot write", e));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(m) = &previous {
            let _ = std::fs::set_permissions(&tmp, m.permissions());
        }
    }
    let backup = match previous {
        Some(_) => {
            let b = dir.join(format!("{name}.bak"));
            std::fs::copy(path, &b).map_err(|e| fail("cannot keep the previous version", e))?;
            Some(b)
        }
        None => None,
    };
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail("cannot replace", e)
    })?;
    Ok(backup)
}

/// Where unsaved text is kept: `$XDG_STATE_HOME/hookscope/recovery`, else
/// `$HOME/.local/state/hookscope/recovery`.
pub fn recovery_dir() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("hookscope").join("recovery"))
}

fn recovery_file(dir: &Path, key: &str) -> PathBuf {
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // The key itself is the file's first line; the name only needs to be unique and readable.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    dir.join(format!(
        "{}-{hash:016x}.recover",
        &safe[safe.len().saturating_sub(60)..]
    ))
}

/// Keeps unsaved text: written to a temporary file and renamed, so a crash leaves either the
/// previous copy or this one.
pub fn write_recovery(dir: &Path, key: &str, text: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let file = recovery_file(dir, key);
    let tmp = file.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(key.as_bytes())?;
        f.write_all(b"\n")?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(tmp, file)
}

/// Forgets the recovery copy of a buffer.
pub fn discard_recovery(dir: &Path, key: &str) {
    let _ = std::fs::remove_file(recovery_file(dir, key));
}

/// The recovery copies left by earlier sessions.
pub fn list_recovery(dir: &Path) -> Vec<RecoveredText> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<RecoveredText> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "recover"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| {
            let (key, text) = t.split_once('\n')?;
            Some(RecoveredText {
                key: key.to_string(),
                text: text.to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The editor `kubectl edit` would run: `$KUBE_EDITOR`, then `$EDITOR`, then `vi`.
pub fn editor_command() -> String {
    ["KUBE_EDITOR", "EDITOR"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".into())
}

/// Runs the user's editor on `text` (the terminal must be restored first) and returns what it
/// left. The editor string may carry arguments (`code --wait`), as kubectl allows.
pub fn run_editor(text: &str, name: &str) -> Result<String, String> {
    let dir = std::env::temp_dir();
    let file = dir.join(format!("hookscope-edit-{}-{name}.yaml", std::process::id()));
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    let editor = editor_command();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("hookscope-editor")
        .arg(&file)
        .status();
    let result = match status {
        Ok(s) if s.success() => {
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))
        }
        Ok(s) => Err(format!("{editor} exited with {s}; the edit is not taken")),
        Err(e) => Err(format!("cannot run {editor}: {e}")),
    };
    let _ = std::fs::remove_file(&file);
    result
}

/// Watches files for changes made elsewhere: their folders are watched (editors often save by
/// renaming over), and each change of a watched file sends its new text.
pub struct Watcher {
    inner: Option<notify::RecommendedWatcher>,
    files: std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// A watcher that sends [`Msg::FileChanged`] into `inbox`.
    pub fn new(inbox: mpsc::Sender<Msg>) -> Watcher {
        let files: std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>> = Default::default();
        let watched = std::sync::Arc::clone(&files);
        let inner = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            let Ok(ev) = ev else { return };
            if matches!(ev.kind, notify::EventKind::Access(_)) {
                return;
            }
            let files = watched.lock().map(|f| f.clone()).unwrap_or_default();
            for p in ev.paths {
                let Some(f) = files.iter().find(|f| same_file(f, &p)) else {
                    continue;
                };
                let text = std::fs::read_to_string(f).map_err(|e| e.to_string());
                // The console reads its inbox all the time; a full inbox drops the duplicate.
                let _ = inbox.try_send(Msg::FileChanged {
                    path: f.clone(),
                    text,
                });
            }
        })
        .ok();
        Watcher { inner, files }
    }

    /// Adds files to watch.
    pub fn watch(&mut self, paths: &[PathBuf]) {
        use notify::Watcher as _;
        let Some(w) = self.inner.as_mut() else {
            return;
        };
        let Ok(mut files) = self.files.lock() else {
            return;
        };
        for p in paths {
            if files.contains(p) {
                continue;
            }
            files.push(p.clone());
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let _ = w.watch(&dir, notify::RecursiveMode::NonRecursive);
        }
    }
}

fn same_file(watched: &Path, event: &Path) -> bool {
    if watched == event {
        return true;
    }
    match (watched.canonicalize(), event.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => watched.file_name() == event.file_name() && event.ends_with(watched),
    }
}

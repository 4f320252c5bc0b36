//! The IO the console's editing needs, done off the update path, over the library's
//! [`crate::edit`] pieces: saving atomically with a backup, recovery copies of unsaved text, the
//! user's editor, and watching files.

use std::path::Path;

use tokio::sync::mpsc;

use super::app::{Msg, RecoveredText};
use crate::edit::{ConfigWatcher, DEFAULT_DEBOUNCE, FileContent, RecoveryStore};

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

/// The recovery copies an earlier session left in `store`, once those older than
/// [`RECOVERY_MAX_AGE`](crate::edit::RECOVERY_MAX_AGE) (14 days) are pruned.
pub fn list_recovery(store: &RecoveryStore) -> Vec<RecoveredText> {
    // A store that cannot be pruned is still read: an old copy offered beats none.
    let _ = store.prune_older_than(crate::edit::RECOVERY_MAX_AGE, std::time::SystemTime::now());
    match store.list() {
        Ok((entries, _unreadable)) => entries
            .into_iter()
            .map(|e| RecoveredText {
                key: e.key,
                text: e.text,
                base_hash: e.base_hash,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A file watcher whose changes arrive as [`Msg::FileChanged`] in `inbox`; None when the
/// platform's watcher cannot start (editing still works, without the notice).
pub fn watcher(inbox: mpsc::Sender<Msg>) -> Option<ConfigWatcher> {
    let (tx, mut rx) = mpsc::channel(16);
    let w = ConfigWatcher::new(tx, DEFAULT_DEBOUNCE).ok()?;
    tokio::spawn(async move {
        while let Some(change) = rx.recv().await {
            let text = match change.content {
                FileContent::Text(t) => Ok(t),
                FileContent::Removed => Err("the file was removed".to_string()),
                FileContent::Unreadable(m) => Err(m),
            };
            let msg = Msg::FileChanged {
                path: change.path,
                text,
            };
            if inbox.send(msg).await.is_err() {
                return;
            }
        }
    });
    Some(w)
}

/// Watches a file the console loaded as `text`.
pub fn watch(watcher: &mut Option<ConfigWatcher>, path: &Path, text: Option<&str>) {
    if let Some(w) = watcher.as_mut() {
        let _ = w.watch(path, text);
    }
}

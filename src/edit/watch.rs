//! Noticing changes made to loaded configuration files outside the console.
//!
//! The watcher watches each file's directory (editors often save by writing a new file and
//! renaming it over the old one, which a watch on the file itself would miss), waits until a file
//! has been quiet for the debounce time, reads it, and sends a [`FileChange`] over a bounded
//! channel, unless the content is what was last loaded, seen or saved by the console itself.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, mpsc as std_mpsc};
use std::time::{Duration, Instant};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::hash::ContentHash;
use super::save::{SaveError, Saved, save_atomic};

/// How long a file must be quiet before it is read.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// What a watched file now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileContent {
    /// Its new text.
    Text(String),
    /// It no longer exists.
    Removed,
    /// It could not be read (the message names the file).
    Unreadable(String),
}

/// A watched file changed outside the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// The file, as given to [`ConfigWatcher::watch`].
    pub path: PathBuf,
    /// What it holds now.
    pub content: FileContent,
}

/// Watching could not start or change.
#[derive(Debug, thiserror::Error)]
#[error("watching {}: {source}", path.display())]
pub struct WatchError {
    /// The file or directory.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: notify::Error,
}

/// A watched file: the name it was given by, and the content last known.
struct Watched {
    given: PathBuf,
    /// None: the file did not exist when last seen.
    known: Option<ContentHash>,
}

#[derive(Default)]
struct Shared {
    /// By resolved path (canonical directory joined with the file name).
    files: HashMap<PathBuf, Watched>,
}

type SharedState = Arc<Mutex<Shared>>;

fn lock(s: &SharedState) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Watches configuration files; dropping it stops watching.
pub struct ConfigWatcher {
    watcher: RecommendedWatcher,
    shared: SharedState,
    /// Directories watched, with how many watched files each holds.
    dirs: HashMap<PathBuf, usize>,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher")
            .field("dirs", &self.dirs)
            .finish_non_exhaustive()
    }
}

/// The directory (canonical) and the resolved path of a file.
fn resolve(path: &Path) -> io::Result<(PathBuf, PathBuf)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = parent.canonicalize()?;
    let file = dir.join(name);
    Ok((dir, file))
}

impl ConfigWatcher {
    /// Starts a watcher that sends changes to `tx`, once a file has been quiet for `debounce`.
    pub fn new(tx: mpsc::Sender<FileChange>, debounce: Duration) -> Result<Self, WatchError> {
        let shared: SharedState = Arc::default();
        let (raw_tx, raw_rx) = std_mpsc::channel::<PathBuf>();
        let filter = Arc::clone(&shared);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if matches!(event.kind, EventKind::Access(_)) {
                return;
            }
            let state = lock(&filter);
            for p in event.paths {
                if state.files.contains_key(&p) {
                    let _ = raw_tx.send(p);
                }
            }
        })
        .map_err(|source| WatchError {
            path: PathBuf::new(),
            source,
        })?;
        let state = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("config-watcher".into())
            .spawn(move || debounce_loop(raw_rx, state, tx, debounce))
            .map_err(|e| WatchError {
                path: PathBuf::new(),
                source: notify::Error::io(e),
            })?;
        Ok(Self {
            watcher,
            shared,
            dirs: HashMap::new(),
        })
    }

    /// Watches `path`, whose content the console has just loaded as `loaded` (None: the file
    /// does not exist yet).
    pub fn watch(&mut self, path: &Path, loaded: Option<&str>) -> Result<(), WatchError> {
        let err = |source| WatchError {
            path: path.to_path_buf(),
            source,
        };
        let (dir, file) = resolve(path).map_err(|e| err(notify::Error::io(e)))?;
        if !self.dirs.contains_key(&dir) {
            self.watcher
                .watch(&dir, RecursiveMode::NonRecursive)
                .map_err(err)?;
        }
        let previous = lock(&self.shared).files.insert(
            file,
            Watched {
                given: path.to_path_buf(),
                known: loaded.map(|t| ContentHash::of(t.as_bytes())),
            },
        );
        if previous.is_none() {
            *self.dirs.entry(dir).or_insert(0) += 1;
        }
        Ok(())
    }

    /// Stops watching `path`.
    pub fn unwatch(&mut self, path: &Path) -> Result<(), WatchError> {
        let err = |source| WatchError {
            path: path.to_path_buf(),
            source,
        };
        let (dir, file) = resolve(path).map_err(|e| err(notify::Error::io(e)))?;
        if lock(&self.shared).files.remove(&file).is_none() {
            return Ok(());
        }
        if let Some(n) = self.dirs.get_mut(&dir) {
            *n -= 1;
            if *n == 0 {
                self.dirs.remove(&dir);
                self.watcher.unwatch(&dir).map_err(err)?;
            }
        }
        Ok(())
    }

    /// Records `text` as the content the console now knows for `path` (it loaded, reloaded or
    /// saved it), so that seeing it on disk is not reported as a change.
    pub fn expect(&self, path: &Path, text: &str) {
        if let Ok((_, file)) = resolve(path)
            && let Some(w) = lock(&self.shared).files.get_mut(&file)
        {
            w.known = Some(ContentHash::of(text.as_bytes()));
        }
    }

    /// Saves `text` to a watched (or any) file with [`save_atomic`], after telling the watcher
    /// to expect it, so the console's own save is never reported as an outside change.
    pub fn save(&self, path: &Path, text: &str) -> Result<Saved, SaveError> {
        let resolved = resolve(path).ok().map(|(_, f)| f);
        let before = resolved
            .as_ref()
            .and_then(|f| lock(&self.shared).files.get(f).map(|w| w.known));
        self.expect(path, text);
        let saved = save_atomic(path, text);
        if saved.is_err()
            && let (Some(f), Some(known)) = (resolved, before)
            && let Some(w) = lock(&self.shared).files.get_mut(&f)
        {
            w.known = known;
        }
        saved
    }
}

/// Collects raw events, and once a file has been quiet for `debounce`, reads and reports it.
fn debounce_loop(
    raw: std_mpsc::Receiver<PathBuf>,
    shared: SharedState,
    tx: mpsc::Sender<FileChange>,
    debounce: Duration,
) {
    let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
    loop {
        let next = pending.values().min().copied();
        let received = match next {
            None => raw
                .recv()
                .map_err(|_| std_mpsc::RecvTimeoutError::Disconnected),
            Some(due) => raw.recv_timeout(due.saturating_duration_since(Instant::now())),
        };
        match received {
            Ok(path) => {
                pending.insert(path, Instant::now() + debounce);
                continue;
            }
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
            Err(std_mpsc::RecvTimeoutError::Timeout) => {}
        }
        let now = Instant::now();
        let due: Vec<PathBuf> = pending
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for path in due {
            pending.remove(&path);
            let Some(change) = read_change(&path, &shared) else {
                continue;
            };
            if tx.blocking_send(change).is_err() {
                return;
            }
        }
    }
}

/// Reads a file that changed; None when it holds what was last known.
fn read_change(path: &Path, shared: &SharedState) -> Option<FileChange> {
    let read = std::fs::read(path);
    let mut state = lock(shared);
    let watched = state.files.get_mut(path)?;
    let (hash, content) = match read {
        Ok(bytes) => {
            let hash = Some(ContentHash::of(&bytes));
            match String::from_utf8(bytes) {
                Ok(text) => (hash, FileContent::Text(text)),
                Err(_) => (
                    hash,
                    FileContent::Unreadable(format!("{}: not UTF-8 text", path.display())),
                ),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => (None, FileContent::Removed),
        Err(e) => (
            watched.known,
            FileContent::Unreadable(format!("{}: {e}", path.display())),
        ),
    };
    if hash == watched.known && !matches!(content, FileContent::Unreadable(_)) {
        return None;
    }
    watched.known = hash;
    Some(FileChange {
        path: watched.given.clone(),
        content,
    })
}

//! Following an audit log file as it grows.
//!
//! The file is polled rather than watched with `notify`: the path has to be checked anyway to tell
//! a rotation (a new file identity at the path, or a size below the read offset), inotify does
//! not see writes made through another mount namespace or on network and FUSE file systems, and
//! while events flow the follower never sleeps (it reads until the end, then polls). The cost is
//! one `stat` per interval when the log is idle, and up to one interval of latency.

use std::fs::{File, Metadata};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc::Sender;

use super::{AuditFeed, Notice, Origin, RawEvent, Rotation};
use crate::replay::IndexUnit;

/// How to follow a file.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// Read the file present at start from its beginning; otherwise from its end (only events
    /// written from then on). A file that appears later, or after a rotation, is always read
    /// from its beginning.
    pub from_start: bool,
    /// How long to wait at the end of the file before looking again. Default 200 ms.
    pub poll_interval: Duration,
    /// Longest line kept; a longer one is skipped with a [`Notice::Skipped`]. Default 64 MiB.
    pub max_line_bytes: usize,
    /// Bytes read at a time. Default 256 KiB.
    pub read_chunk: usize,
}

impl Default for FollowOptions {
    fn default() -> Self {
        FollowOptions {
            from_start: false,
            poll_interval: Duration::from_millis(200),
            max_line_bytes: 64 << 20,
            read_chunk: 256 << 10,
        }
    }
}

/// The identity of a file: a rotation by rename puts another file at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId(u64, u64);

#[cfg(unix)]
fn file_id(m: &Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId(m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &Metadata) -> Option<FileId> {
    None
}

/// The receiver is gone: following ends.
struct Closed;

/// The file being read.
struct Current {
    file: File,
    id: Option<FileId>,
    /// Offset of the next byte read.
    pos: u64,
    /// Lines completed so far in this file (or since following started in it).
    line: usize,
    /// The start of a line whose end has not been read yet.
    partial: Vec<u8>,
    /// Skipping up to the next newline (started mid-line, or a line over the limit).
    skipping: bool,
}

struct Follower {
    path: PathBuf,
    source: String,
    options: FollowOptions,
    tx: Sender<AuditFeed>,
    buf: Vec<u8>,
    /// The last problem reported, so that a persisting one is reported once.
    problem: Option<String>,
    waiting_reported: bool,
}

/// Follows the audit log at `path`, sending each complete JSON line as an [`AuditFeed::Event`]
/// and what happens to the file as [`AuditFeed::Notice`]s, until the receiver is dropped (or the
/// task is aborted).
///
/// A missing file is waited for; rotation by rename (a new file at the path: the old one is read
/// to its end first) and by copytruncate (the file shrinks: read again from 0) are followed;
/// errors (permission denied, a directory) are reported once and retried at every poll. A full
/// channel stops reading until the consumer catches up: nothing is dropped.
///
/// Reading uses blocking file IO in short chunks ([`FollowOptions::read_chunk`]), which on a
/// local file completes without waiting on a device in practice.
pub async fn follow(path: PathBuf, options: FollowOptions, tx: Sender<AuditFeed>) {
    let mut f = Follower {
        source: path.display().to_string(),
        buf: vec![0; options.read_chunk.max(4096)],
        path,
        options,
        tx,
        problem: None,
        waiting_reported: false,
    };
    let _ = f.run().await;
}

impl Follower {
    async fn run(&mut self) -> Result<(), Closed> {
        let mut from_start = self.options.from_start;
        loop {
            let mut cur = match self.open(from_start).await? {
                Some(c) => c,
                None => {
                    // The file present at start was not there: whatever appears is new.
                    from_start = true;
                    self.sleep().await?;
                    continue;
                }
            };
            from_start = true;
            self.read_file(&mut cur).await?;
        }
    }

    async fn sleep(&self) -> Result<(), Closed> {
        if self.tx.is_closed() {
            return Err(Closed);
        }
        tokio::time::sleep(self.options.poll_interval).await;
        Ok(())
    }

    async fn send(&self, msg: AuditFeed) -> Result<(), Closed> {
        self.tx.send(msg).await.map_err(|_| Closed)
    }

    async fn notice(&self, notice: Notice) -> Result<(), Closed> {
        self.send(AuditFeed::Notice(notice)).await
    }

    /// Reports a problem unless it is the one reported last.
    async fn problem(&mut self, message: String) -> Result<(), Closed> {
        if self.problem.as_deref() == Some(message.as_str()) {
            return Ok(());
        }
        self.problem = Some(message.clone());
        self.notice(Notice::Error {
            source: self.source.clone(),
            message,
        })
        .await
    }

    async fn recovered(&mut self) -> Result<(), Closed> {
        if self.problem.take().is_some() {
            self.notice(Notice::Recovered {
                source: self.source.clone(),
            })
            .await?;
        }
        Ok(())
    }

    /// Opens the file at the path, at its start or end; `None` when it cannot be opened now.
    async fn open(&mut self, from_start: bool) -> Result<Option<Current>, Closed> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if !self.waiting_reported {
                    self.waiting_reported = true;
                    self.notice(Notice::WaitingForFile {
                        path: self.path.clone(),
                    })
                    .await?;
                }
                return Ok(None);
            }
            Err(e) => {
                self.problem(e.to_string()).await?;
                return Ok(None);
            }
        };
        if meta.is_dir() {
            self.problem("is a directory, not a log file".into())
                .await?;
            return Ok(None);
        }
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) => {
                self.problem(format!("cannot open: {e}")).await?;
                return Ok(None);
            }
        };
        let meta = file.metadata().unwrap_or(meta);
        let (mut pos, mut skipping) = (0, false);
        if !from_start && meta.len() > 0 {
            match start_at_end(&mut file, meta.len()) {
                Ok(mid_line) => (pos, skipping) = (meta.len(), mid_line),
                Err(e) => {
                    self.problem(format!("cannot read: {e}")).await?;
                    return Ok(None);
                }
            }
        }
        let cur = Current {
            file,
            id: file_id(&meta),
            pos,
            line: 0,
            partial: Vec::new(),
            skipping,
        };
        self.waiting_reported = false;
        self.recovered().await?;
        self.notice(Notice::Following {
            path: self.path.clone(),
            offset: cur.pos,
        })
        .await?;
        Ok(Some(cur))
    }

    /// Reads `cur` until it is rotated away (then returns, to open the new file).
    async fn read_file(&mut self, cur: &mut Current) -> Result<(), Closed> {
        loop {
            if self.read_available(cur).await? {
                continue;
            }
            match std::fs::metadata(&self.path) {
                Ok(m) if file_id(&m).is_some() && file_id(&m) != cur.id => {
                    // Renamed away and replaced: whatever the writer put in the old file before
                    // switching is read first.
                    while self.read_available(cur).await? {}
                    self.skip_partial(cur, "the rotated file ended without a newline")
                        .await?;
                    return self
                        .notice(Notice::Rotated {
                            path: self.path.clone(),
                            rotation: Rotation::Renamed,
                        })
                        .await;
                }
                Ok(m) if m.len() < cur.pos => {
                    self.skip_partial(cur, "the file was truncated before the line ended")
                        .await?;
                    if let Err(e) = cur.file.seek(SeekFrom::Start(0)) {
                        self.problem(format!("cannot read: {e}")).await?;
                        return Ok(());
                    }
                    cur.pos = 0;
                    cur.line = 0;
                    cur.skipping = false;
                    self.notice(Notice::Rotated {
                        path: self.path.clone(),
                        rotation: Rotation::Truncated,
                    })
                    .await?;
                    continue;
                }
                // Moved away and not replaced yet: the writer may still append to the old file.
                Ok(_) | Err(_) => {}
            }
            self.sleep().await?;
        }
    }

    /// Reads what is there and sends the complete lines; false at the end of the file.
    async fn read_available(&mut self, cur: &mut Current) -> Result<bool, Closed> {
        let n = match cur.file.read(&mut self.buf) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(true),
            Err(e) => {
                self.problem(format!("cannot read: {e}")).await?;
                return Ok(false);
            }
        };
        cur.pos += n as u64;
        self.recovered().await?;
        let mut start = 0;
        while let Some(nl) = self.buf[start..n].iter().position(|&b| b == b'\n') {
            let end = start + nl;
            cur.line += 1;
            if cur.skipping {
                cur.skipping = false;
            } else if cur.partial.is_empty() {
                let text = Bytes::copy_from_slice(&self.buf[start..end]);
                self.event(cur.line, text).await?;
            } else {
                cur.partial.extend_from_slice(&self.buf[start..end]);
                let text = Bytes::from(std::mem::take(&mut cur.partial));
                self.event(cur.line, text).await?;
            }
            start = end + 1;
        }
        if !cur.skipping && start < n {
            cur.partial.extend_from_slice(&self.buf[start..n]);
            if cur.partial.len() > self.options.max_line_bytes {
                let reason = format!("line longer than {} bytes", self.options.max_line_bytes);
                self.skip_partial(cur, &reason).await?;
                cur.skipping = true;
            }
        }
        Ok(true)
    }

    async fn event(&self, line: usize, text: Bytes) -> Result<(), Closed> {
        if text.trim_ascii().is_empty() {
            return Ok(());
        }
        self.send(AuditFeed::Event(RawEvent {
            origin: Origin {
                source: self.source.clone(),
                index: line,
                unit: IndexUnit::Line,
            },
            text,
        }))
        .await
    }

    /// Drops an incomplete line, saying so.
    async fn skip_partial(&self, cur: &mut Current, reason: &str) -> Result<(), Closed> {
        if cur.partial.is_empty() {
            return Ok(());
        }
        let bytes = cur.partial.len();
        cur.partial = Vec::new();
        self.notice(Notice::Skipped {
            path: self.path.clone(),
            line: cur.line + 1,
            bytes,
            reason: reason.to_string(),
        })
        .await
    }
}

/// Positions `file` at its end; true when the last line is still being written (its rest is
/// skipped: the part before the end was not read).
fn start_at_end(file: &mut File, len: u64) -> io::Result<bool> {
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

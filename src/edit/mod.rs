//! Editing webhook configurations, admission policies and their bindings while a replay is
//! loaded: validation, saving, recovery, re-dispatch and what changed.
//!
//! * [`check()`]: an edited text parsed, defaulted and validated as kube-apiserver would (as an
//!   update of the configuration it replaces), every problem placed at its line and column
//!   ([`locate`] maps field paths to text positions).
//! * [`save_atomic`]: write, flush, keep a `.bak`, rename over.
//! * [`RecoveryStore`]: unsaved buffers kept across crashes.
//! * [`ConfigWatcher`]: changes made to the loaded files outside the console.
//! * [`ReusingReplier`] and [`redispatch()`]: the loaded requests run again through the edited
//!   engine, reusing the replies of calls whose content did not change.
//! * [`compare`]: what the edit changes, request by request and webhook by webhook.

pub mod check;
mod hash;
pub mod locate;
pub mod recovery;
pub mod redispatch;
pub mod reuse;
pub mod save;
pub mod watch;
pub mod whatif;

pub use check::{Checked, Problem, ProblemKind, Severity, check, check_for};
pub use hash::ContentHash;
pub use locate::{Locator, TextPosition};
pub use recovery::{
    BufferKey, MAX_AGE as RECOVERY_MAX_AGE, RecoveryEntry, RecoveryError, RecoveryStore,
    content_hash,
};
pub use redispatch::{
    CancelToken, Cancelled, Progress, RedispatchHandle, RedispatchMsg, Redispatched, redispatch,
    spawn_redispatch,
};
pub use reuse::{CacheStats, Epoch, ReplyCache, ReusingReplier, call_key};
pub use save::{SaveError, Saved, backup_path, save_atomic};
pub use watch::{ConfigWatcher, DEFAULT_DEBOUNCE, FileChange, FileContent, WatchError};
pub use whatif::{
    AnnotationChange, HookDelta, HookKey, HookStats, ObjectChange, RequestChange, Verdict, WhatIf,
    compare, hook_stats, outcome_stats, request_stats,
};

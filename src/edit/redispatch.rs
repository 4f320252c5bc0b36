//! Re-running the loaded requests through the engine of an edit, in the background, stopping
//! promptly when a newer edit arrives.
//!
//! The run goes through [`Replayer::events`], like every replay; pair it with a
//! [`super::ReusingReplier`] so that calls whose content did not change are answered from the
//! replies already received.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use tokio::sync::{Notify, mpsc};

use crate::engine::Replier;
use crate::metrics::Metrics;
use crate::replay::run::{IdMode, ReplayEvent, Replayed, Replayer};
use crate::replay::{CapturedRequest, InputItem};

/// Results between two progress reports (and between two yields to the runtime, so that a run
/// whose replies all come from the cache still lets other tasks, and its cancellation, in).
pub const PROGRESS_EVERY: usize = 64;

/// Cancels a run; clones share the flag.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
    notify: Notify,
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every run holding this token (or a clone).
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// How far a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Requests done.
    pub done: usize,
    /// Requests in all.
    pub total: usize,
}

/// The results of a complete run.
#[derive(Debug, Clone)]
pub struct Redispatched {
    /// One result per loaded request, in input order.
    pub results: Vec<Replayed>,
    /// The webhook metrics of the whole run.
    pub metrics: Metrics,
}

/// A run stopped by its [`CancelToken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("re-dispatch cancelled after {done} of {total} requests")]
pub struct Cancelled {
    /// Requests done when it stopped.
    pub done: usize,
    /// Requests in all.
    pub total: usize,
}

/// Dispatches every request through `replayer`'s engine with `replier`, reporting progress every
/// [`PROGRESS_EVERY`] requests and at the end. Stops (dropping calls in flight) as soon as
/// `cancel` is cancelled.
pub async fn redispatch<R>(
    requests: Arc<[CapturedRequest]>,
    replayer: &Replayer,
    replier: R,
    ids: IdMode,
    cancel: &CancelToken,
    mut progress: impl FnMut(Progress),
) -> Result<Redispatched, Cancelled>
where
    R: Replier + Clone + Send,
{
    let total = requests.len();
    let source = Arc::clone(&requests);
    let items = futures::stream::iter(0..total)
        .map(move |i| InputItem::Request(Box::new(source[i].clone())));
    let mut events = std::pin::pin!(replayer.events(items, replier, ids));
    let mut results = Vec::with_capacity(total);
    let mut metrics = Metrics::new();
    let stopped = |done| Cancelled { done, total };
    loop {
        if cancel.is_cancelled() {
            return Err(stopped(results.len()));
        }
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(stopped(results.len())),
            d = events.next() => d,
        };
        let Some(d) = next else { break };
        if let Some(m) = &d.metrics {
            metrics.merge(m);
        }
        // Only requests go in, so only requests come out.
        if let ReplayEvent::Replayed(r) = d.event {
            results.push(*r);
        }
        if results.len() % PROGRESS_EVERY == 0 {
            progress(Progress {
                done: results.len(),
                total,
            });
            tokio::task::yield_now().await;
        }
    }
    progress(Progress {
        done: results.len(),
        total,
    });
    Ok(Redispatched { results, metrics })
}

/// What a background run tells the console.
#[derive(Debug)]
pub enum RedispatchMsg {
    /// How far the run is (sent when the channel has room; a full channel skips reports).
    Progress {
        /// The run's generation.
        generation: u64,
        /// Progress.
        progress: Progress,
    },
    /// The run completed.
    Finished {
        /// The run's generation.
        generation: u64,
        /// The results.
        result: Box<Redispatched>,
    },
    /// The run was cancelled (a newer edit, or the handle was dropped).
    Cancelled {
        /// The run's generation.
        generation: u64,
        /// Where it stopped.
        at: Cancelled,
    },
}

/// A background run; cancelled when dropped.
#[derive(Debug)]
pub struct RedispatchHandle {
    generation: u64,
    cancel: CancelToken,
    task: tokio::task::JoinHandle<()>,
}

impl RedispatchHandle {
    /// The generation given at spawn.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Asks the run to stop; it sends [`RedispatchMsg::Cancelled`] unless it already finished.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for RedispatchHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Runs [`redispatch`] on the current tokio runtime and reports over `tx`, each message tagged
/// with `generation` so that the console can tell a stale run's messages from the current one's.
/// Call from inside a runtime.
pub fn spawn_redispatch<R>(
    generation: u64,
    requests: Arc<[CapturedRequest]>,
    replayer: Replayer,
    replier: R,
    ids: IdMode,
    tx: mpsc::Sender<RedispatchMsg>,
) -> RedispatchHandle
where
    R: Replier + Clone + Send + Sync + 'static,
{
    let cancel = CancelToken::new();
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        let progress_tx = tx.clone();
        let on_progress = move |progress| {
            let _ = progress_tx.try_send(RedispatchMsg::Progress {
                generation,
                progress,
            });
        };
        let msg = match redispatch(requests, &replayer, replier, ids, &token, on_progress).await {
            Ok(result) => RedispatchMsg::Finished {
                generation,
                result: Box::new(result),
            },
            Err(at) => RedispatchMsg::Cancelled { generation, at },
        };
        let _ = tx.send(msg).await;
    });
    RedispatchHandle {
        generation,
        cancel,
        task,
    }
}

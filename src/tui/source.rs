//! Where the console's data comes from. A [`Source`] runs in a tokio task and sends
//! [`SourceMsg`]s over a bounded channel; the console turns each into a state change in
//! [`super::app::update`]. The replay source is the first; a live cluster will be another.

use std::future::Future;

use futures::future::Either;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::model::HookInfo;
use crate::api::{WebhookConfiguration, WebhookKind};
use crate::config::policy::{PolicyObject, PolicySet};
use crate::edit::{ReplyCache, ReusingReplier};
use crate::engine::{Engine, Replier, Reply, WebhookCall};
use crate::metrics::Metrics;
use crate::replay::InputItem;
use crate::replay::input::Reader;
use crate::replay::replier::AnyReplier;
use crate::replay::run::{IdMode, ReplayEvent, Replayer};
use crate::webhook_server::WebhookServer;
use std::path::PathBuf;

/// Capacity of the channel between a source and the console: a source waits when the console
/// is this far behind.
pub const CHANNEL_CAPACITY: usize = 256;

/// Where the text of loaded configurations came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentOrigin {
    /// A file (saved back to it).
    File(PathBuf),
    /// Built in (the demo): saved only where the user says.
    Embedded(String),
    /// An object of a live cluster (`hookscope live`): applied back to it (`:apply`, only with
    /// `--allow-writes`), saved only where the user says.
    Cluster {
        /// A webhook configuration's kind, or a policy's or binding's.
        kind: crate::live::cluster::AdmissionKind,
        /// `metadata.name`.
        name: String,
    },
}

/// The text of one source of configurations, and the configurations in force from it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigDocument {
    /// Where the text came from.
    pub origin: DocumentOrigin,
    /// The text as read.
    pub text: String,
    /// The configurations of this text the dispatcher uses (valid ones, defaulted).
    pub configurations: Vec<WebhookConfiguration>,
    /// The admission policies and bindings of this text the dispatcher uses (valid ones,
    /// defaulted), in text order.
    pub policies: Vec<PolicyObject>,
}

/// What the console asks of a source.
#[derive(Debug, Clone)]
pub enum SourceCtl {
    /// Dispatch the loaded requests again with these configurations (an edit became valid, or
    /// `:redispatch`). A newer request cancels the one in progress.
    Redispatch {
        /// Which edit this is; the answers carry it.
        generation: u64,
        /// Every configuration in force.
        configurations: Vec<WebhookConfiguration>,
        /// Every admission policy and binding in force.
        policies: PolicySet,
        /// Forget the replies kept so far first, so that every webhook is called anew.
        fresh: bool,
    },
    /// Dispatch these requests with the configurations in force and send each result as an
    /// [`SourceMsg::Event`] (a live source: captured audit events replayed on demand).
    Replay {
        /// The requests.
        requests: Vec<crate::replay::CapturedRequest>,
    },
    /// Server-side apply these configurations to the live cluster (a dry run when `dry_run`),
    /// answered with a [`LiveMsg::Applied`](super::live::LiveMsg::Applied).
    Apply(super::live::ApplyRequest),
    /// Connect the live source to this kubeconfig context instead (`:context NAME`).
    Context(String),
}

/// What a source tells the console.
#[derive(Debug, Clone)]
pub enum SourceMsg {
    /// The source is ready: what it is and which webhooks it dispatches to.
    Started {
        /// Shown in the status bar (e.g. `demo`, `replay 2 files`).
        label: String,
        /// The webhooks in dispatch order, with their effective settings.
        hooks: Vec<HookInfo>,
        /// How many input items will come, when known.
        total: Option<usize>,
        /// The texts the configurations were read from, for editing.
        documents: Vec<ConfigDocument>,
    },
    /// One input item went through the dispatcher (or was skipped), in input order.
    Event {
        /// The replay's event.
        event: Box<ReplayEvent>,
        /// The metrics this request recorded (merged by the console; the sum is what
        /// `hookscope replay --metrics` exports).
        metrics: Option<Box<Metrics>>,
    },
    /// Something the source could not use (a configuration left out, an unreadable file).
    Problem(Box<crate::replay::report::Problem>),
    /// No more events.
    Finished {
        /// Calls a recording had no reply for.
        missing_replies: usize,
    },
    /// A re-dispatch began: the webhooks of the edited configurations.
    RedispatchStarted {
        /// The edit.
        generation: u64,
        /// The webhooks in dispatch order.
        hooks: Vec<HookInfo>,
        /// Requests that will come.
        total: usize,
    },
    /// One request of a re-dispatch, in input order.
    Redispatched {
        /// The edit.
        generation: u64,
        /// The result.
        event: Box<ReplayEvent>,
        /// Its metrics.
        metrics: Option<Box<Metrics>>,
    },
    /// A re-dispatch ended.
    RedispatchFinished {
        /// The edit.
        generation: u64,
        /// Calls answered from replies already received.
        reused: u64,
        /// Calls sent to the webhooks.
        sent: u64,
    },
    /// Something from a live cluster.
    Live(super::live::LiveMsg),
}

/// A producer of console data.
pub trait Source: Send + 'static {
    /// Runs the source until it is done or the receiver is gone, answering `ctl` (a source
    /// that cannot re-dispatch ignores it).
    fn run(
        self: Box<Self>,
        tx: mpsc::Sender<SourceMsg>,
        ctl: mpsc::Receiver<SourceCtl>,
    ) -> futures::future::BoxFuture<'static, ()>;
}

/// Where the console's webhook replies come from: any replay replier, or the demo's webhooks
/// answered in process.
#[derive(Clone)]
pub enum ConsoleReplier {
    /// HTTPS, a script or a recording, as `hookscope replay` chooses them.
    Replay(AnyReplier),
    /// The demo's webhooks answered in process, with fixed durations (tests, snapshots).
    Demo(super::demo::DemoReplier),
}

impl Replier for ConsoleReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        match self {
            ConsoleReplier::Replay(r) => Either::Left(r.reply(calls)),
            ConsoleReplier::Demo(r) => Either::Right(r.reply(calls)),
        }
    }
}

/// The captured requests of a replay.
pub enum ReplayInput {
    /// Already in memory (the demo, tests).
    Items(Vec<InputItem>),
    /// Files (AdmissionReviews or audit logs; `-` is standard input) read on a thread of their
    /// own, with the objects of `--cluster`.
    Files {
        /// Paths as given.
        paths: Vec<String>,
        /// The loader, with the objects of `--cluster` and the replay's resources.
        reader: Box<Reader>,
    },
}

/// A replay of captured requests through one engine, fed to the console as it goes.
pub struct ReplaySource {
    /// Shown in the status bar.
    pub label: String,
    /// The runner (engine and settings).
    pub replayer: Replayer,
    /// The requests.
    pub input: ReplayInput,
    /// The webhooks' answers.
    pub replier: ConsoleReplier,
    /// How call uids are made ([`IdMode::Sequential`] for reproducible screens).
    pub ids: IdMode,
    /// Problems found while building the source (configurations left out, …), shown first.
    pub problems: Vec<crate::replay::report::Problem>,
    /// A webhook server serving this replay (the demo's), stopped when the source ends.
    pub server: Option<WebhookServer>,
    /// The texts of the configurations, for editing.
    pub documents: Vec<ConfigDocument>,
}

impl std::fmt::Debug for ReplaySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaySource")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// The webhooks of an engine in dispatch order, for the Webhooks view: the
/// MutatingAdmissionPolicies (one row per binding) before the mutating webhooks, the
/// ValidatingAdmissionPolicies between the mutating and the validating webhooks, where they run.
pub fn hook_infos(engine: &Engine) -> Vec<HookInfo> {
    let mutating_policies = engine.mutating_policies().iter().flat_map(|p| {
        p.bindings()
            .iter()
            .enumerate()
            .map(|(i, b)| HookInfo::from_mutating_policy(&p.policy, &b.binding, i))
    });
    let mutating = engine
        .mutating_hooks()
        .iter()
        .map(|h| HookInfo::from_hook(WebhookKind::Mutating, h));
    let policies = engine.policies().iter().flat_map(|p| {
        p.bindings
            .iter()
            .enumerate()
            .map(|(i, b)| HookInfo::from_policy(&p.policy, &b.binding, i))
    });
    let validating =
        (engine.validating_hooks().iter()).map(|h| HookInfo::from_hook(WebhookKind::Validating, h));
    (mutating_policies.chain(mutating))
        .chain(policies)
        .chain(validating)
        .collect()
}

/// Reads files on a thread of its own into a bounded channel.
fn read_files(
    paths: Vec<String>,
    reader: Reader,
    problems: mpsc::Sender<SourceMsg>,
) -> impl Stream<Item = InputItem> {
    let (tx, mut rx) = mpsc::channel::<InputItem>(1024);
    let unstarted = problems.clone();
    // A stack deep enough for the deepest object the apiserver accepts (see crate::json).
    let spawned = crate::json::spawn("reader", move || {
        let mut reader = reader;
        // The receiver only goes away when the console quits.
        let (_, failures) = reader.read_paths(&paths, None, &mut |item| {
            let _ = tx.blocking_send(item);
        });
        for p in failures {
            let _ = problems.blocking_send(SourceMsg::Problem(Box::new(
                crate::replay::report::Problem::from_input(
                    crate::replay::report::ProblemKind::Unusable,
                    &p,
                ),
            )));
        }
    });
    if let Err(e) = spawned {
        let p = crate::replay::InputProblem {
            source: crate::replay::SourceRef {
                file: String::new(),
                index: 0,
                unit: crate::replay::IndexUnit::Document,
                audit_id: None,
                line: None,
            },
            field: String::new(),
            message: format!("cannot start the input reader: {e}"),
        };
        let _ = unstarted.try_send(SourceMsg::Problem(Box::new(
            crate::replay::report::Problem::from_input(
                crate::replay::report::ProblemKind::Unusable,
                &p,
            ),
        )));
    }
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

impl ReplaySource {
    async fn replay(self, tx: mpsc::Sender<SourceMsg>, mut ctl: mpsc::Receiver<SourceCtl>) {
        let ReplaySource {
            label,
            replayer,
            input,
            replier,
            ids,
            problems,
            server,
            documents,
        } = self;
        let total = match &input {
            ReplayInput::Items(items) => Some(items.len()),
            ReplayInput::Files { .. } => None,
        };
        let started = SourceMsg::Started {
            label,
            hooks: hook_infos(replayer.engine()),
            total,
            documents,
        };
        if tx.send(started).await.is_err() {
            return;
        }
        for p in problems {
            if tx.send(SourceMsg::Problem(Box::new(p))).await.is_err() {
                return;
            }
        }
        let items: std::pin::Pin<Box<dyn Stream<Item = InputItem> + Send>> = match input {
            ReplayInput::Items(items) => Box::pin(futures::stream::iter(items)),
            ReplayInput::Files { paths, reader } => {
                Box::pin(read_files(paths, *reader, tx.clone()))
            }
        };
        // The requests are kept for re-dispatching after an edit, and the replies for reusing
        // in it; the first replay itself calls every webhook as captured.
        let cache = ReplyCache::new(REPLY_CACHE_CAPACITY);
        let mut kept: Vec<InputItem> = Vec::new();
        {
            let seeding = Seeding {
                inner: replier.clone(),
                cache: cache.clone(),
            };
            let mut events = std::pin::pin!(replayer.events(items, seeding, ids));
            while let Some(d) = events.next().await {
                if let ReplayEvent::Replayed(r) = &d.event {
                    kept.push(InputItem::Request(r.request.clone()));
                }
                let msg = SourceMsg::Event {
                    event: Box::new(d.event),
                    metrics: d.metrics.map(Box::new),
                };
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
        }
        let missing_replies = match &replier {
            ConsoleReplier::Replay(r) => r.missing_replies(),
            ConsoleReplier::Demo(_) => 0,
        };
        if tx
            .send(SourceMsg::Finished { missing_replies })
            .await
            .is_err()
        {
            return;
        }
        let kept: std::sync::Arc<[InputItem]> = kept.into();
        let mut next = None;
        loop {
            let Redispatch {
                generation,
                configurations,
                policies,
                fresh,
            } = match next.take() {
                Some(c) => c,
                None => match ctl.recv().await {
                    Some(c) => match latest(c, &mut ctl) {
                        Some(r) => r,
                        None => continue,
                    },
                    None => break,
                },
            };
            if fresh {
                cache.clear();
            }
            // The policies in force replace the engine's: an edit of a policy or binding takes
            // effect as an edit of a webhook configuration does. Their parameters come from the
            // replay's objects, as before.
            let engine = Engine::new(&configurations, replayer.engine().options().clone())
                .with_policies(&policies.validating, &policies.validating_bindings)
                .with_mutating_policies(&policies.mutating, &policies.mutating_bindings);
            let again = Replayer::new(std::sync::Arc::new(engine), replayer.settings().clone());
            let reusing = ReusingReplier::new(replier.clone(), cache.clone());
            let run = redispatch(&again, generation, &kept, reusing, ids, &tx);
            tokio::select! {
                open = run => if !open { break },
                c = ctl.recv() => match c {
                    Some(c) => next = latest(c, &mut ctl),
                    None => break,
                },
            }
        }
        drop(server);
    }
}

/// Replies kept for reuse after an edit (the oldest are dropped beyond this).
pub const REPLY_CACHE_CAPACITY: usize = 200_000;

/// Calls `inner` and keeps every reply in `cache`, without answering from it: the first replay
/// calls each webhook as the capture says, and seeds the re-dispatches after an edit.
#[derive(Clone)]
pub(super) struct Seeding<R> {
    pub(super) inner: R,
    pub(super) cache: ReplyCache,
}

impl<R: Replier + Send> Replier for Seeding<R> {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let cache = self.cache.clone();
        let since = cache.epoch();
        let replies = self.inner.reply(calls);
        async move {
            let replies = replies.await;
            for (call, reply) in calls.iter().zip(&replies) {
                cache.insert(since, call, reply);
            }
            replies
        }
    }
}

/// The newest re-dispatch of the control messages already queued, starting from `first`, fresh
/// when any of them asked for it (a replay source has no live events to replay: such requests
/// are dropped).
fn latest(first: SourceCtl, ctl: &mut mpsc::Receiver<SourceCtl>) -> Option<Redispatch> {
    let mut last: Option<Redispatch> = None;
    for c in std::iter::once(first).chain(std::iter::from_fn(|| ctl.try_recv().ok())) {
        if let SourceCtl::Redispatch {
            generation,
            configurations,
            policies,
            fresh,
        } = c
        {
            let fresh = fresh || last.as_ref().is_some_and(|l| l.fresh);
            last = Some(Redispatch {
                generation,
                configurations,
                policies,
                fresh,
            });
        }
    }
    last
}

/// A re-dispatch to run.
struct Redispatch {
    generation: u64,
    configurations: Vec<WebhookConfiguration>,
    policies: PolicySet,
    fresh: bool,
}

/// Dispatches the kept requests with an edited engine; false when the console is gone.
pub(super) async fn redispatch(
    replayer: &Replayer,
    generation: u64,
    items: &std::sync::Arc<[InputItem]>,
    replier: ReusingReplier<ConsoleReplier>,
    ids: IdMode,
    tx: &mpsc::Sender<SourceMsg>,
) -> bool {
    let before = replier.cache().stats();
    let cache = replier.cache().clone();
    let started = SourceMsg::RedispatchStarted {
        generation,
        hooks: hook_infos(replayer.engine()),
        total: items.len(),
    };
    if tx.send(started).await.is_err() {
        return false;
    }
    let stream = futures::stream::iter(items.iter().cloned());
    let mut events = std::pin::pin!(replayer.events(stream, replier, ids));
    while let Some(d) = events.next().await {
        let msg = SourceMsg::Redispatched {
            generation,
            event: Box::new(d.event),
            metrics: d.metrics.map(Box::new),
        };
        if tx.send(msg).await.is_err() {
            return false;
        }
    }
    let after = cache.stats();
    let done = SourceMsg::RedispatchFinished {
        generation,
        reused: after.hits - before.hits,
        sent: after.misses - before.misses,
    };
    tx.send(done).await.is_ok()
}

impl Source for ReplaySource {
    fn run(
        self: Box<Self>,
        tx: mpsc::Sender<SourceMsg>,
        ctl: mpsc::Receiver<SourceCtl>,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(self.replay(tx, ctl))
    }
}

/// Runs a source to the end and collects its messages (tests, headless use); nothing is asked
/// of it.
pub async fn collect(source: Box<dyn Source>) -> Vec<SourceMsg> {
    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (_, ctl) = mpsc::channel(1);
    let task = tokio::spawn(source.run(tx, ctl));
    let mut out = Vec::new();
    while let Some(m) = rx.recv().await {
        out.push(m);
    }
    let _ = task.await;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redispatch(generation: u64, fresh: bool) -> SourceCtl {
        SourceCtl::Redispatch {
            generation,
            configurations: Vec::new(),
            policies: PolicySet::default(),
            fresh,
        }
    }

    #[test]
    fn the_last_queued_redispatch_runs_fresh_if_any_asked() {
        let (tx, mut rx) = mpsc::channel(8);
        for c in [
            redispatch(2, true),
            SourceCtl::Replay {
                requests: Vec::new(),
            },
            redispatch(3, false),
        ] {
            tx.try_send(c).expect("room");
        }
        let r = latest(redispatch(1, false), &mut rx).expect("a re-dispatch");
        assert_eq!((r.generation, r.fresh), (3, true));
        assert!(rx.try_recv().is_err(), "every queued message taken");

        let r = latest(redispatch(4, false), &mut rx).expect("a re-dispatch");
        assert_eq!((r.generation, r.fresh), (4, false));
        let replay = SourceCtl::Replay {
            requests: Vec::new(),
        };
        assert!(latest(replay, &mut rx).is_none());
    }
}

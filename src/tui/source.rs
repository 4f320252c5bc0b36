//! Where the console's data comes from. A [`Source`] runs in a tokio task and sends
//! [`SourceMsg`]s over a bounded channel; the console turns each into a state change in
//! [`super::app::update`]. The replay source is the first; a live cluster will be another.

use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader};

use futures::future::Either;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::model::HookInfo;
use crate::api::WebhookKind;
use crate::engine::{Engine, IdSource, Replier, Reply, SequentialIds, WebhookCall};
use crate::metrics::Metrics;
use crate::replay::input::{ClusterState, Reader};
use crate::replay::record::RecordedReplies;
use crate::replay::run::{RandomIds, ReplayEvent, Replayed, Replayer};
use crate::replay::{IndexUnit, InputItem, InputProblem, SourceRef};
use crate::script::ScriptedReplier;
use crate::transport::HttpsReplier;
use crate::webhook_server::WebhookServer;

/// Capacity of the channel between a source and the console: a source waits when the console
/// is this far behind.
pub const CHANNEL_CAPACITY: usize = 256;

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
    Problem(String),
    /// No more events.
    Finished {
        /// Calls a recording had no reply for.
        missing_replies: usize,
    },
}

/// A producer of console data.
pub trait Source: Send + 'static {
    /// Runs the source until it is done or the receiver is gone.
    fn run(self: Box<Self>, tx: mpsc::Sender<SourceMsg>)
    -> futures::future::BoxFuture<'static, ()>;
}

/// Where a replay's webhook replies come from.
#[derive(Clone)]
pub enum AnyReplier {
    /// Real HTTPS.
    Https(HttpsReplier),
    /// A script (`--script`).
    Scripted(ScriptedReplier),
    /// A recording (`--replies`).
    Recorded(RecordedReplies),
    /// The demo's webhooks answered in process, with fixed durations (tests, snapshots).
    Demo(super::demo::DemoReplier),
}

impl Replier for AnyReplier {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        match self {
            AnyReplier::Https(r) => Either::Left(r.reply(calls)),
            AnyReplier::Scripted(r) => {
                // The script keeps every call it saw; the console needs none of them.
                r.seen.clear();
                Either::Right(Either::Left(r.reply(calls)))
            }
            AnyReplier::Recorded(r) => Either::Right(Either::Right(Either::Left(r.reply(calls)))),
            AnyReplier::Demo(r) => Either::Right(Either::Right(Either::Right(r.reply(calls)))),
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
        /// Namespaces and stored objects.
        cluster: ClusterState,
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
    pub replier: AnyReplier,
    /// Requests dispatched at once (events still arrive in input order).
    pub concurrency: usize,
    /// Deterministic call uids (with a concurrency of 1), for reproducible screens.
    pub sequential_ids: bool,
    /// Problems found while building the source (configurations left out, …), shown first.
    pub problems: Vec<String>,
    /// A webhook server serving this replay (the demo's), stopped when the replay ends.
    pub server: Option<WebhookServer>,
}

impl std::fmt::Debug for ReplaySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplaySource")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// The webhooks of an engine in dispatch order, for the Webhooks view.
pub fn hook_infos(engine: &Engine) -> Vec<HookInfo> {
    let mutating = engine
        .mutating_hooks()
        .iter()
        .map(|h| (WebhookKind::Mutating, h));
    let validating = (engine.validating_hooks().iter()).map(|h| (WebhookKind::Validating, h));
    mutating
        .chain(validating)
        .map(|(phase, h)| HookInfo::from_hook(phase, h))
        .collect()
}

/// Reads files on a thread of its own into a bounded channel.
fn read_files(
    paths: Vec<String>,
    cluster: ClusterState,
    problems: mpsc::Sender<SourceMsg>,
) -> impl Stream<Item = InputItem> {
    let (tx, mut rx) = mpsc::channel::<InputItem>(1024);
    std::thread::spawn(move || {
        let mut reader = Reader::new(cluster);
        let mut sink = |item: InputItem| {
            // The receiver only goes away when the console quits.
            let _ = tx.blocking_send(item);
        };
        for name in &paths {
            let result = if name == "-" {
                let stdin = std::io::stdin();
                let mut input = BufReader::new(stdin.lock());
                reader.read(name, &mut input, &mut sink)
            } else {
                match File::open(name) {
                    Ok(f) => {
                        let mut input = BufReader::with_capacity(1 << 16, f);
                        reader.read(name, &mut input as &mut dyn BufRead, &mut sink)
                    }
                    Err(e) => Err(InputProblem {
                        source: SourceRef {
                            file: name.clone(),
                            index: 0,
                            unit: IndexUnit::Document,
                            audit_id: None,
                        },
                        field: String::new(),
                        message: format!("cannot read: {e}"),
                    }),
                }
            };
            if let Err(p) = result {
                let _ = problems.blocking_send(SourceMsg::Problem(p.to_string()));
            }
        }
        reader.finish(&mut sink);
    });
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

impl ReplaySource {
    async fn replay(self, tx: mpsc::Sender<SourceMsg>) {
        let ReplaySource {
            label,
            replayer,
            input,
            mut replier,
            concurrency,
            sequential_ids,
            problems,
            server,
        } = self;
        let total = match &input {
            ReplayInput::Items(items) => Some(items.len()),
            ReplayInput::Files { .. } => None,
        };
        let started = SourceMsg::Started {
            label,
            hooks: hook_infos(replayer.engine()),
            total,
        };
        if tx.send(started).await.is_err() {
            return;
        }
        for p in problems {
            if tx.send(SourceMsg::Problem(p)).await.is_err() {
                return;
            }
        }
        let items: std::pin::Pin<Box<dyn Stream<Item = InputItem> + Send>> = match input {
            ReplayInput::Items(items) => Box::pin(futures::stream::iter(items)),
            ReplayInput::Files { paths, cluster } => {
                Box::pin(read_files(paths, cluster, tx.clone()))
            }
        };
        let concurrency = concurrency.max(1);
        let replayer = &replayer;
        if concurrency == 1 {
            let mut ids: Box<dyn IdSource + Send> = if sequential_ids {
                Box::new(SequentialIds::default())
            } else {
                Box::new(RandomIds)
            };
            let mut items = items;
            while let Some(item) = items.next().await {
                let msg = dispatch(replayer, item, &mut replier, &mut *ids).await;
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
        } else {
            let results = items
                .map(|item| {
                    let mut replier = replier.clone();
                    async move { dispatch(replayer, item, &mut replier, &mut RandomIds).await }
                })
                .buffered(concurrency);
            let mut results = std::pin::pin!(results);
            while let Some(msg) = results.next().await {
                if tx.send(msg).await.is_err() {
                    return;
                }
            }
        }
        let missing_replies = match &replier {
            AnyReplier::Recorded(r) => r.missing().len(),
            _ => 0,
        };
        let _ = tx.send(SourceMsg::Finished { missing_replies }).await;
        drop(server);
    }
}

/// One input item through the dispatcher, with the metrics it recorded.
async fn dispatch(
    replayer: &Replayer,
    item: InputItem,
    replier: &mut AnyReplier,
    ids: &mut (dyn IdSource + Send),
) -> SourceMsg {
    match item {
        InputItem::Request(request) => {
            let mut metrics = Metrics::new();
            let outcome = replayer
                .replay_one(&request, replier, &mut metrics, ids)
                .await;
            SourceMsg::Event {
                event: Box::new(ReplayEvent::Replayed(Box::new(Replayed {
                    request,
                    outcome,
                }))),
                metrics: Some(Box::new(metrics)),
            }
        }
        other => SourceMsg::Event {
            event: Box::new(ReplayEvent::Skipped(other)),
            metrics: None,
        },
    }
}

impl Source for ReplaySource {
    fn run(
        self: Box<Self>,
        tx: mpsc::Sender<SourceMsg>,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(self.replay(tx))
    }
}

/// Runs a source to the end and collects its messages (tests, headless use).
pub async fn collect(source: Box<dyn Source>) -> Vec<SourceMsg> {
    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let task = tokio::spawn(source.run(tx));
    let mut out = Vec::new();
    while let Some(m) = rx.recv().await {
        out.push(m);
    }
    let _ = task.await;
    out
}

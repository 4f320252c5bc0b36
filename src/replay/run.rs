//! Dispatching captured requests: one engine, any replier, results in input order.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

use futures::{Stream, StreamExt};

use super::{CapturedRequest, InputItem, NamespaceState};
use crate::engine::{
    Engine, IdSource, NamespaceLookup, NamespaceSource, Outcome, Phases, Replier, RequestContext,
    SequentialIds,
};
use crate::metrics::Metrics;

/// The apiserver's default request deadline (`--request-timeout`), which bounds every webhook
/// call of a request together.
pub const DEFAULT_REQUEST_DEADLINE: Duration = Duration::from_secs(60);

/// Finished requests that may wait for an earlier one, per request in flight.
const REORDER_WINDOW: usize = 4;

/// Settings of a replay.
#[derive(Debug, Clone)]
pub struct ReplaySettings {
    /// Time budget of each request.
    pub deadline: Option<Duration>,
    /// Requests dispatched at once. Results still come out in input order.
    pub concurrency: usize,
}

impl Default for ReplaySettings {
    fn default() -> Self {
        Self {
            deadline: Some(DEFAULT_REQUEST_DEADLINE),
            concurrency: 1,
        }
    }
}

/// A replayed request with everything the engine said about it.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The request as captured.
    pub request: Box<CapturedRequest>,
    /// The dispatcher's outcome, trace included.
    pub outcome: Outcome,
}

/// What the runner hands back for each input item, in input order.
#[derive(Debug, Clone)]
pub enum ReplayEvent {
    /// A request went through the dispatcher.
    Replayed(Box<Replayed>),
    /// An input item that was not dispatched ([`InputItem::NotReplayable`] or
    /// [`InputItem::Invalid`]).
    Skipped(InputItem),
}

/// Fresh random UUIDv4 per call, as the apiserver does.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn next_uid(&mut self) -> String {
        let mut text = uuid::Uuid::encode_buffer();
        uuid::Uuid::new_v4()
            .hyphenated()
            .encode_lower(&mut text)
            .to_owned()
    }
}

/// The namespace labels a captured request carries, as the dispatcher's namespace lookup.
impl NamespaceSource for CapturedRequest {
    fn namespace(&self, name: &str) -> NamespaceLookup<'_> {
        if name != self.attrs.namespace {
            return NamespaceLookup::NotFound;
        }
        match &self.namespace {
            NamespaceState::Known(labels) => NamespaceLookup::Found(Cow::Borrowed(labels)),
            NamespaceState::Unknown => NamespaceLookup::Found(Cow::Owned(BTreeMap::new())),
            NamespaceState::Unconfirmed { labels, .. } => {
                NamespaceLookup::Found(Cow::Borrowed(labels))
            }
            // A Namespace being deleted is its own namespace: its labels are the stored object's.
            NamespaceState::NotApplicable if self.attrs.is_namespace_resource() => {
                NamespaceLookup::Found(Cow::Owned(
                    self.attrs
                        .old_object_value()
                        .and_then(|o| o.pointer("/metadata/labels"))
                        .and_then(|l| serde_json::from_value(l.clone()).ok())
                        .unwrap_or_default(),
                ))
            }
            NamespaceState::NotApplicable => NamespaceLookup::NotFound,
        }
    }

    fn param_source(&self) -> Option<&dyn crate::engine::policy::ParamSource> {
        self.params
            .as_deref()
            .map(|p| p as &dyn crate::engine::policy::ParamSource)
    }
}

/// A request's namespace labels as the dispatcher looks them up, remembering whether it did: only
/// a webhook with a namespace selector reads them.
struct Observed<'a> {
    request: &'a CapturedRequest,
    read: AtomicBool,
}

impl NamespaceSource for Observed<'_> {
    fn namespace(&self, name: &str) -> NamespaceLookup<'_> {
        self.read.store(true, Ordering::Relaxed);
        self.request.namespace(name)
    }

    fn param_source(&self) -> Option<&dyn crate::engine::policy::ParamSource> {
        self.request.param_source()
    }
}

/// Runs captured requests through one engine.
#[derive(Debug, Clone)]
pub struct Replayer {
    engine: Arc<Engine>,
    settings: ReplaySettings,
}

impl Replayer {
    /// A replayer for an engine.
    pub fn new(engine: Arc<Engine>, settings: ReplaySettings) -> Self {
        Self { engine, settings }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The settings.
    pub fn settings(&self) -> &ReplaySettings {
        &self.settings
    }

    /// Dispatches one captured request.
    pub fn replay_one<'a, R: Replier + Send>(
        &'a self,
        request: &'a CapturedRequest,
        replier: &'a mut R,
        metrics: &'a mut Metrics,
        ids: &'a mut (dyn IdSource + Send),
    ) -> impl Future<Output = Outcome> + 'a {
        self.dispatch(request, request, replier, metrics, ids)
    }

    fn dispatch<'a, R: Replier + Send>(
        &'a self,
        namespaces: &'a (dyn NamespaceSource + Sync),
        request: &'a CapturedRequest,
        replier: &'a mut R,
        metrics: &'a mut Metrics,
        ids: &'a mut (dyn IdSource + Send),
    ) -> impl Future<Output = Outcome> + 'a {
        let ctx = RequestContext {
            namespaces,
            ids,
            metrics,
            deadline: self.settings.deadline,
            phases: Phases::All,
        };
        self.engine.dispatch_ref(&request.attrs, ctx, replier)
    }

    /// Dispatches a stream of input items with up to `concurrency` requests in flight and
    /// yields each item, in input order, with the metrics its dispatch recorded. Every replay
    /// (the command, the console) runs through here.
    pub fn events<'a, S, R>(
        &'a self,
        items: S,
        replier: R,
        ids: IdMode,
    ) -> impl Stream<Item = Dispatched> + 'a
    where
        S: Stream<Item = InputItem> + 'a,
        R: Replier + Clone + Send + 'a,
    {
        let issued = Arc::new(AtomicU64::new(0));
        let concurrency = self.settings.concurrency.max(1);
        // Results leave in input order, so a slow request holds back those after it. A window
        // wider than the concurrency lets later requests start meanwhile; the semaphore keeps
        // `concurrency` of them in flight, no more.
        let window = if concurrency == 1 {
            1
        } else {
            concurrency.saturating_mul(REORDER_WINDOW)
        };
        let in_flight = Arc::new(tokio::sync::Semaphore::new(concurrency));
        items
            .map(move |item| {
                let mut replier = replier.clone();
                let issued = Arc::clone(&issued);
                let in_flight = Arc::clone(&in_flight);
                async move {
                    let request = match item {
                        InputItem::Request(request) => request,
                        other => {
                            return Dispatched {
                                event: ReplayEvent::Skipped(other),
                                metrics: None,
                            };
                        }
                    };
                    // Never closed, so acquiring only waits.
                    let _permit = in_flight.acquire().await.ok();
                    let mut metrics = Metrics::per_request();
                    // The dispatch's state is large; boxed, it is written once on the heap
                    // instead of being moved with every request future as it is queued.
                    let (mut random, mut sequence) = (RandomIds, SharedSequence(&issued));
                    let ids: &mut (dyn IdSource + Send) = match ids {
                        IdMode::Random => &mut random,
                        IdMode::Sequential => &mut sequence,
                    };
                    let observed = Observed {
                        request: &request,
                        read: AtomicBool::new(false),
                    };
                    let dispatch =
                        self.dispatch(&observed, &request, &mut replier, &mut metrics, ids);
                    let outcome = Box::pin(dispatch).await;
                    let labels_read = observed.read.into_inner();
                    let mut request = request;
                    // The assumption matters only where a namespace selector read the labels.
                    if labels_read {
                        match &request.namespace {
                            NamespaceState::Unknown => {
                                let note = request.unknown_namespace_note();
                                request.notes.push(note);
                            }
                            NamespaceState::Unconfirmed { why, .. } => {
                                let note = why.to_string();
                                request.notes.push(note);
                            }
                            _ => {}
                        }
                    }
                    Dispatched {
                        event: ReplayEvent::Replayed(Box::new(Replayed { request, outcome })),
                        metrics: Some(metrics),
                    }
                }
            })
            .buffered(window)
    }

    /// Replays a stream of input items (see [`Replayer::events`]) with random call uids, as the
    /// apiserver does, handing the results to `on_batch` in input order, in batches: a batch
    /// goes out when it holds `batching.max` items, when the input ends, or when the replay
    /// waits (on webhooks or on input) with results that have been ready for `batching.linger`.
    /// Returns the webhook metrics of the whole replay.
    pub async fn run<S, R>(
        &self,
        items: S,
        replier: R,
        batching: Batching,
        mut on_batch: impl FnMut(Vec<ReplayEvent>),
    ) -> Metrics
    where
        S: Stream<Item = InputItem>,
        R: Replier + Clone + Send,
    {
        let mut metrics = self.configuration_metrics();
        self.run_dispatched(items, replier, batching, |batch| {
            let events = batch.into_iter().map(|d| {
                if let Some(m) = &d.metrics {
                    metrics.merge(m);
                }
                d.event
            });
            on_batch(events.collect());
        })
        .await;
        metrics
    }

    /// The metrics a replay starts from: those of the configurations loaded.
    pub fn configuration_metrics(&self) -> Metrics {
        let mut metrics = Metrics::new();
        self.engine.observe_configurations(&mut metrics);
        metrics
    }

    /// [`Replayer::run`] handing on each result with the metrics of its dispatch, for
    /// `on_batch` to merge in input order into [`Replayer::configuration_metrics`]: where the
    /// batches go to another thread, the merging goes with them and leaves the dispatching
    /// thread to the dispatches.
    pub async fn run_dispatched<S, R>(
        &self,
        items: S,
        replier: R,
        batching: Batching,
        mut on_batch: impl FnMut(Vec<Dispatched>),
    ) where
        S: Stream<Item = InputItem>,
        R: Replier + Clone + Send,
    {
        let max = batching.max.max(1);
        let mut events = std::pin::pin!(self.events(items, replier, IdMode::Random));
        let mut batch = Vec::with_capacity(max);
        // Only a batching replay needs a timer (and so a tokio runtime).
        let mut linger: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
        std::future::poll_fn(|cx| {
            loop {
                match events.as_mut().poll_next(cx) {
                    Poll::Ready(Some(d)) => {
                        if batch.is_empty() && max > 1 {
                            let until = tokio::time::Instant::now() + batching.linger;
                            match &mut linger {
                                Some(l) => l.as_mut().reset(until),
                                None => linger = Some(Box::pin(tokio::time::sleep_until(until))),
                            }
                        }
                        batch.push(d);
                        if batch.len() >= max {
                            on_batch(std::mem::replace(&mut batch, Vec::with_capacity(max)));
                        }
                    }
                    Poll::Ready(None) => {
                        if !batch.is_empty() {
                            on_batch(std::mem::take(&mut batch));
                        }
                        return Poll::Ready(());
                    }
                    Poll::Pending => {
                        // With `max` 1 every result leaves at once: only a batching replay waits here.
                        if !batch.is_empty()
                            && let Some(l) = &mut linger
                            && l.as_mut().poll(cx).is_ready()
                        {
                            on_batch(std::mem::replace(&mut batch, Vec::with_capacity(max)));
                            continue;
                        }
                        return Poll::Pending;
                    }
                }
            }
        })
        .await;
    }
}

/// How [`Replayer::run`] groups results.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Most results per batch.
    pub max: usize,
    /// Longest a ready result waits for its batch to fill while the replay waits.
    pub linger: Duration,
}

impl Batching {
    /// Every result on its own, as soon as it is ready.
    pub const EACH: Batching = Batching {
        max: 1,
        linger: Duration::ZERO,
    };
}

/// How a replay makes the `request.uid` of each webhook call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdMode {
    /// A fresh random UUIDv4 per call, as the apiserver does.
    #[default]
    Random,
    /// [`SequentialIds`] across the whole replay, for reproducible output (deterministic with a
    /// concurrency of 1).
    Sequential,
}

/// One input item after the dispatcher, with the metrics of its dispatch.
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// What happened to the item.
    pub event: ReplayEvent,
    /// The metrics its dispatch recorded (None for items that were not dispatched).
    pub metrics: Option<Metrics>,
}

/// [`SequentialIds`] shared by the dispatches of one replay.
struct SharedSequence<'a>(&'a AtomicU64);

impl IdSource for SharedSequence<'_> {
    fn next_uid(&mut self) -> String {
        SequentialIds::nth(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::watch;

    use super::*;
    use crate::engine::{EngineOptions, Reply, WebhookCall};
    use crate::tui::demo::{self, DemoReplier};

    /// Answers as the demo does, but holds the first batch of calls until calls of
    /// `release_after` other requests have been answered, and records how many batches were in
    /// flight at once.
    #[derive(Clone)]
    struct HoldsTheFirst {
        state: Arc<Mutex<Counts>>,
        answered: watch::Sender<usize>,
        release_after: usize,
    }

    #[derive(Default)]
    struct Counts {
        held: Option<String>,
        others: std::collections::BTreeSet<String>,
        in_flight: usize,
        most_in_flight: usize,
    }

    /// The request a call is about: its operation, namespace and name.
    fn request_of(call: &WebhookCall) -> String {
        let body: serde_json::Value = crate::json::from_slice(&call.body).unwrap_or_default();
        let r = &body["request"];
        format!("{} {}/{}", r["operation"], r["namespace"], r["name"])
    }

    impl Replier for HoldsTheFirst {
        fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
            let this = self.clone();
            let request = calls.first().map(request_of).unwrap_or_default();
            // The demo's replies are ready at once.
            let replies = futures::executor::block_on(DemoReplier.reply(calls));
            async move {
                let first = {
                    let mut c = this.state.lock().expect("not poisoned");
                    c.in_flight += 1;
                    c.most_in_flight = c.most_in_flight.max(c.in_flight);
                    c.held.get_or_insert_with(|| request.clone()) == &request
                };
                if first {
                    let mut answered = this.answered.subscribe();
                    let _ = answered.wait_for(|&n| n >= this.release_after).await;
                } else {
                    tokio::task::yield_now().await;
                }
                let mut c = this.state.lock().expect("not poisoned");
                c.in_flight -= 1;
                if !first {
                    c.others.insert(request);
                    this.answered.send_replace(c.others.len());
                }
                replies
            }
        }
    }

    /// Answers as the demo does, but answers calls about any request after the first only once
    /// the outputs have been handed a result.
    #[derive(Clone)]
    struct WaitsForOutput {
        first: Arc<Mutex<Option<String>>>,
        delivered: watch::Receiver<usize>,
    }

    impl Replier for WaitsForOutput {
        fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
            let request = calls.first().map(request_of).unwrap_or_default();
            let first = self
                .first
                .lock()
                .expect("not poisoned")
                .get_or_insert_with(|| request.clone())
                == &request;
            let replies = futures::executor::block_on(DemoReplier.reply(calls));
            let mut delivered = self.delivered.clone();
            async move {
                if !first {
                    let _ = delivered.wait_for(|&n| n >= 1).await;
                }
                replies
            }
        }
    }

    #[tokio::test]
    async fn a_ready_result_is_handed_out_while_the_replay_waits() {
        let configs =
            demo::configurations("https://127.0.0.1:8443", "demo-ca").expect("demo configs");
        let replayer = Replayer::new(
            Arc::new(Engine::new(&configs, EngineOptions::default())),
            ReplaySettings::default(),
        );
        let items: Vec<InputItem> = demo::requests()
            .into_iter()
            .filter(|i| matches!(i, InputItem::Request(_)))
            .take(3)
            .collect();
        let (tx, rx) = watch::channel(0);
        let replier = WaitsForOutput {
            first: Arc::default(),
            delivered: rx,
        };
        let mut batches = Vec::new();
        let run = replayer.run(
            futures::stream::iter(items),
            replier,
            Batching {
                max: 64,
                linger: Duration::from_millis(5),
            },
            |batch| {
                tx.send_modify(|n| *n += batch.len());
                batches.push(batch.len());
            },
        );
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("the first result went out before the batch was full");
        assert_eq!(batches.iter().sum::<usize>(), 3);
        assert_eq!(
            batches[0], 1,
            "the first result alone, while the second waited"
        );
    }

    #[tokio::test]
    async fn a_held_request_does_not_stop_later_ones_nor_raise_the_concurrency() {
        let configs =
            demo::configurations("https://127.0.0.1:8443", "demo-ca").expect("demo configs");
        let engine = Engine::new(&configs, EngineOptions::default());
        let replayer = Replayer::new(
            Arc::new(engine),
            ReplaySettings {
                deadline: Some(DEFAULT_REQUEST_DEADLINE),
                concurrency: 2,
            },
        );
        let items = demo::requests();
        let sources: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                InputItem::Request(r) => Some(r.source.to_string()),
                _ => None,
            })
            .collect();
        assert!(sources.len() >= 8, "enough demo requests");
        let replier = HoldsTheFirst {
            state: Arc::default(),
            answered: watch::channel(0).0,
            release_after: 3,
        };
        let events = replayer.events(
            futures::stream::iter(items),
            replier.clone(),
            IdMode::Random,
        );
        let done = tokio::time::timeout(Duration::from_secs(60), events.collect::<Vec<_>>())
            .await
            .expect("later requests ran while the first was held");
        let replayed: Vec<String> = done
            .iter()
            .filter_map(|d| match &d.event {
                ReplayEvent::Replayed(r) => Some(r.request.source.to_string()),
                ReplayEvent::Skipped(_) => None,
            })
            .collect();
        assert_eq!(replayed, sources, "results in input order");
        let counts = replier.state.lock().expect("not poisoned");
        assert_eq!(counts.most_in_flight, 2);
    }
}

//! A live cluster in the console: the connection, the configuration changes, the `/metrics`
//! scrapes and the audit events, kept in bounded memory and changed only by `update`.
//!
//! The live source ([`super::live_source::LiveSource`]) does the IO and the parsing; what it
//! sends is a [`LiveMsg`] inside [`SourceMsg::Live`](super::source::SourceMsg::Live).

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::api::WebhookConfiguration;
use crate::live::audit::AuditEvent;
use crate::live::cluster::{Change, ChangeAction, ClusterMsg, Connected, Failure, Feed, Served};
use crate::live::metrics::{AdmissionSnapshot, MetricsHistory, Window};
use crate::replay::{CapturedRequest, InputItem};

use super::keymap::Action;
use super::model::{self, HookInfo};
use super::views::{ClusterView, EventsView};

/// Audit events kept by default; older ones are paged out (`--keep-events`).
pub const DEFAULT_KEEP_EVENTS: usize = 10_000;

/// Configuration changes kept in the history.
pub const CHANGES_KEPT: usize = 1_000;

/// Scrapes kept: six hours at the default interval of 10 s.
pub const SCRAPES_KEPT: usize = 2_160;

/// Audit source notices kept.
const NOTICES_KEPT: usize = 50;

/// The metrics windows `+` and `-` step through.
pub const WINDOWS: [Duration; 5] = [
    Duration::from_secs(60),
    Duration::from_secs(5 * 60),
    Duration::from_secs(15 * 60),
    Duration::from_secs(60 * 60),
    Duration::from_secs(6 * 60 * 60),
];

/// What the live source tells the console.
#[derive(Debug, Clone)]
pub enum LiveMsg {
    /// The connection's progress and the feeds' health, as the cluster library reports them
    /// (never [`ClusterMsg::Configurations`] or [`ClusterMsg::Metrics`]: those come parsed),
    /// with when the source received it.
    Cluster {
        /// The message.
        msg: Box<ClusterMsg>,
        /// When it came.
        at: SystemTime,
    },
    /// The configurations in force changed: the webhooks in dispatch order.
    Configurations {
        /// The webhooks and the policy bindings, with their effective settings.
        hooks: Vec<HookInfo>,
        /// How many webhook configurations are in force.
        configurations: usize,
        /// How many admission policies (validating and mutating) are in force.
        policies: usize,
        /// How many admission policy bindings are in force.
        bindings: usize,
        /// The policy kinds that cannot be read now, with why.
        unreadable: Vec<String>,
        /// Objects that could not be read as configurations.
        problems: Vec<String>,
        /// Both watchers have listed once.
        synced: bool,
        /// Each configuration as YAML, for editing (and `:apply` with `--allow-writes`).
        documents: Vec<super::source::ConfigDocument>,
    },
    /// What a server-side apply (or its dry run) did.
    Applied(Box<ApplyResult>),
    /// The parameter objects of the policies in force changed: how many the replays now have.
    Params {
        /// Objects of every `paramKind` the policies name.
        objects: usize,
        /// When the source took them in (replays from then on get them).
        at: SystemTime,
    },
    /// A `/metrics` scrape, reduced to the admission series.
    Scrape {
        /// When the answer arrived.
        at: SystemTime,
        /// The admission series.
        snapshot: Box<AdmissionSnapshot>,
    },
    /// An audit event (at its final stage).
    Audit(Box<AuditRecord>),
    /// The server's release, and the one the replays now model (without `--kube-version`).
    Release(crate::ServerRelease),
    /// A line about the audit source (following, rotated, an error, the webhook's address).
    AuditNotice {
        /// The line.
        text: String,
        /// When it came.
        at: SystemTime,
    },
}

/// A server-side apply the console asks of the live source.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyRequest {
    /// The buffer the configurations come from.
    pub buffer: usize,
    /// The configurations, as the buffer defines them.
    pub configurations: Vec<WebhookConfiguration>,
    /// Each configuration's edit (in the same order): the object as written and the cluster's
    /// version it was made on, from which the write computes what the user changed.
    pub edits: Vec<crate::live::cluster::Edit>,
    /// Only the dry run (`dryRun=All`): nothing is stored.
    pub dry_run: bool,
    /// Take over fields other field managers own (`force=true`).
    pub force: bool,
}

/// The answer to an [`ApplyRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyResult {
    /// What was asked.
    pub request: ApplyRequest,
    /// One per configuration, in the request's order.
    pub outcomes: Vec<ApplyOutcome>,
}

/// What the apply of one configuration did.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyOutcome {
    /// A webhook configuration's kind, or a policy's or binding's.
    pub kind: crate::live::cluster::AdmissionKind,
    /// The configuration's name.
    pub name: String,
    /// The object the server returned (for a dry run, what it would store) and a diff from the
    /// object in force to it; or why the server refused, with what to do.
    pub result: Result<(Value, String), String>,
}

/// A dry run shown to the user, waiting for `y` (apply) or `n` (cancel); or the server's
/// refusal, shown until closed.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApply {
    /// The request, applied for real on `y`; None when the server refused.
    pub request: Option<ApplyRequest>,
    /// The dry run's diffs, one after the other; or why the server refused, and what to do.
    pub diff: String,
    /// The first line shown (`j`/`k` scroll).
    pub scroll: u16,
}

/// One audit event as the console lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// `auditID`.
    pub audit_id: String,
    /// `stage`.
    pub stage: String,
    /// `stageTimestamp` (else `requestReceivedTimestamp`), as recorded.
    pub at: String,
    /// `verb`.
    pub verb: String,
    /// `user.username`.
    pub user: String,
    /// `resource[.group][/subresource]`.
    pub resource: String,
    /// `namespace/name`, `name`, or the request URI when there is no object.
    pub target: String,
    /// The object's namespace (empty for cluster-scoped objects and non-resource requests).
    pub namespace: String,
    /// `responseStatus.code`.
    pub code: Option<i32>,
    /// `responseStatus.message`: why the request failed (the webhook and its message, a call's
    /// error), absent on success.
    pub message: Option<String>,
    /// Routine traffic hidden by default (`:noise` shows it): hookscope's own requests (its
    /// `/metrics` scrapes, `/version`, watches), lease renewals, health and discovery probes.
    pub noise: bool,
    /// The admission webhook annotations, in the apiserver's order: key and value.
    pub annotations: Vec<(String, String)>,
    /// The request, replayable against the configurations in force.
    pub request: Option<Box<CapturedRequest>>,
    /// Why the event cannot be replayed, when it cannot.
    pub not_replayable: Option<String>,
    /// Where it came from (file and line, or the webhook's event number).
    pub origin: String,
}

impl AuditRecord {
    /// The console's record of an ingested event and the replay reader's items for it.
    pub fn new(event: &AuditEvent, items: Vec<InputItem>) -> AuditRecord {
        let namespace = event
            .object_ref
            .as_ref()
            .map(|o| o.namespace.clone())
            .unwrap_or_default();
        let (resource, target) = match &event.object_ref {
            Some(o) => {
                let mut resource = if o.api_group.is_empty() {
                    o.resource.clone()
                } else {
                    format!("{}.{}", o.resource, o.api_group)
                };
                if !o.subresource.is_empty() {
                    resource = format!("{resource}/{}", o.subresource);
                }
                let target = match (o.namespace.is_empty(), o.name.is_empty()) {
                    (_, true) if o.namespace.is_empty() => String::new(),
                    (true, _) => o.name.clone(),
                    (false, true) => format!("{}/", o.namespace),
                    (false, false) => format!("{}/{}", o.namespace, o.name),
                };
                (resource, target)
            }
            None => (String::new(), event.request_uri.clone()),
        };
        let annotations = event
            .admission
            .iter()
            .map(|a| (a.key.clone(), a.value.clone()))
            .collect();
        let mut request = None;
        let mut not_replayable = None;
        for item in items {
            match item {
                InputItem::Request(r) => request = Some(r),
                InputItem::NotReplayable(p) | InputItem::Invalid(p) => {
                    not_replayable = Some(p.message.clone());
                }
            }
        }
        let noise = is_noise(event);
        AuditRecord {
            noise,
            message: event.response_message.clone(),
            audit_id: event.audit_id.clone(),
            stage: event.stage.clone(),
            at: event
                .stage_timestamp
                .clone()
                .or_else(|| event.request_received_timestamp.clone())
                .unwrap_or_default(),
            verb: event.verb.clone(),
            user: event.user.username.clone(),
            resource,
            target,
            namespace,
            code: event.response_code,
            annotations,
            request,
            not_replayable,
            origin: event.source.to_string(),
        }
    }
}

/// The final-stage events of an audit log's `lines` (JSON lines of `source`, numbered from 1),
/// as the live source sends them to the console; lines that do not read are skipped.
pub fn records_of_lines<'a>(
    source: &str,
    lines: impl IntoIterator<Item = &'a str>,
    reader: crate::replay::input::Reader,
) -> Vec<AuditRecord> {
    let mut ingester = crate::live::audit::Ingester::new(reader);
    lines
        .into_iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let raw = crate::live::audit::RawEvent {
                origin: crate::live::audit::Origin {
                    source: source.into(),
                    index: i + 1,
                    unit: crate::replay::IndexUnit::Line,
                },
                text: bytes::Bytes::copy_from_slice(line.as_bytes()),
            };
            let ingested = ingester.ingest(&raw);
            match ingested.event {
                Ok(e) if !ingested.pending && e.stage != "RequestReceived" => {
                    Some(AuditRecord::new(&e, ingested.items))
                }
                _ => None,
            }
        })
        .collect()
}

/// The non-resource paths every cluster polls: health, version, metrics, API discovery.
const PROBE_PATHS: [&str; 8] = [
    "/healthz", "/readyz", "/livez", "/version", "/metrics", "/openapi", "/api", "/apis",
];

/// Whether an event is routine traffic a person looking at admission does not want to see:
/// hookscope's own requests (its user agent), lease renewals (`leases` in
/// `coordination.k8s.io`), and health, version, metrics and discovery requests.
fn is_noise(event: &AuditEvent) -> bool {
    if event
        .user_agent
        .as_deref()
        .is_some_and(|a| a.starts_with(crate::live::cluster::USER_AGENT_PRODUCT))
    {
        return true;
    }
    match &event.object_ref {
        Some(o) => o.resource == "leases" && o.api_group == "coordination.k8s.io",
        None => {
            let path = event.request_uri.split('?').next().unwrap_or("");
            PROBE_PATHS
                .iter()
                .any(|p| path == *p || path.starts_with(&format!("{p}/")))
        }
    }
}

/// An audit annotation of the live stream, beside the event it came with.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveAnnotation {
    /// The event's sequence number.
    pub event: u64,
    /// The key.
    pub key: String,
    /// The value as recorded.
    pub value: String,
    /// The value decoded (a patch or a mutation record), when it decodes.
    pub decoded: Option<String>,
}

/// A feed's latest outcome and its time.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedState {
    /// Which feed.
    pub feed: Feed,
    /// When the outcome came.
    pub at: SystemTime,
    /// None: it worked; else why it failed, and what to do.
    pub failure: Option<Failure>,
}

/// The connection as the console shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Connection {
    /// Nothing heard yet.
    #[default]
    Starting,
    /// An attempt is under way.
    Connecting {
        /// The server URL.
        server: String,
        /// The context.
        context: String,
        /// Attempt number.
        attempt: u32,
    },
    /// Connected (since when).
    Connected(Connected, SystemTime),
    /// Failed (when); retrying.
    Failed(Failure, SystemTime),
}

/// What a live action did, for the shared update to follow up.
#[derive(Debug, Clone, Default)]
pub struct LiveTaken {
    /// A line for the status bar, and whether it is an error.
    pub note: Option<(String, bool)>,
    /// Requests to replay against the configurations in force.
    pub replay: Vec<CapturedRequest>,
    /// The live annotations shown changed: the Annotations view's cursor follows the tail.
    pub annotations_changed: bool,
}

/// Everything live the console keeps.
#[derive(Debug, Clone)]
pub struct LiveState {
    /// What `hookscope live` was asked for (context, audit source, capture), for the header.
    pub summary: String,
    /// Writes to the cluster are allowed (`--allow-writes`).
    pub allow_writes: bool,
    /// The connection.
    pub connection: Connection,
    /// Each feed's latest outcome (a feed absent here has none yet).
    pub feeds: Vec<FeedState>,
    /// How many namespaces the cluster has, once listed.
    pub namespaces: Option<usize>,
    /// How many CustomResourceDefinitions the cluster has, once listed.
    pub crds: Option<usize>,
    /// The server's release and the one modelled, when the replays follow the server's.
    pub release: Option<crate::ServerRelease>,
    /// Webhook configurations in force.
    pub configurations: usize,
    /// Admission policies in force (validating and mutating).
    pub policies: usize,
    /// Admission policy bindings in force.
    pub bindings: usize,
    /// The policy kinds that cannot be read now, with why (replays run without them).
    pub unreadable: Vec<String>,
    /// What discovery found the server serving of the policy kinds, once it answered.
    pub served: Option<Vec<Served>>,
    /// How many parameter objects of the policies in force the cluster has, and when they last
    /// changed, once listed.
    pub params: Option<(usize, SystemTime)>,
    /// The server and context the kubeconfig named, once read (kept while disconnected).
    pub target: Option<(String, String)>,
    /// Both watchers have listed once.
    pub synced: bool,
    /// Objects that could not be read as configurations.
    pub configuration_problems: Vec<String>,
    /// The change history, oldest first.
    pub changes: VecDeque<Change>,
    /// The Cluster view's own state: its cursor over `changes`.
    pub cluster_view: ClusterView,
    /// The scrapes.
    pub history: MetricsHistory,
    /// The chart window: an index into [`WINDOWS`].
    pub window: usize,
    /// Charts stopped at this time (`p`), or following the latest scrape.
    pub paused_at: Option<SystemTime>,
    /// The apiserver charted alone (`i`; its `instance` label), or None for their sum.
    pub instance: Option<String>,
    /// Audit events kept (at most `keep_events`), oldest first.
    pub events: VecDeque<AuditRecord>,
    /// The sequence number of `events[0]`.
    pub first_event: u64,
    /// Events received in all.
    pub events_seen: u64,
    /// Events kept at most.
    pub keep_events: usize,
    /// The Events view's own state: its cursor over `events` and its filter.
    pub events_view: EventsView,
    /// The annotations of the kept events, in arrival order.
    pub annotations: VecDeque<LiveAnnotation>,
    /// Lines about the audit source with when they came, newest last.
    pub notices: VecDeque<(SystemTime, String)>,
    /// The next replayed result opens in the Chain view (the user asked for one event).
    pub open_next_replay: bool,
    /// `-n/--namespace`: the Events and Annotations views show only this namespace's requests
    /// (`:ns` changes it, `:ns -` shows all).
    pub namespace: Option<String>,
    /// Routine traffic ([`AuditRecord::noise`]) is shown too (`:noise` toggles it).
    pub show_noise: bool,
    /// A dry run waiting for confirmation.
    pub pending_apply: Option<PendingApply>,
}

impl LiveState {
    /// Live state before anything is heard; `summary` describes the session.
    pub fn new(summary: String, keep_events: usize, allow_writes: bool) -> LiveState {
        LiveState {
            summary,
            allow_writes,
            connection: Connection::Starting,
            feeds: Vec::new(),
            namespaces: None,
            crds: None,
            release: None,
            configurations: 0,
            policies: 0,
            bindings: 0,
            unreadable: Vec::new(),
            served: None,
            params: None,
            synced: false,
            target: None,
            configuration_problems: Vec::new(),
            changes: VecDeque::new(),
            cluster_view: ClusterView::default(),
            history: MetricsHistory::new(SCRAPES_KEPT),
            window: 1,
            paused_at: None,
            instance: None,
            events: VecDeque::new(),
            first_event: 0,
            events_seen: 0,
            keep_events: keep_events.max(1),
            events_view: EventsView::default(),
            annotations: VecDeque::new(),
            notices: VecDeque::new(),
            open_next_replay: false,
            namespace: None,
            show_noise: false,
            pending_apply: None,
        }
    }

    /// Why nothing can be replayed now (the configurations in force are not listed: not
    /// connected, or still listing), None when a replay can run.
    pub fn replay_refusal(&self) -> Option<String> {
        if self.synced {
            return None;
        }
        Some(match &self.connection {
            Connection::Failed(f, _) => format!(
                "nothing replayed: not connected, so the configurations in force are unknown ({})",
                f.reason
            ),
            _ => "nothing replayed yet: the configurations in force are still being listed".into(),
        })
    }

    /// What the Connection pane says of the configurations in force: listed, being listed, or
    /// unknown while not connected.
    pub fn listing(&self) -> &'static str {
        match (&self.connection, self.synced) {
            (_, true) => "listed",
            (Connection::Connected(..), false) => "listing…",
            (Connection::Failed(..), false) => "not listed: not connected",
            (_, false) => "not listed yet",
        }
    }

    /// The chart window.
    pub fn chart_window(&self) -> Window {
        let length = WINDOWS[self.window.min(WINDOWS.len() - 1)];
        let window = match self.paused_at {
            Some(at) => Window::paused_at(length, at),
            None => Window::latest(length),
        };
        window.of_instance(self.instance.clone())
    }

    /// Charts the next apiserver alone, after the last one their sum again (`i`).
    pub fn next_instance(&mut self) {
        let instances = self.history.instances();
        let next = match &self.instance {
            None => 0,
            Some(current) => match instances.iter().position(|i| i == current) {
                Some(i) => i + 1,
                None => 0,
            },
        };
        self.instance = instances.get(next).cloned();
    }

    /// The latest outcome of `feed`.
    pub fn feed(&self, feed: Feed) -> Option<&FeedState> {
        self.feeds.iter().find(|f| f.feed == feed)
    }

    /// The feeds whose latest outcome is a failure.
    pub fn failing(&self) -> impl Iterator<Item = (Feed, &Failure)> + '_ {
        self.feeds
            .iter()
            .filter_map(|f| f.failure.as_ref().map(|failure| (f.feed, failure)))
    }

    fn feed_outcome(&mut self, feed: Feed, at: SystemTime, failure: Option<Failure>) {
        match self.feeds.iter_mut().find(|f| f.feed == feed) {
            // An outcome older than the one kept (a late message) does not replace it.
            Some(kept) if kept.at > at => {}
            Some(kept) => {
                kept.at = at;
                kept.failure = failure;
            }
            None => self.feeds.push(FeedState { feed, at, failure }),
        }
    }

    /// Takes in a cluster message received at `at` (the parsed ones arrive as their own
    /// [`LiveMsg`]s).
    pub fn on_cluster(&mut self, msg: ClusterMsg, at: SystemTime) {
        match msg {
            ClusterMsg::Connecting {
                server,
                context,
                attempt,
            } => {
                self.target = Some((server.clone(), context.clone()));
                self.connection = Connection::Connecting {
                    server,
                    context,
                    attempt,
                }
            }
            ClusterMsg::Connected(c) => {
                self.connection = Connection::Connected(c, at);
            }
            ClusterMsg::Failed(f) => {
                self.connection = Connection::Failed(f, at);
            }
            ClusterMsg::FeedFailed { feed, failure } => self.feed_outcome(feed, at, Some(failure)),
            ClusterMsg::FeedRecovered(feed) => self.feed_outcome(feed, at, None),
            ClusterMsg::Discovered(served) => {
                // A kind the server does not serve has no feed to fail.
                self.feeds.retain(|f| {
                    !served
                        .iter()
                        .any(|s| s.version.is_none() && f.feed == Feed::Admission(s.kind))
                });
                self.served = Some(served);
            }
            ClusterMsg::Namespaces(set) => {
                if set.synced {
                    self.namespaces = Some(set.labels.len());
                }
            }
            ClusterMsg::Crds(set) => {
                if set.synced {
                    self.crds = Some(set.objects.len());
                }
            }
            ClusterMsg::Change(mut change) => {
                if self.changes.len() == CHANGES_KEPT {
                    self.changes.pop_front();
                    self.cluster_view.dropped_oldest();
                }
                // The deleted object does not say who deleted it; the audit log does.
                if change.action == ChangeAction::Deleted
                    && let Some(e) = self.events.iter().rev().find(|e| deletes(e, &change))
                {
                    attribute(&mut change, e);
                }
                self.changes.push_back(change);
            }
            // Taken in by the source; never sent as such.
            ClusterMsg::Configurations(_)
            | ClusterMsg::Metrics(_)
            | ClusterMsg::Queried(_)
            | ClusterMsg::Params(_) => {}
        }
    }

    /// Keeps a scrape; a scrape older than the newest kept is refused with the reason.
    pub fn on_scrape(&mut self, at: SystemTime, snapshot: AdmissionSnapshot) -> Result<(), String> {
        self.feed_outcome(Feed::Metrics, at, None);
        self.history
            .push(at, snapshot)
            .map_err(|e| format!("metrics scrape: {e}"))
    }

    /// Keeps an audit event and its annotations, paging out the oldest beyond the limit.
    pub fn on_audit(&mut self, record: AuditRecord) {
        let seq = self.first_event + self.events.len() as u64;
        self.events_seen += 1;
        for (key, value) in &record.annotations {
            self.annotations.push_back(LiveAnnotation {
                event: seq,
                decoded: model::decode_annotation(key, value),
                key: key.clone(),
                value: value.clone(),
            });
        }
        // A deletion the watch saw before its audit event came: the event names who and when.
        if let Some(change) = self
            .changes
            .iter_mut()
            .rev()
            .find(|c| c.operation.is_none() && deletes(&record, c))
        {
            attribute(change, &record);
        }
        self.events.push_back(record);
        while self.events.len() > self.keep_events {
            self.events.pop_front();
            self.first_event += 1;
            while self
                .annotations
                .front()
                .is_some_and(|a| a.event < self.first_event)
            {
                self.annotations.pop_front();
            }
        }
        self.events_view.paged_out(self.first_event);
    }

    /// Keeps a notice about the audit source.
    pub fn on_notice(&mut self, notice: String, at: SystemTime) {
        if self.notices.len() == NOTICES_KEPT {
            self.notices.pop_front();
        }
        self.notices.push_back((at, notice));
    }

    /// The event with sequence number `seq`, if still kept.
    pub fn event(&self, seq: u64) -> Option<&AuditRecord> {
        let i = seq.checked_sub(self.first_event)?;
        self.events.get(usize::try_from(i).ok()?)
    }

    /// Events paged out so far.
    pub fn paged_out(&self) -> u64 {
        self.first_event
    }

    /// Whether the namespace (`-n`, `:ns`), the routine traffic toggle (`:noise`) and the
    /// Events filter (`/`) let `record` through.
    pub fn shows(&self, record: &AuditRecord) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| record.namespace == ns)
            && (self.show_noise || !record.noise)
            && (self.events_view.filter.is_empty()
                || matches_filter(record, &self.events_view.filter))
    }

    /// How many kept events the filters hide as routine traffic.
    pub fn hidden_noise(&self) -> usize {
        if self.show_noise {
            0
        } else {
            self.events.iter().filter(|e| e.noise).count()
        }
    }

    /// The kept events the namespace filter lets through, with their sequence numbers.
    pub fn visible_events(&self) -> impl DoubleEndedIterator<Item = (u64, &AuditRecord)> + '_ {
        self.events
            .iter()
            .enumerate()
            .map(|(i, e)| (self.first_event + i as u64, e))
            .filter(|(_, e)| self.shows(e))
    }

    /// The selected event's sequence number (the newest shown when following the tail).
    pub fn selected_event(&self) -> Option<u64> {
        (self.events_view).at(|| self.visible_events().next_back().map(|(seq, _)| seq))
    }

    /// The filters changed: a selected event they now hide is no longer selected.
    fn keep_shown_event(&mut self) {
        let keep = |s: u64| self.event(s).is_some_and(|e| self.shows(e));
        let kept = self.events_view.selected.filter(|&s| keep(s));
        self.events_view.selected = kept;
    }

    /// The sequence numbers of the events shown, oldest first (what the Events view moves over).
    pub fn shown_events(&self) -> Vec<u64> {
        self.visible_events().map(|(seq, _)| seq).collect()
    }

    /// The selected change (the newest when none is selected).
    pub fn selected_change(&self) -> Option<&Change> {
        self.changes.get(self.cluster_view.at(self.changes.len())?)
    }

    /// The live actions that need only the live state: the chart window and pause, the Events
    /// filter, the namespace and the routine traffic shown, replays of audit events. None for
    /// any other.
    pub fn action(&mut self, action: Action) -> Option<LiveTaken> {
        let mut taken = LiveTaken::default();
        let mut say = |text: String, error: bool| taken.note = Some((text, error));
        match action {
            Action::Zoom(step) => {
                self.zoom(step);
                say(
                    format!("window {}", window_label(WINDOWS[self.window])),
                    false,
                );
            }
            Action::Pause => {
                self.toggle_pause();
                let text = match self.paused_at {
                    Some(at) => format!("charts paused at {} (p follows again)", clock(at)),
                    None if self.history.is_empty() => "no scrape yet".to_string(),
                    None => "charts follow the latest scrape".to_string(),
                };
                say(text, false);
            }
            Action::NextInstance => {
                self.next_instance();
                let text = match (&self.instance, self.history.instances().len()) {
                    (Some(i), _) => format!("charts apiserver {i} alone (i: the next one)"),
                    (None, 0) => "the scrapes are not per apiserver".to_string(),
                    (None, n) => format!("charts the sum of {n} apiservers"),
                };
                say(text, false);
            }
            Action::ReplayEvent => {
                let picked = self.selected_event().and_then(|s| self.event(s)).map(|r| {
                    let why = r
                        .not_replayable
                        .clone()
                        .unwrap_or_else(|| "the event carries no admission request".into());
                    (r.audit_id.clone(), r.request.clone().ok_or(why))
                });
                let configurations = self.configurations;
                let refusal = self.replay_refusal();
                match picked {
                    None => say("no audit event to replay".into(), true),
                    Some((id, Err(why))) => say(format!("cannot replay {id}: {why}"), true),
                    Some(_) if refusal.is_some() => say(refusal.unwrap_or_default(), true),
                    Some((id, Ok(request))) => {
                        self.open_next_replay = true;
                        say(
                            format!(
                                "replaying {id} against the {configurations} configurations in force"
                            ),
                            false,
                        );
                        taken.replay = vec![*request];
                    }
                }
            }
            Action::Filter(text) => {
                self.events_view.filter = text;
                self.keep_shown_event();
                let shown = self.visible_events().count();
                let text = if self.events_view.filter.is_empty() {
                    format!("{shown} events shown (filter cleared)")
                } else {
                    format!(
                        "{shown} events contain {:?} (esc clears)",
                        self.events_view.filter
                    )
                };
                say(text, false);
            }
            Action::ToggleNoise => {
                self.show_noise = !self.show_noise;
                self.keep_shown_event();
                let text = if self.show_noise {
                    "routine events shown (:noise hides them)".to_string()
                } else {
                    format!(
                        "{} routine events hidden: hookscope's own, lease renewals, health, /version (:noise shows them)",
                        self.hidden_noise()
                    )
                };
                taken.annotations_changed = true;
                say(text, false);
            }
            Action::Namespace(namespace) => {
                let text = match &namespace {
                    Some(ns) => {
                        format!("events and annotations of namespace {ns} (:ns - shows all)")
                    }
                    None => "events and annotations of every namespace".to_string(),
                };
                self.namespace = namespace;
                self.keep_shown_event();
                taken.annotations_changed = true;
                say(text, false);
            }
            Action::ReplayEvents => {
                let requests: Vec<_> = self
                    .visible_events()
                    .filter_map(|(_, e)| e.request.as_deref().cloned())
                    .collect();
                if requests.is_empty() {
                    say("no replayable audit event kept".into(), true);
                } else if let Some(why) = self.replay_refusal() {
                    say(why, true);
                } else {
                    say(
                        format!(
                            "replaying {} events against the {} configurations in force (1: requests)",
                            requests.len(),
                            self.configurations
                        ),
                        false,
                    );
                    taken.replay = requests;
                }
            }
            _ => return None,
        }
        Some(taken)
    }

    /// Zooms in (`+1`: a narrower chart window) or out (`-1`: a wider one).
    pub fn zoom(&mut self, step: i32) {
        self.window = (self.window as i32 - step).clamp(0, WINDOWS.len() as i32 - 1) as usize;
    }

    /// Pauses the charts at the latest scrape, or follows again.
    pub fn toggle_pause(&mut self) {
        self.paused_at = match self.paused_at {
            Some(_) => None,
            None => self.history.latest().map(|(at, _)| at),
        };
    }
}

/// Whether `record` is the successful audited deletion of `change`'s configuration.
fn deletes(record: &AuditRecord, change: &Change) -> bool {
    change.action == ChangeAction::Deleted
        && record.verb == "delete"
        && record.code.is_some_and(|c| (200..300).contains(&c))
        && record.target == change.name
        && record.resource == format!("{}.{}", change.kind.resource(), crate::config::GROUP)
}

/// Names the user and time of an audited deletion in the history entry.
fn attribute(change: &mut Change, record: &AuditRecord) {
    change.who = record.user.clone();
    change.server_time = Some(record.at.clone());
    change.operation = Some("Delete, from the audit log".into());
}

/// Whether `record` contains `filter` (case-insensitive) in its verb, resource, target, user,
/// response code or message, or auditID.
fn matches_filter(record: &AuditRecord, filter: &str) -> bool {
    let f = filter.to_lowercase();
    let code = record.code.map(|c| c.to_string()).unwrap_or_default();
    [
        record.verb.as_str(),
        &record.resource,
        &record.target,
        &record.user,
        &code,
        record.message.as_deref().unwrap_or(""),
        &record.audit_id,
    ]
    .iter()
    .any(|field| field.to_lowercase().contains(&f))
}

/// A duration as the window title says it: `5m`, `1h`.
pub fn window_label(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// A time as `HH:MM:SS` UTC.
pub fn clock(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, day % 3600 / 60, day % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_actions_need_only_the_live_state() {
        let mut l = LiveState::new("test".into(), 10, false);
        let t = l.action(Action::Filter("cm".into())).unwrap();
        assert_eq!(
            t.note,
            Some(("0 events contain \"cm\" (esc clears)".into(), false))
        );
        assert_eq!(l.events_view.filter, "cm");
        let t = l.action(Action::ReplayEvents).unwrap();
        assert!(t.replay.is_empty(), "nothing kept to replay");
        assert!(t.note.is_some_and(|(_, error)| error));
        let t = l.action(Action::Namespace(Some("a".into()))).unwrap();
        assert!(t.annotations_changed && t.replay.is_empty());
        assert!(
            l.action(Action::Context("other".into())).is_none(),
            "another context reaches beyond the live state"
        );
        assert!(l.action(Action::Up).is_none());
    }
}

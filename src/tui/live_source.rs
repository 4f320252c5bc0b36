//! The live source: a cluster's configurations and `/metrics` through the cluster library, audit
//! events from a followed log or the audit webhook backend, and replays on demand against the
//! configurations in force. It parses here, off the console's update path, and only sends
//! messages.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::ServerRelease;
use crate::config::policy::{PolicyObject, PolicySet};
use crate::edit::{ReplyCache, ReusingReplier};
use crate::engine::policy::ParamObjects;
use crate::engine::{Engine, EngineOptions};
use crate::live::audit::{
    AuditFeed, AuditWebhookOptions, AuditWebhookServer, CaptureOptions, CaptureWriter,
    FollowOptions, Ingester, follow,
};
use crate::live::cluster::AdmissionKind;
use crate::live::cluster::{
    Cluster, ClusterMsg, ClusterNamespaces, ClusterOptions, Failure, FailureKind, Feed,
    MetricsScrape, WebhookSet, apply_diff, editable_yaml,
};
use crate::registry::{CustomResourceSpec, ResourceRegistry};
use crate::replay::InputItem;
use crate::replay::input::{ClusterState, Reader};
use crate::replay::report::{Problem, ProblemKind};
use crate::replay::run::{IdMode, ReplaySettings, Replayer};

use super::live::{ApplyOutcome, ApplyRequest, ApplyResult, AuditRecord, LiveMsg};
use super::source::{
    ConfigDocument, ConsoleReplier, DocumentOrigin, REPLY_CACHE_CAPACITY, Seeding, Source,
    SourceCtl, SourceMsg, hook_infos, redispatch,
};

/// Where audit events come from.
#[derive(Debug)]
pub enum AuditInput {
    /// A log file followed as it grows (`--follow-audit-log`).
    Follow {
        /// The log.
        path: PathBuf,
        /// How (from the start, poll interval).
        options: FollowOptions,
    },
    /// The audit webhook backend (`--audit-webhook`), started by the caller (so it can print
    /// the kubeconfig for the apiserver first), and the feed it posts to.
    Webhook {
        /// The running server; stopped when the source ends.
        server: AuditWebhookServer,
        /// What it receives.
        feed: mpsc::Receiver<AuditFeed>,
    },
}

/// Starts the audit webhook backend; its events come through a bounded channel (4,096 at most).
pub async fn start_audit_webhook(
    options: AuditWebhookOptions,
) -> Result<AuditInput, crate::live::audit::AuditWebhookError> {
    let (tx, feed) = mpsc::channel(AUDIT_CHANNEL);
    let server = AuditWebhookServer::start(options, tx).await?;
    Ok(AuditInput::Webhook { server, feed })
}

/// Which Kubernetes release the replays model.
#[derive(Debug, Clone)]
pub enum LiveRelease {
    /// The release of [`LiveSource::engine_options`] (`--kube-version` was given).
    Fixed,
    /// The server's own, as soon as `/version` answers (the newest hookscope models for a newer
    /// server, the oldest for an older one); the registry gets these custom resources
    /// (`--cluster`).
    Server(ClusterState),
}

/// Everything `hookscope live` watches.
pub struct LiveSource {
    /// The cluster connection.
    pub cluster: ClusterOptions,
    /// The audit events, if any.
    pub audit: Option<AuditInput>,
    /// Save the audit stream here (Secret values redacted unless the options say otherwise).
    pub capture: Option<(PathBuf, CaptureOptions)>,
    /// Reads the audit events (knowing `--cluster` objects and custom resources).
    pub reader: Reader,
    /// The engine's options (release modelled, registry); its configurations follow the cluster.
    pub engine_options: EngineOptions,
    /// Whether the release of `engine_options` stays, or follows the server's.
    pub release: LiveRelease,
    /// Replay settings (deadline, concurrency).
    pub settings: ReplaySettings,
    /// Where replayed calls are answered.
    pub replier: ConsoleReplier,
    /// Requests loaded from captures (`--input`), replayed once the configurations are listed
    /// and again on `:replay`.
    pub loaded: Vec<InputItem>,
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("cluster", &self.cluster)
            .field("audit", &self.audit)
            .finish_non_exhaustive()
    }
}

/// Audit feed messages buffered between the reader (log or webhook) and the source.
const AUDIT_CHANNEL: usize = 4096;

impl LiveSource {
    async fn watch(self, tx: mpsc::Sender<SourceMsg>, mut ctl: mpsc::Receiver<SourceCtl>) {
        let LiveSource {
            cluster,
            audit,
            capture,
            reader,
            mut engine_options,
            release,
            settings,
            replier,
            loaded,
        } = self;
        let started = SourceMsg::Started {
            label: "live".into(),
            hooks: Vec::new(),
            total: None,
            documents: Vec::new(),
        };
        if tx.send(started).await.is_err() {
            return;
        }
        let say = |text: String| {
            SourceMsg::Live(LiveMsg::AuditNotice {
                text,
                at: SystemTime::now(),
            })
        };
        let cluster_msg = |msg: ClusterMsg| {
            SourceMsg::Live(LiveMsg::Cluster {
                msg: Box::new(msg),
                at: SystemTime::now(),
            })
        };

        let (cluster_tx, mut cluster_rx) = mpsc::channel(64);
        let mut writer_options = cluster.clone();
        let mut cluster_task = tokio::spawn(crate::live::cluster::run(cluster, cluster_tx));

        let mut _server = None;
        let mut audit_task = None;
        let mut audit_rx = match audit {
            Some(AuditInput::Follow { path, options }) => {
                let (audit_tx, audit_rx) = mpsc::channel(AUDIT_CHANNEL);
                audit_task = Some(tokio::spawn(follow(path, options, audit_tx)));
                audit_rx
            }
            Some(AuditInput::Webhook { server, feed }) => {
                let _ = tx
                    .send(say(format!(
                        "audit webhook backend listening at {}",
                        server.url()
                    )))
                    .await;
                _server = Some(server);
                feed
            }
            None => mpsc::channel(1).1,
        };
        let mut writer = match capture {
            Some((path, options)) => match CaptureWriter::create(&path, options) {
                Ok(w) => {
                    let _ = tx
                        .send(say(format!("capturing audit events to {}", path.display())))
                        .await;
                    Some(w)
                }
                Err(e) => {
                    let _ = tx.send(say(format!("capture: {e}"))).await;
                    None
                }
            },
            None => None,
        };

        let (scrapes, scrapes_rx) = mpsc::channel(1);
        let parser = tokio::spawn(parse_scrapes(scrapes_rx, tx.clone()));
        let mut ingester = Ingester::new(reader);
        let mut replayer: Option<Arc<Replayer>> = None;
        // The configurations in force, for an engine of another release.
        let mut in_force: Option<WebhookSet> = None;
        // The console's edits in force (what-ifs; the cluster is not changed), until the
        // cluster's configurations change: the console then sends its edits again.
        let mut edited: Option<Arc<Replayer>> = None;
        // Every request replayed so far, dispatched again after an edit, with the replies
        // kept for reuse.
        let mut kept: Vec<InputItem> = Vec::new();
        let cache = ReplyCache::new(REPLY_CACHE_CAPACITY);
        let seeding = Seeding {
            inner: replier.clone(),
            cache: cache.clone(),
        };
        let mut redispatching: Option<tokio::task::JoinHandle<()>> = None;
        let mut loaded = Some(loaded).filter(|l| !l.is_empty());
        // The cluster's namespace labels, given to every request before it is dispatched.
        let mut namespaces = ClusterNamespaces::default();
        // The policy kinds that cannot be read, noted on every request replayed without them.
        let mut unreadable: Vec<String> = Vec::new();
        // The cluster's parameter objects of the policies in force, once listed, and why they
        // cannot be read when they cannot.
        let mut params: Option<Arc<ParamObjects>> = None;
        let mut params_problem: Option<String> = None;
        // The registry of the release modelled with the custom resources of `--cluster`; the
        // engine's is it with the cluster's CustomResourceDefinitions, once listed, or why they
        // cannot be.
        let mut registry_base = engine_options.registry.clone();
        let mut cluster_crds: Vec<CustomResourceSpec> = Vec::new();
        let mut crds_problem: Option<String> = None;
        // What the cluster has now, for a replayed request.
        macro_rules! cluster_now {
            () => {
                ClusterNow {
                    namespaces: &namespaces,
                    params: params.as_ref(),
                    params_problem: params_problem.as_deref(),
                    unreadable: &unreadable,
                    crds_problem: crds_problem.as_deref(),
                    registry: &engine_options.registry,
                }
            };
        }
        let mut cluster_open = true;
        let mut audit_open = true;
        // The latest time a Prometheus answer was passed on: a new connection queries the
        // history again, and what the charts have is not sent twice.
        let mut queried_to: Option<SystemTime> = None;
        loop {
            tokio::select! {
                m = cluster_rx.recv(), if cluster_open => {
                    let Some(m) = m else {
                        cluster_open = false;
                        continue;
                    };
                    let msg = match m {
                        ClusterMsg::Configurations(set) => {
                            let (r, msg) = configurations(&set, &engine_options, &settings);
                            replayer = Some(Arc::clone(&r));
                            edited = None;
                            unreadable = set.unreadable.clone();
                            in_force = Some(set);
                            msg
                        }
                        ClusterMsg::Connected(connected) => {
                            if let LiveRelease::Server(cluster) = &release {
                                let server = ServerRelease::of(&connected.server_version);
                                let release_msg = SourceMsg::Live(LiveMsg::Release(server.clone()));
                                if tx.send(release_msg).await.is_err() {
                                    break;
                                }
                                if server.modelled != engine_options.kube_version {
                                    engine_options.kube_version = server.modelled;
                                    registry_base = cluster.registry(server.modelled);
                                    engine_options.registry =
                                        with_crds(&registry_base, &cluster_crds);
                                    // The configurations in force, under the server's release;
                                    // the console sends its edits again on this.
                                    if let Some(set) = &in_force {
                                        let (r, msg) =
                                            configurations(set, &engine_options, &settings);
                                        replayer = Some(r);
                                        edited = None;
                                        if tx.send(msg).await.is_err() {
                                            break;
                                        }
                                    }
                                }
                            }
                            cluster_msg(ClusterMsg::Connected(connected))
                        }
                        ClusterMsg::Namespaces(set) => {
                            namespaces.listed(&set);
                            cluster_msg(ClusterMsg::Namespaces(set))
                        }
                        ClusterMsg::Crds(set) => {
                            let (specs, problems) = custom_resources(&set);
                            for spec in &specs {
                                ingester.reader_mut().add_custom_resource(spec);
                            }
                            cluster_crds = specs;
                            crds_problem = None;
                            engine_options.registry = with_crds(&registry_base, &cluster_crds);
                            for p in problems {
                                if tx.send(say(p)).await.is_err() {
                                    break;
                                }
                            }
                            // The configurations in force, typing custom resources with the
                            // cluster's definitions; the console sends its edits again on this.
                            if let Some(in_force) = &in_force {
                                let (r, msg) = configurations(in_force, &engine_options, &settings);
                                replayer = Some(r);
                                edited = None;
                                if tx.send(msg).await.is_err() {
                                    break;
                                }
                            }
                            cluster_msg(ClusterMsg::Crds(set))
                        }
                        ClusterMsg::FeedFailed { feed: Feed::Crds, failure } => {
                            crds_problem = Some(failure.reason.clone());
                            cluster_msg(ClusterMsg::FeedFailed {
                                feed: Feed::Crds,
                                failure,
                            })
                        }
                        ClusterMsg::Params(objects) => {
                            let count = objects.len();
                            params = Some(Arc::new(objects));
                            params_problem = None;
                            SourceMsg::Live(LiveMsg::Params {
                                objects: count,
                                at: SystemTime::now(),
                            })
                        }
                        ClusterMsg::FeedFailed { feed: Feed::Params, failure } => {
                            params_problem = Some(failure.reason.clone());
                            cluster_msg(ClusterMsg::FeedFailed {
                                feed: Feed::Params,
                                failure,
                            })
                        }
                        ClusterMsg::FeedFailed { feed: Feed::Namespaces, failure } => {
                            namespaces.failure = Some(failure.reason.clone());
                            cluster_msg(ClusterMsg::FeedFailed {
                                feed: Feed::Namespaces,
                                failure,
                            })
                        }
                        ClusterMsg::Metrics(scrape) => {
                            // Parsing can take a while: a scrape that comes while the last one is
                            // still parsed is dropped rather than queued behind it.
                            let _ = scrapes.try_send(scrape);
                            continue;
                        }
                        ClusterMsg::Queried(points) => {
                            let mut open = true;
                            for (at, snapshot) in points {
                                if queried_to.is_some_and(|t| at <= t) {
                                    continue;
                                }
                                queried_to = Some(at);
                                let snapshot = Box::new(snapshot);
                                let msg = SourceMsg::Live(LiveMsg::Scrape { at, snapshot });
                                if tx.send(msg).await.is_err() {
                                    open = false;
                                    break;
                                }
                            }
                            if !open {
                                break;
                            }
                            continue;
                        }
                        other => cluster_msg(other),
                    };
                    if tx.send(msg).await.is_err() {
                        break;
                    }
                    // The captures are replayed once everything in force is known: the
                    // configurations, and the parameters of the policies that take them.
                    let known = params.is_some() || params_problem.is_some();
                    if let (Some(set), Some(r)) = (&in_force, &replayer)
                        && in_force_known(set, known)
                        && let Some(items) = loaded.take()
                    {
                        kept.extend(items.iter().cloned());
                        let items = with_cluster(items, &cluster_now!());
                        spawn_replay(Arc::clone(r), items, seeding.clone(), tx.clone());
                    }
                }
                feed = audit_rx.recv(), if audit_open => {
                    let msg = match feed {
                        None => {
                            audit_open = false;
                            continue;
                        }
                        Some(AuditFeed::Notice(n)) => say(n.to_string()),
                        Some(AuditFeed::Event(raw)) => {
                            if let Some(w) = writer.as_mut()
                                && let Err(e) = w.write(&raw)
                            {
                                let _ = tx.send(say(format!("capture stopped: {e}"))).await;
                                writer = None;
                            }
                            let ingested = ingester.ingest(&raw);
                            match ingested.event {
                                Err(problem) => say(format!("skipped: {problem}")),
                                // The final stage of the same request follows, with its
                                // response code and the admission annotations.
                                Ok(e) if ingested.pending || e.stage == "RequestReceived" => continue,
                                Ok(event) => SourceMsg::Live(LiveMsg::Audit(Box::new(
                                    AuditRecord::new(&event, ingested.items),
                                ))),
                            }
                        }
                    };
                    if tx.send(msg).await.is_err() {
                        break;
                    }
                }
                c = ctl.recv() => match c {
                    None => break,
                    Some(SourceCtl::Replay { requests }) => {
                        let Some(r) = edited.as_ref().or(replayer.as_ref()) else {
                            let _ = tx.send(SourceMsg::Problem(Box::new(Problem::note(
                                ProblemKind::Warning,
                                "nothing replayed: the configurations in force are not listed yet".into(),
                            )))).await;
                            continue;
                        };
                        let items: Vec<InputItem> = requests
                            .into_iter()
                            .map(|r| InputItem::Request(Box::new(r)))
                            .collect();
                        kept.extend(items.iter().cloned());
                        let items = with_cluster(items, &cluster_now!());
                        spawn_replay(Arc::clone(r), items, seeding.clone(), tx.clone());
                    }
                    Some(SourceCtl::Redispatch { generation, configurations, policies, fresh }) => {
                        if let Some(previous) = redispatching.take() {
                            previous.abort();
                            // Gone before the next run's cache counts are read.
                            let _ = previous.await;
                        }
                        if fresh {
                            cache.clear();
                        }
                        // Everything in force as the console has it: the cluster's objects, edited
                        // or not, and the console's own.
                        let engine = Engine::new(&configurations, engine_options.clone())
                            .with_policies(&policies.validating, &policies.validating_bindings)
                            .with_mutating_policies(&policies.mutating, &policies.mutating_bindings);
                        let again = Arc::new(Replayer::new(Arc::new(engine), settings.clone()));
                        edited = Some(Arc::clone(&again));
                        let items: Arc<[InputItem]> =
                            with_cluster(kept.clone(), &cluster_now!()).into();
                        let reusing = ReusingReplier::new(replier.clone(), cache.clone());
                        let tx = tx.clone();
                        redispatching = Some(tokio::spawn(async move {
                            redispatch(&again, generation, &items, reusing, IdMode::Random, &tx)
                                .await;
                        }));
                    }
                    Some(SourceCtl::Apply(request)) => {
                        tokio::spawn(apply(writer_options.clone(), request, tx.clone()));
                    }
                    Some(SourceCtl::Context(name)) => {
                        // Another cluster: a connection of its own, on a channel of its own (so
                        // nothing of the previous one arrives late), and nothing kept of what the
                        // previous one had in force.
                        cluster_task.abort();
                        writer_options.context = Some(name);
                        let (cluster_tx, rx) = mpsc::channel(64);
                        cluster_rx = rx;
                        cluster_open = true;
                        cluster_task = tokio::spawn(crate::live::cluster::run(
                            writer_options.clone(),
                            cluster_tx,
                        ));
                        namespaces = ClusterNamespaces::default();
                        unreadable.clear();
                        params = None;
                        params_problem = None;
                        cluster_crds.clear();
                        crds_problem = None;
                        engine_options.registry = registry_base.clone();
                        in_force = None;
                        replayer = None;
                        edited = None;
                    }
                },
            }
        }
        if let Some(w) = writer {
            let _ = w.finish();
        }
        cluster_task.abort();
        parser.abort();
        if let Some(t) = redispatching {
            t.abort();
        }
        if let Some(t) = audit_task {
            t.abort();
        }
    }
}

/// What the cluster has now that a replayed request is given: its namespace's labels, the
/// parameter objects of the policies (once listed), and which policy kinds cannot be read.
struct ClusterNow<'a> {
    namespaces: &'a ClusterNamespaces,
    params: Option<&'a Arc<ParamObjects>>,
    params_problem: Option<&'a str>,
    unreadable: &'a [String],
    /// Why the cluster's CustomResourceDefinitions cannot be read, when they cannot.
    crds_problem: Option<&'a str>,
    /// The resources the replays know (built-in, `--cluster`'s and the cluster's custom ones).
    registry: &'a ResourceRegistry,
}

/// `base` with the custom resources `crds` define.
fn with_crds(base: &ResourceRegistry, crds: &[CustomResourceSpec]) -> ResourceRegistry {
    let mut registry = base.clone();
    for spec in crds {
        registry.add_custom_resource(spec);
    }
    registry
}

/// The custom resources the cluster's CustomResourceDefinitions define, as `--cluster` files
/// give them, and a line for each definition that cannot be read.
fn custom_resources(set: &crate::live::cluster::CrdSet) -> (Vec<CustomResourceSpec>, Vec<String>) {
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    for (name, object) in set.objects.iter() {
        match crate::registry::load_custom_resources(&object.to_string()) {
            Ok(found) => specs.extend(found),
            Err(e) => problems.push(format!(
                "the cluster's CustomResourceDefinition {name} cannot be read ({e}); its custom resources are replayed untyped"
            )),
        }
    }
    (specs, problems)
}

/// Whether everything in force is known, for the captures replayed once it is: every watcher
/// has listed (or its kind is unreadable), and the parameters of the policies in force are
/// `params_known` (listed, or unreadable) when a policy takes parameters.
fn in_force_known(set: &WebhookSet, params_known: bool) -> bool {
    let p = &set.policies;
    let takes_params = (p.validating.iter().map(|v| &v.spec.param_kind))
        .chain(p.mutating.iter().map(|m| &m.spec.param_kind))
        .any(Option::is_some);
    set.synced() && (params_known || !takes_params)
}

/// The requests among `items` with their namespace's labels and the policies' parameter objects
/// as the cluster has them now, and a note for each policy kind that cannot be read (they are
/// replayed without it).
fn with_cluster(mut items: Vec<InputItem>, now: &ClusterNow<'_>) -> Vec<InputItem> {
    let ClusterNow {
        namespaces,
        params,
        params_problem,
        unreadable,
        crds_problem,
        registry,
    } = now;
    for item in &mut items {
        if let InputItem::Request(request) = item {
            namespaces.resolve(request);
            if let Some(params) = params {
                request.params = Some(Arc::clone(params));
            }
            if let Some(why) = params_problem {
                request.notes.push(format!(
                    "the parameters of the cluster's policies cannot all be read ({why}); a policy taking them may have decided otherwise"
                ));
            }
            let resource = &request.attrs.resource;
            if let Some(why) = crds_problem
                && !resource.group.is_empty()
                && registry
                    .is_namespaced(&resource.group, &resource.resource)
                    .is_none()
            {
                request.notes.push(format!(
                    "the cluster's CustomResourceDefinitions cannot be read ({why}); replayed without them, so {}.{} is not typed by its definition (no schema, defaults or scale), which the apiserver's admission used",
                    resource.resource, resource.group
                ));
            }
            for u in unreadable.iter() {
                request.notes.push(format!(
                    "the cluster's {u}; replayed without them, so a policy of that kind may have decided otherwise"
                ));
            }
        }
    }
    items
}

/// Parses each scrape off the source's loop and sends its admission series.
async fn parse_scrapes(mut rx: mpsc::Receiver<MetricsScrape>, tx: mpsc::Sender<SourceMsg>) {
    while let Some(scrape) = rx.recv().await {
        let at = scrape.at;
        let parsed = tokio::task::spawn_blocking(move || scrape.admission()).await;
        let msg = match parsed {
            Ok(Ok(snapshot)) => LiveMsg::Scrape {
                at,
                snapshot: Box::new(snapshot),
            },
            Ok(Err(e)) => LiveMsg::Cluster {
                msg: Box::new(ClusterMsg::FeedFailed {
                    feed: Feed::Metrics,
                    failure: Failure {
                        kind: FailureKind::Server,
                        reason: format!("the /metrics answer does not parse: {e}"),
                        action: "Check that the server is a kube-apiserver.".into(),
                        rbac: None,
                        retry_in: Duration::ZERO,
                    },
                }),
                at,
            },
            Err(_) => continue,
        };
        if tx.send(SourceMsg::Live(msg)).await.is_err() {
            return;
        }
    }
}

/// The policy or binding `kind`/`name` of `set`, as a document holds it (None for a webhook
/// configuration's kind, or one `set` left out).
fn policy_object(set: &PolicySet, kind: AdmissionKind, name: &str) -> Option<PolicyObject> {
    fn named<T: Clone>(list: &[T], name: &str, of: impl Fn(&T) -> &str) -> Option<T> {
        list.iter().find(|o| of(o) == name).cloned()
    }
    match kind {
        AdmissionKind::ValidatingAdmissionPolicy => {
            named(&set.validating, name, |o| &o.name).map(PolicyObject::Policy)
        }
        AdmissionKind::ValidatingAdmissionPolicyBinding => {
            named(&set.validating_bindings, name, |o| &o.name).map(PolicyObject::Binding)
        }
        AdmissionKind::MutatingAdmissionPolicy => {
            named(&set.mutating, name, |o| &o.name).map(PolicyObject::MutatingPolicy)
        }
        AdmissionKind::MutatingAdmissionPolicyBinding => {
            named(&set.mutating_bindings, name, |o| &o.name).map(PolicyObject::MutatingBinding)
        }
        AdmissionKind::MutatingWebhookConfiguration
        | AdmissionKind::ValidatingWebhookConfiguration => None,
    }
}

/// The engine over the configurations in force (webhook configurations, admission policies and
/// their bindings), and the message telling the console.
fn configurations(
    set: &WebhookSet,
    options: &EngineOptions,
    settings: &ReplaySettings,
) -> (Arc<Replayer>, SourceMsg) {
    let all = set.all();
    let p = &set.policies;
    let engine = Engine::new(&all, options.clone())
        .with_policies(&p.validating, &p.validating_bindings)
        .with_mutating_policies(&p.mutating, &p.mutating_bindings);
    let documents = set
        .objects
        .iter()
        .map(|o| ConfigDocument {
            origin: DocumentOrigin::Cluster {
                kind: o.kind,
                name: o.name.clone(),
            },
            text: editable_yaml(&o.object),
            configurations: all
                .iter()
                .filter(|c| AdmissionKind::from(c.kind) == o.kind && c.name == o.name)
                .cloned()
                .collect(),
            policies: policy_object(p, o.kind, &o.name).into_iter().collect(),
        })
        .collect();
    let msg = SourceMsg::Live(LiveMsg::Configurations {
        hooks: hook_infos(&engine),
        configurations: all.len(),
        policies: p.validating.len() + p.mutating.len(),
        bindings: p.validating_bindings.len() + p.mutating_bindings.len(),
        unreadable: set.unreadable.clone(),
        problems: set.problems.clone(),
        synced: set.synced(),
        documents,
    });
    let replayer = Replayer::new(Arc::new(engine), settings.clone());
    (Arc::new(replayer), msg)
}

/// Server-side applies (or dry runs) `request`'s configurations over a connection of its own,
/// each with a diff from the object in force, and sends what happened.
async fn apply(options: ClusterOptions, request: ApplyRequest, tx: mpsc::Sender<SourceMsg>) {
    let mut outcomes = Vec::with_capacity(request.edits.len());
    match Cluster::connect(&options).await {
        Err(e) => {
            for edit in &request.edits {
                outcomes.push(ApplyOutcome {
                    kind: edit.kind,
                    name: edit.name.clone(),
                    result: Err(e.to_string()),
                });
            }
        }
        Ok(cluster) => {
            for edit in &request.edits {
                let result = cluster
                    .apply_edit(edit, request.dry_run, request.force)
                    .await
                    .map(|applied| {
                        let diff =
                            apply_diff(&edit.name, applied.current.as_ref(), &applied.dry_run);
                        let report = write_report(&applied, request.dry_run, diff);
                        (applied.stored.unwrap_or(applied.dry_run), report)
                    })
                    .map_err(|e| e.to_string());
                outcomes.push(ApplyOutcome {
                    kind: edit.kind,
                    name: edit.name.clone(),
                    result,
                });
            }
        }
    }
    let msg = LiveMsg::Applied(Box::new(ApplyResult { request, outcomes }));
    let _ = tx.send(SourceMsg::Live(msg)).await;
}

/// What a write sends and takes over, as `#` lines above the dry run's diff: the fields
/// `hookscope` will own, the fields removed, and (with force) the fields taken over from their
/// managers, in the apiserver's words.
fn write_report(applied: &crate::live::cluster::Applied, dry_run: bool, diff: String) -> String {
    let plan = &applied.plan;
    let mut out = String::new();
    if plan.config.is_some() {
        out.push_str(&format!(
            "# applied as field manager hookscope, which {} only: {}\n",
            if dry_run {
                "would then own"
            } else {
                "now owns"
            },
            plan.owned.join(", ")
        ));
    }
    if !plan.removed.is_empty() {
        out.push_str(&format!(
            "# removed by a JSON patch that tests each value is still the one you edited: {}\n",
            plan.removed_paths().join(", ")
        ));
    }
    if let Some(conflict) = &applied.taken_over {
        out.push_str(
            "# force takes these fields over from the managers that own them (nothing else):\n",
        );
        for line in conflict.lines() {
            out.push_str(&format!("#   {line}\n"));
        }
    }
    out.push_str(&diff);
    out
}

/// Replays `items` in a task of their own, sending each result as an event.
fn spawn_replay(
    replayer: Arc<Replayer>,
    items: Vec<InputItem>,
    replier: Seeding<ConsoleReplier>,
    tx: mpsc::Sender<SourceMsg>,
) {
    tokio::spawn(async move {
        let mut events =
            std::pin::pin!(replayer.events(futures::stream::iter(items), replier, IdMode::Random));
        while let Some(d) = events.next().await {
            let msg = SourceMsg::Event {
                event: Box::new(d.event),
                metrics: d.metrics.map(Box::new),
            };
            if tx.send(msg).await.is_err() {
                return;
            }
        }
    });
}

impl Source for LiveSource {
    fn run(
        self: Box<Self>,
        tx: mpsc::Sender<SourceMsg>,
        ctl: mpsc::Receiver<SourceCtl>,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(self.watch(tx, ctl))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    /// The cluster's definitions type custom resources as `--cluster` files do: the replays'
    /// registry resolves the resource and has its schema (defaults, scale, server-side apply);
    /// one that cannot be read is named.
    #[test]
    fn the_clusters_definitions_join_the_replays_registry() {
        let widget = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "resourceVersion": "7"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer", "default": 3}}}}}}}]}
        });
        let broken = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition", "metadata": {"name": "broken.example.com"},
            "spec": {"names": {"kind": "Broken"}}});
        let set = crate::live::cluster::CrdSet {
            objects: Arc::new(BTreeMap::from([
                ("broken.example.com".to_string(), broken),
                ("widgets.example.com".to_string(), widget),
            ])),
            synced: true,
        };
        let (specs, problems) = custom_resources(&set);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("broken.example.com"), "{problems:?}");
        let base = ResourceRegistry::builtin(crate::KubeVersion::NEWEST);
        assert_eq!(base.is_namespaced("example.com", "widgets"), None);
        let registry = with_crds(&base, &specs);
        assert_eq!(registry.is_namespaced("example.com", "widgets"), Some(true));
        let gvr = crate::api::GroupVersionResource {
            group: "example.com".into(),
            version: "v1".into(),
            resource: "widgets".into(),
        };
        let schema = registry.custom_resource_schema(&gvr).expect("its schema");
        assert_eq!(
            schema["properties"]["spec"]["properties"]["size"]["default"],
            3
        );
    }
}

//! The cluster connection: kubeconfig, watched webhook configurations, `/metrics` scrapes, and
//! (only when allowed) server-side apply.
//!
//! [`run`] connects as kubectl does (see [`kubeconfig_source`]), then keeps kube-runtime
//! watchers on `mutatingwebhookconfigurations`, `validatingwebhookconfigurations`, the admission
//! policies and their bindings in the versions discovery finds served ([`AdmissionKind`]), the
//! resources of the policies' `paramKind`s (their parameters), and `namespaces` (whose labels
//! the namespace selectors read), `customresourcedefinitions` (the types of custom resources) and
//! scrapes `/metrics` every
//! [`ClusterOptions::scrape_interval`], sending [`ClusterMsg`]s. It never gives
//! up: failures are reported with a reason, what to do, and when it retries. [`Cluster`] is the
//! connection itself, for one-off requests such as [`Cluster::apply_edit`].

mod crds;
mod failure;
mod feed;
mod fleet;
mod kinds;
mod kubeconfig;
mod namespaces;
mod prometheus;
mod write;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::config::KubeConfigOptions;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::WebhookConfiguration;
use crate::config::policy::PolicySet;
use crate::engine::policy::ParamObjects;

pub use crds::CrdSet;
pub use failure::{Failure, FailureKind, RbacAdvice};
pub use feed::{RebaseError, apply_diff, editable_yaml, rebase, yaml_diff};
pub use fleet::{
    SERVICE_NAME, SERVICE_NAMESPACE, ScrapeParseError, apiservers_from_endpoints,
    apiservers_from_slice,
};
pub use kinds::{AdmissionKind, GroupVersion, Served, pick_versions};
pub use kubeconfig::{
    KubeconfigSource, home_dir, kubeconfig_source, read_kubeconfig, select_context,
};
pub use namespaces::{ClusterNamespaces, NamespaceLabels, NamespaceSet};
pub use prometheus::{
    PrometheusError, PrometheusFlagError, PrometheusOptions, admission_selector, parse_answer,
};
pub use write::{Applied, Edit, Plan, extract, plan, removal_patch};

use crds::CrdStore;
use failure::{Target, api_code, describe, is_transport, rbac_for};
use feed::KindStore;
use namespaces::NamespaceStore;

pub use write::FIELD_MANAGER;

/// The product token of hookscope's `User-Agent` (`hookscope/0.1.0`), which audit events
/// record: the console tells its own requests by it.
pub const USER_AGENT_PRODUCT: &str = "hookscope/";

/// The `Accept` header of a `/metrics` scrape (Prometheus text format 0.0.4).
pub const METRICS_ACCEPT: &str = "text/plain;version=0.0.4";

/// Retry delays: `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    fn next(&self, current: Duration) -> Duration {
        (current * 2).min(self.max).max(self.initial)
    }
}

/// How to connect, as `hookscope live` takes it from its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// `--kubeconfig FILE` (else `KUBECONFIG`, else `~/.kube/config`).
    pub kubeconfig: Option<PathBuf>,
    /// `--context NAME` (else the kubeconfig's `current-context`).
    pub context: Option<String>,
    /// `-n NS` (else the context's namespace, else `default`); webhook configurations are
    /// cluster-scoped, so this only sets the client's default namespace.
    pub namespace: Option<String>,
    /// How often `/metrics` is scraped (`--scrape-interval`, default 10 s).
    pub scrape_interval: Duration,
    /// `--allow-writes`: permit [`Cluster::apply_edit`].
    pub allow_writes: bool,
    /// Retry delays after failures (tests make them short).
    pub backoff: Backoff,
    /// `--prometheus URL`: read the admission metrics from a Prometheus-compatible API instead
    /// of scraping `/metrics`.
    pub prometheus: Option<PrometheusOptions>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            kubeconfig: None,
            context: None,
            namespace: None,
            scrape_interval: Duration::from_secs(10),
            allow_writes: false,
            backoff: Backoff::default(),
            prometheus: None,
        }
    }
}

/// Why the connection could not be set up from the kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No `--kubeconfig`, no `KUBECONFIG`, no default file, not in a pod.
    #[error(
        "no kubeconfig: --kubeconfig is not given, KUBECONFIG is not set, and {} does not exist",
        looked_at.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "the home directory is unknown, so ~/.kube/config".to_string())
    )]
    NoKubeconfig {
        /// The default path that was checked.
        looked_at: Option<PathBuf>,
    },
    /// A kubeconfig file could not be read or parsed.
    #[error("cannot read kubeconfig {}: {message}", path.display())]
    KubeconfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// No `--context` and no `current-context`.
    #[error("the kubeconfig has no current-context and --context is not given")]
    NoContext,
    /// The context named does not exist.
    #[error("context {context:?} is not in the kubeconfig")]
    UnknownContext {
        /// The name asked for.
        context: String,
        /// The contexts the kubeconfig has.
        available: Vec<String>,
    },
    /// The selected cluster or user entry is unusable.
    #[error("kubeconfig: {0}")]
    Config(#[from] kube::config::KubeconfigError),
    /// No kubeconfig was found and the in-cluster service account is unusable.
    #[error("in-cluster configuration: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    /// The client could not be built (TLS setup, credentials).
    #[error("building the client: {0}")]
    Client(#[source] kube::Error),
    /// A request failed.
    #[error("{}", failure::chain_text(.0))]
    Request(#[source] kube::Error),
}

/// Why [`Cluster::apply_edit`] did not apply.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Writes are off (no `--allow-writes`).
    #[error("writes are disabled: hookscope live is read-only unless started with --allow-writes")]
    ReadOnly,
    /// The configuration could not be turned into an apply patch.
    #[error("the configuration has no name")]
    NoName,
    /// The edit or the cluster's object does not read as the kind's schema.
    #[error("cannot compare the edit with the cluster's version: {0}")]
    Unreadable(String),
    /// The edit changes nothing of the cluster's version.
    #[error("nothing to apply: the edit changes nothing of the cluster's version")]
    NothingChanged,
    /// The server refused the dry run or the apply.
    #[error("{}", .0)]
    Rejected(Failure),
}

/// Who and where, once connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The API server URL.
    pub server: String,
    /// The context used (empty for in-cluster).
    pub context: String,
    /// The kubeconfig user of the context (empty when none).
    pub user: String,
    /// The client's default namespace.
    pub namespace: String,
    /// Where the kubeconfig came from.
    pub source: KubeconfigSource,
}

/// The connection state after a successful probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    /// Server, context, user, namespace.
    pub info: ConnectionInfo,
    /// The server's `gitVersion` (from `/version`).
    pub server_version: String,
}

/// A source of data the console shows, each with its own permission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feed {
    /// The watcher of one admission configuration kind.
    Admission(AdmissionKind),
    /// The Namespace watcher (their labels, for namespace selectors).
    Namespaces,
    /// The CustomResourceDefinition watcher (the types of custom resources).
    Crds,
    /// The watchers of the parameter objects of the policies in force (their `paramKind`s).
    Params,
    /// The `/metrics` scrape.
    Metrics,
    /// Scraping each apiserver apart (the endpoints of `default/kubernetes`, each apiserver's
    /// `/metrics`); its failure says why `/metrics` is read through the kubeconfig's server.
    Instances,
    /// The queries of `--prometheus`.
    Prometheus,
}

impl Feed {
    /// The MutatingWebhookConfiguration watcher.
    pub const MUTATING_WEBHOOKS: Feed =
        Feed::Admission(AdmissionKind::MutatingWebhookConfiguration);
    /// The ValidatingWebhookConfiguration watcher.
    pub const VALIDATING_WEBHOOKS: Feed =
        Feed::Admission(AdmissionKind::ValidatingWebhookConfiguration);

    /// The resource a watcher feed lists and watches (`None` for metrics).
    pub fn resource(self) -> Option<&'static str> {
        match self {
            Feed::Admission(kind) => Some(kind.resource()),
            Feed::Namespaces => Some("namespaces"),
            Feed::Crds => Some("customresourcedefinitions"),
            Feed::Params | Feed::Metrics | Feed::Instances | Feed::Prometheus => None,
        }
    }

    /// The API group of the resource (empty for the core group and for metrics).
    pub fn group(self) -> &'static str {
        match self {
            Feed::Admission(_) => crate::config::GROUP,
            Feed::Crds => "apiextensions.k8s.io",
            Feed::Namespaces
            | Feed::Params
            | Feed::Metrics
            | Feed::Instances
            | Feed::Prometheus => "",
        }
    }
}

/// What happened to a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeAction {
    /// It appeared.
    Added,
    /// Its content changed.
    Modified,
    /// It disappeared.
    Deleted,
}

/// How a change was noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A watch event.
    Event,
    /// A relist (after a 410 or a reconnection) found it differing from what was known.
    Relist,
}

/// One entry of the change history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The kind of the object: a webhook configuration, a policy or a binding.
    pub kind: AdmissionKind,
    /// The configuration's name.
    pub name: String,
    /// Added, Modified or Deleted.
    pub action: ChangeAction,
    /// When hookscope saw it.
    pub observed_at: SystemTime,
    /// The time of the latest `managedFields` entry (RFC 3339, the server's clock), if any.
    pub server_time: Option<String>,
    /// The manager of the latest `managedFields` entry, or `unknown` (always for deletions: the
    /// deleter is not recorded in the object).
    pub who: String,
    /// That entry's operation (`Apply` or `Update`).
    pub operation: Option<String>,
    /// The resourceVersion of the new state (for deletions, of the deletion).
    pub resource_version: String,
    /// A unified diff old → new of the objects as YAML (resourceVersion and managedFields left
    /// out); `/dev/null` on the missing side for additions and deletions.
    pub diff: String,
    /// How it was noticed.
    pub seen: Seen,
}

/// The admission configurations in force: the webhook configurations in the order the apiserver
/// dispatches them, and the admission policies and bindings.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookSet {
    /// MutatingWebhookConfigurations, sorted by name (defaulted by the project's loader).
    pub mutating: Vec<WebhookConfiguration>,
    /// ValidatingWebhookConfigurations, sorted by name.
    pub validating: Vec<WebhookConfiguration>,
    /// The admission policies and bindings, defaulted and validated by the project's loader
    /// (each list sorted by name).
    pub policies: PolicySet,
    /// Objects that could not be read as configurations, policies or bindings, and policies or
    /// bindings the loader finds invalid, one message each.
    pub problems: Vec<String>,
    /// The objects of `mutating`, `validating` and `policies`, as the server sent them (for
    /// editing), kind by kind.
    pub objects: Vec<ConfigurationObject>,
    /// Whether the mutating watcher has completed its first list.
    pub mutating_synced: bool,
    /// Whether the validating watcher has completed its first list.
    pub validating_synced: bool,
    /// Whether every policy kind has been listed once, found not served by discovery, or found
    /// unreadable (see `unreadable`).
    pub policies_synced: bool,
    /// The policy kinds that cannot be read now (a 403, discovery failing), with why: replays
    /// run without them.
    pub unreadable: Vec<String>,
}

impl WebhookSet {
    /// Whether everything in force is known: every watcher has listed once.
    pub fn synced(&self) -> bool {
        self.mutating_synced && self.validating_synced && self.policies_synced
    }

    /// Mutating then validating: the input [`crate::engine::Engine::new`] takes.
    pub fn all(&self) -> Vec<WebhookConfiguration> {
        self.mutating
            .iter()
            .chain(&self.validating)
            .cloned()
            .collect()
    }
}

/// A configuration object as the server sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigurationObject {
    /// A webhook configuration's kind, or a policy's or binding's.
    pub kind: AdmissionKind,
    /// `metadata.name`.
    pub name: String,
    /// The object (JSON, with `apiVersion` and `kind`).
    pub object: Value,
}

/// One round of `/metrics` scrapes, unparsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsScrape {
    /// The exposition texts as served: one per apiserver, each with its `host:port`, or one
    /// without, through the kubeconfig's server.
    pub texts: Vec<(Option<String>, String)>,
    /// When the responses arrived.
    pub at: SystemTime,
}

/// What [`run`] reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterMsg {
    /// An attempt to connect starts.
    Connecting {
        /// The server URL, once the kubeconfig is read.
        server: String,
        /// The context.
        context: String,
        /// 1 for the first attempt, counting up until connected.
        attempt: u32,
    },
    /// `/version` answered: connected.
    Connected(Connected),
    /// The connection could not be made or was lost; a retry follows after `retry_in`.
    Failed(Failure),
    /// One feed fails (e.g. 403 on listing validatingwebhookconfigurations) while the rest work;
    /// it is retried after `retry_in`.
    FeedFailed {
        /// Which feed.
        feed: Feed,
        /// Why, and for 403 the RBAC rule.
        failure: Failure,
    },
    /// A feed works: sent by a watcher at its first list or event after it started or failed,
    /// and by the scraper after its first scrape of a connection or after a failure. With
    /// [`ClusterMsg::FeedFailed`] it makes each feed's latest outcome.
    FeedRecovered(Feed),
    /// What the server serves of the admission policy kinds, found by discovery once per
    /// connection: a kind it does not serve is no failure, it is not watched.
    Discovered(Vec<Served>),
    /// The namespaces and their labels changed (or were listed for the first time).
    Namespaces(NamespaceSet),
    /// The CustomResourceDefinitions changed (or were listed for the first time).
    Crds(CrdSet),
    /// The parameter objects of the policies in force changed (or were listed for the first
    /// time): every object of every `paramKind` the policies name, each with the `apiVersion` and
    /// `kind` the policies write.
    Params(ParamObjects),
    /// The configurations in force changed (or were listed for the first time).
    Configurations(WebhookSet),
    /// One change of the history; sent before the [`ClusterMsg::Configurations`] that includes it.
    Change(Change),
    /// A `/metrics` scrape.
    Metrics(MetricsScrape),
    /// The admission series a Prometheus-compatible API answered (`--prometheus`), by
    /// evaluation time, oldest first: the history before the console started, then one per
    /// scrape interval.
    Queried(Vec<(SystemTime, crate::live::metrics::AdmissionSnapshot)>),
}

/// A client for one cluster and context.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    info: ConnectionInfo,
    allow_writes: bool,
    /// The client's configuration, for a client of one apiserver of the cluster.
    config: kube::Config,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("info", &self.info)
            .field("allow_writes", &self.allow_writes)
            .finish_non_exhaustive()
    }
}

/// The object as JSON with its kind and apiVersion (list items come without them).
fn to_json(kind: AdmissionKind, version: GroupVersion, object: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_else(|_| json!({}));
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), json!(version.api_version()));
        map.insert("kind".into(), json!(kind.kind()));
    }
    value
}

impl Cluster {
    /// Reads the kubeconfig (`--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`), selects
    /// the context and builds the client. No request is sent.
    pub async fn connect(options: &ClusterOptions) -> Result<Cluster, ClusterError> {
        let env = std::env::var_os("KUBECONFIG");
        let source = kubeconfig_source(
            options.kubeconfig.as_deref(),
            env.as_deref(),
            home_dir().as_deref(),
        )?;
        Cluster::connect_with(source, options).await
    }

    /// Like [`Cluster::connect`] with the kubeconfig source decided by the caller.
    pub async fn connect_with(
        source: KubeconfigSource,
        options: &ClusterOptions,
    ) -> Result<Cluster, ClusterError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (mut config, context, user) = if source == KubeconfigSource::InCluster {
            let config = kube::Config::incluster()?;
            (config, String::new(), String::new())
        } else {
            let kubeconfig = read_kubeconfig(&source)?;
            let (context, user) = select_context(&kubeconfig, options.context.as_deref())?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &KubeConfigOptions {
                    context: Some(context.clone()),
                    ..KubeConfigOptions::default()
                },
            )
            .await?;
            (config, context, user)
        };
        if let Some(namespace) = &options.namespace {
            config.default_namespace = namespace.clone();
        }
        let agent = format!("{USER_AGENT_PRODUCT}{}", env!("CARGO_PKG_VERSION"));
        if let Ok(value) = http::HeaderValue::from_str(&agent) {
            config.headers.push((http::header::USER_AGENT, value));
        }
        let info = ConnectionInfo {
            server: config
                .cluster_url
                .to_string()
                .trim_end_matches('/')
                .to_string(),
            context,
            user,
            namespace: config.default_namespace.clone(),
            source,
        };
        let client = kube::Client::try_from(config.clone()).map_err(ClusterError::Client)?;
        Ok(Cluster {
            client,
            info,
            allow_writes: options.allow_writes,
            config,
        })
    }

    /// Server, context, user, namespace, kubeconfig source.
    pub fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// The kube client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    fn target(&self) -> Target<'_> {
        Target {
            server: &self.info.server,
            context: &self.info.context,
            user: &self.info.user,
        }
    }

    /// `GET /version`: the server's `gitVersion`.
    pub async fn server_version(&self) -> Result<String, kube::Error> {
        Ok(self.client.apiserver_version().await?.git_version)
    }

    /// Which version of `admissionregistration.k8s.io`, if any, serves each policy kind: the
    /// group's versions (`GET /apis`), then each version's resources (`GET /apis/GROUP/VERSION`),
    /// as kubectl discovers them. A server without the group serves none.
    pub async fn discover_policies(&self) -> Result<Vec<Served>, kube::Error> {
        let groups = self.client.list_api_groups().await?;
        let Some(group) = groups
            .groups
            .iter()
            .find(|g| g.name == crate::config::GROUP)
        else {
            return Ok(pick_versions([]));
        };
        let mut lists = Vec::new();
        for v in &group.versions {
            if GroupVersion::parse(&v.version).is_none() {
                continue;
            }
            let list = self
                .client
                .list_api_group_resources(&v.group_version)
                .await?;
            let resources: Vec<String> = list.resources.into_iter().map(|r| r.name).collect();
            lists.push((v.version.clone(), resources));
        }
        Ok(pick_versions(
            lists.iter().map(|(v, r)| (v.as_str(), r.clone())),
        ))
    }

    /// `GET /metrics` with the Prometheus text `Accept` header.
    pub async fn scrape_metrics(&self) -> Result<MetricsScrape, kube::Error> {
        let request = http::Request::get("/metrics")
            .header(http::header::ACCEPT, METRICS_ACCEPT)
            .body(Vec::new())
            .map_err(kube::Error::HttpError)?;
        let text = self.client.request_text(request).await?;
        Ok(MetricsScrape {
            texts: vec![(None, text)],
            at: SystemTime::now(),
        })
    }

    /// A client of the apiserver at `address` (`host:port`, as the endpoints of
    /// `default/kubernetes` name it): the kubeconfig's credentials and certificate authority,
    /// the server certificate checked against that address (an apiserver's serving certificate
    /// names its advertise address).
    pub fn instance_client(&self, address: &str) -> Result<kube::Client, kube::Error> {
        let mut config = self.config.clone();
        config.cluster_url = format!("https://{address}")
            .parse()
            .map_err(|e: http::uri::InvalidUri| kube::Error::HttpError(e.into()))?;
        kube::Client::try_from(config)
    }

    /// The admission configuration `name` of `kind` as the server stores it in `version` (None
    /// when there is none).
    pub async fn get_configuration(
        &self,
        kind: AdmissionKind,
        version: GroupVersion,
        name: &str,
    ) -> Result<Option<Value>, kube::Error> {
        let api: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &kind.api_resource(version));
        Ok(api.get_opt(name).await?.map(|o| to_json(kind, version, &o)))
    }
}

/// Connects and watches until `tx` is closed; never panics and never gives up. See
/// [`ClusterMsg`] for what is reported.
pub async fn run(options: ClusterOptions, tx: mpsc::Sender<ClusterMsg>) {
    let mut stores = Stores {
        kinds: AdmissionKind::ALL.map(KindStore::new),
        served: None,
        namespaces: NamespaceStore::default(),
        crds: CrdStore::default(),
        params: Vec::new(),
        unresolved: Default::default(),
    };
    // A Prometheus-compatible API is another server: it is read whether or not the cluster
    // answers, and its history is filled once.
    let _prometheus = options.prometheus.clone().map(|p| {
        AbortOnDrop(tokio::spawn(prometheus::query_loop(
            p,
            options.clone(),
            tx.clone(),
        )))
    });
    let mut delay = options.backoff.initial;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let cluster = match Cluster::connect(&options).await {
            Ok(cluster) => cluster,
            Err(e) => {
                if !send(&tx, ClusterMsg::Failed(e.to_failure(delay))).await {
                    return;
                }
                if !pause(&tx, delay).await {
                    return;
                }
                delay = options.backoff.next(delay);
                continue;
            }
        };
        let message = ClusterMsg::Connecting {
            server: cluster.info.server.clone(),
            context: cluster.info.context.clone(),
            attempt,
        };
        if !send(&tx, message).await {
            return;
        }
        let probe = tokio::time::timeout(Duration::from_secs(30), cluster.server_version()).await;
        let version = match probe {
            Ok(Ok(version)) => version,
            Ok(Err(e)) => {
                let failure = describe(&e, "asking for /version", &cluster.target(), delay);
                if !send(&tx, ClusterMsg::Failed(failure)).await || !pause(&tx, delay).await {
                    return;
                }
                delay = options.backoff.next(delay);
                continue;
            }
            Err(_) => {
                let failure = Failure {
                    kind: FailureKind::Unreachable,
                    reason: format!("{} did not answer /version within 30 s.", cluster.info.server),
                    action: "Check that the cluster is running and reachable from here (VPN, proxy, port-forward).".to_string(),
                    rbac: None,
                    retry_in: delay,
                };
                if !send(&tx, ClusterMsg::Failed(failure)).await || !pause(&tx, delay).await {
                    return;
                }
                delay = options.backoff.next(delay);
                continue;
            }
        };
        let release = crate::version::ServerRelease::of(&version).modelled;
        for store in &mut stores.kinds {
            store.set_release(release);
        }
        let connected = Connected {
            info: cluster.info.clone(),
            server_version: version,
        };
        if !send(&tx, ClusterMsg::Connected(connected)).await {
            return;
        }
        attempt = 0;
        delay = options.backoff.initial;
        match session(&cluster, &options, &mut stores, &tx).await {
            None => return,
            Some(mut failure) => {
                failure.retry_in = delay;
                if !send(&tx, ClusterMsg::Failed(failure)).await || !pause(&tx, delay).await {
                    return;
                }
                delay = options.backoff.next(delay);
            }
        }
    }
}

/// Sends; false when the receiver is gone.
async fn send(tx: &mpsc::Sender<ClusterMsg>, message: ClusterMsg) -> bool {
    tx.send(message).await.is_ok()
}

/// Waits `delay`; false when the receiver went away meanwhile.
async fn pause(tx: &mpsc::Sender<ClusterMsg>, delay: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(delay) => true,
        _ = tx.closed() => false,
    }
}

/// What a watcher's stream yields.
type WatchItem = Result<watcher::Event<DynamicObject>, watcher::Error>;

type EventStream = futures::stream::BoxStream<'static, WatchItem>;

/// What a watcher lists and watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    Admission(AdmissionKind, GroupVersion),
    Namespaces,
    Crds,
    /// The parameter objects of `Stores::params[i]`.
    Params(usize),
}

impl Watched {
    fn feed(self) -> Feed {
        match self {
            Watched::Admission(kind, _) => Feed::Admission(kind),
            Watched::Namespaces => Feed::Namespaces,
            Watched::Crds => Feed::Crds,
            Watched::Params(_) => Feed::Params,
        }
    }
}

/// What the watchers have seen.
struct Stores {
    /// One per [`AdmissionKind`], in the order of [`AdmissionKind::ALL`].
    kinds: [KindStore; 6],
    /// What discovery found on the latest connection that asked.
    served: Option<Vec<Served>>,
    namespaces: NamespaceStore,
    crds: CrdStore,
    /// The parameter objects, one store per `paramKind` of the policies in force so far.
    params: Vec<ParamStore>,
    /// The `paramKind`s (apiVersion, kind) discovery could not resolve on this connection.
    unresolved: std::collections::BTreeSet<(String, String)>,
}

/// The objects of one `paramKind`, by namespace and name.
struct ParamStore {
    /// `apiVersion` and `kind` as the policies write them.
    key: (String, String),
    /// Where they are listed and watched (all namespaces).
    resource: ApiResource,
    objects: std::collections::BTreeMap<(String, String), Value>,
    relisting: Option<std::collections::BTreeMap<(String, String), Value>>,
    /// A policy in force names it, so it is watched; otherwise it holds nothing.
    watching: bool,
}

impl ParamStore {
    /// The object as the policies see it, and its namespace and name.
    fn entry(&self, object: &DynamicObject) -> ((String, String), Value) {
        let mut value = serde_json::to_value(object).unwrap_or_else(|_| json!({}));
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), json!(self.key.0));
            map.insert("kind".into(), json!(self.key.1));
        }
        let at = (
            object.metadata.namespace.clone().unwrap_or_default(),
            object.metadata.name.clone().unwrap_or_default(),
        );
        (at, value)
    }

    /// A watch event: whether the objects changed, and whether the watcher progressed.
    fn event(&mut self, event: watcher::Event<DynamicObject>) -> (bool, bool) {
        match event {
            watcher::Event::Init => {
                self.relisting = Some(Default::default());
                (false, false)
            }
            watcher::Event::InitApply(object) => {
                let (at, value) = self.entry(&object);
                self.relisting
                    .get_or_insert_with(Default::default)
                    .insert(at, value);
                (false, true)
            }
            watcher::Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                self.objects = listed;
                // Every complete list is news, even an empty first one: the params are known
                // from now on.
                (true, true)
            }
            watcher::Event::Apply(object) => {
                let (at, value) = self.entry(&object);
                let changed = self.objects.get(&at) != Some(&value);
                self.objects.insert(at, value);
                (changed, true)
            }
            watcher::Event::Delete(object) => {
                let (at, _) = self.entry(&object);
                (self.objects.remove(&at).is_some(), true)
            }
        }
    }
}

/// Every parameter object known, for the replays.
fn param_objects(stores: &Stores) -> ParamObjects {
    ParamObjects::new(
        stores
            .params
            .iter()
            .flat_map(|p| p.objects.values().cloned())
            .collect(),
    )
}

/// The `paramKind`s (apiVersion, kind) of the policies in force.
fn param_kinds(set: &PolicySet) -> std::collections::BTreeSet<(String, String)> {
    let validating = set
        .validating
        .iter()
        .filter_map(|p| p.spec.param_kind.as_ref());
    let mutating = set
        .mutating
        .iter()
        .filter_map(|p| p.spec.param_kind.as_ref());
    validating
        .chain(mutating)
        .filter(|k| !k.kind.is_empty())
        .map(|k| (k.api_version.clone(), k.kind.clone()))
        .collect()
}

/// Watches the parameter objects of every `paramKind` of the policies in force, each resolved
/// to its resource by discovery (as kubectl resolves a kind), and stops watching those no policy
/// names any more. One discovery cannot resolve is a failure of the params feed, tried again on
/// the next connection.
async fn watch_params(
    cluster: &Cluster,
    options: &ClusterOptions,
    stores: &mut Stores,
    watches: &mut Vec<Watch>,
) -> Vec<ClusterMsg> {
    let mut messages = Vec::new();
    let wanted = param_kinds(&webhook_set(stores).policies);
    let mut dropped = false;
    for (i, store) in stores.params.iter_mut().enumerate() {
        let named = wanted.contains(&store.key);
        if store.watching && !named {
            watches.retain(|w| w.watched != Watched::Params(i));
            store.objects.clear();
            store.relisting = None;
            dropped = true;
        } else if !store.watching && named {
            let watched = Watched::Params(i);
            let resource = store.resource.clone();
            watches.push(Watch::with_resource(cluster, options, watched, resource));
        }
        store.watching = named;
    }
    if dropped {
        messages.push(ClusterMsg::Params(param_objects(stores)));
    }
    for (api_version, kind) in wanted {
        let key = (api_version.clone(), kind.clone());
        if stores.params.iter().any(|p| p.key == key) || stores.unresolved.contains(&key) {
            continue;
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), api_version.clone()),
        };
        let gvk = kube::api::GroupVersionKind::gvk(&group, &version, &kind);
        let found = tokio::time::timeout(
            Duration::from_secs(30),
            kube::discovery::pinned_kind(&cluster.client, &gvk),
        )
        .await;
        match found {
            Ok(Ok((resource, _))) => {
                stores.params.push(ParamStore {
                    key,
                    resource: resource.clone(),
                    objects: Default::default(),
                    relisting: None,
                    watching: true,
                });
                let watched = Watched::Params(stores.params.len() - 1);
                watches.push(Watch::with_resource(cluster, options, watched, resource));
            }
            failed => {
                let why = match failed {
                    Ok(Err(e)) => failure::chain_text(&e),
                    _ => "discovery did not answer within 30 s".to_string(),
                };
                stores.unresolved.insert(key);
                messages.push(ClusterMsg::FeedFailed {
                    feed: Feed::Params,
                    failure: Failure {
                        kind: FailureKind::Server,
                        reason: format!(
                            "The paramKind {api_version} {kind} of the policies in force cannot be resolved to a resource: {why}"
                        ),
                        action: "Check that the kind is served (its CustomResourceDefinition installed); replays find no parameter of it. hookscope tries again on the next connection.".to_string(),
                        rbac: None,
                        retry_in: Duration::ZERO,
                    },
                });
            }
        }
    }
    messages
}

fn watch_stream(cluster: &Cluster, resource: &ApiResource) -> EventStream {
    let api: Api<DynamicObject> = Api::all_with(cluster.client.clone(), resource);
    watcher::watcher(api, watcher::Config::default()).boxed()
}

/// One watcher and its retry state.
struct Watch {
    watched: Watched,
    /// What it lists and watches.
    resource: ApiResource,
    stream: EventStream,
    /// After a failure, the stream is polled again once this has elapsed.
    pause: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    delay: Duration,
    /// Its next progress is reported as [`ClusterMsg::FeedRecovered`]: it failed, or it has not
    /// progressed yet on this connection (a failure of an earlier connection is then cleared).
    report_ok: bool,
}

impl Watch {
    /// A watcher of an admission kind or of the namespaces.
    fn new(cluster: &Cluster, options: &ClusterOptions, watched: Watched) -> Watch {
        let resource = match watched {
            Watched::Admission(kind, version) => kind.api_resource(version),
            Watched::Namespaces | Watched::Params(_) => {
                ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&())
            }
            Watched::Crds => ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
            },
        };
        Watch::with_resource(cluster, options, watched, resource)
    }

    fn with_resource(
        cluster: &Cluster,
        options: &ClusterOptions,
        watched: Watched,
        resource: ApiResource,
    ) -> Watch {
        Watch {
            watched,
            stream: watch_stream(cluster, &resource),
            resource,
            pause: None,
            delay: options.backoff.initial,
            report_ok: true,
        }
    }
}

enum Step {
    Nothing,
    Messages(Vec<ClusterMsg>),
    Lost(Failure),
}

impl Step {
    /// `messages`, after the feed's recovery when the watcher `progressed` after starting or
    /// failing.
    fn after(
        watch: &mut Watch,
        options: &ClusterOptions,
        progressed: bool,
        mut messages: Vec<ClusterMsg>,
    ) -> Step {
        if progressed {
            progress(watch, options, &mut messages);
        }
        if messages.is_empty() {
            Step::Nothing
        } else {
            Step::Messages(messages)
        }
    }
}

fn webhook_set(stores: &Stores) -> WebhookSet {
    let store = |kind: AdmissionKind| &stores.kinds[kind.index()];
    let (mutating_store, validating_store) = (
        store(AdmissionKind::MutatingWebhookConfiguration),
        store(AdmissionKind::ValidatingWebhookConfiguration),
    );
    let mut problems = Vec::new();
    let mutating = mutating_store.configurations(&mut problems);
    let validating = validating_store.configurations(&mut problems);
    let mut policies = PolicySet::default();
    let mut unreadable = Vec::new();
    for kind in AdmissionKind::POLICIES {
        store(kind).policies(&mut policies, &mut problems);
        if let Some(why) = &store(kind).failing {
            unreadable.push(format!("{}: {why}", kind.resource()));
        }
    }
    WebhookSet {
        mutating,
        validating,
        policies,
        problems,
        objects: AdmissionKind::ALL
            .iter()
            .flat_map(|kind| store(*kind).objects())
            .collect(),
        mutating_synced: mutating_store.synced,
        validating_synced: validating_store.synced,
        policies_synced: AdmissionKind::POLICIES
            .iter()
            .all(|k| store(*k).synced || store(*k).failing.is_some()),
        unreadable,
    }
}

/// A store of objects a watcher lists and watches.
trait Listed {
    /// A list starts (again).
    fn begin_list(&mut self);
    /// One object of the list in progress.
    fn listed(&mut self, object: &Value);
    /// The list is complete; true when anything differs from what was known.
    fn end_list(&mut self) -> bool;
    /// An object was added or modified; true when it changed.
    fn applied(&mut self, object: &Value) -> bool;
    /// An object was deleted; true when it was known.
    fn deleted(&mut self, object: &Value) -> bool;
}

/// A watch event into `store`: whether the watcher progressed, and whether the objects changed.
fn listed_event(store: &mut impl Listed, item: watcher::Event<DynamicObject>) -> (bool, bool) {
    let json = |o: &DynamicObject| serde_json::to_value(o).unwrap_or_else(|_| json!({}));
    match item {
        watcher::Event::Init => {
            store.begin_list();
            (false, false)
        }
        watcher::Event::InitApply(object) => {
            store.listed(&json(&object));
            (true, false)
        }
        watcher::Event::InitDone => (true, store.end_list()),
        watcher::Event::Apply(object) => (true, store.applied(&json(&object))),
        watcher::Event::Delete(object) => (true, store.deleted(&json(&object))),
    }
}

/// A namespace watch event: the set again when labels changed.
fn namespace_event(
    store: &mut NamespaceStore,
    item: watcher::Event<DynamicObject>,
) -> (bool, Option<ClusterMsg>) {
    let (progressed, changed) = listed_event(store, item);
    (
        progressed,
        changed.then(|| ClusterMsg::Namespaces(store.set())),
    )
}

/// A CustomResourceDefinition watch event: the set again when a definition changed.
fn crd_event(
    store: &mut CrdStore,
    item: watcher::Event<DynamicObject>,
) -> (bool, Option<ClusterMsg>) {
    let (progressed, changed) = listed_event(store, item);
    (progressed, changed.then(|| ClusterMsg::Crds(store.set())))
}

/// The feed's first progress since it started or failed is reported as working.
fn progress(watch: &mut Watch, options: &ClusterOptions, messages: &mut Vec<ClusterMsg>) {
    if watch.report_ok {
        watch.report_ok = false;
        watch.delay = options.backoff.initial;
        messages.insert(0, ClusterMsg::FeedRecovered(watch.watched.feed()));
    }
}

fn handle_event(
    watch: &mut Watch,
    cluster: &Cluster,
    options: &ClusterOptions,
    stores: &mut Stores,
    item: Result<watcher::Event<DynamicObject>, watcher::Error>,
) -> Step {
    let (kind, version, item) = match (watch.watched, item) {
        (watched, Err(error)) => {
            let mut step = watch_error(watch, cluster, options, error);
            // A policy kind that cannot be read is known to be unknown: the set says so, and
            // what is in force no longer waits for it.
            if let (Watched::Admission(kind, _), Step::Messages(messages)) = (watched, &mut step)
                && let Some(ClusterMsg::FeedFailed { failure, .. }) = messages.first()
                && kind.is_policy()
            {
                let store = &mut stores.kinds[kind.index()];
                let first = store.failing.is_none();
                store.failing = Some(failure.reason.clone());
                if first {
                    messages.push(ClusterMsg::Configurations(webhook_set(stores)));
                }
            }
            return step;
        }
        (Watched::Crds, Ok(event)) => {
            let (progressed, message) = crd_event(&mut stores.crds, event);
            return Step::after(watch, options, progressed, message.into_iter().collect());
        }
        (Watched::Namespaces, Ok(event)) => {
            let (progressed, message) = namespace_event(&mut stores.namespaces, event);
            return Step::after(watch, options, progressed, message.into_iter().collect());
        }
        (Watched::Params(i), Ok(event)) => {
            let Some(store) = stores.params.get_mut(i) else {
                return Step::Nothing;
            };
            let (changed, progressed) = store.event(event);
            let messages = changed.then(|| ClusterMsg::Params(param_objects(stores)));
            return Step::after(watch, options, progressed, messages.into_iter().collect());
        }
        (Watched::Admission(kind, version), Ok(event)) => (kind, version, event),
    };
    let store = &mut stores.kinds[kind.index()];
    let mut messages = Vec::new();
    let mut changed = false;
    let progressed = match item {
        watcher::Event::Init => {
            store.begin_list();
            false
        }
        watcher::Event::InitApply(object) => {
            store.listed(to_json(kind, version, &object));
            true
        }
        watcher::Event::InitDone => {
            let (changes, any) = store.end_list();
            changed = any;
            messages.extend(changes.into_iter().map(ClusterMsg::Change));
            true
        }
        watcher::Event::Apply(object) => {
            if let Some(change) = store.applied(to_json(kind, version, &object)) {
                messages.push(ClusterMsg::Change(change));
                changed = true;
            }
            true
        }
        watcher::Event::Delete(object) => {
            if let Some(change) = store.deleted(to_json(kind, version, &object)) {
                messages.push(ClusterMsg::Change(change));
                changed = true;
            }
            true
        }
    };
    if progressed {
        // Readable again: the set no longer says it is not.
        changed |= store.failing.take().is_some();
    }
    if changed {
        messages.push(ClusterMsg::Configurations(webhook_set(stores)));
    }
    Step::after(watch, options, progressed, messages)
}

fn watch_error(
    watch: &mut Watch,
    cluster: &Cluster,
    options: &ClusterOptions,
    error: watcher::Error,
) -> Step {
    let plural = watch.resource.plural.clone();
    let (verb, inner) = match &error {
        // The watcher relists by itself after an ERROR event with 410.
        watcher::Error::WatchError(status) if status.code == 410 => return Step::Nothing,
        watcher::Error::WatchError(status) => {
            let failure = Failure {
                kind: if status.code == 403 {
                    FailureKind::Forbidden
                } else {
                    FailureKind::Server
                },
                reason: format!(
                    "The watch of {plural} reported {} {}: {}",
                    status.code, status.reason, status.message
                ),
                action: "hookscope restarts the watch.".to_string(),
                rbac: (status.code == 403).then(|| rbac_of(watch, "watch", &cluster.target())),
                retry_in: watch.delay,
            };
            return feed_failed(watch, options, failure);
        }
        watcher::Error::NoResourceVersion => {
            let failure = Failure {
                kind: FailureKind::Server,
                reason: format!("The list of {plural} carried no resourceVersion."),
                action: "The server does not behave like a Kubernetes API server; hookscope lists again.".to_string(),
                rbac: None,
                retry_in: watch.delay,
            };
            return feed_failed(watch, options, failure);
        }
        watcher::Error::InitialListFailed(e) => ("list", e),
        watcher::Error::WatchStartFailed(e) => ("watch", e),
        watcher::Error::WatchFailed(e) => ("watch", e),
    };
    if api_code(inner) == Some(410) {
        // An HTTP 410 on starting a watch leaves kube's watcher retrying the same
        // resourceVersion; a new watcher lists again.
        watch.stream = watch_stream(cluster, &watch.resource);
        return Step::Nothing;
    }
    let what = format!(
        "{}ing {plural}",
        if verb == "list" { "list" } else { "watch" }
    );
    let mut failure = describe(inner, &what, &cluster.target(), watch.delay);
    if is_transport(inner) && !matches!(error, watcher::Error::WatchFailed(_)) {
        return Step::Lost(failure);
    }
    if failure.kind == FailureKind::Forbidden {
        failure.rbac = Some(rbac_of(watch, verb, &cluster.target()));
    }
    feed_failed(watch, options, failure)
}

fn feed_failed(watch: &mut Watch, options: &ClusterOptions, failure: Failure) -> Step {
    let feed = watch.watched.feed();
    watch.report_ok = true;
    watch.pause = Some(Box::pin(tokio::time::sleep(watch.delay)));
    watch.delay = options.backoff.next(watch.delay);
    Step::Messages(vec![ClusterMsg::FeedFailed { feed, failure }])
}

/// The next event of any watcher (those pausing after a failure once their pause is over),
/// starting after the one that last had one, so that a busy watcher does not starve the others.
fn poll_watches(
    watches: &mut [Watch],
    start: &mut usize,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<(usize, Option<Box<WatchItem>>)> {
    use std::future::Future as _;
    let n = watches.len();
    for k in 0..n {
        let i = (*start + k) % n;
        let watch = &mut watches[i];
        if let Some(pause) = &mut watch.pause {
            if pause.as_mut().poll(cx).is_pending() {
                continue;
            }
            watch.pause = None;
        }
        if let std::task::Poll::Ready(item) = watch.stream.poll_next_unpin(cx) {
            *start = (i + 1) % n;
            return std::task::Poll::Ready((i, item.map(Box::new)));
        }
    }
    std::task::Poll::Pending
}

/// Discovery's answer, or its timeout.
type Discovery = futures::future::BoxFuture<'static, Result<Vec<Served>, Option<kube::Error>>>;

/// Asks the server (after `after`) which policy kinds it serves, within 30 s.
fn discovery(cluster: &Cluster, after: Duration) -> Discovery {
    let cluster = cluster.clone();
    Box::pin(async move {
        tokio::time::sleep(after).await;
        match tokio::time::timeout(Duration::from_secs(30), cluster.discover_policies()).await {
            Ok(result) => result.map_err(Some),
            Err(_) => Err(None),
        }
    })
}

/// What woke the session.
enum Woke {
    Watch(usize, Option<Box<WatchItem>>),
    Discovered(Result<Vec<Served>, Option<kube::Error>>),
    Closed,
}

/// Discovery answered: watchers for the policy kinds served, the others known absent. A failure
/// is each policy feed's, retried after `delay`; a lost connection ends the session.
fn discovered(
    result: Result<Vec<Served>, Option<kube::Error>>,
    cluster: &Cluster,
    options: &ClusterOptions,
    stores: &mut Stores,
    watches: &mut Vec<Watch>,
    delay: Duration,
) -> Step {
    let served = match result {
        Ok(served) => served,
        Err(error) => {
            let what = "discovering the admissionregistration.k8s.io API versions";
            let failure = match &error {
                Some(e) if is_transport(e) => {
                    return Step::Lost(describe(e, what, &cluster.target(), delay));
                }
                Some(e) => describe(e, what, &cluster.target(), delay),
                None => Failure {
                    kind: FailureKind::Unreachable,
                    reason: format!(
                        "{} did not answer discovery within 30 s.",
                        cluster.info.server
                    ),
                    action: "The API server is slow or overloaded; hookscope asks again."
                        .to_string(),
                    rbac: None,
                    retry_in: delay,
                },
            };
            let mut messages = Vec::new();
            for kind in AdmissionKind::POLICIES {
                stores.kinds[kind.index()].failing = Some(failure.reason.clone());
                messages.push(ClusterMsg::FeedFailed {
                    feed: Feed::Admission(kind),
                    failure: failure.clone(),
                });
            }
            messages.push(ClusterMsg::Configurations(webhook_set(stores)));
            return Step::Messages(messages);
        }
    };
    let mut messages = vec![ClusterMsg::Discovered(served.clone())];
    for s in &served {
        match s.version {
            Some(version) => watches.push(Watch::new(
                cluster,
                options,
                Watched::Admission(s.kind, version),
            )),
            None => {
                let store = &mut stores.kinds[s.kind.index()];
                store.failing = None;
                messages.extend(store.not_served().into_iter().map(ClusterMsg::Change));
            }
        }
    }
    stores.served = Some(served);
    messages.push(ClusterMsg::Configurations(webhook_set(stores)));
    Step::Messages(messages)
}

/// Watches and scrapes until the connection is lost (`Some`) or the receiver is gone (`None`).
async fn session(
    cluster: &Cluster,
    options: &ClusterOptions,
    stores: &mut Stores,
    tx: &mpsc::Sender<ClusterMsg>,
) -> Option<Failure> {
    // `/metrics` is read through this connection unless a Prometheus-compatible API is.
    let _scraper = options.prometheus.is_none().then(|| {
        AbortOnDrop(tokio::spawn(fleet::scrape_loop(
            cluster.clone(),
            options.clone(),
            tx.clone(),
        )))
    });
    // The webhook configurations are served as v1 by every release modelled; the policy kinds
    // are watched once discovery says in which version, if any.
    let mut watches: Vec<Watch> = AdmissionKind::ALL
        .into_iter()
        .filter_map(|kind| Some(Watched::Admission(kind, kind.fixed_version()?)))
        .chain([Watched::Namespaces, Watched::Crds])
        .map(|watched| Watch::new(cluster, options, watched))
        .collect();
    // The parameter kinds known from an earlier connection are watched again; those that could
    // not be resolved are tried again.
    stores.unresolved.clear();
    for (i, p) in stores.params.iter().enumerate().filter(|(_, p)| p.watching) {
        let watched = Watched::Params(i);
        watches.push(Watch::with_resource(
            cluster,
            options,
            watched,
            p.resource.clone(),
        ));
    }
    let mut start = 0;
    let mut discovery_delay = options.backoff.initial;
    let mut asking = Some(discovery(cluster, Duration::ZERO));
    loop {
        let woke = tokio::select! {
            (which, item) = std::future::poll_fn(|cx| poll_watches(&mut watches, &mut start, cx)) => {
                Woke::Watch(which, item)
            }
            result = async {
                match asking.as_mut() {
                    Some(f) => f.await,
                    None => std::future::pending().await,
                }
            } => Woke::Discovered(result),
            _ = tx.closed() => Woke::Closed,
        };
        let step = match woke {
            Woke::Closed => return None,
            Woke::Discovered(result) => {
                let failed = result.is_err();
                let step = discovered(
                    result,
                    cluster,
                    options,
                    stores,
                    &mut watches,
                    discovery_delay,
                );
                asking = failed.then(|| discovery(cluster, discovery_delay));
                if failed {
                    discovery_delay = options.backoff.next(discovery_delay);
                }
                step
            }
            Woke::Watch(which, item) => {
                let watch = &mut watches[which];
                let Some(item) = item else {
                    // kube's watcher stream does not end; if it does, start it again.
                    watch.stream = watch_stream(cluster, &watch.resource);
                    continue;
                };
                handle_event(watch, cluster, options, stores, *item)
            }
        };
        match step {
            Step::Nothing => {}
            Step::Messages(mut messages) => {
                // The policies in force changed: their parameters are watched too.
                if messages
                    .iter()
                    .any(|m| matches!(m, ClusterMsg::Configurations(_)))
                {
                    messages.extend(watch_params(cluster, options, stores, &mut watches).await);
                }
                for message in messages {
                    if !send(tx, message).await {
                        return None;
                    }
                }
            }
            Step::Lost(failure) => return Some(failure),
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The RBAC advice for `verb` on what `watch` lists and watches.
fn rbac_of(watch: &Watch, verb: &str, target: &Target<'_>) -> RbacAdvice {
    match watch.watched {
        Watched::Params(_) => {
            failure::rbac_for_resource(&watch.resource.plural, &watch.resource.group, verb, target)
        }
        _ => rbac_for(watch.watched.feed(), verb, target),
    }
}

//! `/metrics` of each apiserver of a highly available control plane.
//!
//! Every kube-apiserver keeps its own counters; through a load balancer, consecutive scrapes
//! reach different instances and the counters seem to jump. kube-apiserver's endpoint
//! reconciler writes the address of every apiserver it leases into the endpoints of the
//! `default/kubernetes` Service (the EndpointSlice labelled
//! `kubernetes.io/service-name=kubernetes`, and the core Endpoints `kubernetes`), so hookscope
//! watches those and scrapes each address itself, with the kubeconfig's credentials and
//! certificate authority, labelling each apiserver's series `instance="host:port"`. Where the
//! endpoints cannot be read or an apiserver does not answer from here, it scrapes the
//! kubeconfig's server (the load balancer) as before, and says so as the failure of
//! [`Feed::Instances`].

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::failure::{Target, api_code, describe, rbac_for};
use super::{
    Backoff, Cluster, ClusterMsg, ClusterOptions, Failure, FailureKind, Feed, METRICS_ACCEPT,
    MetricsScrape, RbacAdvice, send,
};
use crate::live::metrics::AdmissionSnapshot;

/// The namespace and name of the Service whose endpoints are the apiservers.
pub const SERVICE_NAMESPACE: &str = "default";
/// See [`SERVICE_NAMESPACE`].
pub const SERVICE_NAME: &str = "kubernetes";

/// The label EndpointSlices carry naming their Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The apiservers (`host:port`, an IPv6 address in brackets) an EndpointSlice of
/// `default/kubernetes` names: each address of each endpoint that is not known unready, with the
/// port named `https` (else the first port). Sorted, without duplicates.
pub fn apiservers_from_slice(slice: &Value) -> Vec<String> {
    let Some(port) = https_port(&slice["ports"]) else {
        return Vec::new();
    };
    let mut out: Vec<String> = slice["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["conditions"]["ready"].as_bool() != Some(false))
        .flat_map(|e| e["addresses"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(|a| host_port(a, port))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The apiservers the core Endpoints `default/kubernetes` names: each ready address of each
/// subset, with the subset's port named `https` (else its first). Sorted, without duplicates.
pub fn apiservers_from_endpoints(endpoints: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let Some(port) = https_port(&subset["ports"]) else {
            continue;
        };
        for address in subset["addresses"].as_array().into_iter().flatten() {
            if let Some(ip) = address["ip"].as_str() {
                out.push(host_port(ip, port));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn https_port(ports: &Value) -> Option<u64> {
    let ports = ports.as_array()?;
    ports
        .iter()
        .find(|p| p["name"].as_str() == Some("https"))
        .or_else(|| ports.first())
        .and_then(|p| p["port"].as_u64())
}

fn host_port(address: &str, port: u64) -> String {
    if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    }
}

/// Which object kind the apiservers are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `discovery.k8s.io/v1` EndpointSlices labelled for the Service.
    Slices,
    /// Core v1 Endpoints named as the Service (where slices are not served or not readable).
    Endpoints,
}

impl Source {
    fn resource(self) -> ApiResource {
        match self {
            Source::Slices => ApiResource {
                group: "discovery.k8s.io".into(),
                version: "v1".into(),
                api_version: "discovery.k8s.io/v1".into(),
                kind: "EndpointSlice".into(),
                plural: "endpointslices".into(),
            },
            Source::Endpoints => ApiResource {
                group: String::new(),
                version: "v1".into(),
                api_version: "v1".into(),
                kind: "Endpoints".into(),
                plural: "endpoints".into(),
            },
        }
    }

    fn config(self) -> watcher::Config {
        match self {
            Source::Slices => {
                watcher::Config::default().labels(&format!("{SERVICE_NAME_LABEL}={SERVICE_NAME}"))
            }
            Source::Endpoints => {
                watcher::Config::default().fields(&format!("metadata.name={SERVICE_NAME}"))
            }
        }
    }

    fn apiservers(self, object: &Value) -> Vec<String> {
        match self {
            Source::Slices => apiservers_from_slice(object),
            Source::Endpoints => apiservers_from_endpoints(object),
        }
    }
}

type EventStream =
    futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

fn stream(cluster: &Cluster, source: Source, after: Duration) -> EventStream {
    let api: Api<DynamicObject> = Api::namespaced_with(
        cluster.client.clone(),
        SERVICE_NAMESPACE,
        &source.resource(),
    );
    let events = watcher::watcher(api, source.config());
    if after.is_zero() {
        return events.boxed();
    }
    futures::stream::once(async move {
        tokio::time::sleep(after).await;
        events
    })
    .flatten()
    .boxed()
}

/// What is known of the apiservers.
#[derive(Debug, Clone, PartialEq)]
enum Known {
    /// Nothing yet: the first list has not answered.
    NotYet,
    /// The addresses the endpoints name now.
    Listed(Vec<String>),
    /// The endpoints cannot be read (a 403 on both kinds, …).
    Unreadable(Failure),
}

/// The watch of `default/kubernetes`'s endpoints.
struct Apiservers {
    source: Source,
    stream: EventStream,
    building: Option<BTreeMap<String, Vec<String>>>,
    objects: BTreeMap<String, Vec<String>>,
    known: Known,
    /// Why the EndpointSlices could not be read (when the Endpoints are read instead).
    slices_failed: Option<String>,
    delay: Duration,
    backoff: Backoff,
}

impl Apiservers {
    fn new(cluster: &Cluster, backoff: Backoff) -> Apiservers {
        Apiservers {
            source: Source::Slices,
            stream: stream(cluster, Source::Slices, Duration::ZERO),
            building: None,
            objects: BTreeMap::new(),
            known: Known::NotYet,
            slices_failed: None,
            delay: backoff.initial,
            backoff,
        }
    }

    fn listed(&mut self) {
        let mut all: Vec<String> = self.objects.values().flatten().cloned().collect();
        all.sort();
        all.dedup();
        self.known = Known::Listed(all);
    }

    fn handle(
        &mut self,
        cluster: &Cluster,
        item: Option<Result<watcher::Event<DynamicObject>, watcher::Error>>,
    ) {
        let name = |o: &DynamicObject| o.metadata.name.clone().unwrap_or_default();
        let value = |o: &DynamicObject| serde_json::to_value(o).unwrap_or(Value::Null);
        match item {
            // kube's watcher stream does not end; if it does, start it again.
            None => self.stream = stream(cluster, self.source, self.delay),
            Some(Ok(watcher::Event::Init)) => self.building = Some(BTreeMap::new()),
            Some(Ok(watcher::Event::InitApply(o))) => {
                let apiservers = self.source.apiservers(&value(&o));
                self.building
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name(&o), apiservers);
            }
            Some(Ok(watcher::Event::InitDone)) => {
                self.objects = self.building.take().unwrap_or_default();
                self.delay = self.backoff.initial;
                self.listed();
            }
            Some(Ok(watcher::Event::Apply(o))) => {
                let apiservers = self.source.apiservers(&value(&o));
                self.objects.insert(name(&o), apiservers);
                self.listed();
            }
            Some(Ok(watcher::Event::Delete(o))) => {
                self.objects.remove(&name(&o));
                self.listed();
            }
            Some(Err(error)) => self.failed(cluster, error),
        }
    }

    fn failed(&mut self, cluster: &Cluster, error: watcher::Error) {
        let (verb, inner) = match &error {
            // The watcher relists by itself after an ERROR event with 410.
            watcher::Error::WatchError(status) if status.code == 410 => return,
            watcher::Error::InitialListFailed(e) => ("listing", e),
            watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => ("watching", e),
            watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
                self.restart(cluster, Source::Slices);
                return;
            }
        };
        // A watch that broke (the connection went, the apiserver restarted) leaves the addresses
        // listed as they were until the watch lists again.
        if verb == "watching" && matches!(self.known, Known::Listed(_)) {
            let source = self.source;
            self.restart(cluster, source);
            return;
        }
        let resource = self.source.resource();
        let what = format!(
            "{verb} {} in namespace {SERVICE_NAMESPACE}",
            qualified(&resource)
        );
        let failure = describe(inner, &what, &cluster.target(), self.delay);
        let code = api_code(inner);
        if self.source == Source::Slices && matches!(code, Some(403 | 404)) {
            // The older kind names the same addresses.
            self.slices_failed = Some(failure.reason);
            self.source = Source::Endpoints;
            self.stream = stream(cluster, Source::Endpoints, Duration::ZERO);
            return;
        }
        let mut failure = failure;
        if let Some(slices) = self.slices_failed.take()
            && self.source == Source::Endpoints
        {
            failure.reason = format!("{slices}; {}", failure.reason);
        }
        failure.reason = format!(
            "Scraping /metrics through {} (the apiservers' counters mix): {}",
            cluster.info.server, failure.reason
        );
        if code == Some(403) {
            failure.action = format!(
                "Ask a cluster administrator to let the user list and watch endpointslices in namespace {SERVICE_NAMESPACE} (the rule below, in a Role there) to scrape each apiserver apart."
            );
            failure.rbac = Some(endpoints_rbac(&cluster.target()));
        }
        self.known = Known::Unreadable(failure);
        self.restart(cluster, Source::Slices);
    }

    fn restart(&mut self, cluster: &Cluster, source: Source) {
        self.source = source;
        self.building = None;
        self.stream = stream(cluster, source, self.delay);
        self.delay = self.backoff.next(self.delay);
    }
}

fn qualified(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

/// The rule that lets hookscope read the apiservers' addresses: list and watch EndpointSlices in
/// `default` (a Role there is enough).
fn endpoints_rbac(target: &Target<'_>) -> RbacAdvice {
    RbacAdvice {
        rule: "- apiGroups: [\"discovery.k8s.io\"]\n  resources: [\"endpointslices\"]\n  verbs: [\"list\", \"watch\"]   # in namespace default".to_string(),
        check: format!(
            "kubectl auth can-i watch endpointslices.discovery.k8s.io -n {SERVICE_NAMESPACE}{}",
            if target.context.is_empty() {
                String::new()
            } else {
                format!(" --context {}", target.context)
            }
        ),
    }
}

/// One round's way of reading `/metrics`.
enum Round {
    /// The texts of the apiservers that answered, by `host:port`; with why some did not.
    PerInstance(Vec<(String, String)>, Option<Failure>),
    /// Through the kubeconfig's server; with why when the apiservers were not scraped apart.
    Balancer(Option<Failure>),
}

/// What one round of scraping each apiserver gave.
struct Scraped {
    /// The texts of those that answered, by `host:port`.
    texts: Vec<(String, String)>,
    /// Those that did not: why (`apiserver ADDRESS: …`), and the kind of failure.
    failed: Vec<(FailureKind, String)>,
}

/// Scrapes every apiserver the endpoints name, at once, each within `timeout`.
async fn scrape_each(
    cluster: &Cluster,
    apiservers: &[String],
    clients: &mut BTreeMap<String, kube::Client>,
    down: &mut Down,
    timeout: Duration,
) -> Scraped {
    clients.retain(|a, _| apiservers.contains(a));
    down.retain(|a, _| apiservers.contains(a));
    let now = Instant::now();
    let mut failed = Vec::new();
    let mut pending = Vec::new();
    for address in apiservers {
        // One that did not answer lately is asked again after its backoff, so that the others'
        // rounds do not wait for its timeout each time.
        if let Some(d) = down.get(address)
            && now < d.retry_at
        {
            failed.push(d.why.clone());
            continue;
        }
        let client = match clients.get(address) {
            Some(c) => c.clone(),
            None => match cluster.instance_client(address) {
                Ok(client) => {
                    clients.insert(address.clone(), client.clone());
                    client
                }
                Err(e) => {
                    failed.push(instance_failure(cluster, address, &e));
                    continue;
                }
            },
        };
        let address = address.clone();
        pending.push(async move {
            let request = http::Request::get("/metrics")
                .header(http::header::ACCEPT, METRICS_ACCEPT)
                .body(Vec::new())
                .map_err(kube::Error::HttpError);
            let result = match request {
                Ok(request) => tokio::time::timeout(timeout, client.request_text(request))
                    .await
                    .map_err(|_| None)
                    .and_then(|r| r.map_err(Some)),
                Err(e) => Err(Some(e)),
            };
            (address, result)
        });
    }
    let mut texts = Vec::new();
    for (address, result) in futures::future::join_all(pending).await {
        let why = match result {
            Ok(text) => {
                down.remove(&address);
                texts.push((address, text));
                continue;
            }
            Err(Some(e)) => instance_failure(cluster, &address, &e),
            Err(None) => (
                FailureKind::Unreachable,
                format!("apiserver {address} did not answer /metrics within {timeout:.1?}"),
            ),
        };
        let delay = down
            .get(&address)
            .map_or(down.backoff.initial, |d| down.backoff.next(d.delay));
        failed.push(why.clone());
        down.insert(
            address,
            DownSince {
                retry_at: Instant::now() + delay,
                delay,
                why,
            },
        );
    }
    Scraped { texts, failed }
}

/// An apiserver that did not answer: when to ask it again, and why.
struct DownSince {
    retry_at: Instant,
    delay: Duration,
    why: (FailureKind, String),
}

/// The apiservers that did not answer, with the backoff between their attempts.
struct Down {
    backoff: Backoff,
    by_address: BTreeMap<String, DownSince>,
}

impl Down {
    fn get(&self, address: &str) -> Option<&DownSince> {
        self.by_address.get(address)
    }

    fn insert(&mut self, address: String, down: DownSince) {
        self.by_address.insert(address, down);
    }

    fn remove(&mut self, address: &str) {
        self.by_address.remove(address);
    }

    fn retain(&mut self, keep: impl Fn(&String, &DownSince) -> bool) {
        self.by_address.retain(|a, d| keep(a, d));
    }
}

fn instance_failure(
    cluster: &Cluster,
    address: &str,
    error: &kube::Error,
) -> (FailureKind, String) {
    let server = format!("https://{address}");
    let target = Target {
        server: &server,
        context: &cluster.info.context,
        user: &cluster.info.user,
    };
    let inner = describe(error, "getting /metrics", &target, Duration::ZERO);
    (inner.kind, format!("apiserver {address}: {}", inner.reason))
}

/// Scrapes `/metrics` every [`ClusterOptions::scrape_interval`]: each apiserver apart while the
/// endpoints of `default/kubernetes` name them and they answer, else the kubeconfig's server.
pub(super) async fn scrape_loop(
    cluster: Cluster,
    options: ClusterOptions,
    tx: mpsc::Sender<ClusterMsg>,
) {
    let interval = options.scrape_interval.max(Duration::from_millis(10));
    let timeout = interval.max(Duration::from_secs(5));
    let mut apiservers = Apiservers::new(&cluster, options.backoff);
    // The first round waits a little for the first list, so that it need not fall back.
    let deadline = Instant::now() + interval.min(Duration::from_secs(2));
    while apiservers.known == Known::NotYet {
        tokio::select! {
            item = apiservers.stream.next() => apiservers.handle(&cluster, item),
            _ = tokio::time::sleep_until(deadline) => break,
            _ = tx.closed() => return,
        }
    }
    // The first scrape of a connection reports the feed working, clearing a failure of the
    // connection before.
    let mut failing = true;
    let mut clients = BTreeMap::new();
    let mut down = Down {
        backoff: options.backoff,
        by_address: BTreeMap::new(),
    };
    // After the apiservers did not all answer: not before `probe_at` for the same addresses.
    let mut unreachable: Option<(Vec<String>, Instant, Failure)> = None;
    let mut probe_delay = options.backoff.initial;
    loop {
        let started = Instant::now();
        let round = match &apiservers.known {
            Known::NotYet => Round::Balancer(None),
            Known::Unreadable(failure) => Round::Balancer(Some(failure.clone())),
            // No apiserver to tell apart: the reconciler is off, or the apiserver advertises an
            // address Endpoints refuse (a loopback one). Nothing failed; /metrics is the one
            // server's.
            Known::Listed(list) if list.is_empty() => Round::Balancer(None),
            Known::Listed(list) => match &unreachable {
                Some((same, at, failure)) if same == list && started < *at => {
                    Round::Balancer(Some(failure.clone()))
                }
                _ => {
                    let scraped =
                        scrape_each(&cluster, list, &mut clients, &mut down, timeout).await;
                    let kind = scraped.failed.first().map(|(k, _)| *k);
                    let why: Vec<String> = scraped.failed.into_iter().map(|(_, r)| r).collect();
                    if scraped.texts.is_empty() {
                        // None answers from here: through the kubeconfig's server, trying them
                        // again after a backoff.
                        let failure = Failure {
                            kind: kind.unwrap_or(FailureKind::Unreachable),
                            reason: format!(
                                "Scraping /metrics through {} (the apiservers' counters mix): {}.",
                                cluster.info.server,
                                why.join("; ")
                            ),
                            action: "Run hookscope where the apiservers' addresses are reachable, or read the metrics from Prometheus (--prometheus URL); hookscope tries the apiservers again.".to_string(),
                            rbac: None,
                            retry_in: probe_delay,
                        };
                        unreachable = Some((list.clone(), started + probe_delay, failure.clone()));
                        probe_delay = options.backoff.next(probe_delay);
                        Round::Balancer(Some(failure))
                    } else {
                        // Those that answer are kept apart; one that does not (most often one
                        // stopped, still named until its lease expires) is left out of the sum
                        // rather than mixed in through the load balancer.
                        unreachable = None;
                        probe_delay = options.backoff.initial;
                        let partial = kind.map(|kind| Failure {
                            kind,
                            reason: format!(
                                "{}; left out of the sum of the {} that answered until it answers.",
                                why.join("; "),
                                scraped.texts.len()
                            ),
                            action: "Check that apiserver; if it is stopped, the endpoints drop it once its lease expires.".to_string(),
                            rbac: None,
                            retry_in: interval,
                        });
                        Round::PerInstance(scraped.texts, partial)
                    }
                }
            },
        };
        let messages = match round {
            Round::PerInstance(texts, partial) => {
                let mut messages = vec![match partial {
                    Some(failure) => ClusterMsg::FeedFailed {
                        feed: Feed::Instances,
                        failure,
                    },
                    None => ClusterMsg::FeedRecovered(Feed::Instances),
                }];
                if failing {
                    failing = false;
                    messages.push(ClusterMsg::FeedRecovered(Feed::Metrics));
                }
                messages.push(ClusterMsg::Metrics(MetricsScrape {
                    texts: texts.into_iter().map(|(a, t)| (Some(a), t)).collect(),
                    at: SystemTime::now(),
                }));
                messages
            }
            Round::Balancer(why) => {
                let mut messages: Vec<ClusterMsg> = why
                    .into_iter()
                    .map(|failure| ClusterMsg::FeedFailed {
                        feed: Feed::Instances,
                        failure,
                    })
                    .collect();
                messages.extend(scrape_balancer(&cluster, interval, timeout, &mut failing).await);
                messages
            }
        };
        for message in messages {
            if !send(&tx, message).await {
                return;
            }
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(started + interval) => break,
                item = apiservers.stream.next() => apiservers.handle(&cluster, item),
                _ = tx.closed() => return,
            }
        }
    }
}

/// One scrape of the kubeconfig's server: the scrape, or the feed's failure (with the feed
/// reported working first after a failure).
async fn scrape_balancer(
    cluster: &Cluster,
    interval: Duration,
    timeout: Duration,
    failing: &mut bool,
) -> Vec<ClusterMsg> {
    match tokio::time::timeout(timeout, cluster.scrape_metrics()).await {
        Ok(Ok(scrape)) => {
            let mut messages = Vec::new();
            if *failing {
                *failing = false;
                messages.push(ClusterMsg::FeedRecovered(Feed::Metrics));
            }
            messages.push(ClusterMsg::Metrics(scrape));
            messages
        }
        Ok(Err(e)) => {
            *failing = true;
            let mut failure = describe(&e, "getting /metrics", &cluster.target(), interval);
            if failure.kind == FailureKind::Forbidden {
                failure.rbac = Some(rbac_for(Feed::Metrics, "get", &cluster.target()));
            }
            vec![ClusterMsg::FeedFailed {
                feed: Feed::Metrics,
                failure,
            }]
        }
        Err(_) => {
            *failing = true;
            vec![ClusterMsg::FeedFailed {
                feed: Feed::Metrics,
                failure: Failure {
                    kind: FailureKind::Unreachable,
                    reason: format!("{} did not answer /metrics in time.", cluster.info.server),
                    action: "The API server is slow or overloaded; a longer --scrape-interval lowers the load.".to_string(),
                    rbac: None,
                    retry_in: interval,
                },
            }]
        }
    }
}

/// A text of a [`MetricsScrape`] that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{source}", instance.as_ref().map(|i| format!("apiserver {i}: ")).unwrap_or_default())]
pub struct ScrapeParseError {
    /// The apiserver whose text it is (None: the kubeconfig's server's).
    pub instance: Option<String>,
    /// Why it does not parse.
    pub source: crate::live::metrics::ParseError,
}

impl MetricsScrape {
    /// The admission series of the round: each apiserver's labelled with its address
    /// ([`AdmissionSnapshot::with_instance`]), all in one snapshot, so that a history keeps them
    /// apart and sums them.
    pub fn admission(&self) -> Result<AdmissionSnapshot, ScrapeParseError> {
        let mut merged = AdmissionSnapshot::default();
        for (instance, text) in &self.texts {
            let snapshot =
                AdmissionSnapshot::from_text(text).map_err(|source| ScrapeParseError {
                    instance: instance.clone(),
                    source,
                })?;
            merged.merge(match instance {
                Some(i) => snapshot.with_instance(i),
                None => snapshot,
            });
        }
        Ok(merged)
    }
}

//! Metrics at fleet scale: each apiserver of a highly available control plane scraped apart,
//! found through the endpoints of `default/kubernetes` on the fake API server, with fake
//! apiservers of the same cluster (same CA and token, their own `/metrics`) on loopback ports;
//! the fallback to the kubeconfig's server and what the Feeds pane says of it.

#[path = "common/scratch.rs"]
mod scratch;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use hookscope::engine::AuditLevel;
use hookscope::fake_apiserver::{Denial, FakeApiServer, FakeResource};
use hookscope::live::cluster::{
    Backoff, ClusterMsg, ClusterOptions, FailureKind, Feed, MetricsScrape,
    apiservers_from_endpoints, apiservers_from_slice, run,
};
use hookscope::live::metrics::{AdmissionFamily, MetricsHistory, Window};
use hookscope::tui::app::{Msg, State, View, update};
use hookscope::tui::keymap::Action;
use hookscope::tui::live::{LiveMsg, LiveState, clock};
use hookscope::tui::source::SourceMsg;
use hookscope::tui::theme::Theme;
use scratch::Scratch;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long a test waits for a message before it fails naming what it awaited: long enough
/// never to fire on a working run, however loaded the machine.
const WAIT: Duration = Duration::from_secs(120);
const FIXTURES: &str = "tests/fixtures/apiserver-endpoints";

/// One webhook's request counter, as kube-apiserver exposes it.
fn requests(n: f64) -> String {
    format!(
        "# HELP apiserver_admission_webhook_request_total [ALPHA] Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.\n# TYPE apiserver_admission_webhook_request_total counter\napiserver_admission_webhook_request_total{{code=\"200\",name=\"check.example.com\",operation=\"CREATE\",rejected=\"false\",type=\"validating\"}} {n}\n"
    )
}

/// The EndpointSlice kube-apiserver's reconciler writes, as recorded from a real 1.33.3
/// (`endpointslices-one.json`), naming `address:port` instead.
fn slice(name: &str, address: &str, port: u16) -> Value {
    let recorded: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/endpointslices-one.json")).unwrap(),
    )
    .unwrap();
    let mut slice = recorded["items"][0].clone();
    for field in [
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
    ] {
        slice["metadata"].as_object_mut().unwrap().remove(field);
    }
    slice["apiVersion"] = json!("discovery.k8s.io/v1");
    slice["kind"] = json!("EndpointSlice");
    slice["metadata"]["name"] = json!(name);
    slice["endpoints"][0]["addresses"] = json!([address]);
    slice["ports"][0]["port"] = json!(port);
    slice
}

/// The recorded Endpoints of two apiservers (`endpoints-two.json`), naming the loopback
/// addresses of `apiservers` instead (one subset each: their ports differ).
fn endpoints(apiservers: &[&FakeApiServer]) -> Value {
    let mut endpoints: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/endpoints-two.json")).unwrap(),
    )
    .unwrap();
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
    ] {
        endpoints["metadata"].as_object_mut().unwrap().remove(field);
    }
    let subset = endpoints["subsets"][0].clone();
    endpoints["subsets"] = json!([]);
    for s in apiservers {
        let mut one = subset.clone();
        one["addresses"] = json!([{"ip": "127.0.0.1"}]);
        one["ports"][0]["port"] = json!(s.addr().port());
        endpoints["subsets"].as_array_mut().unwrap().push(one);
    }
    endpoints
}

fn options(kubeconfig: PathBuf) -> ClusterOptions {
    ClusterOptions {
        kubeconfig: Some(kubeconfig),
        scrape_interval: Duration::from_millis(100),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
        },
        ..ClusterOptions::default()
    }
}

struct Fleet {
    lb: FakeApiServer,
    rx: mpsc::Receiver<ClusterMsg>,
    _scratch: Scratch,
}

impl Fleet {
    /// `lb` is what the kubeconfig names (the load balancer); `setup` runs before connecting.
    async fn start(lb: FakeApiServer) -> Fleet {
        let scratch = Scratch::new(&format!(
            "hookscope-fleet-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let kubeconfig = scratch.join("config");
        std::fs::write(&kubeconfig, lb.kubeconfig()).unwrap();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(run(options(kubeconfig), tx));
        Fleet {
            lb,
            rx,
            _scratch: scratch,
        }
    }

    /// The first message `want` takes, skipping the others; fails after [`WAIT`] naming `what`
    /// and the last messages seen.
    async fn until<T>(&mut self, what: &str, mut want: impl FnMut(ClusterMsg) -> Option<T>) -> T {
        let mut seen = std::collections::VecDeque::new();
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let m = self.rx.recv().await.expect("the run task keeps going");
                if seen.len() == 5 {
                    seen.pop_front();
                }
                seen.push_back(format!("{m:?}"));
                if let Some(found) = want(m) {
                    return found;
                }
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("no {what} within {WAIT:?}; the last messages: {seen:#?}"))
    }

    /// The next failure of the per-apiserver feed.
    async fn instances_failure(&mut self) -> hookscope::live::cluster::Failure {
        self.until("failure of the per-apiserver feed", |m| match m {
            ClusterMsg::FeedFailed {
                feed: Feed::Instances,
                failure,
            } => Some(failure),
            _ => None,
        })
        .await
    }

    /// The next scrape whose texts satisfy `want`.
    async fn scrape(&mut self, want: impl Fn(&MetricsScrape) -> bool) -> MetricsScrape {
        self.until("scrape of the awaited texts", |m| match m {
            ClusterMsg::Metrics(s) if want(&s) => Some(s),
            _ => None,
        })
        .await
    }

    /// The next scrape of the apiservers each apart. The first round scrapes through the
    /// kubeconfig's server when the endpoints have not been listed by then (it waits for the list
    /// no longer than one scrape interval), as it may on a loaded machine.
    async fn scrape_apart(&mut self) -> MetricsScrape {
        self.scrape(apart).await
    }
}

/// Whether every text of `scrape` is one apiserver's, none read through the load balancer.
fn apart(scrape: &MetricsScrape) -> bool {
    scrape.texts.iter().all(|(instance, _)| instance.is_some())
}

fn instances(scrape: &MetricsScrape) -> Vec<Option<String>> {
    scrape.texts.iter().map(|(i, _)| i.clone()).collect()
}

fn text_of<'a>(scrape: &'a MetricsScrape, instance: &str) -> Option<&'a str> {
    scrape
        .texts
        .iter()
        .find(|(i, _)| i.as_deref() == Some(instance))
        .map(|(_, t)| t.as_str())
}

#[test]
fn the_endpoints_a_real_apiserver_pair_wrote_name_both() {
    let read = |file: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{FIXTURES}/{file}")).unwrap())
            .unwrap()
    };
    let two = read("endpointslices-two.json");
    assert_eq!(
        two["items"].as_array().unwrap().len(),
        1,
        "one slice for both"
    );
    assert_eq!(
        apiservers_from_slice(&two["items"][0]),
        ["10.250.0.1:6443", "10.250.0.2:6443"]
    );
    assert_eq!(
        apiservers_from_endpoints(&read("endpoints-two.json")),
        ["10.250.0.1:6443", "10.250.0.2:6443"]
    );
    // The second apiserver stopped: its address left the slice.
    assert_eq!(
        apiservers_from_slice(&read("endpointslices-one.json")["items"][0]),
        ["10.250.0.1:6443"]
    );
    // An endpoint known unready is no apiserver to scrape; an IPv6 address is bracketed.
    let mut slice = two["items"][0].clone();
    slice["endpoints"][1]["conditions"]["ready"] = json!(false);
    slice["endpoints"][0]["addresses"] = json!(["fd00::1"]);
    assert_eq!(apiservers_from_slice(&slice), ["[fd00::1]:6443"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_apiserver_is_scraped_apart_summed_and_reset_alone() {
    let lb = FakeApiServer::start().await.unwrap();
    let a = lb.start_peer().await.unwrap();
    let b = lb.start_peer().await.unwrap();
    // `a` is the apiserver whose address sorts first, as the scrapes list them.
    let (a, b) = if a.addr().to_string() <= b.addr().to_string() {
        (a, b)
    } else {
        (b, a)
    };
    // Through the load balancer the counter is whichever apiserver answered: never read here.
    lb.set_metrics(&requests(1000.0));
    a.set_metrics(&requests(10.0));
    b.set_metrics(&requests(100.0));
    lb.create(
        "kube-apiserver",
        slice("kubernetes-a", "127.0.0.1", a.addr().port()),
    )
    .unwrap();
    lb.create(
        "kube-apiserver",
        slice("kubernetes-b", "127.0.0.1", b.addr().port()),
    )
    .unwrap();
    let (ia, ib) = (a.addr().to_string(), b.addr().to_string());
    let mut fleet = Fleet::start(lb).await;
    let mut history = MetricsHistory::new(1000);
    let mut scrapes = Vec::new();
    let first = fleet.scrape_apart().await;
    assert_eq!(instances(&first), [Some(ia.clone()), Some(ib.clone())]);
    scrapes.push(first);
    // Both count on; then a restarts (its counter from 0) while b counts on.
    for (na, nb) in [(15.0, 130.0), (3.0, 160.0)] {
        a.set_metrics(&requests(na));
        b.set_metrics(&requests(nb));
        let (wa, wb) = (requests(na), requests(nb));
        let s = fleet
            .scrape(|s| text_of(s, &ia) == Some(&wa) && text_of(s, &ib) == Some(&wb))
            .await;
        scrapes.push(s);
    }
    // Kept in the order they came, one snapshot a round.
    let mut console = state();
    for s in &scrapes {
        let snapshot = s.admission().unwrap();
        assert_eq!(snapshot.instances(), [ia.clone(), ib.clone()]);
        history.push(s.at, snapshot.clone()).unwrap();
        send(
            &mut console,
            LiveMsg::Scrape {
                at: s.at,
                snapshot: Box::new(snapshot),
            },
        );
    }
    let increase = |instance: Option<&str>| {
        let window =
            Window::latest(Duration::from_secs(3600)).of_instance(instance.map(str::to_string));
        let rates = history.rates(&window, AdmissionFamily::WebhookRequests, &["name"]);
        assert_eq!(rates.len(), 1, "{rates:?}");
        rates[0].increase
    };
    // a: 10 → 15, then a reset to 3 (3 new requests); b: 100 → 160, untouched by a's reset.
    assert_eq!(increase(Some(&ia)), 8.0);
    assert_eq!(increase(Some(&ib)), 60.0);
    assert_eq!(increase(None), 68.0);
    assert_eq!(history.instances(), [ia.clone(), ib.clone()]);

    // The Metrics view charts the sum, then each apiserver alone, then the sum again (`i`).
    update(&mut console, Msg::Action(Action::Show(View::Metrics)));
    let screen = hookscope::tui::view::render_text(&console, 200, 50);
    assert!(screen.contains("sum of 2 apiservers"), "{screen}");
    assert!(screen.contains("68"), "the sum's count: {screen}");
    update(&mut console, Msg::Action(Action::NextInstance));
    let screen = hookscope::tui::view::render_text(&console, 200, 50);
    assert!(
        screen.contains(&format!("apiserver {ia} alone")),
        "{screen}"
    );
    update(&mut console, Msg::Action(Action::NextInstance));
    assert_eq!(live(&console).instance.as_deref(), Some(ib.as_str()));
    update(&mut console, Msg::Action(Action::NextInstance));
    assert_eq!(live(&console).instance, None);
    drop((a, b, fleet));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_follows_apiservers_coming_and_going() {
    let lb = FakeApiServer::start().await.unwrap();
    let a = lb.start_peer().await.unwrap();
    let b = lb.start_peer().await.unwrap();
    for s in [&a, &b] {
        s.set_metrics(&requests(1.0));
    }
    lb.create(
        "kube-apiserver",
        slice("kubernetes", "127.0.0.1", a.addr().port()),
    )
    .unwrap();
    let (ia, ib) = (a.addr().to_string(), b.addr().to_string());
    let mut fleet = Fleet::start(lb).await;
    let one = fleet.scrape_apart().await;
    assert_eq!(instances(&one), [Some(ia.clone())]);
    fleet
        .lb
        .create(
            "kube-apiserver",
            slice("kubernetes-b", "127.0.0.1", b.addr().port()),
        )
        .unwrap();
    fleet.scrape(|s| s.texts.len() == 2).await;
    fleet
        .lb
        .delete(FakeResource::EndpointSlices, "default/kubernetes")
        .unwrap();
    let left = fleet.scrape(|s| s.texts.len() == 1 && apart(s)).await;
    assert_eq!(instances(&left), [Some(ib)]);
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_endpoints_serve_where_endpointslices_are_forbidden() {
    let lb = FakeApiServer::start().await.unwrap();
    let a = lb.start_peer().await.unwrap();
    let b = lb.start_peer().await.unwrap();
    a.set_metrics(&requests(1.0));
    b.set_metrics(&requests(2.0));
    lb.forbid(Denial::resource(FakeResource::EndpointSlices, "list"));
    lb.create("kube-apiserver", endpoints(&[&a, &b])).unwrap();
    let mut fleet = Fleet::start(lb).await;
    // The EndpointSlices refused, the Endpoints are listed next: the first rounds may go
    // through the load balancer.
    let scrape = fleet.scrape_apart().await;
    let (ia, ib) = sorted(a.addr().to_string(), b.addr().to_string());
    assert_eq!(instances(&scrape), [Some(ia), Some(ib)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_endpoints_fall_back_to_the_load_balancer_and_the_feeds_pane_says_why() {
    let lb = FakeApiServer::start().await.unwrap();
    let a = lb.start_peer().await.unwrap();
    a.set_metrics(&requests(5.0));
    lb.set_metrics(&requests(1000.0));
    lb.create(
        "kube-apiserver",
        slice("kubernetes", "127.0.0.1", a.addr().port()),
    )
    .unwrap();
    // Both kinds name it, as a real apiserver's reconciler writes them: once the lists are
    // allowed, the watch may be reading either (it tries the Endpoints after the slices'
    // refusal, and the test allows both while it goes round).
    lb.create("kube-apiserver", endpoints(&[&a])).unwrap();
    for resource in [FakeResource::EndpointSlices, FakeResource::Endpoints] {
        lb.forbid(Denial::resource(resource, "list"));
    }
    let mut fleet = Fleet::start(lb).await;
    let failure = fleet.instances_failure().await;
    let at = SystemTime::now();
    assert_eq!(failure.kind, FailureKind::Forbidden);
    assert!(
        failure.reason.contains("endpointslices")
            && failure
                .reason
                .contains(r#"endpoints "kubernetes" is forbidden: User "hookscope-test" cannot list resource "endpoints" in API group "" in the namespace "default""#),
        "{}",
        failure.reason
    );
    let rbac = failure.rbac.clone().expect("the rule");
    assert_eq!(
        rbac.check,
        "kubectl auth can-i watch endpointslices.discovery.k8s.io -n default --context fake"
    );
    let scrape = fleet.scrape(|_| true).await;
    assert_eq!(scrape.texts, vec![(None, requests(1000.0))]);

    // The Feeds pane: the fallback, its reason and its time.
    let mut console = state();
    send(
        &mut console,
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::FeedFailed {
                feed: Feed::Instances,
                failure,
            }),
            at,
        },
    );
    update(&mut console, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&console, 240, 90);
    assert!(
        screen.contains(&format!(
            "✗ per-apiserver /metrics · {}: Scraping /metrics through https://{}",
            clock(at),
            fleet.lb.addr()
        )),
        "{screen}"
    );
    assert!(
        screen.contains("counters mix): Forbidden while listing"),
        "{screen}"
    );

    // Allowed again: each apiserver is scraped, and the feed says so.
    for resource in [FakeResource::EndpointSlices, FakeResource::Endpoints] {
        fleet.lb.allow(&Denial::resource(resource, "list"));
    }
    fleet
        .until("per-apiserver feed recovered", |m| {
            (m == ClusterMsg::FeedRecovered(Feed::Instances)).then_some(())
        })
        .await;
    let scrape = fleet.scrape(|_| true).await;
    assert_eq!(instances(&scrape), [Some(a.addr().to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_not_reachable_from_here_falls_back_naming_it() {
    let lb = FakeApiServer::start().await.unwrap();
    lb.set_metrics(&requests(7.0));
    let (gone, address) = stopped_peer(&lb, "kubernetes").await;
    let mut fleet = Fleet::start(lb).await;
    let failure = fleet.instances_failure().await;
    assert_eq!(failure.kind, FailureKind::Unreachable);
    assert!(
        failure.reason.contains(&format!(
            "apiserver {address}: Cannot reach https://{address}"
        )) && failure.reason.contains("connection refused"),
        "{}",
        failure.reason
    );
    assert!(
        failure.action.contains("--prometheus"),
        "{}",
        failure.action
    );
    let scrape = fleet.scrape(|_| true).await;
    assert_eq!(scrape.texts, vec![(None, requests(7.0))]);
    drop(gone);
}

/// A peer of `lb`, stopped, that the slice `name` still names.
async fn stopped_peer(lb: &FakeApiServer, name: &str) -> (FakeApiServer, std::net::SocketAddr) {
    let peer = lb.start_peer().await.unwrap();
    let address = peer.addr();
    peer.stop().await;
    lb.create("kube-apiserver", slice(name, "127.0.0.1", address.port()))
        .unwrap();
    (peer, address)
}

/// The two addresses in the order the scrapes give them (sorted as text).
fn sorted(x: String, y: String) -> (String, String) {
    if x <= y { (x, y) } else { (y, x) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_apiserver_down_is_left_out_of_the_sum_not_mixed_in() {
    let lb = FakeApiServer::start().await.unwrap();
    lb.set_metrics(&requests(1000.0));
    let up = lb.start_peer().await.unwrap();
    up.set_metrics(&requests(4.0));
    lb.create(
        "kube-apiserver",
        slice("kubernetes-up", "127.0.0.1", up.addr().port()),
    )
    .unwrap();
    // A stopped apiserver stays in the endpoints until its lease expires.
    let (down, address) = stopped_peer(&lb, "kubernetes-down").await;
    let mut fleet = Fleet::start(lb).await;
    let failure = fleet.instances_failure().await;
    assert!(
        failure
            .reason
            .starts_with(&format!("apiserver {address}: Cannot reach"))
            && failure
                .reason
                .ends_with("left out of the sum of the 1 that answered until it answers."),
        "{}",
        failure.reason
    );
    let scrape = fleet.scrape(|_| true).await;
    assert_eq!(
        scrape.texts,
        vec![(Some(up.addr().to_string()), requests(4.0))]
    );
    // It comes back (restarted on its address): asked again after its backoff, it is in.
    down.set_metrics(&requests(9.0));
    down.restart().await.unwrap();
    fleet
        .until("per-apiserver feed recovered", |m| {
            (m == ClusterMsg::FeedRecovered(Feed::Instances)).then_some(())
        })
        .await;
    let both = fleet.scrape(|s| s.texts.len() == 2).await;
    assert!(
        both.texts
            .contains(&(Some(address.to_string()), requests(9.0)))
    );
}

fn state() -> State {
    let mut state = State::new("1.33".into(), AuditLevel::Request, Theme::default());
    state.live = Some(Box::new(LiveState::new("test".into(), 100, false)));
    update(&mut state, Msg::Resize(240, 50));
    state
}

fn send(state: &mut State, msg: LiveMsg) {
    update(state, Msg::Source(SourceMsg::Live(msg)));
}

fn live(s: &State) -> &LiveState {
    s.live.as_deref().expect("live")
}

#[test]
fn with_prometheus_the_feeds_pane_shows_its_queries_instead_of_metrics() {
    let mut console = state();
    let at = SystemTime::now();
    let failure = hookscope::live::cluster::Failure {
        kind: FailureKind::Unreachable,
        reason: "Cannot query Prometheus at https://prometheus.example:9090: connection refused"
            .into(),
        action: "Check the URL.".into(),
        rbac: None,
        retry_in: Duration::from_secs(10),
    };
    let cluster = |msg| LiveMsg::Cluster {
        msg: Box::new(msg),
        at,
    };
    let connected = hookscope::live::cluster::Connected {
        info: hookscope::live::cluster::ConnectionInfo {
            server: "https://lb.example:6443".into(),
            context: "prod".into(),
            user: "jane".into(),
            namespace: "default".into(),
            source: hookscope::live::cluster::KubeconfigSource::InCluster,
        },
        server_version: "v1.33.3".into(),
    };
    send(&mut console, cluster(ClusterMsg::Connected(connected)));
    send(
        &mut console,
        cluster(ClusterMsg::FeedFailed {
            feed: Feed::Prometheus,
            failure,
        }),
    );
    update(&mut console, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&console, 240, 50);
    assert!(
        screen.contains(&format!(
            "✗ prometheus queries · {}: Cannot query Prometheus at https://prometheus.example:9090",
            clock(at)
        )),
        "{screen}"
    );
    assert!(!screen.contains("/metrics"), "{screen}");
    // It answers: the apiservers its series name.
    send(
        &mut console,
        cluster(ClusterMsg::FeedRecovered(Feed::Prometheus)),
    );
    let snapshot = MetricsScrape {
        texts: vec![
            (Some("10.0.0.1:6443".into()), requests(1.0)),
            (Some("10.0.0.2:6443".into()), requests(2.0)),
        ],
        at,
    }
    .admission()
    .unwrap();
    send(
        &mut console,
        LiveMsg::Scrape {
            at,
            snapshot: Box::new(snapshot),
        },
    );
    let screen = hookscope::tui::view::render_text(&console, 240, 50);
    assert!(
        screen.contains(&format!(
            "✓ prometheus queries · series of 2 apiservers · latest values {}",
            clock(at)
        )),
        "{screen}"
    );
}

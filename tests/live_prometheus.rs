//! `--prometheus`: the admission metrics read back from a real Prometheus server (Debian's
//! `prometheus` package) that scrapes two fake apiservers on loopback — over HTTPS with their CA
//! and bearer token, as it scrapes kube-apiservers — serving its API over HTTPS with a minted
//! certificate that hookscope verifies (`--prometheus-ca`). Skipped, saying so, where the
//! `prometheus` binary is not installed.

#[path = "common/scratch.rs"]
mod scratch;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use hookscope::fake_apiserver::FakeApiServer;
use hookscope::live::cluster::{
    Backoff, ClusterMsg, ClusterOptions, Failure, FailureKind, Feed, PrometheusOptions,
    parse_answer, run,
};
use hookscope::live::metrics::{AdmissionFamily, AdmissionSnapshot, MetricsHistory, Window};
use hookscope::webhook_server::Pki;
use scratch::Scratch;
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(120);

fn prometheus_available() -> bool {
    Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The `prometheus` process, stopped when dropped.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback port bound but never listening: a connection to it is refused, and while the
/// socket lives no other test's listener can be given the port.
fn refusing_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `prometheus` on `127.0.0.1:port` (HTTPS with `pki`'s certificate), scraping `targets`
/// every second over HTTPS with `ca` and `token`.
fn start_prometheus(
    dir: &Path,
    port: u16,
    pki: &Pki,
    api: &FakeApiServer,
    targets: &[String],
) -> Prometheus {
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).unwrap();
        dir.join(name).display().to_string()
    };
    let ca = write("apiserver-ca.pem", api.ca_pem());
    let token = write("token", &api.token());
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let config = write(
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: apiserver\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n    authorization:\n      credentials_file: {token}\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    );
    let cert = write("web.crt", pki.server_cert_pem());
    let key = write("web.key", pki.server_key_pem());
    let web = write(
        "web.yml",
        &format!("tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"),
    );
    let storage = dir.join("data");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={config}"))
        .arg(format!("--web.config.file={web}"))
        .arg(format!("--storage.tsdb.path={}", storage.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    Prometheus(child)
}

/// One webhook's request counter, as kube-apiserver exposes it.
fn requests(n: f64) -> String {
    format!(
        "# HELP apiserver_admission_webhook_request_total [ALPHA] Admission webhook request total.\n# TYPE apiserver_admission_webhook_request_total counter\napiserver_admission_webhook_request_total{{code=\"200\",name=\"check.example.com\",operation=\"CREATE\",rejected=\"false\",type=\"validating\"}} {n}\n"
    )
}

/// The request counter of `instance` in `snapshot`.
fn count(snapshot: &AdmissionSnapshot, instance: &str) -> Option<f64> {
    snapshot
        .counters
        .iter()
        .find(|(k, _)| {
            k.family == AdmissionFamily::WebhookRequests
                && k.labels.get("instance") == Some(instance)
                && k.labels.get("job") == Some("apiserver")
                && k.labels.get("name") == Some("check.example.com")
        })
        .map(|(_, v)| *v)
}

fn options(kubeconfig: &Path, url: String, ca: &Path) -> ClusterOptions {
    ClusterOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        scrape_interval: Duration::from_secs(1),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
        },
        prometheus: Some(PrometheusOptions {
            url,
            ca_file: Some(ca.to_path_buf()),
            token_file: None,
            history: Duration::from_secs(60),
        }),
        ..ClusterOptions::default()
    }
}

async fn until<T>(
    rx: &mut mpsc::Receiver<ClusterMsg>,
    mut want: impl FnMut(ClusterMsg) -> Option<T>,
) -> T {
    let mut seen = std::collections::VecDeque::new();
    let found = tokio::time::timeout(WAIT, async {
        loop {
            let m = rx.recv().await.expect("the run task keeps going");
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
    found.unwrap_or_else(|_| {
        panic!("the awaited message did not come within {WAIT:?}; the last messages: {seen:#?}")
    })
}

fn prometheus_failure(m: ClusterMsg) -> Option<Failure> {
    match m {
        ClusterMsg::FeedFailed {
            feed: Feed::Prometheus,
            failure,
        } => Some(failure),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_answers_the_numbers_the_apiservers_serve_with_their_history() {
    if !prometheus_available() {
        println!("skipped: prometheus is not installed (Debian's prometheus package)");
        return;
    }
    let a = FakeApiServer::start().await.unwrap();
    let b = a.start_peer().await.unwrap();
    let (ia, ib) = (a.addr().to_string(), b.addr().to_string());
    let scratch = Scratch::new(&format!("hookscope-prom-{}", uuid::Uuid::new_v4().simple()));
    let kubeconfig = scratch.join("kubeconfig");
    std::fs::write(&kubeconfig, a.kubeconfig()).unwrap();
    let pki = Pki::mint(&[]).unwrap();
    let web_ca = scratch.join("web-ca.pem");
    std::fs::write(&web_ca, pki.ca_pem()).unwrap();
    let port = free_port();
    let _prometheus = start_prometheus(&scratch, port, &pki, &a, &[ia.clone(), ib.clone()]);
    let url = format!("https://127.0.0.1:{port}");

    // The apiservers have counted no admission yet: Prometheus has none of their series, a
    // state of the feed (after "connection refused" while it starts).
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(options(&kubeconfig, url.clone(), &web_ca), tx));
    let empty = until(&mut rx, |m| {
        prometheus_failure(m).filter(|f| f.reason.contains("has no admission series"))
    })
    .await;
    assert_eq!(empty.kind, FailureKind::Server);

    // The counters come: Prometheus answers each apiserver's, labelled by instance.
    a.set_metrics(&requests(10.0));
    b.set_metrics(&requests(100.0));
    until(&mut rx, |m| {
        (m == ClusterMsg::FeedRecovered(Feed::Prometheus)).then_some(())
    })
    .await;
    // Two answers in a row: both counters stay known for a whole query interval before `a`
    // moves on, so the history's steps (one an interval) hold a point of them.
    let mut in_a_row = 0;
    until(&mut rx, |m| match m {
        ClusterMsg::Queried(points) => {
            let both = points
                .last()
                .is_some_and(|(_, s)| count(s, &ia) == Some(10.0) && count(s, &ib) == Some(100.0));
            in_a_row = if both { in_a_row + 1 } else { 0 };
            (in_a_row == 2).then_some(())
        }
        _ => None,
    })
    .await;
    a.set_metrics(&requests(15.0));
    until(&mut rx, |m| match m {
        ClusterMsg::Queried(points) => points
            .last()
            .and_then(|(_, s)| (count(s, &ia) == Some(15.0)).then_some(())),
        _ => None,
    })
    .await;
    drop(rx);

    // A console started now gets what Prometheus recorded before it: a's 10, then 15.
    let started = SystemTime::now();
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(options(&kubeconfig, url.clone(), &web_ca), tx));
    let points = until(&mut rx, |m| match m {
        ClusterMsg::Queried(points) => Some(points),
        _ => None,
    })
    .await;
    assert!(points.len() >= 2, "{} points", points.len());
    assert!(points[0].0 < started, "the history reaches back");
    let values: Vec<Option<f64>> = points.iter().map(|(_, s)| count(s, &ia)).collect();
    assert!(values.contains(&Some(10.0)), "{values:?}");
    assert_eq!(values.last(), Some(&Some(15.0)), "{values:?}");
    // Prometheus scrapes its two targets at their own offsets in the interval: the first steps
    // may hold one apiserver's counter without the other's, which would count as appearing
    // (all of it an increase). The increases are read from the first step that knows both.
    let mut history = MetricsHistory::new(1000);
    let known = |s: &AdmissionSnapshot| count(s, &ia).is_some() && count(s, &ib).is_some();
    for (at, snapshot) in points.into_iter().skip_while(|(_, s)| !known(s)) {
        history.push(at, snapshot).unwrap();
    }
    let increase = |instance: &str| {
        let window =
            Window::latest(Duration::from_secs(3600)).of_instance(Some(instance.to_string()));
        history.rates(&window, AdmissionFamily::WebhookRequests, &["name"])[0].increase
    };
    assert_eq!(increase(&ia), 5.0);
    assert_eq!(increase(&ib), 0.0);
    assert_eq!(history.instances(), {
        let mut both = vec![ia.clone(), ib.clone()];
        both.sort();
        both
    });
    drop(rx);

    // A path Prometheus does not serve: its answer, as the feed's state.
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(
        options(&kubeconfig, format!("{url}/nothing"), &web_ca),
        tx,
    ));
    let failure = until(&mut rx, prometheus_failure).await;
    assert!(
        failure.reason.contains("answered 404"),
        "{}",
        failure.reason
    );
    drop(rx);

    // Without its CA, Prometheus' certificate is not trusted.
    let mut untrusted = options(&kubeconfig, url.clone(), &web_ca);
    untrusted.prometheus.as_mut().unwrap().ca_file = None;
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(untrusted, tx));
    let failure = until(&mut rx, prometheus_failure).await;
    assert_eq!(failure.kind, FailureKind::Tls, "{}", failure.reason);
    assert!(
        failure.action.contains("--prometheus-ca"),
        "{}",
        failure.action
    );
}

#[test]
fn prometheus_errors_and_empty_answers_are_read_not_trusted() {
    // Prometheus' error body (web/api/v1 `apiError`), on a 400.
    let bad = br#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error: unexpected end of input"}"#;
    let e = parse_answer(400, bad).unwrap_err().to_string();
    assert_eq!(
        e,
        r#"answered 400 (bad_data): invalid parameter "query": 1:1: parse error: unexpected end of input"#
    );
    // A proxy's page in front of it.
    let e = parse_answer(502, b"<html>Bad Gateway</html>")
        .unwrap_err()
        .to_string();
    assert_eq!(e, "answered 502 (Bad Gateway): <html>Bad Gateway</html>");
    assert!(parse_answer(200, b"not json").is_err());
    // No series: an empty answer, which the feed reports.
    let none = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
    assert!(parse_answer(200, none).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_file_is_sent_as_a_bearer_token() {
    // The fake API server checks bearer tokens: without the token its answer is 401, with it the
    // 404 of a path it does not serve — either way an API error, a state of the feed.
    let api = FakeApiServer::start().await.unwrap();
    let scratch = Scratch::new(&format!(
        "hookscope-prom-token-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let kubeconfig = scratch.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let ca = scratch.join("ca.pem");
    std::fs::write(&ca, api.ca_pem()).unwrap();
    let token = scratch.join("token");
    std::fs::write(&token, api.token()).unwrap();
    for (with_token, code, kind) in [
        (false, "answered 401", FailureKind::Unauthorized),
        (true, "answered 404", FailureKind::Server),
    ] {
        let mut options = options(&kubeconfig, api.url(), &ca);
        options.prometheus.as_mut().unwrap().token_file = with_token.then(|| token.clone());
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(run(options, tx));
        let failure = until(&mut rx, prometheus_failure).await;
        assert!(failure.reason.contains(code), "{}", failure.reason);
        assert_eq!(failure.kind, kind, "{}", failure.reason);
    }
    let asked: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/query_range")
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[0]
            .query
            .contains("query=%7B__name__%3D~%22apiserver_admission_webhook_rejection_count%7C"),
        "{}",
        asked[0].query
    );
}

/// Prometheus is another server: it is asked while the cluster cannot be reached (a private API
/// endpoint, a VPN down), and the metrics do not wait for the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_is_read_while_the_cluster_is_unreachable() {
    // The loopback API server stands in for Prometheus here (it answers the query with the 404
    // of a path it does not serve: the query went out); the cluster's server is a closed port.
    let prometheus = FakeApiServer::start().await.unwrap();
    let scratch = Scratch::new(&format!(
        "hookscope-prom-alone-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let (_closed_socket, closed) = refusing_port();
    let kubeconfig = scratch.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        prometheus
            .kubeconfig()
            .replace(&prometheus.url(), &format!("https://127.0.0.1:{closed}")),
    )
    .unwrap();
    let ca = scratch.join("ca.pem");
    std::fs::write(&ca, prometheus.ca_pem()).unwrap();
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(options(&kubeconfig, prometheus.url(), &ca), tx));
    let failure = until(&mut rx, |m| match m {
        ClusterMsg::Connected(_) => panic!("the cluster's port is closed"),
        m => prometheus_failure(m),
    })
    .await;
    assert!(
        failure.reason.contains("answered 401"),
        "{}",
        failure.reason
    );
    let asked = prometheus
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/query_range")
        .count();
    // Asked at least once; a retry 50 ms after the 401 may already have gone out too on a
    // loaded machine.
    assert!(asked >= 1, "Prometheus was not asked");
    // The cluster is still tried, and fails.
    until(&mut rx, |m| {
        matches!(m, ClusterMsg::Failed(_)).then_some(())
    })
    .await;
}

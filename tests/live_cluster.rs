//! The live cluster connection against the fake API server, over TLS with a minted CA, through
//! the real kube client and kube-runtime watchers.

#[path = "common/scratch.rs"]
mod scratch;

mod common;

use scratch::Scratch;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hookscope::api::WebhookKind;
use hookscope::fake_apiserver::{Denial, FakeApiServer, FakeResource, WatchExpiry};
use hookscope::live::cluster::{
    AdmissionKind, Backoff, ChangeAction, Cluster, ClusterError, ClusterMsg, ClusterOptions, Edit,
    FailureKind, Feed, GroupVersion, KubeconfigSource, Seen, WebhookSet, WriteError,
    kubeconfig_source, read_kubeconfig, run,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(120);

fn scratch_dir() -> Scratch {
    Scratch::new(&format!("hookscope-live-{}", uuid::Uuid::new_v4().simple()))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

fn mutating(name: &str, failure_policy: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("{name}.example.com"),
            "clientConfig": {"url": "https://127.0.0.1:8443/hook"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "failurePolicy": failure_policy,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    })
}

fn validating(name: &str) -> Value {
    let mut object = mutating(name, "Fail");
    object["kind"] = json!("ValidatingWebhookConfiguration");
    object
}

fn fast_options(kubeconfig: PathBuf) -> ClusterOptions {
    ClusterOptions {
        kubeconfig: Some(kubeconfig),
        scrape_interval: Duration::from_millis(200),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(400),
        },
        ..ClusterOptions::default()
    }
}

/// A fake server, a kubeconfig for it, and a running [`run`] task.
struct Live {
    server: FakeApiServer,
    kubeconfig: PathBuf,
    rx: mpsc::Receiver<ClusterMsg>,
    /// Feeds that failed since they last worked: their recovery is a message of its own.
    failed: Vec<Feed>,
    /// What discovery found last.
    discovered: Option<Vec<hookscope::live::cluster::Served>>,
    _scratch: Scratch,
}

impl Live {
    async fn start(setup: impl FnOnce(&FakeApiServer)) -> Live {
        Live::start_with(setup, false).await
    }

    /// [`Live::start`] with the server stopped before the run task starts.
    async fn start_down(setup: impl FnOnce(&FakeApiServer)) -> Live {
        Live::start_with(setup, true).await
    }

    async fn start_with(setup: impl FnOnce(&FakeApiServer), down: bool) -> Live {
        let server = FakeApiServer::start().await.expect("fake server");
        let scratch = scratch_dir();
        let kubeconfig = write(&scratch, "config", &server.kubeconfig());
        setup(&server);
        if down {
            server.stop().await;
        }
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(run(fast_options(kubeconfig.clone()), tx));
        Live {
            server,
            kubeconfig,
            rx,
            failed: Vec::new(),
            discovered: None,
            _scratch: scratch,
        }
    }

    /// The next message that is not a metrics scrape, a metrics or namespaces feed state, the
    /// namespaces, or a feed reported working when it had not failed (each watcher says so at
    /// its first list of a connection).
    async fn next(&mut self) -> ClusterMsg {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let message = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .expect("a message in time")
                .expect("the run task keeps going");
            match message {
                ClusterMsg::Discovered(served) => self.discovered = Some(served),
                ClusterMsg::Metrics(_)
                | ClusterMsg::Namespaces(_)
                | ClusterMsg::Crds(_)
                | ClusterMsg::FeedFailed {
                    feed: Feed::Metrics | Feed::Namespaces | Feed::Crds | Feed::Instances,
                    ..
                }
                | ClusterMsg::FeedRecovered(
                    Feed::Metrics | Feed::Namespaces | Feed::Crds | Feed::Instances,
                ) => {}
                ClusterMsg::FeedRecovered(feed) if !self.failed.contains(&feed) => {}
                ClusterMsg::FeedRecovered(feed) => {
                    self.failed.retain(|f| *f != feed);
                    return ClusterMsg::FeedRecovered(feed);
                }
                other => {
                    if let ClusterMsg::FeedFailed { feed, .. } = &other {
                        self.failed.push(*feed);
                    }
                    return other;
                }
            }
        }
    }

    /// Skips messages until `want` matches; returns the skipped ones and the match.
    async fn until<T>(
        &mut self,
        mut want: impl FnMut(&ClusterMsg) -> Option<T>,
    ) -> (Vec<ClusterMsg>, T) {
        let mut skipped = Vec::new();
        let found = tokio::time::timeout(WAIT, async {
            loop {
                let message = self.next().await;
                if let Some(found) = want(&message) {
                    return found;
                }
                skipped.push(message);
            }
        })
        .await;
        match found {
            Ok(found) => (skipped, found),
            Err(_) => panic!("the awaited message did not come; got {skipped:?}"),
        }
    }

    /// Waits for a set in which every watcher has listed (and discovery has said which policy
    /// kinds are not served).
    async fn synced(&mut self) -> WebhookSet {
        self.until(|m| match m {
            ClusterMsg::Configurations(set) if set.synced() => Some(set.clone()),
            _ => None,
        })
        .await
        .1
    }

    /// Skips to the next change.
    async fn until_change(&mut self) -> (Vec<ClusterMsg>, hookscope::live::cluster::Change) {
        self.until(|m| match m {
            ClusterMsg::Change(c) => Some(c.clone()),
            _ => None,
        })
        .await
    }

    /// Skips to the next connection failure.
    async fn until_failed(&mut self) -> (Vec<ClusterMsg>, hookscope::live::cluster::Failure) {
        self.until(|m| match m {
            ClusterMsg::Failed(f) => Some(f.clone()),
            _ => None,
        })
        .await
    }

    async fn next_change(&mut self) -> hookscope::live::cluster::Change {
        match self.next().await {
            ClusterMsg::Change(change) => change,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    /// Waits until every watcher has its watch open: the two webhook configuration kinds, the
    /// namespaces, and the two validating policy kinds the fake serves by default.
    async fn watching(&self) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.server.open_watches() < 5 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "watches not open: {:?}",
                self.server.requests()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Skips to the next failure of the params feed.
    async fn params_failed(&mut self) -> hookscope::live::cluster::Failure {
        self.until(|m| match m {
            ClusterMsg::FeedFailed {
                feed: Feed::Params,
                failure,
            } => Some(failure.clone()),
            _ => None,
        })
        .await
        .1
    }

    /// Skips to the next parameter objects: how many ConfigMaps of `pol` they hold, and
    /// `replica-limits` among them.
    async fn next_params(&mut self) -> (usize, Value) {
        use hookscope::engine::policy::ParamSource as _;
        let (_, params) = self
            .until(|m| match m {
                ClusterMsg::Params(params) => Some(params.clone()),
                _ => None,
            })
            .await;
        let found = params.params("v1", "ConfigMap", Some("pol"));
        let limit = found
            .iter()
            .find(|o| o["metadata"]["name"] == "replica-limits")
            .map(|o| (**o).clone())
            .expect("replica-limits");
        (found.len(), limit)
    }

    fn count(&self, resource: FakeResource, watch: bool) -> usize {
        let path = resource.path();
        self.server
            .requests()
            .iter()
            .filter(|r| r.path == path && r.is_watch() == watch)
            .count()
    }
}

/// The first message `want` accepts, within [`WAIT`] overall.
async fn recv_until<T>(
    rx: &mut mpsc::Receiver<ClusterMsg>,
    mut want: impl FnMut(ClusterMsg) -> Option<T>,
) -> T {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(found) = want(recv(rx).await) {
                return found;
            }
        }
    })
    .await
    .expect("the awaited message in time")
}

async fn recv(rx: &mut mpsc::Receiver<ClusterMsg>) -> ClusterMsg {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("a message in time")
        .expect("the run task keeps going")
}

fn names(configurations: &[hookscope::api::WebhookConfiguration]) -> Vec<&str> {
    configurations.iter().map(|c| c.name.as_str()).collect()
}

fn no_changes(messages: &[ClusterMsg]) {
    let changes: Vec<&ClusterMsg> = messages
        .iter()
        .filter(|m| matches!(m, ClusterMsg::Change(_)))
        .collect();
    assert!(changes.is_empty(), "spurious changes: {changes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_is_sorted_by_name_defaulted_and_reports_who_is_connected() {
    let mut live = Live::start(|s| {
        s.create("kubectl", mutating("zeta", "Ignore")).unwrap();
        s.create("kubectl", mutating("alpha", "Fail")).unwrap();
        s.create("helm", validating("policy")).unwrap();
    })
    .await;
    match live.next().await {
        ClusterMsg::Connecting {
            server,
            context,
            attempt,
        } => {
            assert_eq!(server, live.server.url());
            assert_eq!(context, "fake");
            assert_eq!(attempt, 1);
        }
        other => panic!("expected Connecting, got {other:?}"),
    }
    match live.next().await {
        ClusterMsg::Connected(connected) => {
            assert_eq!(connected.info.server, live.server.url());
            assert_eq!(connected.info.context, "fake");
            assert_eq!(connected.info.user, "fake");
            assert_eq!(
                connected.info.source,
                KubeconfigSource::Flag(live.kubeconfig.clone())
            );
            assert_eq!(connected.server_version, "v1.33.0-hookscope-fake");
        }
        other => panic!("expected Connected, got {other:?}"),
    }
    let (skipped, set) = live
        .until(|m| match m {
            ClusterMsg::Configurations(set) if set.mutating_synced && set.validating_synced => {
                Some(set.clone())
            }
            _ => None,
        })
        .await;
    no_changes(&skipped);
    assert_eq!(names(&set.mutating), ["alpha", "zeta"]);
    assert_eq!(names(&set.validating), ["policy"]);
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    assert_eq!(set.mutating[0].kind, WebhookKind::Mutating);
    // The project's defaulting ran on the server's objects.
    assert_eq!(
        set.mutating[0].webhooks[0].match_policy.as_deref(),
        Some("Equivalent")
    );
    assert_eq!(
        set.mutating[1].webhooks[0].failure_policy.as_deref(),
        Some("Ignore")
    );
    assert_eq!(names(&set.all()), ["alpha", "zeta", "policy"]);
    // Watchers, not polling: one list and one watch per resource (the namespaces' list may
    // still be under way).
    for resource in [
        FakeResource::MutatingWebhookConfigurations,
        FakeResource::ValidatingWebhookConfigurations,
    ] {
        assert_eq!(live.count(resource, false), 1, "lists of {resource}");
    }
    assert!(live.count(FakeResource::Namespaces, false) <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_while_watching_arrive_in_order_with_manager_and_diff() {
    let mut live = Live::start(|_| {}).await;
    live.synced().await;

    live.server
        .create("kubectl-create", mutating("injector", "Fail"))
        .unwrap();
    let added = live.next_change().await;
    assert_eq!(
        (added.kind, added.name.as_str(), added.action),
        (
            WebhookKind::Mutating.into(),
            "injector",
            ChangeAction::Added
        )
    );
    assert_eq!(added.who, "kubectl-create");
    assert_eq!(added.operation.as_deref(), Some("Update"));
    assert_eq!(added.seen, Seen::Event);
    assert!(added.diff.contains("--- /dev/null"), "{}", added.diff);
    assert!(added.diff.contains("+  name: injector"), "{}", added.diff);
    match live.next().await {
        ClusterMsg::Configurations(set) => assert_eq!(names(&set.mutating), ["injector"]),
        other => panic!("expected the set, got {other:?}"),
    }

    live.server
        .update("helm", mutating("injector", "Ignore"))
        .unwrap();
    let modified = live.next_change().await;
    assert_eq!(modified.action, ChangeAction::Modified);
    assert_eq!(modified.who, "helm");
    assert!(
        modified.diff.contains("-  failurePolicy: Fail"),
        "{}",
        modified.diff
    );
    assert!(
        modified.diff.contains("+  failurePolicy: Ignore"),
        "{}",
        modified.diff
    );
    assert!(
        !modified.diff.contains("managedFields"),
        "{}",
        modified.diff
    );
    assert!(
        modified.resource_version.parse::<u64>().unwrap()
            > added.resource_version.parse::<u64>().unwrap()
    );
    match live.next().await {
        ClusterMsg::Configurations(set) => {
            assert_eq!(
                set.mutating[0].webhooks[0].failure_policy.as_deref(),
                Some("Ignore")
            )
        }
        other => panic!("expected the set, got {other:?}"),
    }

    live.server
        .delete(FakeResource::MutatingWebhookConfigurations, "injector")
        .unwrap();
    let deleted = live.next_change().await;
    assert_eq!(deleted.action, ChangeAction::Deleted);
    assert_eq!(deleted.who, "unknown");
    assert_eq!(
        deleted.resource_version,
        live.server.resource_version().to_string()
    );
    assert!(deleted.diff.contains("+++ /dev/null"), "{}", deleted.diff);
    match live.next().await {
        ClusterMsg::Configurations(set) => assert!(set.mutating.is_empty()),
        other => panic!("expected the set, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_pass_silently_and_move_the_resume_point() {
    let mut live = Live::start(|s| {
        s.create("kubectl", mutating("a", "Fail")).unwrap();
    })
    .await;
    live.synced().await;
    live.watching().await;
    live.server.bump_unrelated(7);
    let bookmarked = live.server.resource_version().to_string();
    live.server.send_bookmarks();
    live.server.drop_watches();
    // The re-watch resumes from the bookmark's resourceVersion.
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let deadline = tokio::time::Instant::now() + WAIT;
    while !live.server.requests().iter().any(|r| {
        r.path == path
            && r.is_watch()
            && r.param("resourceVersion").as_deref() == Some(bookmarked.as_str())
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no watch from the bookmark: {:?}",
            live.server.requests()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live.server
        .create("kubectl", mutating("b", "Fail"))
        .unwrap();
    // Nothing came of the bookmark: the next message is the new object.
    let change = live.next_change().await;
    assert_eq!(
        (change.name.as_str(), change.action),
        ("b", ChangeAction::Added)
    );
}

async fn expired_relist(expiry: WatchExpiry) {
    let mut live = Live::start(|s| {
        s.set_watch_expiry(expiry);
        s.create("kubectl", mutating("a", "Fail")).unwrap();
        s.create("kubectl", validating("v")).unwrap();
    })
    .await;
    live.synced().await;
    live.watching().await;
    let lists_before = live.count(FakeResource::MutatingWebhookConfigurations, false);
    live.server.bump_unrelated(3);
    live.server.expire_history();
    live.server.drop_watches();
    // Wait for the relist the 410 causes, then make one real change.
    let deadline = tokio::time::Instant::now() + WAIT;
    while live.count(FakeResource::MutatingWebhookConfigurations, false) == lists_before
        || live.server.open_watches() < 3
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no relist after 410: {:?}",
            live.server.requests()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    live.server.update("helm", mutating("a", "Ignore")).unwrap();
    let (skipped, change) = live.until_change().await;
    assert!(
        skipped
            .iter()
            .all(|m| !matches!(m, ClusterMsg::FeedFailed { .. } | ClusterMsg::Failed(_))),
        "a 410 is routine: {skipped:?}"
    );
    assert_eq!(
        (change.name.as_str(), change.action, change.who.as_str()),
        ("a", ChangeAction::Modified, "helm")
    );
    assert!(
        change.diff.contains("+  failurePolicy: Ignore"),
        "{}",
        change.diff
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_error_event_relists_without_spurious_changes() {
    expired_relist(WatchExpiry::ErrorEvent).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watch_http_410_relists_without_spurious_changes() {
    expired_relist(WatchExpiry::HttpStatus).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_a_gap_reports_what_really_changed() {
    let mut live = Live::start(|s| {
        s.create("kubectl", mutating("kept", "Fail")).unwrap();
        s.create("kubectl", mutating("gone", "Fail")).unwrap();
    })
    .await;
    live.synced().await;
    live.watching().await;
    // The connection drops; meanwhile one object goes away; the events are compacted.
    live.server.stop().await;
    live.server
        .delete(FakeResource::MutatingWebhookConfigurations, "gone")
        .unwrap();
    live.server.expire_history();
    live.server.restart().await.unwrap();
    // Whether the client noticed the outage (and reconnected) or only the 410, the deletion is
    // found by the relist.
    let (_, change) = live.until_change().await;
    assert_eq!(
        (change.name.as_str(), change.action, change.seen),
        ("gone", ChangeAction::Deleted, Seen::Relist)
    );
    match live.next().await {
        ClusterMsg::Configurations(set) => assert_eq!(names(&set.mutating), ["kept"]),
        other => panic!("expected the set, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_is_resumed() {
    let mut live = Live::start(|_| {}).await;
    live.synced().await;
    live.watching().await;
    let watches_before = live.count(FakeResource::ValidatingWebhookConfigurations, true);
    live.server.drop_watches();
    let deadline = tokio::time::Instant::now() + WAIT;
    while live.server.open_watches() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches not reopened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(live.count(FakeResource::ValidatingWebhookConfigurations, true) > watches_before);
    live.server
        .create("kubectl", validating("after-drop"))
        .unwrap();
    let change = live.next_change().await;
    assert_eq!(
        (change.kind, change.name.as_str()),
        (WebhookKind::Validating.into(), "after-drop")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_list_names_the_rbac_rule_then_recovers_when_granted() {
    let denial = Denial::resource(FakeResource::ValidatingWebhookConfigurations, "list");
    let mut live = Live::start(|s| {
        s.create("kubectl", mutating("m", "Fail")).unwrap();
        s.forbid(denial.clone());
    })
    .await;
    // The failure and the other watcher's first list come in either order.
    let (mut failure, mut mutating_set) = (None, None);
    live.until(|m| {
        match m {
            ClusterMsg::FeedFailed {
                feed: Feed::VALIDATING_WEBHOOKS,
                failure: f,
            } => failure = failure.take().or(Some(f.clone())),
            ClusterMsg::Configurations(set) if set.mutating_synced => {
                mutating_set = Some(set.clone())
            }
            _ => {}
        }
        (failure.is_some() && mutating_set.is_some()).then_some(())
    })
    .await;
    let (failure, set) = (failure.unwrap(), mutating_set.unwrap());
    assert_eq!(failure.kind, FailureKind::Forbidden);
    assert!(
        failure.reason.contains(
            r#"User "hookscope-test" cannot list resource "validatingwebhookconfigurations""#
        ),
        "{}",
        failure.reason
    );
    let rbac = failure.rbac.expect("RBAC advice");
    assert_eq!(
        rbac.check,
        "kubectl auth can-i list validatingwebhookconfigurations.admissionregistration.k8s.io --context fake"
    );
    assert!(
        rbac.rule
            .contains(r#"resources: ["validatingwebhookconfigurations"]"#),
        "{}",
        rbac.rule
    );
    assert!(
        rbac.rule.contains(r#"verbs: ["get", "list", "watch"]"#),
        "{}",
        rbac.rule
    );
    assert!(failure.retry_in > Duration::ZERO);

    // The other watcher is unaffected.
    assert_eq!(names(&set.mutating), ["m"]);
    assert!(!set.validating_synced);

    live.server.create("kubectl", validating("v")).unwrap();
    live.server.allow(&denial);
    live.until(|m| matches!(m, ClusterMsg::FeedRecovered(Feed::VALIDATING_WEBHOOKS)).then_some(()))
        .await;
    let set = live.synced().await;
    assert_eq!(names(&set.validating), ["v"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_as_text_and_a_403_names_the_non_resource_rule() {
    let text = std::fs::read_to_string("tests/fixtures/live/cluster/metrics.txt").unwrap();
    let server = FakeApiServer::start().await.unwrap();
    server.set_metrics(&text);
    server.forbid(Denial::Path("/metrics".into()));
    let scratch = scratch_dir();
    let kubeconfig = write(&scratch, "config", &server.kubeconfig());
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(fast_options(kubeconfig), tx));
    let failure = recv_until(&mut rx, |m| match m {
        ClusterMsg::FeedFailed {
            feed: Feed::Metrics,
            failure,
        } => Some(failure),
        _ => None,
    })
    .await;
    assert_eq!(failure.kind, FailureKind::Forbidden);
    assert!(
        failure.reason.contains(r#"cannot get path "/metrics""#),
        "{}",
        failure.reason
    );
    let rbac = failure.rbac.unwrap();
    assert_eq!(rbac.check, "kubectl auth can-i get /metrics --context fake");
    assert!(rbac.rule.contains(r#"nonResourceURLs: ["/metrics"]"#));

    server.allow(&Denial::Path("/metrics".into()));
    recv_until(&mut rx, |m| {
        (m == ClusterMsg::FeedRecovered(Feed::Metrics)).then_some(())
    })
    .await;
    let scrape = recv_until(&mut rx, |m| match m {
        ClusterMsg::Metrics(scrape) => Some(scrape),
        _ => None,
    })
    .await;
    // The fake's `default/kubernetes` has no endpoints: read through the kubeconfig's server.
    assert_eq!(scrape.texts, vec![(None, text)]);
    let asked = server
        .requests()
        .into_iter()
        .find(|r| r.path == "/metrics")
        .unwrap();
    assert_eq!(asked.accept.as_deref(), Some("text/plain;version=0.0.4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_down_at_start_fails_with_a_retry_then_connects() {
    let mut live = Live::start_down(|s| {
        s.create("kubectl", mutating("m", "Fail")).unwrap();
    })
    .await;
    let failure = live.until_failed().await.1;
    assert_eq!(failure.kind, FailureKind::Unreachable);
    assert!(
        failure.reason.contains(&live.server.url()),
        "{}",
        failure.reason
    );
    assert!(
        failure.reason.contains("connection refused"),
        "{}",
        failure.reason
    );
    assert!(failure.retry_in > Duration::ZERO);
    // Retries count up while it stays down.
    live.until(|m| matches!(m, ClusterMsg::Connecting { attempt: 2.., .. }).then_some(()))
        .await;

    live.server.restart().await.unwrap();
    live.until(|m| matches!(m, ClusterMsg::Connected(_)).then_some(()))
        .await;
    assert_eq!(names(&live.synced().await.mutating), ["m"]);

    // A lost connection is shown and retried, without spurious changes on reconnection.
    live.server.stop().await;
    let (_, failure) = live.until_failed().await;
    assert_eq!(failure.kind, FailureKind::Unreachable);
    live.server.restart().await.unwrap();
    let (skipped, _) = live
        .until(|m| matches!(m, ClusterMsg::Connected(_)).then_some(()))
        .await;
    no_changes(&skipped);
    live.server
        .create("kubectl", mutating("n", "Fail"))
        .unwrap();
    let (skipped, change) = live.until_change().await;
    no_changes(&skipped);
    assert_eq!(
        (change.name.as_str(), change.action),
        ("n", ChangeAction::Added)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_credentials_fail_as_unauthorized_until_fixed() {
    let mut live = Live::start(|s| s.set_token("rotated-away")).await;
    let failure = live.until_failed().await.1;
    assert_eq!(failure.kind, FailureKind::Unauthorized);
    assert!(failure.reason.contains("401"), "{}", failure.reason);
    assert!(
        failure
            .action
            .contains("kubectl --context fake get --raw /version"),
        "{}",
        failure.action
    );
    // The kubeconfig is read again on every attempt: a refreshed token is picked up.
    live.server.set_token("fresh");
    let refreshed = live.server.kubeconfig();
    std::fs::write(&live.kubeconfig, refreshed).unwrap();
    live.until(|m| matches!(m, ClusterMsg::Connected(_)).then_some(()))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_refused_unless_allowed_dry_run_is_not_stored_and_apply_is() {
    let mut live = Live::start(|s| {
        s.create("kubectl", mutating("injector", "Fail")).unwrap();
    })
    .await;
    live.synced().await;
    let base = editable(
        &live
            .server
            .get(FakeResource::MutatingWebhookConfigurations, "injector")
            .unwrap(),
    );
    let mut ours = base.clone();
    ours["webhooks"][0]["failurePolicy"] = json!("Ignore");
    let edit = Edit {
        kind: WebhookKind::Mutating.into(),
        name: "injector".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        base: Some(base),
        ours,
    };

    let read_only = Cluster::connect(&fast_options(live.kubeconfig.clone()))
        .await
        .unwrap();
    assert!(matches!(
        read_only.apply_edit(&edit, true, false).await,
        Err(WriteError::ReadOnly)
    ));
    assert!(live.server.requests().iter().all(|r| r.method != "PATCH"));

    let options = ClusterOptions {
        allow_writes: true,
        ..fast_options(live.kubeconfig.clone())
    };
    let writer = Cluster::connect(&options).await.unwrap();
    let before = live
        .server
        .get(FakeResource::MutatingWebhookConfigurations, "injector")
        .unwrap();
    // Another manager owns the webhooks: without force even the dry run conflicts, naming it.
    match writer.apply_edit(&edit, true, false).await {
        Err(WriteError::Rejected(failure)) => {
            assert!(failure.reason.contains("409"), "{}", failure.reason);
            assert!(
                failure.reason.contains(
                    r#"conflict with "kubectl" using admissionregistration.k8s.io/v1: .webhooks[name="injector.example.com"].failurePolicy"#
                ),
                "{}",
                failure.reason
            );
            assert!(failure.action.contains("force"), "{}", failure.action);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let dry = writer.apply_edit(&edit, true, true).await.unwrap();
    assert_eq!(dry.dry_run["webhooks"][0]["failurePolicy"], "Ignore");
    assert!(dry.stored.is_none());
    assert_eq!(
        live.server
            .get(FakeResource::MutatingWebhookConfigurations, "injector")
            .unwrap(),
        before
    );

    let applied = writer.apply_edit(&edit, false, true).await.unwrap();
    let stored = applied.stored.unwrap();
    assert_eq!(stored["webhooks"][0]["failurePolicy"], "Ignore");
    let on_server = live
        .server
        .get(FakeResource::MutatingWebhookConfigurations, "injector")
        .unwrap();
    assert_eq!(on_server["webhooks"][0]["failurePolicy"], "Ignore");
    let patches: Vec<_> = live
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert!(
        patches
            .iter()
            .all(|p| p.param("fieldManager").as_deref() == Some("hookscope"))
    );
    assert_eq!(
        patches
            .iter()
            .filter(|p| p.param("dryRun").as_deref() == Some("All"))
            .count(),
        // The conflict; each forced write first without force (what it takes over), then with.
        5
    );

    let (skipped, change) = live.until_change().await;
    no_changes(&skipped);
    assert_eq!(
        (
            change.action,
            change.who.as_str(),
            change.operation.as_deref()
        ),
        (ChangeAction::Modified, "hookscope", Some("Apply"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_flag_selects_among_two_contexts() {
    let a = FakeApiServer::start().await.unwrap();
    let b = FakeApiServer::start().await.unwrap();
    a.create("kubectl", mutating("on-alpha", "Fail")).unwrap();
    b.create("kubectl", mutating("on-beta", "Fail")).unwrap();
    let scratch = scratch_dir();
    let path = write(&scratch, "config", &common::two_context_kubeconfig(&a, &b));

    let default = Cluster::connect(&fast_options(path.clone())).await.unwrap();
    assert_eq!(
        (
            default.info().context.as_str(),
            default.info().server.clone()
        ),
        ("alpha", a.url())
    );

    let options = ClusterOptions {
        context: Some("beta".into()),
        ..fast_options(path.clone())
    };
    let (tx, mut rx) = mpsc::channel(64);
    tokio::spawn(run(options, tx));
    let connected = recv_until(&mut rx, |m| match m {
        ClusterMsg::Connected(c) => Some(c),
        ClusterMsg::Failed(f) => panic!("{f}"),
        _ => None,
    })
    .await;
    assert_eq!(
        (
            connected.info.context.as_str(),
            connected.info.user.as_str(),
            connected.info.server.clone()
        ),
        ("beta", "beta", b.url())
    );
    let set = recv_until(&mut rx, |m| match m {
        ClusterMsg::Configurations(set) if set.mutating_synced => Some(set),
        _ => None,
    })
    .await;
    assert_eq!(names(&set.mutating), ["on-beta"]);

    let options = ClusterOptions {
        context: Some("gamma".into()),
        ..fast_options(path)
    };
    match Cluster::connect(&options).await {
        Err(ClusterError::UnknownContext { context, available }) => {
            assert_eq!(context, "gamma");
            assert_eq!(available, ["alpha", "beta"]);
        }
        other => panic!("expected UnknownContext, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_env_lists_are_merged_first_file_winning() {
    let a = FakeApiServer::start().await.unwrap();
    let b = FakeApiServer::start().await.unwrap();
    let dir = scratch_dir();
    let first = write(&dir, "a.yaml", &a.kubeconfig_named("alpha"));
    let second = write(&dir, "b.yaml", &b.kubeconfig_named("beta"));
    let env = std::env::join_paths([&first, &second]).unwrap();
    let flag = dir.join("flag.yaml");

    assert_eq!(
        kubeconfig_source(Some(&flag), Some(&env), None).unwrap(),
        KubeconfigSource::Flag(flag)
    );
    let source = kubeconfig_source(None, Some(&env), None).unwrap();
    assert_eq!(
        source,
        KubeconfigSource::Env(vec![first.clone(), second.clone()])
    );
    let merged = read_kubeconfig(&source).unwrap();
    assert_eq!(merged.current_context.as_deref(), Some("alpha"));
    assert_eq!(merged.contexts.len(), 2);

    let options = ClusterOptions {
        context: Some("beta".into()),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::connect_with(source, &options).await.unwrap();
    assert_eq!(cluster.info().server, b.url());
    assert_eq!(
        cluster.server_version().await.unwrap(),
        "v1.33.0-hookscope-fake"
    );

    let home = scratch_dir();
    assert_eq!(kubeconfig_source(None, None, Some(home.path())).ok(), None);
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    write(&home.join(".kube"), "config", &a.kubeconfig());
    assert_eq!(
        kubeconfig_source(None, Some(std::ffi::OsStr::new("")), Some(home.path())).unwrap(),
        KubeconfigSource::Default(home.join(".kube").join("config"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_kubeconfig_is_a_clear_error_and_run_keeps_retrying() {
    let scratch = scratch_dir();
    let missing = scratch.join("nope").join("config");
    let options = fast_options(missing.clone());
    let error = Cluster::connect(&options).await.unwrap_err();
    assert!(
        matches!(&error, ClusterError::KubeconfigRead { path, .. } if *path == missing),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&missing.display().to_string()),
        "{error}"
    );

    let home = scratch_dir();
    let error = kubeconfig_source(None, None, Some(home.path())).unwrap_err();
    assert!(
        error.to_string().contains("KUBECONFIG is not set"),
        "{error}"
    );
    let failure = error.to_failure(Duration::from_secs(1));
    assert_eq!(failure.kind, FailureKind::Kubeconfig);
    assert!(
        failure.action.contains("--kubeconfig"),
        "{}",
        failure.action
    );

    let (tx, mut rx) = mpsc::channel(8);
    tokio::spawn(run(options, tx));
    for _ in 0..2 {
        match tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap()
            .unwrap()
        {
            ClusterMsg::Failed(failure) => {
                assert_eq!(failure.kind, FailureKind::Kubeconfig);
                assert!(
                    failure.reason.contains(&missing.display().to_string()),
                    "{}",
                    failure.reason
                );
            }
            other => panic!("expected Failed, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_server_speaks_the_list_paging_and_watch_wire_format() {
    let server = FakeApiServer::start().await.unwrap();
    for name in ["c", "a", "b"] {
        server.create("kubectl", mutating(name, "Fail")).unwrap();
    }
    let scratch = scratch_dir();
    let path = write(&scratch, "config", &server.kubeconfig());
    let cluster = Cluster::connect(&fast_options(path)).await.unwrap();
    let client = cluster.client();
    let get = |uri: &str| http::Request::get(uri).body(Vec::new()).unwrap();
    let base = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

    let page: Value = client
        .request(get(&format!("{base}?limit=2")))
        .await
        .unwrap();
    assert_eq!(page["kind"], "MutatingWebhookConfigurationList");
    assert_eq!(page["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(
        page["metadata"]["resourceVersion"],
        server.resource_version().to_string()
    );
    let first: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(first, ["a", "b"]);
    let token = page["metadata"]["continue"].as_str().unwrap().to_string();
    let rest: Value = client
        .request(get(&format!("{base}?limit=2&continue={token}")))
        .await
        .unwrap();
    assert_eq!(rest["items"][0]["metadata"]["name"], "c");
    assert!(rest["metadata"].get("continue").is_none());

    // An expired continue token is an HTTP 410 Expired.
    server.bump_unrelated(1);
    server.expire_history();
    match client
        .request::<Value>(get(&format!("{base}?limit=2&continue={token}")))
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert!(
                status
                    .message
                    .starts_with("The provided continue parameter is too old")
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }

    let one: Value = client.request(get(&format!("{base}/b"))).await.unwrap();
    assert_eq!(one["kind"], "MutatingWebhookConfiguration");
    match client.request::<Value>(get(&format!("{base}/zz"))).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 404);
            assert_eq!(
                status.message,
                r#"mutatingwebhookconfigurations.admissionregistration.k8s.io "zz" not found"#
            );
        }
        other => panic!("expected 404, got {other:?}"),
    }

    // A watch from a too-old resourceVersion: one ERROR event carrying the 410 Status.
    let rv = 2;
    let text = client
        .request_text(get(&format!(
            "{base}?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        )))
        .await
        .unwrap();
    let event: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["kind"], "Status");
    assert_eq!(event["object"]["code"], 410);
    assert_eq!(event["object"]["reason"], "Expired");

    // A streaming-list watch: ADDED for each object, then the initial-events-end bookmark.
    let text = client
        .request_text(get(&format!(
            "{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
        )))
        .await
        .unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(
        events[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // Without the token: 401 with a Status body.
    let mut anonymous = server.kubeconfig();
    anonymous = anonymous.replace(&server.token(), "wrong");
    let scratch = scratch_dir();
    let path = write(&scratch, "config", &anonymous);
    let stranger = Cluster::connect(&fast_options(path)).await.unwrap();
    match stranger.server_version().await {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (401, "Unauthorized"))
        }
        other => panic!("expected 401, got {other:?}"),
    }
}

// --- admission policies ---------------------------------------------------------------------

fn policy(name: &str, message: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"],
            }]},
            "validations": [{"expression": "!has(object.data) || !('forbidden' in object.data)", "message": message}],
        },
    })
}

/// `policy` taking parameters of `api_version` `kind`.
fn taking(mut policy: Value, api_version: &str, kind: &str) -> Value {
    policy["spec"]["paramKind"] = json!({"apiVersion": api_version, "kind": kind});
    policy
}

fn binding(name: &str, policy: &str, actions: &[&str]) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions},
    })
}

fn mutating_policy(api_version: &str, name: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"],
            }]},
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/data/seen', value: 'yes'}]"}}],
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_and_bindings_are_watched_defaulted_and_join_the_history_with_diffs() {
    let mut live = Live::start(|s| {
        s.create(
            "kubectl",
            policy("no-forbidden", "the key 'forbidden' is not allowed"),
        )
        .unwrap();
        // The apiserver would refuse this one (no validations): a problem, not a failure.
        let mut invalid = policy("empty", "");
        invalid["spec"]["validations"] = json!([]);
        s.create("kubectl", invalid).unwrap();
    })
    .await;
    let set = live.synced().await;
    assert_eq!(set.policies.validating.len(), 1, "{:?}", set.policies);
    let p = &set.policies.validating[0];
    assert_eq!(p.name, "no-forbidden");
    // The loader's defaults, as files get them.
    assert_eq!(p.spec.failure_policy.as_deref(), Some("Fail"));
    let constraints = p.spec.match_constraints.as_ref().unwrap();
    assert_eq!(constraints.match_policy.as_deref(), Some("Equivalent"));
    assert!(set.policies.validating_bindings.is_empty());
    assert_eq!(set.problems.len(), 1, "{:?}", set.problems);
    assert!(
        set.problems[0].starts_with("validatingadmissionpolicies/empty: left out of the replays")
            && set.problems[0].contains("spec.validations"),
        "{}",
        set.problems[0]
    );
    assert!(set.unreadable.is_empty(), "{:?}", set.unreadable);
    // Watched at v1, the version the server serves.
    let vap = FakeResource::ValidatingAdmissionPolicies;
    assert_eq!(live.count(vap, false), 1);
    live.watching().await;

    // A binding appears, changes and goes: each is a change of the history, with its diff,
    // followed by the set in force.
    live.server
        .create(
            "kubectl-create",
            binding("no-forbidden-binding", "no-forbidden", &["Warn"]),
        )
        .unwrap();
    let added = live.next_change().await;
    assert_eq!(
        (added.kind, added.name.as_str(), added.action),
        (
            AdmissionKind::ValidatingAdmissionPolicyBinding,
            "no-forbidden-binding",
            ChangeAction::Added
        )
    );
    assert_eq!(added.who, "kubectl-create");
    assert!(
        added.diff.contains("+  policyName: no-forbidden"),
        "{}",
        added.diff
    );
    assert!(
        added
            .diff
            .contains("+apiVersion: admissionregistration.k8s.io/v1\n"),
        "{}",
        added.diff
    );
    let set = match live.next().await {
        ClusterMsg::Configurations(set) => set,
        other => panic!("expected the set, got {other:?}"),
    };
    assert_eq!(set.policies.validating_bindings.len(), 1);
    assert_eq!(
        set.policies.validating_bindings[0].spec.validation_actions,
        ["Warn"]
    );

    live.server
        .update(
            "kubectl-edit",
            binding("no-forbidden-binding", "no-forbidden", &["Deny"]),
        )
        .unwrap();
    let modified = live.next_change().await;
    assert_eq!(modified.action, ChangeAction::Modified);
    assert_eq!(modified.who, "kubectl-edit");
    assert!(modified.diff.contains("-  - Warn"), "{}", modified.diff);
    assert!(modified.diff.contains("+  - Deny"), "{}", modified.diff);
    match live.next().await {
        ClusterMsg::Configurations(set) => assert_eq!(
            set.policies.validating_bindings[0].spec.validation_actions,
            ["Deny"]
        ),
        other => panic!("expected the set, got {other:?}"),
    }

    live.server
        .update(
            "kubectl-edit",
            policy("no-forbidden", "no 'forbidden' key, please"),
        )
        .unwrap();
    let modified = live.next_change().await;
    assert_eq!(modified.kind, AdmissionKind::ValidatingAdmissionPolicy);
    assert!(
        modified
            .diff
            .contains("+    message: no 'forbidden' key, please"),
        "{}",
        modified.diff
    );
    live.next().await;

    live.server
        .delete(
            FakeResource::ValidatingAdmissionPolicyBindings,
            "no-forbidden-binding",
        )
        .unwrap();
    let deleted = live.next_change().await;
    assert_eq!(
        (deleted.kind, deleted.action),
        (
            AdmissionKind::ValidatingAdmissionPolicyBinding,
            ChangeAction::Deleted
        )
    );
    assert!(deleted.diff.contains("+++ /dev/null"), "{}", deleted.diff);
    match live.next().await {
        ClusterMsg::Configurations(set) => {
            assert!(set.policies.validating_bindings.is_empty());
            assert_eq!(set.policies.validating.len(), 1);
        }
        other => panic!("expected the set, got {other:?}"),
    }
}

/// A policy the server stores is checked by the rules of the server's release: a 1.29 apiserver
/// created `duration('1d')` (its literal validators came with 1.30's environment, recorded in
/// fixtures/cel-typecheck-v1.33), so a 1.29 cluster's policy is in force, and the same policy
/// on a 1.33 cluster is one hookscope says that release would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_read_from_a_server_are_checked_by_its_releases_rules() {
    for (git_version, refused) in [("v1.29.7", false), ("v1.33.3", true)] {
        let mut live = Live::start(|s| {
            s.set_git_version(git_version);
            let mut literal = policy("literal", "");
            literal["spec"]["validations"] =
                json!([{"expression": "duration('1d') > duration('1h')"}]);
            s.create("kubectl", literal).unwrap();
        })
        .await;
        let set = live.synced().await;
        let problem = set.problems.iter().find(|p| p.contains("literal"));
        if refused {
            assert!(set.policies.validating.is_empty(), "{git_version}");
            let problem = problem.unwrap_or_else(|| panic!("{git_version}: {:?}", set.problems));
            assert!(
                problem.starts_with("validatingadmissionpolicies/literal: left out of the replays")
                    && problem.contains("invalid duration argument"),
                "{git_version}: {problem}"
            );
        } else {
            assert_eq!(problem, None, "{git_version}");
            assert_eq!(set.policies.validating.len(), 1, "{git_version}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_serve_mutating_admission_policies_is_fine() {
    // Kubernetes 1.31: ValidatingAdmissionPolicy is v1, MutatingAdmissionPolicy does not exist.
    let mut live = Live::start(|s| {
        s.set_git_version("v1.31.4");
        s.create("kubectl", validating("policy")).unwrap();
    })
    .await;
    let (skipped, set) = live
        .until(|m| match m {
            ClusterMsg::Configurations(set) if set.synced() => Some(set.clone()),
            _ => None,
        })
        .await;
    let served = live.discovered.clone().expect("discovery answered");
    let version = |k| served.iter().find(|s| s.kind == k).map(|s| s.version);
    assert_eq!(
        version(AdmissionKind::ValidatingAdmissionPolicy),
        Some(Some(GroupVersion::V1))
    );
    assert_eq!(version(AdmissionKind::MutatingAdmissionPolicy), Some(None));
    assert_eq!(
        version(AdmissionKind::MutatingAdmissionPolicyBinding),
        Some(None)
    );
    // Not a failure of any feed: nothing is asked of a resource the server does not have.
    assert!(
        !skipped
            .iter()
            .any(|m| matches!(m, ClusterMsg::FeedFailed { .. })),
        "{skipped:?}"
    );
    assert!(
        set.unreadable.is_empty() && set.problems.is_empty(),
        "{set:?}"
    );
    assert_eq!(names(&set.validating), ["policy"]);
    assert!(set.policies.mutating.is_empty());
    let asked: Vec<_> = live
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("mutatingadmissionpolic"))
        .collect();
    assert!(asked.is_empty(), "{asked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_policies_are_watched_in_the_alpha_version_a_1_33_server_serves() {
    let mut live = Live::start(|s| {
        for r in [
            FakeResource::MutatingAdmissionPolicies,
            FakeResource::MutatingAdmissionPolicyBindings,
        ] {
            s.serve_versions(r, &["v1alpha1"]);
        }
        let api = "admissionregistration.k8s.io/v1alpha1";
        s.create("kubectl", mutating_policy(api, "add-seen"))
            .unwrap();
        let mut b = binding("add-seen-binding", "add-seen", &[]);
        b["apiVersion"] = json!(api);
        b["kind"] = json!("MutatingAdmissionPolicyBinding");
        b["spec"]
            .as_object_mut()
            .unwrap()
            .remove("validationActions");
        s.create("kubectl", b).unwrap();
    })
    .await;
    let set = live.synced().await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    assert_eq!(set.policies.mutating.len(), 1);
    assert_eq!(
        set.policies.mutating[0].api_version,
        "admissionregistration.k8s.io/v1alpha1"
    );
    assert_eq!(
        set.policies.mutating_bindings[0].spec.policy_name,
        "add-seen"
    );
    let path = FakeResource::MutatingAdmissionPolicies.path_at("v1alpha1");
    assert!(
        live.server.requests().iter().any(|r| r.path == path),
        "{:?}",
        live.server.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_kind_the_user_may_not_list_is_unreadable_not_blocking() {
    let denial = Denial::resource(FakeResource::ValidatingAdmissionPolicyBindings, "list");
    let mut live = Live::start(|s| s.forbid(denial.clone())).await;
    let (_, failure) = live
        .until(|m| match m {
            ClusterMsg::FeedFailed {
                feed: Feed::Admission(AdmissionKind::ValidatingAdmissionPolicyBinding),
                failure,
            } => Some(failure.clone()),
            _ => None,
        })
        .await;
    assert_eq!(failure.kind, FailureKind::Forbidden);
    let rbac = failure.rbac.expect("the rule to add");
    assert!(
        rbac.rule
            .contains(r#"resources: ["validatingadmissionpolicybindings"]"#),
        "{}",
        rbac.rule
    );
    // What is in force is known except that kind, which the set names.
    let set = live.synced().await;
    assert_eq!(set.unreadable.len(), 1, "{:?}", set.unreadable);
    assert!(
        set.unreadable[0].starts_with("validatingadmissionpolicybindings: "),
        "{}",
        set.unreadable[0]
    );
    live.server.allow(&denial);
    let set = live
        .until(|m| match m {
            ClusterMsg::Configurations(set) if set.unreadable.is_empty() => Some(set.clone()),
            _ => None,
        })
        .await
        .1;
    assert!(set.synced());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parameter_objects_of_the_policies_in_force_are_watched() {
    let limits = |max: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "replica-limits", "namespace": "pol"},
               "data": {"maxReplicas": max}})
    };
    let mut live = Live::start(|s| {
        s.create("kubectl", limits("3")).unwrap();
        // Not a parameter of any policy: not the replays' business.
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "unrelated", "namespace": "pol"}});
        s.create("kubectl", other).unwrap();
    })
    .await;
    let set = live.synced().await;
    assert!(set.policies.validating.is_empty());
    // No policy takes parameters: none is listed.
    let path = FakeResource::ConfigMaps.path();
    assert!(!live.server.requests().iter().any(|r| r.path == path));

    let p = taking(
        policy("replica-limit", "too many replicas"),
        "v1",
        "ConfigMap",
    );
    live.server.create("kubectl", p).unwrap();
    let (found, limit) = live.next_params().await;
    assert_eq!(found, 2, "every ConfigMap is a candidate");
    assert_eq!(limit["data"]["maxReplicas"], "3");
    assert_eq!(limit["kind"], "ConfigMap");

    // The parameter changes: the replays get the new one.
    live.server.update("kubectl-edit", limits("5")).unwrap();
    let (_, limit) = live.next_params().await;
    assert_eq!(limit["data"]["maxReplicas"], "5");

    // A paramKind the server does not serve (its CRD is not installed) is a failure of the
    // params feed that says which, not of the connection.
    let quota = taking(policy("quota", "over quota"), "example.com/v1", "Quota");
    live.server.create("kubectl", quota).unwrap();
    let failure = live.params_failed().await;
    assert!(
        failure.reason.starts_with(
            "The paramKind example.com/v1 Quota of the policies in force cannot be resolved"
        ),
        "{}",
        failure.reason
    );

    // No policy takes ConfigMaps any more: they are no longer watched, nor given to replays.
    let watches = live.server.open_watches();
    live.server
        .delete(FakeResource::ValidatingAdmissionPolicies, "replica-limit")
        .unwrap();
    let (_, params) = live
        .until(|m| match m {
            ClusterMsg::Params(params) => Some(params.clone()),
            _ => None,
        })
        .await;
    assert!(params.is_empty(), "{params:?}");
    let deadline = tokio::time::Instant::now() + WAIT;
    while live.server.open_watches() >= watches {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch stays open"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_the_user_may_not_list_name_the_rule_for_their_resource() {
    let denial = Denial::resource(FakeResource::ConfigMaps, "list");
    let mut live = Live::start(|s| {
        s.forbid(denial.clone());
        let p = taking(
            policy("replica-limit", "too many replicas"),
            "v1",
            "ConfigMap",
        );
        s.create("kubectl", p).unwrap();
    })
    .await;
    let failure = live.params_failed().await;
    assert_eq!(failure.kind, FailureKind::Forbidden);
    let rbac = failure.rbac.expect("the rule to add");
    assert!(
        rbac.rule.contains(r#"apiGroups: [""]"#)
            && rbac.rule.contains(r#"resources: ["configmaps"]"#),
        "{}",
        rbac.rule
    );
    assert!(
        rbac.check.starts_with("kubectl auth can-i list configmaps"),
        "{}",
        rbac.check
    );
    // Granted: the parameters come.
    live.server.allow(&denial);
    live.until(|m| matches!(m, ClusterMsg::Params(_)).then_some(()))
        .await;
}

/// A response of the real kube-apiserver v1.33.3 (see the fixtures' README).
fn recorded(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/live/apply-v1.33")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `metadata.managedFields` without the times.
fn owners(object: &Value) -> Value {
    let mut entries = object["metadata"]["managedFields"].clone();
    for e in entries.as_array_mut().into_iter().flatten() {
        e.as_object_mut().unwrap().remove("time");
    }
    entries
}

/// The object as a person edits it: what the server maintains left out.
fn editable(object: &Value) -> Value {
    let mut copy = object.clone();
    let meta = copy["metadata"].as_object_mut().unwrap();
    for key in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        meta.remove(key);
    }
    copy
}

/// The dry run of `edit` without force is refused with the message of the recorded `Status`.
async fn refused_with(writer: &Cluster, edit: &Edit, status: &Value) {
    match writer.apply_edit(edit, true, false).await {
        Err(WriteError::Rejected(failure)) => assert!(
            failure
                .reason
                .ends_with(status["message"].as_str().unwrap()),
            "{}",
            failure.reason
        ),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Issue 28, point 5: an object kubectl created (client-side apply, with its annotation), one
/// field edited: `:apply` sends that field alone, the dry run names kubectl's manager and the
/// field, and after the forced apply `hookscope` owns that field only. Every answer is compared
/// with what a real kube-apiserver v1.33.3 answered to the same requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_of_one_edited_field_moves_only_that_fields_ownership() {
    let created = recorded("01-after-kubectl-apply.json");
    let base = editable(&created);
    let live = Live::start(|s| {
        s.create("kubectl-client-side-apply", base.clone()).unwrap();
    })
    .await;
    let stored = live
        .server
        .get(FakeResource::ValidatingWebhookConfigurations, "guard")
        .unwrap();
    assert_eq!(
        owners(&stored),
        owners(&created),
        "kubectl's create is recorded as the apiserver records it"
    );

    let options = ClusterOptions {
        allow_writes: true,
        ..fast_options(live.kubeconfig.clone())
    };
    let writer = Cluster::connect(&options).await.unwrap();
    let mut ours = base.clone();
    ours["webhooks"][0]["timeoutSeconds"] = json!(3);
    let edit = Edit {
        kind: WebhookKind::Validating.into(),
        name: "guard".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        base: Some(base.clone()),
        ours,
    };
    let plan = hookscope::live::cluster::plan(&edit, Some(&stored)).unwrap();
    assert_eq!(plan.config, Some(recorded("request-apply-one-field.json")));

    // Without force, the dry run conflicts and names kubectl's manager and the field.
    let conflict = recorded("02-conflict.json");
    refused_with(&writer, &edit, &conflict).await;

    // Forced, it takes that field over and says so; the diff is the one field.
    let dry = writer.apply_edit(&edit, true, true).await.unwrap();
    assert_eq!(
        dry.taken_over.as_deref(),
        conflict["message"].as_str(),
        "the dry run says what force takes over"
    );
    assert_eq!(dry.dry_run["webhooks"][0]["timeoutSeconds"], 3);
    let applied = writer.apply_edit(&edit, false, true).await.unwrap();
    let after = recorded("04-after-forced-apply.json");
    assert_eq!(owners(applied.stored.as_ref().unwrap()), owners(&after));
    assert_eq!(
        editable(applied.stored.as_ref().unwrap()),
        editable(&after),
        "the annotation and every other field stay as they were"
    );

    // A second edit removes a label kubectl owns and changes another webhook's field: the label
    // goes by a tested JSON patch, the apply keeps the field hookscope already owns.
    let base = editable(&after);
    let mut ours = base.clone();
    ours["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");
    ours["webhooks"][1]["failurePolicy"] = json!("Fail");
    let edit = Edit {
        base: Some(base),
        ours,
        ..edit
    };
    refused_with(&writer, &edit, &recorded("07-conflict-second-edit.json")).await;
    let applied = writer.apply_edit(&edit, false, true).await.unwrap();
    assert_eq!(
        applied.plan.config,
        Some(recorded("request-apply-second-edit.json"))
    );
    let stored = applied.stored.unwrap();
    let after = recorded("08-after-second-edit.json");
    assert_eq!(owners(&stored), owners(&after));
    assert_eq!(editable(&stored), editable(&after));
    let patches: Vec<String> = live
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH" && r.param("dryRun").is_none())
        .map(|r| r.param("force").unwrap_or_default())
        .collect();
    assert_eq!(patches, ["true", "", "true"], "apply, patch, apply");
}

/// A field removed in the edit that the cluster changed meanwhile is not removed: the patch's
/// `test` fails, as the real apiserver refuses it (422).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_of_a_field_the_cluster_changed_meanwhile_is_refused() {
    let created = recorded("01-after-kubectl-apply.json");
    let base = editable(&created);
    let live = Live::start(|s| {
        s.create("kubectl-client-side-apply", base.clone()).unwrap();
    })
    .await;
    let mut changed = base.clone();
    changed["metadata"]["labels"]["tier"] = json!("moved");
    live.server.update("kubectl", changed).unwrap();
    let mut ours = base.clone();
    ours["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");
    let options = ClusterOptions {
        allow_writes: true,
        ..fast_options(live.kubeconfig.clone())
    };
    let writer = Cluster::connect(&options).await.unwrap();
    let edit = Edit {
        kind: WebhookKind::Validating.into(),
        name: "guard".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        base: Some(base),
        ours,
    };
    let stale = recorded("05-stale-test.json");
    match writer.apply_edit(&edit, true, false).await {
        Err(WriteError::Rejected(failure)) => {
            assert!(
                failure.reason.contains(stale["message"].as_str().unwrap()),
                "{}",
                failure.reason
            );
            assert!(failure.action.contains(":rebase"), "{}", failure.action);
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let on_server = live
        .server
        .get(FakeResource::ValidatingWebhookConfigurations, "guard")
        .unwrap();
    assert_eq!(on_server["metadata"]["labels"]["tier"], "moved");
}

/// A response of the real kube-apiserver v1.33.3 to writes of policies (see the fixtures'
/// README).
fn recorded_policy(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/live/apply-policies-v1.33")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `writer` applies `edit` with force (after its dry run), and returns what the server stores.
async fn forced_apply(writer: &Cluster, edit: &Edit) -> Value {
    let dry = writer.apply_edit(edit, true, true).await.unwrap();
    assert!(dry.stored.is_none() && dry.taken_over.is_some());
    writer
        .apply_edit(edit, false, true)
        .await
        .unwrap()
        .stored
        .unwrap()
}

/// Issue 24: `:apply` writes a ValidatingAdmissionPolicy, a binding and a MutatingAdmissionPolicy
/// (in the `v1alpha1` a 1.33 server serves) as it writes webhook configurations: a server-side
/// apply of only what the edit changed (an atomic list whole, one item of a set), a tested JSON
/// patch of what it removed, conflicts named, and after the write `hookscope` owns what it sent
/// and nothing else. Every request and answer is compared with what a real kube-apiserver
/// v1.33.3 answered to the same requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_and_binding_edits_are_applied_as_only_what_changed() {
    let created = [
        (
            FakeResource::ValidatingAdmissionPolicies,
            "no-forbidden",
            "01-policy.json",
        ),
        (
            FakeResource::ValidatingAdmissionPolicyBindings,
            "no-forbidden-binding",
            "01-binding.json",
        ),
        (
            FakeResource::MutatingAdmissionPolicies,
            "add-seen",
            "01-mutating-policy.json",
        ),
    ];
    let live = Live::start(|s| {
        for r in [
            FakeResource::MutatingAdmissionPolicies,
            FakeResource::MutatingAdmissionPolicyBindings,
        ] {
            s.serve_versions(r, &["v1alpha1"]);
        }
        for (_, _, file) in created {
            s.create("kubectl", editable(&recorded_policy(file)))
                .unwrap();
        }
    })
    .await;
    for (resource, name, file) in created {
        assert_eq!(
            owners(&live.server.get(resource, name).unwrap()),
            owners(&recorded_policy(file)),
            "kubectl's create of {name} is recorded as the apiserver records it"
        );
    }
    let options = ClusterOptions {
        allow_writes: true,
        ..fast_options(live.kubeconfig.clone())
    };
    let writer = Cluster::connect(&options).await.unwrap();
    let current = |r: FakeResource, name: &str| live.server.get(r, name).unwrap();

    // The policy: one validation's message changed; `validations` is atomic, so it goes whole,
    // and kubectl owns it.
    let stored = current(FakeResource::ValidatingAdmissionPolicies, "no-forbidden");
    let base = editable(&stored);
    let mut ours = base.clone();
    ours["spec"]["validations"][0]["message"] = json!("the key 'forbidden' is not allowed");
    let edit = Edit::from_document(&ours, Some(base)).unwrap();
    assert_eq!(edit.kind, AdmissionKind::ValidatingAdmissionPolicy);
    let plan = hookscope::live::cluster::plan(&edit, Some(&stored)).unwrap();
    assert_eq!(
        plan.config,
        Some(recorded_policy("request-apply-policy.json"))
    );
    refused_with(&writer, &edit, &recorded_policy("02-policy-conflict.json")).await;
    let after = forced_apply(&writer, &edit).await;
    assert_eq!(
        after["spec"]["validations"][0]["message"],
        "the key 'forbidden' is not allowed"
    );
    assert_eq!(
        owners(&after),
        owners(&recorded_policy("03-policy-after-forced-apply.json"))
    );

    // The binding: an action added to the set, a label removed. No conflict: the set's new item
    // is nobody's, and the label goes by a tested patch.
    let stored = current(
        FakeResource::ValidatingAdmissionPolicyBindings,
        "no-forbidden-binding",
    );
    let base = editable(&stored);
    let mut ours = base.clone();
    ours["spec"]["validationActions"] = json!(["Deny", "Audit"]);
    ours["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("tier");
    let edit = Edit::from_document(&ours, Some(base.clone())).unwrap();
    let plan = hookscope::live::cluster::plan(&edit, Some(&stored)).unwrap();
    assert_eq!(
        plan.config,
        Some(recorded_policy("request-apply-binding.json"))
    );
    assert_eq!(
        hookscope::live::cluster::removal_patch(&plan.removed, &base, &stored),
        Some(recorded_policy("request-patch-binding.json"))
    );
    let after = writer
        .apply_edit(&edit, false, false)
        .await
        .unwrap()
        .stored
        .unwrap();
    let want = recorded_policy("05-binding-after-apply.json");
    assert_eq!(owners(&after), owners(&want));
    assert_eq!(editable(&after), editable(&want));

    // The mutating policy, in v1alpha1: one scalar kubectl owns.
    let stored = current(FakeResource::MutatingAdmissionPolicies, "add-seen");
    assert_eq!(
        stored["apiVersion"],
        "admissionregistration.k8s.io/v1alpha1"
    );
    let base = editable(&stored);
    let mut ours = base.clone();
    ours["spec"]["reinvocationPolicy"] = json!("IfNeeded");
    let edit = Edit::from_document(&ours, Some(base)).unwrap();
    let plan = hookscope::live::cluster::plan(&edit, Some(&stored)).unwrap();
    assert_eq!(
        plan.config,
        Some(recorded_policy("request-apply-mutating-policy.json"))
    );
    refused_with(
        &writer,
        &edit,
        &recorded_policy("06-mutating-policy-conflict.json"),
    )
    .await;
    let after = forced_apply(&writer, &edit).await;
    let want = recorded_policy("07-mutating-policy-after-forced-apply.json");
    assert_eq!(owners(&after), owners(&want));
    assert_eq!(editable(&after), editable(&want));
    let alpha_path = FakeResource::MutatingAdmissionPolicies.path_at("v1alpha1");
    let patches: Vec<(String, String)> = live
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| (r.path.clone(), r.param("fieldManager").unwrap_or_default()))
        .collect();
    assert!(patches.iter().all(|(_, m)| m == "hookscope"), "{patches:?}");
    assert!(
        patches
            .iter()
            .any(|(p, _)| *p == format!("{alpha_path}/add-seen")),
        "{patches:?}"
    );
}

/// A CustomResourceDefinition of `widgets.example.com` whose schema defaults `spec.size`.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "default": 3}}}}}}
            }]
        }
    })
}

/// The first message of the CRD feed (the set, or its failure), skipping the others.
async fn crd_feed(live: &mut Live) -> ClusterMsg {
    tokio::time::timeout(WAIT, async {
        loop {
            let m = live.rx.recv().await.expect("the run task keeps going");
            if matches!(
                m,
                ClusterMsg::Crds(_)
                    | ClusterMsg::FeedFailed {
                        feed: Feed::Crds,
                        ..
                    }
            ) {
                return m;
            }
        }
    })
    .await
    .expect("the CRD feed in time")
}

/// Issue 28, point 1: the cluster's CustomResourceDefinitions are listed and watched, and a
/// user who may not list them is told which permission is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_definitions_are_watched_and_a_403_names_the_rule() {
    let mut live = Live::start(|s| {
        s.create("kubectl", widget_crd()).unwrap();
    })
    .await;
    match crd_feed(&mut live).await {
        ClusterMsg::Crds(set) => {
            assert!(set.synced);
            let crd = &set.objects["widgets.example.com"];
            assert_eq!(crd["spec"]["names"]["kind"], "Widget");
            assert_eq!(crd["kind"], "CustomResourceDefinition");
        }
        other => panic!("expected the CRDs, got {other:?}"),
    }
    // A new definition is news at once.
    let mut gadgets = widget_crd();
    gadgets["metadata"]["name"] = json!("gadgets.example.com");
    gadgets["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    live.server.create("kubectl", gadgets).unwrap();
    match crd_feed(&mut live).await {
        ClusterMsg::Crds(set) => assert_eq!(set.objects.len(), 2),
        other => panic!("expected the CRDs, got {other:?}"),
    }

    let mut denied = Live::start(|s| {
        s.create("kubectl", widget_crd()).unwrap();
        s.forbid(Denial::resource(
            FakeResource::CustomResourceDefinitions,
            "list",
        ));
    })
    .await;
    match crd_feed(&mut denied).await {
        ClusterMsg::FeedFailed { failure, .. } => {
            assert_eq!(failure.kind, FailureKind::Forbidden);
            assert!(
                failure
                    .reason
                    .contains(r#"cannot list resource "customresourcedefinitions""#),
                "{}",
                failure.reason
            );
            let rbac = failure.rbac.expect("the rule to ask for");
            assert!(
                rbac.rule.contains(r#"apiGroups: ["apiextensions.k8s.io"]"#)
                    && rbac
                        .rule
                        .contains(r#"resources: ["customresourcedefinitions"]"#),
                "{}",
                rbac.rule
            );
        }
        other => panic!("expected a 403, got {other:?}"),
    }
}

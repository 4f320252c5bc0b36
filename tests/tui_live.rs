//! `hookscope live` in the console. End to end: the live source against a fake API server that
//! speaks the Kubernetes wire protocol over TLS on loopback, the apiserver's audit log recorded
//! from a real v1.32 followed from a file, and an event replayed over real HTTPS against the
//! configurations the cluster has in force. As message sequences: paging out, the window, the
//! replay commands. And snapshots of the live views.

mod common;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use common::{TestPki, WebhookServer, oracle_handler};
use hookscope::engine::{AuditLevel, EngineOptions};
use hookscope::fake_apiserver::FakeApiServer;
use hookscope::live::audit::{CaptureOptions, FollowOptions};
use hookscope::live::cluster::{
    Backoff, Change, ChangeAction, ClusterMsg, ClusterOptions, Connected, ConnectionInfo, Failure,
    FailureKind, Feed, KubeconfigSource, RbacAdvice, Seen,
};
use hookscope::live::metrics::{AdmissionSnapshot, parse};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::replier::{AnyReplier, ReplierFlags};
use hookscope::replay::run::ReplaySettings;
use hookscope::tui::app::{Command, Msg, State, View, update};
use hookscope::tui::keymap::Action;
use hookscope::tui::live::{AuditRecord, Connection, LiveMsg, LiveState};
use hookscope::tui::live_source::{AuditInput, LiveSource};
use hookscope::tui::model::Verdict;
use hookscope::tui::source::{ConsoleReplier, Source, SourceCtl, SourceMsg};
use hookscope::tui::theme::Theme;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
const WAIT: Duration = Duration::from_secs(60);

/// A fresh directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tui-live-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The oracle's configuration `file` as an object for the API server, trusting `pki`.
fn oracle_configuration(file: &str, pki: &TestPki) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/{file}")).unwrap();
    let mut v: Value = serde_saphyr::from_str(&text).expect("fixture YAML");
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    for w in v["webhooks"].as_array_mut().expect("webhooks") {
        w["clientConfig"]["caBundle"] = json!(ca);
    }
    v
}

/// Feeds the source's messages to `update` (performing replays as the event loop would) until
/// `done` holds for the state.
async fn pump(
    state: &mut State,
    rx: &mut mpsc::Receiver<SourceMsg>,
    ctl: &mpsc::Sender<SourceCtl>,
    what: &str,
    done: impl Fn(&State) -> bool,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done(state) {
        let m = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| {
                let l = state.live.as_deref().expect("live");
                panic!(
                    "waiting for {what}: {:?}, synced {}, {} scrapes, {} events, {} annotations, {} entries, notices {:?}, problems {:?}",
                    l.connection,
                    l.synced,
                    l.history.len(),
                    l.events.len(),
                    l.annotations.len(),
                    state.entries.len(),
                    l.notices,
                    state.problems
                )
            })
            .expect("the source runs");
        for c in update(state, Msg::Source(m)) {
            perform(c, ctl).await;
        }
    }
}

async fn perform(c: Command, ctl: &mpsc::Sender<SourceCtl>) {
    if let Command::Replay(requests) = c {
        ctl.send(SourceCtl::Replay { requests }).await.unwrap();
    }
}

fn live(s: &State) -> &LiveState {
    s.live.as_deref().expect("live")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_its_metrics_and_its_audit_log_fill_the_live_views() {
    let pki = TestPki::new();
    let webhooks = WebhookServer::start(&pki, oracle_handler());
    let api = FakeApiServer::start().await.expect("fake API server");
    api.create(
        "kubectl-client-side-apply",
        oracle_configuration("mutating.yaml", &pki),
    )
    .unwrap();
    api.create(
        "kubectl-client-side-apply",
        oracle_configuration("validating.yaml", &pki),
    )
    .unwrap();
    let metrics = std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/metrics.txt")).unwrap();
    api.set_metrics(&metrics);
    let dir = scratch("e2e");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    // The apiserver's log, written before following starts; read from its start.
    let log = dir.join("audit.log");
    std::fs::copy(format!("{FIXTURES}/oracle-v1.32/audit.log"), &log).unwrap();
    let capture = dir.join("capture.log");
    let resolve = [format!("127.0.0.1:18443=127.0.0.1:{}", webhooks.port())];
    let replier = AnyReplier::from_flags(ReplierFlags {
        replies: None,
        script: None,
        webhook_auth: None,
        resolve: &resolve,
    })
    .expect("replier");
    let source = LiveSource {
        cluster: ClusterOptions {
            kubeconfig: Some(kubeconfig),
            scrape_interval: Duration::from_millis(500),
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(400),
            },
            ..ClusterOptions::default()
        },
        audit: Some(AuditInput::Follow {
            path: log.clone(),
            options: FollowOptions {
                from_start: true,
                poll_interval: Duration::from_millis(20),
                ..FollowOptions::default()
            },
        }),
        capture: Some((capture.clone(), CaptureOptions::default())),
        reader: Reader::new(ClusterState::default()),
        engine_options: EngineOptions::default(),
        settings: ReplaySettings::default(),
        replier: ConsoleReplier::Replay(replier),
        loaded: Vec::new(),
    };
    let (tx, mut rx) = mpsc::channel(256);
    let (ctl, ctl_rx) = mpsc::channel(16);
    tokio::spawn(Box::new(source).run(tx, ctl_rx));
    let mut state = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    state.live = Some(Box::new(LiveState::new("test".into(), 10_000, false)));
    update(&mut state, Msg::Resize(200, 50));

    // Connected, the configurations listed, scraped twice.
    pump(&mut state, &mut rx, &ctl, "the cluster", |s| {
        matches!(live(s).connection, Connection::Connected(_))
            && live(s).synced
            && live(s).history.len() >= 2
    })
    .await;
    assert_eq!(live(&state).configurations, 2);
    let names: Vec<_> = state.hooks.iter().map(|h| h.webhook.as_str()).collect();
    assert_eq!(
        names,
        [
            "add-label.oracle.test",
            "add-label-b.oracle.test",
            "deny.oracle.test"
        ],
        "dispatch order: mutating, then validating"
    );
    assert!(live(&state).feeds.is_empty(), "{:?}", live(&state).feeds);
    let (_, latest) = live(&state).history.latest().unwrap();
    let parsed = AdmissionSnapshot::from_exposition(&parse(&metrics).unwrap());
    assert_eq!(
        latest, &parsed,
        "the scrape is the fixture's admission series"
    );
    assert!(!latest.counters.is_empty());

    // Every final-stage event of the log, with its admission annotations.
    let text = std::fs::read_to_string(&log).unwrap();
    let finals: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["stage"] != "RequestReceived")
        .collect();
    pump(&mut state, &mut rx, &ctl, "the audit events", |s| {
        live(s).events.len() == finals.len()
    })
    .await;
    let recorded_annotations: usize = finals
        .iter()
        .map(|e| {
            e["annotations"].as_object().map_or(0, |a| {
                a.keys()
                    .filter(|k| k.contains("webhook.admission.k8s.io/"))
                    .count()
            })
        })
        .sum();
    assert!(recorded_annotations > 0);
    assert_eq!(live(&state).annotations.len(), recorded_annotations);

    // The event the deny webhook refused: replayed against the configurations in force, it is
    // refused again with the recorded message, and opens in the Chain view.
    let denied = finals
        .iter()
        .position(|e| {
            e["responseStatus"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("denied by oracle deny webhook"))
        })
        .expect("the log has a denied request");
    let recorded = finals[denied]["responseStatus"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    update(&mut state, Msg::Action(Action::Show(View::Events)));
    update(&mut state, Msg::Action(Action::Top));
    for _ in 0..denied {
        update(&mut state, Msg::Action(Action::Down));
    }
    let record = live(&state)
        .event(live(&state).selected_event().unwrap())
        .unwrap()
        .clone();
    assert_eq!(record.audit_id, finals[denied]["auditID"].as_str().unwrap());
    for c in update(&mut state, Msg::Action(Action::ReplayEvent)) {
        perform(c, &ctl).await;
    }
    pump(&mut state, &mut rx, &ctl, "the replay", |s| {
        !s.entries.is_empty()
    })
    .await;
    assert_eq!(state.view, View::Chain);
    let entry = &state.entries[0];
    assert!(
        matches!(entry.row.verdict, Verdict::Denied(403)),
        "replayed as {:?}, recorded {recorded}",
        entry.row.verdict
    );
    let status = entry.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(status.message, recorded, "the message the client got");
    let replayed: Vec<(String, String)> = entry
        .replayed
        .outcome
        .annotations
        .iter()
        .filter(|a| a.key.contains("webhook.admission.k8s.io/"))
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    let mut recorded_pairs = record.annotations.clone();
    recorded_pairs.sort();
    let mut replayed_sorted = replayed.clone();
    replayed_sorted.sort();
    assert_eq!(
        replayed_sorted, recorded_pairs,
        "the apiserver's annotations"
    );
    // The Webhooks view counts the replay.
    let deny = state
        .hooks
        .iter()
        .position(|h| h.webhook == "deny.oracle.test")
        .unwrap();
    assert_eq!(state.hook_counts[deny].denied, 1);

    // A change in the cluster reaches the history, with who made it and a diff.
    let mut changed = oracle_configuration("validating.yaml", &pki);
    changed["webhooks"][0]["failurePolicy"] = json!("Ignore");
    api.update("kubectl-edit", changed).unwrap();
    pump(&mut state, &mut rx, &ctl, "the change", |s| {
        live(s)
            .changes
            .iter()
            .any(|c| c.action == ChangeAction::Modified)
    })
    .await;
    let change = live(&state)
        .changes
        .iter()
        .find(|c| c.action == ChangeAction::Modified)
        .unwrap();
    assert_eq!(change.who, "kubectl-edit");
    assert!(
        change.diff.contains("+  failurePolicy: Ignore"),
        "{}",
        change.diff
    );
    let screen = hookscope::tui::view::render_text(
        &{
            let mut s = state.clone();
            update(&mut s, Msg::Action(Action::Show(View::Cluster)));
            s
        },
        200,
        50,
    );
    assert!(screen.contains("● connected"), "{screen}");
    assert!(screen.contains("kubectl-edit"), "{screen}");

    // The capture holds the events, and reads back as the replay's input.
    drop(rx);
    let mut reader = Reader::new(ClusterState::default());
    let mut requests = 0;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let mut n = 0;
        let _ = reader.read_paths(&[capture.display().to_string()], None, &mut |i| {
            if matches!(i, hookscope::replay::InputItem::Request(_)) {
                n += 1;
            }
        });
        requests = requests.max(n);
        let want = live(&state)
            .events
            .iter()
            .filter(|e| e.request.is_some())
            .count();
        if requests >= want || std::time::Instant::now() > deadline {
            assert_eq!(requests, want, "the capture replays");
            break;
        }
        reader = Reader::new(ClusterState::default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// --- message sequences ----------------------------------------------------------------------

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000 + secs)
}

fn record(i: usize, replayable: bool) -> AuditRecord {
    let request = replayable.then(|| {
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("uid-{i}"),
                "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                "resource": {"group": "", "version": "v1", "resource": "configmaps"},
                "operation": "CREATE",
                "namespace": "default",
                "name": format!("cm-{i}"),
                "userInfo": {"username": "alice"},
                "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i}"), "namespace": "default"}},
            }
        });
        let mut items = Vec::new();
        let mut reader = Reader::new(ClusterState::default());
        reader.read_document(
            hookscope::replay::SourceRef {
                file: "test".into(),
                index: i + 1,
                unit: hookscope::replay::IndexUnit::Document,
                audit_id: None,
            },
            review.to_string().as_bytes(),
            &mut |item| items.push(item),
        );
        match items.pop() {
            Some(hookscope::replay::InputItem::Request(r)) => r,
            other => panic!("a request: {other:?}"),
        }
    });
    AuditRecord {
        audit_id: format!("audit-{i}"),
        stage: "ResponseComplete".into(),
        at: format!("2026-11-21T10:00:{:02}.000000Z", i % 60),
        verb: "create".into(),
        user: "alice".into(),
        resource: "configmaps".into(),
        target: format!("default/cm-{i}"),
        code: Some(if i.is_multiple_of(3) { 403 } else { 201 }),
        annotations: vec![
            (
                "mutation.webhook.admission.k8s.io/round_0_index_0".into(),
                r#"{"configuration":"oracle-mutating","webhook":"add-label.oracle.test","mutated":true}"#
                    .into(),
            ),
            (
                "patch.webhook.admission.k8s.io/round_0_index_0".into(),
                r#"{"configuration":"oracle-mutating","webhook":"add-label.oracle.test","patch":[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}],"patchType":"JSONPatch"}"#
                    .into(),
            ),
        ],
        request,
        not_replayable: (!replayable).then(|| "the event was recorded at level Metadata: it has no requestObject".into()),
        origin: format!("audit.log line {}", i + 1),
    }
}

fn live_state(keep: usize) -> State {
    let mut s = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    s.live = Some(Box::new(LiveState::new(
        "context kind-hookscope · following /var/log/kubernetes/audit.log".into(),
        keep,
        false,
    )));
    update(&mut s, Msg::Resize(160, 40));
    s
}

fn send(s: &mut State, m: LiveMsg) -> Vec<Command> {
    update(s, Msg::Source(SourceMsg::Live(m)))
}

#[test]
fn events_beyond_the_limit_are_paged_out_with_their_annotations() {
    let mut s = live_state(100);
    for i in 0..250 {
        send(&mut s, LiveMsg::Audit(Box::new(record(i, false))));
    }
    let l = live(&s);
    assert_eq!(
        (l.events.len(), l.events_seen, l.paged_out()),
        (100, 250, 150)
    );
    assert_eq!(l.events.front().unwrap().audit_id, "audit-150");
    assert_eq!(l.annotations.len(), 200, "two per kept event");
    assert!(l.annotations.iter().all(|a| a.event >= 150));
    // Following the tail: the newest is selected; a selected event that is paged out moves on.
    assert_eq!(l.selected_event(), Some(249));
    update(&mut s, Msg::Action(Action::Show(View::Events)));
    update(&mut s, Msg::Action(Action::Top));
    assert_eq!(live(&s).selected_event(), Some(150));
    send(&mut s, LiveMsg::Audit(Box::new(record(250, false))));
    assert_eq!(live(&s).selected_event(), Some(151));
    update(&mut s, Msg::Action(Action::Bottom));
    assert_eq!(live(&s).event_selected, None, "G follows the tail again");
}

#[test]
fn replaying_says_why_an_event_cannot_be_and_sends_the_ones_that_can() {
    let mut s = live_state(100);
    update(&mut s, Msg::Action(Action::Show(View::Events)));
    assert!(update(&mut s, Msg::Action(Action::ReplayEvent)).is_empty());
    assert_eq!(s.message.as_ref().unwrap().0, "no audit event to replay");
    send(&mut s, LiveMsg::Audit(Box::new(record(0, false))));
    assert!(update(&mut s, Msg::Action(Action::ReplayEvent)).is_empty());
    assert!(
        s.message
            .as_ref()
            .unwrap()
            .0
            .contains("cannot replay audit-0: the event was recorded at level Metadata"),
        "{:?}",
        s.message
    );
    send(&mut s, LiveMsg::Audit(Box::new(record(1, true))));
    send(&mut s, LiveMsg::Audit(Box::new(record(2, true))));
    let c = update(&mut s, Msg::Action(Action::ReplayEvent));
    match c.as_slice() {
        [Command::Replay(r)] => assert_eq!(r.len(), 1),
        other => panic!("{other:?}"),
    }
    assert!(live(&s).open_next_replay);
    let c = update(&mut s, Msg::Action(Action::ReplayEvents));
    match c.as_slice() {
        [Command::Replay(r)] => assert_eq!(r.len(), 2, "the replayable ones"),
        other => panic!("{other:?}"),
    }
    // Outside live mode the keys say so.
    let mut replay = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    assert!(update(&mut replay, Msg::Action(Action::ReplayEvents)).is_empty());
    assert!(replay.message.unwrap().0.contains("hookscope live"));
}

fn snapshot_with(counter: f64, duration_bucket: f64) -> AdmissionSnapshot {
    let text = format!(
        "# TYPE apiserver_admission_webhook_rejection_count counter\n\
         apiserver_admission_webhook_rejection_count{{error_type=\"no_error\",name=\"deny.oracle.test\",operation=\"CREATE\",rejection_code=\"403\",type=\"validating\"}} {counter}\n\
         # TYPE apiserver_admission_webhook_request_total counter\n\
         apiserver_admission_webhook_request_total{{code=\"403\",name=\"deny.oracle.test\",operation=\"CREATE\",rejected=\"true\",type=\"validating\"}} {counter}\n\
         apiserver_admission_webhook_request_total{{code=\"200\",name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\"}} {}\n\
         # TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n\
         apiserver_admission_webhook_admission_duration_seconds_bucket{{name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\",le=\"0.005\"}} {duration_bucket}\n\
         apiserver_admission_webhook_admission_duration_seconds_bucket{{name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\",le=\"0.025\"}} {}\n\
         apiserver_admission_webhook_admission_duration_seconds_bucket{{name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\",le=\"+Inf\"}} {}\n\
         apiserver_admission_webhook_admission_duration_seconds_sum{{name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\"}} {}\n\
         apiserver_admission_webhook_admission_duration_seconds_count{{name=\"add-label.oracle.test\",operation=\"CREATE\",rejected=\"false\",type=\"admit\"}} {}\n\
         # TYPE apiserver_admission_webhook_fail_open_count counter\n\
         apiserver_admission_webhook_fail_open_count{{name=\"slow.oracle.test\",type=\"validating\"}} {}\n",
        counter * 4.0,
        duration_bucket * 2.0,
        duration_bucket * 2.0,
        duration_bucket * 0.01,
        duration_bucket * 2.0,
        counter / 2.0,
    );
    AdmissionSnapshot::from_exposition(&parse(&text).unwrap())
}

/// A live session as the views see it: connected, two changes, twelve scrapes, events.
fn session() -> State {
    let mut s = live_state(1000);
    let info = ConnectionInfo {
        server: "https://127.0.0.1:6443".into(),
        context: "kind-hookscope".into(),
        user: "kind-hookscope".into(),
        namespace: "default".into(),
        source: KubeconfigSource::Flag(PathBuf::from("/home/user/.kube/config")),
    };
    send(
        &mut s,
        LiveMsg::Cluster(Box::new(ClusterMsg::Connected(Connected {
            info,
            server_version: "v1.32.0".into(),
        }))),
    );
    send(
        &mut s,
        LiveMsg::Cluster(Box::new(ClusterMsg::FeedFailed {
            feed: Feed::Metrics,
            failure: Failure {
                kind: FailureKind::Forbidden,
                reason: "forbidden: User \"dev\" cannot get path \"/metrics\"".into(),
                action: "Ask for get on the non-resource URL /metrics.".into(),
                rbac: Some(RbacAdvice {
                    rule: "- nonResourceURLs: [\"/metrics\"]\n  verbs: [\"get\"]".into(),
                    check: "kubectl auth can-i get /metrics".into(),
                }),
                retry_in: Duration::from_secs(8),
            },
        })),
    );
    let hooks = vec![hookscope::tui::model::HookInfo {
        phase: hookscope::api::WebhookKind::Validating,
        configuration: "oracle-validating".into(),
        webhook: "deny.oracle.test".into(),
        position: 0,
        settings: vec![("failurePolicy", "Ignore".into())],
    }];
    send(
        &mut s,
        LiveMsg::Configurations {
            hooks,
            configurations: 1,
            problems: Vec::new(),
            synced: true,
        },
    );
    for (i, (action, who, diff)) in [
        (
            ChangeAction::Added,
            "kubectl-client-side-apply",
            "--- /dev/null\n+++ oracle-validating\n@@ -0,0 +1,3 @@\n+webhooks:\n+- name: deny.oracle.test\n+  failurePolicy: Fail\n",
        ),
        (
            ChangeAction::Modified,
            "kubectl-edit",
            "--- oracle-validating\n+++ oracle-validating\n@@ -1,3 +1,3 @@\n webhooks:\n - name: deny.oracle.test\n-  failurePolicy: Fail\n+  failurePolicy: Ignore\n",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        send(
            &mut s,
            LiveMsg::Cluster(Box::new(ClusterMsg::Change(Change {
                kind: hookscope::api::WebhookKind::Validating,
                name: "oracle-validating".into(),
                action,
                observed_at: at(60 * i as u64),
                server_time: Some(format!("2026-11-21T10:0{i}:00Z")),
                who: who.into(),
                operation: Some("Update".into()),
                resource_version: format!("{}", 100 + i),
                diff: diff.into(),
                seen: Seen::Event,
            }))),
        );
    }
    for i in 0..12u64 {
        send(
            &mut s,
            LiveMsg::Scrape {
                at: at(10 * i),
                snapshot: Box::new(snapshot_with((i * i) as f64, (i * 3) as f64)),
            },
        );
    }
    for i in 0..6 {
        send(&mut s, LiveMsg::Audit(Box::new(record(i, i % 2 == 1))));
    }
    send(
        &mut s,
        LiveMsg::AuditNotice("following /var/log/kubernetes/audit.log from byte 0".into()),
    );
    s
}

#[test]
fn the_chart_window_zooms_and_pauses() {
    let mut s = session();
    update(&mut s, Msg::Action(Action::Show(View::Metrics)));
    assert_eq!(live(&s).window, 1);
    update(&mut s, Msg::Action(Action::Zoom(-1)));
    assert_eq!(s.message.as_ref().unwrap().0, "window 1m");
    update(&mut s, Msg::Action(Action::Zoom(-1)));
    assert_eq!(live(&s).window, 0, "no narrower than the narrowest");
    update(&mut s, Msg::Action(Action::Pause));
    assert_eq!(live(&s).paused_at, Some(at(110)));
    // A new scrape does not move a paused window.
    send(
        &mut s,
        LiveMsg::Scrape {
            at: at(120),
            snapshot: Box::new(snapshot_with(200.0, 40.0)),
        },
    );
    let paused = live(&s).chart_window();
    let rates = live(&s).history.rates(
        &paused,
        hookscope::live::metrics::AdmissionFamily::WebhookRejections,
        &["name"],
    );
    assert_eq!(rates[0].points.last().unwrap().at, at(110));
    update(&mut s, Msg::Action(Action::Pause));
    assert_eq!(live(&s).paused_at, None);
    // A scrape older than the newest is refused with the reason, not kept.
    send(
        &mut s,
        LiveMsg::Scrape {
            at: at(5),
            snapshot: Box::new(snapshot_with(1.0, 1.0)),
        },
    );
    assert!(s.message.as_ref().unwrap().1, "{:?}", s.message);
    assert_eq!(live(&s).history.len(), 13);
}

#[test]
fn live_views_snapshots() {
    let base = session();
    for theme in ["default", "high-contrast"] {
        let mut s = base.clone();
        s.theme = Theme::load(theme).unwrap();
        for (name, view) in [
            ("cluster", View::Cluster),
            ("events", View::Events),
            ("metrics", View::Metrics),
            ("annotations", View::Annotations),
        ] {
            let mut v = s.clone();
            update(&mut v, Msg::Action(Action::Show(view)));
            v.message = None;
            let screen = hookscope::tui::view::render_text(&v, 160, 40);
            insta::assert_snapshot!(format!("{theme}__live_{name}"), screen);
        }
    }
    // A replay's console has no live tabs; a live one has both.
    let replay = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    assert_eq!(replay.tabs().len(), 7);
    assert_eq!(base.tabs().len(), 9);
}

#[test]
fn secrets_patches_are_masked_in_the_live_views_unless_revealed() {
    let mut s = live_state(10);
    let mut r = record(0, false);
    r.resource = "secrets".into();
    r.annotations[1].1 = r#"{"configuration":"c","webhook":"w","patch":[{"op":"add","path":"/data/token","value":"c2VjcmV0"}],"patchType":"JSONPatch"}"#.into();
    send(&mut s, LiveMsg::Audit(Box::new(r)));
    update(&mut s, Msg::Action(Action::Show(View::Annotations)));
    let screen = hookscope::tui::view::render_text(&s, 200, 20);
    assert!(!screen.contains("c2VjcmV0"), "{screen}");
    assert!(screen.contains("masked"), "{screen}");
    update(&mut s, Msg::Action(Action::ToggleSecrets));
    let screen = hookscope::tui::view::render_text(&s, 300, 20);
    assert!(screen.contains("c2VjcmV0"), "{screen}");
}

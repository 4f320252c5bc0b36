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
use crossterm::event::KeyCode;
use hookscope::engine::{AuditLevel, EngineOptions};
use hookscope::fake_apiserver::{FakeApiServer, FakeResource};
use hookscope::live::audit::{CaptureOptions, FollowOptions};
use hookscope::live::cluster::{
    AdmissionKind, Backoff, Change, ChangeAction, ClusterMsg, ClusterOptions, Connected,
    ConnectionInfo, Failure, FailureKind, Feed, KubeconfigSource, RbacAdvice, Seen,
};
use hookscope::live::metrics::{AdmissionSnapshot, parse};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::replier::{AnyReplier, ReplierFlags};
use hookscope::replay::run::ReplaySettings;
use hookscope::tui::app::{Command, Msg, State, View, update};
use hookscope::tui::editing::ChangeCause;
use hookscope::tui::keymap::Action;
use hookscope::tui::live::{AuditRecord, Connection, LiveMsg, LiveState};
use hookscope::tui::live_source::{AuditInput, LiveRelease, LiveSource};
use hookscope::tui::model::Verdict;
use hookscope::tui::source::{ConsoleReplier, Source, SourceCtl, SourceMsg};
use hookscope::tui::theme::Theme;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
const WAIT: Duration = Duration::from_secs(120);

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
        let cs = update(state, Msg::Source(m));
        perform_all(cs, ctl).await;
    }
}

/// A fake API server holding the oracle's two configurations, created by kubectl.
async fn oracle_cluster(pki: &TestPki) -> FakeApiServer {
    let api = FakeApiServer::start().await.expect("fake API server");
    for file in ["mutating.yaml", "validating.yaml"] {
        api.create("kubectl-client-side-apply", oracle_configuration(file, pki))
            .unwrap();
    }
    api
}

/// A live source on the cluster of `kubeconfig`, retrying fast, scraping once an hour, with no
/// audit source.
fn live_source(kubeconfig: PathBuf, replier: AnyReplier) -> LiveSource {
    LiveSource {
        cluster: ClusterOptions {
            kubeconfig: Some(kubeconfig),
            scrape_interval: Duration::from_secs(3600),
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(400),
            },
            ..ClusterOptions::default()
        },
        audit: None,
        capture: None,
        reader: Reader::new(ClusterState::default()),
        engine_options: EngineOptions::default(),
        release: LiveRelease::Fixed,
        settings: ReplaySettings::default(),
        replier: ConsoleReplier::Replay(replier),
        loaded: Vec::new(),
    }
}

/// A replier calling the webhooks over HTTPS, `resolve` (`HOST:PORT=ADDR:PORT`) redirecting them.
fn https_replier(resolve: &[String]) -> AnyReplier {
    AnyReplier::from_flags(ReplierFlags {
        replies: None,
        script: None,
        webhook_auth: None,
        resolve,
    })
    .expect("replier")
}

type Channels = (mpsc::Receiver<SourceMsg>, mpsc::Sender<SourceCtl>);

/// Runs `source` under a console of `width` × 50 keeping `keep` events; the console's state,
/// the source's messages and its control channel.
fn spawn_live(
    source: LiveSource,
    keep: usize,
    allow_writes: bool,
    width: u16,
) -> (State, Channels) {
    let (tx, rx) = mpsc::channel(256);
    let (ctl, ctl_rx) = mpsc::channel(16);
    tokio::spawn(Box::new(source).run(tx, ctl_rx));
    let mut state = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    state.live = Some(Box::new(LiveState::new("test".into(), keep, allow_writes)));
    update(&mut state, Msg::Resize(width, 50));
    (state, (rx, ctl))
}

fn live(s: &State) -> &LiveState {
    s.live.as_deref().expect("live")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_its_metrics_and_its_audit_log_fill_the_live_views() {
    let pki = TestPki::new();
    let webhooks = WebhookServer::start(&pki, oracle_handler());
    let api = oracle_cluster(&pki).await;
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
    let replier = https_replier(&resolve);
    let mut source = live_source(kubeconfig, replier);
    source.cluster.scrape_interval = Duration::from_millis(500);
    source.audit = Some(AuditInput::Follow {
        path: log.clone(),
        options: FollowOptions {
            from_start: true,
            poll_interval: Duration::from_millis(20),
            ..FollowOptions::default()
        },
    });
    source.capture = Some((capture.clone(), CaptureOptions::default()));
    let (mut state, (mut rx, ctl)) = spawn_live(source, 10_000, false, 200);

    // Connected, the configurations listed, scraped twice.
    pump(&mut state, &mut rx, &ctl, "the cluster", |s| {
        matches!(live(s).connection, Connection::Connected(..))
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
    assert_eq!(
        live(&state).failing().count(),
        0,
        "{:?}",
        live(&state).feeds
    );
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
    // Its row among those shown (routine traffic is hidden).
    let row = live(&state)
        .visible_events()
        .position(|(_, e)| e.audit_id == finals[denied]["auditID"].as_str().unwrap())
        .expect("the denied request is shown");
    for _ in 0..row {
        update(&mut state, Msg::Action(Action::Down));
    }
    let record = live(&state)
        .event(live(&state).selected_event().unwrap())
        .unwrap()
        .clone();
    assert_eq!(record.audit_id, finals[denied]["auditID"].as_str().unwrap());
    let cs = update(&mut state, Msg::Action(Action::ReplayEvent));
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the replay", |s| {
        !s.entries.is_empty()
    })
    .await;
    assert_eq!(state.view, View::Chain);
    let entry = &state.entries[0];
    assert!(
        matches!(entry.verdict, Verdict::Denied(403)),
        "replayed as {:?}, recorded {recorded}",
        entry.verdict
    );
    let status = entry.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(status.message, recorded, "the message the client got");
    let replayed: Vec<(String, String)> = entry
        .replayed
        .outcome
        .annotations
        .iter()
        .filter(|a| a.key.contains("webhook.admission.k8s.io/"))
        .map(|a| (a.key.to_string(), a.value.to_string()))
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

    // :redispatch calls the webhooks again rather than reusing the replies just received.
    let cs = update(&mut state, Msg::Action(Action::Redispatch));
    assert!(
        matches!(cs.as_slice(), [Command::Redispatch { fresh: true, .. }]),
        "{cs:?}"
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the re-dispatch", |s| {
        s.redispatch_calls != (0, 0)
    })
    .await;
    let (reused, sent) = state.redispatch_calls;
    assert_eq!(reused, 0);
    assert!(sent > 0);
    assert!(matches!(state.entries[0].verdict, Verdict::Denied(403)));

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
                line: None,
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
        namespace: "default".into(),
        code: Some(if i.is_multiple_of(3) { 403 } else { 201 }),
        message: i.is_multiple_of(3).then(|| {
            format!("admission webhook \"deny.oracle.test\" denied the request: no cm-{i}")
        }),
        noise: false,
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
    assert_eq!(
        live(&s).events_view.selected,
        None,
        "G follows the tail again"
    );
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
    // Before the configurations in force are listed there is nothing to replay against.
    assert!(update(&mut s, Msg::Action(Action::ReplayEvent)).is_empty());
    assert!(
        s.message.as_ref().unwrap().0.contains("still being listed"),
        "{:?}",
        s.message
    );
    listed_none(&mut s);
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

/// The configurations in force listed: none.
fn listed_none(s: &mut State) {
    send(
        s,
        LiveMsg::Configurations {
            hooks: Vec::new(),
            configurations: 0,
            policies: 0,
            bindings: 0,
            unreadable: Vec::new(),
            problems: Vec::new(),
            synced: true,
            documents: Vec::new(),
        },
    );
}

/// `live` without a cluster: the kubeconfig names one that refuses connections. Replaying says
/// why it cannot, at once, instead of "replaying" forever; the Connection pane names the context
/// and server it read and does not claim to be listing; Requests says where requests come from.
#[test]
fn without_a_cluster_the_console_says_why_nothing_replays() {
    let mut s = live_state(100);
    send(
        &mut s,
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::Connecting {
                server: "https://127.0.0.1:1".into(),
                context: "kind-gone".into(),
                attempt: 1,
            }),
            at: std::time::SystemTime::now(),
        },
    );
    send(
        &mut s,
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::Failed(Failure {
                kind: FailureKind::Unreachable,
                reason: "connection refused".into(),
                action: "Start the cluster or pick another context.".into(),
                rbac: None,
                retry_in: Duration::from_secs(8),
            })),
            at: std::time::SystemTime::now(),
        },
    );
    send(&mut s, LiveMsg::Audit(Box::new(record(1, true))));
    update(&mut s, Msg::Action(Action::Show(View::Events)));
    for action in [Action::ReplayEvent, Action::ReplayEvents] {
        assert!(update(&mut s, Msg::Action(action)).is_empty());
        let (text, error) = s.message.clone().unwrap();
        assert!(error, "{text}");
        assert!(
            text.contains("not connected") && text.contains("connection refused"),
            "{text}"
        );
    }
    update(&mut s, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    assert!(
        screen.contains("kind-gone") && screen.contains("https://127.0.0.1:1"),
        "{screen}"
    );
    assert!(!screen.contains("listing…"), "{screen}");
    assert!(screen.contains("not listed: not connected"), "{screen}");
    update(&mut s, Msg::Action(Action::Show(View::Requests)));
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    assert!(
        !screen.contains("Waiting for the first replayed request"),
        "{screen}"
    );
    assert!(
        screen.contains("No request replayed: nothing replayed: not connected"),
        "{screen}"
    );
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
         apiserver_admission_webhook_fail_open_count{{name=\"slow.oracle.test\",type=\"validating\"}} {}\n\
         # TYPE apiserver_validating_admission_policy_check_total counter\n\
         apiserver_validating_admission_policy_check_total{{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-forbidden-key\",policy_binding=\"no-forbidden-key-binding\"}} {counter}\n\
         # TYPE apiserver_validating_admission_policy_check_duration_seconds histogram\n\
         apiserver_validating_admission_policy_check_duration_seconds_bucket{{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-forbidden-key\",policy_binding=\"no-forbidden-key-binding\",le=\"0.001\"}} {counter}\n\
         apiserver_validating_admission_policy_check_duration_seconds_bucket{{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-forbidden-key\",policy_binding=\"no-forbidden-key-binding\",le=\"+Inf\"}} {counter}\n\
         apiserver_validating_admission_policy_check_duration_seconds_sum{{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-forbidden-key\",policy_binding=\"no-forbidden-key-binding\"}} {}\n\
         apiserver_validating_admission_policy_check_duration_seconds_count{{enforcement_action=\"deny\",error_type=\"invalid_error\",policy=\"no-forbidden-key\",policy_binding=\"no-forbidden-key-binding\"}} {counter}\n",
        counter * 4.0,
        duration_bucket * 2.0,
        duration_bucket * 2.0,
        duration_bucket * 0.01,
        duration_bucket * 2.0,
        counter / 2.0,
        counter * 0.00004,
    );
    AdmissionSnapshot::from_exposition(&parse(&text).unwrap())
}

/// A change of `oracle-validating` as the watch reports it, by an unknown writer at `at(0)`.
fn oracle_change(action: ChangeAction) -> Change {
    Change {
        kind: hookscope::api::WebhookKind::Validating.into(),
        name: "oracle-validating".into(),
        action,
        observed_at: at(0),
        server_time: None,
        who: "unknown".into(),
        operation: None,
        resource_version: "900".into(),
        diff: String::new(),
        seen: Seen::Event,
    }
}

/// The live source's message of `change`, received when the watch saw it.
fn change_msg(change: Change) -> LiveMsg {
    LiveMsg::Cluster {
        at: change.observed_at,
        msg: Box::new(ClusterMsg::Change(change)),
    }
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
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::Connected(Connected {
                info,
                server_version: "v1.32.0".into(),
            })),
            at: at(0),
        },
    );
    // A 1.32 server: the validating policy kinds served as v1, the mutating ones not at all.
    let served = AdmissionKind::POLICIES
        .into_iter()
        .map(|kind| hookscope::live::cluster::Served {
            kind,
            version: (!matches!(
                kind,
                AdmissionKind::MutatingAdmissionPolicy
                    | AdmissionKind::MutatingAdmissionPolicyBinding
            ))
            .then_some(hookscope::live::cluster::GroupVersion::V1),
        })
        .collect();
    send(
        &mut s,
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::Discovered(served)),
            at: at(0),
        },
    );
    for feed in [
        Feed::MUTATING_WEBHOOKS,
        Feed::VALIDATING_WEBHOOKS,
        Feed::Admission(AdmissionKind::ValidatingAdmissionPolicy),
        Feed::Admission(AdmissionKind::ValidatingAdmissionPolicyBinding),
        Feed::Namespaces,
    ] {
        send(
            &mut s,
            LiveMsg::Cluster {
                msg: Box::new(ClusterMsg::FeedRecovered(feed)),
                at: at(1),
            },
        );
    }
    send(
        &mut s,
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::FeedFailed {
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
            }),
            // After the scrapes below: the latest outcome of /metrics.
            at: at(200),
        },
    );
    let hooks = vec![
        hookscope::tui::model::HookInfo {
            phase: hookscope::api::WebhookKind::Validating,
            configuration: "no-forbidden-key".into(),
            webhook: "no-forbidden-key-binding".into(),
            position: 0,
            settings: vec![
                ("kind", "ValidatingAdmissionPolicy".into()),
                ("failurePolicy", "Fail".into()),
                ("validationActions", "Deny".into()),
            ],
        },
        hookscope::tui::model::HookInfo {
            phase: hookscope::api::WebhookKind::Validating,
            configuration: "oracle-validating".into(),
            webhook: "deny.oracle.test".into(),
            position: 0,
            settings: vec![("failurePolicy", "Ignore".into())],
        },
    ];
    send(
        &mut s,
        LiveMsg::Configurations {
            hooks,
            configurations: 1,
            policies: 1,
            bindings: 1,
            unreadable: Vec::new(),
            problems: Vec::new(),
            synced: true,
            documents: Vec::new(),
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
        let change = Change {
            observed_at: at(60 * i as u64),
            server_time: Some(format!("2026-11-21T10:0{i}:00Z")),
            who: who.into(),
            operation: Some("Update".into()),
            resource_version: format!("{}", 100 + i),
            diff: diff.into(),
            ..oracle_change(action)
        };
        send(&mut s, change_msg(change));
    }
    let binding = Change {
        kind: AdmissionKind::ValidatingAdmissionPolicyBinding,
        name: "no-forbidden-key-binding".into(),
        observed_at: at(90),
        server_time: Some("2026-11-21T10:01:30Z".into()),
        who: "kubectl-create".into(),
        operation: Some("Update".into()),
        resource_version: "102".into(),
        diff: "--- /dev/null\n+++ no-forbidden-key-binding (after)\n@@ -0,0 +1,3 @@\n+spec:\n+  policyName: no-forbidden-key\n+  validationActions: [Deny]\n".into(),
        ..oracle_change(ChangeAction::Added)
    };
    send(&mut s, change_msg(binding));
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
        LiveMsg::AuditNotice {
            text: "following /var/log/kubernetes/audit.log from byte 0".into(),
            at: at(0),
        },
    );
    s
}

#[test]
fn the_chart_window_zooms_and_pauses() {
    let mut s = session();
    update(&mut s, Msg::Action(Action::Show(View::Metrics)));
    assert_eq!(live(&s).window, 1);
    // `+` zooms in (a narrower window), `-` out, as their symbols say.
    update(&mut s, key('-'));
    assert_eq!(s.message.as_ref().unwrap().0, "window 15m");
    update(&mut s, key('+'));
    update(&mut s, key('+'));
    assert_eq!(s.message.as_ref().unwrap().0, "window 1m");
    update(&mut s, key('+'));
    assert_eq!(live(&s).window, 0, "no narrower than the narrowest");
    // Each webhook's rejections are counted over the window beside their rate.
    let rejected = live(&s).history.rates(
        &live(&s).chart_window(),
        hookscope::live::metrics::AdmissionFamily::WebhookRejections,
        &["name", "error_type"],
    );
    assert!(!rejected.is_empty());
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    for r in &rejected {
        assert!(r.increase > 0.0);
        assert!(
            screen.contains(&format!(" · {:.0}", r.increase)),
            "{}: {screen}",
            r.increase
        );
    }
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

/// The live views, by snapshot name.
const LIVE_VIEWS: [(&str, View); 4] = [
    ("cluster", View::Cluster),
    ("events", View::Events),
    ("metrics", View::Metrics),
    ("annotations", View::Annotations),
];

/// `s` showing `view` at `w`×`h`, without a message.
fn live_screen(s: &State, view: View, (w, h): (u16, u16)) -> String {
    let mut v = s.clone();
    update(&mut v, Msg::Resize(w, h));
    update(&mut v, Msg::Action(Action::Show(view)));
    v.message = None;
    hookscope::tui::view::render_text(&v, w, h)
}

#[test]
fn live_views_snapshots() {
    let base = session();
    for theme in ["default", "high-contrast"] {
        let mut s = base.clone();
        s.theme = Theme::load(theme).unwrap();
        for (name, view) in LIVE_VIEWS {
            let screen = live_screen(&s, view, (160, 40));
            insta::assert_snapshot!(format!("{theme}__live_{name}"), screen);
        }
    }
    // Every live view at a small, a common and a wide size.
    for (w, h) in [(80, 24), (120, 40), (250, 60)] {
        for (name, view) in LIVE_VIEWS {
            let screen = live_screen(&base, view, (w, h));
            insta::assert_snapshot!(format!("sized__live_{name}_{w}x{h}"), screen);
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

// --- editing the cluster's configurations ----------------------------------------------------

/// Performs what the event loop would: replays, re-dispatches and applies go to the source.
async fn perform_all(cs: Vec<Command>, ctl: &mpsc::Sender<SourceCtl>) {
    for c in cs {
        match c {
            Command::Replay(requests) => ctl.send(SourceCtl::Replay { requests }).await.unwrap(),
            Command::Redispatch {
                generation,
                configurations,
                policies,
                fresh,
            } => ctl
                .send(SourceCtl::Redispatch {
                    generation,
                    configurations,
                    policies,
                    fresh,
                })
                .await
                .unwrap(),
            Command::Apply(request) => ctl.send(SourceCtl::Apply(request)).await.unwrap(),
            Command::Context(name) => ctl.send(SourceCtl::Context(name)).await.unwrap(),
            _ => {}
        }
    }
}

fn key(c: char) -> Msg {
    Msg::Key(KeyCode::Char(c).into())
}

fn failure_policy(api: &FakeApiServer) -> Value {
    api.get(
        FakeResource::ValidatingWebhookConfigurations,
        "oracle-validating",
    )
    .expect("stored")["webhooks"][0]["failurePolicy"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_configuration_is_edited_and_applied_after_a_confirmed_server_side_dry_run() {
    let pki = TestPki::new();
    let api = oracle_cluster(&pki).await;
    let dir = scratch("apply");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let replier = https_replier(&[]);
    let mut source = live_source(kubeconfig, replier);
    source.cluster.allow_writes = true;
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, true, 160);

    // Each configuration of the cluster opens as a buffer, its text the server's object.
    pump(&mut state, &mut rx, &ctl, "the configurations", |s| {
        live(s).synced && s.buffers.len() == 2
    })
    .await;
    let labels: Vec<String> = state.buffers.iter().map(|b| b.origin.label()).collect();
    assert_eq!(
        labels,
        [
            "mutatingwebhookconfigurations/oracle-mutating (cluster)",
            "validatingwebhookconfigurations/oracle-validating (cluster)"
        ]
    );
    let text = state.buffers[1].text();
    assert!(text.contains("failurePolicy: Fail"), "{text}");
    assert!(
        !text.contains("managedFields") && !text.contains("resourceVersion"),
        "what the server maintains is left out: {text}"
    );

    // An edit is a what-if at once: the webhooks in force follow it, the cluster does not.
    update(
        &mut state,
        Msg::Action(Action::Edit(Some("oracle-validating".into()))),
    );
    assert_eq!(state.view, View::Editor);
    assert_eq!(state.buffer, 1);
    let edited = text.replace("failurePolicy: Fail", "failurePolicy: Ignore");
    state.buffers[1].replace_text(&edited);
    let generation = state.buffers[1].generation;
    let cs = update(
        &mut state,
        Msg::CheckDue {
            buffer: 1,
            generation,
        },
    );
    assert!(
        cs.iter().any(|c| matches!(c, Command::Redispatch { .. })),
        "{cs:?}"
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the edit in force", |s| {
        s.hooks.iter().any(|h| {
            h.webhook == "deny.oracle.test"
                && h.settings
                    .iter()
                    .any(|(k, v)| *k == "failurePolicy" && v == "Ignore")
        })
    })
    .await;
    assert_eq!(
        failure_policy(&api),
        json!("Fail"),
        "the cluster is unchanged"
    );

    // kubectl owns the field: the dry run conflicts, and says how to take it over.
    let cs = update(&mut state, Msg::Action(Action::Apply(false)));
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the conflict", |s| {
        s.message
            .as_ref()
            .is_some_and(|(m, _)| m.contains("refused"))
    })
    .await;
    let (message, error) = state.message.clone().unwrap();
    assert!(error && message.contains(":apply! takes"), "{message}");
    let report = live(&state)
        .pending_apply
        .clone()
        .expect("the refusal is shown");
    assert!(report.request.is_none(), "nothing to confirm");
    assert!(report.diff.contains("409 Conflict"), "{}", report.diff);
    assert!(
        report.diff.contains("kubectl-client-side-apply"),
        "{}",
        report.diff
    );
    assert!(update(&mut state, key('y')).is_empty(), "y applies nothing");
    update(&mut state, Msg::Key(KeyCode::Esc.into()));
    assert!(live(&state).pending_apply.is_none());
    assert_eq!(state.mode, hookscope::tui::app::Mode::Normal);

    // `:apply!` shows the server's dry run; `n` cancels and nothing is stored.
    let cs = update(&mut state, Msg::Action(Action::Apply(true)));
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the dry run", |s| {
        live(s).pending_apply.is_some()
    })
    .await;
    assert_eq!(state.mode, hookscope::tui::app::Mode::ConfirmApply);
    let diff = live(&state).pending_apply.as_ref().unwrap().diff.clone();
    assert!(diff.contains("-  failurePolicy: Fail"), "{diff}");
    assert!(diff.contains("+  failurePolicy: Ignore"), "{diff}");
    assert!(
        !diff.contains("+  matchPolicy"),
        "only what the user wrote is applied, not the defaults: {diff}"
    );
    // Force takes over kubectl's one field the edit changes, and says so before `y`.
    assert!(
        diff.contains("# force takes these fields over from the managers that own them"),
        "{diff}"
    );
    assert!(
        diff.contains(
            r#"conflict with "kubectl-client-side-apply" using admissionregistration.k8s.io/v1: .webhooks[name="deny.oracle.test"].failurePolicy"#
        ),
        "{diff}"
    );
    assert!(
        diff.contains(r#"would then own only: .webhooks[name="deny.oracle.test"].failurePolicy, .webhooks[name="deny.oracle.test"].name"#),
        "{diff}"
    );
    let (message, _) = state.message.clone().unwrap();
    assert!(message.contains("taking over"), "{message}");
    let screen = hookscope::tui::view::render_text(&state, 160, 50);
    assert!(screen.contains("Server-side dry run"), "{screen}");
    assert!(screen.contains("+  failurePolicy: Ignore"), "{screen}");
    assert!(update(&mut state, key('n')).is_empty());
    assert!(live(&state).pending_apply.is_none());
    assert_eq!(
        failure_policy(&api),
        json!("Fail"),
        "a dry run stores nothing"
    );
    assert!(state.buffers[1].modified(), "the edit is kept");

    // `:apply!` again and `y`: applied as field manager hookscope; the buffer shows what the
    // cluster stores, and the watcher brings the change into the history.
    let cs = update(&mut state, Msg::Action(Action::Apply(true)));
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the dry run", |s| {
        live(s).pending_apply.is_some()
    })
    .await;
    let cs = update(&mut state, key('y'));
    assert!(
        matches!(&cs[..], [Command::Apply(r)] if !r.dry_run && r.force),
        "{cs:?}"
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the apply", |s| {
        s.message
            .as_ref()
            .is_some_and(|(m, _)| m.starts_with("applied oracle-validating"))
    })
    .await;
    assert_eq!(failure_policy(&api), json!("Ignore"));
    // hookscope owns the field the user changed (and the webhook's key), nothing else; kubectl
    // keeps the rest, its annotation included.
    let stored = api
        .get(
            FakeResource::ValidatingWebhookConfigurations,
            "oracle-validating",
        )
        .unwrap();
    let entries = stored["metadata"]["managedFields"].as_array().unwrap();
    let mine: Vec<&Value> = entries
        .iter()
        .filter(|e| e["manager"] == "hookscope")
        .collect();
    assert_eq!(mine.len(), 1, "{entries:?}");
    assert_eq!(
        mine[0]["fieldsV1"],
        json!({"f:webhooks": {"k:{\"name\":\"deny.oracle.test\"}": {".": {}, "f:failurePolicy": {}, "f:name": {}}}})
    );
    let kubectl = entries
        .iter()
        .find(|e| e["manager"] == "kubectl-client-side-apply")
        .unwrap();
    assert!(
        kubectl["fieldsV1"]["f:webhooks"]["k:{\"name\":\"deny.oracle.test\"}"]
            .get("f:failurePolicy")
            .is_none()
            && kubectl["fieldsV1"]["f:webhooks"]["k:{\"name\":\"deny.oracle.test\"}"]
                .get("f:timeoutSeconds")
                .is_some(),
        "{kubectl}"
    );
    pump(&mut state, &mut rx, &ctl, "the change", |s| {
        live(s).changes.iter().any(|c| c.who == "hookscope")
    })
    .await;
    assert!(!state.buffers[1].modified(), "{}", state.buffers[1].text());
    assert!(state.buffers[1].text().contains("failurePolicy: Ignore"));

    // The Webhooks view shows the configuration's own history, newest first, with its diff.
    update(&mut state, Msg::Action(Action::Show(View::Webhooks)));
    update(&mut state, Msg::Action(Action::Bottom));
    assert_eq!(
        state.hooks[state.hook_cursor.selected].webhook,
        "deny.oracle.test"
    );
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    assert!(
        screen.contains("History of oracle-validating (1)"),
        "{screen}"
    );
    assert!(screen.contains("modified by hookscope (rv "), "{screen}");
    assert!(screen.contains("-  failurePolicy: Fail"), "{screen}");
    assert!(screen.contains("+  failurePolicy: Ignore"), "{screen}");
}

fn cluster_document(name: &str, failure_policy: &str) -> hookscope::tui::source::ConfigDocument {
    let text = format!(
        "apiVersion: admissionregistration.k8s.io/v1\n\
         kind: ValidatingWebhookConfiguration\n\
         metadata:\n  name: {name}\n\
         webhooks:\n\
         - name: {name}.example.com\n  \
           clientConfig:\n    url: https://127.0.0.1:8443/{name}\n  \
           rules:\n  \
           - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    resources: [\"configmaps\"]\n  \
           failurePolicy: {failure_policy}\n  \
           sideEffects: None\n  \
           admissionReviewVersions: [\"v1\"]\n"
    );
    let checked = hookscope::tui::editing::check(&text, name, &[]);
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    hookscope::tui::source::ConfigDocument {
        origin: hookscope::tui::source::DocumentOrigin::Cluster {
            kind: hookscope::live::cluster::AdmissionKind::ValidatingWebhookConfiguration,
            name: name.into(),
        },
        text,
        configurations: checked.configurations,
        policies: Vec::new(),
    }
}

fn listed(s: &mut State, documents: Vec<hookscope::tui::source::ConfigDocument>) -> Vec<Command> {
    send(
        s,
        LiveMsg::Configurations {
            hooks: Vec::new(),
            configurations: documents.len(),
            policies: 0,
            bindings: 0,
            unreadable: Vec::new(),
            problems: Vec::new(),
            synced: true,
            documents,
        },
    )
}

#[test]
fn cluster_changes_never_overwrite_edits_and_deletions_keep_edited_buffers() {
    let mut s = live_state(100);
    listed(
        &mut s,
        vec![cluster_document("a", "Fail"), cluster_document("b", "Fail")],
    );
    assert_eq!(s.buffers.len(), 2);

    // b is edited; then the cluster changes both: a follows, b keeps the edit and waits.
    let edited = s.buffers[1].text().replace("Fail", "Ignore");
    s.buffers[1].replace_text(&edited);
    let generation = s.buffers[1].generation;
    update(
        &mut s,
        Msg::CheckDue {
            buffer: 1,
            generation,
        },
    );
    let cs = listed(
        &mut s,
        vec![
            cluster_document("a", "Ignore"),
            cluster_document("b", "Ignore"),
        ],
    );
    assert!(s.buffers[0].text().contains("failurePolicy: Ignore"));
    assert!(!s.buffers[0].modified());
    assert_eq!(s.buffers[1].text(), edited, "the edit is kept");
    assert!(s.buffers[1].disk_changed.is_some());
    let (message, _) = s.message.clone().unwrap();
    assert!(
        message.contains("changed in the cluster while you edit it: :rebase puts your edits on it, :reload takes it"),
        "{message}"
    );
    // The console has edits: the source is told to keep dispatching with them.
    let redispatch = cs.iter().find_map(|c| match c {
        Command::Redispatch { configurations, .. } => Some(configurations.clone()),
        _ => None,
    });
    let configurations = redispatch.expect("the edits are sent again");
    assert_eq!(configurations.len(), 2);

    // Deleted in the cluster: a goes, b (edited) stays, said once.
    listed(&mut s, Vec::new());
    assert_eq!(s.buffers.len(), 1);
    assert_eq!(s.buffers[0].text(), edited);
    let (message, _) = s.message.clone().unwrap();
    assert!(message.contains("your edits are kept"), "{message}");
    s.message = None;
    listed(&mut s, Vec::new());
    assert!(s.message.is_none(), "said once: {:?}", s.message);
}

#[test]
fn apply_is_refused_read_only_and_for_invalid_text() {
    let mut s = live_state(100);
    listed(&mut s, vec![cluster_document("a", "Fail")]);
    let cs = update(&mut s, Msg::Action(Action::Apply(false)));
    assert!(cs.is_empty(), "{cs:?}");
    let (message, error) = s.message.clone().unwrap();
    assert!(error && message.contains("--allow-writes"), "{message}");

    s.live.as_mut().unwrap().allow_writes = true;
    let broken = s.buffers[0].text().replace("Fail", "Sometimes");
    s.buffers[0].replace_text(&broken);
    let cs = update(&mut s, Msg::Action(Action::Apply(false)));
    assert!(!cs.iter().any(|c| matches!(c, Command::Apply(_))), "{cs:?}");
    let (message, error) = s.message.clone().unwrap();
    assert!(error && message.contains("nothing is applied"), "{message}");

    let fixed = s.buffers[0].text().replace("Sometimes", "Ignore");
    s.buffers[0].replace_text(&fixed);
    let cs = update(&mut s, Msg::Action(Action::Apply(false)));
    let request = cs
        .iter()
        .find_map(|c| match c {
            Command::Apply(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a dry run is asked for");
    assert!(request.dry_run && !request.force);
    assert_eq!(
        request.configurations[0].webhooks[0]
            .failure_policy
            .as_deref(),
        Some("Ignore")
    );
    // Command mode names both forms.
    assert_eq!(
        hookscope::tui::keymap::parse_command("apply!"),
        Ok(Action::Apply(true))
    );
}

#[test]
fn the_namespace_filter_narrows_events_annotations_and_replays() {
    let mut s = live_state(100);
    listed_none(&mut s);
    for i in 0..6 {
        let mut r = record(i, true);
        if i % 2 == 1 {
            r.namespace = "kube-system".into();
            r.target = format!("kube-system/cm-{i}");
        }
        send(&mut s, LiveMsg::Audit(Box::new(r)));
    }
    update(&mut s, Msg::Action(Action::Show(View::Events)));
    update(
        &mut s,
        Msg::Action(Action::Namespace(Some("kube-system".into()))),
    );
    let l = live(&s);
    assert_eq!(l.visible_events().count(), 3);
    assert_eq!(l.selected_event(), Some(5), "the newest shown");
    update(&mut s, Msg::Action(Action::Up));
    assert_eq!(
        live(&s).selected_event(),
        Some(3),
        "stepping skips hidden events"
    );
    update(&mut s, Msg::Action(Action::Top));
    assert_eq!(live(&s).selected_event(), Some(1));
    assert_eq!(s.visible_live_annotations(live(&s)).count(), 3 * 2);
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    assert!(screen.contains("namespace kube-system"), "{screen}");
    assert!(screen.contains("kube-system/cm-3"), "{screen}");
    assert!(!screen.contains("default/cm-2"), "{screen}");
    let cs = update(&mut s, Msg::Action(Action::ReplayEvents));
    match &cs[..] {
        [Command::Replay(requests)] => {
            assert_eq!(requests.len(), 3);
            let names: Vec<&str> = requests.iter().map(|r| r.attrs.name.as_str()).collect();
            assert_eq!(names, ["cm-1", "cm-3", "cm-5"]);
        }
        other => panic!("{other:?}"),
    }
    // `:ns -` shows every namespace again.
    let action = hookscope::tui::keymap::parse_command("ns -").unwrap();
    update(&mut s, Msg::Action(action));
    assert_eq!(live(&s).visible_events().count(), 6);
    assert_eq!(s.visible_live_annotations(live(&s)).count(), 6 * 2);
}

// --- the cluster's namespaces in replays ------------------------------------------------------

/// The oracle's audit log without the events that create or change Namespaces: the audit stream
/// then never shows the labels of the namespaces, as when hookscope starts after they were made.
fn log_without_namespace_writes(dir: &std::path::Path) -> PathBuf {
    let text = std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/audit.log")).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            e["objectRef"]["resource"] != "namespaces"
        })
        .collect();
    let log = dir.join("audit.log");
    std::fs::write(&log, kept.join("\n") + "\n").unwrap();
    log
}

/// Creates `names` as Namespaces in `api` (`oracle-deny` labelled `deny=yes`) and writes the
/// oracle's log without its namespace writes to `dir`; the log and its final-stage events.
fn namespaces_and_log(
    api: &FakeApiServer,
    names: &[&str],
    dir: &std::path::Path,
) -> (PathBuf, usize) {
    for name in names {
        let labels = if *name == "oracle-deny" {
            json!({"deny": "yes"})
        } else {
            json!({})
        };
        let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": name, "labels": labels}});
        api.create("kubectl-create", ns).unwrap();
    }
    let log = log_without_namespace_writes(dir);
    let events = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(r#""stage":"RequestReceived""#))
        .count();
    (log, events)
}

/// Starts the live source on `api` following `log`, replaying over real HTTPS against
/// `webhooks`; pumps until connected, listed and every event of the log is in.
async fn namespace_session(
    api: &FakeApiServer,
    webhooks: &WebhookServer,
    dir: &std::path::Path,
    log: &std::path::Path,
    events: usize,
    listed: impl Fn(&State) -> bool,
) -> (State, mpsc::Receiver<SourceMsg>, mpsc::Sender<SourceCtl>) {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let resolve = [format!("127.0.0.1:18443=127.0.0.1:{}", webhooks.port())];
    let replier = https_replier(&resolve);
    let mut source = live_source(kubeconfig, replier);
    source.audit = Some(AuditInput::Follow {
        path: log.to_path_buf(),
        options: FollowOptions {
            from_start: true,
            poll_interval: Duration::from_millis(20),
            ..FollowOptions::default()
        },
    });
    let (mut state, (mut rx, ctl)) = spawn_live(source, 10_000, false, 200);
    pump(&mut state, &mut rx, &ctl, "the cluster and the log", |s| {
        live(s).synced && live(s).events.len() == events && listed(s)
    })
    .await;
    (state, rx, ctl)
}

/// Replays the kept event whose target is `target` and returns its entry.
async fn replay_target(
    state: &mut State,
    rx: &mut mpsc::Receiver<SourceMsg>,
    ctl: &mpsc::Sender<SourceCtl>,
    target: &str,
) -> hookscope::tui::app::Entry {
    let seq = live(state)
        .visible_events()
        .find(|(_, e)| e.target == target && e.request.is_some())
        .map(|(seq, _)| seq)
        .unwrap_or_else(|| panic!("no replayable event for {target}"));
    state.live.as_deref_mut().unwrap().events_view.selected = Some(seq);
    let before = state.entries.len();
    let cs = update(state, Msg::Action(Action::ReplayEvent));
    perform_all(cs, ctl).await;
    pump(state, rx, ctl, "the replay", |s| s.entries.len() > before).await;
    state.entries.last().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_take_namespace_labels_from_the_cluster_and_say_when_they_cannot() {
    let pki = TestPki::new();
    let webhooks = WebhookServer::start(&pki, oracle_handler());
    let api = oracle_cluster(&pki).await;
    let dir = scratch("namespaces");
    let (log, events) =
        namespaces_and_log(&api, &["oracle-deny", "oracle-ok", "oracle-probe"], &dir);
    let recorded =
        "admission webhook \"deny.oracle.test\" denied the request: denied by oracle deny webhook";

    // Namespaces listed: the request the apiserver denied (the webhook selects `deny=yes`
    // namespaces) is denied again, with the message the client got, and says nothing of labels.
    let (mut state, mut rx, ctl) = namespace_session(&api, &webhooks, &dir, &log, events, |s| {
        live(s).namespaces == Some(3)
    })
    .await;
    let denied = replay_target(&mut state, &mut rx, &ctl, "oracle-deny/cm-denied").await;
    assert!(
        matches!(denied.verdict, Verdict::Denied(403)),
        "replayed as {:?}: {:?}",
        denied.verdict,
        denied.replayed.request.notes
    );
    let status = denied.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(status.message, recorded);
    assert!(
        denied.replayed.request.notes.is_empty(),
        "{:?}",
        denied.replayed.request.notes
    );
    // The apiserver's own label is there too, as it is on every namespace.
    let ok = replay_target(&mut state, &mut rx, &ctl, "oracle-ok/cm-ok").await;
    assert!(matches!(ok.verdict, Verdict::Allowed), "{:?}", ok.verdict);
    let feeds = hookscope::tui::view::render_text(
        &{
            let mut s = state.clone();
            update(&mut s, Msg::Action(Action::Show(View::Cluster)));
            s
        },
        200,
        50,
    );
    assert!(
        feeds.contains("✓ namespaces watch · 3 namespaces"),
        "{feeds}"
    );
    drop((rx, ctl));

    // The user may not list namespaces: the Feeds pane names the permission, and every replay a
    // namespace selector decided says its labels are not the cluster's, rather than passing
    // empty labels off as the truth.
    let denial = hookscope::fake_apiserver::Denial::resource(FakeResource::Namespaces, "list");
    api.forbid(denial);
    let (mut state, mut rx, ctl) = namespace_session(&api, &webhooks, &dir, &log, events, |s| {
        live(s)
            .failing()
            .any(|(f, failure)| f == Feed::Namespaces && failure.kind == FailureKind::Forbidden)
    })
    .await;
    let unsure = replay_target(&mut state, &mut rx, &ctl, "oracle-deny/cm-denied").await;
    let notes = &unsure.replayed.request.notes;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("the cluster's namespaces cannot be read")
            && notes[0].contains(r#"cannot list resource "namespaces""#)
            && notes[0].contains(r#"the labels of namespace "oracle-deny" were taken as empty"#),
        "{}",
        notes[0]
    );
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    assert_eq!(state.view, View::Chain);
    assert!(
        screen.contains("⚠ the cluster's namespaces cannot be read"),
        "{screen}"
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(screen.contains("✗ namespaces watch"), "{screen}");
    assert!(screen.contains(r#"resources: ["namespaces"]"#), "{screen}");
}

// --- health that is current ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_apiserver_comes_back_every_feed_and_the_status_bar_say_so() {
    let pki = TestPki::new();
    let api = oracle_cluster(&pki).await;
    api.set_metrics(
        &std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/metrics.txt")).unwrap(),
    );
    let dir = scratch("restart");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let replier = https_replier(&[]);
    let mut source = live_source(kubeconfig, replier);
    source.cluster.scrape_interval = Duration::from_millis(200);
    let (mut state, (mut rx, ctl)) = spawn_live(source, 10_000, false, 200);
    update(&mut state, Msg::Action(Action::Show(View::Cluster)));
    let all_well = |s: &State| {
        let l = live(s);
        matches!(l.connection, Connection::Connected(..))
            // The webhook configurations, the validating policies and their bindings (the
            // mutating ones are not served), the namespaces, the CRDs and /metrics.
            && l.feeds.len() == 7
            && l.failing().count() == 0
    };
    pump(&mut state, &mut rx, &ctl, "every feed working", all_well).await;
    let scrapes = live(&state).history.len();

    // The apiserver goes away: the connection fails, and so does a scrape sent before the loss
    // was noticed (the scraper's own message, as it sends it).
    api.stop().await;
    pump(&mut state, &mut rx, &ctl, "the failure", |s| {
        matches!(live(s).connection, Connection::Failed(..))
    })
    .await;
    let refused = ClusterMsg::FeedFailed {
        feed: Feed::Metrics,
        failure: Failure {
            kind: FailureKind::Unreachable,
            reason: format!(
                "Cannot reach {} while getting /metrics: connection refused",
                api.url()
            ),
            action: "Check that the cluster is running.".into(),
            rbac: None,
            retry_in: Duration::from_millis(200),
        },
    };
    send(
        &mut state,
        LiveMsg::Cluster {
            msg: Box::new(refused),
            at: SystemTime::now(),
        },
    );
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    assert!(screen.contains("✗ /metrics"), "{screen}");
    assert!(screen.contains("connection refused"), "{screen}");
    let (message, error) = state.message.clone().expect("the status bar says it");
    assert!(message.contains("Cannot reach"), "{message}");
    assert!(error);

    // It comes back: the next successes replace every failure, with their time. The scraper
    // runs apart from the watches: its first success may come before the connection is made
    // again, so the wait is for a scrape of the new connection.
    api.restart().await.unwrap();
    let scraped_since_connected = |s: &State| {
        let l = live(s);
        match (&l.connection, l.feed(Feed::Metrics)) {
            (Connection::Connected(_, since), Some(metrics)) => metrics.at >= *since,
            _ => false,
        }
    };
    pump(&mut state, &mut rx, &ctl, "every feed working again", |s| {
        all_well(s) && live(s).history.len() > scrapes && scraped_since_connected(s)
    })
    .await;
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    for feed in [
        "mutating watch",
        "validating watch",
        "namespaces watch",
        "CRDs watch",
        "/metrics",
    ] {
        assert!(screen.contains(&format!("✓ {feed} · ")), "{screen}");
        assert!(!screen.contains(&format!("✗ {feed}")), "{screen}");
    }
    assert!(!screen.contains("Cannot reach"), "{screen}");
    assert!(!screen.contains("connection refused"), "{screen}");
    assert!(screen.contains("✓ mutating watch · ok "), "{screen}");
    assert!(screen.contains("✓ /metrics · last scrape "), "{screen}");
    let (message, error) = state.message.clone().expect("the status bar says it");
    assert!(message.contains("connected again"), "{message}");
    assert!(!error);
    let Connection::Connected(_, since) = live(&state).connection else {
        unreachable!()
    };
    let metrics = live(&state).feed(Feed::Metrics).unwrap();
    assert!(
        metrics.at >= since,
        "the latest scrape is of the new connection"
    );
}

// --- the release of the cluster -----------------------------------------------------------------

/// Connects a source that follows the server's release to `api`; the console once connected.
async fn connected_following_release(api: &FakeApiServer, name: &str) -> State {
    let dir = scratch(name);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let mut source = live_source(kubeconfig, https_replier(&[]));
    source.release = LiveRelease::Server(ClusterState::default());
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, false, 200);
    state.kube_version = "1.37".into();
    pump(&mut state, &mut rx, &ctl, "connected and listed", |s| {
        matches!(live(s).connection, Connection::Connected(..))
            && live(s).release.is_some()
            && live(s).synced
    })
    .await;
    state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_models_the_servers_release_and_names_a_server_newer_than_it_knows() {
    let pki = TestPki::new();
    let api = oracle_cluster(&pki).await;
    api.set_git_version("v1.33.3");
    let state = connected_following_release(&api, "release-33").await;
    let release = live(&state).release.clone().unwrap();
    assert_eq!(release.modelled.to_string(), "1.33");
    assert!(release.exact());
    assert_eq!(state.kube_version, "1.33");
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    assert!(screen.contains("k8s 1.33 │"), "{screen}");
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(
        screen.contains("release   1.33 (the server's, v1.33.3)"),
        "{screen}"
    );

    api.set_git_version("v1.40.1");
    let state = connected_following_release(&api, "release-40").await;
    let newest = hookscope::KubeVersion::NEWEST.to_string();
    assert_eq!(
        live(&state).release.as_ref().unwrap().modelled.to_string(),
        newest
    );
    let screen = hookscope::tui::view::render_text(&state, 300, 50);
    assert!(
        screen.contains(&format!(
            "k8s {newest} (server v1.40.1 is newer than hookscope models)"
        )),
        "{screen}"
    );
}

// --- events you can find and understand ----------------------------------------------------------

/// The final-stage events of `lines` (audit JSON lines), as the live source sends them.
fn records_of(lines: &[String]) -> Vec<AuditRecord> {
    hookscope::tui::live::records_of_lines(
        "audit.log",
        lines.iter().map(String::as_str),
        Reader::new(ClusterState::default()),
    )
}

/// A `ResponseComplete` audit event as kube-apiserver writes it.
fn audit_line(id: &str, verb: &str, uri: &str, agent: &str, user: &str, extra: Value) -> String {
    let mut e = json!({
        "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
        "auditID": id, "stage": "ResponseComplete", "requestURI": uri, "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]},
        "sourceIPs": ["127.0.0.1"], "userAgent": agent,
        "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": "2026-11-21T10:05:00.000000Z",
        "stageTimestamp": "2026-11-21T10:05:00.001000Z",
    });
    for (k, v) in extra.as_object().unwrap() {
        e[k] = v.clone();
    }
    e.to_string()
}

#[test]
fn events_filter_hide_routine_traffic_count_their_rows_and_say_why_a_request_failed() {
    let mut lines: Vec<String> =
        std::fs::read_to_string(format!("{FIXTURES}/oracle-v1.32/audit.log"))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
    // hookscope's own scrape and watch, as the apiserver records them (by their user agent),
    // and a configuration deleted by alice.
    lines.push(audit_line(
        "own-1",
        "get",
        "/metrics",
        "hookscope/0.1.0",
        "admin",
        json!({}),
    ));
    lines.push(audit_line(
        "own-2",
        "watch",
        "/api/v1/namespaces?watch=true",
        "hookscope/0.1.0",
        "admin",
        json!({"objectRef": {"resource": "namespaces", "apiVersion": "v1"}}),
    ));
    lines.push(audit_line(
        "del-1",
        "delete",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/oracle-validating",
        "kubectl/v1.33.3",
        "alice",
        json!({"objectRef": {"resource": "validatingwebhookconfigurations",
                             "name": "oracle-validating",
                             "apiGroup": "admissionregistration.k8s.io", "apiVersion": "v1"}}),
    ));
    let records = records_of(&lines);
    let noise: Vec<&AuditRecord> = records.iter().filter(|r| r.noise).collect();
    assert!(noise.iter().any(|r| r.audit_id == "own-1"));
    assert!(noise.iter().any(|r| r.audit_id == "own-2"));
    assert!(
        noise
            .iter()
            .any(|r| r.resource == "leases.coordination.k8s.io")
    );
    assert!(noise.iter().any(|r| r.target.starts_with("/readyz")));
    assert!(
        records
            .iter()
            .filter(|r| r.resource == "configmaps")
            .all(|r| !r.noise)
    );

    let mut s = live_state(10_000);
    // The watch saw the deletion before the audit event came.
    send(&mut s, change_msg(oracle_change(ChangeAction::Deleted)));
    for r in &records {
        send(&mut s, LiveMsg::Audit(Box::new(r.clone())));
    }
    let deleted = live(&s).changes.back().unwrap();
    assert_eq!(deleted.who, "alice", "the audit log names who deleted it");
    assert_eq!(
        deleted.server_time.as_deref(),
        Some("2026-11-21T10:05:00.001000Z")
    );

    // Routine traffic is hidden by default, and the title counts the rows listed.
    update(&mut s, Msg::Action(Action::Show(View::Events)));
    let shown = records.len() - noise.len();
    assert_eq!(live(&s).visible_events().count(), shown);
    let screen = hookscope::tui::view::render_text(&s, 200, 40);
    assert!(
        screen.contains(&format!(
            "Events {shown} shown of {} kept · {} routine hidden (:noise)",
            records.len(),
            noise.len()
        )),
        "{screen}"
    );
    assert!(!screen.contains("/metrics"), "{screen}");

    // `/` filters the Events view itself (it stays), key by key; the title counts the rows.
    update(&mut s, key('/'));
    for c in "cm-denied".chars() {
        update(&mut s, key(c));
    }
    update(&mut s, Msg::Key(KeyCode::Enter.into()));
    assert_eq!(s.view, View::Events);
    assert_eq!(live(&s).events_view.filter, "cm-denied");
    let rows: Vec<String> = live(&s)
        .visible_events()
        .map(|(_, e)| e.target.clone())
        .collect();
    assert_eq!(
        rows,
        [
            "oracle-deny/cm-denied",
            "oracle-deny/cm-denied-2",
            "oracle-deny/cm-denied-raw",
            "oracle-deny/cm-denied-raw"
        ]
    );
    let screen = hookscope::tui::view::render_text(&s, 200, 40);
    assert!(
        screen.contains("Events 4 shown of"),
        "the title counts the rows: {screen}"
    );
    let listed = screen
        .lines()
        .filter(|l| l.contains("oracle-deny/cm-denied"))
        .count();
    // The four rows, and the selected event's detail line.
    assert_eq!(listed, 4 + 1, "{screen}");
    // The detail says why the request failed, as the client was told.
    assert!(
        screen.contains(
            r#"status   admission webhook "deny.oracle.test" denied the request: denied by oracle deny webhook"#
        ),
        "{screen}"
    );
    // `:filter` does the same; esc clears it.
    update(
        &mut s,
        Msg::Action(hookscope::tui::keymap::parse_command("filter alice").unwrap()),
    );
    assert_eq!(live(&s).visible_events().count(), 1);
    update(&mut s, Msg::Action(Action::Back));
    assert!(live(&s).events_view.filter.is_empty());
    assert_eq!(s.view, View::Events);

    // One toggle shows the routine traffic again.
    update(
        &mut s,
        Msg::Action(hookscope::tui::keymap::parse_command("noise").unwrap()),
    );
    assert_eq!(live(&s).visible_events().count(), records.len());
}

// --- re-dispatch is attributed ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_if_tells_the_clusters_changes_from_the_users_edits() {
    let pki = TestPki::new();
    let webhooks = WebhookServer::start(&pki, oracle_handler());
    let api = oracle_cluster(&pki).await;
    let dir = scratch("attribution");
    let (log, events) = namespaces_and_log(&api, &["oracle-deny", "oracle-ok"], &dir);
    let (mut state, mut rx, ctl) = namespace_session(&api, &webhooks, &dir, &log, events, |s| {
        live(s).namespaces == Some(2) && s.buffers.len() == 2
    })
    .await;
    let cs = update(&mut state, Msg::Action(Action::ReplayEvents));
    perform_all(cs, &ctl).await;
    let replayable = live(&state)
        .visible_events()
        .filter(|(_, e)| e.request.is_some())
        .count();
    pump(&mut state, &mut rx, &ctl, "the replays", |s| {
        s.entries.len() == replayable
    })
    .await;
    let index_of = |s: &State, target: &str| {
        s.entries
            .iter()
            .position(|e| e.row().target == target)
            .unwrap_or_else(|| panic!("{target} replayed"))
    };

    // The user's edit: add-label is no longer reinvoked.
    let text = state.buffers[0].text();
    assert!(text.contains("reinvocationPolicy: IfNeeded"), "{text}");
    state.buffers[0]
        .replace_text(&text.replace("reinvocationPolicy: IfNeeded", "reinvocationPolicy: Never"));
    let generation = state.buffers[0].generation;
    let cs = update(
        &mut state,
        Msg::CheckDue {
            buffer: 0,
            generation,
        },
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the what-if of the edit", |s| {
        s.baseline.is_some() && s.run.is_none() && !s.whatif.requests.is_empty()
    })
    .await;
    let ok = index_of(&state, "oracle-ok/cm-ok");
    assert_eq!(
        state.whatif_causes(ok),
        [ChangeCause::Edit("oracle-mutating".into())]
    );
    let flipped_before = state.whatif.flipped().count();
    assert_eq!(flipped_before, 0);

    // The cluster's change: the deny webhook no longer selects the namespace. The console
    // dispatches again with it and the edit; each change says its cause.
    let mut changed = oracle_configuration("validating.yaml", &pki);
    changed["webhooks"][0]["namespaceSelector"] = json!({"matchLabels": {"deny": "no"}});
    api.update("kubectl-edit", changed).unwrap();
    pump(
        &mut state,
        &mut rx,
        &ctl,
        "the re-dispatch after the cluster's change",
        |s| s.run.is_none() && s.whatif.flipped().count() > 0,
    )
    .await;
    let denied = index_of(&state, "oracle-deny/cm-denied");
    let causes = state.whatif_causes(denied);
    assert!(
        causes.contains(&ChangeCause::Cluster {
            name: "oracle-validating".into(),
            who: "kubectl-edit".into()
        }),
        "{causes:?}"
    );
    assert!(
        causes.contains(&ChangeCause::Edit("oracle-mutating".into())),
        "{causes:?}"
    );
    assert_eq!(
        state.whatif_causes(index_of(&state, "oracle-ok/cm-ok")),
        [ChangeCause::Edit("oracle-mutating".into())],
        "the cluster's change does not touch a namespace it never selected"
    );
    update(&mut state, Msg::Action(Action::Show(View::WhatIf)));
    let screen = hookscope::tui::view::render_text(&state, 220, 50);
    assert!(
        screen.contains("cluster: oracle-validating by kubectl-edit"),
        "{screen}"
    );
    assert!(screen.contains("your edit of oracle-mutating"), "{screen}");
    assert!(screen.contains("by changes not yours"), "{screen}");
}

// --- k9s habits -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_switches_the_cluster_inside_the_console() {
    let pki = TestPki::new();
    let alpha = oracle_cluster(&pki).await;
    let beta = FakeApiServer::start().await.expect("fake API server");
    beta.create("helm", oracle_configuration("mutating.yaml", &pki))
        .unwrap();
    beta.set_git_version("v1.31.4");
    let dir = scratch("context");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, common::two_context_kubeconfig(&alpha, &beta)).unwrap();
    let source = live_source(kubeconfig, https_replier(&[]));
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, false, 200);
    let on = |s: &State, server: &str, configurations: usize| {
        matches!(&live(s).connection, Connection::Connected(c, _) if c.info.server == server)
            && live(s).synced
            && live(s).configurations == configurations
    };
    pump(&mut state, &mut rx, &ctl, "alpha", |s| {
        on(s, &alpha.url(), 2)
    })
    .await;
    update(&mut state, Msg::Action(Action::Show(View::Cluster)));

    let action = hookscope::tui::keymap::parse_command("context beta").unwrap();
    let cs = update(&mut state, Msg::Action(action));
    assert!(
        matches!(cs.as_slice(), [Command::Context(name)] if name == "beta"),
        "{cs:?}"
    );
    assert!(matches!(live(&state).connection, Connection::Starting));
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "beta", |s| on(s, &beta.url(), 1)).await;
    let names: Vec<_> = state
        .hooks
        .iter()
        .map(|h| h.configuration.as_str())
        .collect();
    assert_eq!(names, ["oracle-mutating", "oracle-mutating"]);
    let screen = hookscope::tui::view::render_text(&state, 200, 50);
    assert!(screen.contains(&beta.url()), "{screen}");
    assert!(
        screen.contains("beta (user beta, namespace default)"),
        "{screen}"
    );
    assert!(!screen.contains("deleted in the cluster"), "{screen}");
    assert!(screen.contains("v1.31.4"), "{screen}");
    assert!(!screen.contains(&alpha.url()), "{screen}");
    assert!(
        hookscope::tui::keymap::parse_command("context").is_err(),
        "a context is named"
    );
}

#[test]
fn revert_drops_the_edits_of_a_cluster_configuration() {
    let mut s = live_state(10);
    listed(&mut s, vec![cluster_document("policy", "Fail")]);
    let text = s.buffers[0].text();
    s.buffers[0].replace_text(&text.replace("failurePolicy: Fail", "failurePolicy: Ignore"));
    assert!(s.buffers[0].modified());
    let revert = hookscope::tui::keymap::parse_command("revert").unwrap();
    update(&mut s, Msg::Action(revert.clone()));
    assert!(!s.buffers[0].modified());
    assert_eq!(s.buffers[0].text(), text);
    assert!(s.message.as_ref().unwrap().0.contains("edits are dropped"));
    // Edited while the cluster changed it: :revert takes the cluster's newest version.
    s.buffers[0].replace_text(&text.replace("failurePolicy: Fail", "failurePolicy: Ignore"));
    listed(&mut s, vec![cluster_document("policy", "Ignore")]);
    assert!(s.buffers[0].text().contains("failurePolicy: Ignore"));
    update(&mut s, Msg::Action(revert.clone()));
    let newest = cluster_document("policy", "Ignore").text;
    assert_eq!(s.buffers[0].text(), newest);
    assert!(!s.buffers[0].modified());
    update(&mut s, Msg::Action(revert));
    assert!(s.message.as_ref().unwrap().0.contains("no edit to drop"));
}

#[test]
fn a_patch_annotation_opens_in_full_and_copies() {
    let mut s = session();
    update(&mut s, Msg::Action(Action::Show(View::Annotations)));
    update(&mut s, Msg::Action(Action::Top));
    let first = live(&s).annotations[0].clone();
    assert_eq!(
        s.selected_live_annotation().map(|a| a.key.as_str()),
        Some(first.key.as_str())
    );
    // `y` copies the value in full, decoded.
    let cs = update(&mut s, Msg::Action(Action::Copy));
    let [Command::Clipboard(payload)] = cs.as_slice() else {
        panic!("{cs:?}")
    };
    use base64::Engine as _;
    let copied = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .unwrap();
    let expected = first.decoded.clone().unwrap_or(first.value.clone());
    assert_eq!(String::from_utf8(copied).unwrap(), expected);
    // Down to the patch: enter opens its event, whose detail shows it unclipped.
    update(&mut s, Msg::Action(Action::Down));
    let patch = s.selected_live_annotation().unwrap().clone();
    assert!(patch.key.starts_with("patch."), "{}", patch.key);
    update(&mut s, Msg::Key(KeyCode::Enter.into()));
    assert_eq!(s.view, View::Events);
    assert_eq!(live(&s).events_view.selected, Some(patch.event));
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    assert!(
        screen.contains(patch.decoded.as_deref().unwrap()),
        "{screen}"
    );
}

#[test]
fn rebase_puts_an_edit_on_the_clusters_newer_version() {
    let mut s = live_state(10);
    listed(&mut s, vec![cluster_document("policy", "Fail")]);
    let text = s.buffers[0].text();
    assert!(!text.contains("timeoutSeconds"), "{text}");
    // The user adds a timeout; meanwhile the cluster changes the failure policy.
    let edited = text.replace(
        "failurePolicy: Fail",
        "failurePolicy: Fail\n  timeoutSeconds: 5",
    );
    s.buffers[0].replace_text(&edited);
    listed(&mut s, vec![cluster_document("policy", "Ignore")]);
    let said = s.message.clone().unwrap().0;
    assert!(said.contains(":rebase puts your edits on it"), "{said}");
    update(
        &mut s,
        Msg::Action(hookscope::tui::keymap::parse_command("rebase").unwrap()),
    );
    let rebased: Value = serde_saphyr::from_str(&s.buffers[0].text()).unwrap();
    assert_eq!(
        rebased["webhooks"][0]["failurePolicy"], "Ignore",
        "the cluster's change"
    );
    assert_eq!(
        rebased["webhooks"][0]["timeoutSeconds"], 5,
        "the user's edit"
    );
    assert_eq!(
        s.buffers[0].saved,
        cluster_document("policy", "Ignore").text
    );
    assert!(s.buffers[0].modified());
    // The same field changed both ways is named, and nothing is lost.
    let mine = s.buffers[0]
        .text()
        .replace("failurePolicy: Ignore", "failurePolicy: Fail");
    s.buffers[0].replace_text(&mine);
    let mut theirs = cluster_document("policy", "Ignore");
    theirs.text = theirs
        .text
        .replace("failurePolicy: Ignore", "failurePolicy: Other");
    listed(&mut s, vec![theirs]);
    update(
        &mut s,
        Msg::Action(hookscope::tui::keymap::parse_command("rebase").unwrap()),
    );
    let (said, error) = s.message.clone().unwrap();
    assert!(error);
    assert!(
        said.contains("both changed webhooks[policy.example.com].failurePolicy"),
        "{said}"
    );
    assert_eq!(s.buffers[0].text(), mine);
}

// --- admission policies ------------------------------------------------------------------------

/// The documents of the policies session's `inputs/FILE` named `name`, as objects.
fn policy_fixture(file: &str, name: &str) -> Value {
    let text = std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/inputs/{file}")).unwrap();
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).expect("fixture YAML"))
        .find(|v| v["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {file}"))
}

/// A console on `api` through the live source (no audit source), once `ready`.
async fn console_on(
    api: &FakeApiServer,
    name: &str,
    ready: impl Fn(&State) -> bool,
) -> (State, Channels) {
    console_writing(api, name, false, ready).await
}

/// [`console_on`], with writes allowed when `allow_writes` (`--allow-writes`).
async fn console_writing(
    api: &FakeApiServer,
    name: &str,
    allow_writes: bool,
    ready: impl Fn(&State) -> bool,
) -> (State, Channels) {
    let dir = scratch(name);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let mut source = live_source(kubeconfig, https_replier(&[]));
    source.cluster.allow_writes = allow_writes;
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, allow_writes, 200);
    pump(&mut state, &mut rx, &ctl, "ready", ready).await;
    (state, (rx, ctl))
}

/// The request of the policies session's last create of `target` answered `code`, and the
/// message the client got.
fn recorded_request(
    target: &str,
    code: i32,
) -> (hookscope::replay::CapturedRequest, Option<String>) {
    let log = std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/audit.log")).unwrap();
    let records = hookscope::tui::live::records_of_lines(
        "audit.log",
        log.lines(),
        Reader::new(ClusterState::default()),
    );
    let event = records
        .iter()
        .rfind(|r| r.verb == "create" && r.target == target && r.code == Some(code))
        .unwrap_or_else(|| panic!("the create of {target}"));
    let request = event.request.as_deref().expect("replayable").clone();
    (request, event.message.clone())
}

/// Replays `request` through the live source and returns its entry.
async fn replay_request(
    state: &mut State,
    rx: &mut mpsc::Receiver<SourceMsg>,
    ctl: &mpsc::Sender<SourceCtl>,
    request: &hookscope::replay::CapturedRequest,
) -> hookscope::tui::app::Entry {
    let before = state.entries.len();
    let requests = vec![request.clone()];
    ctl.send(SourceCtl::Replay { requests }).await.unwrap();
    pump(state, rx, ctl, "the replay", |s| s.entries.len() > before).await;
    state.entries.last().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validating_policy_and_its_binding_in_the_cluster_decide_the_replays_and_their_history_shows()
 {
    let api = FakeApiServer::start().await.expect("fake API server");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "pol", "labels": {"env": "test"}}});
    api.create("kubectl-create", ns).unwrap();
    let (mut state, (mut rx, ctl)) = console_on(&api, "policies", |s| {
        live(s).synced && live(s).namespaces == Some(1)
    })
    .await;

    // The create a real v1.33 denied with `no-forbidden-key` (sent with curl), as its audit
    // event recorded it.
    let (request, message) = recorded_request("pol/forbidden", 422);

    // No policy in the cluster: allowed.
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Allowed),
        "{:?}",
        entry.verdict
    );

    // The policy and its binding are created: two changes in the history, and the replay is
    // denied as the apiserver denied it, word for word.
    let changes = live(&state).changes.len();
    api.create(
        "kubectl-create",
        policy_fixture("validating-policies.yaml", "no-forbidden-key"),
    )
    .unwrap();
    api.create(
        "kubectl-create",
        policy_fixture("validating-policies.yaml", "no-forbidden-key-binding"),
    )
    .unwrap();
    // A change and the set in force with it are two messages: wait for both kinds' sets.
    pump(&mut state, &mut rx, &ctl, "the policy in force", |s| {
        live(s).changes.len() == changes + 2 && live(s).bindings == 1 && live(s).policies == 1
    })
    .await;
    // Two watches: which of the two changes comes first is up to them.
    let mut added: Vec<_> = (live(&state).changes.iter().skip(changes))
        .map(|c| (c.kind, c.name.as_str(), c.action))
        .collect();
    added.sort_by_key(|(kind, ..)| *kind);
    assert_eq!(
        added,
        [
            (
                AdmissionKind::ValidatingAdmissionPolicy,
                "no-forbidden-key",
                ChangeAction::Added
            ),
            (
                AdmissionKind::ValidatingAdmissionPolicyBinding,
                "no-forbidden-key-binding",
                ChangeAction::Added
            ),
        ]
    );
    assert_eq!(live(&state).policies, 1);
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Denied(422)),
        "{:?}",
        entry.verdict
    );
    let status = entry.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(Some(&status.message), message.as_ref());

    // The binding now only warns: allowed, with the policy's warning.
    let mut warn = policy_fixture("validating-policies.yaml", "no-forbidden-key-binding");
    warn["spec"]["validationActions"] = json!(["Warn"]);
    api.update("kubectl-edit", warn).unwrap();
    // The change, then the set in force with it (the source replays against it from then on).
    pump(&mut state, &mut rx, &ctl, "the binding modified", |s| {
        let warns = s.hooks.iter().any(|h| {
            h.webhook == "no-forbidden-key-binding"
                && h.settings
                    .contains(&("validationActions", "Warn".to_string()))
        });
        warns
            && live(s).changes.back().is_some_and(|c| {
                c.action == ChangeAction::Modified && c.name == "no-forbidden-key-binding"
            })
    })
    .await;
    let diff = &live(&state).changes.back().unwrap().diff;
    assert!(
        diff.contains("-  - Deny") && diff.contains("+  - Warn"),
        "{diff}"
    );
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Allowed),
        "{:?}",
        entry.verdict
    );
    assert!(
        entry.replayed.outcome.warnings.iter().any(|w| w.contains(
            "Validation failed for ValidatingAdmissionPolicy 'no-forbidden-key' with binding 'no-forbidden-key-binding'"
        )),
        "{:?}",
        entry.replayed.outcome.warnings
    );

    // The Webhooks view lists the binding where the policy runs, with the history of the policy
    // and its binding; the Cluster view lists the changes by kind.
    let mut webhooks = state.clone();
    update(&mut webhooks, Msg::Action(Action::Show(View::Webhooks)));
    let row = webhooks
        .hooks
        .iter()
        .position(|h| h.webhook == "no-forbidden-key-binding")
        .expect("the binding's row");
    webhooks.hook_cursor.selected = row;
    let screen = hookscope::tui::view::render_text(&webhooks, 200, 50);
    assert!(
        screen.contains("History of no-forbidden-key and no-forbidden-key-binding (3)"),
        "{screen}"
    );
    assert!(screen.contains("VAPB no-forbidden-key-binding"), "{screen}");
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(screen.contains("1 policies with 1 bindings"), "{screen}");
    assert!(screen.contains("✓ VAP watch (v1)"), "{screen}");
    assert!(
        screen.contains("– MAP: not served by this server"),
        "{screen}"
    );

    // The binding goes: allowed again.
    api.delete(
        FakeResource::ValidatingAdmissionPolicyBindings,
        "no-forbidden-key-binding",
    )
    .unwrap();
    pump(&mut state, &mut rx, &ctl, "the binding deleted", |s| {
        live(s).bindings == 0
    })
    .await;
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Allowed),
        "{:?}",
        entry.verdict
    );
    assert!(entry.replayed.outcome.warnings.is_empty());
}

/// A cluster's policies are documents of the console like its webhook configurations: editing
/// the binding in force (to warn instead of deny) dispatches the replays again with the edit,
/// and `:apply` writes the edit to the cluster as it writes a webhook configuration's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_clusters_policy_binding_dispatches_the_replays_again_with_the_edit() {
    let api = FakeApiServer::start().await.expect("fake API server");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "pol", "labels": {"env": "test"}}});
    api.create("kubectl-create", ns).unwrap();
    for name in ["no-forbidden-key", "no-forbidden-key-binding"] {
        let object = policy_fixture("validating-policies.yaml", name);
        api.create("kubectl-create", object).unwrap();
    }
    let binding = hookscope::tui::editing::BufferOrigin::Cluster {
        kind: AdmissionKind::ValidatingAdmissionPolicyBinding,
        name: "no-forbidden-key-binding".into(),
    };
    let (mut state, (mut rx, ctl)) = console_writing(&api, "policy-edit", true, |s| {
        live(s).synced && live(s).bindings == 1 && s.buffers.iter().any(|b| b.origin == binding)
    })
    .await;
    let (request, _) = recorded_request("pol/forbidden", 422);
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Denied(422)),
        "{:?}",
        entry.verdict
    );

    // The binding's buffer holds the cluster's object; the edit makes it warn.
    let i = state
        .buffers
        .iter()
        .position(|b| b.origin == binding)
        .unwrap();
    let text = state.buffers[i].text();
    assert!(text.contains("- Deny"), "{text}");
    state.buffers[i].replace_text(&text.replace("- Deny", "- Warn"));
    let generation = state.buffers[i].generation;
    let cs = update(
        &mut state,
        Msg::CheckDue {
            buffer: i,
            generation,
        },
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the what-if of the edit", |s| {
        s.baseline.is_some() && s.run.is_none() && s.whatif.flipped().count() == 1
    })
    .await;
    let last = state.entries.last().unwrap();
    assert!(
        matches!(last.verdict, Verdict::Allowed),
        "{:?}",
        last.verdict
    );
    assert!(
        last.replayed.outcome.warnings.iter().any(|w| w.contains(
            "Validation failed for ValidatingAdmissionPolicy 'no-forbidden-key' with binding 'no-forbidden-key-binding'"
        )),
        "{:?}",
        last.replayed.outcome.warnings
    );
    // The cause names the policy whose call changed, as for an edit of a file.
    let index = state.entries.len() - 1;
    assert_eq!(
        state.whatif_causes(index),
        [ChangeCause::Edit("no-forbidden-key".into())]
    );

    // `:apply` of the binding's buffer (writes allowed): a server-side dry run of only what the
    // edit changed, `Warn` added to the set and `Deny` removed by a tested patch; `y` stores it.
    state.buffer = i;
    let action = hookscope::tui::keymap::parse_command("apply").unwrap();
    let cs = update(&mut state, Msg::Action(action));
    let edits: Vec<_> = cs
        .iter()
        .filter_map(|c| match c {
            Command::Apply(r) => Some(r.edits.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(edits.len(), 1, "{cs:?}");
    assert_eq!(
        edits[0].kind,
        AdmissionKind::ValidatingAdmissionPolicyBinding
    );
    assert!(edits[0].base.is_some(), "made on the cluster's version");
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the dry run", |s| {
        live(s).pending_apply.is_some()
    })
    .await;
    let diff = live(&state).pending_apply.as_ref().unwrap().diff.clone();
    assert!(
        diff.contains(r#"would then own only: .spec.validationActions[="Warn"]"#),
        "{diff}"
    );
    assert!(
        diff.contains("removed by a JSON patch that tests each value is still the one you edited: .spec.validationActions[=\"Deny\"]"),
        "{diff}"
    );
    let actions = |api: &FakeApiServer| {
        api.get(
            FakeResource::ValidatingAdmissionPolicyBindings,
            "no-forbidden-key-binding",
        )
        .unwrap()["spec"]["validationActions"]
            .clone()
    };
    assert_eq!(actions(&api), json!(["Deny"]), "a dry run stores nothing");
    let cs = update(&mut state, key('y'));
    assert!(
        matches!(&cs[..], [Command::Apply(r)] if !r.dry_run && !r.force),
        "{cs:?}"
    );
    perform_all(cs, &ctl).await;
    pump(&mut state, &mut rx, &ctl, "the apply", |s| {
        s.message
            .as_ref()
            .is_some_and(|(m, _)| m.starts_with("applied no-forbidden-key-binding"))
    })
    .await;
    assert_eq!(actions(&api), json!(["Warn"]));
}

/// The values of `family`'s counter samples in a `/metrics` text, by their label text.
fn counter_lines(text: &str, family: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix(family)?.strip_prefix('{'))
        .filter_map(|l| {
            let (labels, value) = l.rsplit_once("} ")?;
            Some((labels.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_policy_metrics_of_a_real_apiserver_are_charted() {
    let mut s = live_state(10);
    let fixture =
        |f: &str| std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/{f}")).unwrap();
    let (before, after) = (fixture("metrics-before.txt"), fixture("metrics-after.txt"));
    for (i, text) in [&before, &after].into_iter().enumerate() {
        let snapshot = AdmissionSnapshot::from_text(text).expect("a real /metrics parses");
        send(
            &mut s,
            LiveMsg::Scrape {
                at: at(60 * i as u64),
                snapshot: Box::new(snapshot),
            },
        );
    }
    update(&mut s, Msg::Action(Action::Show(View::Metrics)));
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    assert!(
        screen.contains("policy checks/s by policy/binding"),
        "{screen}"
    );
    // Each policy series that both scrapes have is charted with its increase.
    let family = "apiserver_validating_admission_policy_check_total";
    let old = counter_lines(&before, family);
    let mut charted = 0;
    for (labels, value) in counter_lines(&after, family) {
        let Some((_, was)) = old.iter().find(|(l, _)| *l == labels) else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            labels[start..].split('"').next().unwrap().to_string()
        };
        let legend = format!(
            "{}/{} {} {}",
            label("policy"),
            label("policy_binding"),
            label("enforcement_action"),
            label("error_type"),
        );
        let count = format!(" · {:.0}", value - was);
        // In full, or cut to the legend's room.
        let shown = screen.lines().any(|l| {
            l.contains(&format!("{legend}{count}"))
                || (l.contains(&legend[..40]) && l.contains(&format!("…{count}")))
        });
        assert!(shown, "{legend}{count}: {screen}");
        charted += 1;
    }
    assert_eq!(charted, 4);
    // And the check latency by policy and binding.
    assert!(
        screen.contains("check_duration_seconds by policy"),
        "{screen}"
    );
    for policy in ["no-forbidden-key", "ignored-error", "replica-limit"] {
        assert!(
            screen
                .lines()
                .any(|l| l.contains(policy) && l.contains("VAP")),
            "{policy}: {screen}"
        );
    }
}

#[test]
fn a_policy_kind_not_served_is_said_once_and_shown_in_the_feeds() {
    let mut s = live_state(10);
    let served = |mutating: bool| {
        let kinds = AdmissionKind::POLICIES.into_iter().map(move |kind| {
            let is_mutating = matches!(
                kind,
                AdmissionKind::MutatingAdmissionPolicy
                    | AdmissionKind::MutatingAdmissionPolicyBinding
            );
            hookscope::live::cluster::Served {
                kind,
                version: (!is_mutating || mutating)
                    .then_some(hookscope::live::cluster::GroupVersion::V1),
            }
        });
        LiveMsg::Cluster {
            msg: Box::new(ClusterMsg::Discovered(kinds.collect())),
            at: at(0),
        }
    };
    send(&mut s, served(false));
    let (said, error) = s.message.clone().expect("said");
    assert_eq!(
        said,
        "cluster: MutatingAdmissionPolicy not served here: not watched"
    );
    assert!(!error);
    // The next connection finds the same: nothing said again.
    s.message = None;
    send(&mut s, served(false));
    assert_eq!(s.message, None);
    update(&mut s, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    assert!(
        screen.contains("– MAPB: not served by this server"),
        "{screen}"
    );
    // The server starts serving them (its feature gate switched on): watched, nothing to say.
    send(&mut s, served(true));
    assert_eq!(s.message, None);
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    assert!(!screen.contains("not served"), "{screen}");
    assert!(screen.contains("◌ MAP watch (v1)"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_kind_that_cannot_be_read_is_named_on_every_replay() {
    let api = FakeApiServer::start().await.expect("fake API server");
    let denial = hookscope::fake_apiserver::Denial::resource(
        FakeResource::ValidatingAdmissionPolicyBindings,
        "list",
    );
    api.forbid(denial);
    // What is in force is known except the bindings: replays are not held back for them.
    let (mut state, (mut rx, ctl)) = console_on(&api, "policies-forbidden", |s| {
        live(s).synced && !live(s).unreadable.is_empty()
    })
    .await;
    let (request, _) = recorded_request("pol/forbidden", 422);
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    let notes = &entry.replayed.request.notes;
    assert!(
        notes.iter().any(
            |n| n.starts_with("the cluster's validatingadmissionpolicybindings: ")
                && n.contains("cannot list resource")
                && n.ends_with(
                    "replayed without them, so a policy of that kind may have decided otherwise"
                )
        ),
        "{notes:?}"
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(
        screen.contains("! replayed without validatingadmissionpolicybindings"),
        "{screen}"
    );
    assert!(
        screen.contains(r#"resources: ["validatingadmissionpolicybindings"]"#),
        "{screen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policys_parameters_come_from_the_cluster_and_follow_it() {
    let api = FakeApiServer::start().await.expect("fake API server");
    let text = std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/inputs/namespaces.yaml"))
        .unwrap();
    for doc in text.split("\n---\n") {
        api.create("kubectl-create", serde_saphyr::from_str(doc).unwrap())
            .unwrap();
    }
    let limits: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/inputs/params.yaml")).unwrap(),
    )
    .unwrap();
    api.create("kubectl-create", limits.clone()).unwrap();
    for name in ["replica-limit", "replica-limit-binding"] {
        api.create(
            "kubectl-create",
            policy_fixture("validating-policies.yaml", name),
        )
        .unwrap();
    }
    let (mut state, (mut rx, ctl)) = console_on(&api, "policy-params", |s| {
        live(s).synced && live(s).namespaces == Some(3) && live(s).params.is_some()
    })
    .await;

    // The Deployment of 5 replicas the real v1.33 denied against `maxReplicas: "3"`: denied
    // again, word for word, with the parameter read from the cluster.
    let (mut request, message) = recorded_request("pol/big", 422);
    // What the audit log showed of the parameters does not count: the cluster's do.
    request.params = None;
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Denied(422)),
        "{:?}: {:?}",
        entry.verdict,
        entry.replayed.outcome.status
    );
    let status = entry.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(Some(&status.message), message.as_ref());

    // The limit is raised in the cluster: the same request is allowed.
    let mut raised = limits;
    raised["data"]["maxReplicas"] = json!("10");
    api.update("kubectl-edit", raised).unwrap();
    let before = live(&state).params;
    pump(&mut state, &mut rx, &ctl, "the new params", |s| {
        live(s).params != before
    })
    .await;
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Allowed),
        "{:?}: {:?}",
        entry.verdict,
        entry.replayed.outcome.status
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(
        screen.contains("✓ policy params watch · 1 objects (changed "),
        "{screen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captures_given_to_live_wait_for_the_parameters_of_the_policies_in_force() {
    let api = FakeApiServer::start().await.expect("fake API server");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "pol", "labels": {"env": "test"}}});
    api.create("kubectl-create", ns).unwrap();
    let limits: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/policies-v1.33/inputs/params.yaml")).unwrap(),
    )
    .unwrap();
    api.create("kubectl-create", limits).unwrap();
    for name in ["replica-limit", "replica-limit-binding"] {
        let object = policy_fixture("validating-policies.yaml", name);
        api.create("kubectl-create", object).unwrap();
    }
    let dir = scratch("policy-params-loaded");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let mut source = live_source(kubeconfig, https_replier(&[]));
    let (mut request, message) = recorded_request("pol/big", 422);
    request.params = None;
    source.loaded = vec![hookscope::replay::InputItem::Request(Box::new(request))];
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, false, 200);
    pump(&mut state, &mut rx, &ctl, "the capture replayed", |s| {
        !s.entries.is_empty()
    })
    .await;
    // Replayed once the parameters were listed, not before: denied by the limit, not for want
    // of parameters.
    let entry = &state.entries[0];
    let status = entry.replayed.outcome.status.as_ref().expect("a status");
    assert_eq!(Some(&status.message), message.as_ref());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutating_policy_the_cluster_serves_as_alpha_mutates_the_replays() {
    let api = FakeApiServer::start().await.expect("fake API server");
    // Kubernetes 1.33 with the MutatingAdmissionPolicy gate and its runtime-config on.
    for r in [
        FakeResource::MutatingAdmissionPolicies,
        FakeResource::MutatingAdmissionPolicyBindings,
    ] {
        api.serve_versions(r, &["v1alpha1"]);
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "pol", "labels": {"env": "test"}}});
    api.create("kubectl-create", ns).unwrap();
    for name in ["add-owner", "add-owner-binding"] {
        let object = policy_fixture("mutating-policies.yaml", name);
        api.create("kubectl-create", object).unwrap();
    }
    let (mut state, (mut rx, ctl)) = console_on(&api, "mutating-policy", |s| {
        live(s).synced && live(s).namespaces == Some(1) && live(s).bindings == 1
    })
    .await;
    let (request, _) = recorded_request("pol/forbidden", 422);
    let entry = replay_request(&mut state, &mut rx, &ctl, &request).await;
    assert!(
        matches!(entry.verdict, Verdict::Allowed),
        "{:?}",
        entry.verdict
    );
    let object = entry.replayed.outcome.object.as_ref().expect("the object");
    assert_eq!(object.value()["metadata"]["labels"]["owner"], "platform");
    // The binding's row is where the apiserver runs it: before the mutating webhooks.
    let row = &state.hooks[0];
    assert_eq!(
        row.policy_kind().map(|(policy, _)| policy),
        Some("MutatingAdmissionPolicy")
    );
    assert_eq!(
        (row.configuration.as_str(), row.webhook.as_str()),
        ("add-owner", "add-owner-binding")
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(screen.contains("MAP watch (v1alpha1)"), "{screen}");
}

// --- custom resources typed by the cluster's definitions -----------------------------------------

/// The CREATE of a Widget (a custom resource of `widgets.example.com`) in `default`.
fn widget_create() -> hookscope::replay::CapturedRequest {
    let attrs: hookscope::engine::Attributes = serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
        "resource": {"group": "example.com", "version": "v1", "resource": "widgets"},
        "namespace": "default", "name": "w1",
        "object": {"apiVersion": "example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w1", "namespace": "default"}, "spec": {}},
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        "userInfo": {"username": "dev", "groups": ["system:authenticated"]},
    }))
    .unwrap();
    hookscope::replay::CapturedRequest {
        source: hookscope::replay::SourceRef {
            file: "test".into(),
            index: 1,
            unit: hookscope::replay::IndexUnit::Document,
            audit_id: None,
            line: None,
        },
        uid: "00000000-0000-4000-a000-000000000001".into(),
        namespace: hookscope::replay::NamespaceState::NotApplicable,
        attrs,
        audit: None,
        notes: Vec::new(),
        params: None,
    }
}

/// Replays a Widget's CREATE in a live session on `api` once `ready` holds; returns its entry
/// and the state.
async fn widget_replay(
    api: &FakeApiServer,
    name: &str,
    ready: impl Fn(&State) -> bool,
) -> (hookscope::tui::app::Entry, State) {
    let dir = scratch(name);
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, api.kubeconfig()).unwrap();
    let source = live_source(kubeconfig, https_replier(&[]));
    let (mut state, (mut rx, ctl)) = spawn_live(source, 100, false, 200);
    pump(&mut state, &mut rx, &ctl, "the cluster", |s| {
        live(s).synced && ready(s)
    })
    .await;
    let before = state.entries.len();
    ctl.send(SourceCtl::Replay {
        requests: vec![widget_create()],
    })
    .await
    .unwrap();
    pump(&mut state, &mut rx, &ctl, "the replay", |s| {
        s.entries.len() > before
    })
    .await;
    (state.entries.last().unwrap().clone(), state)
}

/// Issue 28, point 1: the cluster's CustomResourceDefinitions type its custom resources in the
/// replays; where the user may not list them, every replay of a custom resource says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replays_of_custom_resources_use_the_clusters_definitions_and_say_when_they_cannot() {
    let pki = TestPki::new();
    let api = oracle_cluster(&pki).await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "default": 3}}}}}}}]
        }
    });
    api.create("kubectl", crd).unwrap();

    let (entry, state) = widget_replay(&api, "crds", |s| live(s).crds == Some(1)).await;
    assert!(
        entry.replayed.request.notes.is_empty(),
        "{:?}",
        entry.replayed.request.notes
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(screen.contains("✓ CRDs watch · 1 definitions"), "{screen}");

    api.forbid(hookscope::fake_apiserver::Denial::resource(
        FakeResource::CustomResourceDefinitions,
        "list",
    ));
    let (entry, state) = widget_replay(&api, "crds-forbidden", |s| {
        live(s)
            .failing()
            .any(|(f, failure)| f == Feed::Crds && failure.kind == FailureKind::Forbidden)
    })
    .await;
    let notes = &entry.replayed.request.notes;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("the cluster's CustomResourceDefinitions cannot be read")
            && notes[0].contains(r#"cannot list resource "customresourcedefinitions""#)
            && notes[0].contains("widgets.example.com is not typed by its definition"),
        "{}",
        notes[0]
    );
    let mut cluster = state.clone();
    update(&mut cluster, Msg::Action(Action::Show(View::Cluster)));
    let screen = hookscope::tui::view::render_text(&cluster, 200, 50);
    assert!(screen.contains("✗ CRDs watch"), "{screen}");
    assert!(
        screen.contains(r#"resources: ["customresourcedefinitions"]"#),
        "{screen}"
    );
}

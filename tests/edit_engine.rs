//! Re-dispatch after an edit: replies reused for calls whose content did not change (a real
//! HTTPS webhook counts what it receives), cancellation, and the what-if comparison of a
//! failurePolicy and a namespaceSelector edit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use hookscope::api::WebhookKind;
use hookscope::edit::{
    CancelToken, HookKey, RedispatchMsg, Redispatched, ReplyCache, ReusingReplier, check, compare,
    redispatch, spawn_redispatch,
};
use hookscope::engine::{EngineOptions, Replier, Reply, WebhookCall};
use hookscope::replay::CapturedRequest;
use hookscope::replay::InputItem;
use hookscope::replay::run::{IdMode, ReplaySettings, Replayed, Replayer};
use hookscope::transport::{HttpsOptions, HttpsReplier};
use hookscope::tui::demo::{self, DemoReplier};
use hookscope::webhook_server::{Behaviour, Behaviours, Pki, ServerOptions, WebhookServer};
use tokio::sync::mpsc;

fn demo_requests() -> Arc<[CapturedRequest]> {
    demo::requests()
        .into_iter()
        .filter_map(|i| match i {
            InputItem::Request(r) => Some(*r),
            _ => None,
        })
        .collect()
}

/// A replayer for an edited text, which must be valid.
fn replayer_for(text: &str, previous: &[hookscope::api::WebhookConfiguration]) -> Replayer {
    let checked = check(text, "edited.yaml", previous);
    let errors: Vec<String> = checked.errors().map(ToString::to_string).collect();
    let engine = checked
        .engine(EngineOptions::default())
        .unwrap_or_else(|| panic!("the edit is valid: {errors:?}"));
    Replayer::new(Arc::new(engine), ReplaySettings::default())
}

async fn run<R: Replier + Clone + Send>(
    requests: &Arc<[CapturedRequest]>,
    replayer: &Replayer,
    replier: R,
) -> Redispatched {
    redispatch(
        Arc::clone(requests),
        replayer,
        replier,
        IdMode::Random,
        &CancelToken::new(),
        |_| {},
    )
    .await
    .expect("not cancelled")
}

fn names(results: &[Replayed]) -> Vec<String> {
    results
        .iter()
        .map(|r| {
            format!(
                "{} {}/{}",
                r.request.attrs.operation, r.request.attrs.namespace, r.request.attrs.name
            )
        })
        .collect()
}

fn https_configs(url: &str, ca_pem: &str, mutating_selector: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: labels}}
webhooks:
- name: label.edit.test
  clientConfig: {{url: "{url}/label", caBundle: {ca}}}
  rules:
  - {{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods, configmaps]}}
  namespaceSelector: {mutating_selector}
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: check}}
webhooks:
- name: check.edit.test
  clientConfig: {{url: "{url}/allow", caBundle: {ca}}}
  rules:
  - {{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods, configmaps]}}
  sideEffects: None
  admissionReviewVersions: [v1]
"#
    )
}

fn called(r: &Replayed, webhook: &str) -> bool {
    r.outcome
        .calls
        .iter()
        .any(|c| &*c.webhook == webhook && c.decision == hookscope::engine::CallDecision::Called)
}

/// A webhook server of this test's PKI: `/label` adds the label `edited: yes`, `/allow` allows.
async fn label_and_allow() -> (Pki, WebhookServer) {
    let pki = Pki::mint(&[]).expect("pki");
    let behaviours = Behaviours::new()
        .route("/label", Behaviour::add_label("edited", "yes"))
        .route("/allow", Behaviour::Allow);
    let server = WebhookServer::start(&pki, behaviours, ServerOptions::default())
        .await
        .expect("server");
    (pki, server)
}

/// Forwards calls to `inner`, holding the first batch until `release` has a permit; records
/// every call it forwards.
#[derive(Clone)]
struct HoldsTheFirst<R> {
    inner: R,
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Semaphore>,
    seen: Arc<std::sync::Mutex<Vec<WebhookCall>>>,
}

impl<R: Replier + Send> Replier for HoldsTheFirst<R> {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        let first = {
            let mut seen = self.seen.lock().unwrap();
            let first = seen.is_empty();
            seen.extend(calls.iter().cloned());
            first
        };
        let (entered, release) = (self.entered.clone(), self.release.clone());
        let reply = self.inner.reply(calls);
        async move {
            if first {
                entered.notify_one();
                let _ = release.acquire().await;
            }
            reply.await
        }
    }
}

#[tokio::test]
async fn a_reply_to_a_call_made_before_the_cache_was_cleared_is_not_kept() {
    let (pki, server) = label_and_allow().await;
    let text = https_configs(&server.url(""), pki.ca_pem(), "{}");
    let replayer = replayer_for(&text, &[]);
    let pod: Arc<[CapturedRequest]> = demo_requests()
        .iter()
        .filter(|r| r.attrs.resource.resource == "pods" && r.attrs.namespace != "shop")
        .take(1)
        .cloned()
        .collect();
    assert_eq!(pod.len(), 1);
    let cache = ReplyCache::default();
    let holds = HoldsTheFirst {
        inner: HttpsReplier::new(HttpsOptions::default()),
        entered: Arc::default(),
        release: Arc::new(tokio::sync::Semaphore::new(0)),
        seen: Arc::default(),
    };
    let replier = ReusingReplier::new(holds.clone(), cache.clone());
    let task = tokio::spawn(async move { run(&pod, &replayer, replier).await });

    // The mutating call is out when the cache is cleared; its reply comes after.
    holds.entered.notified().await;
    cache.clear();
    holds.release.add_permits(1);
    let done = task.await.expect("the run");
    assert!(done.results[0].outcome.allowed);
    let seen = holds.seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(|c| &*c.webhook).collect::<Vec<_>>(),
        ["label.edit.test", "check.edit.test"]
    );
    assert!(
        cache.lookup(&seen[0]).is_none(),
        "answered after the clear, asked before it: not kept"
    );
    assert!(
        cache.lookup(&seen[1]).is_some(),
        "asked after the clear: kept"
    );
}

#[tokio::test]
async fn only_calls_whose_content_changed_reach_the_webhook_again() {
    let (pki, server) = label_and_allow().await;
    let requests = demo_requests();
    let cache = ReplyCache::default();
    let https = HttpsReplier::new(HttpsOptions::default());
    let replier = ReusingReplier::new(https.clone(), cache.clone());

    let text = https_configs(&server.url(""), pki.ca_pem(), "{}");
    let first_replayer = replayer_for(&text, &[]);
    let first = run(&requests, &first_replayer, replier.clone()).await;
    let labelled = first
        .results
        .iter()
        .filter(|r| called(r, "label.edit.test"))
        .count();
    let checked = first
        .results
        .iter()
        .filter(|r| called(r, "check.edit.test"))
        .count();
    assert!(labelled > 5 && checked == labelled, "{labelled} {checked}");
    assert_eq!(server.requests_to("/label"), labelled as u64);
    assert_eq!(server.requests_to("/allow"), checked as u64);
    assert!(first.results.iter().all(|r| r.outcome.allowed));

    // The same configuration again: every reply is reused, with fresh uids accepted.
    let again = run(&requests, &first_replayer, replier.clone()).await;
    assert_eq!(server.total_requests(), (labelled + checked) as u64);
    assert_eq!(names(&again.results), names(&first.results));
    assert!(again.results.iter().all(|r| r.outcome.allowed));
    assert_eq!(
        again
            .results
            .iter()
            .map(|r| &r.outcome.object)
            .collect::<Vec<_>>(),
        first
            .results
            .iter()
            .map(|r| &r.outcome.object)
            .collect::<Vec<_>>()
    );

    // Edit: the labeller leaves the shop namespace alone. Objects in shop reach the validating
    // webhook without the label: new content, new calls; nothing else is sent again.
    let edited = https_configs(
        &server.url(""),
        pki.ca_pem(),
        "{matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [shop]}]}",
    );
    let previous = check(&text, "edited.yaml", &[]).webhook_configurations();
    let edited_replayer = replayer_for(&edited, &previous);
    let before = cache.stats();
    let after = run(&requests, &edited_replayer, replier.clone()).await;
    let shop_checked = after
        .results
        .iter()
        .filter(|r| r.request.attrs.namespace == "shop" && called(r, "check.edit.test"))
        .count();
    assert!(shop_checked > 0);
    assert_eq!(
        server.requests_to("/label"),
        labelled as u64,
        "no labeller call is new"
    );
    assert_eq!(
        server.requests_to("/allow"),
        (checked + shop_checked) as u64,
        "only the validating calls with changed objects are new"
    );
    let stats = cache.stats();
    assert_eq!(stats.misses - before.misses, shop_checked as u64);

    // Reused replies give what the webhooks themselves give.
    let fresh = run(&requests, &edited_replayer, https.clone()).await;
    for (r, f) in after.results.iter().zip(&fresh.results) {
        assert_eq!(r.outcome.allowed, f.outcome.allowed);
        assert_eq!(r.outcome.object, f.outcome.object);
        assert_eq!(r.outcome.warnings, f.outcome.warnings);
    }
    server.stop();
}

fn demo_text() -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode("demo-ca");
    demo::WEBHOOKS_YAML
        .replace("${URL}", "https://127.0.0.1:8443")
        .replace("${CA}", &ca)
}

fn key(configuration: &str, webhook: &str, phase: WebhookKind) -> HookKey {
    HookKey {
        configuration: configuration.into(),
        webhook: webhook.into(),
        phase,
    }
}

#[tokio::test]
async fn what_if_a_failure_policy_becomes_fail() {
    let requests = demo_requests();
    let text = demo_text();
    let cache = ReplyCache::default();
    let replier = ReusingReplier::new(DemoReplier, cache.clone());
    let before = run(&requests, &replayer_for(&text, &[]), replier.clone()).await;
    let misses = cache.stats().misses;

    let slow = "  failurePolicy: Ignore\n  sideEffects: None\n  timeoutSeconds: 1\n";
    assert!(text.contains(slow));
    let edited = text.replace(
        slow,
        "  failurePolicy: Fail\n  sideEffects: None\n  timeoutSeconds: 1\n",
    );
    let previous = check(&text, "demo", &[]).webhook_configurations();
    let after = run(
        &requests,
        &replayer_for(&edited, &previous),
        replier.clone(),
    )
    .await;
    assert_eq!(
        cache.stats().misses,
        misses,
        "a failurePolicy edit calls no webhook again"
    );

    let w = compare(&before.results, &after.results);
    let flipped: Vec<&str> = w
        .flipped()
        .map(|c| before.results[c.index].request.attrs.kind.kind.as_str())
        .collect();
    assert_eq!(
        flipped, ["Deployment"; 4],
        "the deployments the slow webhook sees"
    );
    for c in w.flipped() {
        let (b, a) = c.verdict.as_ref().expect("a verdict change");
        assert!(b.allowed());
        match a {
            hookscope::edit::Verdict::Denied { code, message } => {
                assert_eq!(*code, 500);
                assert!(message.contains("quota.slow.demo"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // The fail-open annotation is gone.
        assert!(
            c.annotations
                .iter()
                .any(|a| a.key.starts_with("failed-open.") && a.after.is_none())
        );
    }
    let slow = w
        .hooks
        .iter()
        .find(|d| d.hook == key("30-slow-quota", "quota.slow.demo", WebhookKind::Validating))
        .expect("the slow webhook");
    let (b, a) = (slow.before.expect("before"), slow.after.expect("after"));
    assert_eq!((b.failed_open, b.errored), (4, 0));
    assert_eq!((a.failed_open, a.errored), (0, 4));
    assert_eq!((b.called, a.called), (4, 4));
    // Webhooks the edit did not touch count the same.
    let policy = w
        .hooks
        .iter()
        .find(|d| d.hook.configuration == "40-policy")
        .expect("policy");
    assert!(!policy.changed());
}

#[tokio::test]
async fn what_if_a_namespace_selector_excludes_a_namespace() {
    let requests = demo_requests();
    let text = demo_text();
    let replier = ReusingReplier::new(DemoReplier, ReplyCache::default());
    let before = run(&requests, &replayer_for(&text, &[]), replier.clone()).await;
    let policy = "  namespaceSelector:\n    matchExpressions:\n    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}\n  failurePolicy: Fail\n  sideEffects: None\n  timeoutSeconds: 5\n  admissionReviewVersions: [v1]\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: 50-";
    assert!(text.contains(policy));
    let edited = text.replace(
        policy,
        &policy.replace("[kube-system]", "[kube-system, shop]"),
    );
    let after = run(&requests, &replayer_for(&edited, &[]), replier).await;
    let w = compare(&before.results, &after.results);
    let flipped: Vec<usize> = w.flipped().map(|c| c.index).collect();
    assert!(!flipped.is_empty());
    for i in &flipped {
        let r = &before.results[*i];
        assert_eq!(r.request.attrs.namespace, "shop");
        assert!(!r.outcome.allowed && after.results[*i].outcome.allowed);
    }
    // Every shop request the policy denied is now allowed.
    let denied_in_shop = before
        .results
        .iter()
        .filter(|r| r.request.attrs.namespace == "shop" && !r.outcome.allowed)
        .count();
    assert_eq!(flipped.len(), denied_in_shop);
    let shop_called = before
        .results
        .iter()
        .filter(|r| r.request.attrs.namespace == "shop" && called(r, "policy.validator.demo"))
        .count();
    let d = w
        .hooks
        .iter()
        .find(|d| {
            d.hook
                == key(
                    "40-policy",
                    "policy.validator.demo",
                    WebhookKind::Validating,
                )
        })
        .expect("policy");
    let (b, a) = (d.before.expect("before"), d.after.expect("after"));
    assert_eq!(b.called - a.called, shop_called);
    assert!(a.skipped_selector - b.skipped_selector >= shop_called);
    assert!(b.denied > a.denied);
}

#[tokio::test]
async fn renamed_webhooks_appear_on_one_side_each() {
    let requests = demo_requests();
    let text = demo_text();
    let before = run(&requests, &replayer_for(&text, &[]), DemoReplier).await;
    let edited = text.replace("name: warn.deprecations.demo", "name: warn.renamed.demo");
    let after = run(&requests, &replayer_for(&edited, &[]), DemoReplier).await;
    let w = compare(&before.results, &after.results);
    let old = w
        .hooks
        .iter()
        .find(|d| d.hook.webhook == "warn.deprecations.demo")
        .expect("old name");
    assert!(old.before.is_some() && old.after.is_none());
    let new = w
        .hooks
        .iter()
        .find(|d| d.hook.webhook == "warn.renamed.demo")
        .expect("new name");
    assert!(new.before.is_none());
    assert_eq!(new.after.map(|s| s.called), old.before.map(|s| s.called));
    assert!(w.flipped().next().is_none());
}

/// A replier whose calls never complete.
#[derive(Clone)]
struct Stuck;

impl Replier for Stuck {
    fn reply(&mut self, _: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        futures::future::pending()
    }
}

#[tokio::test]
async fn a_newer_edit_cancels_the_run() {
    let requests = demo_requests();
    let replayer = replayer_for(&demo_text(), &[]);
    let (tx, mut rx) = mpsc::channel(64);
    let stuck = spawn_redispatch(
        1,
        Arc::clone(&requests),
        replayer.clone(),
        Stuck,
        IdMode::Random,
        tx.clone(),
    );
    let done = spawn_redispatch(
        2,
        Arc::clone(&requests),
        replayer,
        DemoReplier,
        IdMode::Sequential,
        tx,
    );
    assert_eq!((stuck.generation(), done.generation()), (1, 2));
    let mut finished = None;
    while finished.is_none() {
        let msg = tokio::time::timeout(Duration::from_secs(120), rx.recv())
            .await
            .expect("the second re-dispatch's messages within 120 s")
            .expect("open");
        if let RedispatchMsg::Finished { generation, result } = msg {
            finished = Some((generation, result));
        }
    }
    let (generation, result) = finished.expect("finished");
    assert_eq!(generation, 2);
    assert_eq!(result.results.len(), requests.len());
    let expected: Vec<String> = requests
        .iter()
        .map(|r| {
            format!(
                "{} {}/{}",
                r.attrs.operation, r.attrs.namespace, r.attrs.name
            )
        })
        .collect();
    assert_eq!(names(&result.results), expected, "input order");
    // The stuck run waits on its first call until cancelled.
    stuck.cancel();
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(120), rx.recv())
            .await
            .expect("the cancelled re-dispatch's messages within 120 s")
            .expect("open");
        if let RedispatchMsg::Cancelled { generation, at } = msg {
            assert_eq!(generation, 1);
            assert_eq!(at.done, 0);
            assert_eq!(at.total, requests.len());
            break;
        }
    }
}

/// A MutatingAdmissionPolicy that labels ConfigMaps with `owner: OWNER`, and a validating
/// webhook over real HTTPS that sees what the policy made.
fn owner_policy_and_webhook(url: &str, ca_pem: &str, owner: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {{name: owner}}
spec:
  matchConstraints:
    resourceRules:
    - {{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{{metadata: Object.metadata{{labels: {{"owner": "{owner}"}}}}}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: owner}}
spec: {{policyName: owner}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: owners}}
webhooks:
- name: owners.edit.test
  clientConfig: {{url: "{url}/owners", caBundle: {ca}}}
  rules:
  - {{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}
  sideEffects: None
  admissionReviewVersions: [v1]
"#
    )
}

#[tokio::test]
async fn a_mutating_policy_edit_changes_what_a_webhook_receives_and_no_stale_reply_is_reused() {
    // The webhook records the owner label of every ConfigMap it receives, and refuses team-b's.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let record = Arc::clone(&seen);
    let owners = Behaviour::custom(move |review| {
        let object: serde_json::Value = review
            .object
            .and_then(|o| serde_json::from_str(o.get()).ok())
            .unwrap_or_default();
        let owner = object["metadata"]["labels"]["owner"]
            .as_str()
            .unwrap_or("(none)")
            .to_string();
        record.lock().unwrap().push(owner.clone());
        if owner == "team-b" {
            hookscope::webhook_server::Answer::deny(403, "team-b owns no ConfigMaps")
        } else {
            hookscope::webhook_server::Answer::allow()
        }
    });
    let pki = Pki::mint(&[]).expect("pki");
    let server = WebhookServer::start(
        &pki,
        Behaviours::new().route("/owners", owners),
        ServerOptions::default(),
    )
    .await
    .expect("server");
    let requests: Arc<[CapturedRequest]> = demo_requests()
        .iter()
        .filter(|r| {
            r.attrs.resource.resource == "configmaps"
                && r.attrs.operation.to_string() == "CREATE"
                && !r.attrs.dry_run
        })
        .cloned()
        .collect();
    assert!(!requests.is_empty());
    let n = requests.len();
    let cache = ReplyCache::default();
    let replier = ReusingReplier::new(HttpsReplier::new(HttpsOptions::default()), cache.clone());
    let text = |owner: &str| owner_policy_and_webhook(&server.url(""), pki.ca_pem(), owner);

    let first_replayer = replayer_for(&text("team-a"), &[]);
    // The policy reads the objects (a replay parses them for it).
    assert!(first_replayer.engine().reads_objects());
    let first = run(&requests, &first_replayer, replier.clone()).await;
    assert!(first.results.iter().all(|r| r.outcome.allowed));
    assert_eq!(*seen.lock().unwrap(), vec!["team-a".to_string(); n]);

    // The policy's edit: the webhook receives the new objects (their content changed, so no
    // reply of the first run answers them) and refuses them.
    let edited = run(
        &requests,
        &replayer_for(&text("team-b"), &[]),
        replier.clone(),
    )
    .await;
    assert_eq!(server.requests_to("/owners"), 2 * n as u64);
    assert_eq!(seen.lock().unwrap()[n..], vec!["team-b".to_string(); n]);
    assert!(edited.results.iter().all(|r| !r.outcome.allowed));
    let whatif = compare(&first.results, &edited.results);
    assert_eq!(whatif.flipped().count(), n);
    for r in &whatif.requests {
        assert!(
            r.object
                .iter()
                .any(|c| c.pointer() == "/metadata/labels/owner"),
            "{:?}",
            r.object
        );
    }
    // Per hook: the policy's binding mutated every request on both sides; the webhook denies
    // after the edit only.
    let delta = |configuration: &str, webhook: &str, phase: WebhookKind| {
        let d = whatif
            .hooks
            .iter()
            .find(|d| d.hook == key(configuration, webhook, phase))
            .unwrap_or_else(|| panic!("{configuration}/{webhook} in {:#?}", whatif.hooks));
        (d.before.unwrap(), d.after.unwrap())
    };
    let (b, a) = delta("owner", "owner", WebhookKind::Mutating);
    assert_eq!((b.matched, b.mutated, a.matched, a.mutated), (n, n, n, n));
    let (b, a) = delta("owners", "owners.edit.test", WebhookKind::Validating);
    assert_eq!((b.denied, a.denied, b.called, a.called), (0, n, n, n));

    // Back to team-a: the objects are those of the first run again, and so are the replies.
    let back = run(&requests, &replayer_for(&text("team-a"), &[]), replier).await;
    assert_eq!(server.requests_to("/owners"), 2 * n as u64, "no call sent");
    assert!(back.results.iter().all(|r| r.outcome.allowed));
    assert_eq!(cache.stats().hits, n as u64);
    server.stop();
}

/// A ValidatingAdmissionPolicy whose expression fails at run time on every ConfigMap, with its
/// failurePolicy and its binding's objectSelector.
fn failing_policy(failure_policy: &str, object_selector: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: cm-check}}
spec:
  failurePolicy: {failure_policy}
  matchConstraints:
    resourceRules:
    - {{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}
  validations:
  - expression: "object.data.nope == 'x'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: cm-check-binding}}
spec:
  policyName: cm-check
  validationActions: [Deny]
  matchResources: {{objectSelector: {object_selector}}}
"#
    )
}

/// A policy's binding is counted with the webhooks' words: an evaluation error fails the
/// request under Fail (`errors`) and lets it go under Ignore (`fail-open`); a binding's selector
/// that leaves a request out is a selector skip; `matched` is the requests evaluated.
#[tokio::test]
async fn what_if_counts_a_policy_binding_as_a_webhook() {
    let requests: Arc<[CapturedRequest]> = demo_requests()
        .iter()
        .filter(|r| r.attrs.resource.resource == "configmaps")
        .cloned()
        .collect();
    let writes = |r: &&CapturedRequest| {
        matches!(r.attrs.operation.to_string().as_str(), "CREATE" | "UPDATE")
    };
    let n = requests.iter().filter(writes).count();
    let shop = (requests.iter())
        .filter(writes)
        .filter(|r| r.attrs.namespace == "shop")
        .count();
    assert!(n > shop && shop > 0, "{n} {shop}");
    let replier = HttpsReplier::new(HttpsOptions::default());
    let before = run(
        &requests,
        &replayer_for(&failing_policy("Fail", "{}"), &[]),
        replier.clone(),
    )
    .await;
    let after = run(
        &requests,
        &replayer_for(
            &failing_policy("Ignore", "{matchLabels: {team: shop-owners}}"),
            &[],
        ),
        replier,
    )
    .await;
    let whatif = compare(&before.results, &after.results);
    assert_eq!(
        whatif.flipped().count(),
        n,
        "every write was refused, and is admitted"
    );
    let d = whatif
        .hooks
        .iter()
        .find(|d| d.hook == key("cm-check", "cm-check-binding", WebhookKind::Validating))
        .unwrap_or_else(|| panic!("{:#?}", whatif.hooks));
    let (b, a) = (d.before.unwrap(), d.after.unwrap());
    assert_eq!(
        (b.matched, b.errored, b.failed_open, b.skipped_selector),
        (n, n, 0, 0)
    );
    assert_eq!(
        (a.matched, a.errored, a.failed_open, a.skipped_selector),
        (shop, 0, shop, n - shop)
    );
    // Deletes are left out by the rules, on both sides.
    let deletes = requests.len() - n;
    assert_eq!((b.skipped_rules, a.skipped_rules), (deletes, deletes));
}

//! The typed round trip after every patch, as kube-apiserver's mutating dispatcher does it:
//! the patched object decoded into the kind's Go type, compared with `Semantic.DeepEqual`,
//! defaulted and encoded again for the next webhook and the final object.

use std::time::Duration;

use hookscope::KubeVersion;
use hookscope::api::WebhookConfiguration;
use hookscope::engine::{
    Attributes, AuditLevel, Engine, EngineOptions, Namespaces, Outcome, Phases, RequestContext,
    SequentialIds,
};
use hookscope::metrics::Metrics;
use hookscope::script::{ScriptedReplier, ScriptedReply};
use serde_json::{Value, json};

/// Two mutating webhooks on pods: `first.example.com` (reinvocationPolicy IfNeeded, in the
/// configuration named first) then `second.example.com` (Never).
const TWO_MUTATING: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: a-first}
webhooks:
- name: first.example.com
  clientConfig: {url: "https://first.example.com/mutate"}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
  reinvocationPolicy: IfNeeded
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: b-second}
webhooks:
- name: second.example.com
  clientConfig: {url: "https://second.example.com/mutate"}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;

fn configurations() -> Vec<WebhookConfiguration> {
    load(TWO_MUTATING)
}

/// The configurations of a YAML text, defaulted.
fn load(yaml: &str) -> Vec<WebhookConfiguration> {
    hookscope::config::parse_documents(yaml, "typed.yaml")
        .into_iter()
        .map(|r| {
            let mut loaded = r.expect("configuration loads");
            loaded.apply_defaults();
            loaded.configuration
        })
        .collect()
}

fn pod() -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{
            "name": "web", "image": "nginx:1.27", "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
        }]},
        "status": {}
    })
}

fn managed_fields(time: &str) -> Value {
    json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": time, "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}])
}

fn request(operation: &str, object: Value, old: Option<Value>) -> Attributes {
    serde_json::from_value(json!({
        "operation": operation,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop", "name": "web-0",
        "object": object, "oldObject": old,
    }))
    .expect("attributes")
}

fn dispatch(
    release: u32,
    attrs: Attributes,
    replies: Vec<(&str, ScriptedReply)>,
) -> (Outcome, ScriptedReplier) {
    dispatch_with(&configurations(), release, attrs, replies)
}

fn dispatch_with(
    configs: &[WebhookConfiguration],
    release: u32,
    attrs: Attributes,
    replies: Vec<(&str, ScriptedReply)>,
) -> (Outcome, ScriptedReplier) {
    let options = EngineOptions::for_version(KubeVersion::new(release).unwrap());
    dispatch_with_options(configs, options, attrs, replies)
}

fn dispatch_with_options(
    configs: &[WebhookConfiguration],
    options: EngineOptions,
    attrs: Attributes,
    replies: Vec<(&str, ScriptedReply)>,
) -> (Outcome, ScriptedReplier) {
    let engine = Engine::new(configs, options);
    let mut replier = ScriptedReplier::new(replies.into_iter().map(|(n, r)| (n.to_string(), r)));
    let (mut ids, mut metrics) = (SequentialIds::default(), Metrics::new());
    let mut ns = Namespaces::default();
    ns.insert("shop", Default::default());
    let ctx = RequestContext {
        namespaces: &ns,
        ids: &mut ids,
        metrics: &mut metrics,
        deadline: Some(Duration::from_secs(60)),
        phases: Phases::All,
    };
    let outcome = engine.dispatch_blocking(attrs, ctx, &mut replier);
    (outcome, replier)
}

/// The object the n-th call received.
fn received(replier: &ScriptedReplier, n: usize) -> Value {
    let review: Value = serde_json::from_slice(&replier.seen[n].body).expect("a review");
    review["request"]["object"].clone()
}

fn mutated(outcome: &Outcome, round: u8, index: usize) -> Option<bool> {
    let key = format!("mutation.webhook.admission.k8s.io/round_{round}_index_{index}");
    let value: Value =
        serde_json::from_str(outcome.annotations_at(AuditLevel::Metadata).get(&key)?).ok()?;
    value["mutated"].as_bool()
}

#[test]
fn a_sidecar_reaches_the_next_webhook_and_the_object_with_the_apiservers_defaults() {
    let sidecar = json!([{"op": "add", "path": "/spec/containers/-",
                          "value": {"name": "proxy", "image": "mesh/proxy:1.2",
                                    "ports": [{"containerPort": 15001}]}}]);
    for release in [28, 33, 37] {
        let (outcome, replier) = dispatch(
            release,
            request("CREATE", pod(), None),
            vec![
                ("first.example.com", ScriptedReply::patch(sidecar.clone())),
                ("second.example.com", ScriptedReply::allow()),
            ],
        );
        assert!(outcome.allowed, "{:?}", outcome.status);
        let expected = json!({
            "name": "proxy", "image": "mesh/proxy:1.2",
            "ports": [{"containerPort": 15001, "protocol": "TCP"}],
            "resources": {},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
        });
        assert_eq!(
            received(&replier, 1)["spec"]["containers"][1],
            expected,
            "1.{release}"
        );
        let object = outcome.object.as_deref().unwrap().value();
        assert_eq!(object["spec"]["containers"][1], expected, "1.{release}");
        // What the second webhook got is Go's encoding: fields in the Go struct's order.
        let body = String::from_utf8_lossy(&replier.seen[1].body).into_owned();
        assert!(
            body.contains(r#"{"name":"proxy","image":"mesh/proxy:1.2","ports":[{"containerPort":15001,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}"#),
            "{body}"
        );
    }
}

#[test]
fn a_map_a_patch_empties_is_absent_for_the_next_webhook() {
    let remove = json!([{"op": "remove", "path": "/metadata/labels/app"}]);
    let (outcome, replier) = dispatch(
        33,
        request("CREATE", pod(), None),
        vec![
            ("first.example.com", ScriptedReply::patch(remove)),
            ("second.example.com", ScriptedReply::allow()),
        ],
    );
    assert!(outcome.allowed);
    let seen = received(&replier, 1);
    assert!(seen["metadata"].get("labels").is_none(), "{seen}");
    assert_eq!(mutated(&outcome, 0, 0), Some(true));
}

#[test]
fn a_field_the_type_does_not_have_is_dropped_and_changes_nothing() {
    let unknown = json!([{"op": "add", "path": "/spec/sidecarMode", "value": "strict"}]);
    let (outcome, replier) = dispatch(
        33,
        request("CREATE", pod(), None),
        vec![
            ("first.example.com", ScriptedReply::allow()),
            ("second.example.com", ScriptedReply::patch(unknown)),
        ],
    );
    assert!(outcome.allowed);
    assert_eq!(replier.seen.len(), 2, "nothing changed: no reinvocation");
    assert_eq!(mutated(&outcome, 0, 1), Some(false));
    let object = outcome.object.as_deref().unwrap().value();
    assert!(object["spec"].get("sidecarMode").is_none());
}

/// The field manager set `managedFields` for this create at nanosecond precision; the first
/// patch's decode truncates the time, so the object changed even though the patch did not
/// change it, and the IfNeeded webhook called before it is reinvoked. A later no-op patch
/// changes nothing.
#[test]
fn the_first_decode_of_a_create_truncates_the_field_managers_time() {
    let mut object = pod();
    object["metadata"]["managedFields"] = managed_fields("2026-11-21T05:36:02Z");
    let no_op = json!([{"op": "test", "path": "/metadata/name", "value": "web-0"}]);
    let (outcome, replier) = dispatch(
        33,
        request("CREATE", object.clone(), None),
        vec![
            ("first.example.com", ScriptedReply::allow()),
            ("second.example.com", ScriptedReply::patch(no_op.clone())),
        ],
    );
    assert_eq!(mutated(&outcome, 0, 1), Some(true));
    assert!(outcome.reinvoked);
    assert_eq!(
        replier.seen.len(),
        3,
        "first.example.com is called again in round 1"
    );

    // Both webhooks patch without changing anything: only the first decode reports a change.
    let (outcome, replier) = dispatch(
        33,
        request("CREATE", object, None),
        vec![
            ("first.example.com", ScriptedReply::patch(no_op.clone())),
            ("second.example.com", ScriptedReply::patch(no_op.clone())),
        ],
    );
    assert_eq!(mutated(&outcome, 0, 0), Some(true));
    assert_eq!(mutated(&outcome, 0, 1), Some(false));
    // The chain runs again, but no webhook changed the object after first.example.com's call.
    assert!(outcome.reinvoked);
    assert_eq!(replier.seen.len(), 2);

    // An update that did not change the object keeps the stored entry: no change.
    let mut stored = pod();
    stored["metadata"]["managedFields"] = managed_fields("2026-11-20T10:00:00Z");
    let (outcome, replier) = dispatch(
        33,
        request("UPDATE", stored.clone(), Some(stored.clone())),
        vec![
            ("first.example.com", ScriptedReply::allow()),
            ("second.example.com", ScriptedReply::patch(no_op.clone())),
        ],
    );
    assert_eq!(mutated(&outcome, 0, 1), Some(false));
    assert_eq!(replier.seen.len(), 2);

    // Without managedFields (a capture that lost them) nothing is truncated.
    let (outcome, _) = dispatch(
        33,
        request("CREATE", pod(), None),
        vec![
            ("first.example.com", ScriptedReply::allow()),
            ("second.example.com", ScriptedReply::patch(no_op)),
        ],
    );
    assert_eq!(mutated(&outcome, 0, 1), Some(false));
}

#[test]
fn a_value_the_go_type_cannot_hold_fails_the_request_as_the_decoder_does() {
    let bad = json!([{"op": "add", "path": "/spec/priority", "value": "high"}]);
    let (outcome, _) = dispatch(
        33,
        request("CREATE", pod(), None),
        vec![
            ("first.example.com", ScriptedReply::patch(bad)),
            ("second.example.com", ScriptedReply::allow()),
        ],
    );
    assert!(!outcome.allowed);
    let status = outcome.status.as_deref().unwrap();
    assert_eq!(status.code, 500);
    assert_eq!(
        status.message,
        "Internal error occurred: json: cannot unmarshal string into Go struct field PodSpec.spec.priority of type int32"
    );
}

#[test]
fn creation_timestamp_null_is_written_until_1_34() {
    let rename = json!([{"op": "add", "path": "/metadata/labels/team", "value": "a"}]);
    for (release, has_null) in [(33, true), (34, false)] {
        let (_, replier) = dispatch(
            release,
            request("CREATE", pod(), None),
            vec![
                ("first.example.com", ScriptedReply::patch(rename.clone())),
                ("second.example.com", ScriptedReply::allow()),
            ],
        );
        let body = String::from_utf8_lossy(&replier.seen[1].body).into_owned();
        assert_eq!(
            body.contains(r#""creationTimestamp":null"#),
            has_null,
            "1.{release}: {body}"
        );
    }
}

/// A captured create's compact text gets the store's `uid` and `creationTimestamp` where Go's
/// encoder writes them, the rest of its bytes as captured; an object given as a value is
/// encoded as Go does.
#[test]
fn validating_webhooks_of_a_create_see_the_stores_uid_and_creation_time() {
    let yaml = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: check}
webhooks:
- name: check.example.com
  clientConfig: {url: "https://check.example.com/validate"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;
    let configs = load(yaml);
    let captured = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"shop","creationTimestamp":null,"labels":{"a":"b"},"managedFields":[{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2026-11-21T05:36:02Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}}}]},"data":{"k":"v"}}"#;
    // As 1.34 writes it (no creationTimestamp at all), and with an empty metadata but for
    // managedFields placed first.
    let without_time = captured.replace(r#""creationTimestamp":null,"#, "");
    for (release, as_text) in [(32, true), (32, false), (34, true)] {
        let mut attrs: Attributes = serde_json::from_value(json!({
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "shop", "name": "cm",
            "object": serde_json::from_str::<Value>(captured).unwrap(),
        }))
        .unwrap();
        if as_text {
            attrs.object = Some(std::sync::Arc::new(
                hookscope::engine::Object::from_checked_json(captured.into()),
            ));
        }
        let (outcome, replier) = dispatch_with(
            &configs,
            release,
            attrs,
            vec![("check.example.com", ScriptedReply::allow())],
        );
        assert!(outcome.allowed);
        let body = String::from_utf8_lossy(&replier.seen[0].body).into_owned();
        let review: Value = serde_json::from_str(&body).unwrap();
        let uid = review["request"]["object"]["metadata"]["uid"]
            .as_str()
            .unwrap();
        assert_eq!(uid.len(), 36);
        let expected = captured.replace(
            r#""namespace":"shop","creationTimestamp":null"#,
            &format!(
                r#""namespace":"shop","uid":"{uid}","creationTimestamp":"2026-11-21T05:36:02Z""#
            ),
        );
        assert!(
            body.contains(&format!(r#""object":{expected},"oldObject":null"#)),
            "1.{release} as text {as_text}: {body}"
        );
    }
    let mut attrs: Attributes = serde_json::from_value(json!({
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "namespace": "shop", "name": "cm",
    }))
    .unwrap();
    attrs.object = Some(std::sync::Arc::new(
        hookscope::engine::Object::from_checked_json(without_time.clone().into()),
    ));
    let (_, replier) = dispatch_with(
        &configs,
        34,
        attrs,
        vec![("check.example.com", ScriptedReply::allow())],
    );
    let body = String::from_utf8_lossy(&replier.seen[0].body).into_owned();
    let review: Value = serde_json::from_str(&body).unwrap();
    let uid = review["request"]["object"]["metadata"]["uid"]
        .as_str()
        .unwrap();
    let expected = without_time.replace(
        r#""namespace":"shop","#,
        &format!(r#""namespace":"shop","uid":"{uid}","creationTimestamp":"2026-11-21T05:36:02Z","#),
    );
    assert!(body.contains(&expected), "{body}");
}

/// After a patch the object is its Go type's encoding; the registry strategy then changes the
/// status, the generation or the spec, and only those members are normalised again. What
/// validating webhooks and the outcome get must be what normalising the whole object gives.
#[test]
fn the_strategy_after_a_patch_leaves_the_whole_object_normalised() {
    let yaml = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: check}
webhooks:
- name: check.example.com
  clientConfig: {url: "https://check.example.com/validate"}
  rules: [{operations: [CREATE, UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;
    let mut configs = configurations();
    configs.extend(load(yaml));
    let label = json!([{"op": "add", "path": "/metadata/labels/injected", "value": "yes"},
                       {"op": "add", "path": "/spec/containers/0/resources",
                        "value": {"limits": {"cpu": "1000m", "memory": "1Gi"}}}]);
    // The old Pod's status has a field the type does not have and a quantity to canonicalise,
    // which the update's strategy copies into the new object.
    let mut old = pod();
    old["status"] = json!({"phase": "Running", "unknown": 1, "podIP": "",
                           "containerStatuses": [{"name": "web", "ready": true,
                                                  "allocatedResources": {"cpu": "1000m"}}]});
    let mut spec_changed = pod();
    spec_changed["spec"]["containers"][0]["image"] = json!("nginx:1.28");
    for (release, create, attrs) in [
        (28, true, request("CREATE", pod(), None)),
        (33, true, request("CREATE", pod(), None)),
        (33, false, request("UPDATE", spec_changed, Some(old))),
    ] {
        let (outcome, replier) = dispatch_with(
            &configs,
            release,
            attrs,
            vec![
                ("first.example.com", ScriptedReply::patch(label.clone())),
                ("second.example.com", ScriptedReply::allow()),
                ("check.example.com", ScriptedReply::allow()),
            ],
        );
        assert!(outcome.allowed, "1.{release}: {:?}", outcome.status);
        let object = outcome.object.as_deref().unwrap().value().clone();
        let schema = hookscope::schema::Schema::for_release(KubeVersion::new(release).unwrap());
        let id = schema.kind("", "v1", "Pod").unwrap();
        let mut whole = object.clone();
        hookscope::schema::codec::normalize_in_place(schema, id, &mut whole).unwrap();
        assert_eq!(object, whole, "1.{release}");
        let validated = received(&replier, replier.seen.len() - 1);
        assert_eq!(validated, whole, "1.{release}");
        if create {
            assert_eq!(
                whole["status"],
                json!({"phase": "Pending", "qosClass": "Guaranteed"})
            );
        } else {
            assert_eq!(whole["status"]["phase"], "Running");
            assert!(whole["status"].get("unknown").is_none());
            assert!(whole["status"].get("podIP").is_none());
            assert_eq!(
                whole["status"]["containerStatuses"][0]["allocatedResources"]["cpu"],
                "1"
            );
        }
    }
}

/// A custom resource whose definition is known is defaulted by its schema after a webhook's
/// patch, as the apiserver's object defaulter does (after the comparison that decides
/// `mutated`): a defaulted field a webhook removes is back for the next webhook and in the
/// object, and a list item it adds gets its defaults. Without the definition the object stays as
/// patched.
#[test]
fn a_custom_resource_is_defaulted_by_its_definitions_schema_after_a_patch() {
    let configs = load(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: gadgets}
webhooks:
- name: first.example.com
  clientConfig: {url: "https://first.example.com/mutate"}
  rules: [{operations: [CREATE], apiGroups: [example.com], apiVersions: [v1], resources: [gadgets]}]
  sideEffects: None
  admissionReviewVersions: [v1]
- name: second.example.com
  clientConfig: {url: "https://second.example.com/mutate"}
  rules: [{operations: [CREATE], apiGroups: [example.com], apiVersions: [v1], resources: [gadgets]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
    );
    let crd = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/custom-apply-v1.33/inputs/crd.yaml"
    ))
    .unwrap();
    // The file's second document is the definition (the first, its namespace).
    let specs =
        hookscope::registry::load_custom_resources(crd.split("\n---\n").nth(1).unwrap()).unwrap();
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": "g", "namespace": "shop"},
        "spec": {"mode": "fast", "size": 1}});
    let attrs = || -> Attributes {
        serde_json::from_value(json!({
            "operation": "CREATE",
            "kind": {"group": "example.com", "version": "v1", "kind": "Gadget"},
            "resource": {"group": "example.com", "version": "v1", "resource": "gadgets"},
            "namespace": "shop", "name": "g", "object": gadget,
        }))
        .unwrap()
    };
    let patch = json!([{"op": "remove", "path": "/spec/mode"},
                       {"op": "add", "path": "/spec/ports", "value": [{"name": "p", "port": 1}]}]);
    let run = |with_crd: bool| {
        let mut options = EngineOptions::for_version(KubeVersion::new(33).unwrap());
        if with_crd {
            for spec in &specs {
                options.registry.add_custom_resource(spec);
            }
        }
        let replies = vec![
            ("first.example.com", ScriptedReply::patch(patch.clone())),
            ("second.example.com", ScriptedReply::allow()),
        ];
        let (outcome, replier) = dispatch_with_options(&configs, options, attrs(), replies);
        assert!(outcome.allowed, "{:?}", outcome.status);
        let object = outcome.object.as_deref().unwrap().value().clone();
        (
            received(&replier, 1)["spec"].clone(),
            object["spec"].clone(),
        )
    };
    let defaulted =
        json!({"mode": "fast", "ports": [{"name": "p", "port": 1, "protocol": "TCP"}], "size": 1});
    assert_eq!(run(true), (defaulted.clone(), defaulted));
    let as_patched = json!({"ports": [{"name": "p", "port": 1}], "size": 1});
    assert_eq!(run(false), (as_patched.clone(), as_patched));
}

/// A patch applies to what the webhook was sent, Go's encoding of the object (upstream patches
/// `runtime.Encode` of its typed object), not to the object as given: a member Go writes that
/// the object lacks is there to patch into (a container's `resources: {}`), and an empty map Go
/// leaves out (`omitempty`) is not.
#[test]
fn a_patch_applies_to_the_object_as_go_encodes_it() {
    let mut object = pod();
    object.as_object_mut().unwrap().remove("status");
    object["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("resources");
    object["metadata"]["labels"] = json!({});
    object["spec"]["hostname"] = json!("");
    let patched = |patch: Value| {
        dispatch(
            33,
            request("CREATE", object.clone(), None),
            vec![("first.example.com", ScriptedReply::patch(patch))],
        )
    };
    let refused = |patch: Value, message: &str| {
        let (outcome, _) = patched(patch);
        assert!(!outcome.allowed);
        let got = outcome.status.expect("a status").message;
        assert!(got.contains(message), "{got}");
    };

    let (outcome, replier) = patched(json!([
        {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"cpu": "1"}},
        {"op": "add", "path": "/status/phase", "value": "Pending"}
    ]));
    let sent = received(&replier, 0);
    assert_eq!(sent["spec"]["containers"][0]["resources"], json!({}));
    assert_eq!(sent["metadata"].get("labels"), None);
    assert!(outcome.allowed, "{:?}", outcome.status);
    let object = outcome.object.expect("an object");
    assert_eq!(
        object["spec"]["containers"][0]["resources"]["limits"],
        json!({"cpu": "1"})
    );

    refused(
        json!([{"op": "add", "path": "/metadata/labels/app", "value": "web"}]),
        r#"add operation does not apply: doc is missing path: "/metadata/labels/app""#,
    );
    refused(
        json!([{"op": "remove", "path": "/spec/hostname"}]),
        "error in remove for path: '/spec/hostname': Unable to remove nonexistent key: hostname",
    );
    // What both have alike is patched as it is given.
    let (outcome, _) = patched(json!([
        {"op": "add", "path": "/spec/containers/0/image", "value": "nginx:1.28"}
    ]));
    assert!(outcome.allowed, "{:?}", outcome.status);
}

/// Each webhook of a chain of patches is sent Go's encoding of the object the patches before it
/// left, byte for byte: the text after a patch copies what the patch left equal from the text
/// before it, at any depth (a container appended, then one changed and the appended one given an
/// env var), and what it copies must be where the next patch's text finds it.
#[test]
fn every_webhook_of_a_chain_of_patches_is_sent_the_whole_encoding() {
    let hooks = ["a", "b", "c", "d"].map(|n| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {{name: {n}}}\nwebhooks:\n- name: {n}.example.com\n  clientConfig: {{url: \"https://{n}.example.com/mutate\"}}\n  rules: [{{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}]\n  sideEffects: None\n  admissionReviewVersions: [v1]\n"
        )
    });
    let configs = load(&hooks.join("---\n"));
    let patch = |ops: Value| ScriptedReply::patch(ops);
    let (outcome, replier) = dispatch_with(
        &configs,
        33,
        request("CREATE", pod(), None),
        vec![
            (
                "a.example.com",
                patch(json!([{"op": "add", "path": "/metadata/labels/injected", "value": "yes"}])),
            ),
            (
                "b.example.com",
                patch(
                    json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "proxy", "image": "mesh/proxy:1"}}]),
                ),
            ),
            (
                "c.example.com",
                patch(json!([
                    {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.28"},
                    {"op": "add", "path": "/spec/containers/1/env", "value": [{"name": "MODE", "value": "mesh"}]}
                ])),
            ),
            ("d.example.com", ScriptedReply::allow()),
        ],
    );
    assert!(outcome.allowed, "{:?}", outcome.status);
    let schema = hookscope::schema::Schema::for_release(KubeVersion::new(33).unwrap());
    let id = schema.kind("", "v1", "Pod").expect("Pod");
    for n in 0..4 {
        let review: Value = serde_json::from_slice(&replier.seen[n].body).expect("a review");
        let object = &review["request"]["object"];
        let body = String::from_utf8_lossy(&replier.seen[n].body).into_owned();
        let whole = hookscope::schema::encode(schema, id, object).expect("encodes");
        assert!(body.contains(&whole), "webhook {n}: {body}");
    }
    let last = received(&replier, 3);
    assert_eq!(last["metadata"]["labels"]["injected"], "yes");
    assert_eq!(last["spec"]["containers"][0]["image"], "nginx:1.28");
    assert_eq!(
        last["spec"]["containers"][1]["env"],
        json!([{"name": "MODE", "value": "mesh"}])
    );
    assert_eq!(
        last["spec"]["containers"][1]["imagePullPolicy"],
        "IfNotPresent"
    );
}

/// An object dispatched again (the console dispatches its requests again after every edit) is
/// patched as Go's encoding of it, which it keeps from its first dispatch, parsed: for an object
/// given otherwise than Go encodes it (no `status`, a container without `resources`, an empty
/// `labels`, an empty `hostname`, not defaulted), every later dispatch sends every webhook the
/// same review and ends as the first, whether its patches apply, fail or change nothing.
#[test]
fn an_object_dispatched_again_is_patched_alike() {
    let mut object = pod();
    object.as_object_mut().unwrap().remove("status");
    let container = object["spec"]["containers"][0].as_object_mut().unwrap();
    container.remove("resources");
    container.remove("imagePullPolicy");
    object["metadata"]["labels"] = json!({});
    object["spec"]["hostname"] = json!("");
    let sidecar = json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "proxy", "image": "mesh/proxy:1"}}]);
    let firsts = [
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}]),
        json!([{"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"cpu": "1"}}]),
        json!([{"op": "add", "path": "/status/phase", "value": "Pending"}]),
        json!([{"op": "add", "path": "/metadata/labels/app", "value": "web"}]),
        json!([{"op": "remove", "path": "/spec/hostname"}]),
        json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.27"}]),
        json!([{"op": "add", "path": "/spec/containers/0/imagePullPolicy", "value": "Always"}]),
    ];
    for first in firsts {
        let attrs = request("CREATE", object.clone(), None);
        let runs: Vec<(Value, Vec<String>)> = (0..3)
            .map(|_| {
                let (outcome, replier) = dispatch(
                    33,
                    attrs.clone(),
                    vec![
                        ("first.example.com", ScriptedReply::patch(first.clone())),
                        ("second.example.com", ScriptedReply::patch(sidecar.clone())),
                    ],
                );
                let sent = replier
                    .seen
                    .iter()
                    .map(|c| String::from_utf8_lossy(&c.body).into_owned())
                    .collect();
                (serde_json::to_value(&outcome).expect("an outcome"), sent)
            })
            .collect();
        for (n, run) in runs.iter().enumerate().skip(1) {
            assert_eq!(run.1, runs[0].1, "{first}: reviews of dispatch {n}");
            assert_eq!(run.0, runs[0].0, "{first}: outcome of dispatch {n}");
        }
    }
}

/// A Pod known to be defaulted (a replay of a manifest decodes and defaults it first) whose
/// patch edits only its metadata is not defaulted again, which would change nothing: every
/// webhook is sent, and the dispatch ends with, what the same Pod not known to be defaulted
/// gives, whether the patches edit its metadata, its spec or both.
#[test]
fn a_pod_known_defaulted_ends_as_one_defaulted_again() {
    let release = KubeVersion::new(33).unwrap();
    let schema = hookscope::schema::Schema::for_release(release);
    let id = schema.kind("", "v1", "Pod").expect("Pod");
    let mut pod = pod();
    pod["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("imagePullPolicy");
    let (mut defaulted, _) = hookscope::schema::codec::normalize(schema, id, &pod).unwrap();
    hookscope::defaulting::default_object("", "v1", "Pod", &mut defaulted, release);
    let (defaulted, _) = hookscope::schema::codec::normalize(schema, id, &defaulted).unwrap();
    let label = json!([{"op": "add", "path": "/metadata/labels/injected", "value": "yes"}]);
    let sidecar = json!([{"op": "add", "path": "/spec/containers/-", "value": {"name": "proxy", "image": "mesh/proxy:1"}}]);
    let both = json!([
        {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
        {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:1.28"}
    ]);
    for (first, second) in [
        (&label, &label),
        (&label, &sidecar),
        (&sidecar, &label),
        (&both, &label),
    ] {
        let run = |known: bool| {
            let mut attrs = request("CREATE", defaulted.clone(), None);
            if known {
                let object = attrs.object.take().expect("an object");
                attrs.object = Some(std::sync::Arc::new(
                    std::sync::Arc::unwrap_or_clone(object).known_defaulted(),
                ));
            }
            let (outcome, replier) = dispatch(
                33,
                attrs,
                vec![
                    ("first.example.com", ScriptedReply::patch(first.clone())),
                    ("second.example.com", ScriptedReply::patch(second.clone())),
                ],
            );
            let sent: Vec<String> = replier
                .seen
                .iter()
                .map(|c| String::from_utf8_lossy(&c.body).into_owned())
                .collect();
            (serde_json::to_value(&outcome).expect("an outcome"), sent)
        };
        let (known, unknown) = (run(true), run(false));
        assert_eq!(known.1, unknown.1, "{first} then {second}: reviews");
        assert_eq!(known.0, unknown.0, "{first} then {second}: outcome");
        assert!(known.1.len() >= 2, "{first} then {second}: {:?}", known.1);
    }
}

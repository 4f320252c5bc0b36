//! Unit-level upstream tables, run against the engine's public functions.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use hookscope::api::{GroupVersionKind, GroupVersionResource, Operation, Status, WebhookKind};
use hookscope::config::{apply_defaults, parse_documents, validate};
use hookscope::engine::matching::{
    Decision, Invocation, SkipReason, exact_or_wildcard, resource_matches, scope_matches,
};
use hookscope::engine::review::{build_review, interpret_reply, negotiate_version};
use hookscope::engine::status::to_status_err;
use hookscope::engine::{
    Attributes, Engine, EngineOptions, Namespaces, Phases, ReplyOutcome, RequestContext,
    SequentialIds, mutation_annotation_value, patch_annotation_value,
};
use hookscope::metrics::Metrics;
use hookscope::registry::ResourceRegistry;
use hookscope::script::ScriptedReplier;
use serde_json::{Value, json};

use super::{Check, Report, ServerRef, cases, configuration, gvk, gvr, operation, s, user};

/// A CEL expression that fails at evaluation time. Upstream's unit tables use a fake evaluator
/// whose errors read `test error`; a real engine can only produce a real CEL error, so error
/// cases assert the Forbidden shape and `resulted in error` instead of that literal text.
const ERRORING_EXPRESSION: &str = "object.nonExistentProperty == 'someval'";

fn attrs(
    operation: Operation,
    resource: GroupVersionResource,
    sub: &str,
    ns: &str,
    name: &str,
) -> Attributes {
    Attributes {
        operation,
        kind: GroupVersionKind::default().into(),
        resource: resource.into(),
        sub_resource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        object: None,
        old_object: None,
        dry_run: false,
        options: None,
        user_info: Default::default(),
    }
}

fn engine_for(webhook: hookscope::api::Webhook, options: EngineOptions) -> Engine {
    Engine::new(
        &[configuration(WebhookKind::Validating, "cfg", vec![webhook])],
        options,
    )
}

fn decide(engine: &Engine, a: &Attributes, namespaces: &Namespaces) -> Decision {
    engine.should_call_hook(&engine.validating_hooks()[0], a, namespaces)
}

fn everything_webhook() -> hookscope::api::Webhook {
    super::webhook(
        &json!({
            "name": "w.example.com",
            "namespaceSelector": {},
            "objectSelector": {},
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}],
        }),
        &ServerRef::default(),
    )
}

pub fn rules() -> Report {
    let mut report = Report::new("rules");
    for case in cases("rules") {
        let mut c = Check::default();
        let rule = super::rule(&case["webhooks"][0]["rules"][0]);
        let predicate = case["input"]["checkedPredicate"]
            .as_str()
            .unwrap_or_default();
        for (list, want) in [("match", true), ("noMatch", false)] {
            for a in case["expect"][list].as_array().into_iter().flatten() {
                let at = attrs(
                    operation(&a["operation"]),
                    GroupVersionResource::new(
                        &s(&a["group"]),
                        &s(&a["version"]),
                        &s(&a["resource"]),
                    ),
                    &s(&a["subresource"]),
                    &s(&a["namespace"]),
                    &s(&a["name"]),
                );
                let got = match predicate {
                    "group" => exact_or_wildcard(rule.api_groups.as_deref(), &at.resource.group),
                    "version" => {
                        exact_or_wildcard(rule.api_versions.as_deref(), &at.resource.version)
                    }
                    "operation" => {
                        exact_or_wildcard(rule.operations.as_deref(), at.operation.as_str())
                    }
                    "resource" => resource_matches(
                        rule.resources.as_deref(),
                        &at.resource.resource,
                        &at.sub_resource,
                    ),
                    "scope" => scope_matches(rule.scope.as_deref(), &at, &at.resource),
                    other => panic!("unknown predicate {other}"),
                };
                c.eq(&format!("{predicate} {a}"), got, want);
            }
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn namespace_selector() -> Report {
    let mut report = Report::new("namespace-selector");
    for case in cases("namespace-selector") {
        let mut c = Check::default();
        let req = &case["request"];
        let mut namespaces = Namespaces::default();
        for (name, l) in case["input"]["namespaceLister"]
            .as_object()
            .into_iter()
            .flatten()
        {
            namespaces.insert(name, super::labels(l));
        }
        let resource = if req["resource"].is_object() {
            gvr(&req["resource"])
        } else {
            GroupVersionResource::new("", "v1", &s(&req["resource"]))
        };
        let mut a = attrs(
            operation(&req["operation"]),
            resource,
            &s(&req["subresource"]),
            &s(&req["namespace"]),
            &s(&req["name"]),
        );
        if let Some(o) = req["object"].as_object() {
            a.object = Some(Arc::new(
                json!({
                    "apiVersion": "v1",
                    "kind": o["kind"],
                    "metadata": {"name": o["name"], "labels": o["labels"]},
                })
                .into(),
            ));
        }
        if let Some(want) = case["expect"]["namespaceLabels"].as_object() {
            // GetNamespaceLabels is observed through ShouldCallHook: a selector requiring exactly
            // the expected labels selects the request, and one requiring anything else does not.
            let expected: BTreeMap<String, String> = super::labels(&Value::Object(want.clone()));
            let mut hook = everything_webhook();
            hook.namespace_selector = Some(hookscope::api::LabelSelector {
                match_labels: Some(expected.clone()),
                match_expressions: None,
            });
            let d = decide(
                &engine_for(hook.clone(), EngineOptions::default()),
                &a,
                &namespaces,
            );
            c.ok(matches!(d, Decision::Call(_)), || {
                format!("selector {expected:?} should select: {d:?}")
            });
            let other: BTreeMap<String, String> = expected
                .keys()
                .map(|k| (k.clone(), "something-else".into()))
                .collect();
            hook.namespace_selector = Some(hookscope::api::LabelSelector {
                match_labels: Some(other.clone()),
                match_expressions: None,
            });
            let d = decide(&engine_for(hook, EngineOptions::default()), &a, &namespaces);
            c.ok(
                matches!(d, Decision::Skip(SkipReason::NamespaceSelector)),
                || format!("selector {other:?} should not select: {d:?}"),
            );
        }
        if let Some(want) = case["expect"]["matches"].as_bool() {
            let mut hook = everything_webhook();
            hook.namespace_selector = super::selector(&case["webhooks"][0]["namespaceSelector"]);
            let d = decide(&engine_for(hook, EngineOptions::default()), &a, &namespaces);
            c.eq("matches", matches!(d, Decision::Call(_)), want);
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn object_selector() -> Report {
    let mut report = Report::new("object-selector");
    for case in cases("object-selector") {
        let mut c = Check::default();
        let req = &case["request"];
        let object = |v: &Value| -> Option<Value> {
            if v.is_null() {
                None
            } else if v["noMetadata"] == true {
                Some(json!({"kind": v["kind"], "apiVersion": "v1"}))
            } else {
                Some(json!({"metadata": {"labels": v["labels"]}}))
            }
        };
        let mut a = attrs(
            operation(&req["operation"]),
            GroupVersionResource::new("g", "v", "r"),
            "",
            &s(&req["namespace"]),
            &s(&req["name"]),
        );
        a.object = object(&req["object"]).map(|o| Arc::new(o.into()));
        a.old_object = object(&req["oldObject"]).map(|o| Arc::new(o.into()));
        let hook = super::webhook(&case["webhooks"][0], &ServerRef::default());
        let d = decide(
            &engine_for(hook, EngineOptions::default()),
            &a,
            &Namespaces::default(),
        );
        let want = case["expect"]["matches"].as_bool().expect("matches");
        c.eq("matches", matches!(d, Decision::Call(_)), want);
        if !want {
            c.ok(
                matches!(d, Decision::Skip(SkipReason::ObjectSelector)),
                || format!("expected an objectSelector skip, got {d:?}"),
            );
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

/// `"apps/v1 deployments"` / `"autoscaling/v1 Scale"` as written in the should-call-hook tables.
fn split_gv(text: &str) -> (String, String, String) {
    let (gv, name) = text.split_once(' ').expect("gv and name");
    let (g, v) = gv.split_once('/').unwrap_or(("", gv));
    (g.into(), v.into(), name.into())
}

fn should_call_hook_registry(case: &Value) -> ResourceRegistry {
    let mut registry = ResourceRegistry::empty();
    for reg in case["input"]["equivalentResourceMapper"]["registrations_in_order"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (g, v, r) = split_gv(reg[0].as_str().unwrap_or_default());
        let kind = match reg[2].as_str().unwrap_or_default() {
            "(empty kind)" => GroupVersionKind::default(),
            k => {
                let (kg, kv, kk) = split_gv(k);
                GroupVersionKind::new(&kg, &kv, &kk)
            }
        };
        // Upstream's test keys every `deployments` resource, whatever its group, together.
        let key = if r == "deployments" {
            "/deployments"
        } else {
            ""
        };
        registry.register(
            GroupVersionResource::new(&g, &v, &r),
            reg[1].as_str().unwrap_or_default(),
            kind,
            true,
            key,
        );
    }
    registry
}

fn fake_matcher_conditions(fake: &Value) -> Vec<Value> {
    let expression = if !fake["error"].is_null() {
        ERRORING_EXPRESSION
    } else if fake["matches"] == true {
        "true"
    } else {
        "false"
    };
    vec![json!({"name": "test1", "expression": expression})]
}

pub fn should_call_hook() -> Report {
    let mut report = Report::new("should-call-hook");
    for case in cases("should-call-hook") {
        let mut c = Check::default();
        let req = &case["request"];
        let mut w = case["webhooks"][0].clone();
        if w["matchConditions"].is_array() {
            // Upstream swaps in a fake matcher; the same verdicts come from real CEL here.
            w["matchConditions"] =
                Value::Array(fake_matcher_conditions(&case["input"]["fakeMatcher"]));
        }
        let hook = super::webhook(&w, &ServerRef::default());
        let options = EngineOptions {
            registry: should_call_hook_registry(case),
            ..EngineOptions::default()
        };
        let engine = engine_for(hook, options);
        let mut a = attrs(
            operation(&req["operation"]),
            gvr(&req["resource"]),
            &s(&req["subresource"]),
            &s(&req["namespace"]),
            &s(&req["name"]),
        );
        a.kind = gvk(&req["kind"]).into();
        let d = decide(&engine, &a, &Namespaces::default());
        let e = &case["expect"];
        c.eq(
            "call",
            matches!(d, Decision::Call(_)),
            e["call"].as_bool().unwrap_or(false),
        );
        if let Some(inv) = e["invocation"].as_object()
            && let Decision::Call(Invocation {
                resource,
                sub_resource,
                kind,
                ..
            }) = &d
        {
            let (g, v, r) = split_gv(&s(&inv["resource"]));
            c.eq(
                "invocation resource",
                resource.clone(),
                GroupVersionResource::new(&g, &v, &r).into(),
            );
            c.eq(
                "invocation subresource",
                sub_resource.clone(),
                s(&inv["subresource"]),
            );
            let (g, v, k) = split_gv(&s(&inv["kind"]));
            c.eq(
                "invocation kind",
                kind.clone(),
                GroupVersionKind::new(&g, &v, &k).into(),
            );
        }
        if let Some(needle) = e["errorContains"].as_str() {
            match &d {
                Decision::Fail(status) => {
                    if case["input"]["fakeMatcher"]["error"].is_null() {
                        c.contains("error", &status.message, needle);
                    } else {
                        let prefix = needle.trim_end_matches("test error");
                        c.contains("error", &status.message, prefix);
                        c.contains("error", &status.message, "resulted in error");
                    }
                    if let Some(m) = e["derived"]["errorMessage"].as_str() {
                        c.eq("error message", status.message.as_str(), m);
                    }
                    if let Some(code) = e["derived"]["statusCode"].as_i64() {
                        c.eq("status code", i64::from(status.code), code);
                    }
                }
                other => c.ok(false, || format!("expected a failure, got {other:?}")),
            }
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn match_conditions_unit() -> Report {
    let mut report = Report::new("match-conditions-unit");
    for case in cases("match-conditions-unit") {
        let mut c = Check::default();
        // The fake evaluator's per-condition results become real CEL expressions. An evaluator
        // that fails as a whole (`evaluatorReturnsError`) is modelled by an erroring condition:
        // both end in the failure policy's verdict, which is what this table asserts.
        let mut conditions: Vec<Value> = case["input"]["evaluations"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let expression = match &e["result"] {
                    Value::Bool(true) => "true",
                    Value::Bool(false) => "false",
                    _ => ERRORING_EXPRESSION,
                };
                json!({"name": e["name"], "expression": expression})
            })
            .collect();
        if case["input"]["evaluatorReturnsError"] == true {
            conditions.push(json!({"name": "evaluator", "expression": ERRORING_EXPRESSION}));
        }
        let mut w = everything_webhook();
        w.name = s(&case["webhooks"][0]["name"]);
        w.failure_policy = case["webhooks"][0]["failurePolicy"]
            .as_str()
            .map(String::from);
        w.match_conditions = Some(
            conditions
                .iter()
                .map(|c| hookscope::api::MatchCondition {
                    name: s(&c["name"]),
                    expression: s(&c["expression"]),
                })
                .collect(),
        );
        let engine = engine_for(w, EngineOptions::default());
        let req = &case["request"];
        let mut a = attrs(
            operation(&req["operation"]),
            GroupVersionResource::new("", "v1", "pods"),
            "",
            &s(&req["namespace"]),
            &s(&req["name"]),
        );
        a.object = Some(Arc::new(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": a.name, "namespace": a.namespace}}).into(),
        ));
        let mut namespaces = Namespaces::default();
        namespaces.insert(&a.namespace.clone(), BTreeMap::new());
        let d = decide(&engine, &a, &namespaces);
        let e = &case["expect"];
        if e["errorContains"].is_string() {
            match &d {
                Decision::Fail(status) => {
                    c.eq("code", status.code, 403);
                    c.contains("error", &status.message, "pods \"foo\" is forbidden: ");
                    c.contains("error", &status.message, "resulted in error");
                }
                other => c.ok(false, || {
                    format!("expected a Forbidden failure, got {other:?}")
                }),
            }
        } else {
            let want = e["matches"].as_bool().expect("matches");
            c.eq("matches", matches!(d, Decision::Call(_)), want);
            let failed = s(&e["failedConditionName"]);
            if !want {
                match (&d, failed.is_empty()) {
                    (Decision::Skip(SkipReason::MatchConditionFalse { name }), _) => {
                        c.eq("failed condition", name.as_str(), failed.as_str())
                    }
                    (Decision::Skip(SkipReason::MatchConditionErrorIgnored { .. }), true) => {}
                    (other, _) => c.ok(false, || {
                        format!("expected a matchCondition skip, got {other:?}")
                    }),
                }
            }
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn verify_admission_response() -> Report {
    let mut report = Report::new("verify-admission-response");
    for case in cases("verify-admission-response") {
        let mut c = Check::default();
        let uid = s(&case["request"]["uid"]);
        let version = s(&case["request"]["admissionReviewVersion"]);
        let mutating = case["input"]["mutating"] == true;
        let mut review = case["input"]["review"].clone();
        if let Some(p) = review["response"]["patch"].as_str() {
            review["response"]["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(p.as_bytes()));
        }
        let outcome = ReplyOutcome::Http {
            status: 200,
            content_type: Some("application/json".into()),
            body: serde_json::to_vec(&review).expect("review"),
        };
        let got = interpret_reply(
            &outcome,
            "https://webhook.example.com/",
            &uid,
            &version,
            mutating,
            hookscope::KubeVersion::NEWEST,
        );
        let e = &case["expect"];
        let decoded_version = review["apiVersion"].as_str().unwrap_or_default();
        let decoded_kind = review["kind"].as_str().unwrap_or_default();
        let sent = format!("admission.k8s.io/{version}");
        let refused = (!decoded_version.is_empty() && decoded_version != sent)
            || (!decoded_kind.is_empty() && decoded_kind != "AdmissionReview");
        match (&got, e["errorContains"].as_str()) {
            (Err(err), _) if refused => {
                // Upstream's table verifies an already-decoded object; through the engine the
                // body first goes through client-go's decoding, which knows only the
                // AdmissionReview of v1 and v1beta1 of admission.k8s.io and converts neither
                // into the other, so this reply is a decoding (calling) error.
                c.contains("error", &err.reason, "failed to call webhook: ");
                c.eq("metrics code", err.status.code, 503);
                println!(
                    "DECODED FIRST {}: {}",
                    case["id"].as_str().unwrap_or_default(),
                    err.reason
                );
            }
            (Err(err), Some(needle)) => {
                c.contains("error", &err.reason, needle);
                c.contains("error", &err.reason, "received invalid webhook response: ");
                c.eq("metrics code", err.status.code, 503);
            }
            (Ok(v), None) => {
                c.eq(
                    "allowed",
                    v.allowed,
                    e["allowed"].as_bool().unwrap_or(false),
                );
                if let Some(obj) = e.as_object() {
                    if obj.contains_key("patch") {
                        let want = e["patch"].as_str().map(|p| p.as_bytes().to_vec());
                        c.eq("patch", v.patch.clone(), want);
                    }
                    if obj.contains_key("patchType") {
                        let want = s(&e["patchType"]);
                        c.eq("patchType", v.patch_type.clone().unwrap_or_default(), want);
                    }
                }
            }
            (got, want) => c.ok(false, || format!("got {got:?}, want error {want:?}")),
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn create_admission_objects() -> Report {
    let mut report = Report::new("create-admission-objects");
    for case in cases("create-admission-objects") {
        let mut c = Check::default();
        let w = &case["webhooks"][0];
        let versions: Option<Vec<String>> = w["admissionReviewVersions"]
            .as_array()
            .map(|a| a.iter().map(s).collect());
        let req = &case["request"];
        let inv_v = &case["input"]["invocation"];
        let invocation = Invocation {
            resource: gvr(&inv_v["resource"]).into(),
            sub_resource: s(&inv_v["subresource"]),
            kind: gvk(&inv_v["kind"]).into(),
            rule: 0,
            equivalent: true,
        };
        let mut a = attrs(
            operation(&req["operation"]),
            gvr(&req["requestResource"]),
            "",
            &s(&req["namespace"]),
            &s(&req["name"]),
        );
        a.kind = gvk(&req["requestKind"]).into();
        a.options = Some(req["options"].clone().into());
        a.user_info = user(&req["userInfo"]).into();
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"resourceVersion": req["objectResourceVersion"]}});
        let old = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"resourceVersion": req["oldObjectResourceVersion"]}});
        a.object = Some(Arc::new(object.clone().into()));
        a.old_object = Some(Arc::new(old.clone().into()));
        let e = &case["expect"];
        match (
            negotiate_version(versions.as_deref()),
            e["errorContains"].as_str(),
        ) {
            (None, Some(needle)) => {
                // The error text comes from the dispatcher; run one call through the engine.
                let mut hook = everything_webhook();
                hook.name = "mywebhook.example.com".into();
                hook.admission_review_versions = versions.clone();
                let engine = Engine::new(
                    &[configuration(WebhookKind::Mutating, "mycfg", vec![hook])],
                    EngineOptions::default(),
                );
                let mut metrics = Metrics::new();
                let mut ids = SequentialIds::default();
                let mut namespaces = Namespaces::default();
                namespaces.insert("myns", BTreeMap::new());
                let ctx = RequestContext {
                    namespaces: &namespaces,
                    ids: &mut ids,
                    metrics: &mut metrics,
                    deadline: None,
                    phases: Phases::MutatingOnly,
                };
                let out = engine.dispatch_blocking(a.clone(), ctx, &mut ScriptedReplier::default());
                let message = out.status.map(|s| s.message).unwrap_or_default();
                c.contains("error", &message, needle);
                c.contains("error", &message, "could not create admission objects: ");
            }
            (Some(version), None) => {
                let review = build_review(
                    &a,
                    &invocation,
                    object,
                    old,
                    "00000000-0000-4000-8000-000000000001",
                    version,
                );
                let v = serde_json::to_value(&review).expect("review");
                c.eq(
                    "apiVersion",
                    s(&v["apiVersion"]),
                    s(&e["requestApiVersion"]),
                );
                c.eq("kind", s(&v["kind"]), "AdmissionReview".into());
                c.ok(!s(&v["request"]["uid"]).is_empty(), || {
                    "uid is empty".into()
                });
                for (k, want) in e["request"].as_object().into_iter().flatten() {
                    let got = v["request"].get(k).cloned().unwrap_or(Value::Null);
                    let same = got == *want || (got.is_null() && want.as_str() == Some(""));
                    c.ok(same, || format!("request.{k}: got {got}, want {want}"));
                }
            }
            (got, want) => c.ok(false, || {
                format!("negotiated {got:?}, expected error {want:?}")
            }),
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn to_status_err_cases() -> Report {
    let mut report = Report::new("to-status-err");
    for case in cases("to-status-err") {
        let mut c = Check::default();
        let result: Option<Status> = super::status(&case["input"]["responseStatus"]);
        let got = to_status_err(&s(&case["input"]["webhookName"]), result.as_ref());
        let e = &case["expect"];
        c.eq(
            "message",
            got.message.as_str(),
            e["errorMessage"].as_str().unwrap_or_default(),
        );
        c.eq(
            "code",
            i64::from(got.code),
            e["code"].as_i64().unwrap_or_default(),
        );
        c.eq(
            "status",
            got.status.as_str(),
            e["status"].as_str().unwrap_or_default(),
        );
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn annotation_format() -> Report {
    let mut report = Report::new("annotation-format");
    for case in cases("annotation-format") {
        let mut c = Check::default();
        let i = &case["input"];
        let want = s(&case["expect"]["value"]);
        let got = match i["patch"].as_str() {
            None => mutation_annotation_value(
                &s(&i["configuration"]),
                &s(&i["webhook"]),
                i["mutated"] == true,
            ),
            Some(p) => match hookscope::jsonpatch::decode(p.as_bytes()) {
                Ok(patch) => patch_annotation_value(
                    &s(&i["configuration"]),
                    &s(&i["webhook"]),
                    &patch.to_go_json(),
                ),
                Err(e) => format!("decode error: {e}"),
            },
        };
        c.eq("value", got, want);
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

pub fn webhook_source_order() -> Report {
    let mut report = Report::new("webhook-source-order");
    for case in cases("webhook-source-order") {
        let mut c = Check::default();
        let statics: Vec<String> = case["input"]["staticSourceUIDs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        let apis: Vec<String> = case["input"]["apiSourceUIDs"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        // The engine has no static (manifest) webhook source: every configuration it is given is
        // an API one. Cases with static webhooks cannot be expressed and are reported.
        let configs: Vec<_> = apis
            .iter()
            .map(|uid| {
                let mut w = everything_webhook();
                w.name = format!("{uid}.example.com");
                configuration(WebhookKind::Validating, uid, vec![w])
            })
            .collect();
        let engine = Engine::new(&configs, EngineOptions::default());
        let got: Vec<String> = engine
            .validating_hooks()
            .iter()
            .map(|h| h.configuration.clone())
            .collect();
        let want: Vec<String> = case["expect"]["webhookUIDsInOrder"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        if statics.is_empty() {
            c.eq("order", got, want);
        } else {
            c.eq("API webhooks in order", got, apis);
            println!(
                "NOT EXPRESSIBLE {}: the engine has no static manifest webhook source; upstream order {want:?}",
                case["id"].as_str().unwrap_or_default()
            );
        }
        report.record(case["id"].as_str().unwrap_or_default(), c);
    }
    report
}

/// `configuration-validation` (`TestMatchConditions_validation`): each configuration is created
/// (dry run) as a Validating- and as a MutatingWebhookConfiguration; the API server defaults and
/// validates it, and an invalid one fails with 422 Invalid on its `matchConditions`.
pub fn configuration_validation() -> Report {
    let mut report = Report::new("configuration-validation");
    for case in cases("configuration-validation") {
        for kind in [
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ] {
            let doc = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": case["configurationName"]},
                "webhooks": case["webhooks"],
            });
            let mut c = Check::default();
            let mut docs = parse_documents(&doc.to_string(), "case.json");
            match docs.pop() {
                Some(Ok(loaded)) if docs.is_empty() => {
                    let mut cfg = loaded.configuration;
                    apply_defaults(&mut cfg);
                    let errs = validate(&cfg, None);
                    let invalid = case["expect"]["invalid"] == true;
                    c.ok(errs.is_empty() != invalid, || {
                        format!("invalid: want {invalid}, errors {errs:?}")
                    });
                    c.ok(
                        errs.iter()
                            .all(|e| e.field.starts_with("webhooks[0].matchConditions")),
                        || format!("errors outside matchConditions: {errs:?}"),
                    );
                }
                other => c.ok(false, || format!("did not load: {other:?} {docs:?}")),
            }
            report.record(
                &format!("{} [{kind}]", case["id"].as_str().unwrap_or_default()),
                c,
            );
        }
    }
    report
}

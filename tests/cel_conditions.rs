//! matchConditions CEL: compilation (validation texts), evaluation, authorizer, cost.

use hookscope::api::UserInfo;
use hookscope::cel::{
    Activation, Authorizer, AuthzRule, COST_BUDGET_EXHAUSTED, MATCH_CONDITIONS_COST_BUDGET,
    PER_CALL_LIMIT_EXCEEDED, compile, evaluate, evaluate_with_cost, evaluation_cost_exceeded,
};
use serde_json::{Value, json};

fn pod(name: &str, namespace: &str, labels: Option<Value>) -> Value {
    let mut metadata = json!({"name": name, "namespace": namespace});
    if let Some(l) = labels {
        metadata["labels"] = l;
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn request(operation: &str, namespace: &str, name: &str, username: &str) -> Value {
    json!({
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "",
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "requestSubResource": "",
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": username, "uid": "u-1", "groups": ["system:authenticated", "devs"], "extra": {"scopes": ["a"]}},
        "dryRun": false,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    })
}

struct Case {
    object: Value,
    old_object: Value,
    request: Value,
    authorizer: Authorizer,
    user: UserInfo,
}

impl Case {
    fn create(object: Value) -> Self {
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Case {
            request: request("CREATE", &ns, &name, "alice"),
            object,
            old_object: Value::Null,
            authorizer: Authorizer::allow_all(),
            user: UserInfo {
                username: "alice".into(),
                ..UserInfo::default()
            },
        }
    }

    fn delete(old_object: Value) -> Self {
        let mut c = Case::create(old_object);
        c.request["operation"] = json!("DELETE");
        c.old_object = std::mem::take(&mut c.object);
        c
    }

    fn eval(&self, expr: &str) -> Result<bool, String> {
        let program = compile(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        evaluate(&program, &self.activation())
    }

    fn activation(&self) -> Activation<'_> {
        Activation {
            object: &self.object,
            old_object: &self.old_object,
            request: &self.request,
            authorizer: &self.authorizer,
            user: &self.user,
        }
    }
}

fn compile_err(expr: &str) -> String {
    match compile(expr) {
        Ok(_) => panic!("{expr} compiled"),
        Err(e) => e.0,
    }
}

#[test]
fn syntax_errors_render_like_cel_go() {
    let err = compile_err("object.metadata.name ==");
    assert!(
        err.starts_with("compilation failed: ERROR: <input>:1:"),
        "{err}"
    );
    assert!(err.contains("\n | object.metadata.name ==\n | "), "{err}");
    assert!(compile_err("").starts_with("compilation failed: "));
    assert!(compile_err("((true)").starts_with("compilation failed: "));
}

#[test]
fn undeclared_references_are_rejected() {
    // upstream case "invalid field should error"
    assert_eq!(
        compile_err("imnotafield == null"),
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'imnotafield' (in container '')\n | imnotafield == null\n | ^"
    );
    for expr in ["params.x == 1", "variables.foo", "size(object) > 0 && nope"] {
        assert!(
            compile_err(expr).contains("undeclared reference to"),
            "{expr}"
        );
    }
    assert!(compile_err("object.x.frobnicate()").contains("undeclared reference to 'frobnicate'"));
    assert!(compile_err("request.nope == 'x'").contains("undefined field 'nope'"));
    assert!(compile_err("request.userInfo.nope == 'x'").contains("undefined field 'nope'"));
    assert!(compile_err("Foo{a: 1} == null").contains("undeclared reference to 'Foo'"));
}

#[test]
fn non_bool_results_are_rejected() {
    assert_eq!(compile_err("'abc'"), "must evaluate to bool but got string");
    assert_eq!(compile_err("1"), "must evaluate to bool but got int");
    assert_eq!(compile_err("1 + 2"), "must evaluate to bool but got int");
    assert_eq!(
        compile_err("object.metadata.name"),
        "must evaluate to bool but got dyn"
    );
    assert_eq!(
        compile_err("request.userInfo.groups"),
        "must evaluate to bool but got list(string)"
    );
    assert_eq!(
        compile_err("null"),
        "must evaluate to bool but got null_type"
    );
    assert_eq!(
        compile_err("object.items.map(i, i.name)"),
        "must evaluate to bool but got list(dyn)"
    );
    for ok in [
        "true",
        "request.dryRun",
        "object.items.all(i, i.enabled == true)",
        "has(object.metadata.labels)",
        "request.userInfo.username.startsWith('system:')",
        "[1, 2].exists_one(x, x == 1)",
        "object.x == 1 ? true : false",
        "sets.contains([1, 2], [1])",
        "!authorizer.group('admissionregistration.k8s.io').resource('validatingwebhookconfigurations').name('my-webhook.example.com').check('breakglass').allowed()",
    ] {
        compile(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

/// cel-go's checker on operators, field selection and comprehension ranges, where the operands'
/// types are known (upstream's own cases: admission/plugin/cel compile_test.go `1 < 'asdf'`,
/// admissionregistration validation_test.go `114 + '514'`).
#[test]
fn operators_selections_and_ranges_are_type_checked_as_cel_go_checks_them() {
    assert_eq!(
        compile_err("1 < 'asdf'"),
        "compilation failed: ERROR: <input>:1:3: found no matching overload for '_<_' applied to '(int, string)'\n | 1 < 'asdf'\n | ..^"
    );
    assert_eq!(
        compile_err("114 + '514' == 1"),
        "compilation failed: ERROR: <input>:1:5: found no matching overload for '_+_' applied to '(int, string)'\n | 114 + '514' == 1\n | ....^"
    );
    for (expr, message) in [
        (
            "!1",
            "found no matching overload for '!_' applied to '(int)'",
        ),
        (
            "-'a' == 'b'",
            "found no matching overload for '-_' applied to '(string)'",
        ),
        (
            "true && 1 == 1 && 2",
            "found no matching overload for '_&&_' applied to '(bool, int)'",
        ),
        (
            "request.name - 'x' == ''",
            "found no matching overload for '_-_' applied to '(string, string)'",
        ),
        (
            "size(object) % 2.0 == 0.0",
            "found no matching overload for '_%_' applied to '(int, double)'",
        ),
        (
            "request.dryRun <= 1",
            "found no matching overload for '_<=_' applied to '(bool, int)'",
        ),
        (
            "'a'.foo == 1",
            "type 'string' does not support field selection",
        ),
        (
            "request.userInfo.groups.first == 'x'",
            "type 'list(string)' does not support field selection",
        ),
        (
            "has(request.name.x)",
            "type 'string' does not support field selection",
        ),
        (
            "1.all(x, x > 0)",
            "expression of type 'int' cannot be range of a comprehension (must be list, map, or dynamic)",
        ),
    ] {
        let err = compile_err(expr);
        assert!(err.contains(message), "{expr}: {err}");
    }
    // The caret is at the failing operator, not inside a longer one (`<=`).
    assert!(
        compile_err("1 <= 2 && 1 < 'a'").contains(":1:13: found no matching overload for '_<_'"),
        "{}",
        compile_err("1 <= 2 && 1 < 'a'")
    );
    // What cel-go accepts is accepted: the cross-type numeric comparisons Kubernetes enables,
    // timestamps and their differences, lists, dynamic operands.
    for ok in [
        "1 < 2.0 && 1u < 2 && 2.5 >= 1u",
        "'a' < 'b' && b'a' < b'b' && false < true",
        "[1] + [2] == [1, 2]",
        "timestamp('2020-01-01T00:00:00Z') - timestamp('2019-01-01T00:00:00Z') > duration('1h')",
        "timestamp('2020-01-01T00:00:00Z') < timestamp('2021-01-01T00:00:00Z')",
        "!(1 > 2) && -1 < 0 && -1.5 < 0.0",
        "request.name + 'x' != '' && size(request.name) * 2 > 0",
        "object.spec.replicas + 1 > 2 && object.metadata.name.size() > 0",
        "object.items.all(i, i.x > 0) && request.userInfo.groups.all(g, g != '')",
        "{'a': 1}.all(k, k != '')",
    ] {
        compile(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}true{}", "(".repeat(5000), ")".repeat(5000));
    assert!(compile_err(&deep).starts_with("compilation failed: "));
    let chain = vec!["1"; 3000].join(" + ") + " > 0";
    assert!(compile_err(&chain).starts_with("compilation failed: "));
    let long = format!("'{}' == ''", "a".repeat(100_001));
    assert!(compile_err(&long).contains("expression code point size exceeds limit"));
}

#[test]
fn upstream_validation_expressions_compile() {
    let cases: Value =
        serde_json::from_str(include_str!("fixtures/cel/upstream-expressions.json")).unwrap();
    for c in cases.as_array().unwrap() {
        let expr = c["expression"].as_str().unwrap();
        let valid = c["valid"].as_bool().unwrap();
        assert_eq!(compile(expr).is_ok(), valid, "{expr}");
    }
}

#[test]
fn object_labels_and_namespaces() {
    let with = Case::create(pod(
        "p",
        "default",
        Some(json!({"app": "web", "tier": "fe"})),
    ));
    let without = Case::create(pod("p", "kube-system", None));
    assert_eq!(with.eval("has(object.metadata.labels)"), Ok(true));
    assert_eq!(without.eval("has(object.metadata.labels)"), Ok(false));
    assert_eq!(with.eval("'app' in object.metadata.labels"), Ok(true));
    assert_eq!(
        with.eval("object.metadata.labels['app'] == 'web'"),
        Ok(true)
    );
    assert_eq!(
        without.eval("object.metadata.labels['app'] == 'web'"),
        Err("no such key: labels".into())
    );
    assert_eq!(
        with.eval("object.metadata.labels.missing == 'x'"),
        Err("no such key: missing".into())
    );
    assert_eq!(
        with.eval("object.metadata.labels[?'missing'].orValue('none') == 'none'"),
        Ok(true)
    );
    assert_eq!(without.eval("object.?nope.orValue('d') == 'd'"), Ok(true));
    assert_eq!(
        without.eval("object.metadata.?labels.orValue({}).size() == 0"),
        Ok(true)
    );
    assert_eq!(
        with.eval("object.metadata.namespace != 'kube-system'"),
        Ok(true)
    );
    assert_eq!(
        without.eval("object.metadata.namespace != 'kube-system'"),
        Ok(false)
    );
    assert_eq!(
        with.eval("'kube-system' in ['kube-system', 'kube-public'] && oldObject == null"),
        Ok(true)
    );
}

#[test]
fn create_and_delete_nulls() {
    let create = Case::create(pod("p", "default", None));
    assert_eq!(create.eval("oldObject == null"), Ok(true));
    assert_eq!(
        create.eval("oldObject.metadata.name == 'p'"),
        Err("no such key: metadata".into())
    );
    let delete = Case::delete(pod("p", "default", None));
    assert_eq!(
        delete.eval("object == null && oldObject.metadata.name == 'p'"),
        Ok(true)
    );
    assert_eq!(
        delete.eval("object.metadata.namespace != 'kube-system'"),
        Err("no such key: metadata".into())
    );
    assert_eq!(delete.eval("request.operation == 'DELETE'"), Ok(true));
    assert_eq!(delete.eval("namespaceObject == null"), Ok(true));
}

#[test]
fn request_fields() {
    let c = Case::create(pod("p", "default", None));
    assert_eq!(
        c.eval("!(request.userInfo.username == 'system:kube-scheduler')"),
        Ok(true)
    );
    assert_eq!(
        c.eval("!('system:nodes' in request.userInfo.groups)"),
        Ok(true)
    );
    assert_eq!(c.eval("'devs' in request.userInfo.groups"), Ok(true));
    assert_eq!(
        c.eval("!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')"),
        Ok(true)
    );
    assert_eq!(
        c.eval("request.kind.kind == 'Pod' && request.requestResource.version == 'v1'"),
        Ok(true)
    );
    assert_eq!(
        c.eval("request.userInfo.extra['scopes'][0] == 'a'"),
        Ok(true)
    );
    assert_eq!(c.eval("request.dryRun"), Ok(false));
    assert_eq!(c.eval("request.options.kind == 'CreateOptions'"), Ok(true));
}

#[test]
fn upstream_integration_conditions() {
    // match_conditions_test.go: object.metadata.namespace / name conditions on pods
    let kube_system = Case::create(pod("test1", "kube-system", None));
    let default1 = Case::create(pod("test1", "default", None));
    let default2 = Case::create(pod("test2", "default", None));
    let exempt = "object.metadata.namespace != 'kube-system'";
    let named = "object.metadata.name == 'test1'";
    assert_eq!(kube_system.eval(exempt), Ok(false));
    assert_eq!(default2.eval(exempt), Ok(true));
    assert_eq!(default1.eval(named), Ok(true));
    assert_eq!(default2.eval(named), Ok(false));
    assert_eq!(default2.eval("oldObject == null"), Ok(true));
    assert_eq!(
        default2.eval("object.nonExistentProperty == 'someval'"),
        Err("no such key: nonExistentProperty".into())
    );
}

#[test]
fn extension_libraries() {
    let c = Case::create(pod("web-1", "default", Some(json!({"app": "web"}))));
    assert_eq!(c.eval("object.metadata.name.startsWith('web-') && object.metadata.name.matches('^web-[0-9]+$')"), Ok(true));
    assert_eq!(
        c.eval("object.metadata.name.split('-') == ['web', '1']"),
        Ok(true)
    );
    assert_eq!(
        c.eval("object.metadata.name.lowerAscii().upperAscii() == 'WEB-1'"),
        Ok(true)
    );
    assert_eq!(
        c.eval("['b', 'a'].sort() == ['a', 'b'] && [1, 2, 3].isSorted()"),
        Ok(true)
    );
    assert_eq!(
        c.eval("object.spec.containers.map(x, x.image).join(',') == 'nginx'"),
        Ok(true)
    );
    assert_eq!(
        c.eval("object.spec.containers.exists(x, x.image.contains('ngin'))"),
        Ok(true)
    );
    assert_eq!(
        c.eval("object.metadata.name.find('[0-9]+') == '1'"),
        Ok(true)
    );
    assert_eq!(
        c.eval("quantity('1Gi').isGreaterThan(quantity('1Mi'))"),
        Ok(true)
    );
    assert_eq!(c.eval("dyn(object.metadata.name) == 'web-1'"), Ok(true));
    assert_eq!(c.eval("1 / 0 == 1"), Err("division by zero".into()));
}

#[test]
fn authorizer_checks() {
    let mut c = Case::create(pod("p", "default", None));
    let expr =
        "authorizer.group('').resource('pods').namespace('default').check('create').allowed()";
    assert_eq!(c.eval(expr), Ok(true));
    assert_eq!(
        c.eval("authorizer.requestResource.check('create').allowed()"),
        Ok(true)
    );
    c.authorizer = Authorizer::deny_all();
    assert_eq!(c.eval(expr), Ok(false));
    assert_eq!(
        c.eval("authorizer.requestResource.check('create').allowed()"),
        Ok(false)
    );
    c.authorizer = Authorizer::deny_all().with_rule(
        AuthzRule::allow()
            .user("alice")
            .verb("create")
            .group("")
            .resource("pods")
            .namespace("default")
            .reason("rbac"),
    );
    assert_eq!(c.eval(expr), Ok(true));
    assert_eq!(
        c.eval("authorizer.requestResource.check('create').reason() == 'rbac'"),
        Ok(true)
    );
    assert_eq!(
        c.eval("authorizer.requestResource.check('delete').allowed()"),
        Ok(false)
    );
    assert_eq!(
        c.eval(
            "authorizer.group('').resource('pods').namespace('other').check('create').allowed()"
        ),
        Ok(false)
    );
    assert_eq!(c.eval("authorizer.serviceAccount('default', 'sa').group('').resource('pods').namespace('default').check('create').allowed()"), Ok(false));
    c.authorizer = Authorizer::allow_all()
        .with_rule(AuthzRule::deny().path("/healthz*").reason("no"))
        .with_rule(
            AuthzRule::no_opinion()
                .resource("secrets")
                .error("webhook authorizer down"),
        );
    assert_eq!(
        c.eval("authorizer.path('/healthz/ready').check('get').allowed()"),
        Ok(false)
    );
    assert_eq!(
        c.eval("authorizer.path('/livez').check('get').allowed()"),
        Ok(true)
    );
    assert_eq!(
        c.eval("authorizer.group('').resource('secrets').check('get').errored()"),
        Ok(true)
    );
    assert_eq!(
        c.eval("authorizer.group('').resource('secrets').check('get').error() == 'webhook authorizer down'"),
        Ok(true)
    );
    assert_eq!(c.eval("authorizer.group('').resource('pods').subresource('log').name('p').check('get').allowed()"), Ok(true));
}

#[test]
fn cost_limits_match_upstream_integration_cases() {
    let c = Case::create(pod("test1", "default", None));
    let one =
        "authorizer.group('').resource('pods').namespace('default').check('create').allowed()";
    // three checks exceed the per-call limit
    let three = compile(&[one, one, one].join(" && ")).unwrap();
    let ev = evaluate_with_cost(&three, &c.activation());
    assert_eq!(ev.result, Err(PER_CALL_LIMIT_EXCEEDED.to_string()));
    // two checks per condition: the fourth condition overruns the 2,500,000 budget
    let two = compile(&[one, one].join(" && ")).unwrap();
    let mut remaining = MATCH_CONDITIONS_COST_BUDGET;
    let mut exhausted_at = None;
    for i in 0..8 {
        let ev = evaluate_with_cost(&two, &c.activation());
        assert_eq!(ev.result, Ok(true));
        if evaluation_cost_exceeded(remaining, ev.cost) {
            exhausted_at = Some(i);
            break;
        }
        remaining -= ev.cost;
    }
    assert_eq!(exhausted_at, Some(3), "{COST_BUDGET_EXHAUSTED}");
}

#[test]
fn program_is_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<hookscope::cel::Program>();
    let program = compile("object.metadata.name == 'p'").unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let p = program.clone();
            std::thread::spawn(move || {
                let c = Case::create(pod("p", "default", None));
                evaluate(&p, &c.activation())
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Ok(true));
    }
}

/// `size` counts a string's code points, as cel-go's `String.Size` does (`utf8.RuneCountInString`),
/// not its UTF-8 bytes: a name of non-ASCII characters is not longer than it is.
#[test]
fn size_of_a_string_counts_code_points_as_cel_go_does() {
    let case = Case::create(pod("café-日本", "default", None));
    assert_eq!(case.eval("size(object.metadata.name) == 7"), Ok(true));
    assert_eq!(case.eval("object.metadata.name.size() == 7"), Ok(true));
    assert_eq!(
        case.eval("size('héllo') == 5 && size(b'h\\xc3\\xa9') == 3"),
        Ok(true)
    );
    assert_eq!(
        case.eval("size([1, 2]) == 2 && size({'a': 1}) == 1"),
        Ok(true)
    );
}

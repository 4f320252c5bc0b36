//! The Kubernetes CEL libraries as kube-apiserver v1.33.3 answered them
//! (`fixtures/cel-library/apiserver-v1.33`, see its README): the values a policy's
//! auditAnnotations printed, and the functions a policy created on 1.33 may not use yet.
//! Upstream's own test tables of the libraries run as unit tests of the `cel` module.

use hookscope::KubeVersion;
use hookscope::cel::{Env, Output, ReturnType};
use serde::Deserialize;

const SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cel-library/apiserver-v1.33"
);

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{SESSION}/{path}")).unwrap()
}

fn v133() -> KubeVersion {
    KubeVersion::new(33).unwrap()
}

/// What kubectl printed for a policy `create` would print for the policies of `file` on 1.33.
fn create_errors(file: &str) -> String {
    let mut out = String::new();
    for loaded in hookscope::config::parse_policy_documents(&read(file), file) {
        let mut loaded = loaded.unwrap();
        loaded.apply_defaults();
        let errors = hookscope::config::policy::validate_policy_object_in(&loaded.object, v133());
        push_invalid(
            &mut out,
            "ValidatingAdmissionPolicy",
            loaded.object.name(),
            &errors,
        );
    }
    out
}

/// kubectl's report of an object the apiserver refused with `errors` (none: nothing).
fn push_invalid(
    out: &mut String,
    kind: &str,
    name: &str,
    errors: &[hookscope::config::FieldError],
) {
    match errors {
        [] => return,
        [one] => out.push_str(&format!("The {kind} {name:?} is invalid: {one}")),
        many => {
            out.push_str(&format!("The {kind} {name:?} is invalid: "));
            for e in many {
                out.push_str(&format!("\n* {e}"));
            }
        }
    }
    out.push('\n');
}

/// What kubectl would print creating the webhook configurations of `file` on a cluster of
/// `release`.
fn webhook_create_errors(file: &str, release: KubeVersion) -> String {
    let mut out = String::new();
    for loaded in hookscope::config::parse_documents(&read(file), file) {
        let mut loaded = loaded.unwrap();
        loaded.apply_defaults();
        let cfg = &loaded.configuration;
        let errors = hookscope::config::validate_in(cfg, None, release);
        push_invalid(
            &mut out,
            "ValidatingWebhookConfiguration",
            &cfg.name,
            &errors,
        );
    }
    out
}

/// A webhook's matchConditions compile with the same environment as a policy created on the
/// same release: on 1.33, `isSemver` and `semver` (added in 1.33) are undeclared while `ip`,
/// `format` and `quantity` compile, as the apiserver answered; on 1.34 all compile.
#[test]
fn webhook_match_conditions_follow_the_release_as_policies_do() {
    let printed = read("match-conditions-kubectl.txt");
    let refused: String = printed
        .lines()
        .skip_while(|l| !l.starts_with("The "))
        .take_while(|l| !l.starts_with("(exit"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        webhook_create_errors("match-conditions-webhooks.yaml", v133()),
        refused
    );
    assert_eq!(
        webhook_create_errors(
            "match-conditions-webhooks.yaml",
            KubeVersion::new(34).unwrap()
        ),
        ""
    );
}

/// `isSemver` and `semver` came in 1.33: a policy created on 1.33 is compiled with 1.32's
/// libraries, so both are undeclared (each call of the expression reported), while `format`,
/// `ip` and `sets` compile.
#[test]
fn functions_of_the_running_release_are_undeclared_for_new_policies() {
    assert_eq!(
        create_errors("undeclared-policy.yaml"),
        read("undeclared-kubectl.txt")
    );
}

/// `string()` of a format's `validate` result (an `optional_type(list(string))`) has no
/// overload: the policy is refused on create, as kubectl printed it (after its line about the
/// binding, unchanged).
#[test]
fn string_of_an_optional_is_refused_on_create() {
    let printed = read("values-bad-kubectl.txt");
    let (_binding, policy) = printed.split_once('\n').unwrap();
    assert_eq!(create_errors("values-bad-policy.yaml"), policy);
}

#[derive(Deserialize)]
struct Printed {
    key: String,
    expression: String,
    value: String,
}

/// The auditAnnotations of `file` (key, expression, the value the apiserver printed) that
/// hookscope evaluates otherwise over `object` on 1.33, and how many it compared.
fn printed_differences(file: &str, object: &serde_json::Value) -> (Vec<String>, usize) {
    let printed: Vec<Printed> = serde_json::from_str(&read(file)).unwrap();
    let env = Env::policy(false).for_release(v133());
    let mut failures = Vec::new();
    for p in &printed {
        let got = hookscope::cel::evaluate_standalone(
            &p.expression,
            &env,
            ReturnType::StringOrNull,
            object,
        );
        if got != Ok(Output::String(p.value.clone())) {
            failures.push(format!(
                "{}: {}: {got:?}, want {:?}",
                p.key, p.expression, p.value
            ));
        }
    }
    (failures, printed.len())
}

/// The values library functions gave, as the apiserver printed them in audit annotations
/// (`string()` of a double as Go's `%g`, `1.610612736e+09`, and of a bool).
#[test]
fn library_values_are_printed_as_the_apiserver_did() {
    let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe-1"}});
    let (failures, _) = printed_differences("values.json", &object);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// cel-go's two-variable comprehensions (in the environment from 1.32, so in policies created
/// on 1.33): the values a 1.33.3 apiserver printed through auditAnnotations (`all`, `exists`,
/// `existsOne` over a map and a list, `transformList`, `transformMap` and `transformMapEntry`
/// with and without a filter, an error absorbed by the result that `all` and `exists` settle
/// on), the errors it warned of, and the `map(dyn, dyn)` of `transformMapEntry` it refused as
/// an auditAnnotation's value.
#[test]
fn two_variable_comprehensions_answer_as_the_apiserver_did() {
    let object: serde_json::Value = serde_json::from_str(&read("cm-twovar.yaml")).unwrap();
    let (failures, compared) = printed_differences("twovar-values.json", &object);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(compared, 11);
    let env = Env::policy(false).for_release(v133());
    // The validations of `twovar-errors`, bound [Warn]: each warning's text after the
    // policy's name.
    let warned = read("twovar-errors-kubectl.txt");
    let policy: serde_json::Value = read("twovar-policy.yaml")
        .split("\n---\n")
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
        .find(|d| {
            d["metadata"]["name"] == "twovar-errors" && d["kind"] == "ValidatingAdmissionPolicy"
        })
        .unwrap();
    let object: serde_json::Value = serde_json::from_str(&read("cm-twovar-errors.yaml")).unwrap();
    for v in policy["spec"]["validations"].as_array().unwrap() {
        let expression = v["expression"].as_str().unwrap();
        let warning = match hookscope::cel::evaluate_standalone(
            expression,
            &env,
            ReturnType::Bool,
            &object,
        ) {
            Err(e) => format!("expression '{expression}' resulted in error: {e}"),
            Ok(Output::Bool(false)) => format!("failed expression: {expression}"),
            other => panic!("{expression}: {other:?}"),
        };
        assert!(
            warned.contains(&format!("'twovar-errors': {warning}\n")),
            "{warning}"
        );
    }
    let refused: String = read("twovar-kubectl.txt")
        .lines()
        .filter(|l| l.starts_with("The "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(create_errors("twovar-policy.yaml"), refused);
    // Added in 1.32: expressions created on 1.32 have 1.31's environment, without them.
    let older = Env::policy(false).for_release(KubeVersion::new(32).unwrap());
    let got = hookscope::cel::evaluate_standalone(
        "string(object.data.all(k, v, v != ''))",
        &older,
        ReturnType::StringOrNull,
        &object,
    );
    assert!(
        matches!(&got, Err(e) if e.contains("undeclared reference to 'all'")),
        "{got:?}"
    );
}

/// `type(x)` and the type denotations (`int`, `map`, `null_type`, `type`, `net.IP`, …): the
/// comparisons a 1.33.3 apiserver printed through auditAnnotations (every one `true`, so that
/// a missing or mistaken type shows as a difference, not as a compile error hidden in it).
#[test]
fn type_values_compare_as_the_apiserver_compared_them() {
    assert!(read("types-kubectl.txt").contains("type-values created"));
    let object: serde_json::Value = serde_json::from_str(&read("cm-types.yaml")).unwrap();
    let (failures, compared) = printed_differences("types-values.json", &object);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(compared, 10);
}

//! Upstream's test tables of the Kubernetes CEL libraries, run as data
//! (`tests/fixtures/cel-library/`).

use super::*;

/// One row of a table.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    source: String,
    expression: String,
    value: Option<String>,
    runtime_error: Option<String>,
    /// The exact evaluation error, where upstream compares with `==` (the ip and cidr tables).
    runtime_error_text: Option<String>,
    compile_errors: Option<Vec<String>>,
    introduced: String,
    /// Why hookscope does not answer as upstream yet: the row must still fail.
    divergence: Option<String>,
}

#[derive(serde::Deserialize)]
struct Table {
    cases: Vec<Case>,
}

fn table() -> Table {
    crate::json::from_str(include_str!(
        "../../tests/fixtures/cel-library/kubernetes-library.json"
    ))
    .expect("the table parses")
}

/// Evaluates `expr` compiled in `env` with no object: the compile error, or the value or
/// evaluation error.
fn eval(expr: &str, env: &Env) -> Result<Result<Value, String>, String> {
    let program = compile_in(expr, env, ReturnType::Any).map_err(|e| e.0)?;
    Ok(run_alone(&program, &serde_json::Value::Null))
}

/// The messages of a compile error's `ERROR: <input>:L:C: message` lines.
fn messages(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.split_once("ERROR: <input>:"))
        .filter_map(|(_, rest)| rest.splitn(3, ':').nth(2))
        .map(str::trim)
        .collect()
}

fn minor(release: &str) -> u32 {
    release
        .strip_prefix("1.")
        .and_then(|m| m.parse().ok())
        .expect("a release 1.N")
}

fn release(minor: u32) -> Env {
    Env::policy(false).for_release(crate::KubeVersion::new(minor).expect("a modelled release"))
}

/// Every row of the tables (but those marked as a divergence, which must still fail) holds for
/// expressions created on the release after the one that
/// introduced its library (the first whose new expressions may use it) and on the newest.
#[test]
fn kubernetes_library_tables() {
    let mut failures = Vec::new();
    for c in table().cases {
        for env in [
            release((minor(&c.introduced) + 1).max(crate::KubeVersion::OLDEST.minor())),
            release(crate::KubeVersion::NEWEST.minor()),
        ] {
            match (failure(&c, &env), &c.divergence) {
                (Some(f), None) => failures.push(format!("{}: {}: {f}", c.source, c.expression)),
                (None, Some(_)) => failures.push(format!(
                    "{}: {}: holds now, drop its divergence",
                    c.source, c.expression
                )),
                _ => {}
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// On the release that introduced a library, expressions created there cannot use it yet:
/// they fail to compile with cel-go's `undeclared reference` (as 1.33.3 answers `isSemver`).
#[test]
fn library_functions_are_undeclared_before_their_release() {
    let mut failures = Vec::new();
    for c in table().cases {
        if c.compile_errors.is_some() || minor(&c.introduced) < crate::KubeVersion::OLDEST.minor() {
            continue;
        }
        let env = release(minor(&c.introduced));
        match eval(&c.expression, &env) {
            Err(text)
                if messages(&text)
                    .iter()
                    .any(|m| m.starts_with("undeclared reference to '")) => {}
            other => failures.push(format!("{}: {}: {other:?}", c.source, c.expression)),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Why `c` does not hold in `env`, if it does not.
fn failure(c: &Case, env: &Env) -> Option<String> {
    let got = eval(&c.expression, env);
    match (&got, &c.compile_errors) {
        (Err(text), Some(patterns)) => {
            let msgs = messages(text);
            let all = !msgs.is_empty()
                && msgs.iter().all(|m| {
                    patterns
                        .iter()
                        .any(|p| regex::Regex::new(p).unwrap().is_match(m))
                });
            (!all).then(|| format!("compile errors {msgs:?}, want {patterns:?}"))
        }
        (Ok(_), Some(patterns)) => Some(format!("compiled, want errors {patterns:?}")),
        (Err(text), None) => Some(format!("compile error {text}")),
        (Ok(Err(e)), None) => match (&c.runtime_error, &c.runtime_error_text) {
            (Some(p), _) if regex::Regex::new(p).unwrap().is_match(e) => None,
            (_, Some(text)) if text == e => None,
            (pattern, text) => Some(format!(
                "error {e:?}, want {:?}",
                text.as_ref().or(pattern.as_ref())
            )),
        },
        (Ok(Ok(v)), None) => match (
            c.runtime_error.as_ref().or(c.runtime_error_text.as_ref()),
            &c.value,
        ) {
            (Some(p), _) => Some(format!("value {v:?}, want error {p:?}")),
            (None, Some(want)) => match eval(want, env) {
                Ok(Ok(w)) if &w == v => None,
                w => Some(format!("value {v:?}, want {w:?}")),
            },
            (None, None) => Some("row without expectation".into()),
        },
    }
}

//! The `check` and `patch` commands, run as a user runs them.

#[path = "common/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::process::{Command, Output};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn hookscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_accepts_valid_configurations_and_shows_defaults_and_warnings() {
    let out = hookscope(&[
        "check",
        "--webhooks",
        &format!("{FIXTURES}/config/mutating.yaml"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("✓ MutatingWebhookConfiguration oracle-mutating"),
        "{stdout}"
    );
    assert!(
        stdout.contains("default webhooks[0].namespaceSelector: {}"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning webhooks[0].namespaceSelector: does not exclude kube-system"),
        "{stdout}"
    );
}

#[test]
fn check_reports_every_validation_error_and_exits_1() {
    let out = hookscope(&[
        "check",
        "--webhooks",
        &format!("{FIXTURES}/config/five-problems.yaml"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("error "))
        .collect();
    assert_eq!(errors.len(), 5, "{stdout}");
    assert!(stdout.contains(
        "error webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
    ));
}

#[test]
fn check_refuses_the_removed_alpha_kind_with_its_replacement() {
    let out = hookscope(&[
        "check",
        "--webhooks",
        &format!("{FIXTURES}/config/external.yaml"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("ExternalAdmissionHookConfiguration"),
        "{stdout}"
    );
    assert!(
        stdout.contains("MutatingWebhookConfiguration or ValidatingWebhookConfiguration"),
        "{stdout}"
    );
}

#[test]
fn check_without_configurations_is_a_usage_error() {
    let empty = Scratch::new(&format!("hookscope-empty-{}", std::process::id()));
    let out = hookscope(&["check", "--webhooks", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn patch_applies_with_the_apiservers_quirks_and_says_so() {
    let out = hookscope(&[
        "patch",
        "--object",
        &format!("{FIXTURES}/cli/object.yaml"),
        "--patch",
        &format!("{FIXTURES}/cli/quirky-patch.json"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON result");
    assert_eq!(
        result,
        serde_json::json!({"metadata": {"labels": {"x": "1"}}, "spec": {"missing": 2}})
    );
    assert!(text(&out.stderr).contains("strict RFC 6902 implementation rejects this patch"));
}

#[test]
fn patch_failures_print_the_apiservers_error_and_exit_1() {
    let out = hookscope(&[
        "patch",
        "--object",
        &format!("{FIXTURES}/cli/object.yaml"),
        "--patch",
        &format!("{FIXTURES}/cli/remove-missing.json"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains(
        "Internal error occurred: error in remove for path: '/nope': Unable to remove nonexistent key: nope: missing value"
    ));
    let out = hookscope(&[
        "--kube-version",
        "1.33",
        "patch",
        "--object",
        &format!("{FIXTURES}/cli/object.yaml"),
        "--patch",
        &format!("{FIXTURES}/cli/truncated.json"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("Internal error occurred: unexpected end of JSON input"));
}

#[test]
fn unsupported_kube_versions_are_refused() {
    let out = hookscope(&["--kube-version", "1.20", "check", "--webhooks", FIXTURES]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("expected 1.28 to 1.37"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn live_refuses_bad_flags_before_opening_the_console() {
    let missing = hookscope(&["live", "--input", "/nonexistent/capture.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    let err = text(&missing.stderr);
    assert!(
        err.contains("--input: /nonexistent/capture.jsonl: cannot open"),
        "{err}"
    );

    let remote = hookscope(&["live", "--audit-webhook", "0.0.0.0:0"]);
    assert_eq!(remote.status.code(), Some(2));
    let err = text(&remote.stderr);
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--audit-webhook-allow-remote"), "{err}");

    let interval = hookscope(&["live", "--scrape-interval", "5x"]);
    assert_eq!(interval.status.code(), Some(2));
    let err = text(&interval.stderr);
    assert!(err.contains("unknown unit \"x\" (ms, s, m, h)"), "{err}");

    // The Prometheus flags, checked before the console opens.
    let alone = hookscope(&["live", "--prometheus-ca", "ca.pem"]);
    assert_eq!(alone.status.code(), Some(2));
    let err = text(&alone.stderr);
    assert!(err.contains("--prometheus <URL>"), "{err}");
    let plain = hookscope(&["live", "--prometheus", "http://prometheus.example:9090"]);
    assert_eq!(plain.status.code(), Some(2));
    let err = text(&plain.stderr);
    assert!(
        err.contains("plain http is accepted only on loopback (a kubectl port-forward); use https"),
        "{err}"
    );
    let ca = hookscope(&[
        "live",
        "--prometheus",
        "https://prometheus.example:9090",
        "--prometheus-ca",
        "/nonexistent/ca.pem",
    ]);
    assert_eq!(ca.status.code(), Some(2));
    let err = text(&ca.stderr);
    assert!(
        err.contains("--prometheus-ca /nonexistent/ca.pem: "),
        "{err}"
    );
}

/// Runs hookscope with its standard output (and, with `close_stderr`, its standard error) a pipe
/// whose reading end is closed before it writes: as `hookscope … | head -1` once `head` is gone.
fn with_closed_output(args: &[&str], close_stderr: bool) -> (Option<i32>, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookscope"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    drop(child.stdout.take());
    let mut stderr = String::new();
    if close_stderr {
        drop(child.stderr.take());
    } else if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).expect("stderr");
    }
    let status = child.wait().expect("binary ends");
    (status.code(), stderr)
}

#[test]
fn a_closed_standard_output_ends_every_command_quietly() {
    let oracle = format!("{FIXTURES}/oracle-v1.32");
    let (mutating, validating) = (
        format!("{oracle}/mutating.yaml"),
        format!("{oracle}/validating.yaml"),
    );
    let log = format!("{oracle}/audit.log");
    let object = format!("{FIXTURES}/cli/object.yaml");
    let patch = format!("{FIXTURES}/cli/quirky-patch.json");
    let replay = |format: &'static str| {
        vec![
            "replay".to_string(),
            "--webhooks".into(),
            mutating.clone(),
            validating.clone(),
            "--input".into(),
            log.clone(),
            "--format".into(),
            format.into(),
            "-v".into(),
        ]
    };
    let commands: Vec<Vec<String>> = vec![
        vec![
            "check".into(),
            "--webhooks".into(),
            mutating.clone(),
            validating.clone(),
        ],
        replay("text"),
        replay("json"),
        replay("junit"),
        vec![
            "patch".into(),
            "--object".into(),
            object,
            "--patch".into(),
            patch,
        ],
    ];
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = with_closed_output(&args, false);
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(
            !stderr.to_lowercase().contains("broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("backtrace"), "{args:?}: {stderr}");
        // Both closed (`2>&1 | head`): still no panic.
        let (code, _) = with_closed_output(&args, true);
        assert_eq!(code, Some(141), "{args:?}, stderr closed too");
    }
    // clap writes the help itself and ignores a closed stdout.
    for args in [&["--help"][..], &["replay", "--help"], &["--version"]] {
        let (code, stderr) = with_closed_output(args, false);
        assert!(matches!(code, Some(0 | 141)), "{args:?}: {code:?} {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

#[test]
fn check_takes_the_admission_configurations_of_release_manifests_and_skips_the_rest() {
    // (file, configurations, the skipped line)
    let manifests = [
        (
            "cert-manager.yaml",
            2,
            "skipped 46 documents of other kinds: Namespace, CustomResourceDefinition ×6, ServiceAccount ×3, ConfigMap ×2, ClusterRole ×13, ClusterRoleBinding ×10, Role ×3, RoleBinding ×3, Service ×2, Deployment ×3",
        ),
        (
            "gatekeeper.yaml",
            2,
            "skipped 29 documents of other kinds: Namespace, ResourceQuota, CustomResourceDefinition ×17, ServiceAccount, Role, ClusterRole, RoleBinding, ClusterRoleBinding, Secret, Service, Deployment ×2, PodDisruptionBudget",
        ),
        (
            "ingress-nginx-cloud-deploy.yaml",
            1,
            "skipped 18 documents of other kinds: Namespace, ServiceAccount ×2, Role ×2, ClusterRole ×2, RoleBinding ×2, ClusterRoleBinding ×2, ConfigMap, Service ×2, Deployment, Job ×2, IngressClass",
        ),
    ];
    for (file, configurations, skipped) in manifests {
        let out = hookscope(&[
            "check",
            "--quiet",
            "--webhooks",
            &format!("{FIXTURES}/manifests/{file}"),
        ]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{file}: {stdout}");
        assert_eq!(stdout.matches("✓ ").count(), configurations, "{stdout}");
        assert!(!stdout.contains('✗'), "{stdout}");
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("skipped"))
            .collect();
        assert_eq!(lines, [skipped], "one summary line");
    }

    // Validating admission policies and bindings are read, defaulted and validated like the
    // configurations; anything else of any group is another kind; a misspelt webhook
    // configuration kind is not.
    let dir = Scratch::new(&format!("hookscope-policies-{}", std::process::id()));
    let path = dir.join("mixed.yaml");
    std::fs::write(
        &path,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec: {validations: [{expression: 'true'}]}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec: {policyName: p}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks: []\n",
    )
    .unwrap();
    let out = hookscope(&["check", "--webhooks", path.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("skipped 1 document of other kinds: Widget"),
        "{stdout}"
    );
    assert!(
        stdout.contains("✗ ValidatingAdmissionPolicy p ")
            && stdout.contains("    error spec.matchConstraints: Required value\n")
            && stdout.contains("✗ ValidatingAdmissionPolicyBinding b ")
            && stdout.contains(
                "    error spec.validationActions: Required value: at least one validation action is required"
            ),
        "{stdout}"
    );
    std::fs::write(
        &path,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfigurations\nmetadata: {name: v}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: v}\nwebhooks: []\n",
    )
    .unwrap();
    let out = hookscope(&["check", "--webhooks", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("kind \"ValidatingWebhookConfigurations\""));
}

#[test]
fn check_warns_when_a_configuration_replaces_one_of_the_same_kind_and_name() {
    let gatekeeper = format!("{FIXTURES}/manifests/gatekeeper-webhook-manifests.yaml");
    let otel = format!("{FIXTURES}/manifests/opentelemetry-operator-webhook-manifests.yaml");
    let out = hookscope(&["check", "--quiet", "--webhooks", &gatekeeper, &otel]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let replaced: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("    warning metadata.name: "))
        .collect();
    assert_eq!(
        replaced,
        [
            format!(
                "    warning metadata.name: MutatingWebhookConfiguration \"mutating-webhook-configuration\" replaces the one of {gatekeeper}: document 1 (starting at line 1): a cluster holds one object per kind and name, and applying both files in this order leaves this one"
            ),
            format!(
                "    warning metadata.name: ValidatingWebhookConfiguration \"validating-webhook-configuration\" replaces the one of {gatekeeper}: document 2 (starting at line 29): a cluster holds one object per kind and name, and applying both files in this order leaves this one"
            ),
        ]
    );
}

/// Runs `check` (with `args`) over one file holding `yaml`, in a scratch folder named after
/// `tag`: the exit code and stdout.
fn check_file(tag: &str, yaml: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = Scratch::new(&format!("hookscope-{tag}-{}", std::process::id()));
    let path = dir.join("c.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.extend(["--webhooks", path.to_str().unwrap()]);
    let out = hookscope(&all);
    (out.status.code(), text(&out.stdout))
}

#[test]
fn check_reads_yaml_as_kubectl_does() {
    // go-yaml v2 continues a long quoted string at its key's column; a key given twice keeps
    // its last value, as kubectl's decoding does.
    let (code, stdout) = check_file(
        "kubectl-yaml",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: v\n  annotations:\n    description: 'a long description that go-yaml wrapped\n    at the key''s column'\nwebhooks:\n- name: v.example.com\n  clientConfig: {url: \"https://v.example.com/\"}\n  sideEffects: None\n  admissionReviewVersions: [v1]\n  timeoutSeconds: 40\n  timeoutSeconds: 5\n",
        &[],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("✓ ValidatingWebhookConfiguration v"),
        "{stdout}"
    );

    // Alias bombs are still refused, in YAML's words.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..7 {
        let refs = vec![format!("*a{}", i - 1); 10].join(", ");
        bomb.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
    }
    let (code, stdout) = check_file("alias-bomb", &bomb, &[]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("(an alias bomb?)"), "{stdout}");
    assert!(
        !stdout.contains("Options") && !stdout.contains("budget"),
        "{stdout}"
    );
}

#[test]
fn check_ends_with_a_one_line_summary() {
    let out = hookscope(&[
        "check",
        "--webhooks",
        &format!("{FIXTURES}/config/mutating.yaml"),
        &format!("{FIXTURES}/config/five-problems.yaml"),
    ]);
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let valid = stdout.lines().filter(|l| l.starts_with("✓ ")).count();
    let invalid = stdout.lines().filter(|l| l.starts_with("✗ ")).count();
    let warnings = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("warning "))
        .count();
    assert!(valid > 0 && invalid > 0, "{stdout}");
    assert_eq!(
        last,
        format!(
            "{} configurations checked: {valid} valid, {invalid} invalid, {warnings} warning{}",
            valid + invalid,
            if warnings == 1 { "" } else { "s" }
        ),
        "{stdout}"
    );
}

#[test]
fn a_file_without_its_flag_or_kubectls_dash_o_gets_a_hint() {
    let out = hookscope(&["check", "hooks.yaml"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("hint: files and folders are given with --webhooks: hookscope check --webhooks hooks.yaml"),
        "{stderr}"
    );
    let out = hookscope(&[
        "replay",
        "--webhooks",
        "a.yaml",
        "--input",
        "b",
        "-o",
        "json",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("hint: the output format is --format text|json|junit"),
        "{stderr}"
    );
    // A flag that is simply unknown gets clap's own suggestion, no hint of ours.
    let out = hookscope(&["check", "--webhook", "a.yaml"]);
    assert!(
        !text(&out.stderr).contains("hint:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn completions_man_page_and_version_come_from_the_command_definitions() {
    for (shell, marker) in [
        ("bash", "_hookscope()"),
        ("zsh", "#compdef hookscope"),
        ("fish", "complete -c hookscope"),
    ] {
        let out = hookscope(&["completions", shell]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        assert!(stdout.contains(marker), "{shell}: {stdout}");
        // Every subcommand and a subcommand's flag are completed.
        for word in ["check", "replay", "live", "--webhooks"] {
            assert!(stdout.contains(word), "{shell} lacks {word}");
        }
    }
    assert_eq!(hookscope(&["completions", "tcsh"]).status.code(), Some(2));
    let out = hookscope(&["man"]);
    let man = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(man.contains(".TH hookscope 1"), "{man}");
    assert!(man.contains(".SH \"HOOKSCOPE CHECK\""), "{man}");
    assert!(man.contains("\\-\\-webhooks"), "{man}");
    let out = hookscope(&["version"]);
    let v = text(&out.stdout);
    assert!(
        v.starts_with(&format!("hookscope {}\n", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    assert!(v.contains("models kube-apiserver 1.28 to 1.37"), "{v}");
}

/// `hookscope tui` with nothing to replay opens the demo, as `hookscope` alone does (in a
/// pseudo-terminal of util-linux `script`, until the first frame); one of `--webhooks` and
/// `--input` without the other is a usage error naming the missing one.
#[test]
fn tui_without_inputs_opens_the_demo_and_one_input_alone_is_a_usage_error() {
    let out = hookscope(&["tui", "--input", "captured.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("required arguments were not provided:\n  --webhooks"),
        "{}",
        text(&out.stderr)
    );
    let config = Scratch::new(&format!("hookscope-tui-demo-{}", std::process::id()));
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let command = format!("stty cols 120 rows 40; exec {bin} tui --exit-after-first-frame");
    let Ok(out) = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("XDG_CONFIG_HOME", config.path())
        .env("XDG_STATE_HOME", config.path())
        .output()
    else {
        println!("skipped: util-linux script is not installed");
        return;
    };
    assert!(out.status.success(), "{out:?}");
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(
        screen.contains(" hookscope ") && screen.contains("demo"),
        "{screen}"
    );
}

#[test]
fn check_reports_status_type_checking_of_a_policy_against_its_kinds_schema() {
    // The status controller type-checks against apps/v1 Deployment: `foo` is no field of it and
    // `spec.replicas` an int (upstream's typechecking_test.go cases, on the real schema).
    let (code, stdout) = check_file(
        "typecheck",
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: p}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}]\n  validations:\n  - expression: object.foo == 'bar'\n  - expression: object.spec.replicas > 1\n    messageExpression: object.spec.replicas + 'x'\n",
        &["--quiet"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    let expected = "✓ ValidatingAdmissionPolicy p ";
    assert!(stdout.contains(expected), "{stdout}");
    assert!(
        stdout.contains(concat!(
            "    warning status.typeChecking: spec.validations[0].expression: apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'foo'\n",
            "       | object.foo == 'bar'\n",
            "       | ......^\n",
            "    warning status.typeChecking: spec.validations[1].messageExpression: apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_+_' applied to '(int, string)'\n",
            "       | object.spec.replicas + 'x'\n",
            "       | .....................^\n",
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 valid, 0 invalid, 2 warnings"),
        "{stdout}"
    );
}

#[test]
fn check_applies_the_literal_validators_from_1_30() {
    // 1.29 added cel-go's duration/timestamp/regex literal validators to the environment, which
    // compiles new expressions with the previous release's options: the v1.33.3 apiserver
    // refuses `duration('1d')` on create (recorded in fixtures/cel-typecheck-v1.33), a 1.29 one
    // only fails it at run time.
    let policy = |version: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/{version}\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: p}}\nspec:\n  matchConstraints:\n    resourceRules: [{{apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps], operations: [CREATE]}}]\n  validations: [{{expression: \"duration('1d') > duration('1h')\"}}]\n"
        )
    };
    let (code, stdout) = check_file("literals-133", &policy("v1"), &["--kube-version", "1.33"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("compilation failed: ERROR: <input>:1:10: invalid duration argument"),
        "{stdout}"
    );
    // 1.29 serves the policy as v1beta1 only.
    let (code, stdout) = check_file(
        "literals-129",
        &policy("v1beta1"),
        &["--kube-version", "1.29"],
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("✓ ValidatingAdmissionPolicy p "),
        "{stdout}"
    );
}

//! Upstream's `TestAuthenticationDetection` table (`auth-info-resolver` cases), data-driven from
//! `tests/fixtures/auth/`, plus kubeconfig parsing details of the resolver.

#[path = "common/scratch.rs"]
mod scratch;

use std::collections::BTreeMap;

use scratch::Scratch;

use hookscope::transport::{AuthError, Credentials, Impersonation, WebhookAuth};
use serde_json::{Value, json};

const CASES: &str = include_str!("fixtures/auth/auth-info-resolver.json");
const ANONYMOUS: &str = "anonymous (empty rest.Config)";
const IMPERSONATION_SUFFIX: &str = " + impersonation config";

/// Reads the fixture's impersonation shorthand:
/// `foo (+impersonate user-a, uid U, groups [g1,g2], extra {k:[v1,v2]})`.
fn parse_token_spec(spec: &str) -> (String, Option<Impersonation>) {
    let Some((token, rest)) = spec.split_once(" (+impersonate ") else {
        return (spec.to_string(), None);
    };
    let rest = rest.strip_suffix(')').expect("closing parenthesis");
    let (user, rest) = rest.split_once(", uid ").expect("uid");
    let (uid, rest) = rest.split_once(", groups [").expect("groups");
    let (groups, rest) = rest.split_once("], extra {").expect("extra");
    let extra_text = rest.strip_suffix('}').expect("extra braces");
    let mut extra = BTreeMap::new();
    for entry in extra_text.split("],").filter(|e| !e.is_empty()) {
        let (key, values) = entry.split_once(":[").expect("extra entry");
        let values = values.trim_end_matches(']');
        extra.insert(
            key.to_string(),
            values.split(',').map(str::to_string).collect(),
        );
    }
    let imp = Impersonation {
        user: user.to_string(),
        uid: Some(uid.to_string()),
        groups: groups.split(',').map(str::to_string).collect(),
        extra,
    };
    (token.to_string(), Some(imp))
}

fn kubeconfig_for(input: &Value) -> (String, BTreeMap<String, Option<Impersonation>>) {
    let mut users = Vec::new();
    let mut impersonations = BTreeMap::new();
    let map = input["kubeconfigUsersToToken"].as_object().expect("users");
    for (name, spec) in map {
        let (token, imp) = parse_token_spec(spec.as_str().expect("token"));
        let mut user = json!({ "token": token });
        if let Some(imp) = &imp {
            user["as"] = json!(imp.user);
            user["as-uid"] = json!(imp.uid);
            user["as-groups"] = json!(imp.groups);
            user["as-user-extra"] = json!(imp.extra);
        }
        impersonations.insert(token, imp);
        users.push(json!({ "name": name, "user": user }));
    }
    let contexts: Vec<Value> = input["contexts"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(
                    |(name, user)| json!({"name": name, "context": {"cluster": "c", "user": user}}),
                )
                .collect()
        })
        .unwrap_or_default();
    let mut config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "users": users,
        "contexts": contexts,
    });
    if let Some(current) = input["currentContext"].as_str() {
        config["current-context"] = json!(current);
    }
    (config.to_string(), impersonations)
}

#[test]
fn upstream_authentication_detection_table() {
    let cases: Vec<Value> = serde_json::from_str(CASES).expect("fixture");
    assert_eq!(cases.len(), 14);
    for case in &cases {
        let name = case["name"].as_str().expect("name");
        let input = &case["input"];
        let target = input["target"].as_str().expect("target");
        let expected = case["expect"]["bearerToken"].as_str().expect("expectation");
        let (text, impersonations) = kubeconfig_for(input);
        let auth = WebhookAuth::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = auth
            .resolve(target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if expected == ANONYMOUS {
            assert_eq!(got, None, "{name}");
            continue;
        }
        let (token, wants_impersonation) = match expected.strip_suffix(IMPERSONATION_SUFFIX) {
            Some(token) => (token, true),
            None => (expected, false),
        };
        let creds = got.unwrap_or_else(|| panic!("{name}: anonymous"));
        assert_eq!(creds.bearer_token.as_deref(), Some(token), "{name}");
        let want_imp = impersonations.get(token).cloned().flatten();
        assert_eq!(wants_impersonation, want_imp.is_some(), "{name}: fixture");
        assert_eq!(creds.impersonate, want_imp, "{name}");
        let expected_creds = Credentials {
            bearer_token: Some(token.to_string()),
            impersonate: creds.impersonate.clone(),
            ..Credentials::default()
        };
        assert_eq!(creds, &expected_creds, "{name}: nothing else is set");
    }
}

#[test]
fn upstream_port_variants_of_the_older_table() {
    let auth = WebhookAuth::parse(
        r#"{"users":[{"name":"one.com","user":{"token":"first"}},{"name":"one.com:443","user":{"token":"second"}}]}"#,
    )
    .expect("kubeconfig");
    let token = |t: &str| {
        auth.resolve(t)
            .expect("resolve")
            .and_then(|c| c.bearer_token.clone())
    };
    assert_eq!(token("one.com:443").as_deref(), Some("second"));
    assert_eq!(token("one.com").as_deref(), Some("first"));
    assert_eq!(token("one.com:8443"), None);
}

#[test]
fn refused_entries_fail_only_when_resolved() {
    let auth = WebhookAuth::parse(
        r#"
users:
- name: gcp.example.com:443
  user:
    auth-provider:
      name: gcp
- name: exec.example.com:443
  user:
    exec:
      command: get-token
- name: missing.example.com:443
  user:
    tokenFile: /nonexistent/hookscope-token
- name: "*"
  user:
    token: star
"#,
    )
    .expect("kubeconfig");
    assert_eq!(
        auth.resolve("gcp.example.com:443"),
        Err(AuthError::AuthProviderNotSupported)
    );
    assert_eq!(
        auth.resolve("exec.example.com:443"),
        Err(AuthError::ExecNotSupported)
    );
    assert_eq!(
        auth.resolve("missing.example.com:443"),
        Err(AuthError::File(
            "open /nonexistent/hookscope-token: no such file or directory".into()
        ))
    );
    let star = auth.resolve("other.example.com:443").expect("resolve");
    assert_eq!(star.and_then(|c| c.bearer_token.as_deref()), Some("star"));
}

#[test]
fn client_certificate_files_are_relative_to_the_kubeconfig() {
    let dir = Scratch::new(&format!("hookscope-auth-{}", std::process::id()));
    std::fs::write(dir.join("client.crt"), "CERT").expect("cert");
    std::fs::write(dir.join("client.key"), "KEY").expect("key");
    std::fs::write(dir.join("token"), "file-token").expect("token");
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        r#"
apiVersion: v1
kind: Config
users:
- name: "*.default.svc:443"
  user:
    client-certificate: client.crt
    client-key: client.key
    tokenFile: token
"#,
    )
    .expect("kubeconfig");
    let auth = WebhookAuth::load(&path).expect("load");
    let creds = auth
        .resolve("webhook.default.svc:443")
        .expect("resolve")
        .expect("credentials");
    assert_eq!(creds.client_cert_pem.as_deref(), Some(&b"CERT"[..]));
    assert_eq!(creds.client_key_pem.as_deref(), Some(&b"KEY"[..]));
    assert_eq!(creds.bearer_token.as_deref(), Some("file-token"));
    assert!(creds.has_client_cert());
}

#[test]
fn malformed_kubeconfigs_are_rejected() {
    assert!(matches!(
        WebhookAuth::parse("users: [{name: a}, {name: a}]"),
        Err(AuthError::Parse(_))
    ));
    assert!(matches!(
        WebhookAuth::parse("users:\n- name: a\n  user:\n    client-certificate-data: '***'\n"),
        Err(AuthError::Parse(_))
    ));
    assert!(matches!(
        WebhookAuth::parse("users: 7"),
        Err(AuthError::Parse(_))
    ));
    assert_eq!(
        WebhookAuth::parse("").expect("empty").resolve("x:443"),
        Ok(None)
    );
}

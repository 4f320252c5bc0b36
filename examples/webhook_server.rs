//! Serves admission webhooks over HTTPS on loopback until killed.
//!
//! ```text
//! cargo run --release --example webhook_server -- --listen 127.0.0.1:18443 --out DIR
//! ```
//!
//! Paths: `/allow`, `/deny` (403), `/add-label` (`hookscope.dev/webhook: added`), `/warn`,
//! `/slow` (100 ms). A CA is minted at start; with `--out DIR` it is written to `DIR/ca.pem`
//! together with ready configurations pointing at the server with that CA as caBundle:
//!
//! - `validating.yaml`: one validating webhook, URL `https://<addr>/allow`;
//! - `validating-service.yaml`: the same through the service `webhook-server.hookscope.svc:443`
//!   (use `--resolve webhook-server.hookscope.svc:443=<addr>`; service webhooks use HTTP/1.1);
//! - `mutating.yaml`: one mutating webhook, `/add-label`;
//! - `deny.yaml`: one validating webhook, `/deny`.
//!
//! Options: `--listen ADDR` (default `127.0.0.1:0`), `--out DIR`, `--threads N` (server runtime
//! threads, default 1), `--name DNS` (an extra certificate name, repeatable), `--http1-only`,
//! `--allow-non-loopback`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use base64::Engine as _;
use hookscope::webhook_server::{Behaviours, Pki, ServerOptions, WebhookServer};

/// The service name every certificate carries, for `validating-service.yaml`.
const SERVICE: &str = "webhook-server";
const SERVICE_NAMESPACE: &str = "hookscope";

struct Args {
    opts: ServerOptions,
    out: Option<PathBuf>,
    threads: usize,
    names: Vec<String>,
}

const USAGE: &str = "usage: webhook_server [--listen ADDR] [--out DIR] [--threads N] [--name DNS]... [--http1-only] [--allow-non-loopback]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        opts: ServerOptions::default(),
        out: None,
        threads: 1,
        names: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--listen" => {
                let v = value()?;
                args.opts.listen = v
                    .parse::<SocketAddr>()
                    .map_err(|e| format!("--listen {v}: {e}"))?;
            }
            "--out" => args.out = Some(PathBuf::from(value()?)),
            "--threads" => {
                let v = value()?;
                args.threads = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("--threads {v}: expected a number from 1"))?;
            }
            "--name" => args.names.push(value()?),
            "--http1-only" => args.opts.http2 = false,
            "--allow-non-loopback" => args.opts.allow_non_loopback = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

/// One webhook configuration document.
fn configuration(kind: &str, name: &str, webhook: &str, client_config: &str) -> String {
    let reinvocation = if kind == "MutatingWebhookConfiguration" {
        "\n  reinvocationPolicy: Never"
    } else {
        ""
    };
    format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata:
  name: {name}
webhooks:
- name: {webhook}
  clientConfig:
{client_config}
  rules:
  - operations: [\"*\"]
    apiGroups: [\"*\"]
    apiVersions: [\"*\"]
    resources: [\"*/*\"]
  failurePolicy: Fail
  sideEffects: None
  timeoutSeconds: 10
  admissionReviewVersions: [v1]{reinvocation}
"
    )
}

fn write_files(dir: &PathBuf, server: &WebhookServer, pki: &Pki) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let ca = base64::engine::general_purpose::STANDARD.encode(pki.ca_pem());
    let url = |path: &str| format!("    url: \"{}\"\n    caBundle: {ca}", server.url(path));
    let service = format!(
        "    service: {{name: {SERVICE}, namespace: {SERVICE_NAMESPACE}, path: /allow, port: 443}}\n    caBundle: {ca}"
    );
    let files = [
        (
            "validating.yaml",
            configuration(
                "ValidatingWebhookConfiguration",
                "hookscope-allow",
                "allow.hookscope.dev",
                &url("/allow"),
            ),
        ),
        (
            "validating-service.yaml",
            configuration(
                "ValidatingWebhookConfiguration",
                "hookscope-allow-service",
                "allow.hookscope.dev",
                &service,
            ),
        ),
        (
            "mutating.yaml",
            configuration(
                "MutatingWebhookConfiguration",
                "hookscope-add-label",
                "add-label.hookscope.dev",
                &url("/add-label"),
            ),
        ),
        (
            "deny.yaml",
            configuration(
                "ValidatingWebhookConfiguration",
                "hookscope-deny",
                "deny.hookscope.dev",
                &url("/deny"),
            ),
        ),
        ("ca.pem", pki.ca_pem().to_string()),
    ];
    // Each file appears whole (written aside, then renamed); ca.pem comes last.
    for (name, text) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let service_host = format!("{SERVICE}.{SERVICE_NAMESPACE}.svc");
    let mut names: Vec<&str> = vec![&service_host];
    names.extend(args.names.iter().map(String::as_str));
    let pki = match Pki::mint(&names) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let server =
        match WebhookServer::start_on_thread(&pki, Behaviours::standard(), args.opts, args.threads)
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    if let Some(dir) = &args.out
        && let Err(e) = write_files(dir, &server, &pki)
    {
        eprintln!("writing {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    println!("listening on {}", server.url(""));
    for path in Behaviours::standard().paths() {
        println!("  {}", server.url(path));
    }
    if let Some(dir) = &args.out {
        println!(
            "wrote ca.pem and webhook configurations to {}",
            dir.display()
        );
    }
    loop {
        std::thread::park();
    }
}

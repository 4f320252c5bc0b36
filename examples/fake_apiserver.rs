//! Serves the Kubernetes API subset `hookscope live` uses (list/watch of the webhook
//! configurations, the admission policies and their bindings, namespaces and ConfigMaps,
//! discovery, server-side apply, `/version`, `/metrics`) over TLS on loopback until killed, to
//! try the live console without a cluster.
//!
//! ```text
//! cargo run --example fake_apiserver -- --kubeconfig FILE [--configurations FILE]... [--metrics FILE]
//! hookscope live --kubeconfig FILE
//! ```
//!
//! `--kubeconfig` is where the kubeconfig for the server is written; each `--configurations`
//! file (YAML, one object per document) is created as if by kubectl; `--metrics` is the text
//! `/metrics` serves. The server serves what a 1.33 serves without flags (no
//! MutatingAdmissionPolicy), except that MutatingAdmissionPolicies or bindings given are served
//! in their apiVersion, as by a server whose feature gate is on. Nothing listens beyond
//! 127.0.0.1.

use std::path::PathBuf;
use std::process::ExitCode;

use hookscope::fake_apiserver::{FakeApiServer, FakeResource};
use serde_json::Value;

const USAGE: &str =
    "usage: fake_apiserver --kubeconfig FILE [--configurations FILE]... [--metrics FILE]";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut kubeconfig = None;
    let mut configurations = Vec::new();
    let mut metrics = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let value = args.next();
        match (a.as_str(), value) {
            ("--kubeconfig", Some(v)) => kubeconfig = Some(PathBuf::from(v)),
            ("--configurations", Some(v)) => configurations.push(PathBuf::from(v)),
            ("--metrics", Some(v)) => metrics = Some(PathBuf::from(v)),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(kubeconfig) = kubeconfig else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match serve(&kubeconfig, &configurations, metrics.as_ref()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fake_apiserver: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(
    kubeconfig: &PathBuf,
    configurations: &[PathBuf],
    metrics: Option<&PathBuf>,
) -> Result<(), String> {
    let api = FakeApiServer::start().await.map_err(|e| e.to_string())?;
    for file in configurations {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let objects: Vec<Value> =
            serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        for (i, object) in objects.into_iter().enumerate() {
            if object.is_null() {
                continue;
            }
            // A server that stores a mutating policy serves its version.
            let kind = object["kind"].as_str().unwrap_or_default();
            let version = object["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'));
            if let (Some(resource), Some((_, version))) = (FakeResource::from_kind(kind), version)
                && matches!(
                    resource,
                    FakeResource::MutatingAdmissionPolicies
                        | FakeResource::MutatingAdmissionPolicyBindings
                )
            {
                api.serve_versions(resource, &[version]);
            }
            api.create("kubectl-client-side-apply", object)
                .map_err(|e| format!("{} document {}: {e}", file.display(), i + 1))?;
        }
    }
    if let Some(file) = metrics {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        api.set_metrics(&text);
    }
    std::fs::write(kubeconfig, api.kubeconfig())
        .map_err(|e| format!("{}: {e}", kubeconfig.display()))?;
    println!(
        "serving {} (kubeconfig {}); ctrl-c stops",
        api.url(),
        kubeconfig.display()
    );
    tokio::signal::ctrl_c().await.map_err(|e| e.to_string())?;
    Ok(())
}

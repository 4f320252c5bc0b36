//! `hookscope patch`: apply a JSON patch the way kube-apiserver applies a webhook's patch.

use std::path::PathBuf;
use std::process::ExitCode;

use hookscope::{KubeVersion, jsonpatch};
use serde_json::Value;

use super::Paint;

/// Arguments of `patch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The object (JSON or YAML).
    #[arg(long)]
    pub object: PathBuf,
    /// The JSON patch, as the webhook would send it (raw JSON bytes).
    #[arg(long)]
    pub patch: PathBuf,
}

/// Runs `patch`.
pub fn run(args: &Args, version: KubeVersion) -> Result<ExitCode, String> {
    let paint = Paint::stdout();
    let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let object_text = read(&args.object)?;
    let object: Value = hookscope::json::from_slice(&object_text)
        .or_else(|_| hookscope::yaml::from_slice::<Value>(&object_text).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: not a JSON or YAML object: {e}", args.object.display()))?;
    let patch_bytes = read(&args.patch)?;
    let patch = match jsonpatch::decode(&patch_bytes) {
        Ok(p) => p,
        Err(e) => {
            errln!(
                "{} {}: the patch cannot be decoded: {e}",
                paint.bad("error:"),
                args.patch.display()
            );
            if version.at_least(34) {
                errln!(
                    "the apiserver treats this as a webhook calling error (failurePolicy applies); with Fail the client gets:\n  Internal error occurred: failed calling webhook \"<webhook>\": received undecodable patch in webhook response: {e}"
                );
            } else {
                errln!(
                    "Kubernetes {version} fails the request whatever the failurePolicy:\n  Internal error occurred: {e}"
                );
            }
            return Ok(ExitCode::from(1));
        }
    };
    match patch.apply_to_value(&object) {
        Ok(patched) => {
            if let Some(note) = strict_rfc_difference(&patch_bytes, &object, &patched) {
                errln!("{} {note}", paint.warn("warning:"));
            }
            outln!(
                "{}",
                serde_json::to_string_pretty(&patched).unwrap_or_default()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            errln!("{} the patch does not apply: {e}", paint.bad("error:"));
            errln!(
                "the apiserver fails the request (500) whatever the failurePolicy:\n  Internal error occurred: {e}"
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// Where a strict RFC 6902 implementation disagrees with the apiserver's library, the webhook
/// relies on a quirk; say so.
fn strict_rfc_difference(patch_bytes: &[u8], object: &Value, patched: &Value) -> Option<String> {
    let strict: Result<json_patch::Patch, _> = hookscope::json::from_slice(patch_bytes);
    let mut doc = object.clone();
    let outcome = strict
        .map_err(|e| e.to_string())
        .and_then(|p| json_patch::patch(&mut doc, &p).map_err(|e| e.to_string()));
    match outcome {
        Err(e) => Some(format!(
            "a strict RFC 6902 implementation rejects this patch ({e}); it works only because of kube-apiserver's library quirks"
        )),
        Ok(()) if doc != *patched => {
            Some("a strict RFC 6902 implementation gives a different result; this webhook relies on kube-apiserver's library quirks".into())
        }
        Ok(()) => None,
    }
}

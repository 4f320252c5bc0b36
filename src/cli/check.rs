//! `hookscope check`: defaulting, validation and best-practice warnings.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use hookscope::KubeVersion;
use hookscope::config::policy as policy_config;
use hookscope::config::typecheck;
use hookscope::config::{self, LoadError};

use super::Paint;
use super::configs::{OtherKinds, replaces};

/// Arguments of `check`. Objects of other kinds in the files (a release manifest's Namespaces,
/// Deployments, CustomResourceDefinitions…) are skipped and counted in one line.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders of Mutating/ValidatingWebhookConfiguration and
    /// Mutating/ValidatingAdmissionPolicy(Binding) documents (YAML or JSON, multi-document,
    /// `kind: List`).
    #[arg(long = "webhooks", visible_alias = "admission", required = true, num_args = 1..)]
    pub webhooks: Vec<PathBuf>,
    /// Do not print the defaults that were applied.
    #[arg(long)]
    pub quiet: bool,
}

/// The last line of `check`: how many configurations, how many valid, invalid, and warnings.
fn summary(count: usize, invalid: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    format!(
        "{} checked: {} valid, {} invalid, {}",
        plural(count, "configuration"),
        count - invalid,
        invalid,
        plural(warnings, "warning")
    )
}

/// Runs `check`.
pub fn run(args: &Args, version: KubeVersion) -> Result<ExitCode, String> {
    let paint = Paint::stdout();
    let mut failed = false;
    let mut count = 0;
    let mut invalid = 0;
    let mut warnings = 0;
    let mut other_kinds = OtherKinds::default();
    let mut names = HashMap::new();
    for loaded in config::load_paths(&args.webhooks) {
        if let Err(LoadError::OtherKind {
            kind, api_version, ..
        }) = &loaded
        {
            // Admission policies are read below.
            if !(api_version.starts_with("admissionregistration.k8s.io/")
                && (kind.starts_with("ValidatingAdmissionPolicy")
                    || kind.starts_with("MutatingAdmissionPolicy")))
            {
                other_kinds.add(kind);
            }
            continue;
        }
        count += 1;
        let mut loaded = match loaded {
            Ok(l) => l,
            Err(e) => {
                failed = true;
                invalid += 1;
                outln!("{} {e}", paint.bad("✗"));
                continue;
            }
        };
        loaded.apply_defaults();
        let cfg = &loaded.configuration;
        let mut errors: Vec<String> = (config::validate_in(cfg, None, version).iter())
            .map(ToString::to_string)
            .collect();
        // The file cannot be applied at all: what a gate on configuration changes must see.
        errors.extend(config::unserved(cfg, version).map(|why| format!("apiVersion: {why}")));
        let lints = config::lint(cfg);
        let mark = if errors.is_empty() {
            paint.good("✓")
        } else {
            paint.bad("✗")
        };
        outln!(
            "{mark} {} {} {}",
            cfg.kind.configuration_kind(),
            paint.bold(&cfg.name),
            paint.dim(&format!(
                "({} document {}, {})",
                loaded.source.file,
                loaded.source.document + 1,
                cfg.api_version
            ))
        );
        if !args.quiet {
            for d in &loaded.defaulted {
                outln!("    {} {d}", paint.dim("default"));
            }
        }
        for e in &errors {
            outln!("    {} {e}", paint.bad("error"));
        }
        if let Some(earlier) = names.insert((cfg.kind, cfg.name.clone()), loaded.source.clone())
            && !cfg.name.is_empty()
        {
            warnings += 1;
            outln!(
                "    {} metadata.name: {}",
                paint.warn("warning"),
                replaces(cfg, &earlier)
            );
        }
        warnings += lints.len();
        for l in &lints {
            outln!("    {} {}: {}", paint.warn("warning"), l.field, l.message);
        }
        failed |= !errors.is_empty();
        invalid += usize::from(!errors.is_empty());
    }
    for loaded in config::load_policy_paths(&args.webhooks) {
        let mut loaded = match loaded {
            // Reported with the configurations.
            Err(LoadError::Io { .. }) => continue,
            Ok(l) => l,
            Err(e) => {
                count += 1;
                invalid += 1;
                failed = true;
                outln!("{} {e}", paint.bad("✗"));
                continue;
            }
        };
        count += 1;
        loaded.apply_defaults();
        let object = &loaded.object;
        let mut errors: Vec<String> = (policy_config::validate_policy_object_in(object, version)
            .iter())
        .map(ToString::to_string)
        .collect();
        errors.extend(
            policy_config::unserved(object, version).map(|why| format!("apiVersion: {why}")),
        );
        let mark = if errors.is_empty() {
            paint.good("✓")
        } else {
            paint.bad("✗")
        };
        outln!(
            "{mark} {} {} {}",
            object.kind(),
            paint.bold(object.name()),
            paint.dim(&format!(
                "({} document {}, {})",
                loaded.source.file,
                loaded.source.document + 1,
                object.api_version()
            ))
        );
        if !args.quiet {
            for d in &loaded.defaulted {
                outln!("    {} {d}", paint.dim("default"));
            }
        }
        for e in &errors {
            outln!("    {} {e}", paint.bad("error"));
        }
        if errors.is_empty()
            && let Some(note) = policy_config::needs_enabling(object, version)
        {
            warnings += 1;
            outln!("    {} apiVersion: {note}", paint.warn("warning"));
        }
        if errors.is_empty()
            && let policy_config::PolicyObject::Policy(policy) = object
        {
            // What the status controller writes to status.typeChecking.expressionWarnings; the
            // warning's later lines (snippets, other kinds) are indented under it.
            for w in typecheck::type_check(policy, version) {
                warnings += 1;
                let text = w.warning.trim_end().replace('\n', "\n      ");
                outln!(
                    "    {} status.typeChecking: {}: {text}",
                    paint.warn("warning"),
                    w.field_ref
                );
            }
        }
        warnings += loaded.unknown_fields.len();
        for f in &loaded.unknown_fields {
            outln!(
                "    {} {f}: unknown field (the apiserver drops it)",
                paint.warn("warning")
            );
        }
        failed |= !errors.is_empty();
        invalid += usize::from(!errors.is_empty());
    }
    if count == 0 {
        let also = if other_kinds.is_empty() {
            String::new()
        } else {
            format!(" ({other_kinds})")
        };
        return Err(format!(
            "no webhook configurations or admission policies found in the given paths{also}"
        ));
    }
    if !other_kinds.is_empty() {
        outln!("{}", paint.dim(&other_kinds.to_string()));
    }
    outln!("{}", summary(count, invalid, warnings));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

//! The conventions of a command-line tool: shell completions and a man page generated from the
//! clap definitions, `version`, and a hint toward the right flag when an argument is not one.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};

/// Writes the completion script of `shell` for `cmd` to standard output.
pub fn completions(mut cmd: clap::Command, shell: clap_complete::Shell) -> ExitCode {
    let name = cmd.get_name().to_string();
    clap_complete::generate(shell, &mut cmd, name, &mut super::Stdout);
    ExitCode::SUCCESS
}

/// Writes the man page of `cmd` (roff, section 1) to standard output, its subcommands included.
pub fn man(cmd: clap::Command) -> Result<ExitCode, String> {
    let cmd = cmd.subcommand_negates_reqs(false);
    clap_mangen::Man::new(cmd.clone())
        .render(&mut super::Stdout)
        .map_err(|e| format!("writing the man page: {e}"))?;
    // Each subcommand's options as a section of its own.
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{} {}", cmd.get_name(), sub.get_name());
        outln!(".SH \"{}\"", name.to_uppercase());
        clap_mangen::Man::new(sub.clone())
            .render_description_section(&mut super::Stdout)
            .and_then(|()| {
                clap_mangen::Man::new(sub.clone()).render_options_section(&mut super::Stdout)
            })
            .map_err(|e| format!("writing the man page: {e}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `hookscope version`: the version and the Kubernetes releases modelled.
pub fn version() -> ExitCode {
    use hookscope::KubeVersion;
    outln!("hookscope {}", env!("CARGO_PKG_VERSION"));
    outln!(
        "models kube-apiserver {} to {} (default {})",
        KubeVersion::OLDEST,
        KubeVersion::NEWEST,
        KubeVersion::default()
    );
    ExitCode::SUCCESS
}

/// A hint toward the right flag for an argument clap refused, given the subcommand it was
/// typed for: files given without their flag, `-o`/`--output` as kubectl spells the format.
pub fn hint(e: &clap::Error, subcommand: Option<&str>) -> Option<String> {
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let arg = arg.as_str();
    let flag = arg.split('=').next().unwrap_or(arg);
    if matches!(flag, "-o" | "--output" | "--out" | "-f") && subcommand == Some("replay") {
        return Some(
            "the output format is --format text|json|junit, and --report FILE writes the JSON report"
                .into(),
        );
    }
    if matches!(flag, "-o" | "--output") {
        return Some(match subcommand {
            Some("check") => "check writes its findings as text; its exit status is 1 when a configuration is invalid".into(),
            _ => "the output format is chosen with --format (hookscope replay --format json)".into(),
        });
    }
    if arg.starts_with('-') {
        return None;
    }
    Some(match subcommand {
        Some("check") => {
            format!("files and folders are given with --webhooks: hookscope check --webhooks {arg}")
        }
        Some("replay") | Some("tui") => format!(
            "configurations are given with --webhooks and requests with --input: --webhooks CONFIG --input {arg}"
        ),
        Some("patch") => {
            "the object and the patch are given with their flags: hookscope patch --help".into()
        }
        _ => return None,
    })
}

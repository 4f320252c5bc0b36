//! The `hookscope` command.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod allocator;
#[macro_use]
mod cli;
mod sched;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

/// A terminal console for Kubernetes admission webhooks, built on a faithful re-implementation
/// of kube-apiserver's webhook dispatcher.
#[derive(Debug, Parser)]
#[command(name = "hookscope", version, about, long_about = None)]
struct Cli {
    /// Kubernetes release whose behaviour to model (1.28 to 1.37; default the newest, and for
    /// `live` the server's own).
    #[arg(long, global = true)]
    kube_version: Option<hookscope::KubeVersion>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Default and validate webhook configurations as the apiserver would, with best-practice
    /// warnings; objects of other kinds in the files (a release manifest's) are skipped. Exits 1
    /// when any configuration is invalid, unreadable or under an apiVersion no longer served.
    Check(cli::check::Args),
    /// Apply a JSON patch to an object with kube-apiserver's patch semantics (evanphx/json-patch
    /// v4). Exits 1 when the apiserver would refuse the patch.
    Patch(cli::patch::Args),
    /// Replay captured AdmissionReviews or audit logs through the dispatcher against real,
    /// recorded or scripted webhooks. Exits 0 when the replay ran (whatever was allowed or
    /// denied), 1 on --expect mismatches, 2 on bad usage or a path that yields nothing usable.
    Replay(Box<cli::replay::Args>),
    /// The console: replay captured requests (same source flags as replay) and step through
    /// every webhook call, annotation and metric; edit the configurations in place (saved back
    /// to their files) and see which outcomes change. `hookscope` alone opens it on the embedded
    /// demo.
    Tui(Box<cli::tui::Args>),
    /// The console on a live cluster: its webhook configurations and admission policies with
    /// their bindings (watched, with a history of changes), the apiserver's webhook and policy
    /// metrics (scraped) and audit events (from a followed log or as the audit webhook backend),
    /// replayable against the configurations in force.
    /// Read-only unless --allow-writes.
    Live(Box<cli::live::Args>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell), e.g.
    /// `hookscope completions bash > /etc/bash_completion.d/hookscope`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `hookscope man | man -l -`.
    Man,
    /// Print the version and the Kubernetes releases modelled.
    Version,
}

/// The subcommand named on the command line, if any (for the hints that follow a usage error).
fn subcommand_typed() -> Option<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    std::env::args()
        .skip(1)
        .find(|a| cmd.find_subcommand(a).is_some())
}

fn main() -> ExitCode {
    // A request's object may be nested as deep as kube-apiserver accepts, and the objects are
    // walked recursively: the command runs on a thread with a stack deep enough for them.
    match hookscope::json::spawn("main", run).map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(e) => {
            errln!("error: cannot start the main thread: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let hint = cli::conventions::hint(&e, subcommand_typed().as_deref());
            let _ = e.print();
            if let Some(hint) = hint {
                errln!("\n  hint: {hint}");
            }
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let version = cli.kube_version.unwrap_or_default();
    let result = match cli.command {
        Some(Command::Completions { shell }) => {
            use clap::CommandFactory;
            Ok(cli::conventions::completions(Cli::command(), shell))
        }
        Some(Command::Man) => {
            use clap::CommandFactory;
            cli::conventions::man(Cli::command())
        }
        Some(Command::Version) => Ok(cli::conventions::version()),
        Some(Command::Check(args)) => cli::check::run(&args, version),
        Some(Command::Patch(args)) => cli::patch::run(&args, version),
        Some(Command::Replay(args)) => cli::replay::run(&args, version),
        Some(Command::Tui(args)) => cli::tui::run(&args, version),
        Some(Command::Live(args)) => cli::live::run(&args, cli.kube_version),
        // The console needs a terminal; piped or scripted, show the usage instead.
        None if !std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            use clap::CommandFactory;
            let _ = Cli::command().print_help();
            Ok(ExitCode::SUCCESS)
        }
        None => cli::tui::run(&cli::tui::Args::demo(), version),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

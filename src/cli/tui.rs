//! `hookscope tui` (and `hookscope` alone): the console over a replay or the embedded demo.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hookscope::KubeVersion;
use hookscope::replay::report::{Problem, ProblemKind, Report};
use hookscope::replay::run::IdMode;
use hookscope::tui::app::State;
use hookscope::tui::source::{
    ConfigDocument, ConsoleReplier, DocumentOrigin, ReplayInput, ReplaySource, Source,
};
use hookscope::tui::theme::Theme;

use super::replay::SourceArgs;

/// Arguments of `tui`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Files or folders of admission configurations: Mutating/ValidatingWebhookConfigurations,
    /// Mutating/ValidatingAdmissionPolicies and their bindings.
    /// Without --webhooks and --input, the console opens the embedded demo (as `hookscope`
    /// alone does).
    #[arg(long = "webhooks", visible_alias = "admission", num_args = 1.., requires = "input")]
    pub webhooks: Vec<PathBuf>,
    /// Captured requests: AdmissionReview documents or audit.k8s.io/v1 audit logs; `-` reads
    /// standard input.
    #[arg(long = "input", num_args = 1.., requires = "webhooks")]
    pub input: Vec<String>,
    /// Where requests are looked up and answered, and how they are dispatched.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Theme: default, light, high-contrast, or a TOML file overlaying the default; given, it
    /// wins over the settings file's theme. [default: default]
    #[arg(long = "theme", value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// List among the problems the documents of other kinds the --webhooks files held
    /// (skipped).
    #[arg(short, long)]
    pub verbose: bool,
    /// Open the embedded demo (webhooks served over HTTPS on 127.0.0.1).
    #[arg(long = "demo", conflicts_with_all = ["webhooks", "input"])]
    pub demo: bool,
    /// Open the embedded demo answered in process (no sockets, fixed durations).
    #[arg(long = "demo-offline", conflicts_with_all = ["webhooks", "input", "demo"])]
    pub demo_offline: bool,
    /// For benchmarking start-up only: end as soon as the first frame is drawn.
    #[arg(long = "exit-after-first-frame", hide = true)]
    pub exit_after_first_frame: bool,
}

impl Args {
    /// The arguments of `hookscope` alone: the demo.
    pub fn demo() -> Args {
        Args {
            demo: true,
            ..Args::default()
        }
    }
}

/// The replay source of files given on the command line.
fn file_source(args: &Args, version: KubeVersion) -> Result<ReplaySource, String> {
    let mut report = Report::new(version, args.source.audit_level);
    let loaded = super::configs::load_configurations(&args.webhooks, version, &mut report);
    let configs = loaded.all();
    let policies = loaded.policies.clone();
    let skipped = if args.verbose {
        loaded.skipped
    } else {
        Vec::new()
    };
    // One document per file that gave a configuration, a policy or a binding, in reading
    // order: editing it replaces exactly what it contributed.
    let mut files: Vec<String> = loaded.by_file.iter().map(|(f, _)| f.clone()).collect();
    for (file, _) in &loaded.policies_by_file {
        if !files.contains(file) {
            files.push(file.clone());
        }
    }
    let documents = files
        .into_iter()
        .filter_map(|file| {
            // Read a second time for editing; a file gone since is simply not editable.
            let text = std::fs::read_to_string(&file).ok()?;
            let configurations = (loaded.by_file.iter())
                .filter(|(f, _)| *f == file)
                .flat_map(|(_, c)| c.iter().cloned())
                .collect();
            let policies = (loaded.policies_by_file.iter())
                .filter(|(f, _)| *f == file)
                .flat_map(|(_, p)| p.iter().cloned())
                .collect();
            Some(ConfigDocument {
                origin: DocumentOrigin::File(PathBuf::from(file)),
                text,
                configurations,
                policies,
            })
        })
        .collect();
    let replier = args.source.replier()?;
    let (replayer, reader, cluster_problems) = args
        .source
        .replayer_and_reader(&configs, &policies, version, true);
    let problems = (report.problems.iter().cloned())
        .chain((cluster_problems.iter()).map(|p| Problem::from_input(ProblemKind::Invalid, p)))
        .chain(
            skipped
                .into_iter()
                .map(|s| Problem::note(ProblemKind::Warning, s)),
        )
        .collect();
    let files = args.input.len();
    Ok(ReplaySource {
        label: format!("replay {files} file{}", if files == 1 { "" } else { "s" }),
        replayer,
        input: ReplayInput::Files {
            paths: args.input.clone(),
            reader: Box::new(reader),
        },
        replier: ConsoleReplier::Replay(replier),
        ids: IdMode::Random,
        problems,
        server: None,
        documents,
    })
}

/// Runs the console.
pub fn run(args: &Args, version: KubeVersion) -> Result<ExitCode, String> {
    let theme = Theme::load(args.theme.as_deref().unwrap_or("default"))
        .map_err(|e| format!("--theme: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(hookscope::json::STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let mut state = State::new(version.to_string(), args.source.audit_level, theme);
    state.theme_from_command_line = args.theme.is_some();
    runtime.block_on(async {
        let source = if args.demo_offline {
            hookscope::tui::demo::offline(version)
        } else if args.demo || (args.webhooks.is_empty() && args.input.is_empty()) {
            hookscope::tui::demo::start(version)
                .await
                .map_err(|e| e.to_string())?
        } else {
            file_source(args, version)?
        };
        // The status bar names the source from the first frame, before the source task runs.
        state.source = source.label.clone();
        let source: Box<dyn Source> = Box::new(source);
        let options = hookscope::tui::RunOptions {
            exit_after_first_frame: args.exit_after_first_frame,
        };
        hookscope::tui::run_with(source, state, options)
            .await
            .map_err(|e| e.to_string())
    })?;
    runtime.shutdown_timeout(Duration::from_millis(200));
    Ok(ExitCode::SUCCESS)
}

//! `hookscope tui` (and `hookscope` alone): the console over a replay or the embedded demo.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hookscope::KubeVersion;
use hookscope::engine::{AuditLevel, Engine, EngineOptions};
use hookscope::replay::input::ClusterState;
use hookscope::replay::record::RecordedReplies;
use hookscope::replay::report::Report;
use hookscope::replay::run::{ReplaySettings, Replayer};
use hookscope::script::ScriptedReplier;
use hookscope::transport::{HttpsOptions, HttpsReplier, WebhookAuth};
use hookscope::tui::app::State;
use hookscope::tui::source::{AnyReplier, ReplayInput, ReplaySource, Source};
use hookscope::tui::theme::Theme;

/// Arguments of `tui`.
#[derive(Debug, Default, clap::Args)]
pub struct Args {
    /// Files or folders of Mutating/ValidatingWebhookConfiguration documents.
    #[arg(long = "webhooks", num_args = 1.., required_unless_present_any = ["demo", "demo_offline"])]
    pub webhooks: Vec<PathBuf>,
    /// Captured requests: AdmissionReview documents or audit.k8s.io/v1 audit logs; `-` reads
    /// standard input.
    #[arg(long = "input", num_args = 1.., required_unless_present_any = ["demo", "demo_offline"])]
    pub input: Vec<String>,
    /// Objects the dispatcher may look up (Namespaces with their labels, stored objects).
    #[arg(long = "cluster", num_args = 1..)]
    pub cluster: Vec<PathBuf>,
    /// Send calls meant for HOST:PORT to ADDR:PORT; TLS still verifies HOST.
    #[arg(long = "resolve", value_name = "HOST:PORT=ADDR:PORT")]
    pub resolve: Vec<String>,
    /// Kubeconfig-format credentials for webhooks (the apiserver's admission kubeConfigFile).
    #[arg(long = "webhook-auth", value_name = "FILE")]
    pub webhook_auth: Option<PathBuf>,
    /// Answer webhook calls from exchanges saved with `replay --record`, offline.
    #[arg(long = "replies", value_name = "DIR", conflicts_with = "script")]
    pub replies: Option<PathBuf>,
    /// Answer webhook calls from a script (see `replay --script`).
    #[arg(long = "script", value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Audit level of the annotations shown.
    #[arg(long = "audit-level", default_value = "Request")]
    pub audit_level: AuditLevel,
    /// Requests dispatched at once (results stay in input order).
    #[arg(long = "concurrency", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// The apiserver's request deadline in seconds.
    #[arg(long = "request-timeout", default_value_t = 60)]
    pub request_timeout: u64,
    /// Theme: default, light, high-contrast, or a TOML file overlaying the default.
    #[arg(long = "theme", value_name = "NAME|PATH", default_value = "default")]
    pub theme: String,
    /// Open the embedded demo (webhooks served over HTTPS on 127.0.0.1).
    #[arg(long = "demo", conflicts_with_all = ["webhooks", "input"])]
    pub demo: bool,
    /// Open the embedded demo answered in process (no sockets, fixed durations).
    #[arg(long = "demo-offline", conflicts_with_all = ["webhooks", "input", "demo"])]
    pub demo_offline: bool,
}

impl Args {
    /// The arguments of `hookscope` alone: the demo.
    pub fn demo() -> Args {
        Args {
            demo: true,
            audit_level: AuditLevel::Request,
            concurrency: 1,
            request_timeout: 60,
            theme: "default".into(),
            ..Args::default()
        }
    }
}

/// The replay source of files given on the command line.
fn file_source(args: &Args, version: KubeVersion) -> Result<ReplaySource, String> {
    let mut report = Report::new(version, args.audit_level);
    let configs = super::replay::load_configurations(&args.webhooks, &mut report)?;
    let mut problems: Vec<String> = report
        .problems
        .iter()
        .map(|p| format!("{}: {}", p.source, p.message))
        .collect();
    let replier = if let Some(dir) = &args.replies {
        AnyReplier::Recorded(RecordedReplies::load(dir).map_err(|e| format!("--replies: {e}"))?)
    } else if let Some(path) = &args.script {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--script {}: {e}", path.display()))?;
        AnyReplier::Scripted(
            ScriptedReplier::from_yaml(&text)
                .map_err(|e| format!("--script {}: {e}", path.display()))?,
        )
    } else {
        let auth = match &args.webhook_auth {
            Some(p) => WebhookAuth::load(p).map_err(|e| format!("--webhook-auth: {e}"))?,
            None => WebhookAuth::empty(),
        };
        AnyReplier::Https(HttpsReplier::new(HttpsOptions {
            auth,
            resolve: super::replay::parse_resolve(&args.resolve)?,
            ..HttpsOptions::default()
        }))
    };
    let (cluster, cluster_problems) = ClusterState::load(&args.cluster);
    problems.extend(cluster_problems.iter().map(ToString::to_string));
    let engine = Arc::new(Engine::new(&configs, EngineOptions::for_version(version)));
    let files = args.input.len();
    Ok(ReplaySource {
        label: format!("replay {files} file{}", if files == 1 { "" } else { "s" }),
        replayer: Replayer::new(
            engine,
            ReplaySettings {
                deadline: Some(Duration::from_secs(args.request_timeout)),
                concurrency: usize::from(args.concurrency),
            },
        ),
        input: ReplayInput::Files {
            paths: args.input.clone(),
            cluster,
        },
        replier,
        concurrency: usize::from(args.concurrency),
        sequential_ids: false,
        problems,
        server: None,
    })
}

/// Runs the console.
pub fn run(args: &Args, version: KubeVersion) -> Result<ExitCode, String> {
    let theme = Theme::load(&args.theme).map_err(|e| format!("--theme: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let state = State::new(version.to_string(), args.audit_level, theme);
    runtime.block_on(async {
        let source: Box<dyn Source> = if args.demo_offline {
            Box::new(hookscope::tui::demo::offline(version))
        } else if args.demo {
            Box::new(
                hookscope::tui::demo::start(version)
                    .await
                    .map_err(|e| e.to_string())?,
            )
        } else {
            Box::new(file_source(args, version)?)
        };
        hookscope::tui::run(source, state)
            .await
            .map_err(|e| e.to_string())
    })?;
    runtime.shutdown_timeout(Duration::from_millis(200));
    Ok(ExitCode::SUCCESS)
}

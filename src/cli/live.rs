//! `hookscope live`: the console on a cluster — its webhook configurations, `/metrics` and audit
//! events — read-only unless asked otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use hookscope::KubeVersion;
use hookscope::live::audit::{AuditWebhookOptions, CaptureOptions, FollowOptions, WebhookTls};
use hookscope::live::cluster::{ClusterOptions, PrometheusOptions};
use hookscope::replay::InputItem;
use hookscope::replay::input::ClusterState;
use hookscope::tui::app::State;
use hookscope::tui::live::{DEFAULT_KEEP_EVENTS, LiveState, WINDOWS};
use hookscope::tui::live_source::{AuditInput, LiveRelease, LiveSource, start_audit_webhook};
use hookscope::tui::source::ConsoleReplier;
use hookscope::tui::theme::Theme;

use super::replay::SourceArgs;

/// Arguments of `live`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The kubeconfig (else `KUBECONFIG`, else `~/.kube/config`).
    #[arg(long = "kubeconfig", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (else its current-context).
    #[arg(long = "context", value_name = "NAME")]
    pub context: Option<String>,
    /// Show only this namespace's audit events and annotations (`:ns` changes it in the
    /// console); also the client's default namespace.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    pub namespace: Option<String>,
    /// How often the apiserver's `/metrics` is scraped: `10s`, `500ms`, `1m`.
    #[arg(long = "scrape-interval", value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    /// Permit writes to the cluster (applying an edited configuration, after a server-side dry
    /// run and a confirmation). Off by default: hookscope live only reads.
    #[arg(long = "allow-writes")]
    pub allow_writes: bool,
    /// Read the admission metrics from this Prometheus-compatible API (Prometheus, Thanos,
    /// Mimir: the base URL under which `/api/v1/query` is served) instead of scraping
    /// `/metrics`: per apiserver (the `instance` label), with the history from before the
    /// console started, queried every --scrape-interval.
    #[arg(long = "prometheus", value_name = "URL")]
    pub prometheus: Option<String>,
    /// The CA certificates (PEM) that sign --prometheus's server certificate (else the system's
    /// roots).
    #[arg(long = "prometheus-ca", value_name = "FILE", requires = "prometheus")]
    pub prometheus_ca: Option<PathBuf>,
    /// A file holding the bearer token --prometheus wants (read again when it changes).
    #[arg(
        long = "prometheus-token-file",
        value_name = "FILE",
        requires = "prometheus"
    )]
    pub prometheus_token_file: Option<PathBuf>,
    /// Follow an apiserver audit log (JSON lines) as it grows, across rotations.
    #[arg(
        long = "follow-audit-log",
        value_name = "PATH",
        conflicts_with = "audit_webhook"
    )]
    pub follow_audit_log: Option<PathBuf>,
    /// With --follow-audit-log: read the file from its start, not only what is written from now.
    #[arg(long = "from-start", requires = "follow_audit_log")]
    pub from_start: bool,
    /// Serve as the apiserver's audit webhook backend on this address (HTTPS; loopback only
    /// unless --audit-webhook-allow-remote), e.g. `127.0.0.1:9443`.
    #[arg(long = "audit-webhook", value_name = "ADDR")]
    pub audit_webhook: Option<SocketAddr>,
    /// The audit webhook's certificate chain (PEM); a CA and certificate are minted otherwise.
    #[arg(long = "audit-webhook-cert", value_name = "FILE", requires_all = ["audit_webhook", "audit_webhook_key"])]
    pub audit_webhook_cert: Option<PathBuf>,
    /// The audit webhook's private key (PEM).
    #[arg(long = "audit-webhook-key", value_name = "FILE", requires_all = ["audit_webhook", "audit_webhook_cert"])]
    pub audit_webhook_key: Option<PathBuf>,
    /// The name or address the apiserver reaches the audit webhook by (in the kubeconfig URL and
    /// the minted certificate); default the listening address.
    #[arg(
        long = "audit-webhook-host",
        value_name = "HOST",
        requires = "audit_webhook"
    )]
    pub audit_webhook_host: Option<String>,
    /// Write the kubeconfig for the apiserver's `--audit-webhook-config-file` here (it is printed
    /// otherwise).
    #[arg(
        long = "audit-webhook-kubeconfig",
        value_name = "FILE",
        requires = "audit_webhook"
    )]
    pub audit_webhook_kubeconfig: Option<PathBuf>,
    /// Let --audit-webhook listen on a non-loopback address (it accepts whatever is posted).
    #[arg(long = "audit-webhook-allow-remote", requires = "audit_webhook")]
    pub audit_webhook_allow_remote: bool,
    /// Save the audit events as a capture `hookscope replay` and `hookscope tui` read back.
    #[arg(long = "capture", value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// Keep Secret values in the capture (redacted by default).
    #[arg(long = "show-secrets", requires = "capture")]
    pub show_secrets: bool,
    /// Audit events kept in the console; older ones are paged out.
    #[arg(long = "keep-events", value_name = "N", default_value_t = DEFAULT_KEEP_EVENTS)]
    pub keep_events: usize,
    /// Captured requests (AdmissionReviews or audit logs) to replay against the configurations
    /// in force once they are listed.
    #[arg(long = "input", num_args = 1..)]
    pub input: Vec<String>,
    /// Where replayed requests are looked up and answered.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Theme: default, light, high-contrast, or a TOML file overlaying the default.
    #[arg(long = "theme", value_name = "NAME|PATH", default_value = "default")]
    pub theme: String,
}

/// `10s`, `250ms`, `2m`, `1h`, or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|i| t.split_at(i))
        .unwrap_or((t, "s"));
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 10s, 500ms or 1m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    if !(secs >= 0.1 && secs.is_finite()) {
        return Err(format!("{text:?}: at least 100ms"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs the console on a cluster, modelling `kube_version` (`--kube-version`) or, without it,
/// the server's own release once `/version` answers.
pub fn run(args: &Args, kube_version: Option<KubeVersion>) -> Result<ExitCode, String> {
    let version = kube_version.unwrap_or_default();
    let theme = Theme::load(&args.theme).map_err(|e| format!("--theme: {e}"))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(hookscope::json::STACK_BYTES)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let cluster = ClusterOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        scrape_interval: args.scrape_interval,
        allow_writes: args.allow_writes,
        prometheus: args.prometheus.clone().map(|url| PrometheusOptions {
            url,
            ca_file: args.prometheus_ca.clone(),
            token_file: args.prometheus_token_file.clone(),
            history: WINDOWS[WINDOWS.len() - 1],
        }),
        ..ClusterOptions::default()
    };
    if let Some(prometheus) = &cluster.prometheus {
        prometheus.config().map_err(|e| e.to_string())?;
    }
    let replier = args.source.replier()?;
    let (replayer, reader, problems) =
        args.source
            .replayer_and_reader(&[], &Default::default(), version, true);
    if let Some(p) = problems.first() {
        return Err(format!("--cluster: {p}"));
    }
    let mut loaded = Vec::new();
    if !args.input.is_empty() {
        let (_, mut input_reader, _) =
            args.source
                .replayer_and_reader(&[], &Default::default(), version, true);
        let (_, failures) = input_reader.read_paths(&args.input, None, &mut |item| {
            if let InputItem::Request(_) = item {
                loaded.push(item);
            }
        });
        if let Some(p) = failures.first() {
            return Err(format!("--input: {p}"));
        }
    }
    let mut summary = vec![match &args.context {
        Some(c) => format!("context {c}"),
        None => "current context".into(),
    }];
    let state = runtime.block_on(async {
        let audit = match (&args.follow_audit_log, args.audit_webhook) {
            (Some(path), _) => {
                summary.push(format!("following {}", path.display()));
                Some(AuditInput::Follow {
                    path: path.clone(),
                    options: FollowOptions {
                        from_start: args.from_start,
                        ..FollowOptions::default()
                    },
                })
            }
            (None, Some(listen)) => {
                let tls = match (&args.audit_webhook_cert, &args.audit_webhook_key) {
                    (Some(cert), Some(key)) => WebhookTls::Files {
                        cert: cert.clone(),
                        key: key.clone(),
                        ca: None,
                    },
                    _ => WebhookTls::Mint,
                };
                let options = AuditWebhookOptions {
                    listen,
                    allow_non_loopback: args.audit_webhook_allow_remote,
                    host: args.audit_webhook_host.clone(),
                    tls,
                    ..AuditWebhookOptions::default()
                };
                let input = start_audit_webhook(options).await.map_err(|e| {
                    let hint = if listen.ip().is_loopback() || args.audit_webhook_allow_remote {
                        ""
                    } else {
                        "; add --audit-webhook-allow-remote to listen beyond loopback"
                    };
                    format!("--audit-webhook: {e}{hint}")
                })?;
                if let AuditInput::Webhook { server, .. } = &input {
                    let kubeconfig = server.kubeconfig();
                    match &args.audit_webhook_kubeconfig {
                        Some(path) => {
                            hookscope::edit::save_atomic(path, &kubeconfig)
                                .map_err(|e| format!("--audit-webhook-kubeconfig: {e}"))?;
                            summary.push(format!(
                                "audit webhook {} (kubeconfig {})",
                                server.url(),
                                path.display()
                            ));
                        }
                        None => {
                            outln!(
                                "# kubeconfig for the apiserver's --audit-webhook-config-file:\n{kubeconfig}"
                            );
                            summary.push(format!("audit webhook {}", server.url()));
                        }
                    }
                }
                Some(input)
            }
            (None, None) => None,
        };
        if let Some(c) = &args.capture {
            summary.push(format!("capturing to {}", c.display()));
        }
        let source = LiveSource {
            cluster,
            audit,
            capture: args.capture.clone().map(|path| {
                (
                    path,
                    CaptureOptions {
                        show_secrets: args.show_secrets,
                        ..CaptureOptions::default()
                    },
                )
            }),
            reader,
            engine_options: replayer.engine().options().clone(),
            release: match kube_version {
                Some(_) => LiveRelease::Fixed,
                None => LiveRelease::Server(ClusterState::load(&args.source.cluster).0),
            },
            settings: replayer.settings().clone(),
            replier: ConsoleReplier::Replay(replier),
            loaded,
        };
        let mut state = State::new(version.to_string(), args.source.audit_level, theme);
        let mut live = LiveState::new(summary.join(" · "), args.keep_events, args.allow_writes);
        live.namespace = args.namespace.clone();
        state.live = Some(Box::new(live));
        state.view = hookscope::tui::app::View::Cluster;
        hookscope::tui::run(Box::new(source), state)
            .await
            .map_err(|e| e.to_string())
    });
    runtime.shutdown_timeout(Duration::from_millis(200));
    state?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_read_as_kubectl_users_write_them() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }
}

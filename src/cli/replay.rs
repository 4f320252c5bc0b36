//! `hookscope replay`: captured requests through the dispatcher, headless.

use std::fs::File;
use std::future::Future;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use futures::future::Either;
use hookscope::KubeVersion;
use hookscope::api::WebhookConfiguration;
use hookscope::engine::{AuditLevel, Engine, EngineOptions, Replier, Reply, WebhookCall};
use hookscope::replay::audit_log::AuditEvent;
use hookscope::replay::expect::{Expectations, Mismatch};
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::replay::junit::JUnit;
use hookscope::replay::record::Recorder;
use hookscope::replay::replier::{AnyReplier, ReplierFlags};
use hookscope::replay::report::{
    Problem, ProblemKind, Report, ReportWriter, RequestReport, SecretPolicy,
};
use hookscope::replay::run::{Batching, Dispatched, ReplayEvent, ReplaySettings, Replayer};
use hookscope::replay::{IndexUnit, InputItem, InputProblem, SourceRef};

use super::Paint;

/// What goes to standard output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A summary for people: problems, denials and failures, per-webhook counts.
    Text,
    /// The JSON report.
    Json,
    /// JUnit XML, one test case per request.
    Junit,
}

/// Arguments of `replay`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders of admission configurations: Mutating/ValidatingWebhookConfigurations,
    /// Mutating/ValidatingAdmissionPolicies and their bindings.
    #[arg(long = "webhooks", visible_alias = "admission", required = true, num_args = 1..)]
    pub webhooks: Vec<PathBuf>,
    /// Captured requests: AdmissionReview documents or bare AdmissionRequests (JSON, YAML, JSON
    /// lines), audit.k8s.io audit logs (JSON lines of Event, an EventList, or the envelopes of
    /// AKS, CloudWatch and container log lines around them), or plain manifests, replayed as
    /// `kubectl create -f` would create them: decoded and defaulted as the apiserver does before
    /// admission, and refused as it refuses them when their kind cannot take them (unknown
    /// fields, values of the wrong type; the problem names the field's line). `-` reads standard
    /// input.
    #[arg(long = "input", required = true, num_args = 1..)]
    pub input: Vec<String>,
    /// Write one audit.k8s.io/v1 Event per replayed request (JSON lines).
    #[arg(long = "audit-log", value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// Write the webhook metrics in Prometheus text format at the end.
    #[arg(long = "metrics", value_name = "FILE")]
    pub metrics: Option<PathBuf>,
    /// Write the JSON report.
    #[arg(long = "report", value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// What goes to standard output.
    #[arg(long = "format", value_enum, default_value = "text")]
    pub format: Format,
    /// Save every webhook exchange under DIR.
    #[arg(long = "record", value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Expected outcomes per request; mismatches are printed and the exit code is 1.
    #[arg(long = "expect", value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// Where requests are looked up and answered, and how they are dispatched.
    #[command(flatten)]
    pub source: SourceArgs,
    /// Print Secret data as captured instead of redacting it.
    #[arg(long = "show-secrets")]
    pub show_secrets: bool,
    /// Text format: list every request, not only denials, failures and problems. Also say which
    /// documents of other kinds the --webhooks files held (skipped).
    #[arg(short, long)]
    pub verbose: bool,
    /// Threads that run the HTTPS connections (TLS and HTTP) beside the one dispatching; 0 keeps
    /// them on that thread. Inputs are read and outputs written on two threads of their own,
    /// which Linux runs as batch work (SCHED_BATCH) so that they do not preempt the dispatching.
    #[arg(long = "io-threads", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=64))]
    pub io_threads: u16,
}

/// The flags `replay` and `tui` share: what the dispatcher may look up, where webhook answers
/// come from, and how requests are dispatched.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// Objects the dispatcher may look up (Namespaces with their labels, stored objects).
    #[arg(long = "cluster", num_args = 1..)]
    pub cluster: Vec<PathBuf>,
    /// Send calls meant for HOST:PORT (a service NAME.NS.svc:PORT or a URL host) to ADDR:PORT;
    /// TLS still verifies HOST.
    #[arg(long = "resolve", value_name = "HOST:PORT=ADDR:PORT")]
    pub resolve: Vec<String>,
    /// Kubeconfig-format credentials for webhooks (the apiserver's admission kubeConfigFile).
    #[arg(long = "webhook-auth", value_name = "FILE")]
    pub webhook_auth: Option<PathBuf>,
    /// Answer webhook calls from exchanges saved with `replay --record`, offline.
    #[arg(long = "replies", value_name = "DIR", conflicts_with = "script")]
    pub replies: Option<PathBuf>,
    /// Answer webhook calls from a script: a YAML mapping of webhook name to reply (allowed,
    /// code, message, reason, patch, warnings, auditAnnotations, delayMs, error).
    #[arg(long = "script", value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Audit level of the annotations (and of `replay --audit-log` events).
    #[arg(long = "audit-level", default_value = "Request")]
    pub audit_level: AuditLevel,
    /// Requests dispatched at once (results stay in input order). Over HTTP/1.1 (service
    /// references, URLs not on loopback) at most 25 idle connections per webhook server are
    /// kept, as kube-apiserver's client does: above 25 calls at once to one server, the calls
    /// beyond them dial and handshake a new connection each.
    #[arg(long = "concurrency", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// The apiserver's request deadline in seconds, which bounds all webhook calls of a request.
    #[arg(long = "request-timeout", default_value_t = 60)]
    pub request_timeout: u64,
    /// The apiserver's `--api-audiences` (default: its `--service-account-issuer`): what a
    /// TokenRequest that names no audience gets before validation. kubeadm's issuer is
    /// `https://kubernetes.default.svc.cluster.local`; a cluster's own is in its
    /// `/.well-known/openid-configuration`.
    #[arg(long = "api-audiences", value_delimiter = ',', default_value = hookscope::engine::DEFAULT_API_AUDIENCE)]
    pub api_audiences: Vec<String>,
    /// The user plain manifests in --input are created as (as `kubectl --as`); without it,
    /// kubeadm's `kubernetes-admin` in `system:masters`, with a note on each request.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// The uid of the --as user.
    #[arg(long = "as-uid", value_name = "UID", requires = "as_user")]
    pub as_uid: Option<String>,
    /// A group of the --as user (repeatable); `system:authenticated` is always added.
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    pub as_group: Vec<String>,
}

impl Default for SourceArgs {
    fn default() -> Self {
        Self {
            cluster: Vec::new(),
            resolve: Vec::new(),
            webhook_auth: None,
            replies: None,
            script: None,
            audit_level: AuditLevel::Request,
            concurrency: 1,
            request_timeout: 60,
            api_audiences: vec![hookscope::engine::DEFAULT_API_AUDIENCE.to_string()],
            as_user: None,
            as_uid: None,
            as_group: Vec::new(),
        }
    }
}

impl SourceArgs {
    /// The replier the flags ask for.
    pub fn replier(&self) -> Result<AnyReplier, String> {
        AnyReplier::from_flags(ReplierFlags {
            replies: self.replies.as_deref(),
            script: self.script.as_deref(),
            webhook_auth: self.webhook_auth.as_deref(),
            resolve: &self.resolve,
        })
        .map_err(|e| e.to_string())
    }

    /// The runner over `configs` and the reader of the inputs, both knowing the `--cluster`
    /// objects and custom resources; with the problems of the `--cluster` files. `trace`: whether
    /// dispatches record their trace (the console shows it; the headless replay does not).
    pub fn replayer_and_reader(
        &self,
        configs: &[WebhookConfiguration],
        policies: Policies<'_>,
        version: KubeVersion,
        trace: bool,
    ) -> (Replayer, Reader, Vec<InputProblem>) {
        let (cluster, problems) = ClusterState::load(&self.cluster);
        let registry = cluster.registry(version);
        let engine = Engine::new(
            configs,
            EngineOptions {
                registry: registry.clone(),
                trace,
                api_audiences: api_audiences(&self.api_audiences),
                ..EngineOptions::for_version(version)
            },
        )
        .with_policies(&policies.validating, &policies.validating_bindings)
        .with_mutating_policies(&policies.mutating, &policies.mutating_bindings);
        let replayer = Replayer::new(
            Arc::new(engine),
            ReplaySettings {
                deadline: Some(Duration::from_secs(self.request_timeout)),
                concurrency: usize::from(self.concurrency),
            },
        );
        let mut reader = Reader::with_registry(cluster, registry);
        let mut kinds: Vec<(String, String)> = (policies.validating.iter())
            .filter_map(|p| p.spec.param_kind.as_ref())
            .chain((policies.mutating.iter()).filter_map(|p| p.spec.param_kind.as_ref()))
            .map(|k| (k.api_version.clone(), k.kind.clone()))
            .collect();
        kinds.sort();
        kinds.dedup();
        reader.track_params(kinds);
        if let Some(user) = &self.as_user {
            let mut groups = self.as_group.clone();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            reader.set_manifest_user(hookscope::api::meta::UserInfo {
                username: user.clone(),
                uid: self.as_uid.clone().unwrap_or_default(),
                groups,
                ..Default::default()
            });
        }
        (replayer, reader, problems)
    }
}

/// The admission policies and their bindings.
pub type Policies<'a> = &'a super::configs::PolicySet;

/// The replay's replier, possibly recorded on the way.
#[derive(Clone)]
enum Source {
    Plain(AnyReplier),
    Recording(Recorder<AnyReplier>),
}

impl Replier for Source {
    fn reply(&mut self, calls: &[WebhookCall]) -> impl Future<Output = Vec<Reply>> + Send {
        match self {
            Source::Plain(r) => Either::Left(r.reply(calls)),
            Source::Recording(r) => Either::Right(r.reply(calls)),
        }
    }
}

/// Bytes of the JSON report gathered per write (a request's entry is a few KB).
const REPORT_BUFFER: usize = 1 << 16;

/// Items handed from the reader thread to the replay at once: one channel operation (and at
/// most one wake-up) per batch rather than per request.
const BATCH: usize = 256;
/// Results handed to the outputs' thread at once, at most, and how long a ready result may wait
/// for its batch while the replay waits on webhooks.
const OUTPUT_BATCHING: Batching = Batching {
    max: 64,
    linger: Duration::from_millis(20),
};
/// Batches of results waiting for the outputs' thread, at most.
const OUTPUT_BATCHES: usize = 16;
/// A batch is also handed over when it is this old, so slow inputs (a pipe) still flow.
const BATCH_AGE: Duration = Duration::from_millis(50);

/// Collects input items into batches for the channel.
struct Batcher {
    /// Parse the objects of each request before handing it over.
    parse_objects: bool,
    tx: tokio::sync::mpsc::Sender<Vec<InputItem>>,
    batch: Vec<InputItem>,
    started: Instant,
}

impl Batcher {
    fn push(&mut self, item: InputItem) {
        if self.parse_objects
            && let InputItem::Request(r) = &item
        {
            for o in r.attrs.object.iter().chain(&r.attrs.old_object) {
                o.value();
            }
        }
        if self.batch.is_empty() {
            self.started = Instant::now();
        }
        self.batch.push(item);
        if self.batch.len() >= BATCH || self.started.elapsed() >= BATCH_AGE {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH));
            // The receiver only goes away when the replay is abandoned.
            let _ = self.tx.blocking_send(batch);
        }
    }
}

/// Reads every input on a thread of its own, sending items in batches over a bounded channel;
/// with `parse_objects`, parses there the objects captured as text (`engine::Object`), which the
/// replay will read. Returns the problems of the inputs that could not be read, and how many
/// audit requests did not go through admission.
fn spawn_reader(
    inputs: Vec<String>,
    mut reader: Reader,
    parse_objects: bool,
    tx: tokio::sync::mpsc::Sender<Vec<InputItem>>,
    read: Arc<AtomicU64>,
) -> std::io::Result<std::thread::JoinHandle<(Vec<InputProblem>, u64)>> {
    hookscope::json::spawn("reader", move || {
        // Reading ahead is the work that can wait (see `sched`).
        let _ = crate::sched::as_batch_work();
        let mut batcher = Batcher {
            parse_objects,
            tx,
            batch: Vec::with_capacity(BATCH),
            started: Instant::now(),
        };
        let (_, unreadable) =
            reader.read_paths(&inputs, Some(&read), &mut |item| batcher.push(item));
        batcher.flush();
        (unreadable, reader.skipped_events())
    })
}

/// Per-webhook counts for the text summary.
#[derive(Default)]
struct HookCounts {
    called: usize,
    skipped: usize,
    mutated: usize,
    denied: usize,
    /// Calls that failed and failed the request (failurePolicy Fail).
    errors: usize,
    /// Calls that failed and were ignored (failurePolicy Ignore).
    failed_open: usize,
}

/// Per-webhook counts, found without copying names: a replay considers few webhooks, many times.
#[derive(Default)]
struct Hooks(Vec<((String, String, &'static str), HookCounts)>);

impl Hooks {
    fn counts(
        &mut self,
        configuration: &str,
        webhook: &str,
        phase: &'static str,
    ) -> &mut HookCounts {
        let at = self
            .0
            .iter()
            .position(|((c, w, p), _)| c == configuration && w == webhook && *p == phase);
        let at = at.unwrap_or_else(|| {
            self.0.push((
                (configuration.to_string(), webhook.to_string(), phase),
                HookCounts::default(),
            ));
            self.0.len() - 1
        });
        &mut self.0[at].1
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts ordered by configuration, webhook and phase.
    fn sorted(&self) -> Vec<&((String, String, &'static str), HookCounts)> {
        let mut all: Vec<_> = self.0.iter().collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

/// Everything the outputs need while results stream in.
struct Sinks {
    paint: Paint,
    format: Format,
    verbose: bool,
    level: AuditLevel,
    secrets: SecretPolicy,
    report: Report,
    /// Where the JSON report streams (standard output, `--report`), with the first write error.
    json: Vec<(&'static str, ReportWriter<Box<dyn Write + Send>>)>,
    json_error: Option<String>,
    junit: Option<JUnit>,
    expect: Option<Expectations>,
    mismatches: usize,
    audit_log: Option<BufWriter<File>>,
    audit_log_error: Option<String>,
    hooks: Hooks,
    progress: Option<Progress>,
}

struct Progress {
    total_bytes: u64,
    read: Arc<AtomicU64>,
    last: Instant,
    shown: bool,
}

impl Progress {
    fn tick(&mut self, s: &hookscope::replay::report::Summary, force: bool) {
        if !force && self.last.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.last = Instant::now();
        let read = self.read.load(Ordering::Relaxed);
        let bar = if self.total_bytes > 0 {
            let frac = (read as f64 / self.total_bytes as f64).min(1.0);
            let filled = (frac * 30.0) as usize;
            format!(
                "[{}{}] {:>3.0}% ",
                "#".repeat(filled),
                " ".repeat(30 - filled),
                frac * 100.0
            )
        } else {
            String::new()
        };
        err!(
            "\r\x1b[2K{bar}{} replayed ({} allowed, {} denied), {} not replayable",
            s.total,
            s.allowed,
            s.denied,
            s.not_replayable
        );
        self.shown = true;
    }

    fn clear(&self) {
        if self.shown {
            err!("\r\x1b[2K");
        }
    }
}

impl Sinks {
    fn on_event(&mut self, event: ReplayEvent) {
        match event {
            ReplayEvent::Replayed(r) => {
                if let Some(w) = &mut self.audit_log
                    && self.audit_log_error.is_none()
                    && let Some(ev) =
                        AuditEvent::new(&r, self.level, self.secrets, SystemTime::now())
                {
                    let written = serde_json::to_writer(&mut *w, &ev)
                        .map_err(|e| e.to_string())
                        .and_then(|()| w.write_all(b"\n").map_err(|e| e.to_string()));
                    if let Err(e) = written {
                        self.audit_log_error = Some(e);
                    }
                }
                let r = *r;
                let rep = RequestReport::new(*r.request, r.outcome, self.level, self.secrets);
                let mismatches = self
                    .expect
                    .as_mut()
                    .map(|x| x.check(&rep))
                    .unwrap_or_default();
                self.mismatches += mismatches.len();
                for c in &rep.calls {
                    let h = self.hooks.counts(&c.configuration, &c.webhook, c.phase);
                    if c.decision == "skipped" {
                        h.skipped += 1;
                    } else {
                        h.called += 1;
                        h.mutated += usize::from(c.mutated);
                        h.denied += usize::from(c.allowed == Some(false));
                        // One meaning per word, as in the console: errors fail closed.
                        let open = c.failure_policy == "Ignore" && c.allowed != Some(false);
                        h.errors += usize::from(c.error.is_some() && !open);
                        h.failed_open += usize::from(c.error.is_some() && open);
                    }
                }
                if let Some(j) = &mut self.junit {
                    j.request(&rep, &mismatches);
                }
                if self.format == Format::Text {
                    self.print_request(&rep, &mismatches);
                }
                if self.json_error.is_none() {
                    for (what, w) in &mut self.json {
                        if let Err(e) = w.request(&rep) {
                            self.json_error = Some(format!("{what}: {e}"));
                        }
                    }
                }
                self.report.tally(rep.allowed);
            }
            ReplayEvent::Skipped(item) => {
                let p = match &item {
                    InputItem::NotReplayable(p) => {
                        Problem::from_input(ProblemKind::NotReplayable, p)
                    }
                    InputItem::Invalid(p) => Problem::from_input(ProblemKind::Invalid, p),
                    InputItem::Request(_) => return,
                };
                if self.format == Format::Text {
                    self.clear_progress();
                    let mark = match p.kind {
                        ProblemKind::NotReplayable => self.paint.warn("–"),
                        _ => self.paint.bad("!"),
                    };
                    let field = if p.field.is_empty() {
                        String::new()
                    } else {
                        format!("{}: ", p.field)
                    };
                    outln!("{mark} {}: {field}{}", p.source, p.message);
                }
                if let Some(j) = &mut self.junit {
                    j.problem(&p);
                }
                self.report.push_problem(p);
            }
        }
        if let Some(p) = &mut self.progress {
            p.tick(&self.report.summary, false);
        }
    }

    fn clear_progress(&mut self) {
        if let Some(p) = &mut self.progress {
            p.clear();
            p.shown = false;
        }
    }

    fn print_request(&mut self, r: &RequestReport, mismatches: &[Mismatch]) {
        let failed_open = r
            .calls
            .iter()
            .any(|c| c.error.is_some() && c.failure_policy == "Ignore");
        let interesting =
            !r.allowed || failed_open || !mismatches.is_empty() || !r.notes.is_empty();
        if !self.verbose && !interesting {
            return;
        }
        self.clear_progress();
        let p = &self.paint;
        let called = r.calls.iter().filter(|c| c.decision == "called").count();
        let mutated: Vec<String> = r
            .calls
            .iter()
            .filter(|c| c.mutated)
            .map(|c| match c.phase {
                "mutatingPolicy" => format!("{}/{}", c.configuration, c.webhook),
                _ => c.webhook.to_string(),
            })
            .collect();
        let verdict = match &r.status {
            None => p.good("allowed"),
            Some(s) => p.bad(&format!("denied {}", s.code)),
        };
        let mark = if r.allowed {
            p.good("✓")
        } else {
            p.bad("✗")
        };
        let mut detail = format!("{called} called");
        if !mutated.is_empty() {
            detail.push_str(&format!(", mutated by {}", mutated.join(", ")));
        }
        outln!(
            "{mark} {} {verdict} {} {}",
            p.bold(&r.title()),
            p.dim(&format!("({detail})")),
            p.dim(&format!("[{}]", r.source))
        );
        if let Some(s) = &r.status {
            outln!("    {}", s.message);
        }
        let shown = r
            .status
            .as_ref()
            .map(|s| s.message.as_str())
            .unwrap_or_default();
        for c in r
            .calls
            .iter()
            .filter(|c| c.error.as_deref().is_some_and(|e| !shown.contains(e)))
        {
            let how = if c.failure_policy == "Ignore" {
                p.warn("failed open")
            } else {
                p.bad("failed")
            };
            outln!(
                "    {how} {}: {}",
                c.webhook,
                c.error.as_deref().unwrap_or_default()
            );
        }
        for w in &r.warnings {
            outln!("    {} {w}", p.warn("warning"));
        }
        for n in &r.notes {
            outln!("    {} {n}", p.dim("note"));
        }
        for m in mismatches {
            outln!(
                "    {} expectation {}: {}\n      {} {}\n      {} {}",
                p.bad("mismatch"),
                m.entry,
                m.field,
                p.bad("-"),
                m.expected,
                p.good("+"),
                m.actual
            );
        }
    }

    fn print_summary(&self, missing: usize) {
        let p = &self.paint;
        let s = &self.report.summary;
        if !self.hooks.is_empty() {
            // The name column as wide as the longest name, so long names never push the counts.
            let names: Vec<(String, &HookCounts)> = self
                .hooks
                .sorted()
                .into_iter()
                .map(|((config, hook, phase), h)| (format!("{phase:<10} {config}/{hook}"), h))
                .collect();
            let w = names
                .iter()
                .map(|(n, _)| n.chars().count())
                .max()
                .unwrap_or(0)
                .max("webhook".len());
            outln!();
            outln!(
                "{}",
                p.bold(&format!(
                    "{:<w$} {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>9}",
                    "webhook", "called", "skipped", "mutated", "denied", "errors", "fail-open"
                ))
            );
            for (name, h) in &names {
                outln!(
                    "{name:<w$} {:>7}  {:>7}  {:>7}  {:>6}  {:>6}  {:>9}",
                    h.called,
                    h.skipped,
                    h.mutated,
                    h.denied,
                    h.errors,
                    h.failed_open
                );
            }
        }
        outln!();
        let mut line = format!(
            "{} {} replayed: {} allowed, {} denied",
            s.total,
            if s.total == 1 { "request" } else { "requests" },
            p.good(&s.allowed.to_string()),
            if s.denied > 0 {
                p.bad(&s.denied.to_string())
            } else {
                s.denied.to_string()
            }
        );
        if s.skipped_events > 0 {
            line.push_str(&format!(
                " · {} audit events skipped (reads and other requests that do not go through admission)",
                s.skipped_events
            ));
        }
        if s.not_replayable > 0 {
            let reasons: Vec<String> = s.reasons.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            line.push_str(&format!(
                " · {} not replayable ({})",
                p.warn(&s.not_replayable.to_string()),
                reasons.join(", ")
            ));
        }
        if s.invalid > 0 {
            line.push_str(&format!(
                " · {} invalid input",
                p.bad(&s.invalid.to_string())
            ));
        }
        if s.unusable > 0 {
            line.push_str(&format!(
                " · {} unusable path{}",
                p.bad(&s.unusable.to_string()),
                if s.unusable == 1 { "" } else { "s" }
            ));
        }
        if s.warnings > 0 {
            line.push_str(&format!(
                " · {} warning{}",
                p.warn(&s.warnings.to_string()),
                if s.warnings == 1 { "" } else { "s" }
            ));
        }
        if s.invalid_configurations > 0 {
            line.push_str(&format!(
                " · {} configuration problems",
                p.bad(&s.invalid_configurations.to_string())
            ));
        }
        if missing > 0 {
            line.push_str(&format!(
                " · {} calls without a recorded reply",
                p.bad(&missing.to_string())
            ));
        }
        if self.mismatches > 0 {
            line.push_str(&format!(
                " · {} expectation mismatches",
                p.bad(&self.mismatches.to_string())
            ));
        }
        outln!("{line}");
    }
}

fn write_file(path: &Path, text: &str, what: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// Runs `replay`.
pub fn run(args: &Args, version: KubeVersion) -> Result<ExitCode, String> {
    let paint = Paint::stdout();
    let level = args.source.audit_level;
    let secrets = if args.show_secrets {
        SecretPolicy::Show
    } else {
        SecretPolicy::Redact
    };
    let mut report = Report::new(version, level);

    let loaded = super::configs::load_configurations(&args.webhooks, version, &mut report);
    if args.verbose {
        for line in &loaded.skipped {
            match args.format {
                Format::Text => outln!("{}", paint.dim(line)),
                _ => errln!("{line}"),
            }
        }
    }
    let configs = loaded.all();
    let inputs = (args.input.iter().filter(|i| *i != "-")).map(|i| ("--input", i.clone()));
    let cluster = (args.source.cluster.iter()).map(|c| ("--cluster", c.display().to_string()));
    let mut missing = Vec::new();
    for (flag, path) in inputs.chain(cluster) {
        if let Err(e) = std::fs::metadata(&path) {
            report.push_problem(Problem {
                kind: ProblemKind::Unusable,
                source: SourceRef {
                    file: path.clone(),
                    index: 0,
                    unit: IndexUnit::Document,
                    audit_id: None,
                    line: None,
                },
                field: String::new(),
                message: format!("cannot open {flag} path: {e}"),
            });
            missing.push(path);
        }
    }
    // A path that gives nothing usable fails the run: nothing is replayed, the outputs say why.
    let inputs = if report.summary.unusable > 0 {
        Vec::new()
    } else {
        args.input.clone()
    };
    let expect = match &args.expect {
        Some(p) => Some(Expectations::load(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let base = args.source.replier()?;
    let source = match &args.record {
        Some(dir) => {
            Source::Recording(Recorder::new(base, dir).map_err(|e| format!("--record: {e}"))?)
        }
        None => Source::Plain(base),
    };
    let audit_log = match &args.audit_log {
        Some(p) => Some(BufWriter::new(
            File::create(p).map_err(|e| format!("--audit-log {}: {e}", p.display()))?,
        )),
        None => None,
    };

    // The headless replay reports outcomes only: its dispatches record no trace.
    let (replayer, reader, cluster_problems) =
        args.source
            .replayer_and_reader(&configs, &loaded.policies, version, false);
    // A missing --cluster path is reported above, once.
    let whole_missing = |p: &&InputProblem| p.source.index == 0 && missing.contains(&p.source.file);
    for p in cluster_problems.iter().filter(|p| !whole_missing(p)) {
        report.push_problem(Problem::from_input(ProblemKind::Invalid, p));
    }

    let read = Arc::new(AtomicU64::new(0));
    let total_bytes = args
        .input
        .iter()
        .filter(|i| *i != "-")
        .filter_map(|i| std::fs::metadata(i).ok())
        .map(|m| m.len())
        .sum();
    let progress =
        (std::io::stderr().is_terminal() && args.format != Format::Json).then(|| Progress {
            total_bytes,
            read: read.clone(),
            last: Instant::now(),
            shown: false,
        });

    let mut sinks = Sinks {
        paint,
        format: args.format,
        verbose: args.verbose,
        level,
        secrets,
        json: Vec::new(),
        json_error: None,
        junit: (args.format == Format::Junit).then(JUnit::default),
        expect,
        mismatches: 0,
        audit_log,
        audit_log_error: None,
        hooks: Hooks::default(),
        progress,
        report,
    };
    if let Some(j) = &mut sinks.junit {
        // Paths found unusable before the replay are errors of the suite too.
        for p in (sinks.report.problems.iter()).filter(|p| p.kind == ProblemKind::Unusable) {
            j.problem(p);
        }
    }
    let (kube, level_text) = (
        sinks.report.kube_version.clone(),
        sinks.report.audit_level.clone(),
    );
    if args.format == Format::Json {
        let out: Box<dyn Write + Send> =
            Box::new(BufWriter::with_capacity(REPORT_BUFFER, super::Stdout));
        let w = ReportWriter::begin(out, &kube, &level_text).map_err(|e| e.to_string())?;
        sinks.json.push(("standard output", w));
    }
    if let Some(path) = &args.report {
        let file = File::create(path).map_err(|e| format!("--report {}: {e}", path.display()))?;
        let out: Box<dyn Write + Send> = Box::new(BufWriter::with_capacity(REPORT_BUFFER, file));
        let w = ReportWriter::begin(out, &kube, &level_text)
            .map_err(|e| format!("--report {}: {e}", path.display()))?;
        sinks.json.push(("--report", w));
    }
    if sinks.format == Format::Text {
        let shown = (sinks.report.problems.iter()).filter(|p| p.kind != ProblemKind::Unusable);
        for p in shown.cloned().collect::<Vec<_>>() {
            let mark = match p.kind {
                ProblemKind::Warning => sinks.paint.warn("warning"),
                _ => sinks.paint.bad("!"),
            };
            let field = if p.field.is_empty() {
                String::new()
            } else {
                format!("{}: ", p.field)
            };
            outln!("{mark} {}: {field}{}", p.source, p.message);
        }
    }

    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<InputItem>>(8);
    // Objects the dispatch or the outputs will read are parsed on the reader's thread.
    let parse_objects =
        replayer.engine().reads_objects() || args.audit_log.is_some() || args.expect.is_some();
    let reader = spawn_reader(inputs, reader, parse_objects, tx, read)
        .map_err(|e| format!("cannot start the input reader: {e}"))?;
    let runtime = match args.io_threads {
        0 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(usize::from(n))
                .thread_stack_size(hookscope::json::STACK_BYTES);
            b
        }
    }
    .enable_all()
    .build()
    .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let items =
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).flat_map(futures::stream::iter);
    // The outputs (report, audit log, text, JUnit) take their own thread, so that writing them
    // does not hold back the dispatches; results reach it in input order, in batches.
    // Each request's metrics are merged there too, in input order.
    let (out_tx, out_rx) = std::sync::mpsc::sync_channel::<Vec<Dispatched>>(OUTPUT_BATCHES);
    let mut metrics = replayer.configuration_metrics();
    let outputs = hookscope::json::spawn("outputs", move || {
        // Writing behind is the work that can wait (see `sched`).
        let _ = crate::sched::as_batch_work();
        for batch in out_rx {
            for dispatched in batch {
                if let Some(m) = &dispatched.metrics {
                    metrics.merge(m);
                }
                sinks.on_event(dispatched.event);
            }
        }
        (sinks, metrics)
    })
    .map_err(|e| format!("cannot start the outputs' thread: {e}"))?;
    let run = replayer.run_dispatched(items, source.clone(), OUTPUT_BATCHING, |b| {
        // The receiver only goes away if the outputs' thread panicked: reported below.
        let _ = out_tx.send(b);
    });
    runtime.block_on(run);
    drop(out_tx);
    let (mut sinks, metrics) = outputs
        .join()
        .map_err(|_| "writing the outputs stopped unexpectedly".to_string())?;
    let (unreadable, skipped_events) = reader
        .join()
        .map_err(|_| "the input reader stopped unexpectedly".to_string())?;
    if let Some(p) = &mut sinks.progress {
        p.tick(&sinks.report.summary, true);
        p.clear();
    }
    sinks.report.summary.skipped_events = skipped_events;
    for p in &unreadable {
        let p = Problem::from_input(ProblemKind::Unusable, p);
        if let Some(j) = &mut sinks.junit {
            j.problem(&p);
        }
        sinks.report.push_problem(p);
    }

    let missing = match &source {
        Source::Plain(r) => r.missing_replies(),
        Source::Recording(_) => 0,
    };
    sinks.report.summary.missing_replies = missing;
    if let Source::Recording(r) = source {
        r.finish().map_err(|e| format!("--record: {e}"))?;
    }
    if let Some(mut w) = sinks.audit_log.take()
        && let Err(e) = w.flush()
    {
        sinks.audit_log_error.get_or_insert(e.to_string());
    }
    if let Some(e) = &sinks.audit_log_error {
        return Err(format!("--audit-log: {e}"));
    }
    if let Some(path) = &args.metrics {
        write_file(path, &metrics.encode_text(), "--metrics")?;
    }
    let unmatched = sinks
        .expect
        .as_ref()
        .map(Expectations::unmatched)
        .unwrap_or_default();
    sinks.mismatches += unmatched.len();
    for (what, w) in std::mem::take(&mut sinks.json) {
        if let Err(e) = w.finish(&sinks.report) {
            sinks.json_error.get_or_insert(format!("{what}: {e}"));
        }
    }
    if let Some(e) = &sinks.json_error {
        return Err(format!("writing the report to {e}"));
    }
    match args.format {
        Format::Json => {}
        Format::Junit => out!(
            "{}",
            sinks
                .junit
                .as_ref()
                .map(|j| j.render(&unmatched))
                .unwrap_or_default()
        ),
        Format::Text => {
            for m in &unmatched {
                outln!("{} {m}", sinks.paint.bad("mismatch"));
            }
            sinks.print_summary(missing);
        }
    }
    let unusable = (sinks.report.problems.iter()).filter(|p| p.kind == ProblemKind::Unusable);
    let mut failed = false;
    for p in unusable {
        errln!("error: {}: {}", p.source, p.message);
        failed = true;
    }
    Ok(if failed {
        ExitCode::from(2)
    } else if sinks.mismatches > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `--api-audiences` as kube-apiserver reads its flag of that name: an empty value is no
/// audience (a string slice flag reads `""` as an empty list), and no audience means the
/// default (the service account issuer).
fn api_audiences(given: &[String]) -> Vec<String> {
    if given.iter().all(String::is_empty) {
        vec![hookscope::engine::DEFAULT_API_AUDIENCE.to_string()]
    } else {
        given.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::api_audiences;

    #[test]
    fn an_empty_api_audiences_flag_is_the_default_as_kube_apiserver_reads_it() {
        let default = vec![hookscope::engine::DEFAULT_API_AUDIENCE.to_string()];
        assert_eq!(api_audiences(&[String::new()]), default);
        assert_eq!(api_audiences(&[]), default);
        let two = vec!["a".to_string(), "b".to_string()];
        assert_eq!(api_audiences(&two), two);
    }
}

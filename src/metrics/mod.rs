//! kube-apiserver's admission webhook metrics (kubernetes/apiserver `pkg/admission/metrics`),
//! recorded by the engine and exported in the Prometheus text format (0.0.4) byte for byte as
//! kube-apiserver's `/metrics` shows them.
//!
//! Pure data: no IO and no clock; durations are passed in. Recording touches only small `Copy`
//! keys (one lookup of the webhook name); strings are formatted only by [`Metrics::encode_text`],
//! [`Metrics::samples`] and [`Metrics::value`].
//!
//! Exposition follows prometheus/common `expfmt/text_create.go` after the registry's
//! normalisation: families sorted by name, each with `# HELP` (component-base prefixes the
//! stability level, `[STABLE] ` / `[ALPHA] `) and `# TYPE`; series sorted by their label values,
//! labels in alphabetical order of their names; histograms as cumulative `_bucket` lines (`le`
//! last, `+Inf` included), `_sum`, `_count`; summaries as `quantile` lines, `_sum`, `_count`;
//! every number printed as Go's `strconv.FormatFloat(v, 'g', -1, 64)` (`1`, `0.005`, `2.5e-05`,
//! `1e+06`).
//!
//! Where this is not a perfect model of a long-running apiserver:
//! * `step_admission_duration_seconds_summary` (MaxAge 5h) is computed over every observation (no
//!   age-bucket rotation without a clock) and as if `/metrics` was scraped only when the text is
//!   encoded (Go's quantile stream merges its buffer into the estimate on every scrape). Below
//!   500 observations per series the quantiles are exact either way.
//! * [`Metrics::merge`] replays the other set's observations one by one, so sums add in the same
//!   order as kube-apiserver adds them: all of a [`Metrics::per_request`] set's, in order (exactly
//!   as if recorded on this set); any other set's when it holds at most 4 observations per
//!   histogram series and fewer than 500 per summary series (one request's always does). Beyond
//!   that it adds the totals (the sum may differ in the last bit) and the summary's estimate is
//!   approximate.

pub(crate) mod expfmt;
mod quantile;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::api::Operation;

use quantile::Stream;

/// The `type` label of the webhook metrics: mutating webhooks are `admit`, validating webhooks
/// `validating` (or `validate` in the metrics that use the admission step name; see each method).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookType {
    /// Mutating webhooks: `admit`.
    Admit,
    /// Validating webhooks: `validating` (`validate` for step-named metrics).
    Validating,
    /// The ValidatingAdmissionPolicy plugin: `validate` in every metric (its matchConditions'
    /// `kind` is `policy`).
    ValidatingPolicy,
    /// The MutatingAdmissionPolicy plugin: `admit` (its matchConditions are counted as the
    /// validating plugin's, `kind="policy"`, `type="validate"`, as upstream's matcher is built).
    MutatingPolicy,
}

impl WebhookType {
    /// The webhook type label: `admit` / `validating`.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookType::Admit => "admit",
            WebhookType::Validating => "validating",
            WebhookType::ValidatingPolicy => "validate",
            WebhookType::MutatingPolicy => "admit",
        }
    }

    /// The admission step label: `admit` / `validate`.
    pub fn step_str(self) -> &'static str {
        match self {
            WebhookType::Admit | WebhookType::MutatingPolicy => "admit",
            WebhookType::Validating | WebhookType::ValidatingPolicy => "validate",
        }
    }

    /// The admission plugin carrying this webhook type: `MutatingAdmissionWebhook` /
    /// `ValidatingAdmissionWebhook`.
    pub fn plugin_name(self) -> &'static str {
        match self {
            WebhookType::Admit => "MutatingAdmissionWebhook",
            WebhookType::Validating => "ValidatingAdmissionWebhook",
            WebhookType::ValidatingPolicy => "ValidatingAdmissionPolicy",
            WebhookType::MutatingPolicy => "MutatingAdmissionPolicy",
        }
    }
}

/// The `error_type` label of `apiserver_admission_webhook_rejection_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectionErrorType {
    /// `calling_webhook_error`: a calling error under failurePolicy Fail.
    CallingWebhookError,
    /// `no_error`: the webhook answered `allowed: false`.
    NoError,
    /// `apiserver_internal_error`: any other error (dry-run unsupported, patch failures, …).
    ApiserverInternalError,
}

impl RejectionErrorType {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectionErrorType::CallingWebhookError => "calling_webhook_error",
            RejectionErrorType::NoError => "no_error",
            RejectionErrorType::ApiserverInternalError => "apiserver_internal_error",
        }
    }
}

/// One flat sample line: its full name (with `_bucket`/`_sum`/`_count` for histograms and
/// summaries), its labels in exposition order (`le` / `quantile` last) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample name, e.g. `apiserver_admission_webhook_request_total` or
    /// `apiserver_admission_webhook_admission_duration_seconds_bucket`.
    pub name: String,
    /// Label names and values, in the order they are printed.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

/// Family names.
const CONTROLLER_DURATION: &str = "apiserver_admission_controller_admission_duration_seconds";
const MC_ERRORS: &str = "apiserver_admission_match_condition_evaluation_errors_total";
const MC_SECONDS: &str = "apiserver_admission_match_condition_evaluation_seconds";
const MC_EXCLUSIONS: &str = "apiserver_admission_match_condition_exclusions_total";
const STEP_DURATION: &str = "apiserver_admission_step_admission_duration_seconds";
const STEP_SUMMARY: &str = "apiserver_admission_step_admission_duration_seconds_summary";
const WEBHOOK_DURATION: &str = "apiserver_admission_webhook_admission_duration_seconds";
const WEBHOOK_FAIL_OPEN: &str = "apiserver_admission_webhook_fail_open_count";
const WEBHOOK_REJECTION: &str = "apiserver_admission_webhook_rejection_count";
const WEBHOOK_REQUEST: &str = "apiserver_admission_webhook_request_total";
const POLICY_CHECK: &str = "apiserver_validating_admission_policy_check_total";
const POLICY_DEFINITIONS: &str = "apiserver_validating_admission_policy_definition_total";
const POLICY_DURATION: &str = "apiserver_validating_admission_policy_check_duration_seconds";
const MUTATING_CHECK: &str = "apiserver_mutating_admission_policy_check_total";
const MUTATING_DURATION: &str = "apiserver_mutating_admission_policy_check_duration_seconds";

/// HELP texts as `/metrics` prints them (component-base stability prefix + upstream `Help`).
const HELP_CONTROLLER_DURATION: &str = "[STABLE] Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).";
const HELP_MC_ERRORS: &str = "[ALPHA] Admission match condition evaluation errors count, identified by name of resource containing the match condition and broken out for each kind containing matchConditions (webhook or policy), operation and admission type (validate or admit).";
const HELP_MC_SECONDS: &str = "[ALPHA] Admission match condition evaluation time in seconds, identified by name and broken out for each kind containing matchConditions (webhook or policy), operation and type (validate or admit).";
const HELP_MC_EXCLUSIONS: &str = "[ALPHA] Admission match condition evaluation exclusions count, identified by name of resource containing the match condition and broken out for each kind containing matchConditions (webhook or policy), operation and admission type (validate or admit).";
const HELP_STEP_DURATION: &str = "[STABLE] Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).";
const HELP_STEP_SUMMARY: &str = "[ALPHA] Admission sub-step latency summary in seconds, broken out for each operation and API resource and step type (validate or admit).";
const HELP_WEBHOOK_DURATION: &str = "[STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).";
const HELP_WEBHOOK_FAIL_OPEN: &str = "[ALPHA] Admission webhook fail open count, identified by name and broken out for each admission type (validating or admit).";
const HELP_WEBHOOK_REJECTION: &str = "[ALPHA] Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.";
const HELP_WEBHOOK_REQUEST: &str = "[ALPHA] Admission webhook request total, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.";

const HELP_POLICY_CHECK: &str = "[BETA] Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.";
const HELP_POLICY_DURATION: &str = "[BETA] Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken.";
const HELP_POLICY_CHECK_LEGACY: &str = "[ALPHA] Validation admission policy check total, labeled by policy and further identified by binding, enforcement action taken, and state.";
const HELP_POLICY_DURATION_LEGACY: &str = "[ALPHA] Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding, state and enforcement action taken.";

const HELP_POLICY_DEFINITIONS: &str =
    "[ALPHA] Validation admission policy count total, labeled by state and enforcement action.";

const HELP_MUTATING_CHECK: &str = "[ALPHA] Mutation admission policy check total, labeled by policy and further identified by binding.";
const HELP_MUTATING_DURATION: &str = "[ALPHA] Mutation admission latency for individual mutation expressions in seconds, labeled by policy and binding.";

/// Buckets of `validating_admission_policy_check_duration_seconds` (and of the mutating one).
const POLICY_BUCKETS: &[f64] = &[0.0000005, 0.001, 0.01, 0.1, 1.0];

/// Buckets of `webhook_admission_duration_seconds`.
const WEBHOOK_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0];
/// Buckets of `controller_admission_duration_seconds` and `step_admission_duration_seconds`.
const PHASE_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5];
/// Buckets of `match_condition_evaluation_seconds`.
const MC_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25];

/// The most buckets any family has.
const MAX_BUCKETS: usize = 8;
/// Observations a histogram keeps verbatim so that merging a small set is exact.
const RAW_KEPT: usize = 4;

/// `kind` label of the match-condition metrics recorded by webhooks.
const KIND_WEBHOOK: &str = "webhook";
/// `kind` label of the match-condition metrics recorded by policies.
const KIND_POLICY: &str = "policy";

/// Codes above 600 are recorded as 600 (`ObserveWebhook`, `ObserveWebhookRejection`).
fn cap_code(code: i32) -> i32 {
    code.min(600)
}

fn bool_str(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// A classic client_golang histogram: per-bucket (non-cumulative) counts, sum, count.
#[derive(Debug, Clone, Default)]
struct Histogram {
    buckets: [u64; MAX_BUCKETS],
    sum: f64,
    count: u64,
    /// The first `RAW_KEPT` observations, in order.
    raw: [f64; RAW_KEPT],
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], v: f64) {
        // client_golang `findBucket`: the first upper bound >= v; above all bounds only +Inf.
        if let Some(i) = bounds.iter().position(|&b| v <= b)
            && let Some(c) = self.buckets.get_mut(i)
        {
            *c += 1;
        }
        if let Some(slot) = usize::try_from(self.count)
            .ok()
            .and_then(|i| self.raw.get_mut(i))
        {
            *slot = v;
        }
        self.count += 1;
        self.sum += v;
    }

    fn merge(&mut self, bounds: &[f64], other: &Histogram) {
        match usize::try_from(other.count) {
            Ok(n) if n <= RAW_KEPT => {
                for &v in other.raw.iter().take(n) {
                    self.observe(bounds, v);
                }
            }
            _ => {
                for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
                    *a += b;
                }
                self.sum += other.sum;
                self.count += other.count;
            }
        }
    }

    /// Cumulative count of bucket `i`.
    fn cumulative(&self, i: usize) -> u64 {
        self.buckets.iter().take(i + 1).sum()
    }
}

/// A client_golang summary (head stream only): quantile stream, sum, count.
#[derive(Debug, Clone, Default)]
struct Summary {
    stream: Stream,
    sum: f64,
    count: u64,
}

impl Summary {
    fn observe(&mut self, v: f64) {
        self.stream.insert(v);
        self.sum += v;
        self.count += 1;
    }

    fn merge(&mut self, other: &Summary) {
        if !other.stream.flushed() {
            for &v in other.stream.buffered() {
                self.observe(v);
            }
            return;
        }
        // Approximate: feed the other estimate's compressed samples, then its buffer.
        for (v, w) in other.stream.compressed() {
            let mut k = w;
            while k >= 1.0 {
                self.stream.insert(v);
                k -= 1.0;
            }
        }
        for &v in other.stream.buffered() {
            self.stream.insert(v);
        }
        self.sum += other.sum;
        self.count += other.count;
    }
}

/// Key of the per-phase series: `type`, `operation`, `rejected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PhaseKey {
    ty: WebhookType,
    op: Operation,
    rejected: bool,
}

/// Key of `webhook_rejection_count` within one webhook name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RejectionKey {
    ty: WebhookType,
    op: Operation,
    error_type: RejectionErrorType,
    code: i32,
}

/// Every series of one webhook name.
#[derive(Debug, Clone, Default)]
struct WebhookSeries {
    duration: Vec<(PhaseKey, Histogram)>,
    requests: Vec<((PhaseKey, i32), u64)>,
    rejections: Vec<(RejectionKey, u64)>,
    fail_open: Vec<(WebhookType, u64)>,
    mc_errors: Vec<((WebhookType, Operation), u64)>,
    mc_exclusions: Vec<((WebhookType, Operation), u64)>,
    mc_seconds: Vec<((WebhookType, Operation), Histogram)>,
}

/// The value of `key` in a small association list, created with `V::default()` if absent.
fn slot<K: PartialEq + Copy, V: Default>(list: &mut Vec<(K, V)>, key: K) -> &mut V {
    let i = match list.iter().position(|(k, _)| *k == key) {
        Some(i) => i,
        None => {
            list.push((key, V::default()));
            list.len() - 1
        }
    };
    // `i` is in bounds: found above or just pushed.
    &mut list[i].1
}

fn add_counters<K: PartialEq + Copy>(into: &mut Vec<(K, u64)>, from: &[(K, u64)]) {
    for &(k, v) in from {
        *slot(into, k) += v;
    }
}

/// The admission metrics kube-apiserver's webhook dispatchers record: every series observed so
/// far, kept in a deterministic order.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    webhooks: BTreeMap<String, WebhookSeries>,
    controller: Vec<(PhaseKey, Histogram)>,
    step: Vec<(PhaseKey, (Histogram, Summary))>,
    /// `validating_admission_policy_check_total` and `_check_duration_seconds`.
    policy_checks: BTreeMap<PolicyCheckKey, (u64, Histogram)>,
    /// `mutating_admission_policy_check_total` and `_check_duration_seconds` (1.34+), by policy,
    /// binding and error type.
    mutating_checks: BTreeMap<[String; 3], (u64, Histogram)>,
    /// `validating_admission_policy_definition_total{enforcement_action="deny",state="active"}`
    /// (1.28–1.29): the policy definitions the plugin's controller took in.
    policy_definitions: u64,
    /// A per-request set's observations, in order, kept instead of series.
    log: Option<Vec<Observation>>,
}

/// One call of an `observe_*` method, as a per-request set keeps it.
#[derive(Debug, Clone)]
enum Observation {
    Webhook(Box<str>, PhaseKey, i32, Duration),
    Rejection(Box<str>, RejectionKey),
    FailOpen(Box<str>, WebhookType),
    ConditionError(Box<str>, WebhookType, Operation),
    ConditionExclusion(Box<str>, WebhookType, Operation),
    ConditionEvaluation(Box<str>, WebhookType, Operation, Duration),
    Controller(PhaseKey, Duration),
    Step(PhaseKey, Duration),
    PolicyCheck(Box<PolicyCheckKey>, Duration),
    MutatingCheck(Box<[String; 3]>, Duration),
}

/// The labels of one policy check series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyCheckKey {
    /// `policy`.
    pub policy: String,
    /// `policy_binding`.
    pub binding: String,
    /// `enforcement_action`: `allow`, `deny`, `warn` or `audit`.
    pub action: &'static str,
    /// `error_type` (1.31+): `no_error`, `compile_error`, `invalid_error`, `out_of_budget`.
    pub error_type: &'static str,
    /// Releases before 1.31 label `state="active"` instead of `error_type`.
    pub legacy: bool,
}

impl Metrics {
    /// An empty set (no series: nothing is printed).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set for one request's observations, to be [merged](Metrics::merge) into a
    /// longer-lived set: it keeps the observations as a list (recording one is a push, with no
    /// series built), and merging replays them in order, exactly as if they had been made on the
    /// other set. Read directly, it shows the series those observations make.
    pub fn per_request() -> Self {
        Metrics {
            // A request with one webhook already makes five: the call, and each plugin's step
            // and controller durations; room for a few more calls without growing.
            log: Some(Vec::with_capacity(8)),
            ..Self::default()
        }
    }

    /// Keeps `o()` when this is a per-request set; false when the caller records it as series.
    fn defer(&mut self, o: impl FnOnce() -> Observation) -> bool {
        match &mut self.log {
            Some(log) => {
                log.push(o());
                true
            }
            None => false,
        }
    }

    /// Records `o` as series (or keeps it, in a per-request set).
    fn apply(&mut self, o: &Observation) {
        match o {
            Observation::Webhook(name, k, code, elapsed) => {
                self.observe_webhook(name, k.ty, k.op, k.rejected, *code, *elapsed);
            }
            Observation::Rejection(name, k) => {
                self.observe_webhook_rejection(name, k.ty, k.op, k.error_type, k.code);
            }
            Observation::FailOpen(name, ty) => self.observe_webhook_fail_open(name, *ty),
            Observation::ConditionError(name, ty, op) => {
                self.observe_match_condition_error(name, *ty, *op);
            }
            Observation::ConditionExclusion(name, ty, op) => {
                self.observe_match_condition_exclusion(name, *ty, *op);
            }
            Observation::ConditionEvaluation(name, ty, op, elapsed) => {
                self.observe_match_condition_evaluation(name, *ty, *op, *elapsed);
            }
            Observation::Controller(k, elapsed) => {
                self.observe_controller(k.ty, k.op, k.rejected, *elapsed);
            }
            Observation::Step(k, elapsed) => self.observe_step(k.ty, k.op, k.rejected, *elapsed),
            Observation::PolicyCheck(k, elapsed) => {
                self.observe_policy_check((**k).clone(), *elapsed)
            }
            Observation::MutatingCheck(k, elapsed) => {
                let [policy, binding, error_type] = &**k;
                self.observe_mutating_check(policy, binding, error_type, *elapsed);
            }
        }
    }

    /// The series of a per-request set's observations (None for a set that records series).
    fn folded(&self) -> Option<Metrics> {
        let log = self.log.as_ref()?;
        let mut m = Metrics::new();
        for o in log {
            m.apply(o);
        }
        Some(m)
    }

    /// Runs `f` on the series of webhook `name`, created if absent (the name is copied only then).
    fn with_webhook(&mut self, name: &str, f: impl FnOnce(&mut WebhookSeries)) {
        if let Some(series) = self.webhooks.get_mut(name) {
            f(series);
        } else {
            f(self.webhooks.entry(name.to_owned()).or_default());
        }
    }

    /// One webhook call attempt (`ObserveWebhook`): observes `elapsed` in
    /// `apiserver_admission_webhook_admission_duration_seconds{name,type,operation,rejected}` and
    /// increments `apiserver_admission_webhook_request_total{name,type,operation,code,rejected}`,
    /// `type` = `admit`/`validating`; codes above 600 are recorded as 600.
    pub fn observe_webhook(
        &mut self,
        name: &str,
        ty: WebhookType,
        op: Operation,
        rejected: bool,
        code: i32,
        elapsed: Duration,
    ) {
        let key = PhaseKey { ty, op, rejected };
        if self.defer(|| Observation::Webhook(name.into(), key, code, elapsed)) {
            return;
        }
        self.with_webhook(name, |series| {
            *slot(&mut series.requests, (key, cap_code(code))) += 1;
            slot(&mut series.duration, key).observe(WEBHOOK_BUCKETS, elapsed.as_secs_f64());
        });
    }

    /// A rejection (`ObserveWebhookRejection`): increments
    /// `apiserver_admission_webhook_rejection_count{name,type,operation,error_type,rejection_code}`,
    /// `type` = `admit`/`validating`; codes above 600 are recorded as 600.
    pub fn observe_webhook_rejection(
        &mut self,
        name: &str,
        ty: WebhookType,
        op: Operation,
        error_type: RejectionErrorType,
        code: i32,
    ) {
        let key = RejectionKey {
            ty,
            op,
            error_type,
            code: cap_code(code),
        };
        if self.defer(|| Observation::Rejection(name.into(), key)) {
            return;
        }
        self.with_webhook(name, |w| *slot(&mut w.rejections, key) += 1);
    }

    /// A webhook that failed open (`ObserveWebhookFailOpen`): increments
    /// `apiserver_admission_webhook_fail_open_count{name,type}`, `type` = `admit`/`validating`.
    pub fn observe_webhook_fail_open(&mut self, name: &str, ty: WebhookType) {
        if self.defer(|| Observation::FailOpen(name.into(), ty)) {
            return;
        }
        self.with_webhook(name, |w| *slot(&mut w.fail_open, ty) += 1);
    }

    /// A matchCondition that errored (`ObserveMatchConditionEvalError`): increments
    /// `apiserver_admission_match_condition_evaluation_errors_total{name,kind="webhook",type,operation}`,
    /// `type` = `admit`/`validating`.
    pub fn observe_match_condition_error(&mut self, name: &str, ty: WebhookType, op: Operation) {
        if self.defer(|| Observation::ConditionError(name.into(), ty, op)) {
            return;
        }
        self.with_webhook(name, |w| *slot(&mut w.mc_errors, (ty, op)) += 1);
    }

    /// A webhook excluded by a false matchCondition (`ObserveMatchConditionExclusion`):
    /// increments `apiserver_admission_match_condition_exclusions_total{name,kind="webhook",type,operation}`,
    /// `type` = `admit`/**`validate`** (the dispatchers pass `GetType()` here).
    pub fn observe_match_condition_exclusion(
        &mut self,
        name: &str,
        ty: WebhookType,
        op: Operation,
    ) {
        if self.defer(|| Observation::ConditionExclusion(name.into(), ty, op)) {
            return;
        }
        self.with_webhook(name, |w| *slot(&mut w.mc_exclusions, (ty, op)) += 1);
    }

    /// A matchConditions evaluation that ended false or in an error
    /// (`ObserveMatchConditionEvaluationTime`): observes `elapsed` in
    /// `apiserver_admission_match_condition_evaluation_seconds{name,kind="webhook",type,operation}`,
    /// `type` = `admit`/`validating`.
    pub fn observe_match_condition_evaluation(
        &mut self,
        name: &str,
        ty: WebhookType,
        op: Operation,
        elapsed: Duration,
    ) {
        if self.defer(|| Observation::ConditionEvaluation(name.into(), ty, op, elapsed)) {
            return;
        }
        self.with_webhook(name, |w| {
            slot(&mut w.mc_seconds, (ty, op)).observe(MC_BUCKETS, elapsed.as_secs_f64());
        });
    }

    /// One invocation of the MutatingAdmissionWebhook / ValidatingAdmissionWebhook plugin
    /// (`ObserveAdmissionController`): observes `elapsed` in
    /// `apiserver_admission_controller_admission_duration_seconds{name,type,operation,rejected}`,
    /// `name` = the plugin name, `type` = `admit`/`validate`.
    pub fn observe_controller(
        &mut self,
        ty: WebhookType,
        op: Operation,
        rejected: bool,
        elapsed: Duration,
    ) {
        let key = PhaseKey { ty, op, rejected };
        if self.defer(|| Observation::Controller(key, elapsed)) {
            return;
        }
        slot(&mut self.controller, key).observe(PHASE_BUCKETS, elapsed.as_secs_f64());
    }

    /// One admission phase (`ObserveAdmissionStep`): observes `elapsed` in
    /// `apiserver_admission_step_admission_duration_seconds{type,operation,rejected}` and in the
    /// summary `apiserver_admission_step_admission_duration_seconds_summary` (quantiles 0.5, 0.9,
    /// 0.99; see the module notes on its time window), `type` = `admit`/`validate`.
    pub fn observe_step(
        &mut self,
        ty: WebhookType,
        op: Operation,
        rejected: bool,
        elapsed: Duration,
    ) {
        let key = PhaseKey { ty, op, rejected };
        if self.defer(|| Observation::Step(key, elapsed)) {
            return;
        }
        let v = elapsed.as_secs_f64();
        let (histogram, summary) = slot(&mut self.step, key);
        histogram.observe(PHASE_BUCKETS, v);
        summary.observe(v);
    }

    /// One ValidatingAdmissionPolicy decision (`ObserveAdmission`, `ObserveRejection`,
    /// `ObserveAudit`, `ObserveWarn`): increments
    /// `apiserver_validating_admission_policy_check_total` and observes `elapsed` in
    /// `apiserver_validating_admission_policy_check_duration_seconds`, labelled
    /// `{enforcement_action,error_type,policy,policy_binding}` (before 1.31:
    /// `{enforcement_action,policy,policy_binding,state="active"}`).
    pub fn observe_policy_check(&mut self, key: PolicyCheckKey, elapsed: Duration) {
        if self.defer(|| Observation::PolicyCheck(Box::new(key.clone()), elapsed)) {
            return;
        }
        let (n, h) = self.policy_checks.entry(key).or_default();
        *n += 1;
        h.observe(POLICY_BUCKETS, elapsed.as_secs_f64());
    }

    /// A ValidatingAdmissionPolicy definition taken in for the first time by the plugin's
    /// controller (1.28–1.29, `ObserveDefinition(ctx, "active", "deny")`): increments
    /// `apiserver_validating_admission_policy_definition_total`. Later releases register the
    /// family but never observe it.
    pub fn observe_policy_definition(&mut self) {
        self.policy_definitions += 1;
    }

    /// One mutation of a MutatingAdmissionPolicy (1.34+: `ObserveAdmission`,
    /// `ObserveRejection`): increments `apiserver_mutating_admission_policy_check_total` and
    /// observes `elapsed` in `_check_duration_seconds`, labelled
    /// `{error_type,policy,policy_binding}`.
    pub fn observe_mutating_check(
        &mut self,
        policy: &str,
        binding: &str,
        error_type: &str,
        elapsed: Duration,
    ) {
        let key = [policy.to_owned(), binding.to_owned(), error_type.to_owned()];
        if self.defer(|| Observation::MutatingCheck(Box::new(key.clone()), elapsed)) {
            return;
        }
        let (n, h) = self.mutating_checks.entry(key).or_default();
        *n += 1;
        h.observe(POLICY_BUCKETS, elapsed.as_secs_f64());
    }

    /// Adds every series of `other` into `self`, as if `other`'s observations had been recorded
    /// on `self` after its own (exactly so for [`Metrics::per_request`] sets and small ones; see
    /// the module notes).
    pub fn merge(&mut self, other: &Metrics) {
        if let Some(log) = &other.log {
            for o in log {
                self.apply(o);
            }
            return;
        }
        for (name, from) in &other.webhooks {
            self.with_webhook(name, |into| {
                for (k, h) in &from.duration {
                    slot(&mut into.duration, *k).merge(WEBHOOK_BUCKETS, h);
                }
                add_counters(&mut into.requests, &from.requests);
                add_counters(&mut into.rejections, &from.rejections);
                add_counters(&mut into.fail_open, &from.fail_open);
                add_counters(&mut into.mc_errors, &from.mc_errors);
                add_counters(&mut into.mc_exclusions, &from.mc_exclusions);
                for (k, h) in &from.mc_seconds {
                    slot(&mut into.mc_seconds, *k).merge(MC_BUCKETS, h);
                }
            });
        }
        for (k, h) in &other.controller {
            slot(&mut self.controller, *k).merge(PHASE_BUCKETS, h);
        }
        for (k, (h, s)) in &other.step {
            let (histogram, summary) = slot(&mut self.step, *k);
            histogram.merge(PHASE_BUCKETS, h);
            summary.merge(s);
        }
        for (k, (n, h)) in &other.policy_checks {
            let (into_n, into_h) = self.policy_checks.entry(k.clone()).or_default();
            *into_n += n;
            into_h.merge(POLICY_BUCKETS, h);
        }
        for (k, (n, h)) in &other.mutating_checks {
            let (into_n, into_h) = self.mutating_checks.entry(k.clone()).or_default();
            *into_n += n;
            into_h.merge(POLICY_BUCKETS, h);
        }
        self.policy_definitions += other.policy_definitions;
    }

    /// The exposition text (format 0.0.4) of every family with at least one series, exactly as
    /// kube-apiserver's `/metrics` prints them (see the module documentation).
    pub fn encode_text(&self) -> String {
        if let Some(m) = self.folded() {
            return m.encode_text();
        }
        let mut out = String::new();
        for family in self.families() {
            out.push_str("# HELP ");
            out.push_str(family.name);
            out.push(' ');
            expfmt::write_help(&mut out, family.help);
            out.push('\n');
            out.push_str("# TYPE ");
            out.push_str(family.name);
            out.push(' ');
            out.push_str(family.kind);
            out.push('\n');
            for series in &family.series {
                for row in series.rows() {
                    out.push_str(family.name);
                    out.push_str(row.suffix);
                    let mut sep = '{';
                    for (k, v) in &series.labels {
                        out.push(sep);
                        out.push_str(k);
                        out.push_str("=\"");
                        expfmt::write_label_value(&mut out, v);
                        out.push('"');
                        sep = ',';
                    }
                    if let Some((k, v)) = row.extra {
                        out.push(sep);
                        out.push_str(k);
                        out.push_str("=\"");
                        expfmt::write_float(&mut out, v);
                        out.push('"');
                        sep = ',';
                    }
                    if sep == ',' {
                        out.push('}');
                    }
                    out.push(' ');
                    expfmt::write_float(&mut out, row.value);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// Every sample line of [`Metrics::encode_text`], in the same order: counters, histogram
    /// buckets (with `le`), sums and counts, summary quantiles (with `quantile`), sums and counts.
    pub fn samples(&self) -> Vec<Sample> {
        if let Some(m) = self.folded() {
            return m.samples();
        }
        let mut out = Vec::new();
        for family in self.families() {
            for series in &family.series {
                for row in series.rows() {
                    let mut labels: Vec<(String, String)> = series
                        .labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), v.clone()))
                        .collect();
                    if let Some((k, v)) = row.extra {
                        labels.push((k.to_owned(), expfmt::float_string(v)));
                    }
                    out.push(Sample {
                        name: format!("{}{}", family.name, row.suffix),
                        labels,
                        value: row.value,
                    });
                }
            }
        }
        out
    }

    /// The value of one sample: `family` is a sample name (a counter's family name, or a
    /// histogram's/summary's `_bucket`/`_sum`/`_count`, or a summary's family name with a
    /// `quantile` label); a histogram's or summary's family name alone gives its `_count`.
    /// `labels` must be exactly the sample's labels, in any order. `None` if there is no such
    /// series.
    pub fn value(&self, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let samples = self.samples();
        let matches = |s: &Sample, name: &str| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        };
        if let Some(s) = samples.iter().find(|s| matches(s, family)) {
            return Some(s.value);
        }
        let count = format!("{family}_count");
        samples.iter().find(|s| matches(s, &count)).map(|s| s.value)
    }

    /// Every non-empty family, sorted by name, with its series sorted by label values.
    fn families(&self) -> Vec<FamilyOut<'_>> {
        let mut controller = Vec::new();
        let mut mc_errors = Vec::new();
        let mut mc_seconds = Vec::new();
        let mut mc_exclusions = Vec::new();
        let mut step = Vec::new();
        let mut step_summary = Vec::new();
        let mut duration = Vec::new();
        let mut fail_open = Vec::new();
        let mut rejections = Vec::new();
        let mut requests = Vec::new();

        for (k, h) in &self.controller {
            controller.push(SeriesOut {
                labels: vec![
                    ("name", k.ty.plugin_name().to_owned()),
                    ("operation", k.op.as_str().to_owned()),
                    ("rejected", bool_str(k.rejected).to_owned()),
                    ("type", k.ty.step_str().to_owned()),
                ],
                value: ValueOut::Histogram(h, PHASE_BUCKETS),
            });
        }
        for (k, (h, s)) in &self.step {
            let labels = vec![
                ("operation", k.op.as_str().to_owned()),
                ("rejected", bool_str(k.rejected).to_owned()),
                ("type", k.ty.step_str().to_owned()),
            ];
            step_summary.push(SeriesOut {
                labels: labels.clone(),
                value: ValueOut::Summary(s),
            });
            step.push(SeriesOut {
                labels,
                value: ValueOut::Histogram(h, PHASE_BUCKETS),
            });
        }
        for (name, w) in &self.webhooks {
            for (k, h) in &w.duration {
                duration.push(SeriesOut {
                    labels: vec![
                        ("name", name.clone()),
                        ("operation", k.op.as_str().to_owned()),
                        ("rejected", bool_str(k.rejected).to_owned()),
                        ("type", k.ty.as_str().to_owned()),
                    ],
                    value: ValueOut::Histogram(h, WEBHOOK_BUCKETS),
                });
            }
            for ((k, code), n) in &w.requests {
                requests.push(SeriesOut {
                    labels: vec![
                        ("code", code.to_string()),
                        ("name", name.clone()),
                        ("operation", k.op.as_str().to_owned()),
                        ("rejected", bool_str(k.rejected).to_owned()),
                        ("type", k.ty.as_str().to_owned()),
                    ],
                    value: ValueOut::Counter(*n),
                });
            }
            for (k, n) in &w.rejections {
                rejections.push(SeriesOut {
                    labels: vec![
                        ("error_type", k.error_type.as_str().to_owned()),
                        ("name", name.clone()),
                        ("operation", k.op.as_str().to_owned()),
                        ("rejection_code", k.code.to_string()),
                        ("type", k.ty.as_str().to_owned()),
                    ],
                    value: ValueOut::Counter(*n),
                });
            }
            for (ty, n) in &w.fail_open {
                fail_open.push(SeriesOut {
                    labels: vec![("name", name.clone()), ("type", ty.as_str().to_owned())],
                    value: ValueOut::Counter(*n),
                });
            }
            let mc_labels = |t: WebhookType, ty: &str, op: Operation| {
                let kind = if t == WebhookType::ValidatingPolicy {
                    KIND_POLICY
                } else {
                    KIND_WEBHOOK
                };
                vec![
                    ("kind", kind.to_owned()),
                    ("name", name.clone()),
                    ("operation", op.as_str().to_owned()),
                    ("type", ty.to_owned()),
                ]
            };
            for ((ty, op), n) in &w.mc_errors {
                mc_errors.push(SeriesOut {
                    labels: mc_labels(*ty, ty.as_str(), *op),
                    value: ValueOut::Counter(*n),
                });
            }
            for ((ty, op), n) in &w.mc_exclusions {
                mc_exclusions.push(SeriesOut {
                    labels: mc_labels(*ty, ty.step_str(), *op),
                    value: ValueOut::Counter(*n),
                });
            }
            for ((ty, op), h) in &w.mc_seconds {
                mc_seconds.push(SeriesOut {
                    labels: mc_labels(*ty, ty.as_str(), *op),
                    value: ValueOut::Histogram(h, MC_BUCKETS),
                });
            }
        }

        let mut checks = (Vec::new(), Vec::new());
        let mut legacy = false;
        for (k, (n, h)) in &self.policy_checks {
            legacy |= k.legacy;
            let labels = if k.legacy {
                vec![
                    ("enforcement_action", k.action.to_owned()),
                    ("policy", k.policy.clone()),
                    ("policy_binding", k.binding.clone()),
                    ("state", "active".to_owned()),
                ]
            } else {
                vec![
                    ("enforcement_action", k.action.to_owned()),
                    ("error_type", k.error_type.to_owned()),
                    ("policy", k.policy.clone()),
                    ("policy_binding", k.binding.clone()),
                ]
            };
            checks.0.push(SeriesOut {
                labels: labels.clone(),
                value: ValueOut::Counter(*n),
            });
            checks.1.push(SeriesOut {
                labels,
                value: ValueOut::Histogram(h, POLICY_BUCKETS),
            });
        }
        let mut mutating = (Vec::new(), Vec::new());
        for ([policy, binding, error_type], (n, h)) in &self.mutating_checks {
            let labels = vec![
                ("error_type", error_type.clone()),
                ("policy", policy.clone()),
                ("policy_binding", binding.clone()),
            ];
            mutating.0.push(SeriesOut {
                labels: labels.clone(),
                value: ValueOut::Counter(*n),
            });
            mutating.1.push(SeriesOut {
                labels,
                value: ValueOut::Histogram(h, POLICY_BUCKETS),
            });
        }
        let (help_check, help_duration) = if legacy {
            (HELP_POLICY_CHECK_LEGACY, HELP_POLICY_DURATION_LEGACY)
        } else {
            (HELP_POLICY_CHECK, HELP_POLICY_DURATION)
        };
        let definitions = (self.policy_definitions > 0)
            .then(|| SeriesOut {
                labels: vec![
                    ("enforcement_action", "deny".to_owned()),
                    ("state", "active".to_owned()),
                ],
                value: ValueOut::Counter(self.policy_definitions),
            })
            .into_iter()
            .collect();
        let mut families = vec![
            FamilyOut::new(POLICY_CHECK, help_check, "counter", checks.0),
            FamilyOut::new(
                POLICY_DEFINITIONS,
                HELP_POLICY_DEFINITIONS,
                "counter",
                definitions,
            ),
            FamilyOut::new(POLICY_DURATION, help_duration, "histogram", checks.1),
            FamilyOut::new(MUTATING_CHECK, HELP_MUTATING_CHECK, "counter", mutating.0),
            FamilyOut::new(
                MUTATING_DURATION,
                HELP_MUTATING_DURATION,
                "histogram",
                mutating.1,
            ),
            FamilyOut::new(
                CONTROLLER_DURATION,
                HELP_CONTROLLER_DURATION,
                "histogram",
                controller,
            ),
            FamilyOut::new(MC_ERRORS, HELP_MC_ERRORS, "counter", mc_errors),
            FamilyOut::new(MC_SECONDS, HELP_MC_SECONDS, "histogram", mc_seconds),
            FamilyOut::new(MC_EXCLUSIONS, HELP_MC_EXCLUSIONS, "counter", mc_exclusions),
            FamilyOut::new(STEP_DURATION, HELP_STEP_DURATION, "histogram", step),
            FamilyOut::new(STEP_SUMMARY, HELP_STEP_SUMMARY, "summary", step_summary),
            FamilyOut::new(
                WEBHOOK_DURATION,
                HELP_WEBHOOK_DURATION,
                "histogram",
                duration,
            ),
            FamilyOut::new(
                WEBHOOK_FAIL_OPEN,
                HELP_WEBHOOK_FAIL_OPEN,
                "counter",
                fail_open,
            ),
            FamilyOut::new(
                WEBHOOK_REJECTION,
                HELP_WEBHOOK_REJECTION,
                "counter",
                rejections,
            ),
            FamilyOut::new(WEBHOOK_REQUEST, HELP_WEBHOOK_REQUEST, "counter", requests),
        ];
        families.retain(|f| !f.series.is_empty());
        families.sort_by(|a, b| a.name.cmp(b.name));
        families
    }
}

/// One family ready to print.
struct FamilyOut<'a> {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    series: Vec<SeriesOut<'a>>,
}

impl<'a> FamilyOut<'a> {
    fn new(
        name: &'static str,
        help: &'static str,
        kind: &'static str,
        mut series: Vec<SeriesOut<'a>>,
    ) -> Self {
        // client_golang's MetricSorter: label values compared pairwise in label-name order.
        series.sort_by(|a, b| {
            a.labels
                .iter()
                .map(|(_, v)| v.as_str())
                .cmp(b.labels.iter().map(|(_, v)| v.as_str()))
        });
        FamilyOut {
            name,
            help,
            kind,
            series,
        }
    }
}

/// One series ready to print: labels in alphabetical order of their names, and its value.
struct SeriesOut<'a> {
    labels: Vec<(&'static str, String)>,
    value: ValueOut<'a>,
}

enum ValueOut<'a> {
    Counter(u64),
    Histogram(&'a Histogram, &'static [f64]),
    Summary(&'a Summary),
}

/// One sample line of a series: name suffix, the extra `le`/`quantile` label, value.
struct Row {
    suffix: &'static str,
    extra: Option<(&'static str, f64)>,
    value: f64,
}

impl SeriesOut<'_> {
    fn rows(&self) -> Vec<Row> {
        match &self.value {
            ValueOut::Counter(n) => vec![Row {
                suffix: "",
                extra: None,
                value: *n as f64,
            }],
            ValueOut::Histogram(h, bounds) => {
                let mut rows: Vec<Row> = bounds
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| Row {
                        suffix: "_bucket",
                        extra: Some(("le", b)),
                        value: h.cumulative(i) as f64,
                    })
                    .collect();
                rows.push(Row {
                    suffix: "_bucket",
                    extra: Some(("le", f64::INFINITY)),
                    value: h.count as f64,
                });
                rows.push(Row {
                    suffix: "_sum",
                    extra: None,
                    value: h.sum,
                });
                rows.push(Row {
                    suffix: "_count",
                    extra: None,
                    value: h.count as f64,
                });
                rows
            }
            ValueOut::Summary(s) => {
                let values = s.stream.query_objectives();
                let mut rows: Vec<Row> = quantile::OBJECTIVES
                    .iter()
                    .zip(values)
                    .map(|(&(q, _), v)| Row {
                        suffix: "",
                        extra: Some(("quantile", q)),
                        value: v,
                    })
                    .collect();
                rows.push(Row {
                    suffix: "_sum",
                    extra: None,
                    value: s.sum,
                });
                rows.push(Row {
                    suffix: "_count",
                    extra: None,
                    value: s.count as f64,
                });
                rows
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn bucket_boundaries_are_inclusive() {
        let mut h = Histogram::default();
        for v in [0.005, 0.0050001, 25.0, 25.5] {
            h.observe(WEBHOOK_BUCKETS, v);
        }
        assert_eq!(h.cumulative(0), 1);
        assert_eq!(h.cumulative(1), 2);
        assert_eq!(h.cumulative(7), 3);
        assert_eq!(h.count, 4);
    }

    #[test]
    fn merge_replays_small_sets_in_order() {
        let mut a = Metrics::new();
        a.observe_step(WebhookType::Admit, Operation::Create, false, ms(100));
        let mut b = Metrics::new();
        b.observe_step(WebhookType::Admit, Operation::Create, false, ms(200));
        let mut sequential = a.clone();
        sequential.observe_step(WebhookType::Admit, Operation::Create, false, ms(200));
        a.merge(&b);
        assert_eq!(a.encode_text(), sequential.encode_text());
        let sum = a.value(
            "apiserver_admission_step_admission_duration_seconds_sum",
            &[
                ("type", "admit"),
                ("operation", "CREATE"),
                ("rejected", "false"),
            ],
        );
        assert_eq!(sum, Some(0.1 + 0.2));
    }

    #[test]
    fn large_merges_add_totals() {
        let mut a = Metrics::new();
        let mut b = Metrics::new();
        for _ in 0..10 {
            b.observe_controller(WebhookType::Validating, Operation::Delete, true, ms(1));
        }
        a.merge(&b);
        a.merge(&b);
        let labels = [
            ("name", "ValidatingAdmissionWebhook"),
            ("operation", "DELETE"),
            ("rejected", "true"),
            ("type", "validate"),
        ];
        assert_eq!(
            a.value(CONTROLLER_DURATION, &labels),
            Some(20.0),
            "{}",
            a.encode_text()
        );
    }
}

//! What the views show, derived from the engine's outcome and trace only: request rows, chain
//! cells, annotation rows, webhook settings and counts. Pure functions, no IO.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::api::WebhookKind;
use crate::engine::{CallDecision, CallRecord, Hook, Object, Outcome, Step, StepKind};
use crate::replay::run::Replayed;

/// A webhook as the engine dispatches it, with its effective (defaulted) settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInfo {
    /// Mutating or validating.
    pub phase: WebhookKind,
    /// Configuration name.
    pub configuration: String,
    /// Webhook name.
    pub webhook: String,
    /// Position among the webhooks of its phase.
    pub position: usize,
    /// Setting name and value, in a fixed order.
    pub settings: Vec<(&'static str, String)>,
}

fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The settings a policy binding's row shows whatever the policy's kind.
fn policy_settings(
    settings: &mut Vec<(&'static str, String)>,
    binding: &crate::api::policy::ValidatingAdmissionPolicyBinding,
    param_kind: Option<&crate::api::policy::ParamKind>,
    match_conditions: &[crate::api::MatchCondition],
    variables: &[crate::api::policy::Variable],
) {
    if let Some(m) = &binding.spec.match_resources {
        settings.push(("matchResources", json_text(m)));
    }
    if let Some(k) = param_kind {
        settings.push(("paramKind", json_text(k)));
    }
    if let Some(r) = &binding.spec.param_ref {
        settings.push(("paramRef", json_text(r)));
    }
    if !match_conditions.is_empty() {
        settings.push(("matchConditions", json_text(&match_conditions)));
    }
    if !variables.is_empty() {
        settings.push(("variables", json_text(&variables)));
    }
}

impl HookInfo {
    /// For a policy's row (one per binding), the kinds of the policy and of its binding; None
    /// for a webhook.
    pub fn policy_kind(&self) -> Option<(&'static str, &'static str)> {
        let kind = self.settings.iter().find(|(k, _)| *k == "kind")?;
        match kind.1.as_str() {
            "ValidatingAdmissionPolicy" => Some((
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionPolicyBinding",
            )),
            "MutatingAdmissionPolicy" => {
                Some(("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"))
            }
            _ => None,
        }
    }

    /// From the engine's hook.
    pub fn from_hook(phase: WebhookKind, h: &Hook) -> HookInfo {
        let w = &h.webhook;
        let or = |v: &Option<String>, d: &str| v.clone().unwrap_or_else(|| d.to_string());
        let client = match (&w.client_config.url, &w.client_config.service) {
            (Some(u), _) => u.clone(),
            (None, Some(s)) => json_text(s),
            (None, None) => "(none)".into(),
        };
        let mut settings = vec![
            ("client", client),
            ("failurePolicy", or(&w.failure_policy, "Fail")),
            ("matchPolicy", or(&w.match_policy, "Exact")),
            ("sideEffects", or(&w.side_effects, "(unset)")),
            (
                "timeoutSeconds",
                w.timeout_seconds
                    .map_or("(unset)".into(), |t| t.to_string()),
            ),
            (
                "admissionReviewVersions",
                w.admission_review_versions
                    .as_ref()
                    .map_or("(unset)".into(), |v| v.join(",")),
            ),
        ];
        if phase == WebhookKind::Mutating {
            settings.push(("reinvocationPolicy", or(&w.reinvocation_policy, "Never")));
        }
        settings.push(("rules", json_text(&w.rules)));
        settings.push(("namespaceSelector", json_text(&w.namespace_selector)));
        settings.push(("objectSelector", json_text(&w.object_selector)));
        if let Some(c) = &w.match_conditions {
            settings.push(("matchConditions", json_text(c)));
        }
        HookInfo {
            phase,
            configuration: h.configuration.clone(),
            webhook: w.name.clone(),
            position: h.position,
            settings,
        }
    }
}

impl HookInfo {
    /// A ValidatingAdmissionPolicy with one of its bindings: `configuration` is the policy,
    /// `webhook` the binding, as in the call records.
    pub fn from_policy(
        policy: &crate::api::policy::ValidatingAdmissionPolicy,
        binding: &crate::api::policy::ValidatingAdmissionPolicyBinding,
        position: usize,
    ) -> HookInfo {
        let spec = &policy.spec;
        let expressions: Vec<&str> = spec
            .validations
            .iter()
            .map(|v| v.expression.as_str())
            .collect();
        let mut settings = vec![
            ("kind", "ValidatingAdmissionPolicy".to_string()),
            (
                "failurePolicy",
                spec.failure_policy.clone().unwrap_or_else(|| "Fail".into()),
            ),
            (
                "validationActions",
                binding.spec.validation_actions.join(","),
            ),
            ("matchConstraints", json_text(&spec.match_constraints)),
        ];
        policy_settings(
            &mut settings,
            binding,
            spec.param_kind.as_ref(),
            &spec.match_conditions,
            &spec.variables,
        );
        settings.push(("validations", json_text(&expressions)));
        if !spec.audit_annotations.is_empty() {
            settings.push(("auditAnnotations", json_text(&spec.audit_annotations)));
        }
        HookInfo {
            phase: WebhookKind::Validating,
            configuration: policy.name.clone(),
            webhook: binding.name.clone(),
            position,
            settings,
        }
    }
}

impl HookInfo {
    /// A MutatingAdmissionPolicy with one of its bindings.
    pub fn from_mutating_policy(
        policy: &crate::api::policy::MutatingAdmissionPolicy,
        binding: &crate::api::policy::ValidatingAdmissionPolicyBinding,
        position: usize,
    ) -> HookInfo {
        let spec = &policy.spec;
        let mut settings = vec![
            ("kind", "MutatingAdmissionPolicy".to_string()),
            (
                "failurePolicy",
                spec.failure_policy.clone().unwrap_or_else(|| "Fail".into()),
            ),
            ("reinvocationPolicy", spec.reinvocation_policy.clone()),
            ("matchConstraints", json_text(&spec.match_constraints)),
        ];
        policy_settings(
            &mut settings,
            binding,
            spec.param_kind.as_ref(),
            &spec.match_conditions,
            &spec.variables,
        );
        settings.push(("mutations", json_text(&spec.mutations)));
        HookInfo {
            phase: WebhookKind::Mutating,
            configuration: policy.name.clone(),
            webhook: binding.name.clone(),
            position,
            settings,
        }
    }
}

/// The verdict of a request as the table shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Admitted, every webhook answered.
    Allowed,
    /// Admitted, but a webhook failed open.
    FailedOpen,
    /// Refused with this code.
    Denied(i32),
}

/// The verdict of a request as the table shows it.
pub fn verdict(o: &Outcome) -> Verdict {
    let failed_open = o
        .calls
        .iter()
        .any(|c| cell_state(c) == CellState::FailedOpen);
    match (&o.status, o.allowed) {
        (Some(s), false) => Verdict::Denied(s.code),
        (None, false) => Verdict::Denied(0),
        _ if failed_open => Verdict::FailedOpen,
        _ => Verdict::Allowed,
    }
}

/// `namespace/name` of a request, or its name alone for cluster-scoped objects and Namespaces.
pub fn target(a: &crate::engine::Attributes) -> String {
    if a.namespace.is_empty() || a.is_namespace_resource() {
        a.name.clone()
    } else {
        format!("{}/{}", a.namespace, a.name)
    }
}

/// One row of the Requests view.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestRow {
    /// `CREATE`, `UPDATE`, ….
    pub operation: String,
    /// `pods`, `deployments.apps`, with `/subresource`.
    pub resource: String,
    /// `namespace/name` (or `name`).
    pub target: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Dry run.
    pub dry_run: bool,
    /// Webhooks called (counting each round).
    pub called: usize,
    /// Mutating rounds run (1 or 2; 0 when no mutating webhook was considered).
    pub rounds: u8,
    /// Virtual time of the dispatch.
    pub duration: Duration,
    /// Names of the webhooks called, for filtering.
    pub webhooks: Vec<String>,
    /// Namespace, for filtering.
    pub namespace: String,
    /// The request concerns a Secret (masked unless revealed).
    pub secret: bool,
}

impl RequestRow {
    /// Derives the row from a replayed request.
    pub fn new(r: &Replayed) -> RequestRow {
        let a = &r.request.attrs;
        let o = &r.outcome;
        let mut resource = if a.resource.group.is_empty() {
            a.resource.resource.clone()
        } else {
            format!("{}.{}", a.resource.resource, a.resource.group)
        };
        if !a.sub_resource.is_empty() {
            resource = format!("{resource}/{}", a.sub_resource);
        }
        let target = target(a);
        let verdict = verdict(o);
        let called: Vec<&CallRecord> = o
            .calls
            .iter()
            .filter(|c| c.decision == CallDecision::Called)
            .collect();
        let rounds = if o.reinvoked {
            2
        } else {
            u8::from(o.calls.iter().any(|c| c.phase == WebhookKind::Mutating))
        };
        let mut webhooks: Vec<String> = called.iter().map(|c| c.webhook.to_string()).collect();
        webhooks.dedup();
        RequestRow {
            operation: a.operation.to_string(),
            resource,
            target,
            verdict,
            dry_run: a.dry_run,
            called: called.len(),
            rounds,
            duration: o.elapsed,
            webhooks,
            namespace: a.namespace.clone(),
            secret: crate::replay::report::is_secret(&r.request),
        }
    }

    /// Whether the row matches a filter: every word must appear in one of the fields
    /// (operation, resource, namespace/name, verdict word, a called webhook), case-insensitive.
    pub fn matches(&self, filter: &str) -> bool {
        let verdict = match self.verdict {
            Verdict::Allowed => "allowed".to_string(),
            Verdict::FailedOpen => "allowed failed-open".to_string(),
            Verdict::Denied(c) => format!("denied {c}"),
        };
        let dry = if self.dry_run { "dry-run" } else { "" };
        let hay = format!(
            "{} {} {} {} {} {}",
            self.operation,
            self.resource,
            self.target,
            verdict,
            dry,
            self.webhooks.join(" ")
        )
        .to_lowercase();
        filter
            .split_whitespace()
            .all(|w| hay.contains(&w.to_lowercase()))
    }
}

/// What became of one webhook in one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellState {
    /// Not called.
    Skipped,
    /// Called, allowed, no change.
    Called,
    /// Called and changed the object.
    Mutated,
    /// Denied the request.
    Denied,
    /// The call failed and failed the request.
    Errored,
    /// The call failed and the request went on (failurePolicy Ignore).
    FailedOpen,
}

impl CellState {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CellState::Skipped => "skipped",
            CellState::Called => "called",
            CellState::Mutated => "mutated",
            CellState::Denied => "denied",
            CellState::Errored => "errored",
            CellState::FailedOpen => "failed open",
        }
    }
}

/// The state of a call record.
pub fn cell_state(c: &CallRecord) -> CellState {
    if c.decision == CallDecision::Skipped {
        // Matching it failed the request.
        if c.error.is_some() {
            CellState::Errored
        } else {
            CellState::Skipped
        }
    } else if c.error.is_some() {
        if c.failure_policy == "Ignore" && c.allowed != Some(false) {
            CellState::FailedOpen
        } else {
            CellState::Errored
        }
    } else if c.allowed == Some(false) {
        CellState::Denied
    } else if c.mutated {
        CellState::Mutated
    } else {
        CellState::Called
    }
}

/// The phase blocks of the chain: mutating round 0, round 1, validating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Block {
    /// Mutating, round 0.
    Round0,
    /// Mutating, the reinvocation round.
    Round1,
    /// Validating.
    Validating,
}

impl Block {
    /// Of a call.
    pub fn of(c: &CallRecord) -> Block {
        match (c.phase, c.round) {
            (WebhookKind::Validating, _) => Block::Validating,
            (_, 0) => Block::Round0,
            _ => Block::Round1,
        }
    }

    /// Title.
    pub fn title(self) -> &'static str {
        match self {
            Block::Round0 => "mutating · round 0",
            Block::Round1 => "mutating · round 1 (reinvocation)",
            Block::Validating => "validating",
        }
    }
}

/// A call's position in its phase's dispatch order: the Webhooks view's POS, the one index the
/// Chain view shows (the engine's own index counts a validating webhook among those called).
pub fn dispatch_position(hooks: &[HookInfo], c: &CallRecord) -> usize {
    hooks
        .iter()
        .find(|h| {
            h.phase == c.phase && *h.configuration == *c.configuration && *h.webhook == *c.webhook
        })
        .map_or(c.index, |h| h.position)
}

/// The calls of `o` (indices into `o.calls`) in dispatch order: mutating round 0, round 1, then
/// the validating webhooks, each block by dispatch position; the order the Chain view lists and
/// moves through them.
pub fn chain_order(o: &Outcome, hooks: &[HookInfo]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..o.calls.len()).collect();
    order.sort_by_key(|&i| {
        let c = &o.calls[i];
        (Block::of(c), dispatch_position(hooks, c))
    });
    order
}

/// The index of the call that decided the verdict: the one that refused the request, or the
/// last webhook called when it was admitted (None when nothing was called).
pub fn deciding_call(o: &Outcome) -> Option<usize> {
    if !o.allowed
        && let Some(i) = o
            .calls
            .iter()
            .position(|c| matches!(cell_state(c), CellState::Denied | CellState::Errored))
    {
        return Some(i);
    }
    o.calls
        .iter()
        .rposition(|c| c.decision == CallDecision::Called)
}

/// The trace steps that belong to one call: its own steps, and the annotations and metrics
/// written while it was the current webhook.
pub fn steps_of(o: &Outcome, c: &CallRecord) -> Vec<Step> {
    let mut current = false;
    let mut out = Vec::new();
    for s in o.steps() {
        match s.kind.hook() {
            Some(h) => {
                current = h.phase == c.phase
                    && h.round == c.round
                    && h.configuration == c.configuration
                    && h.webhook == c.webhook;
                if current {
                    out.push(s);
                }
            }
            None => match &s.kind {
                StepKind::Annotation { .. }
                | StepKind::AnnotationDropped { .. }
                | StepKind::Metric { .. }
                    if current =>
                {
                    out.push(s)
                }
                _ => current = false,
            },
        }
    }
    out
}

/// An object with Secret data masked when `mask` is set.
pub fn masked_object(v: &Value, mask: bool) -> Value {
    let mut v = v.clone();
    if mask {
        crate::replay::report::redact_secret(&mut v);
    }
    v
}

/// A patch with the values it writes under `/data` or `/stringData` (or a whole object it
/// writes) masked when `mask` is set.
pub fn masked_patch(patch: &Value, mask: bool) -> Value {
    let mut p = patch.clone();
    if mask && let Value::Array(ops) = &mut p {
        for op in ops {
            let path = op["path"].as_str().unwrap_or_default();
            if (path.starts_with("/data") || path.starts_with("/stringData") || path.is_empty())
                && let Some(v) = op.get_mut("value")
            {
                *v = Value::String("<redacted>".into());
            }
        }
    }
    p
}

/// The patch a call applied and the object after it, from the call's trace steps.
pub fn applied_patch(o: &Outcome, c: &CallRecord) -> Option<(Value, Arc<Object>)> {
    steps_of(o, c).into_iter().find_map(|s| match s.kind {
        StepKind::PatchApplied { patch, after, .. } => Some((patch, after)),
        _ => None,
    })
}

/// One audit annotation of the Annotations view: which request wrote it and where it is among
/// that outcome's annotations (`State::annotation` gives it; [`decode_annotation`] its reading).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnotationRow {
    /// Input position of the request (index into the requests).
    pub request: u32,
    /// Index into the request's outcome's annotations.
    pub annotation: u32,
}

impl AnnotationRow {
    /// Input position of the request, as an index.
    pub fn request(&self) -> usize {
        self.request as usize
    }
}

/// A short reading of the apiserver's `mutation.webhook…` and `patch.webhook…` values.
pub fn decode_annotation(key: &str, value: &str) -> Option<String> {
    if !(key.starts_with("mutation.webhook.admission.k8s.io/")
        || key.starts_with("patch.webhook.admission.k8s.io/"))
    {
        return None;
    }
    let v: Value = crate::json::from_str(value).ok()?;
    let who = format!(
        "{}/{}",
        v.get("configuration")?.as_str()?,
        v.get("webhook")?.as_str()?
    );
    if let Some(m) = v.get("mutated").and_then(Value::as_bool) {
        return Some(format!(
            "{who} {}",
            if m { "mutated" } else { "did not mutate" }
        ));
    }
    let ops: Vec<String> = v
        .get("patch")?
        .as_array()?
        .iter()
        .map(|op| {
            format!(
                "{} {}",
                op.get("op").and_then(Value::as_str).unwrap_or("?"),
                op.get("path").and_then(Value::as_str).unwrap_or("?")
            )
        })
        .collect();
    Some(format!("{who} patch: {}", ops.join(", ")))
}

/// Per-webhook counts of the Webhooks view: the what-if comparison's counts, so that a word
/// means the same in both views.
pub type HookCounts = crate::edit::HookStats;

/// A line diff of two texts (longest common subsequence): `(' ' | '-' | '+', line)`.
pub fn line_diff<'a>(before: &'a str, after: &'a str) -> Vec<(char, &'a str)> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    // Trim the common head and tail so the table stays small for large objects.
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let (n, m) = (ma.len(), mb.len());
    let mut lcs = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[at(i, j)] = if ma[i] == mb[j] {
                lcs[at(i + 1, j + 1)] + 1
            } else {
                lcs[at(i + 1, j)].max(lcs[at(i, j + 1)])
            };
        }
    }
    let mut out: Vec<(char, &str)> = a[..head].iter().map(|l| (' ', *l)).collect();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && ma[i] == mb[j] {
            out.push((' ', ma[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[at(i + 1, j)] >= lcs[at(i, j + 1)]) {
            // A changed line reads as removed, then added (as unified diffs write it).
            out.push(('-', ma[i]));
            i += 1;
        } else {
            out.push(('+', mb[j]));
            j += 1;
        }
    }
    out.extend(a[a.len() - tail..].iter().map(|l| (' ', *l)));
    out
}

/// A replayed request, with what the status bar counts and masking need on every frame; the
/// rest of its table row is derived when drawn ([`Entry::row`]).
#[derive(Debug, Clone)]
pub struct Entry {
    /// What the replay produced (request, outcome, trace).
    pub replayed: Box<Replayed>,
    /// The verdict the table shows.
    pub verdict: Verdict,
    /// The request concerns a Secret (masked unless revealed).
    pub secret: bool,
}

impl Entry {
    /// An entry for a replayed request.
    pub fn new(replayed: Box<Replayed>) -> Entry {
        Entry {
            verdict: verdict(&replayed.outcome),
            secret: crate::replay::report::is_secret(&replayed.request),
            replayed,
        }
    }

    /// Its row of the Requests view.
    pub fn row(&self) -> RequestRow {
        RequestRow::new(&self.replayed)
    }
}

/// Rejections by webhook and `error_type` (summed over the other labels), as the Metrics view
/// charts them: `((webhook, error_type), count)` sorted by webhook.
pub fn rejections(metrics: &crate::metrics::Metrics) -> Vec<((String, String), f64)> {
    sum_by(
        metrics,
        "apiserver_admission_webhook_rejection_count",
        &["name", "error_type"],
    )
}

/// Sums the samples of a family by some of their labels.
pub fn sum_by(
    metrics: &crate::metrics::Metrics,
    family: &str,
    by: &[&str],
) -> Vec<((String, String), f64)> {
    let mut out: std::collections::BTreeMap<(String, String), f64> =
        std::collections::BTreeMap::new();
    for s in metrics.samples().into_iter().filter(|s| s.name == family) {
        let get = |k: &str| {
            s.labels
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let key = (get(by[0]), by.get(1).map(|b| get(b)).unwrap_or_default());
        *out.entry(key).or_default() += s.value;
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_gains_a_trailing_comma_is_removed_before_it_is_added() {
        let before = "{\n  \"a\": 1\n}";
        let after = "{\n  \"a\": 1,\n  \"b\": 2\n}";
        assert_eq!(
            line_diff(before, after),
            vec![
                (' ', "{"),
                ('-', "  \"a\": 1"),
                ('+', "  \"a\": 1,"),
                ('+', "  \"b\": 2"),
                (' ', "}"),
            ]
        );
    }

    #[test]
    fn diff_marks_changes() {
        let d = line_diff("a\nb\nc\n", "a\nx\nc\nd\n");
        assert_eq!(
            d,
            vec![(' ', "a"), ('-', "b"), ('+', "x"), (' ', "c"), ('+', "d")]
        );
        assert!(line_diff("same", "same").iter().all(|(c, _)| *c == ' '));
    }

    #[test]
    fn decodes_mutation_annotations() {
        assert_eq!(
            decode_annotation(
                "mutation.webhook.admission.k8s.io/round_0_index_0",
                r#"{"configuration":"c","webhook":"w","mutated":true}"#
            )
            .as_deref(),
            Some("c/w mutated")
        );
        assert_eq!(decode_annotation("other/key", "x"), None);
    }
}

//! What an edit changes: two result sets of the same requests compared request by request
//! (verdict, final object, audit annotations, warnings) and webhook by webhook (how often each
//! matched, was skipped and why, was called, mutated, denied, errored or failed open).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::api::WebhookKind;
use crate::engine::{CallDecision, SkipReason, StepKind};
use crate::replay::run::Replayed;

/// The client-visible verdict of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted.
    Allowed,
    /// Refused with this status.
    Denied {
        /// HTTP status code.
        code: i32,
        /// The status message.
        message: String,
    },
}

impl Verdict {
    /// Of a replayed request.
    pub fn of(r: &Replayed) -> Verdict {
        let o = &r.outcome;
        if o.allowed {
            return Verdict::Allowed;
        }
        let (code, message) = o
            .status
            .as_ref()
            .map(|s| (s.code, s.message.clone()))
            .unwrap_or_default();
        Verdict::Denied { code, message }
    }

    /// Whether admitted.
    pub fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed)
    }
}

/// How one value of the final object changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectChange {
    /// Present only after the edit.
    Added(String),
    /// Present only before the edit.
    Removed(String),
    /// Present on both sides with different values.
    Changed(String),
}

impl ObjectChange {
    /// The JSON pointer (`/metadata/labels/team`; empty: the whole object).
    pub fn pointer(&self) -> &str {
        match self {
            ObjectChange::Added(p) | ObjectChange::Removed(p) | ObjectChange::Changed(p) => p,
        }
    }
}

/// One audit annotation that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationChange {
    /// Key.
    pub key: String,
    /// Value before the edit (None: absent).
    pub before: Option<String>,
    /// Value after the edit (None: absent).
    pub after: Option<String>,
}

/// What changed for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestChange {
    /// Position of the request in the loaded requests.
    pub index: usize,
    /// The verdicts, when they differ (a flip, or another denial status).
    pub verdict: Option<(Verdict, Verdict)>,
    /// Differences of the final object (after the mutating chain), by JSON pointer.
    pub object: Vec<ObjectChange>,
    /// Audit annotations added, removed or changed.
    pub annotations: Vec<AnnotationChange>,
    /// Warnings only after the edit.
    pub warnings_added: Vec<String>,
    /// Warnings only before the edit.
    pub warnings_removed: Vec<String>,
}

impl RequestChange {
    /// Whether the verdict flipped between allowed and denied.
    pub fn flipped(&self) -> bool {
        self.verdict
            .as_ref()
            .is_some_and(|(b, a)| b.allowed() != a.allowed())
    }

    /// How the verdict changed, in the words the console uses: `flipped` (allowed ↔ denied),
    /// `status code` (denied both times with another code), `denial message` (the same code,
    /// another message). None when the verdicts are equal.
    pub fn verdict_change(&self) -> Option<&'static str> {
        let (b, a) = self.verdict.as_ref()?;
        Some(match (b, a) {
            _ if self.flipped() => "flipped",
            (Verdict::Denied { code: x, .. }, Verdict::Denied { code: y, .. }) if x != y => {
                "status code"
            }
            _ => "denial message",
        })
    }

    fn is_empty(&self) -> bool {
        self.verdict.is_none()
            && self.object.is_empty()
            && self.annotations.is_empty()
            && self.warnings_added.is_empty()
            && self.warnings_removed.is_empty()
    }
}

/// A webhook as counted: configuration, webhook, phase.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HookKey {
    /// Configuration name.
    pub configuration: String,
    /// Webhook name.
    pub webhook: String,
    /// Mutating or validating.
    pub phase: WebhookKind,
}

impl HookKey {
    /// The key of a webhook of `configuration` in `phase`.
    pub fn new(configuration: &str, webhook: &str, phase: WebhookKind) -> HookKey {
        HookKey {
            configuration: configuration.to_string(),
            webhook: webhook.to_string(),
            phase,
        }
    }
}

/// What one webhook did across a result set. `matched` and the skips count requests (a request
/// either matched the webhook, calling it in some round, or skipped it for its first reason, or
/// failed before reaching it); the rest count calls (a mutating webhook reinvoked counts twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HookStats {
    /// Requests for which it was called at least once.
    pub matched: usize,
    /// Requests that skipped it because no rule matches the operation, resource or scope.
    pub skipped_rules: usize,
    /// Skipped by its namespaceSelector or objectSelector.
    pub skipped_selector: usize,
    /// Skipped by a matchCondition (false, or an error ignored under failurePolicy Ignore).
    pub skipped_match_condition: usize,
    /// Not called again in the reinvocation round.
    pub not_reinvoked: usize,
    /// Calls made (or attempted).
    pub called: usize,
    /// Calls that changed the object.
    pub mutated: usize,
    /// Calls that denied the request: a denial, or an error under failurePolicy `Fail` (also
    /// counted in `errored`).
    pub denied: usize,
    /// Calls that failed and failed the request (failurePolicy Fail).
    pub errored: usize,
    /// Calls that failed and let the request go on (failurePolicy Ignore).
    pub failed_open: usize,
}

impl HookStats {
    /// All skips, whatever the reason.
    pub fn skipped(&self) -> usize {
        self.skipped_rules + self.skipped_selector + self.skipped_match_condition
    }
}

impl HookStats {
    /// Adds another webhook's (or another request's) counts to these.
    pub fn add(&mut self, o: &HookStats) {
        self.matched += o.matched;
        self.skipped_rules += o.skipped_rules;
        self.skipped_selector += o.skipped_selector;
        self.skipped_match_condition += o.skipped_match_condition;
        self.not_reinvoked += o.not_reinvoked;
        self.called += o.called;
        self.mutated += o.mutated;
        self.denied += o.denied;
        self.errored += o.errored;
        self.failed_open += o.failed_open;
    }
}

/// The counts of `key` in `stats`, added in `order` when first seen.
fn entry<'s>(
    stats: &'s mut BTreeMap<HookKey, HookStats>,
    order: &mut Vec<HookKey>,
    key: HookKey,
) -> &'s mut HookStats {
    if !stats.contains_key(&key) {
        order.push(key.clone());
    }
    stats.entry(key).or_default()
}

/// A policy binding's skip, by the engine's reason: a selector, a matchCondition, the
/// reinvocation round, or the rules. A request skips a binding once, for its first reason.
fn count_policy_skip(s: &mut HookStats, why: &str) {
    let not_reinvoked = why.starts_with("reinvocationPolicy");
    if s.skipped() > 0 && !not_reinvoked {
        return;
    }
    if not_reinvoked {
        s.not_reinvoked += 1;
    } else if why.contains("Selector does not match") {
        s.skipped_selector += 1;
    } else if why.starts_with("matchConditions") {
        s.skipped_match_condition += 1;
    } else {
        s.skipped_rules += 1;
    }
}

/// What each webhook did in one request (its `matched` is 1 where it was called at all), in
/// the order the request met them. The console's Webhooks view and the what-if comparison both
/// count with it, so that each count means one thing.
pub fn request_stats(r: &Replayed) -> Vec<(HookKey, HookStats)> {
    outcome_stats(&r.outcome)
}

/// [`request_stats`] of a dispatcher's outcome. A call that failed under failurePolicy `Fail`
/// and so refused the request (a policy's runtime error) is both `errored` and `denied`, as
/// `hookscope replay`'s summary counts it and as the apiserver's
/// `apiserver_validating_admission_policy_check_total` does (`enforcement_action="deny"` with
/// its `error_type`).
pub fn outcome_stats(outcome: &crate::engine::Outcome) -> Vec<(HookKey, HookStats)> {
    let mut order: Vec<HookKey> = Vec::new();
    let mut stats: BTreeMap<HookKey, HookStats> = BTreeMap::new();
    for c in &outcome.calls {
        if c.decision != CallDecision::Called {
            // A policy binding records its skip in its call, not as a Skipped step.
            if let (Some(why), Some(_)) = (c.skip_reason.as_deref(), &c.policy) {
                let s = entry(
                    &mut stats,
                    &mut order,
                    HookKey::new(&c.configuration, &c.webhook, c.phase),
                );
                count_policy_skip(s, why);
            }
            continue;
        }
        let s = entry(
            &mut stats,
            &mut order,
            HookKey::new(&c.configuration, &c.webhook, c.phase),
        );
        s.called += 1;
        s.matched = 1;
        if c.error.is_some() {
            if c.failure_policy == "Ignore" && c.allowed != Some(false) {
                s.failed_open += 1;
            } else {
                s.errored += 1;
            }
        } else if c.mutated {
            s.mutated += 1;
        }
        if c.allowed == Some(false) {
            s.denied += 1;
        }
    }
    for step in &outcome.steps() {
        let StepKind::Skipped { hook, cause, .. } = &step.kind else {
            continue;
        };
        let s = entry(
            &mut stats,
            &mut order,
            HookKey::new(&hook.configuration, &hook.webhook, hook.phase),
        );
        // A request skips a webhook once, for its first reason (round 0's).
        if s.skipped() > 0 && !matches!(cause, SkipReason::NotReinvoked { .. }) {
            continue;
        }
        match cause {
            SkipReason::Rules => s.skipped_rules += 1,
            SkipReason::NamespaceSelector | SkipReason::ObjectSelector => s.skipped_selector += 1,
            SkipReason::MatchConditionFalse { .. }
            | SkipReason::MatchConditionErrorIgnored { .. } => s.skipped_match_condition += 1,
            SkipReason::NotReinvoked { .. } => s.not_reinvoked += 1,
            // The request failed there: neither a match nor a skip.
            SkipReason::RequestFailed { .. } | SkipReason::TimedOutBeforeCall => {}
        }
    }
    order
        .into_iter()
        .map(|k| {
            let mut s = stats.get(&k).copied().unwrap_or_default();
            // Called in one round and skipped in another: matched, not skipped.
            if s.matched > 0 {
                s.skipped_rules = 0;
                s.skipped_selector = 0;
                s.skipped_match_condition = 0;
            }
            (k, s)
        })
        .collect()
}

/// Per-webhook counts of a result set (a slice, or any iterator of references, such as the
/// console's entries), in dispatch order of first appearance.
pub fn hook_stats<'a>(
    results: impl IntoIterator<Item = &'a Replayed>,
) -> Vec<(HookKey, HookStats)> {
    let mut order: Vec<HookKey> = Vec::new();
    let mut stats: BTreeMap<HookKey, HookStats> = BTreeMap::new();
    for r in results {
        for (key, s) in request_stats(r) {
            entry(&mut stats, &mut order, key).add(&s);
        }
    }
    order
        .into_iter()
        .map(|k| {
            let s = stats.get(&k).copied().unwrap_or_default();
            (k, s)
        })
        .collect()
}

/// One webhook's counts before and after an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookDelta {
    /// Which webhook.
    pub hook: HookKey,
    /// Counts before (None: the webhook did not take part before the edit: added or renamed).
    pub before: Option<HookStats>,
    /// Counts after (None: it no longer takes part: removed or renamed).
    pub after: Option<HookStats>,
}

impl HookDelta {
    /// Whether any count differs.
    pub fn changed(&self) -> bool {
        self.before != self.after
    }
}

/// What an edit changes across the loaded requests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WhatIf {
    /// Requests compared (the shorter of the two sets).
    pub compared: usize,
    /// Requests with any difference, in input order.
    pub requests: Vec<RequestChange>,
    /// Every webhook of either side: those of the "before" set in its order, then those only
    /// in the "after" set.
    pub hooks: Vec<HookDelta>,
}

impl WhatIf {
    /// Requests whose verdict flipped between allowed and denied.
    pub fn flipped(&self) -> impl Iterator<Item = &RequestChange> {
        self.requests.iter().filter(|r| r.flipped())
    }
}

/// Compares two result sets of the same requests (paired by position).
pub fn compare<'a, B, A>(before: B, after: A) -> WhatIf
where
    B: IntoIterator<Item = &'a Replayed> + Clone,
    A: IntoIterator<Item = &'a Replayed> + Clone,
{
    let mut compared = 0;
    let requests = before
        .clone()
        .into_iter()
        .zip(after.clone())
        .enumerate()
        .map(|(index, (b, a))| {
            compared = index + 1;
            request_change(index, b, a)
        })
        .filter(|c| !c.is_empty())
        .collect();
    let b = hook_stats(before);
    let mut a: BTreeMap<HookKey, HookStats> = BTreeMap::new();
    let mut a_order = Vec::new();
    for (k, s) in hook_stats(after) {
        a_order.push(k.clone());
        a.insert(k, s);
    }
    let mut hooks: Vec<HookDelta> = b
        .into_iter()
        .map(|(hook, before)| HookDelta {
            after: a.remove(&hook),
            hook,
            before: Some(before),
        })
        .collect();
    for k in a_order {
        if let Some(s) = a.remove(&k) {
            hooks.push(HookDelta {
                hook: k,
                before: None,
                after: Some(s),
            });
        }
    }
    WhatIf {
        compared,
        requests,
        hooks,
    }
}

fn request_change(index: usize, b: &Replayed, a: &Replayed) -> RequestChange {
    let (vb, va) = (Verdict::of(b), Verdict::of(a));
    let mut object = Vec::new();
    match (&b.outcome.object, &a.outcome.object) {
        (Some(x), Some(y)) => json_diff(x.value(), y.value(), &mut String::new(), &mut object),
        (None, Some(_)) => object.push(ObjectChange::Added(String::new())),
        (Some(_), None) => object.push(ObjectChange::Removed(String::new())),
        (None, None) => {}
    }
    let map = |r: &Replayed| -> BTreeMap<String, String> {
        r.outcome
            .annotations
            .iter()
            .map(|x| (x.key.to_string(), x.value.to_string()))
            .collect()
    };
    let (mb, ma) = (map(b), map(a));
    let keys: BTreeSet<&String> = mb.keys().chain(ma.keys()).collect();
    let annotations = keys
        .into_iter()
        .filter(|k| mb.get(*k) != ma.get(*k))
        .map(|k| AnnotationChange {
            key: k.clone(),
            before: mb.get(k).cloned(),
            after: ma.get(k).cloned(),
        })
        .collect();
    let (warnings_added, warnings_removed) =
        multiset_diff(&b.outcome.warnings, &a.outcome.warnings);
    RequestChange {
        index,
        verdict: (vb != va).then_some((vb, va)),
        object,
        annotations,
        warnings_added,
        warnings_removed,
    }
}

/// Items only in `after`, and items only in `before`, counting repeats.
fn multiset_diff(before: &[String], after: &[String]) -> (Vec<String>, Vec<String>) {
    let mut left: Vec<&String> = before.iter().collect();
    let mut added = Vec::new();
    for w in after {
        match left.iter().position(|x| *x == w) {
            Some(i) => {
                left.remove(i);
            }
            None => added.push(w.clone()),
        }
    }
    (added, left.into_iter().cloned().collect())
}

fn push_token(path: &mut String, token: &str) {
    path.push('/');
    path.push_str(&token.replace('~', "~0").replace('/', "~1"));
}

/// The JSON pointers at which `a` and `b` differ (objects compared key by key, arrays element
/// by element).
fn json_diff(b: &Value, a: &Value, path: &mut String, out: &mut Vec<ObjectChange>) {
    match (b, a) {
        (Value::Object(mb), Value::Object(ma)) => {
            let len = path.len();
            for (k, vb) in mb {
                push_token(path, k);
                match ma.get(k) {
                    Some(va) => json_diff(vb, va, path, out),
                    None => out.push(ObjectChange::Removed(path.clone())),
                }
                path.truncate(len);
            }
            for k in ma.keys().filter(|k| !mb.contains_key(*k)) {
                push_token(path, k);
                out.push(ObjectChange::Added(path.clone()));
                path.truncate(len);
            }
        }
        (Value::Array(vb), Value::Array(va)) => {
            let len = path.len();
            for i in 0..vb.len().max(va.len()) {
                push_token(path, &i.to_string());
                match (vb.get(i), va.get(i)) {
                    (Some(x), Some(y)) => json_diff(x, y, path, out),
                    (Some(_), None) => out.push(ObjectChange::Removed(path.clone())),
                    (None, _) => out.push(ObjectChange::Added(path.clone())),
                }
                path.truncate(len);
            }
        }
        _ if b != a => out.push(ObjectChange::Changed(path.clone())),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_differences_by_pointer() {
        let mut out = Vec::new();
        json_diff(
            &json!({"metadata": {"labels": {"a/b": "1", "x": "y"}}, "spec": [1, 2]}),
            &json!({"metadata": {"labels": {"a/b": "2", "n": "m"}}, "spec": [1]}),
            &mut String::new(),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                ObjectChange::Changed("/metadata/labels/a~1b".into()),
                ObjectChange::Removed("/metadata/labels/x".into()),
                ObjectChange::Added("/metadata/labels/n".into()),
                ObjectChange::Removed("/spec/1".into()),
            ]
        );
    }

    #[test]
    fn a_verdict_change_is_named_once() {
        let denied = |code: i32, message: &str| Verdict::Denied {
            code,
            message: message.into(),
        };
        let change = |b: Verdict, a: Verdict| RequestChange {
            index: 0,
            verdict: Some((b, a)),
            object: Vec::new(),
            annotations: Vec::new(),
            warnings_added: Vec::new(),
            warnings_removed: Vec::new(),
        };
        // Denied 500 on both sides: the message changed, not the verdict, and nothing flipped.
        let c = change(
            denied(500, "x: connection refused"),
            denied(500, "x: timeout"),
        );
        assert_eq!(c.verdict_change(), Some("denial message"));
        assert!(!c.flipped());
        let c = change(denied(403, "no"), denied(500, "no"));
        assert_eq!(c.verdict_change(), Some("status code"));
        assert!(!c.flipped());
        let c = change(Verdict::Allowed, denied(403, "no"));
        assert_eq!(c.verdict_change(), Some("flipped"));
        assert!(c.flipped());
    }

    #[test]
    fn warnings_count_repeats() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            multiset_diff(&s(&["a", "a", "b"]), &s(&["a", "c"])),
            (s(&["c"]), s(&["a", "b"]))
        );
    }
}

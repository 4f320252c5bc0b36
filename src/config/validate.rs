//! Validation (`pkg/apis/admissionregistration/validation/validation.go`), with apimachinery's
//! `field.Error` texts (values rendered as kube-apiserver 1.34+ does: strings quoted, numbers bare,
//! lists as JSON).

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::Value;

use super::url;
use super::validation::{
    go_json_strings, go_quote, inclusive_range_error, is_dns1035_label, is_dns1123_subdomain,
    is_qualified_name, is_valid_label_value,
};
use crate::api::{
    LabelSelector, MatchCondition, RuleWithOperations, Webhook, WebhookConfiguration, WebhookKind,
};

/// One validation error: the field path and the Go-formatted message after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Field path as upstream writes it, e.g. `webhooks[0].clientConfig.url`.
    pub field: String,
    /// The rest of the message, e.g. `Invalid value: 31: the timeout value must be between 1 and
    /// 30 seconds`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl FieldError {
    pub(crate) fn required(field: impl Into<String>, detail: &str) -> Self {
        Self::with_detail(field, "Required value".into(), detail)
    }

    pub(crate) fn invalid(field: impl Into<String>, value: String, detail: &str) -> Self {
        Self::with_detail(field, format!("Invalid value: {value}"), detail)
    }

    pub(crate) fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self::with_detail(
            field,
            format!("Unsupported value: {}", go_quote(value)),
            &format!("supported values: {}", list.join(", ")),
        )
    }

    pub(crate) fn duplicate(field: impl Into<String>, value: &str) -> Self {
        Self {
            field: field.into(),
            message: format!("Duplicate value: {}", go_quote(value)),
        }
    }

    pub(crate) fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self::with_detail(field, "Forbidden".into(), detail)
    }

    pub(crate) fn with_detail(field: impl Into<String>, head: String, detail: &str) -> Self {
        let message = if detail.is_empty() {
            head
        } else {
            format!("{head}: {detail}")
        };
        Self {
            field: field.into(),
            message,
        }
    }
}

/// The switches upstream derives from the old object on update.
struct Options {
    /// The release whose apiserver validates: its CEL environment for new expressions.
    release: crate::KubeVersion,
    ignore_match_conditions: bool,
    require_no_side_effects: bool,
    require_recognized_admission_review_version: bool,
    require_unique_webhook_names: bool,
    allow_invalid_label_value_in_selector: bool,
}

const ACCEPTED_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
const NO_SIDE_EFFECTS: [&str; 2] = ["None", "NoneOnDryRun"];
const ALL_SIDE_EFFECTS: [&str; 4] = ["None", "NoneOnDryRun", "Some", "Unknown"];

/// Validate as kube-apiserver does on create (`old = None`) or update (`old = Some`, with the
/// ratcheting of `ValidateMutating/ValidatingWebhookConfigurationUpdate`: the side-effect,
/// admissionReviewVersions, unique-name and selector-label-value rules apply only if the old
/// object already satisfied them, and unchanged matchConditions are not re-checked). Every error is
/// reported, in upstream's order.
///
/// Run [`super::apply_defaults`] first, as the apiserver does; an unset service port counts as
/// the default 443.
pub fn validate(cfg: &WebhookConfiguration, old: Option<&WebhookConfiguration>) -> Vec<FieldError> {
    validate_in(cfg, old, crate::KubeVersion::NEWEST)
}

/// [`validate`] as the apiserver of `release` validates: matchConditions are compiled with the
/// environment it gives new expressions (the previous release's libraries: `isSemver`, added in
/// 1.33, is undeclared there).
pub fn validate_in(
    cfg: &WebhookConfiguration,
    old: Option<&WebhookConfiguration>,
    release: crate::KubeVersion,
) -> Vec<FieldError> {
    let opts = match old {
        None => Options {
            release,
            ignore_match_conditions: false,
            require_no_side_effects: true,
            require_recognized_admission_review_version: true,
            require_unique_webhook_names: true,
            allow_invalid_label_value_in_selector: false,
        },
        Some(old) => Options {
            release,
            ignore_match_conditions: cfg.webhooks.len() == old.webhooks.len()
                && cfg
                    .webhooks
                    .iter()
                    .zip(&old.webhooks)
                    .all(|(n, o)| n.match_conditions == o.match_conditions),
            require_no_side_effects: old.webhooks.iter().all(|h| {
                h.side_effects
                    .as_deref()
                    .is_some_and(|s| NO_SIDE_EFFECTS.contains(&s))
            }),
            require_recognized_admission_review_version: old.webhooks.iter().all(|h| {
                let versions = h.admission_review_versions.as_deref().unwrap_or_default();
                versions.is_empty()
                    || versions
                        .iter()
                        .any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str()))
            }),
            require_unique_webhook_names: {
                let mut seen = HashSet::new();
                old.webhooks.iter().all(|h| seen.insert(h.name.as_str()))
            },
            allow_invalid_label_value_in_selector: old.webhooks.iter().any(|h| {
                [&h.namespace_selector, &h.object_selector]
                    .into_iter()
                    .flatten()
                    .any(|s| {
                        let mut errs = Vec::new();
                        validate_label_selector(s, true, "", &mut errs);
                        !errs.is_empty()
                    })
            }),
        },
    };
    let mut errs = Vec::new();
    validate_object_meta(&cfg.name, &cfg.metadata, &mut errs);
    let mut names = HashSet::new();
    for (i, hook) in cfg.webhooks.iter().enumerate() {
        let p = format!("webhooks[{i}]");
        validate_webhook(hook, cfg.kind, &opts, &p, &mut errs);
        validate_admission_review_versions(
            hook.admission_review_versions.as_deref(),
            opts.require_recognized_admission_review_version,
            &format!("{p}.admissionReviewVersions"),
            &mut errs,
        );
        if opts.require_unique_webhook_names && !hook.name.is_empty() && !names.insert(&hook.name) {
            errs.push(FieldError::duplicate(format!("{p}.name"), &hook.name));
        }
    }
    errs
}

/// `ValidateObjectMeta` for a cluster-scoped object named as a DNS subdomain.
pub(crate) fn validate_object_meta(name: &str, metadata: &Value, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", go_quote(name), &msg));
        }
    }
    let meta = metadata.as_object();
    let get = |k: &str| meta.and_then(|m| m.get(k));
    if get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty())
    {
        errs.push(FieldError::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    if let Some(labels) = get("labels").and_then(Value::as_object) {
        let labels: BTreeMap<&String, &Value> = labels.iter().collect();
        for (k, v) in labels {
            for msg in is_qualified_name(k) {
                errs.push(FieldError::invalid("metadata.labels", go_quote(k), &msg));
            }
            for msg in is_valid_label_value(v.as_str().unwrap_or_default()) {
                errs.push(FieldError::invalid(
                    "metadata.labels",
                    go_quote(v.as_str().unwrap_or_default()),
                    &msg,
                ));
            }
        }
    }
    if let Some(annotations) = get("annotations").and_then(Value::as_object) {
        let mut keys: Vec<&String> = annotations.keys().collect();
        keys.sort();
        let mut total = 0usize;
        for k in keys {
            for msg in is_qualified_name(&k.to_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    go_quote(k),
                    &msg,
                ));
            }
            total += k.len() + annotations[k].as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            errs.push(FieldError::with_detail(
                "metadata.annotations",
                "Too long".into(),
                "may not be more than 262144 bytes",
            ));
        }
    }
}

fn validate_webhook(
    hook: &Webhook,
    kind: WebhookKind,
    opts: &Options,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    validate_fully_qualified_name(&hook.name, &format!("{p}.name"), errs);
    for (i, rule) in hook.rules.iter().flatten().enumerate() {
        validate_rule(rule, &format!("{p}.rules[{i}]"), errs);
    }
    if let Some(fp) = hook
        .failure_policy
        .as_deref()
        .filter(|v| !["Fail", "Ignore"].contains(v))
    {
        errs.push(FieldError::not_supported(
            format!("{p}.failurePolicy"),
            fp,
            &["Fail", "Ignore"],
        ));
    }
    if let Some(mp) = hook
        .match_policy
        .as_deref()
        .filter(|v| !["Equivalent", "Exact"].contains(v))
    {
        errs.push(FieldError::not_supported(
            format!("{p}.matchPolicy"),
            mp,
            &["Equivalent", "Exact"],
        ));
    }
    let allowed: &[&str] = if opts.require_no_side_effects {
        &NO_SIDE_EFFECTS
    } else {
        &ALL_SIDE_EFFECTS
    };
    match hook.side_effects.as_deref() {
        None => errs.push(FieldError::required(
            format!("{p}.sideEffects"),
            &format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(se) if !allowed.contains(&se) => {
            errs.push(FieldError::not_supported(
                format!("{p}.sideEffects"),
                se,
                allowed,
            ));
        }
        Some(_) => {}
    }
    if let Some(t) = hook.timeout_seconds.filter(|t| !(1..=30).contains(t)) {
        errs.push(FieldError::invalid(
            format!("{p}.timeoutSeconds"),
            t.to_string(),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    let strict = !opts.allow_invalid_label_value_in_selector;
    if let Some(s) = &hook.namespace_selector {
        validate_label_selector(s, strict, &format!("{p}.namespaceSelector"), errs);
    }
    if let Some(s) = &hook.object_selector {
        validate_label_selector(s, strict, &format!("{p}.objectSelector"), errs);
    }
    if kind == WebhookKind::Mutating
        && let Some(rp) = hook
            .reinvocation_policy
            .as_deref()
            .filter(|v| !["IfNeeded", "Never"].contains(v))
    {
        errs.push(FieldError::not_supported(
            format!("{p}.reinvocationPolicy"),
            rp,
            &["IfNeeded", "Never"],
        ));
    }
    let cc = &hook.client_config;
    match (&cc.url, &cc.service) {
        (Some(u), None) => validate_url(u, &format!("{p}.clientConfig.url"), errs),
        (None, Some(svc)) => validate_service(
            &svc.namespace,
            &svc.name,
            svc.path.as_deref(),
            svc.port.unwrap_or(443),
            &format!("{p}.clientConfig.service"),
            errs,
        ),
        _ => errs.push(FieldError::required(
            format!("{p}.clientConfig"),
            "exactly one of url or service is required",
        )),
    }
    if !opts.ignore_match_conditions {
        validate_match_conditions(
            hook.match_conditions.as_deref().unwrap_or_default(),
            &crate::cel::Env::match_conditions().for_release(opts.release),
            &format!("{p}.matchConditions"),
            errs,
        );
    }
}

/// `utilvalidation.IsFullyQualifiedName`: a DNS subdomain of at least three segments.
fn validate_fully_qualified_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let dns = is_dns1123_subdomain(name);
    if !dns.is_empty() {
        errs.push(FieldError::invalid(path, go_quote(name), &dns.join(",")));
    } else if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            go_quote(name),
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

fn strings_value(v: &[String]) -> String {
    go_json_strings(Some(v))
}

pub(crate) fn validate_rule(rule: &RuleWithOperations, p: &str, errs: &mut Vec<FieldError>) {
    let ops = rule.operations.as_deref().unwrap_or_default();
    let ops_path = format!("{p}.operations");
    if ops.is_empty() {
        errs.push(FieldError::required(&ops_path, ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(FieldError::invalid(
            &ops_path,
            strings_value(ops),
            "if '*' is present, must not specify other operations",
        ));
    }
    const SUPPORTED_OPS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (i, op) in ops.iter().enumerate() {
        if !SUPPORTED_OPS.contains(&op.as_str()) {
            errs.push(FieldError::not_supported(
                format!("{ops_path}[{i}]"),
                op,
                &SUPPORTED_OPS,
            ));
        }
    }
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    if groups.is_empty() {
        errs.push(FieldError::required(format!("{p}.apiGroups"), ""));
    }
    if groups.len() > 1 && groups.iter().any(|g| g == "*") {
        errs.push(FieldError::invalid(
            format!("{p}.apiGroups"),
            strings_value(groups),
            "if '*' is present, must not specify other API groups",
        ));
    }
    let versions = rule.api_versions.as_deref().unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(format!("{p}.apiVersions"), ""));
    }
    if versions.len() > 1 && versions.iter().any(|v| v == "*") {
        errs.push(FieldError::invalid(
            format!("{p}.apiVersions"),
            strings_value(versions),
            "if '*' is present, must not specify other API versions",
        ));
    }
    for (i, v) in versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(format!("{p}.apiVersions[{i}]"), ""));
        }
    }
    validate_resources(
        rule.resources.as_deref().unwrap_or_default(),
        &format!("{p}.resources"),
        errs,
    );
    const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];
    if let Some(scope) = rule.scope.as_deref().filter(|s| !SCOPES.contains(s)) {
        errs.push(FieldError::not_supported(
            format!("{p}.scope"),
            scope,
            &SCOPES,
        ));
    }
}

fn validate_resources(resources: &[String], p: &str, errs: &mut Vec<FieldError>) {
    if resources.is_empty() {
        errs.push(FieldError::required(p, ""));
    }
    let mut with_wildcard_sub: HashSet<&str> = HashSet::new();
    let mut sub_with_wildcard_res: HashSet<&str> = HashSet::new();
    let mut has_double_wildcard = false;
    let mut has_single_wildcard = false;
    let mut has_resource_without_sub = false;
    for (i, res_sub) in resources.iter().enumerate() {
        if res_sub.is_empty() {
            errs.push(FieldError::required(format!("{p}[{i}]"), ""));
            continue;
        }
        if res_sub == "*/*" {
            has_double_wildcard = true;
        }
        if res_sub == "*" {
            has_single_wildcard = true;
        }
        let Some((res, sub)) = res_sub.split_once('/') else {
            // Upstream overwrites the flag with each plain entry, so only the last one counts.
            has_resource_without_sub = res_sub != "*";
            continue;
        };
        if with_wildcard_sub.contains(res) {
            errs.push(FieldError::invalid(
                format!("{p}[{i}]"),
                go_quote(res_sub),
                &format!("if '{res}/*' is present, must not specify {res_sub}"),
            ));
        }
        if sub_with_wildcard_res.contains(sub) {
            errs.push(FieldError::invalid(
                format!("{p}[{i}]"),
                go_quote(res_sub),
                &format!("if '*/{sub}' is present, must not specify {res_sub}"),
            ));
        }
        if sub == "*" {
            with_wildcard_sub.insert(res);
        }
        if res == "*" {
            sub_with_wildcard_res.insert(sub);
        }
    }
    if resources.len() > 1 && has_double_wildcard {
        errs.push(FieldError::invalid(
            p,
            strings_value(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if has_single_wildcard && has_resource_without_sub {
        errs.push(FieldError::invalid(
            p,
            strings_value(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

/// `metav1validation.ValidateLabelSelector`.
pub(crate) fn validate_label_selector(
    sel: &LabelSelector,
    strict_values: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    let child = |c: &str| {
        if p.is_empty() {
            c.to_string()
        } else {
            format!("{p}.{c}")
        }
    };
    let ml = child("matchLabels");
    for (k, v) in sel.match_labels.iter().flatten() {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(&ml, go_quote(k), &msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(&ml, go_quote(v), &msg));
        }
    }
    for (i, expr) in sel.match_expressions.iter().flatten().enumerate() {
        let ep = format!("{}[{i}]", child("matchExpressions"));
        let values = expr.values.as_deref().unwrap_or_default();
        match expr.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{ep}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{ep}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(
                format!("{ep}.operator"),
                go_quote(other),
                "not a valid selector operator",
            )),
        }
        for msg in is_qualified_name(&expr.key) {
            errs.push(FieldError::invalid(
                format!("{ep}.key"),
                go_quote(&expr.key),
                &msg,
            ));
        }
        if strict_values {
            for (vi, v) in values.iter().enumerate() {
                for msg in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(
                        format!("{ep}.values[{vi}]"),
                        go_quote(v),
                        &msg,
                    ));
                }
            }
        }
    }
}

/// `webhook.ValidateWebhookURL` with `forceHttps`.
fn validate_url(raw: &str, p: &str, errs: &mut Vec<FieldError>) {
    const FORM: &str = "; desired format: https://host[/path]";
    match url::parse(raw) {
        Err(e) => errs.push(FieldError::required(
            p,
            &format!("url must be a valid URL: {e}{FORM}"),
        )),
        Ok(u) => {
            if u.scheme != "https" {
                errs.push(FieldError::invalid(
                    p,
                    go_quote(&u.scheme),
                    &format!("'https' is the only allowed URL scheme{FORM}"),
                ));
            }
            if u.host.is_empty() {
                errs.push(FieldError::invalid(
                    p,
                    go_quote(&u.host),
                    &format!("host must be specified{FORM}"),
                ));
            }
            if let Some(user) = &u.user {
                errs.push(FieldError::invalid(
                    p,
                    go_quote(user),
                    "user information is not permitted in the URL",
                ));
            }
            if !u.fragment.is_empty() {
                errs.push(FieldError::invalid(
                    p,
                    go_quote(&u.fragment),
                    "fragments are not permitted in the URL",
                ));
            }
            if !u.raw_query.is_empty() {
                errs.push(FieldError::invalid(
                    p,
                    go_quote(&u.raw_query),
                    "query parameters are not permitted in the URL",
                ));
            }
        }
    }
}

/// `webhook.ValidateWebhookService`.
fn validate_service(
    namespace: &str,
    name: &str,
    path: Option<&str>,
    port: i32,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    if name.is_empty() {
        errs.push(FieldError::required(format!("{p}.name"), ""));
    }
    if namespace.is_empty() {
        errs.push(FieldError::required(format!("{p}.namespace"), ""));
    }
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            format!("{p}.port"),
            port.to_string(),
            &format!("port is not valid: {}", inclusive_range_error(1, 65535)),
        ));
    }
    let Some(url_path) = path else {
        return;
    };
    if url_path.is_empty() || url_path == "/" {
        return;
    }
    let pp = format!("{p}.path");
    if url_path == "//" {
        errs.push(FieldError::invalid(
            &pp,
            go_quote(url_path),
            "segment[0] may not be empty",
        ));
        return;
    }
    if !url_path.starts_with('/') {
        errs.push(FieldError::invalid(
            &pp,
            go_quote(url_path),
            "must start with a '/'",
        ));
    }
    // Upstream drops the first byte whether or not it is a '/'.
    let mut to_check = url_path.get(1..).unwrap_or_else(|| {
        let mut idx = 1;
        while !url_path.is_char_boundary(idx) {
            idx += 1;
        }
        &url_path[idx..]
    });
    if let Some(stripped) = to_check.strip_suffix('/') {
        to_check = stripped;
    }
    for (i, step) in to_check.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &pp,
                go_quote(url_path),
                &format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &pp,
                go_quote(url_path),
                &format!("segment[{i}]: {failure}"),
            ));
        }
    }
}

fn validate_admission_review_versions(
    versions: Option<&[String]>,
    require_recognized: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    let versions = versions.unwrap_or_default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            p,
            &format!(
                "must specify one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
        return;
    }
    let mut seen = HashSet::new();
    let mut has_accepted = false;
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                format!("{p}[{i}]"),
                go_quote(v),
                "duplicate version",
            ));
            continue;
        }
        for msg in is_dns1035_label(v) {
            errs.push(FieldError::invalid(format!("{p}[{i}]"), go_quote(v), &msg));
        }
        if ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str()) {
            has_accepted = true;
        }
    }
    if require_recognized && !has_accepted {
        errs.push(FieldError::invalid(
            p,
            strings_value(versions),
            &format!(
                "must include at least one of {}",
                ACCEPTED_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `validateMatchConditions`: at most 64, each named (a qualified name, unique) with an
/// expression that compiles to a bool in `env` (a webhook's or a policy's).
pub(crate) fn validate_match_conditions(
    conditions: &[MatchCondition],
    env: &crate::cel::Env,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    if conditions.len() > 64 {
        errs.push(FieldError::with_detail(
            p,
            format!("Too many: {}", conditions.len()),
            "must have at most 64 items",
        ));
    }
    let mut names = HashSet::new();
    for (i, mc) in conditions.iter().enumerate() {
        let cp = format!("{p}[{i}]");
        let expression = mc.expression.trim();
        if expression.is_empty() {
            errs.push(FieldError::required(format!("{cp}.expression"), ""));
        } else if let Err(e) = crate::cel::compile_in(expression, env, crate::cel::ReturnType::Bool)
        {
            errs.push(FieldError::invalid(
                format!("{cp}.expression"),
                go_quote(expression),
                &e.to_string(),
            ));
        }
        if mc.name.is_empty() {
            errs.push(FieldError::required(format!("{cp}.name"), ""));
        } else {
            for msg in is_qualified_name(&mc.name) {
                errs.push(FieldError::invalid(
                    format!("{cp}.name"),
                    go_quote(&mc.name),
                    &msg,
                ));
            }
        }
        if !mc.name.is_empty() && !names.insert(mc.name.as_str()) {
            errs.push(FieldError::duplicate(format!("{cp}.name"), &mc.name));
        }
    }
}

//! The `authorizer` CEL variable (kube-apiserver `pkg/cel/library/authz.go`) on top of a
//! configurable [`Authorizer`] stub.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_cel::cel;

use cel::extractors::Arguments;
use cel::objects::Opaque;
use cel::{ExecutionError, FunctionContext, ResolveResult, Value};

/// Cost of one authorization check (`pkg/cel/library/cost.go`: sized so that only two checks fit
/// into one expression's per-call limit).
pub(crate) const AUTHZ_CHECK_COST: u64 = 350_000;

/// The decision of one [`AuthzRule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleDecision {
    /// `DecisionAllow`.
    Allow,
    /// `DecisionDeny`.
    Deny,
    /// `DecisionNoOpinion` (`allowed()` is false, as for a deny).
    NoOpinion,
}

/// One rule of the [`Authorizer`] stub. Every unset selector matches anything; a set selector
/// matches its exact value or `*`. Path selectors ending in `*` match by prefix, as
/// `nonResourceURLs` do in RBAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthzRule {
    decision: RuleDecision,
    reason: String,
    error: Option<String>,
    user: Option<String>,
    verb: Option<String>,
    group: Option<String>,
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    path: Option<String>,
}

impl AuthzRule {
    fn new(decision: RuleDecision) -> Self {
        Self {
            decision,
            reason: String::new(),
            error: None,
            user: None,
            verb: None,
            group: None,
            resource: None,
            subresource: None,
            namespace: None,
            name: None,
            path: None,
        }
    }

    /// A rule that allows what it matches.
    pub fn allow() -> Self {
        Self::new(RuleDecision::Allow)
    }

    /// A rule that denies what it matches.
    pub fn deny() -> Self {
        Self::new(RuleDecision::Deny)
    }

    /// A rule that has no opinion on what it matches.
    pub fn no_opinion() -> Self {
        Self::new(RuleDecision::NoOpinion)
    }

    /// The reason the decision reports (`decision.reason()`).
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// Makes the authorizer report an error with this text (`decision.errored()`, `decision.error()`).
    pub fn error(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }

    /// Restricts the rule to a user name.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Restricts the rule to a verb.
    pub fn verb(mut self, verb: impl Into<String>) -> Self {
        self.verb = Some(verb.into());
        self
    }

    /// Restricts the rule to an API group (`""` is the core group).
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Restricts the rule to a resource.
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// Restricts the rule to a subresource (`""` is the main resource).
    pub fn subresource(mut self, subresource: impl Into<String>) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Restricts the rule to a namespace (`""` is cluster scope).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Restricts the rule to an object name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Restricts the rule to non-resource requests on a path pattern.
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    fn matches(&self, attrs: &Attributes, user: &str) -> bool {
        fn eq(pattern: &Option<String>, value: &str) -> bool {
            pattern.as_deref().is_none_or(|p| p == "*" || p == value)
        }
        if !eq(&self.user, user) || !eq(&self.verb, &attrs.verb) {
            return false;
        }
        match &attrs.target {
            Target::Path(path) => {
                self.group.is_none()
                    && self.resource.is_none()
                    && self.subresource.is_none()
                    && self.namespace.is_none()
                    && self.name.is_none()
                    && self
                        .path
                        .as_deref()
                        .is_none_or(|p| match p.strip_suffix('*') {
                            Some(prefix) => path.starts_with(prefix),
                            None => p == path,
                        })
            }
            Target::Resource(r) => {
                self.path.is_none()
                    && eq(&self.group, &r.group)
                    && eq(&self.resource, &r.resource)
                    && eq(&self.subresource, &r.subresource)
                    && eq(&self.namespace, &r.namespace)
                    && eq(&self.name, &r.name)
            }
        }
    }
}

/// The configurable authorizer stub: answers every check with `allowed` (by default) unless a
/// rule says otherwise. Rules are tried in order; the first match decides.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    deny_by_default: bool,
    rules: Vec<AuthzRule>,
}

impl Authorizer {
    /// Allows every check (the default).
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// Denies every check that no rule allows.
    pub fn deny_all() -> Self {
        Self {
            deny_by_default: true,
            rules: Vec::new(),
        }
    }

    /// Adds a rule after the existing ones.
    pub fn with_rule(mut self, rule: AuthzRule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Answers one authorization check for `user`.
    pub fn authorize(&self, user: &str, attrs: &Attributes) -> Decision {
        match self.rules.iter().find(|r| r.matches(attrs, user)) {
            Some(rule) => Decision {
                allowed: rule.decision == RuleDecision::Allow,
                reason: rule.reason.clone(),
                error: rule.error.clone(),
            },
            None => Decision {
                allowed: !self.deny_by_default,
                reason: String::new(),
                error: None,
            },
        }
    }
}

/// What an authorization check asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// The verb.
    pub verb: String,
    /// The resource or path.
    pub target: Target,
}

/// The object of an authorization check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A non-resource request (`authorizer.path(p)`).
    Path(String),
    /// A resource request.
    Resource(ResourceAttributes),
}

/// Resource attributes of a check (`APIVersion` is always `*` upstream, so it is not kept).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// API group.
    pub group: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

/// An authorization decision, as `authorizer...check(verb)` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// `allowed()`.
    pub allowed: bool,
    /// `reason()`.
    pub reason: String,
    /// `error()` (`errored()` is `error.is_some()`).
    pub error: Option<String>,
}

/// Shared per-evaluation cost counter.
#[derive(Debug, Default)]
pub(crate) struct CostCounter(AtomicU64);

impl CostCounter {
    pub(crate) fn add(&self, cost: u64) -> u64 {
        self.0
            .fetch_add(cost, Ordering::Relaxed)
            .saturating_add(cost)
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// The count, reset to zero.
    pub(crate) fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

/// The authorizer bound for one evaluation: stub, user and counter.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) authorizer: Arc<Authorizer>,
    pub(crate) user: Arc<str>,
    /// Attributes of `authorizer.requestResource`.
    pub(crate) request_resource: Arc<ResourceAttributes>,
}

/// The values the library exposes; one opaque type keeps dispatch simple.
#[derive(Debug, Clone)]
pub(crate) enum AuthzValue {
    Authorizer(Session),
    PathCheck(Session, String),
    GroupCheck(Session, String),
    ResourceCheck(Session, ResourceAttributes),
    Decision(Decision),
}

impl PartialEq for AuthzValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Decision(a), Self::Decision(b)) => a == b,
            _ => std::ptr::eq(self, other),
        }
    }
}

impl Eq for AuthzValue {}

impl Opaque for AuthzValue {
    fn runtime_type_name(&self) -> &str {
        match self {
            Self::Authorizer(_) => "kubernetes.authorization.Authorizer",
            Self::PathCheck(..) => "kubernetes.authorization.PathCheck",
            Self::GroupCheck(..) => "kubernetes.authorization.GroupCheck",
            Self::ResourceCheck(..) => "kubernetes.authorization.ResourceCheck",
            Self::Decision(_) => "kubernetes.authorization.Decision",
        }
    }
}

impl AuthzValue {
    pub(crate) fn into_value(self) -> Value {
        Value::Opaque(Arc::new(self))
    }

    fn from_value(value: &Value) -> Option<&AuthzValue> {
        match value {
            Value::Opaque(o) => o.downcast_ref::<AuthzValue>(),
            _ => None,
        }
    }
}

/// The user `authorizer.serviceAccount(ns, name)` checks as
/// (`serviceaccount.MakeUsername`).
fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

fn no_such_overload(ftx: &FunctionContext) -> ExecutionError {
    ftx.error("no such overload")
}

fn string_arg(ftx: &FunctionContext, args: &[Value], idx: usize) -> Result<String, ExecutionError> {
    match args.get(idx) {
        Some(Value::String(s)) => Ok(s.to_string()),
        _ => Err(no_such_overload(ftx)),
    }
}

/// Field selection on authorizer values (`authorizer.requestResource`).
pub(crate) fn select(value: &AuthzValue, field: &str) -> Option<Value> {
    match (value, field) {
        (AuthzValue::Authorizer(s), "requestResource") => {
            Some(AuthzValue::ResourceCheck(s.clone(), (*s.request_resource).clone()).into_value())
        }
        _ => None,
    }
}

/// One member function of the authorizer library, dispatched on its receiver.
fn method(ftx: &FunctionContext, this: Value, args: &[Value]) -> ResolveResult {
    let Some(target) = AuthzValue::from_value(&this) else {
        return Err(no_such_overload(ftx));
    };
    let expect_args = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(ExecutionError::invalid_argument_count(n, args.len()))
        }
    };
    let out = match (ftx.name, target) {
        ("path", AuthzValue::Authorizer(s)) => {
            expect_args(1)?;
            AuthzValue::PathCheck(s.clone(), string_arg(ftx, args, 0)?)
        }
        ("group", AuthzValue::Authorizer(s)) => {
            expect_args(1)?;
            AuthzValue::GroupCheck(s.clone(), string_arg(ftx, args, 0)?)
        }
        ("serviceAccount", AuthzValue::Authorizer(s)) => {
            expect_args(2)?;
            let user = service_account_user(&string_arg(ftx, args, 0)?, &string_arg(ftx, args, 1)?);
            AuthzValue::Authorizer(Session {
                user: user.into(),
                ..s.clone()
            })
        }
        ("resource", AuthzValue::GroupCheck(s, group)) => {
            expect_args(1)?;
            AuthzValue::ResourceCheck(
                s.clone(),
                ResourceAttributes {
                    group: group.clone(),
                    resource: string_arg(ftx, args, 0)?,
                    ..ResourceAttributes::default()
                },
            )
        }
        ("subresource" | "namespace" | "name", AuthzValue::ResourceCheck(s, attrs)) => {
            expect_args(1)?;
            let mut attrs = attrs.clone();
            let v = string_arg(ftx, args, 0)?;
            match ftx.name {
                "subresource" => attrs.subresource = v,
                "namespace" => attrs.namespace = v,
                _ => attrs.name = v,
            }
            AuthzValue::ResourceCheck(s.clone(), attrs)
        }
        ("check", AuthzValue::PathCheck(s, path)) => {
            expect_args(1)?;
            let attrs = Attributes {
                verb: string_arg(ftx, args, 0)?,
                target: Target::Path(path.clone()),
            };
            AuthzValue::Decision(s.authorizer.authorize(&s.user, &attrs))
        }
        ("check", AuthzValue::ResourceCheck(s, r)) => {
            expect_args(1)?;
            let attrs = Attributes {
                verb: string_arg(ftx, args, 0)?,
                target: Target::Resource(r.clone()),
            };
            AuthzValue::Decision(s.authorizer.authorize(&s.user, &attrs))
        }
        ("allowed", AuthzValue::Decision(d)) => {
            expect_args(0)?;
            return Ok(Value::Bool(d.allowed));
        }
        ("errored", AuthzValue::Decision(d)) => {
            expect_args(0)?;
            return Ok(Value::Bool(d.error.is_some()));
        }
        ("reason", AuthzValue::Decision(d)) => {
            expect_args(0)?;
            return Ok(Value::String(Arc::new(d.reason.clone())));
        }
        ("error", AuthzValue::Decision(d)) => {
            expect_args(0)?;
            return Ok(Value::String(Arc::new(d.error.clone().unwrap_or_default())));
        }
        _ => return Err(no_such_overload(ftx)),
    };
    Ok(out.into_value())
}

fn dispatch(ftx: &FunctionContext, Arguments(args): Arguments) -> ResolveResult {
    match ftx.this.clone() {
        Some(this) => method(ftx, this, &args),
        None => Err(no_such_overload(ftx)),
    }
}

/// The member functions of the library.
pub(crate) const METHODS: &[&str] = &[
    "path",
    "group",
    "serviceAccount",
    "resource",
    "subresource",
    "namespace",
    "name",
    "check",
    "allowed",
    "errored",
    "reason",
    "error",
];

/// Registers the library's member functions.
pub(crate) fn register(ctx: &mut cel::Context<'_>) {
    for name in METHODS {
        ctx.add_function(name, dispatch);
    }
}

//! cel-go's runtime cost, as kube-apiserver tracks it (`interpreter/runtimecost.go` with the
//! Kubernetes library's `CostEstimator` of `k8s.io/apiserver/pkg/cel/library/cost.go`, and
//! `PresenceTestHasCost(false)` from the environment's base options).
//!
//! What an evaluation costs is the sum over the steps it runs: 1 per identifier and field
//! selection (or index), nothing for constants, `&&`, `||`, `?:` and `has()` itself, 10 per list
//! and 30 per map literal that is not made of constants only (cel-go folds those into constants
//! under `OptOptimize`), 1 per function call unless the rules below give its own cost from the
//! sizes of its arguments (strings in code points, lists and maps in entries, anything else 1).
//! The compile-time rewrite ([`super::rewrite`]) places these charges; [`call_cost`] prices the
//! calls whose cost depends on their arguments.

use cel::common::ast::{CallExpr, Expr, operators};

use super::authz::AUTHZ_CHECK_COST;
use kube_cel::cel;

/// `common.StringTraversalCostFactor`.
const STRING_TRAVERSAL: f64 = 0.1;
/// `common.RegexStringLengthCostFactor`.
const REGEX_LENGTH: f64 = 0.25;
/// `common.ListCreateBaseCost`.
pub(super) const LIST_CREATE: u64 = 10;
/// `common.MapCreateBaseCost`.
pub(super) const MAP_CREATE: u64 = 30;
/// `common.StructCreateBaseCost`.
pub(super) const STRUCT_CREATE: u64 = 40;

/// How a call is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CallCost {
    /// Nothing of its own (`&&`, `||`, `?:`; an authorization check, charged by the library).
    Free,
    /// A fixed cost.
    Fixed(u64),
    /// By the sizes of its arguments ([`call_cost`]).
    Sized,
}

/// The functions the Kubernetes library's `CallCost` prices: before
/// `StrictCostEnforcementForVAP`/`ForWebhooks` (GA and locked on in 1.32; off by default
/// before) the apiserver evaluated without that estimator, so each cost cel-go's default 1.
pub(super) const LIBRARY: &[&str] = &[
    "check",
    "find",
    "findAll",
    "url",
    "lowerAscii",
    "upperAscii",
    "substring",
    "trim",
    "replace",
    "split",
    "join",
    "isSorted",
    "sum",
    "max",
    "min",
    "indexOf",
    "lastIndexOf",
    "cidr",
    "isIP",
    "isCIDR",
    "ip",
    "ip.isCanonical",
    "containsIP",
    "containsCIDR",
    "quantity",
    "isQuantity",
    "semver",
    "isSemver",
];

/// cel-go's own functions whose cost depends on their arguments (`costCall`); the library's
/// are [`LIBRARY`].
const SIZED: &[&str] = &[
    operators::EQUALS,
    operators::NOT_EQUALS,
    operators::LESS,
    operators::LESS_EQUALS,
    operators::GREATER,
    operators::GREATER_EQUALS,
    operators::ADD,
    operators::IN,
    "startsWith",
    "endsWith",
    "contains",
    "matches",
    "strings.quote",
    "format",
    "bytes",
    "string",
];

/// cel-go's type conversion functions (`overloads.IsTypeConversionFunction`): over a constant,
/// `OptOptimize` folds them into a constant.
const CONVERSIONS: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "string",
    "timestamp",
    "type",
    "uint",
];

/// How the call `name` (a namespaced function as `ip.isCanonical`) is charged.
pub(super) fn classify(name: &str, call: &CallExpr) -> CallCost {
    match name {
        operators::LOGICAL_AND | operators::LOGICAL_OR | operators::CONDITIONAL => CallCost::Free,
        // An authorization check: sized so that only two fit into one expression's limit.
        "check" => CallCost::Fixed(AUTHZ_CHECK_COST),
        operators::IN if constant_list(call.args.get(1)) => CallCost::Free,
        n if CONVERSIONS.contains(&n)
            && call.target.is_none()
            && matches!(call.args.as_slice(), [arg] if matches!(arg.expr, Expr::Literal(_))) =>
        {
            CallCost::Free
        }
        n if SIZED.contains(&n) || LIBRARY.contains(&n) => CallCost::Sized,
        _ => CallCost::Fixed(1),
    }
}

/// A list literal of primitive constants: cel-go's optimizer turns `x in [...]` over one into a
/// set lookup that the cost tracker does not charge.
fn constant_list(e: Option<&cel::parser::Expression>) -> bool {
    match e.map(|e| &e.expr) {
        Some(Expr::List(l)) => l.elements.iter().all(|e| {
            matches!(&e.expr, Expr::Literal(l) if !matches!(l, cel::common::ast::LiteralValue::Bytes(_) | cel::common::ast::LiteralValue::Null))
        }),
        _ => false,
    }
}

/// Whether a list or map literal is made of constants only (folded by cel-go's optimizer, so
/// free).
pub(super) fn constant_literal(e: &cel::parser::Expression) -> bool {
    match &e.expr {
        Expr::Literal(_) => true,
        Expr::List(l) => l.elements.iter().all(constant_literal),
        Expr::Map(m) => m.entries.iter().all(|entry| match &entry.expr {
            cel::common::ast::EntryExpr::MapEntry(e) => {
                !e.optional && constant_literal(&e.key) && constant_literal(&e.value)
            }
            cel::common::ast::EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

/// What the cost rules need of an argument or result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arg {
    /// A string: its code points and its UTF-8 bytes.
    Str { chars: u64, bytes: u64 },
    /// Bytes, a list or a map: its size.
    Sized(u64),
    /// Anything without a size (cel-go's `actualSize` is 1).
    Scalar,
}

impl Arg {
    /// A string's sizes.
    pub(super) fn str(s: &str) -> Arg {
        Arg::Str {
            chars: s.chars().count() as u64,
            bytes: s.len() as u64,
        }
    }

    /// cel-go's `actualSize`.
    fn size(self) -> u64 {
        match self {
            Arg::Str { chars, .. } => chars,
            Arg::Sized(n) => n,
            Arg::Scalar => 1,
        }
    }
}

/// `uint64(math.Ceil(x))`, as Go converts.
fn ceil(x: f64) -> u64 {
    x.ceil() as u64
}

/// `ceil(size * StringTraversalCostFactor)`.
fn traversal(n: u64) -> u64 {
    ceil(n as f64 * STRING_TRAVERSAL)
}

/// `ceil((1 + size of s) * StringTraversalCostFactor) * ceil(size of re * RegexStringLengthCostFactor)`.
fn regex(s: Arg, re: Arg) -> u64 {
    let str_cost = ceil((1.0 + s.size() as f64) * STRING_TRAVERSAL);
    let regex_cost = ceil(re.size() as f64 * REGEX_LENGTH);
    str_cost.saturating_mul(regex_cost)
}

/// The cost of a call priced by its arguments (`args` with the receiver first, as cel-go passes
/// them); `traversal0` is the library's `traversalCost` of the first argument, computed only
/// for the list functions that need it.
pub(super) fn call_cost(
    name: &str,
    args: &[Arg],
    result: Arg,
    traversal0: impl FnOnce() -> u64,
) -> u64 {
    let arg = |i: usize| args.get(i).copied().unwrap_or(Arg::Scalar);
    let is_str = |i: usize| matches!(arg(i), Arg::Str { .. });
    match name {
        // cel-go: O(min(m, n)) comparisons; scalars cost ceil(0.1) = 1.
        operators::EQUALS | operators::NOT_EQUALS => traversal(arg(0).size().min(arg(1).size())),
        operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
            if is_str(0) || matches!(arg(0), Arg::Sized(_)) =>
        {
            traversal(arg(0).size().min(arg(1).size()))
        }
        operators::ADD if is_str(0) => traversal(arg(0).size() + arg(1).size()),
        // A list's size; the caller passes a map as a scalar (membership in a map costs 1).
        operators::IN => arg(1).size(),
        // cel-go's O(n) functions: of the receiver, or of the converted string or bytes.
        "startsWith" | "endsWith" | "strings.quote" | "format" if is_str(0) => {
            traversal(arg(0).size())
        }
        "bytes" if is_str(0) => traversal(arg(0).size()),
        "string" if matches!(arg(0), Arg::Sized(_)) => traversal(arg(0).size()),
        "contains" if is_str(0) => {
            traversal(arg(0).size()).saturating_mul(traversal(arg(1).size()))
        }
        "matches" | "find" | "findAll" if args.len() >= 2 => regex(arg(0), arg(1)),
        "url" | "lowerAscii" | "upperAscii" | "substring" | "trim" | "cidr" | "isIP" | "isCIDR"
        | "quantity" | "isQuantity" | "semver" | "isSemver" => traversal(arg(0).size()),
        "ip" => traversal(arg(0).size()),
        "ip.isCanonical" => ceil(arg(0).size() as f64 * 2.0 * STRING_TRAVERSAL),
        "replace" | "split" => ceil(arg(0).size() as f64 * 2.0 * STRING_TRAVERSAL),
        "join" => ceil(result.size() as f64 * 2.0 * STRING_TRAVERSAL),
        "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => traversal0(),
        "containsIP" => {
            let cidr = arg(0).size();
            let mut cost = traversal(cidr + cidr);
            if is_str(1) {
                cost += traversal(arg(1).size());
            }
            cost
        }
        "containsCIDR" => {
            let cidr = arg(0).size();
            let mut cost = traversal(cidr + cidr) + traversal(cidr) + 1;
            if is_str(1) {
                cost += traversal(arg(1).size());
            }
            cost
        }
        _ => 1,
    }
}

/// The Kubernetes library's `traversalCost` of a JSON value: a string's bytes times 0.1
/// (truncated), the sum over a list's items or a map's keys and values, 1 for anything else.
pub(super) fn json_traversal(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::String(s) => (s.len() as f64 * STRING_TRAVERSAL) as u64,
        serde_json::Value::Array(items) => items.iter().map(json_traversal).sum(),
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.len() as f64 * STRING_TRAVERSAL) as u64 + json_traversal(v))
            .sum(),
        _ => 1,
    }
}

/// `traversalCost` of a string's bytes.
pub(super) fn string_traversal(bytes: usize) -> u64 {
    (bytes as f64 * STRING_TRAVERSAL) as u64
}

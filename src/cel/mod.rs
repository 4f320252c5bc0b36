//! matchConditions in CEL, as kube-apiserver evaluates them for admission webhooks
//! (`pkg/admission/plugin/webhook/matchconditions`, `pkg/admission/plugin/cel`).
//!
//! Expressions that the `direct` evaluator models are answered by it, over the request's JSON,
//! where their evaluation succeeds; the rest, and every error, are cel's.
//!
//! Expressions are parsed once by [`compile`] (cel 0.13 through `kube_cel`, optional syntax
//! enabled, recursion limit 250) and checked statically: declared variables (`object`,
//! `oldObject`, `request`, `namespaceObject`, `authorizer`), callable functions, the fields of
//! the typed `request` and `namespaceObject`, and the output type, which must be `bool`
//! (`object.spec.flag` is `dyn` and rejected, as cel-go does). [`evaluate`] binds the variables
//! and runs the pre-compiled tree; the Kubernetes extension libraries are registered once.
//! Field selection and `.?` selection are rewritten at compile time to internal functions,
//! because cel 0.13 yields `false` when selecting from a non-map (cel-go: `no such key`) and
//! errors on `.?` of a missing key (cel-go: `optional.none()`).
//!
//! Differences from cel-go that remain:
//! * the static check is partial: operators and most functions have their overloads checked
//!   as cel-go checks them (`1 == 'a'` and `'a'.startsWith(1)` are refused with its text), but
//!   `semver`, `format.*`, authorizer, optional and `sets.*` methods and list `indexOf` /
//!   `isSorted` element types are not, and where a result type is not inferred the expression
//!   is accepted;
//! * `fieldSelector`/`labelSelector` on authorizer checks and functions kube-cel does not
//!   provide are undeclared (type denotations and `type(x)` are modelled, as type values);
//! * error texts come from cel 0.13 and are mapped to cel-go's wording for the common cases
//!   (`no such key: x`, `no such overload`, `division by zero`, ...), not for all;
//! * cost: what cel-go's runtime cost tracker charges under the apiserver's options, step by
//!   step as the expression runs (`cost`; the Kubernetes library's prices from 1.32, 1 each
//!   before); a few functions' size-dependent costs are not
//!   modelled (`format`'s `validate`, field and label selectors of authorization checks). The
//!   per-call limit aborts an evaluation with cel-go's text; budgets shared by several
//!   expressions are left to the caller through [`evaluation_cost_exceeded`].

mod authz;
mod check;
mod cost;
mod direct;
mod format;
#[cfg(test)]
mod library_tables;
mod netip;
mod patch;
mod semver;
mod strings;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use kube_cel::KubeCelExt;
use kube_cel::cel;

use cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue, SelectExpr};
use cel::common::types::CelString;
use cel::extractors::Arguments;
use cel::objects::{Opaque, OptionalValue};
use cel::parser::{Expression, Parser};
use cel::{ExecutionError, FunctionContext, ResolveResult, Value};

pub use check::RESERVED_WORDS;

use crate::schema::{Schema, TypeId};

pub use authz::{
    Attributes, Authorizer, AuthzRule, Decision, ResourceAttributes, RuleDecision, Target,
};

use authz::{AuthzValue, CostCounter, Session};
pub use patch::{evaluate_apply_configuration, evaluate_json_patch};

/// Whole-webhook cost budget shared by all its conditions (`RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_COST_BUDGET: u64 = 2_500_000;

/// Cost limit of one evaluation (`PerCallLimit`).
pub const PER_CALL_COST_LIMIT: u64 = 1_000_000;

/// Error of an evaluation over [`PER_CALL_COST_LIMIT`] (cel-go's text).
pub const PER_CALL_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Error of the evaluator when the webhook's budget runs out (`filter.go`).
pub const COST_BUDGET_EXHAUSTED: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// cel-go's default parser recursion limit.
const MAX_RECURSION_DEPTH: u16 = 250;

/// cel-go's default limit on expression size, in code points.
const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;

/// Stack for the recursive parser; the recursion limit keeps it far from this.
const PARSER_STACK_BYTES: usize = 64 << 20;

/// Internal function names; `@` cannot start a CEL identifier, so user text cannot call them.
const SELECT_FN: &str = "@hs.select";
const TICK_FN: &str = "@hs.tick";
const OPT_SELECT_FN: &str = "@hs.optselect";
const UNWRAP_FN: &str = "@hs.unwrap";
const HAS_FN: &str = "@hs.has";
/// A call priced by the sizes of its arguments ([`cost::call_cost`]): its first argument is the
/// call, its second the same call over the values bound as [`SIZED_TARGET`] and [`sized_arg`].
const SIZED_FN: &str = "@hs.sized";
/// The type value named by its argument ([`type_name_fn`]).
const TYPE_NAME_FN: &str = "@hs.typename";

/// A two-variable comprehension: its macro's name, the range, the two variables' names, then
/// its predicate (or filter and transform) ([`comp2_fn`]).
const COMP2_FN: &str = "@hs.comp2";
/// The receiver's name in a [`SIZED_FN`] template.
const SIZED_TARGET: &str = "@hs.t";

/// The name of a [`SIZED_FN`] template's argument `i`.
fn sized_arg(i: usize) -> String {
    format!("@hs.a{i}")
}
/// Field selection whose result is only selected from again (`object.spec` in
/// `object.spec.containers`): a map comes back as a [`Document`], so that it is not copied into
/// cel's other value model and back on its way to the next selection.
const DOC_SELECT_FN: &str = "@hs.docselect";

/// Whether `e` may hold a [`Document`]: a document variable, or any other identifier (a
/// comprehension's variable ranges over a list whose objects are documents).
fn is_document(e: &Expression) -> bool {
    matches!(&e.expr, Expr::Ident(_))
}

/// A selected value as the evaluator holds it: the objects of a list become [`Document`]s, so
/// that a comprehension over them (`containers.all(c, …)`) binds and reads each without copying.
fn documented(v: Value) -> Value {
    match v {
        Value::List(items) if items.iter().any(|i| matches!(i, Value::Map(_))) => {
            Value::List(Arc::new(
                items
                    .iter()
                    .map(|i| match i {
                        Value::Map(_) => Value::Opaque(Arc::new(Document::Value(i.clone()))),
                        other => other.clone(),
                    })
                    .collect(),
            ))
        }
        other => other,
    }
}

/// `has(x.f)`, on maps and [`Document`]s alike.
fn has_fn(Arguments(args): Arguments) -> ResolveResult {
    let field = match args.get(1) {
        Some(Value::String(f)) => f.clone(),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    let map = match args.first() {
        Some(Value::Map(m)) => m,
        Some(Value::Opaque(o)) => match o.downcast_ref::<Document>() {
            Some(Document::Value(Value::Map(m))) => m,
            Some(Document::Json(part)) => match part.member(&field) {
                Some(member) => return Ok(Value::Bool(member.is_some())),
                None => return Err(ExecutionError::NoSuchOverload),
            },
            _ => match o.downcast_ref::<Variables>() {
                // cel-go's `has()` finds the field in the lazy map, which evaluates it: its
                // error is the test's.
                Some(vars) => {
                    return match vars.get(&field) {
                        Some(Err(e)) => Err(ExecutionError::function_error("variables", e)),
                        found => Ok(Value::Bool(found.is_some())),
                    };
                }
                None => return Err(ExecutionError::NoSuchOverload),
            },
        },
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    Ok(Value::Bool(
        map.get(&cel::objects::Key::String(field)).is_some(),
    ))
}

/// A variable converted to CEL once, bound as an opaque value: cel 0.13 copies a variable's
/// whole value each time it binds or reads one (between its two value models), which for an
/// object of a few kilobytes costs far more than the expression. Field selection
/// ([`SELECT_FN`]) reads into it without a copy; anything else reads it through [`UNWRAP_FN`].
///
/// The request's `object` and `oldObject` are documents over the request's own JSON value
/// ([`Document::Json`]): only what an expression selects is converted, when it selects it.
#[derive(Debug, Clone)]
enum Document {
    /// A value in cel's model.
    Value(Value),
    /// A part of a JSON value shared with the request, read in place.
    Json(JsonPart),
}

impl Document {
    /// The value in cel's model (converted, for a JSON part).
    fn to_value(&self) -> Value {
        match self {
            Document::Value(v) => v.clone(),
            Document::Json(part) => json_value(part.get()),
        }
    }
}

impl PartialEq for Document {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Document::Value(a), Document::Value(b)) => a == b,
            _ => self.to_value() == other.to_value(),
        }
    }
}

impl Eq for Document {}

/// One step from a JSON value to a part of it.
#[derive(Debug, Clone)]
enum Step {
    Member(Arc<String>),
    Item(usize),
}

/// A part of a shared JSON value: the root and the path to the part.
#[derive(Clone)]
struct JsonPart {
    root: Arc<crate::engine::Object>,
    path: Arc<[Step]>,
}

impl std::fmt::Debug for JsonPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl JsonPart {
    /// The part (null if the path no longer leads anywhere, which a shared value cannot do).
    fn get(&self) -> &serde_json::Value {
        const NULL: serde_json::Value = serde_json::Value::Null;
        let (mut v, rest) = match self.path.split_first() {
            // The root's members are read without making a derived object whole.
            Some((Step::Member(k), rest)) if self.root.is_map() => {
                (self.root.member(k).unwrap_or(&NULL), rest)
            }
            _ => (self.root.value(), &self.path[..]),
        };
        for step in rest {
            v = match (step, v) {
                (Step::Member(k), serde_json::Value::Object(m)) => m.get(k.as_str()),
                (Step::Item(i), serde_json::Value::Array(items)) => items.get(*i),
                _ => None,
            }
            .unwrap_or(&NULL);
        }
        v
    }

    /// The member `name` of the part, None when the part is not a map.
    fn member(&self, name: &str) -> Option<Option<&serde_json::Value>> {
        if self.path.is_empty() {
            return self.root.is_map().then(|| self.root.member(name));
        }
        self.get().as_object().map(|m| m.get(name))
    }

    fn child(&self, step: Step) -> JsonPart {
        let mut path = Vec::with_capacity(self.path.len() + 1);
        path.extend(self.path.iter().cloned());
        path.push(step);
        JsonPart {
            root: Arc::clone(&self.root),
            path: path.into(),
        }
    }

    /// The member `field` as [`select_fn`] (`doc`: [`doc_select_fn`]) returns it: a map as a map
    /// (as a document for `doc`), the objects of a list as documents, anything else converted.
    fn select(&self, field: &Arc<String>, doc: bool) -> ResolveResult {
        let Some(Some(v)) = self.member(field) else {
            return Err(no_such_key(field));
        };
        Ok(match v {
            serde_json::Value::Object(_) if doc => Value::Opaque(Arc::new(Document::Json(
                self.child(Step::Member(Arc::clone(field))),
            ))),
            serde_json::Value::Array(items) if items.iter().any(serde_json::Value::is_object) => {
                let part = self.child(Step::Member(Arc::clone(field)));
                Value::List(Arc::new(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| match item {
                            serde_json::Value::Object(_) => {
                                Value::Opaque(Arc::new(Document::Json(part.child(Step::Item(i)))))
                            }
                            other => json_value(other),
                        })
                        .collect(),
                ))
            }
            other => json_value(other),
        })
    }
}

impl Opaque for Document {
    fn runtime_type_name(&self) -> &str {
        "hookscope.document"
    }
}

/// The value of a [`Document`] (anything else as it is).
fn unwrap_fn(Arguments(args): Arguments) -> ResolveResult {
    match args.as_slice() {
        [Value::Opaque(o)] => match o.downcast_ref::<Document>() {
            Some(d) => Ok(d.to_value()),
            None => Ok(Value::Opaque(o.clone())),
        },
        [v] => Ok(v.clone()),
        _ => Err(ExecutionError::invalid_argument_count(1, args.len())),
    }
}
const COST_VAR: &str = "@hs.cost";

/// A compiled matchCondition expression.
#[derive(Clone)]
pub struct Program {
    expr: Arc<Expression>,
    /// Node count outside comprehension loops, the base cost of one evaluation.
    uses: Uses,
    /// The statically inferred result type, for the variables later expressions refer to.
    output: check::Ty,
    /// The expression for the direct evaluator, when it models all of it.
    direct: Option<Arc<direct::Node>>,
}

impl Program {
    /// Whether the expression reads `namespaceObject`.
    pub fn uses_namespace_object(&self) -> bool {
        self.uses.namespace_object
    }

    /// Whether the evaluation reads the CEL `request`: the expression names it, or calls
    /// `authorizer` (whose `requestResource` is taken from it).
    pub fn uses_request(&self) -> bool {
        self.uses.request || self.uses.authorizer
    }
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program").finish_non_exhaustive()
    }
}

/// Which variables the expression references, so that only those are converted.
#[derive(Debug, Clone, Copy, Default)]
struct Uses {
    object: bool,
    old_object: bool,
    request: bool,
    namespace_object: bool,
    authorizer: bool,
    params: bool,
    variables: bool,
}

/// Compile-time problem, rendered as upstream's validation message after
/// `Invalid value: ...: ` (`compilation failed: ERROR: <input>:1:1: ...` or
/// `must evaluate to bool but got string`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);

/// Renders one cel-go issue with its source snippet:
/// `ERROR: <input>:L:C: msg\n | line\n | ...^`. As cel-go's `Error.ToDisplayString`, the
/// snippet's tabs become spaces, a character of more than one UTF-8 byte before the column is
/// marked with a full-width dot and at the column with a full-width caret, and a line longer than
/// 16384 bytes is not shown.
fn render_issue(source: &str, line: usize, column: usize, message: &str) -> String {
    const MAX_SNIPPET_BYTES: usize = 16384;
    let mut out = format!("ERROR: <input>:{line}:{column}: {message}");
    if let Some(text) = source.split('\n').nth(line.saturating_sub(1))
        && text.len() <= MAX_SNIPPET_BYTES
    {
        let text = text.replace('\t', " ");
        let mut chars = text.chars();
        let mut pointer: String = chars
            .by_ref()
            .take(column.saturating_sub(1))
            .map(|c| if c.len_utf8() > 1 { '\u{ff0e}' } else { '.' })
            .collect();
        pointer.push(match chars.next() {
            Some(c) if c.len_utf8() > 1 => '\u{ff3e}',
            _ => '^',
        });
        out.push_str(&format!("\n | {text}\n | {pointer}"));
    }
    out
}

/// The source positions of `expression`'s parse tree nodes, by node id, as the parser records
/// them (cel-go's positions: an operator's token, a call's `(`, a selection's `.`, a literal's
/// first character, a macro's call). The parser hands them out only with an error, so this
/// parses the expression again followed by a line holding one character the lexer refuses: the
/// lexer drops it, so the tokens, the tree and its ids are those of the successful parse.
fn source_offsets(expression: &str) -> Option<Arc<cel::common::ast::SourceInfo>> {
    let source = format!("{expression}\n#");
    let parsed = std::thread::Builder::new()
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || {
            Parser::new()
                .enable_optional_syntax(true)
                .max_recursion_depth(MAX_RECURSION_DEPTH)
                .parse(&source)
                .err()
                .and_then(|e| e.errors.into_iter().find_map(|e| e.source_info))
        })
        .ok()?;
    parsed.join().ok().flatten()
}

/// 1-based line and column (in characters, as cel-go counts them) of the character at byte
/// `offset` of `source` (the parser's offsets are in bytes), or of the `-` before it when
/// `signed`.
fn line_column(source: &str, offset: usize, signed: bool) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    if signed && let Some(sign) = source[..offset].trim_end().strip_suffix('-') {
        offset = sign.len();
    }
    let (mut line, mut column) = (1, 1);
    for c in source[..offset].chars() {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// Renders the checker's issues as cel-go does: each at its node's position (or, for a node not
/// known, its token's), sorted by position.
fn render_issues(expression: &str, issues: &[check::Issue]) -> CompileError {
    let offsets = issues
        .iter()
        .any(|i| i.at.is_some())
        .then(|| source_offsets(expression))
        .flatten();
    let mut located: Vec<((usize, usize), &str)> = issues
        .iter()
        .map(|issue| {
            let at = issue.at.zip(offsets.as_ref()).and_then(|(node, info)| {
                let (start, _) = info.offset_for(node.id)?;
                let start = usize::try_from(start).ok()?;
                expression
                    .is_char_boundary(start.min(expression.len()))
                    .then(|| line_column(expression, start, node.signed))
            });
            (
                at.unwrap_or_else(|| locate(expression, &issue.token)),
                issue.message.as_str(),
            )
        })
        .collect();
    located.sort_by_key(|(position, _)| *position);
    let rendered: Vec<String> = located
        .into_iter()
        .map(|((line, column), message)| render_issue(expression, line, column, message))
        .collect();
    compilation_failed(&rendered)
}

/// Position (1-based line and column) of the first occurrence of `token` as a whole word
/// outside string literals, or 1:1. A token starting with `.` (a field selection, which cel-go
/// places at its dot) may follow a word.
fn locate(source: &str, token: &str) -> (usize, usize) {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let chars: Vec<char> = source.chars().collect();
    let tok: Vec<char> = token.chars().collect();
    let (mut line, mut col) = (1, 1);
    let mut quote: Option<char> = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) => {
                if c == '\\' {
                    i += 1;
                    col += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => quote = Some(c),
            None => {
                // An operator is found anywhere, but not inside a longer one (`<` in `<=`).
                let operator = tok.first().is_some_and(|c| !is_word(*c) && *c != '.');
                let next = chars.get(i + tok.len());
                let bounded = if tok.is_empty() {
                    false
                } else if operator {
                    next.is_none_or(|n| *n != '=' && *n != tok[tok.len() - 1])
                        && (i == 0 || !matches!(chars[i - 1], '<' | '>' | '!' | '=' | '&' | '|'))
                } else {
                    (i == 0 || tok[0] == '.' || !is_word(chars[i - 1]))
                        && next.is_none_or(|n| !is_word(*n))
                };
                if bounded && chars[i..].starts_with(&tok) {
                    return (line, col);
                }
            }
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
        i += 1;
    }
    (1, 1)
}

fn compilation_failed(issues: &[String]) -> CompileError {
    CompileError(format!("compilation failed: {}", issues.join("\n")))
}

/// Parses on a thread with a large stack: the ANTLR parser recurses per nesting level.
fn parse(expression: &str) -> Result<Expression, CompileError> {
    let source = expression.to_string();
    let handle = std::thread::Builder::new()
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || {
            let parsed = Parser::new()
                .enable_optional_syntax(true)
                .max_recursion_depth(MAX_RECURSION_DEPTH)
                .parse(&source);
            parsed.map_err(|errors| {
                errors
                    .errors
                    .iter()
                    .map(|e| {
                        let line = usize::try_from(e.pos.0).unwrap_or(1).max(1);
                        let mut column = usize::try_from(e.pos.1).unwrap_or(0) + 1;
                        // cel-go places an error at the end of the input just after its last
                        // character (ANTLR's EOF token), one column left of this parser.
                        let width = source
                            .lines()
                            .nth(line - 1)
                            .map_or(0, |l| l.chars().count());
                        if e.msg.contains("<EOF>") && column > width + 1 {
                            column = width + 1;
                        }
                        render_issue(&source, line, column, &e.msg)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .map_err(|e| CompileError(format!("compilation failed: {e}")))?;
    match handle.join() {
        Ok(Ok(expr)) => Ok(expr),
        Ok(Err(issues)) => Err(compilation_failed(&issues)),
        Err(_) => Err(CompileError(
            "compilation failed: ERROR: <input>:1:1: internal parser error".into(),
        )),
    }
}

/// Compiles a matchCondition expression as kube-apiserver validates it: it must parse, use only
/// the declared variables and functions, and evaluate to `bool`.
pub fn compile(expression: &str) -> Result<Program, CompileError> {
    compile_in(expression, &Env::match_conditions(), ReturnType::Bool)
}

/// The declarations of an expression's environment beyond `object`, `oldObject`, `request` and
/// `namespaceObject`: `params`, `authorizer` and a policy's `variables`.
#[derive(Debug, Clone)]
pub struct Env {
    params: bool,
    authorizer: bool,
    /// None: `variables` is undeclared (webhook matchConditions).
    variables: Option<Vec<(String, check::Ty)>>,
    /// Whether `Object{…}` and `JSONPatch{…}` literals are declared (MutatingAdmissionPolicy
    /// mutations).
    patch_types: bool,
    /// The type of `object` and `oldObject` when a schema gives it (else dynamic).
    object: Option<check::Ty>,
    /// The type of `params` when a schema gives it (else dynamic).
    params_type: Option<check::Ty>,
    /// Whether the `duration`/`timestamp`/`matches` literal validators run (1.30 and later).
    literal_validators: bool,
    /// The release (minor) whose CEL environment declares the library functions.
    libraries: u32,
    /// Whether the Kubernetes library's functions cost what its estimator says (1.32 and
    /// later, `StrictCostEnforcementForVAP`), or 1 each.
    strict_cost: bool,
}

impl Env {
    /// A webhook's matchConditions: `authorizer`, no `params`, no `variables`.
    pub fn match_conditions() -> Env {
        Env {
            params: false,
            authorizer: true,
            variables: None,
            patch_types: false,
            object: None,
            params_type: None,
            literal_validators: true,
            libraries: crate::KubeVersion::NEWEST.minor(),
            strict_cost: true,
        }
    }

    /// A ValidatingAdmissionPolicy's expressions: `authorizer`, `variables` (none declared yet)
    /// and `params` when the policy has a paramKind.
    pub fn policy(params: bool) -> Env {
        Env {
            params,
            authorizer: true,
            variables: Some(Vec::new()),
            patch_types: false,
            object: None,
            params_type: None,
            literal_validators: true,
            libraries: crate::KubeVersion::NEWEST.minor(),
            strict_cost: true,
        }
    }

    /// The same environment without `authorizer` (messageExpressions).
    pub fn without_authorizer(&self) -> Env {
        Env {
            authorizer: false,
            ..self.clone()
        }
    }

    /// The same environment with the mutation types `Object` and `JSONPatch` declared.
    pub fn with_patch_types(&self) -> Env {
        Env {
            patch_types: true,
            ..self.clone()
        }
    }

    /// The same environment as a release's apiserver builds it for a new expression (with the
    /// options of the release before it, `DefaultCompatibilityVersion`): the `duration`,
    /// `timestamp` and `matches` literal validators, introduced in 1.29, check expressions
    /// created on 1.30 and later (before, a bad literal fails at run time), and a library
    /// function is declared from the release after the one that added it (`isSemver`, added in
    /// 1.33, compiles in expressions created on 1.34).
    pub fn for_release(&self, version: crate::KubeVersion) -> Env {
        Env {
            literal_validators: version.at_least(30),
            libraries: version.minor() - 1,
            strict_cost: version.at_least(32),
            ..self.clone()
        }
    }

    /// The same environment as a release's apiserver builds it for an expression it has stored
    /// (`StoredExpressions`: every option of the release itself): the libraries the release
    /// declares, the literal validators from 1.29, the library's prices from 1.32. A stored
    /// `isSemver` compiles on 1.33, but not on 1.32, which has no such library.
    pub fn stored(&self, version: crate::KubeVersion) -> Env {
        Env {
            literal_validators: version.at_least(29),
            libraries: version.minor(),
            strict_cost: version.at_least(32),
            ..self.clone()
        }
    }

    /// The same environment with `object` and `oldObject` of the struct type `id` of `schema`
    /// (the type checker's view of a kind, as `typechecking.go` declares it).
    pub fn with_object_type(&self, schema: &'static Schema, id: TypeId) -> Env {
        Env {
            object: Some(check::Ty::Typed(check::Typed { schema, id })),
            ..self.clone()
        }
    }

    /// The same environment with `params` declared of the struct type `id` of `schema`.
    pub fn with_params_type(&self, schema: &'static Schema, id: TypeId) -> Env {
        Env {
            params: true,
            params_type: Some(check::Ty::Typed(check::Typed { schema, id })),
            ..self.clone()
        }
    }

    /// Declares `variables.<name>` with the type `program` evaluates to.
    pub fn declare_variable(&mut self, name: &str, program: &Program) {
        self.declare(name, program.output.clone());
    }

    /// Declares `variables.<name>` of a type not known (its expression did not compile).
    pub fn declare_variable_unknown(&mut self, name: &str) {
        self.declare(name, check::Ty::Unknown);
    }

    fn declare(&mut self, name: &str, ty: check::Ty) {
        let vars = self.variables.get_or_insert_with(Vec::new);
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), ty));
    }
}

/// The issues cel-go reports compiling `expression` in `env` with no result type required (the
/// ValidatingAdmissionPolicy type checker's compile), as `ERROR: <input>:L:C: …` lines; None when
/// it compiles.
pub fn type_check(expression: &str, env: &Env) -> Option<String> {
    let CompileError(text) = compile_in(expression, env, ReturnType::Any).err()?;
    Some(match text.strip_prefix("compilation failed: ") {
        Some(issues) => issues.to_string(),
        None => text,
    })
}

/// What an expression must evaluate to (`ReturnTypes` of upstream's expression accessors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReturnType {
    /// Validations and matchConditions.
    Bool,
    /// messageExpressions.
    String,
    /// auditAnnotations' valueExpressions.
    StringOrNull,
    /// Variables.
    Any,
    /// A MutatingAdmissionPolicy's ApplyConfiguration expression: `Object`.
    ApplyConfiguration,
    /// A MutatingAdmissionPolicy's JSONPatch expression: `list(JSONPatch)`.
    JsonPatches,
}

/// Compiles an expression in `env`: it must parse, use only what `env` declares, and evaluate
/// to `ret`; errors are upstream's (`compilation failed: ERROR: <input>:1:1: ...`, `must
/// evaluate to bool but got string`).
pub fn compile_in(expression: &str, env: &Env, ret: ReturnType) -> Result<Program, CompileError> {
    let code_points = expression.chars().count();
    if code_points > MAX_EXPRESSION_CODE_POINTS {
        return Err(compilation_failed(&[format!(
            "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {code_points}, limit {MAX_EXPRESSION_CODE_POINTS}"
        )]));
    }
    let parsed = parse(expression)?;
    if check::depth(&parsed) > usize::from(MAX_RECURSION_DEPTH) {
        return Err(compilation_failed(&[render_issue(
            expression,
            1,
            1,
            &format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"),
        )]));
    }
    let mut scope = Vec::new();
    if env.params {
        let ty = env.params_type.clone().unwrap_or(check::Ty::Dyn);
        scope.push(("params".to_string(), ty));
    }
    if let Some(ty) = &env.object {
        scope.push(("object".to_string(), ty.clone()));
        scope.push(("oldObject".to_string(), ty.clone()));
    }
    if let Some(vars) = &env.variables {
        scope.push((
            "variables".to_string(),
            check::Ty::Record(Arc::new(vars.clone())),
        ));
    }
    if env.patch_types {
        scope.push((check::PATCH_TYPES.to_string(), check::Ty::Dyn));
    }
    let mut uses = Uses::default();
    collect_uses(&parsed, &mut uses);
    let undeclared_authorizer = uses.authorizer && !env.authorizer;
    let output = if undeclared_authorizer {
        Err(vec![check::Issue {
            message: "undeclared reference to 'authorizer' (in container '')".into(),
            token: "authorizer".into(),
            at: None,
        }])
    } else {
        check::check(&parsed, &mut scope, env.literal_validators, env.libraries)
    }
    .map_err(|issues| render_issues(expression, &issues))?;
    let fits = match ret {
        ReturnType::Bool => matches!(output, check::Ty::Bool | check::Ty::Unknown),
        ReturnType::String => matches!(output, check::Ty::String | check::Ty::Unknown),
        ReturnType::StringOrNull => matches!(
            output,
            check::Ty::String | check::Ty::Null | check::Ty::Unknown
        ),
        ReturnType::Any => true,
        ReturnType::ApplyConfiguration => {
            matches!(output, check::Ty::Object("Object") | check::Ty::Unknown)
        }
        ReturnType::JsonPatches => match &output {
            check::Ty::List(e) => {
                matches!(
                    **e,
                    check::Ty::Object("JSONPatch") | check::Ty::Unknown | check::Ty::Free
                )
            }
            check::Ty::Unknown => true,
            _ => false,
        },
    };
    if !fits {
        let wanted = match ret {
            ReturnType::Bool => "bool",
            ReturnType::String => "string",
            ReturnType::ApplyConfiguration => "Object",
            ReturnType::JsonPatches => "list(JSONPatch)",
            _ => "one of [string null_type]",
        };
        return Err(CompileError(format!(
            "must evaluate to {wanted} but got {}",
            output.name()
        )));
    }
    let mut expr = rewrite(parsed);
    if !env.strict_cost {
        without_library_costs(&mut expr);
    }
    let direct = direct::compile(&expr).map(Arc::new);
    Ok(Program {
        expr: Arc::new(expr),
        uses,
        output,
        direct,
    })
}

fn collect_uses(expr: &Expression, uses: &mut Uses) {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        if let Expr::Ident(name) = &e.expr {
            match name.as_str() {
                "object" => uses.object = true,
                "oldObject" => uses.old_object = true,
                "request" => uses.request = true,
                "namespaceObject" => uses.namespace_object = true,
                "authorizer" => uses.authorizer = true,
                "params" => uses.params = true,
                "variables" => uses.variables = true,
                _ => {}
            }
        }
        stack.extend(check::children(e));
    }
}

/// The rewritten `expr` with the Kubernetes library's functions charged 1 each, as releases
/// before `StrictCostEnforcementForVAP` charged them ([`cost::LIBRARY`]).
fn without_library_costs(e: &mut Expression) {
    let id = e.id;
    match &mut e.expr {
        Expr::Call(c) if c.func_name == SIZED_FN && !c.args.is_empty() => {
            let name = match &c.args[0].expr {
                Expr::Call(call) => match call.target.as_deref() {
                    Some(IdedExpr {
                        expr: Expr::Ident(prefix),
                        ..
                    }) if check::is_namespace(prefix, &call.func_name) => {
                        format!("{prefix}.{}", call.func_name)
                    }
                    _ => call.func_name.clone(),
                },
                _ => String::new(),
            };
            if cost::LIBRARY.contains(&name.as_str()) {
                let call = c.args.swap_remove(0);
                *e = tick(id, call, 1);
            }
        }
        Expr::Call(c)
            if c.func_name == TICK_FN
                && matches!(&c.args.first().map(|a| &a.expr), Some(Expr::Call(inner)) if inner.func_name == "check") =>
        {
            *e = tick(id, c.args.swap_remove(0), 1);
        }
        _ => {}
    }
    match &mut e.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                without_library_costs(t);
            }
            c.args.iter_mut().for_each(without_library_costs);
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                without_library_costs(part);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(without_library_costs),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(me) = &mut entry.expr {
                    without_library_costs(&mut me.key);
                    without_library_costs(&mut me.value);
                }
            }
        }
        _ => {}
    }
}

/// `expr` charged `cost` when it has evaluated ([`TICK_FN`]); itself when `cost` is 0.
fn tick(id: u64, expr: IdedExpr, cost: u64) -> IdedExpr {
    if cost == 0 {
        return expr;
    }
    let cost = IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::Int(
            i64::try_from(cost).unwrap_or(i64::MAX).into(),
        )),
    };
    call(id, TICK_FN, vec![expr, cost])
}

/// An identifier or a chain of field selections from one.
fn is_attribute(e: &Expression) -> bool {
    match &e.expr {
        Expr::Ident(_) => true,
        Expr::Select(s) => !s.test && is_attribute(&s.operand),
        _ => false,
    }
}

/// A rewritten attribute ([`is_attribute`]) without its charges.
fn uncharge(e: IdedExpr) -> IdedExpr {
    let IdedExpr { id, expr } = e;
    match expr {
        Expr::Call(mut c) if c.func_name == TICK_FN && !c.args.is_empty() => {
            uncharge(c.args.swap_remove(0))
        }
        Expr::Call(mut c)
            if matches!(c.func_name.as_str(), SELECT_FN | DOC_SELECT_FN | UNWRAP_FN)
                && !c.args.is_empty() =>
        {
            c.args[0] = uncharge(std::mem::take(&mut c.args[0]));
            IdedExpr {
                id,
                expr: Expr::Call(c),
            }
        }
        expr => IdedExpr { id, expr },
    }
}

/// 1 for an identifier left in place as a selection's operand (cel-go charges it as any
/// identifier), 0 for anything else (charged where it is rewritten).
fn operand_ident_cost(operand: &Expression) -> u64 {
    u64::from(is_document(operand))
}

fn call(id: u64, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }),
    }
}

/// The operand of a field selection, `has()` or `.?`: a document as it stands, a field selection
/// as [`DOC_SELECT_FN`] (its maps stay documents), anything else rewritten.
fn rewrite_operand(operand: Expression) -> Expression {
    if is_document(&operand) {
        return operand;
    }
    match operand {
        IdedExpr {
            id,
            expr:
                Expr::Select(SelectExpr {
                    operand,
                    field,
                    test: false,
                }),
        } => {
            let field = IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(field.as_str()))),
            };
            let cost = 1 + operand_ident_cost(&operand);
            tick(
                id,
                call(id, DOC_SELECT_FN, vec![rewrite_operand(*operand), field]),
                cost,
            )
        }
        other => rewrite(other),
    }
}

/// Replaces field selection with [`SELECT_FN`] (cel 0.13 yields `false` when selecting from a
/// non-map; cel-go reports `no such key`) and wraps comprehension steps in [`TICK_FN`] to charge
/// each iteration.
fn rewrite(expr: Expression) -> Expression {
    let IdedExpr { id, expr } = expr;
    let expr = match expr {
        // A type denotation (`int`, `net.IP`): its type value.
        Expr::Ident(n) if check::TYPE_NAMES.contains(&n.as_str()) => {
            return type_value_expr(id, &n);
        }
        Expr::Select(sel) if check::is_net_type(&sel, u32::MAX) => {
            return type_value_expr(id, &format!("net.{}", sel.field));
        }
        Expr::Select(SelectExpr {
            operand,
            field,
            test: false,
        }) => {
            // A document is selected from without unwrapping it.
            let cost = 1 + operand_ident_cost(&operand);
            let operand = rewrite_operand(*operand);
            let field = IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(field.as_str()))),
            };
            return tick(id, call(id, SELECT_FN, vec![operand, field]), cost);
        }
        Expr::Select(s) => {
            // `has()` itself is free (`PresenceTestHasCost(false)`); its operand is not.
            let cost = operand_ident_cost(&s.operand);
            let operand = rewrite_operand(*s.operand);
            let field = IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(s.field.as_str()))),
            };
            return tick(id, call(id, HAS_FN, vec![operand, field]), cost);
        }
        // `range.all(k, v, p)` and the other two-variable macros: evaluated by [`COMP2_FN`].
        Expr::Call(c) if check::two_variable_macro(&c).is_some() => {
            let name = check::two_variable_macro(&c).unwrap_or_default();
            let text = |s: &str| IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(s))),
            };
            let mut args = vec![text(name)];
            args.extend(c.target.map(|t| rewrite(*t)));
            for (i, a) in c.args.into_iter().enumerate() {
                args.push(match (i, a.expr) {
                    (0 | 1, Expr::Ident(n)) => text(&n),
                    (_, expr) => rewrite(IdedExpr { id: a.id, expr }),
                });
            }
            return call(id, COMP2_FN, args);
        }
        Expr::Call(mut c) if c.func_name == cel::common::ast::operators::OPT_SELECT => {
            let cost = 1 + c.args.first().map_or(0, operand_ident_cost);
            c.func_name = OPT_SELECT_FN.to_string();
            c.target = c.target.map(|t| Box::new(rewrite(*t)));
            c.args = c
                .args
                .into_iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == 0 {
                        rewrite_operand(a)
                    } else {
                        rewrite(a)
                    }
                })
                .collect();
            return tick(
                id,
                IdedExpr {
                    id,
                    expr: Expr::Call(c),
                },
                cost,
            );
        }
        Expr::Ident(name) => {
            let ident = IdedExpr {
                id,
                expr: Expr::Ident(name),
            };
            return tick(id, call(id, UNWRAP_FN, vec![ident]), 1);
        }
        Expr::Call(mut c) => {
            // `sets.contains(…)`: the identifier names the function's namespace.
            let namespace = matches!(
                c.target.as_deref(),
                Some(IdedExpr { expr: Expr::Ident(prefix), .. }) if check::is_namespace(prefix, &c.func_name)
            );
            let name = match c.target.as_deref() {
                Some(IdedExpr {
                    expr: Expr::Ident(prefix),
                    ..
                }) if namespace => format!("{prefix}.{}", c.func_name),
                _ => c.func_name.clone(),
            };
            // `x in []`: cel-go's optimizer makes it the constant false, `x` never evaluated.
            if name == cel::common::ast::operators::IN
                && matches!(c.args.get(1), Some(IdedExpr { expr: Expr::List(l), .. }) if l.elements.is_empty())
            {
                return IdedExpr {
                    id,
                    expr: Expr::Literal(LiteralValue::Boolean(false.into())),
                };
            }
            let charge = cost::classify(&name, &c);
            // cel-go evaluates an identifier or a selection that is an index (`m[k]`) or a
            // branch of `?:` as part of the attribute it qualifies, without charging it.
            let uncharged: Vec<bool> = c
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let place = match name.as_str() {
                        cel::common::ast::operators::INDEX => i == 1,
                        cel::common::ast::operators::CONDITIONAL => i > 0,
                        _ => false,
                    };
                    place && is_attribute(a)
                })
                .collect();
            if !namespace {
                c.target = c.target.map(|t| Box::new(rewrite(*t)));
            }
            c.args = c
                .args
                .into_iter()
                .zip(uncharged)
                .map(|(a, free)| {
                    let a = rewrite(a);
                    if free { uncharge(a) } else { a }
                })
                .collect();
            return match charge {
                cost::CallCost::Free => IdedExpr {
                    id,
                    expr: Expr::Call(c),
                },
                cost::CallCost::Fixed(n) => tick(
                    id,
                    IdedExpr {
                        id,
                        expr: Expr::Call(c),
                    },
                    n,
                ),
                cost::CallCost::Sized => sized(id, c, namespace),
            };
        }
        // A comprehension costs what its parts cost, each time they run.
        Expr::Comprehension(mut c) => {
            c.iter_range = rewrite(c.iter_range);
            c.accu_init = rewrite(c.accu_init);
            c.loop_cond = rewrite(c.loop_cond);
            c.result = rewrite(c.result);
            c.loop_step = rewrite(c.loop_step);
            Expr::Comprehension(c)
        }
        Expr::List(l)
            if cost::constant_literal(&IdedExpr {
                id,
                expr: Expr::List(l.clone()),
            }) =>
        {
            Expr::List(l)
        }
        Expr::List(mut l) => {
            l.elements = l.elements.into_iter().map(rewrite).collect();
            return tick(
                id,
                IdedExpr {
                    id,
                    expr: Expr::List(l),
                },
                cost::LIST_CREATE,
            );
        }
        Expr::Map(m)
            if cost::constant_literal(&IdedExpr {
                id,
                expr: Expr::Map(m.clone()),
            }) =>
        {
            Expr::Map(m)
        }
        Expr::Map(mut m) => {
            for entry in &mut m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(e) = &mut entry.expr {
                    e.key = rewrite(std::mem::take(&mut e.key));
                    e.value = rewrite(std::mem::take(&mut e.value));
                }
            }
            return tick(
                id,
                IdedExpr {
                    id,
                    expr: Expr::Map(m),
                },
                cost::MAP_CREATE,
            );
        }
        // `Type{field: value}`: the type name and a map of the fields.
        Expr::Struct(s) => {
            let entries = s
                .entries
                .into_iter()
                .filter_map(|e| match e.expr {
                    cel::common::ast::EntryExpr::StructField(f) => {
                        Some(cel::common::ast::IdedEntryExpr {
                            id: e.id,
                            expr: cel::common::ast::EntryExpr::MapEntry(
                                cel::common::ast::MapEntryExpr {
                                    key: IdedExpr {
                                        id: e.id,
                                        expr: Expr::Literal(LiteralValue::String(CelString::from(
                                            f.field.as_str(),
                                        ))),
                                    },
                                    value: rewrite(f.value),
                                    optional: f.optional,
                                },
                            ),
                        })
                    }
                    cel::common::ast::EntryExpr::MapEntry(_) => None,
                })
                .collect();
            let name = IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::String(CelString::from(s.type_name.as_str()))),
            };
            let fields = IdedExpr {
                id,
                expr: Expr::Map(cel::common::ast::MapExpr { entries }),
            };
            return tick(
                id,
                call(id, patch::STRUCT_FN, vec![name, fields]),
                cost::STRUCT_CREATE,
            );
        }
        other => other,
    };
    IdedExpr { id, expr }
}

/// The per-evaluation cost counter, bound as an opaque variable.
#[derive(Debug, Clone)]
struct CostHandle(Arc<CostCounter>);

impl PartialEq for CostHandle {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CostHandle {}

impl Opaque for CostHandle {
    fn runtime_type_name(&self) -> &str {
        "hookscope.cost"
    }
}

fn no_such_key(field: &str) -> ExecutionError {
    ExecutionError::NoSuchKey(Arc::new(field.to_string()))
}

/// [`select_fn`] for a selection that is only selected from again: a map is returned as a
/// [`Document`] (the same value, not copied between cel's value models).
fn doc_select_fn(Arguments(args): Arguments) -> ResolveResult {
    if let (Some(Value::Opaque(o)), Some(Value::String(field))) = (args.first(), args.get(1))
        && let Some(Document::Json(part)) = o.downcast_ref::<Document>()
    {
        return part.select(field, true);
    }
    Ok(match select_fn(Arguments(args))? {
        Value::Map(m) => Value::Opaque(Arc::new(Document::Value(Value::Map(m)))),
        other => other,
    })
}

/// Field selection with cel-go's semantics on unstructured data.
fn select_fn(Arguments(args): Arguments) -> ResolveResult {
    let field = match args.get(1) {
        Some(Value::String(f)) => f.clone(),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    match args.first() {
        Some(Value::Map(m)) => m
            .get(&cel::objects::Key::String(field.clone()))
            .cloned()
            .map(documented)
            .ok_or_else(|| no_such_key(&field)),
        Some(Value::Opaque(o)) if o.downcast_ref::<Document>().is_some() => {
            match o.downcast_ref::<Document>() {
                Some(Document::Value(Value::Map(m))) => m
                    .get(&cel::objects::Key::String(field.clone()))
                    .cloned()
                    .map(documented)
                    .ok_or_else(|| no_such_key(&field)),
                Some(Document::Json(part)) => part.select(&field, false),
                _ => Err(no_such_key(&field)),
            }
        }
        Some(Value::Opaque(o)) if o.downcast_ref::<patch::StructValue>().is_some() => o
            .downcast_ref::<patch::StructValue>()
            .and_then(|s| s.field(&field).cloned())
            .ok_or_else(|| no_such_key(&field)),
        Some(Value::Opaque(o)) => match o.downcast_ref::<Variables>() {
            Some(vars) => match vars.get(&field) {
                Some(Ok(v)) => Ok(v),
                Some(Err(e)) => Err(ExecutionError::function_error("variables", e)),
                None => Err(no_such_key(&field)),
            },
            None => o
                .downcast_ref::<AuthzValue>()
                .and_then(|v| authz::select(v, &field))
                .ok_or_else(|| no_such_key(&field)),
        },
        _ => Err(no_such_key(&field)),
    }
}

/// `x.?f` (cel 0.13 reports a missing key instead of yielding `optional.none()`).
fn opt_select_fn(Arguments(args): Arguments) -> ResolveResult {
    let none = || Value::Opaque(Arc::new(OptionalValue::none()));
    let field = match args.get(1) {
        Some(Value::String(f)) => f.clone(),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    let operand = match args.first() {
        Some(Value::Opaque(o)) if o.runtime_type_name() == "optional_type" => {
            match o
                .downcast_ref::<OptionalValue>()
                .and_then(OptionalValue::value)
            {
                Some(v) => v.clone(),
                None => return Ok(none()),
            }
        }
        Some(v) => v.clone(),
        None => return Err(ExecutionError::NoSuchOverload),
    };
    Ok(
        match select_fn(Arguments(Arc::new(vec![operand, Value::String(field)]))) {
            Ok(v) => Value::Opaque(Arc::new(OptionalValue::of(v))),
            Err(_) => none(),
        },
    )
}

/// A CEL type as a value (`type(x)`, `int`, `net.IP`), by cel-go's name of it; two are equal
/// when they name the same type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelType(Arc<str>);

impl Opaque for CelType {
    fn runtime_type_name(&self) -> &str {
        "type"
    }
}

fn type_value(name: &str) -> Value {
    Value::Opaque(Arc::new(CelType(Arc::from(name))))
}

/// `name`'s type value at run time ([`TYPE_NAME_FN`]).
fn type_value_expr(id: u64, name: &str) -> IdedExpr {
    let text = IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::String(CelString::from(name))),
    };
    call(id, TYPE_NAME_FN, vec![text])
}

fn type_name_fn(Arguments(args): Arguments) -> ResolveResult {
    match args.as_slice() {
        [Value::String(name)] => Ok(type_value(name)),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// `type(x)`: the type of a value, by cel-go's names (`int`, `list`, `map`, `net.IP`,
/// `kubernetes.Quantity`, `google.protobuf.Timestamp`, …).
fn type_fn(Arguments(args): Arguments) -> ResolveResult {
    let [v] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(1, args.len()));
    };
    let v = unwrap_fn(Arguments(Arc::new(vec![v.clone()])))?;
    let name = match &v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Null => "null_type",
        Value::Timestamp(_) => "google.protobuf.Timestamp",
        Value::Duration(_) => "google.protobuf.Duration",
        Value::Opaque(o) if o.downcast_ref::<OptionalValue>().is_some() => "optional_type",
        Value::Opaque(o) => return Ok(type_value(o.runtime_type_name())),
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    Ok(type_value(name))
}

/// cel-go's two-variable comprehensions (`ext/comprehensions.go`), evaluated as their macros
/// expand: a list's index and element or a map's key and value (keys in sorted order, where
/// Go's map order is random) bound for each step; `all` and `exists` stop once their result is
/// certain and absorb an error the other way decided, `existsOne` and the transforms carry the
/// first error to the end; each step charged what cel-go's loop condition and step cost.
fn comp2_fn(ftx: &FunctionContext) -> ResolveResult {
    let text = |i: usize| match ftx.args.get(i).map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::String(s))) => s.inner().to_string(),
        _ => String::new(),
    };
    let (name, first, second) = (text(0), text(2), text(3));
    let body = ftx.args.get(4..).unwrap_or_default();
    let range = ftx
        .args
        .get(1)
        .ok_or(ExecutionError::NoSuchOverload)
        .and_then(|e| ftx.ptx.resolve(e))?;
    let entries: Vec<(Value, Value)> = match range {
        Value::List(l) => l
            .iter()
            .enumerate()
            .map(|(i, v)| (Value::Int(i64::try_from(i).unwrap_or(i64::MAX)), v.clone()))
            .collect(),
        Value::Map(m) => {
            let mut e: Vec<(Value, Value)> = m
                .map
                .iter()
                .map(|(k, v)| (Value::from(k.clone()), v.clone()))
                .collect();
            e.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
            e
        }
        _ => return Err(ftx.error("no such overload")),
    };
    let eval = |k: &Value, v: &Value, e: &Expression| {
        let mut scope = ftx.ptx.new_inner_scope();
        scope.add_variable_from_value(first.clone(), k.clone());
        scope.add_variable_from_value(second.clone(), v.clone());
        scope.resolve(e)
    };
    let boolean = |r: ResolveResult| match r {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(_) => Err(ExecutionError::NoSuchOverload),
        Err(e) => Err(e),
    };
    match name.as_str() {
        "all" | "exists" => {
            let decisive = name == "exists";
            let (cond, step) = if decisive { (3, 1) } else { (2, 1) };
            let mut accu: Result<bool, ExecutionError> = Ok(!decisive);
            for (k, v) in &entries {
                charge(ftx, cond)?;
                if accu.as_ref().is_ok_and(|b| *b == decisive) {
                    break;
                }
                charge(ftx, step)?;
                let r = boolean(eval(k, v, &body[0]));
                accu = match (accu, r) {
                    (_, Ok(b)) if b == decisive => Ok(b),
                    (Ok(b), _) if b == decisive => Ok(b),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (Ok(a), Ok(_)) => Ok(a),
                };
            }
            charge(ftx, 1)?;
            accu.map(Value::Bool)
        }
        "existsOne" => {
            let mut accu: Result<i64, ExecutionError> = Ok(0);
            for (k, v) in &entries {
                let r = boolean(eval(k, v, &body[0]));
                charge(ftx, if matches!(r, Ok(true)) { 2 } else { 1 })?;
                accu = match (accu, r) {
                    (Err(e), _) | (_, Err(e)) => Err(e),
                    (Ok(n), Ok(true)) => Ok(n + 1),
                    (Ok(n), Ok(false)) => Ok(n),
                };
            }
            charge(ftx, 2)?;
            accu.map(|n| Value::Bool(n == 1))
        }
        _ => {
            let (filter, transform) = match body {
                [f, t] => (Some(f), t),
                [t] => (None, t),
                _ => return Err(ExecutionError::NoSuchOverload),
            };
            // The step's own cost: `@result + [t]` (the list literal 10), or
            // `cel.@mapInsert(@result, k, t)`, or `cel.@mapInsert(@result, t)`.
            let step = match name.as_str() {
                "transformList" => 12,
                "transformMap" => 3,
                _ => 2,
            };
            let mut list = Vec::new();
            let mut map: std::collections::HashMap<cel::objects::Key, Value> =
                std::collections::HashMap::new();
            let mut failed: Option<ExecutionError> = None;
            for (k, v) in &entries {
                if let Some(f) = filter {
                    match boolean(eval(k, v, f)) {
                        Ok(true) => {}
                        Ok(false) => {
                            charge(ftx, 1)?;
                            continue;
                        }
                        Err(e) => {
                            failed.get_or_insert(e);
                            continue;
                        }
                    }
                }
                charge(ftx, step)?;
                if failed.is_some() {
                    continue;
                }
                let t = match eval(k, v, transform) {
                    Ok(t) => t,
                    Err(e) => {
                        failed = Some(e);
                        continue;
                    }
                };
                match name.as_str() {
                    "transformList" => list.push(t),
                    "transformMap" => match value_key(k) {
                        Some(key) => {
                            map.insert(key, t);
                        }
                        None => failed = Some(ExecutionError::NoSuchOverload),
                    },
                    _ => match t {
                        Value::Map(m) => {
                            for (key, value) in m.map.iter() {
                                if map.contains_key(key) {
                                    failed = Some(ftx.error(format!(
                                        "insert failed: key {} already exists",
                                        key_text(key)
                                    )));
                                    break;
                                }
                                map.insert(key.clone(), value.clone());
                            }
                        }
                        _ => failed = Some(ExecutionError::NoSuchOverload),
                    },
                }
            }
            charge(ftx, 1)?;
            if let Some(e) = failed {
                return Err(e);
            }
            Ok(if name == "transformList" {
                Value::List(Arc::new(list))
            } else {
                Value::Map(cel::objects::Map { map: Arc::new(map) })
            })
        }
    }
}

/// The map key of a value, for the types a key can have.
fn value_key(v: &Value) -> Option<cel::objects::Key> {
    use cel::objects::Key;
    Some(match v {
        Value::String(s) => Key::String(Arc::clone(s)),
        Value::Int(i) => Key::Int(*i),
        Value::UInt(u) => Key::Uint(*u),
        Value::Bool(b) => Key::Bool(*b),
        _ => return None,
    })
}

/// A map key as Go's `%v` prints it in cel-go's insert error.
fn key_text(key: &cel::objects::Key) -> String {
    match key {
        cel::objects::Key::String(s) => s.to_string(),
        cel::objects::Key::Int(i) => i.to_string(),
        cel::objects::Key::Uint(u) => u.to_string(),
        cel::objects::Key::Bool(b) => b.to_string(),
    }
}

/// Charges the fixed cost of the step it wraps and passes the step's value through; a step that
/// fails is charged too (cel-go's observer sees its error value).
fn tick_fn(ftx: &FunctionContext) -> ResolveResult {
    let cost = match ftx.args.get(1).map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::Int(n))) => u64::try_from(*n.inner()).unwrap_or(0),
        _ => 0,
    };
    let step = ftx
        .args
        .first()
        .ok_or(ExecutionError::NoSuchOverload)
        .and_then(|e| ftx.ptx.resolve(e));
    charge(ftx, cost)?;
    step
}

/// Adds `cost` to the evaluation's counter; over the per-call limit, cancels it as cel-go does.
fn charge(ftx: &FunctionContext, cost: u64) -> Result<(), ExecutionError> {
    if let Some(var) = ftx.ptx.get_variable(COST_VAR) {
        let value: Value = var.as_ref().try_into()?;
        if let Value::Opaque(o) = value
            && let Some(handle) = o.downcast_ref::<CostHandle>()
            && handle.0.add(cost) > PER_CALL_COST_LIMIT
        {
            return Err(ftx.error(PER_CALL_LIMIT_EXCEEDED));
        }
    }
    Ok(())
}

/// `SIZED_FN(call, template)` at compile time: the call's receiver and arguments become the
/// template's bound identifiers (a namespace's identifier stays).
fn sized(id: u64, c: CallExpr, namespace: bool) -> IdedExpr {
    let ident = |name: String| IdedExpr {
        id,
        expr: Expr::Ident(name),
    };
    let template = CallExpr {
        func_name: c.func_name.clone(),
        target: c.target.as_deref().map(|t| {
            Box::new(if namespace {
                t.clone()
            } else {
                ident(SIZED_TARGET.to_string())
            })
        }),
        args: (0..c.args.len()).map(|i| ident(sized_arg(i))).collect(),
    };
    call(
        id,
        SIZED_FN,
        vec![
            IdedExpr {
                id,
                expr: Expr::Call(c),
            },
            IdedExpr {
                id,
                expr: Expr::Call(template),
            },
        ],
    )
}

/// Evaluates a call priced by its arguments ([`SIZED_FN`]): its receiver and arguments once,
/// then the call over their values, and charges what cel-go charges for it.
fn sized_fn(ftx: &FunctionContext) -> ResolveResult {
    let (
        Some(Expr::Call(call)),
        Some(
            template @ IdedExpr {
                expr: Expr::Call(t),
                ..
            },
        ),
    ) = (ftx.args.first().map(|e| &e.expr), ftx.args.get(1))
    else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let mut scope = ftx.ptx.new_inner_scope();
    let mut values = Vec::with_capacity(call.args.len() + 1);
    let mut name = t.func_name.clone();
    match (call.target.as_deref(), t.target.as_deref()) {
        (
            Some(receiver),
            Some(IdedExpr {
                expr: Expr::Ident(bound),
                ..
            }),
        ) if bound == SIZED_TARGET => {
            let v = ftx.ptx.resolve(receiver)?;
            scope.add_variable_from_value(SIZED_TARGET, v.clone());
            values.push(v);
        }
        (
            _,
            Some(IdedExpr {
                expr: Expr::Ident(prefix),
                ..
            }),
        ) => name = format!("{prefix}.{name}"),
        _ => {}
    }
    for (i, a) in call.args.iter().enumerate() {
        let v = ftx.ptx.resolve(a)?;
        scope.add_variable_from_value(sized_arg(i), v.clone());
        values.push(v);
    }
    let result = scope.resolve(template)?;
    let mut args: Vec<cost::Arg> = values.iter().map(cost_arg).collect();
    if name == cel::common::ast::operators::IN && values.get(1).is_some_and(is_map) {
        args[1] = cost::Arg::Scalar;
    }
    let cost = cost::call_cost(&name, &args, cost_arg(&result), || {
        values.first().map_or(1, value_traversal)
    });
    charge(ftx, cost)?;
    Ok(result)
}

/// What the cost rules need of a value ([`cost::Arg`]).
fn cost_arg(v: &Value) -> cost::Arg {
    match v {
        Value::String(s) => cost::Arg::str(s),
        Value::Bytes(b) => cost::Arg::Sized(b.len() as u64),
        Value::List(l) => cost::Arg::Sized(l.len() as u64),
        Value::Map(m) => cost::Arg::Sized(m.map.len() as u64),
        Value::Opaque(o) => match o.downcast_ref::<Document>() {
            Some(Document::Value(v)) => cost_arg(v),
            Some(Document::Json(part)) => direct::json_cost_arg(part.get()),
            None => cost::Arg::Scalar,
        },
        _ => cost::Arg::Scalar,
    }
}

/// Whether a value is a map (membership in one costs 1).
fn is_map(v: &Value) -> bool {
    match v {
        Value::Map(_) => true,
        Value::Opaque(o) => match o.downcast_ref::<Document>() {
            Some(Document::Value(v)) => is_map(v),
            Some(Document::Json(part)) => part.get().is_object(),
            None => false,
        },
        _ => false,
    }
}

/// The Kubernetes library's `traversalCost` of a value.
fn value_traversal(v: &Value) -> u64 {
    match v {
        Value::String(s) => cost::string_traversal(s.len()),
        Value::Bytes(b) => cost::string_traversal(b.len()),
        Value::List(l) => l.iter().map(value_traversal).sum(),
        Value::Map(m) => m
            .map
            .iter()
            .map(|(k, v)| {
                let key = match k {
                    cel::objects::Key::String(s) => cost::string_traversal(s.len()),
                    _ => 1,
                };
                key + value_traversal(v)
            })
            .sum(),
        Value::Opaque(o) => match o.downcast_ref::<Document>() {
            Some(Document::Value(v)) => value_traversal(v),
            Some(Document::Json(part)) => cost::json_traversal(part.get()),
            None => 1,
        },
        _ => 1,
    }
}

fn identity(Arguments(args): Arguments) -> ResolveResult {
    match args.as_slice() {
        [v] => Ok(v.clone()),
        _ => Err(ExecutionError::invalid_argument_count(1, args.len())),
    }
}

/// `size` as cel-go counts: a string's code points (cel 0.13 counts its UTF-8 bytes), bytes'
/// bytes, a list's items, a map's entries.
fn size_fn(
    ftx: &FunctionContext,
    cel::extractors::This(this): cel::extractors::This<Value>,
) -> Result<i64, ExecutionError> {
    let size = match this {
        Value::String(s) => s.chars().count(),
        Value::Bytes(b) => b.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.map.len(),
        value => return Err(ftx.error(format!("cannot determine the size of {value:?}"))),
    };
    i64::try_from(size).map_err(|e| ftx.error(e.to_string()))
}

/// The root context: standard functions, Kubernetes libraries and the authorizer library.
fn root() -> &'static cel::Context<'static> {
    static ROOT: OnceLock<cel::Context<'static>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mut ctx = cel::Context::default().with_all();
        authz::register(&mut ctx);
        format::register(&mut ctx);
        strings::register(&mut ctx);
        netip::register(&mut ctx);
        ctx.add_function(SELECT_FN, select_fn);
        ctx.add_function(DOC_SELECT_FN, doc_select_fn);
        ctx.add_function(TICK_FN, tick_fn);
        ctx.add_function(SIZED_FN, sized_fn);
        ctx.add_function(OPT_SELECT_FN, opt_select_fn);
        ctx.add_function(UNWRAP_FN, unwrap_fn);
        ctx.add_function(HAS_FN, has_fn);
        ctx.add_function(COMP2_FN, comp2_fn);
        ctx.add_function(TYPE_NAME_FN, type_name_fn);
        ctx.add_function("type", type_fn);
        ctx.add_function(patch::STRUCT_FN, patch::struct_fn);
        ctx.add_function("dyn", identity);
        ctx.add_function("size", size_fn);
        ctx
    })
}

/// The CEL library's own functions, which the overrides of `netip` and `strings` call where
/// upstream's answer is the library's.
fn dependency() -> &'static cel::Context<'static> {
    static CONTEXT: OnceLock<cel::Context<'static>> = OnceLock::new();
    CONTEXT.get_or_init(|| cel::Context::default().with_all())
}

/// `name` of the CEL library over `this` and `args`.
pub(super) fn call_dependency(name: &str, this: Option<Value>, args: Vec<Value>) -> ResolveResult {
    let ident = |n: String| IdedExpr {
        id: 0,
        expr: Expr::Ident(n),
    };
    let mut scope = dependency().new_inner_scope();
    let target = this.map(|t| {
        scope.add_variable_from_value("t", t);
        Box::new(ident("t".into()))
    });
    let mut idents = Vec::with_capacity(args.len());
    for (i, a) in args.into_iter().enumerate() {
        let n = format!("a{i}");
        scope.add_variable_from_value(n.clone(), a);
        idents.push(ident(n));
    }
    let call = IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: name.to_string(),
            target,
            args: idents,
        }),
    };
    scope.resolve(&call)
}

/// Variables for one evaluation.
#[derive(Clone, Copy)]
pub struct Activation<'a> {
    /// New object; JSON null when absent (DELETE).
    pub object: &'a serde_json::Value,
    /// Old object; JSON null when absent (CREATE, CONNECT).
    pub old_object: &'a serde_json::Value,
    /// The CEL `request` object (`kind`, `resource`, `subResource`, `requestKind`,
    /// `requestResource`, `requestSubResource`, `name`, `namespace`, `operation`, `userInfo`,
    /// `dryRun`, `options`). `authorizer.requestResource` checks `resource.group`,
    /// `resource.resource`, `subResource`, `namespace` and `name` from it.
    pub request: &'a serde_json::Value,
    /// The authorizer stub answering `authorizer` checks.
    pub authorizer: &'a Authorizer,
    /// The request's user, for authorizer checks.
    pub user: &'a crate::api::UserInfo,
}

impl<'a> Activation<'a> {
    /// A request with no old object (a CREATE).
    pub fn created(
        object: &'a serde_json::Value,
        request: &'a serde_json::Value,
        authorizer: &'a Authorizer,
        user: &'a crate::api::UserInfo,
    ) -> Self {
        Activation {
            object,
            old_object: &serde_json::Value::Null,
            request,
            authorizer,
            user,
        }
    }
}

/// A library function's error with upstream's text where the CEL library words it its own
/// way: `quantity` parse errors are `resource.ParseQuantity`'s (the input is read back from
/// the message; for an unknown suffix the number before it parsed, so the suffix alone decides),
/// `semver`'s are blang/semver's `Parse` errors of the input (read back likewise), and
/// `asInteger` beyond int64 is `cannot convert value to integer`.
fn library_error(function: &str, message: &str) -> String {
    let quoted = |prefix: &str| {
        message
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('\''))
            .and_then(|rest| rest.strip_suffix('\''))
            .map(str::to_string)
    };
    match function {
        "quantity" => {
            let text = quoted("unknown quantity suffix: ")
                .map(|suffix| format!("1{suffix}"))
                .or_else(|| quoted("no numeric value in "))
                .or_else(|| quoted("invalid number: "))
                .or_else(|| quoted("quantity overflow: "))
                .or_else(|| quoted("invalid exponent in "));
            match text.map(|t| crate::quantity::Quantity::parse(&t)) {
                Some(Err(e)) => e.to_string(),
                _ => message.to_string(),
            }
        }
        "semver" => message
            .strip_prefix("invalid semver '")
            .and_then(|rest| rest.split_once("': "))
            .and_then(|(input, _)| semver::parse_error(input))
            .unwrap_or_else(|| message.to_string()),
        "asInteger" if message == "quantity too large for integer" => {
            "cannot convert value to integer".into()
        }
        _ => message.to_string(),
    }
}

/// Renders a cel 0.13 error with cel-go's wording where the cases correspond.
fn error_text(err: &ExecutionError) -> String {
    match err {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload => "no such overload".into(),
        ExecutionError::UndeclaredReference(n) => format!("no such attribute(s): {n}"),
        ExecutionError::FunctionError { function, message } => library_error(function, message),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(i) => match i {
            Value::Int(i) => format!("index out of bounds: {i}"),
            Value::UInt(i) => format!("index out of bounds: {i}"),
            other => format!("index out of bounds: {other:?}"),
        },
        other => other.to_string(),
    }
}

fn string_at<'v>(v: &'v serde_json::Value, path: &[&str]) -> &'v str {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
}

/// The outcome of one evaluation and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// `Ok(bool)` or the CEL error text.
    pub result: Result<bool, String>,
    /// Approximate cel-go actual cost (see the module documentation).
    pub cost: u64,
}

/// Whether an evaluation of `cost` overruns what remains of the webhook's budget; the caller
/// then stops evaluating and reports [`COST_BUDGET_EXHAUSTED`] (`filter.go` checks this before
/// looking at the evaluation's own error).
pub fn evaluation_cost_exceeded(remaining_budget: u64, cost: u64) -> bool {
    cost > remaining_budget
}

/// Evaluates to a bool; `Err` is the CEL error text (the engine wraps it as
/// `expression '<expr>' resulted in error: <text>`).
pub fn evaluate(program: &Program, activation: &Activation<'_>) -> Result<bool, String> {
    evaluate_with_cost(program, activation).result
}

/// [`evaluate`], also reporting the cost.
pub fn evaluate_with_cost(program: &Program, activation: &Activation<'_>) -> Evaluation {
    let inputs = Inputs::new(*activation, None, None);
    let (value, cost) = run(program, &inputs, None);
    let result = value.and_then(|v| match v {
        Value::Bool(b) => Ok(b),
        other => Err(format!(
            "expression must evaluate to bool, got {}",
            other.type_of()
        )),
    });
    Evaluation { result, cost }
}

/// The variables of a policy's evaluations: [`Activation`]'s, with `params` and
/// `namespaceObject`; each is converted to CEL once, when an expression first uses it, and
/// shared by every expression evaluated with these inputs.
pub struct Inputs<'a> {
    base: Activation<'a>,
    params: Option<&'a serde_json::Value>,
    namespace_object: Option<&'a serde_json::Value>,
    converted: [std::cell::OnceCell<Result<Value, String>>; 5],
    objects: Option<&'a Objects>,
    /// Whether `authorizer` is left unbound (see [`Inputs::without_authorizer`]).
    without_authorizer: bool,
}

/// `object` and `oldObject` converted to CEL once for every [`Inputs`] of a request that shares
/// them (each policy and binding evaluates the same objects).
#[derive(Default)]
pub struct Objects {
    converted: [std::cell::OnceCell<Result<Value, String>>; 2],
    /// The request's own objects, read in place instead of converted whole.
    shared: [Option<Arc<crate::engine::Object>>; 2],
}

impl Objects {
    /// Objects read in place from the request's `object` and `oldObject` (None: null), which
    /// must be the values the [`Activation`]s sharing them give: expressions convert only
    /// the parts they select.
    pub fn shared(
        object: Option<Arc<crate::engine::Object>>,
        old_object: Option<Arc<crate::engine::Object>>,
    ) -> Objects {
        Objects {
            converted: Default::default(),
            shared: [object, old_object],
        }
    }
}

impl<'a> Inputs<'a> {
    /// Inputs with `params` and `namespaceObject` (None: null).
    pub fn new(
        base: Activation<'a>,
        params: Option<&'a serde_json::Value>,
        namespace_object: Option<&'a serde_json::Value>,
    ) -> Self {
        Inputs {
            base,
            params,
            namespace_object,
            converted: Default::default(),
            objects: None,
            without_authorizer: false,
        }
    }

    /// The same inputs with no `authorizer` bound (see [`Inputs::without_authorizer`]); `object`
    /// and `oldObject` shared with these when they are shared, the others converted again.
    pub fn without_authorizer_view(&self) -> Inputs<'a> {
        Inputs {
            base: self.base,
            params: self.params,
            namespace_object: self.namespace_object,
            converted: Default::default(),
            objects: self.objects,
            without_authorizer: true,
        }
    }

    /// These inputs with no `authorizer` bound, as upstream binds none for messageExpressions
    /// and auditAnnotations: an expression or variable that reads it fails with
    /// `no such attribute(s): authorizer`.
    pub fn without_authorizer(mut self) -> Self {
        self.without_authorizer = true;
        self
    }

    /// [`Inputs::new`] taking `object` and `oldObject` from `objects`, converted there once for
    /// all the inputs that share it: `base`'s objects must be those objects, unless `objects`
    /// was made by [`Objects::shared`], whose objects are read instead of `base`'s.
    pub fn sharing(mut self, objects: &'a Objects) -> Self {
        self.objects = Some(objects);
        self
    }

    /// The variable in `slot` for the direct evaluator, as [`Inputs::converted`] binds it for
    /// cel: the request's object read in place, or the JSON value given.
    fn direct_root(&self, slot: usize) -> Option<direct::Val<'a>> {
        if let Some(o) = self.objects
            && let Some(Some(root)) = o.shared.get(slot)
        {
            let root: &'a crate::engine::Object = root;
            return Some(match root.is_map() || !root.value().is_null() {
                false => direct::Val::Null,
                true => direct::Val::Object(root),
            });
        }
        match self.json(slot) {
            None => Some(direct::Val::Null),
            Some(v) => direct::Val::json(v).ok(),
        }
    }

    /// The JSON value given for the variable in `slot`.
    fn json(&self, slot: usize) -> Option<&'a serde_json::Value> {
        match slot {
            0 => Some(self.base.object),
            1 => Some(self.base.old_object),
            2 => Some(self.base.request),
            3 => self.params,
            _ => self.namespace_object,
        }
    }

    fn converted(&self, slot: usize) -> Result<Value, String> {
        let cell = match (self.objects, slot) {
            (Some(o), 0 | 1) => &o.converted[slot],
            _ => &self.converted[slot],
        };
        cell.get_or_init(|| {
            if let Some(o) = self.objects
                && let Some(Some(root)) = o.shared.get(slot)
            {
                return Ok(match root.is_map() || !root.value().is_null() {
                    false => Value::Null,
                    true => Value::Opaque(Arc::new(Document::Json(JsonPart {
                        root: Arc::clone(root),
                        path: Arc::new([]),
                    }))),
                });
            }
            match self.json(slot) {
                None | Some(serde_json::Value::Null) => Ok(Value::Null),
                Some(v) => Ok(Value::Opaque(Arc::new(Document::Value(json_value(v))))),
            }
        })
        .clone()
    }
}

/// A JSON value as CEL sees an unstructured object: integers as `int` (as Kubernetes decodes
/// them, so that `object.spec.replicas == 3` holds), other numbers as `double`.
fn json_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or_default()),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => {
            Value::List(Arc::new(items.iter().map(json_value).collect()))
        }
        serde_json::Value::Object(m) => Value::Map(cel::objects::Map {
            map: Arc::new(
                m.iter()
                    .map(|(k, v)| {
                        (
                            cel::objects::Key::String(Arc::new(k.clone())),
                            json_value(v),
                        )
                    })
                    .collect(),
            ),
        }),
    }
}

/// A policy's compiled `variables`, in order: each name with its program or compile error.
pub type CompiledVariables = Arc<[(String, Result<Program, String>)]>;

/// The `variables` of one evaluation scope (upstream's composition context: one per
/// `ForInput`, that is per set of expressions evaluated together over the same objects), evaluated
/// lazily as upstream's `lazy.MapValue` does: a variable is evaluated when an expression (or
/// another variable) first reads it, once per scope; its value or error is kept for the scope;
/// an error (`composited variable "x" fails to evaluate: ...`, or `fails to compile` for one
/// whose expression did not compile) is reported only by the expressions that read it; and what
/// a variable cost is charged to the expression that made it evaluate ([`Variables::take_cost`]).
#[derive(Debug, Clone, Default)]
pub struct Variables {
    lazy: Option<Arc<LazyVariables>>,
}

/// What [`Variables`] evaluates its variables with.
struct LazyVariables {
    programs: CompiledVariables,
    /// `object`, `oldObject`, `request`, `params` and `namespaceObject` as the scope's inputs
    /// bind them; None where no variable reads it.
    bound: [Option<Result<Value, String>>; 5],
    /// The scope's authorizer (None: the scope has none, as upstream's messageExpressions and
    /// auditAnnotations have not).
    authorizer: Option<Session>,
    values: Vec<OnceLock<Result<Value, String>>>,
    /// Cost of the variables evaluated since it was last taken (`GetAndResetCost`).
    cost: CostCounter,
}

impl std::fmt::Debug for LazyVariables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyVariables")
            .field(
                "names",
                &self.programs.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl PartialEq for Variables {
    fn eq(&self, other: &Self) -> bool {
        match (&self.lazy, &other.lazy) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Eq for Variables {}

impl Opaque for Variables {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.variables"
    }
}

/// The variables an evaluation binds by name: the scope's [`Inputs`], or what [`Variables`]
/// captured of them.
trait Binder {
    /// The variable in `slot` (`object`, `oldObject`, `request`, `params`, `namespaceObject`).
    fn bind(&self, slot: usize) -> Result<Value, String>;
    /// The `authorizer`; None when the scope has no authorizer.
    fn authorizer(&self) -> Option<Session>;
}

impl Binder for Inputs<'_> {
    fn bind(&self, slot: usize) -> Result<Value, String> {
        self.converted(slot)
    }

    fn authorizer(&self) -> Option<Session> {
        (!self.without_authorizer).then(|| session(&self.base))
    }
}

impl Binder for LazyVariables {
    fn bind(&self, slot: usize) -> Result<Value, String> {
        self.bound[slot].clone().unwrap_or(Ok(Value::Null))
    }

    fn authorizer(&self) -> Option<Session> {
        self.authorizer.clone()
    }
}

/// The authorizer of an evaluation over `activation`.
fn session(activation: &Activation<'_>) -> Session {
    let r = activation.request;
    Session {
        authorizer: Arc::new(activation.authorizer.clone()),
        user: activation.user.username.as_str().into(),
        request_resource: Arc::new(ResourceAttributes {
            group: string_at(r, &["resource", "group"]).into(),
            resource: string_at(r, &["resource", "resource"]).into(),
            subresource: string_at(r, &["subResource"]).into(),
            namespace: string_at(r, &["namespace"]).into(),
            name: string_at(r, &["name"]).into(),
        }),
    }
}

impl Variables {
    /// The variables of a scope evaluating over `inputs` (with its authorizer unless
    /// [`Inputs::without_authorizer`]); nothing is evaluated until an expression reads it.
    pub fn new(programs: &CompiledVariables, inputs: &Inputs<'_>) -> Self {
        if programs.is_empty() {
            return Variables::default();
        }
        let mut uses = Uses::default();
        for p in programs.iter().filter_map(|(_, p)| p.as_ref().ok()) {
            let u = p.uses;
            uses.object |= u.object;
            uses.old_object |= u.old_object;
            uses.request |= u.request;
            uses.params |= u.params;
            uses.namespace_object |= u.namespace_object;
            uses.authorizer |= u.authorizer;
        }
        let slot = |used: bool, slot: usize| used.then(|| inputs.converted(slot));
        Variables {
            lazy: Some(Arc::new(LazyVariables {
                programs: Arc::clone(programs),
                bound: [
                    slot(uses.object, 0),
                    slot(uses.old_object, 1),
                    slot(uses.request, 2),
                    slot(uses.params, 3),
                    slot(uses.namespace_object, 4),
                ],
                authorizer: uses.authorizer.then(|| inputs.authorizer()).flatten(),
                values: programs.iter().map(|_| OnceLock::new()).collect(),
                cost: CostCounter::default(),
            })),
        }
    }

    /// The variable `name`, evaluated on first read (None: no such variable).
    fn get(&self, name: &str) -> Option<Result<Value, String>> {
        let lazy = self.lazy.as_ref()?;
        let i = lazy.programs.iter().position(|(n, _)| n == name)?;
        Some(
            lazy.values[i]
                .get_or_init(|| match &lazy.programs[i].1 {
                    Ok(p) => {
                        // Each variable may read the earlier ones, through these same variables.
                        let (v, cost) = run_cel(p, &**lazy, Some(self));
                        lazy.cost.add(cost);
                        v.map_err(|e| {
                            format!("composited variable {name:?} fails to evaluate: {e}")
                        })
                    }
                    Err(e) => Err(format!(
                        "composited variable {name:?} fails to compile: {e}"
                    )),
                })
                .clone(),
        )
    }

    /// What the variables evaluated since the last call cost, taken (upstream's
    /// `GetAndResetCost`, charged to the expression that read them).
    pub fn take_cost(&self) -> u64 {
        self.lazy.as_ref().map_or(0, |l| l.cost.take())
    }

    /// How many of the variables have been evaluated in this scope.
    pub fn evaluated(&self) -> usize {
        self.lazy
            .as_ref()
            .map_or(0, |l| l.values.iter().filter(|v| v.get().is_some()).count())
    }
}

/// What an expression evaluated to.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A bool.
    Bool(bool),
    /// A string.
    String(String),
    /// null.
    Null,
    /// A value of another type, by its CEL type name.
    Other(String),
}

/// [`evaluate_in`]'s result: the value or the CEL error text, and the cost.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputEvaluation {
    /// The value, or the error text.
    pub result: Result<Output, String>,
    /// Approximate cel-go actual cost.
    pub cost: u64,
}

/// Evaluates a policy expression (compiled by [`compile_in`]) over `inputs` and `variables`.
pub fn evaluate_in(
    program: &Program,
    inputs: &Inputs<'_>,
    variables: Option<&Variables>,
) -> OutputEvaluation {
    let (value, cost) = run(program, inputs, variables);
    let result = value.map(output);
    OutputEvaluation { result, cost }
}

/// Evaluates `program` over `object` alone: a CREATE request with no user, no old object, no
/// params and an authorizer that allows nothing; the value or cel's error text.
fn run_alone(program: &Program, object: &serde_json::Value) -> Result<Value, String> {
    let (user, authorizer): (crate::api::UserInfo, Authorizer) = Default::default();
    let request = serde_json::json!({"operation": "CREATE"});
    let inputs = Inputs::new(
        Activation::created(object, &request, &authorizer, &user),
        None,
        None,
    );
    run(program, &inputs, None).0
}

/// Compiles `expression` in `env` to `ret` and evaluates it over `object` alone (a CREATE
/// request with no user, old object or params): what a library function gives, for checks and
/// tests of single expressions.
pub fn evaluate_standalone(
    expression: &str,
    env: &Env,
    ret: ReturnType,
    object: &serde_json::Value,
) -> Result<Output, String> {
    let program = compile_in(expression, env, ret).map_err(|e| e.0)?;
    run_alone(&program, object).map(output)
}

/// A value as [`Output`] reports it.
fn output(v: Value) -> Output {
    match v {
        Value::Bool(b) => Output::Bool(b),
        Value::String(s) => Output::String(s.to_string()),
        Value::Null => Output::Null,
        other => Output::Other(other.type_of().to_string()),
    }
}

/// The direct evaluator's answer and its cost, when it has one.
fn run_direct(program: &Program, node: &direct::Node, inputs: &Inputs<'_>) -> Option<(Value, u64)> {
    let u = program.uses;
    if u.variables || u.authorizer {
        return None;
    }
    let mut roots = [None; 5];
    for (used, slot) in [
        (u.object, 0),
        (u.old_object, 1),
        (u.request, 2),
        (u.params, 3),
        (u.namespace_object, 4),
    ] {
        if used {
            roots[slot] = Some(inputs.direct_root(slot)?);
        }
    }
    let mut frame = direct::Frame::new(roots);
    let value = match direct::evaluate(node, &mut frame).ok()? {
        direct::Val::Bool(b) => Value::Bool(b),
        direct::Val::Str(s) => Value::String(Arc::new(s.to_string())),
        direct::Val::Null => Value::Null,
        direct::Val::Int(i) => Value::Int(i),
        direct::Val::UInt(u) => Value::UInt(u),
        direct::Val::Json(_) | direct::Val::Object(_) => return None,
    };
    let cost = frame.ticks;
    (cost <= PER_CALL_COST_LIMIT).then_some((value, cost))
}

fn run(
    program: &Program,
    inputs: &Inputs<'_>,
    variables: Option<&Variables>,
) -> (Result<Value, String>, u64) {
    if let Some(node) = &program.direct
        && let Some((value, cost)) = run_direct(program, node, inputs)
    {
        return (Ok(value), cost);
    }
    run_cel(program, inputs, variables)
}

/// [`run`] by cel alone, over what `binder` binds.
fn run_cel(
    program: &Program,
    binder: &dyn Binder,
    variables: Option<&Variables>,
) -> (Result<Value, String>, u64) {
    let counter = Arc::new(CostCounter::default());
    let mut ctx = root().new_inner_scope();
    let u = program.uses;
    for (used, name, slot) in [
        (u.object, "object", 0),
        (u.old_object, "oldObject", 1),
        (u.request, "request", 2),
        (u.params, "params", 3),
        (u.namespace_object, "namespaceObject", 4),
    ] {
        if used {
            match binder.bind(slot) {
                Ok(v) => ctx.add_variable_from_value(name, v),
                Err(e) => return (Err(e), 0),
            }
        }
    }
    if u.variables {
        let vars = variables.cloned().unwrap_or_default();
        ctx.add_variable_from_value("variables", Value::Opaque(Arc::new(vars)));
    }
    if u.authorizer
        && let Some(session) = binder.authorizer()
    {
        ctx.add_variable_from_value("authorizer", AuthzValue::Authorizer(session).into_value());
    }
    ctx.add_variable_from_value(
        COST_VAR,
        Value::Opaque(Arc::new(CostHandle(counter.clone()))),
    );
    let outcome = catch_unwind(AssertUnwindSafe(|| Value::resolve(&program.expr, &ctx)));
    let cost = counter.get();
    let result = if cost > PER_CALL_COST_LIMIT {
        Err(PER_CALL_LIMIT_EXCEEDED.to_string())
    } else {
        match outcome {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(ExecutionError::MissingArgumentOrTarget)) => Err(catch_unwind(
                AssertUnwindSafe(|| argument_error(&program.expr, &ctx)),
            )
            .ok()
            .flatten()
            .map_or_else(
                || error_text(&ExecutionError::MissingArgumentOrTarget),
                |e| error_text(&e),
            )),
            Ok(Err(e)) => Err(error_text(&e)),
            Err(_) => Err("internal error evaluating expression".into()),
        }
    };
    (result, cost)
}

/// The error of the innermost argument of a global function call that fails to evaluate: cel
/// 0.13 reports such an argument's error as `Missing argument or target` when the function
/// takes its first argument as its receiver (`string(x)`, `int(x)`, ...), where cel-go reports
/// the argument's own error. Only called on that error path; comprehension bodies (whose
/// variables are not bound here) are not searched.
fn argument_error(expr: &Expression, ctx: &cel::Context<'_>) -> Option<ExecutionError> {
    let (args, deeper): (&[IdedExpr], Vec<&Expression>) = match &expr.expr {
        // The template's identifiers are bound only while the call runs.
        Expr::Call(c) if c.func_name == SIZED_FN => (&c.args[..1], c.args[..1].iter().collect()),
        Expr::Call(c) if c.target.is_none() => (&c.args, c.args.iter().collect()),
        Expr::Comprehension(c) => (&[], vec![&c.iter_range, &c.accu_init]),
        _ => (&[], check::children(expr)),
    };
    for child in deeper {
        if let Some(e) = argument_error(child, ctx) {
            return Some(e);
        }
    }
    args.iter().find_map(|a| match Value::resolve(a, ctx) {
        Err(ExecutionError::MissingArgumentOrTarget) | Ok(_) => None,
        Err(e) => Some(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(expr: &str, object: serde_json::Value) -> Result<bool, String> {
        let program = compile(expr).map_err(|e| e.0)?;
        let user = crate::api::UserInfo::default();
        let request = json!({"operation": "CREATE", "userInfo": {"username": "alice"}});
        evaluate(
            &program,
            &Activation {
                object: &object,
                old_object: &serde_json::Value::Null,
                request: &request,
                authorizer: &Authorizer::default(),
                user: &user,
            },
        )
    }

    #[test]
    fn locate_skips_strings() {
        assert_eq!(locate("'foo' == foo", "foo"), (1, 10));
        assert_eq!(locate("a\n  foo", "foo"), (2, 3));
        assert_eq!(locate("x", "nope"), (1, 1));
    }

    #[test]
    fn documents_read_like_the_values_they_hold() {
        let object =
            json!({"items": [{"a": 1, "b": {"c": "x"}}, {"a": 2}, {"n": "z"}], "m": {"k": "v"}});
        for expr in [
            "object.items.all(i, has(i.a) || has(i.n))",
            "object.items.exists(i, i == {'n': 'z'})",
            "object.items[0].b.c == 'x'",
            "has(object.items[0].b) && !has(object.items[1].b)",
            "object.items.filter(i, has(i.a)).map(i, i.a).size() == 2",
            "'k' in object.m && object.m['k'] == 'v'",
            "object.items[0] == object.items[0]",
            "has(object.m) && !has(object.nothing)",
            "object != null",
        ] {
            assert_eq!(eval(expr, object.clone()), Ok(true), "{expr}");
        }
        assert_eq!(
            eval("object.items[1].b.c == 'x'", object.clone()),
            Err("no such key: b".into())
        );
        assert_eq!(eval("object.items[1].a == 2", object.clone()), Ok(true));
    }

    /// `expr` over `object` as policies evaluate it ([`evaluate_in`]): read in place from a
    /// shared request object ([`Objects::shared`]) when `shared`, else converted whole.
    fn eval_policy(expr: &str, object: &serde_json::Value, shared: bool) -> Result<Output, String> {
        let env = Env::policy(false);
        let program = compile_in(expr, &env, ReturnType::Any).map_err(|e| e.0)?;
        with_inputs(object, None, None, shared, |inputs| {
            evaluate_in(&program, inputs, None).result
        })
    }

    fn eval_shared(expr: &str, object: &serde_json::Value) -> Result<Output, String> {
        eval_policy(expr, object, true)
    }

    fn eval_converted(expr: &str, object: &serde_json::Value) -> Result<Output, String> {
        eval_policy(expr, object, false)
    }

    #[test]
    fn objects_read_in_place_evaluate_as_converted_ones() {
        let object = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "n": "1"}},
            "spec": {"replicas": 3, "ratio": 0.5, "flag": true, "none": null,
                     "containers": [{"name": "a", "image": "r/a", "resources": {"limits": {"cpu": "1"}}},
                                    {"name": "b", "image": "x/b", "ports": [{"containerPort": 80}]}],
                     "args": ["x", "y"], "mixed": [1, {"k": "v"}, "s"], "nested": {"deep": {"er": {"x": 1}}}}
        });
        for expr in [
            "object.spec.containers.all(c, c.image.startsWith('r/'))",
            "object.spec.containers.exists(c, has(c.resources.limits))",
            "object.spec.containers.all(c, has(c.resources.limits))",
            "object.spec.containers.map(c, c.name)",
            "object.spec.containers[0].resources.limits.cpu",
            "object.spec.containers[1].ports[0].containerPort == 80",
            "object.spec.containers[1].resources.limits",
            "object.spec.containers.filter(c, c.name == 'b').size()",
            "object.spec.containers.exists(c, c == {'name': 'a', 'image': 'r/a', 'resources': {'limits': {'cpu': '1'}}})",
            "object.spec.containers[0] == object.spec.containers[0]",
            "object.spec.containers[0] == object.spec.containers[1]",
            "'app' in object.metadata.labels",
            "object.metadata.labels",
            "object.metadata.labels.size()",
            "has(object.metadata.labels.n) && !has(object.metadata.labels.x)",
            "has(object.spec.nested.deep.er)",
            "object.spec.nested.deep.er.x + 1",
            "object.spec.nested.deep.nope.x",
            "object.spec.replicas.nope",
            "object.spec.replicas * 2",
            "object.spec.ratio",
            "object.spec.flag",
            "object.spec.none",
            "object.spec.none.x",
            "object.spec.args",
            "object.spec.args[1]",
            "object.spec.mixed[1].k",
            "object.spec.mixed.size()",
            "has(object.spec.mixed)",
            "object.?spec.?nested.?deep.?er.?x.orValue(0)",
            "object.?spec.?nested.?gone.?er.orValue('none')",
            "object.spec.?containers.hasValue()",
            "object.metadata.name.size() < 64",
            "object.spec == object.spec",
            "object.metadata",
            "object['metadata']['name']",
            "object.nothing",
            "has(object.spec.containers[0].image)",
            "request.namespace != 'kube-system'",
        ] {
            assert_eq!(
                eval_shared(expr, &object),
                eval_converted(expr, &object),
                "{expr}"
            );
        }
        assert_eq!(
            eval_shared(
                "object.spec.containers.all(c, has(c.resources.limits))",
                &object
            ),
            Err("no such key: resources".into())
        );
        assert_eq!(
            eval_shared("object.spec.nested.deep.nope.x", &object),
            Err("no such key: nope".into())
        );
        let null = serde_json::Value::Null;
        assert_eq!(
            eval_shared("object.metadata.name", &null),
            eval_converted("object.metadata.name", &null)
        );
    }

    /// Runs `f` over policy inputs with `object` (shared as the engine shares it, or given as
    /// JSON), a CREATE request in namespace `ns`, and `params` and `namespaceObject`.
    /// A policy's `variables` compiled as the engine compiles them (each may read the earlier).
    fn compile_variables(vars: &[(&str, &str)]) -> (Env, CompiledVariables) {
        let mut env = Env::policy(false);
        let mut out = Vec::new();
        for (name, expr) in vars {
            let program = compile_in(expr, &env, ReturnType::Any).map_err(|e| e.0);
            match &program {
                Ok(p) => env.declare_variable(name, p),
                Err(_) => env.declare_variable_unknown(name),
            }
            out.push((name.to_string(), program));
        }
        (env, out.into())
    }

    /// Variables are evaluated on first read, once per scope: a failing variable nobody reads
    /// has no effect and is never evaluated, one that is read fails the reading expression with
    /// upstream's `composited variable` text (through a variable reading it too), and what a
    /// variable cost is charged once, to the expression that first read it.
    #[test]
    fn variables_are_evaluated_lazily_once_per_scope() {
        let (env, programs) = compile_variables(&[
            ("bad", "object.data.missing"),
            ("chained", "variables.bad + '-x'"),
            ("name", "object.metadata.name"),
            ("names", "[1, 2, 3].map(i, variables.name + string(i))"),
        ]);
        let object = json!({"metadata": {"name": "web"}, "data": {"k": "v"}});
        let run = |vars: &Variables, inputs: &Inputs<'_>, expr: &str| {
            let program = compile_in(expr, &env, ReturnType::Any).unwrap();
            let ev = evaluate_in(&program, inputs, Some(vars));
            (ev.result, ev.cost, vars.take_cost())
        };
        for sharing in [false, true] {
            with_inputs(&object, None, None, sharing, |inputs| {
                let vars = Variables::new(&programs, inputs);
                assert_eq!(vars.evaluated(), 0);
                // Unread: no effect, not evaluated.
                let (result, _, cost) = run(&vars, inputs, "variables.name == 'web'");
                assert_eq!(result, Ok(Output::Bool(true)));
                assert!(
                    cost > 0,
                    "the variable's cost is charged to its first reader"
                );
                assert_eq!(vars.evaluated(), 1);
                let (result, _, cost) = run(&vars, inputs, "true || variables.bad == 'x'");
                assert_eq!((result, cost), (Ok(Output::Bool(true)), 0));
                assert_eq!(vars.evaluated(), 1);
                // Read again: the value kept, nothing charged.
                let (result, _, cost) = run(&vars, inputs, "variables.name + '!'");
                assert_eq!((result, cost), (Ok(Output::String("web!".into())), 0));
                // `names` reads `name`, already evaluated: only its own cost.
                let (result, _, cost) = run(&vars, inputs, "variables.names.size()");
                assert_eq!(result, Ok(Output::Other("int".into())));
                assert!(cost > 0);
                // Read: the error, as upstream words it, the chained one wrapping the first.
                let (result, _, _) = run(&vars, inputs, "variables.bad == 'x'");
                assert_eq!(
                    result,
                    Err(
                        r#"composited variable "bad" fails to evaluate: no such key: missing"#
                            .into()
                    )
                );
                let (result, _, cost) = run(&vars, inputs, "variables.chained == 'x'");
                assert_eq!(
                    result,
                    Err(concat!(
                        r#"composited variable "chained" fails to evaluate: "#,
                        r#"composited variable "bad" fails to evaluate: no such key: missing"#
                    )
                    .into())
                );
                assert!(cost > 0);
                assert_eq!(vars.evaluated(), 4);
                let (result, _, _) = run(&vars, inputs, "has(variables.bad)");
                assert!(result.is_err(), "{result:?}");
                // Another scope evaluates them again.
                let again = Variables::new(&programs, inputs);
                let (_, _, cost) = run(&again, inputs, "variables.name == 'web'");
                assert!(cost > 0);
            });
        }
    }

    /// A variable whose expression did not compile fails only the expressions that read it; a
    /// variable reading `authorizer` in a scope that binds none (upstream's messageExpressions and
    /// auditAnnotations) fails with cel-go's missing attribute.
    #[test]
    fn variables_fail_only_their_readers() {
        let (env, programs) = compile_variables(&[
            ("broken", "object.metadata.name ++"),
            (
                "allowed",
                "authorizer.group('').resource('pods').check('get').allowed()",
            ),
        ]);
        let object = json!({"metadata": {"name": "web"}});
        with_inputs(&object, None, None, false, |inputs| {
            let program = compile_in("variables.broken == 'x'", &env, ReturnType::Any).unwrap();
            let vars = Variables::new(&programs, inputs);
            let result = evaluate_in(&program, inputs, Some(&vars)).result;
            let err = result.unwrap_err();
            assert!(
                err.starts_with(r#"composited variable "broken" fails to compile: "#),
                "{err}"
            );
            let program = compile_in("variables.allowed", &env, ReturnType::Any).unwrap();
            let ok = evaluate_in(&program, inputs, Some(&vars)).result;
            assert!(matches!(ok, Ok(Output::Bool(_))), "{ok:?}");
            let bare = inputs.without_authorizer_view();
            let vars = Variables::new(&programs, &bare);
            assert_eq!(
                evaluate_in(&program, &bare, Some(&vars)).result,
                Err(concat!(
                    r#"composited variable "allowed" fails to evaluate: "#,
                    "no such attribute(s): authorizer"
                )
                .into())
            );
        });
    }

    fn with_inputs<R>(
        object: &serde_json::Value,
        params: Option<&serde_json::Value>,
        namespace: Option<&serde_json::Value>,
        sharing: bool,
        f: impl FnOnce(&Inputs<'_>) -> R,
    ) -> R {
        let request =
            json!({"operation": "CREATE", "namespace": "ns", "userInfo": {"username": "u"}});
        let (user, authorizer): (crate::api::UserInfo, Authorizer) = Default::default();
        let shared = Objects::shared(
            Some(Arc::new(crate::engine::Object::new(object.clone()))),
            None,
        );
        let inputs = Inputs::new(
            Activation::created(object, &request, &authorizer, &user),
            params,
            namespace,
        );
        f(&if sharing {
            inputs.sharing(&shared)
        } else {
            inputs
        })
    }

    /// cel-go's runtime cost table and the Kubernetes library's cost tests, as data
    /// (`tests/fixtures/cel-cost-v1.33/upstream-runtime-cost.json`): each expression (upstream's
    /// variables renamed to `object` and `params`) costs what the apiserver's options make it
    /// cost, through both evaluators and both ways of binding the object.
    #[test]
    fn upstream_runtime_cost_tables() {
        let cases: Vec<serde_json::Value> = crate::json::from_str(include_str!(
            "../../tests/fixtures/cel-cost-v1.33/upstream-runtime-cost.json"
        ))
        .unwrap();
        assert!(cases.len() > 100, "{} cases", cases.len());
        let env = Env::policy(true);
        let mut failures = Vec::new();
        for case in &cases {
            let expr = case["expression"].as_str().unwrap();
            let want = case["cost"].as_u64().unwrap();
            let program = match compile_in(expr, &env, ReturnType::Any) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{expr}: {}", e.0));
                    continue;
                }
            };
            let object = case.get("object").cloned().unwrap_or_default();
            if case.get("skip").is_some() {
                // A known difference of the function itself: it must still show, or the case
                // should come back into the table.
                let ev = with_inputs(&object, case.get("params"), None, false, |inputs| {
                    evaluate_in(&program, inputs, None)
                });
                if ev.result.is_ok() {
                    failures.push(format!("{expr}: evaluates now, drop its `skip`"));
                }
                continue;
            }
            for sharing in [false, true] {
                let ev = with_inputs(&object, case.get("params"), None, sharing, |inputs| {
                    evaluate_in(&program, inputs, None)
                });
                if ev.result.is_err() || ev.cost != want {
                    failures.push(format!(
                        "{expr} (sharing {sharing}): cost {} want {want}, {:?}",
                        ev.cost, ev.result
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
    }

    /// Before `StrictCostEnforcementForVAP` (1.32) the apiserver priced the Kubernetes library's
    /// functions at cel-go's default 1, an authorization check included; cel-go's own rules
    /// (`matches`, string equality) are the same in every release.
    #[test]
    fn library_costs_follow_the_release() {
        let object = json!({"s": "a".repeat(1000)});
        for (expr, strict, before) in [
            ("object.s.lowerAscii() == 'a'", 2 + 100 + 1, 2 + 1 + 1),
            ("quantity('1Mi') == quantity('2Mi')", 3, 3),
            (
                "object.s.split('a').size() > 0",
                2 + 200 + 1 + 1,
                2 + 1 + 1 + 1,
            ),
            ("object.s.matches('a+')", 2 + 101, 2 + 101),
            (
                "authorizer.group('').resource('pods').check('get').allowed()",
                1 + 1 + 1 + authz::AUTHZ_CHECK_COST + 1,
                5,
            ),
        ] {
            for (minor, want) in [(33, strict), (32, strict), (31, before), (29, before)] {
                let env = Env::policy(false).for_release(crate::KubeVersion::new(minor).unwrap());
                let program = compile_in(expr, &env, ReturnType::Any).unwrap();
                let ev = with_inputs(&object, None, None, false, |inputs| {
                    evaluate_in(&program, inputs, None)
                });
                assert!(ev.result.is_ok(), "{expr}: {:?}", ev.result);
                assert_eq!(ev.cost, want, "{expr} in 1.{minor}");
            }
        }
    }

    /// Every expression over every object, evaluated directly (where the direct evaluator
    /// answers) and by cel alone: the same value and the same cost.
    #[test]
    fn the_direct_evaluator_answers_as_cel_does() {
        let objects = [
            json!({
                "metadata": {"name": "web-ü", "namespace": "ns", "labels": {"app": "web", "tier": "db", "n": "1"}},
                "spec": {"replicas": 3, "big": 18446744073709551615u64, "ratio": 0.5, "flag": true, "none": null,
                         "hostNetwork": false, "hostPID": true,
                         "containers": [{"name": "a", "image": "registry.example.com/a", "resources": {"limits": {"cpu": "1"}}},
                                        {"name": "b", "image": "x/b", "ports": [{"containerPort": 80}], "resources": {}}],
                         "args": ["x", "y"], "mixed": [1, {"k": "v"}, "s"], "nested": {"deep": {"er": {"x": 1}}}}
            }),
            json!({
                "metadata": {"name": "p", "labels": {"app": 1}},
                "spec": {"hostNetwork": "yes", "containers": [], "args": [], "replicas": -1}
            }),
            json!({
                "metadata": {"name": "q"},
                "spec": {"hostNetwork": null, "containers": [{"name": "a", "image": "registry.example.com/a",
                         "resources": {"limits": {"cpu": 0.5}}}], "args": ["x", 2]}
            }),
            json!({"metadata": {}, "spec": {"containers": {"a": {"image": "x"}}, "args": "x"}}),
            json!("text"),
            serde_json::Value::Null,
        ];
        let exprs = [
            "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
            "object.spec.containers.all(c, has(c.resources.limits))",
            "object.spec.containers.exists(c, has(c.resources.limits))",
            "object.spec.containers.exists_one(c, c.name == 'a')",
            "object.spec.containers.all(c, c.ports.all(p, p.containerPort > 0))",
            "object.spec.containers.all(c, object.spec.containers.exists(d, d.name == c.name))",
            "object.spec.containers.map(c, c.name)",
            "object.spec.containers.filter(c, c.name == 'b').size()",
            "!has(object.spec.hostNetwork) || !object.spec.hostNetwork",
            "!has(object.spec.hostPID)",
            "object.spec.containers.size() < 10",
            "object.spec.containers.size()",
            "'app' in object.metadata.labels",
            "'x' in object.spec.args",
            "'z' in object.spec.args",
            "1 in object.spec.args",
            "'a' in object.spec.mixed",
            "has(object.metadata.labels.tier)",
            "object.metadata.labels.tier == 'db'",
            "object.metadata.labels.app != 'web'",
            "object.metadata.labels.app == 1",
            "object.metadata.name.size() < 64",
            "object.metadata.name.size()",
            "size(object.metadata.name) == 6",
            "object.metadata.name.endsWith('ü') && object.metadata.name.contains('b-')",
            "object.metadata.name < 'x' && object.metadata.name >= 'p'",
            "object.spec.replicas > 2 ? 'many' : 'few'",
            "object.spec.replicas <= 3",
            "object.spec.replicas + 1 == 4",
            "object.spec.big == object.spec.big",
            "object.spec.big > 1u",
            "object.spec.ratio > 0.1",
            "object.spec.flag == true",
            "object.spec.none == null",
            "object.spec.none",
            "object.spec.nothing == null",
            "object.nothing",
            "object == null",
            "object.metadata.name",
            "object.metadata",
            "dyn(object.spec.replicas) == 3",
            "request.namespace != 'kube-system'",
            "request.namespace == params.namespace",
            "params.limit > object.spec.replicas",
            "has(params.limit)",
            "namespaceObject.metadata.name == 'ns'",
            "oldObject == null",
            "oldObject.metadata.name == 'x'",
            "object.spec.containers[0].name == 'a'",
            "object.?spec.?replicas.orValue(0) == 3",
            "authorizer.group('').resource('pods').check('get').allowed()",
            "[1, 2].all(x, x > 0)",
            "true && (false || 1 == 1)",
            "false && object.nothing",
            "true || object.nothing",
            "object.nothing || true",
        ];
        let params = json!({"namespace": "ns", "limit": 5});
        let namespace = json!({"metadata": {"name": "ns"}});
        let env = Env::policy(true);
        let mut direct = 0;
        for object in &objects {
            for expr in exprs {
                let program = compile_in(expr, &env, ReturnType::Any)
                    .unwrap_or_else(|e| panic!("{expr}: {e}"));
                for sharing in [false, true] {
                    with_inputs(object, Some(&params), Some(&namespace), sharing, |inputs| {
                        let by_cel = run_cel(&program, inputs, None);
                        if let Some(node) = &program.direct
                            && let Some((value, cost)) = run_direct(&program, node, inputs)
                        {
                            direct += 1;
                            assert_eq!((Ok(value), cost), by_cel, "{expr} over {object}");
                        }
                    });
                }
            }
        }
        // A good part of them is answered directly (errors and what it does not model go to cel).
        assert!(direct > objects.len() * exprs.len() / 2, "{direct}");
    }

    /// The expressions of the policy benchmark are all answered without cel.
    #[test]
    fn common_policy_expressions_are_answered_directly() {
        let object = json!({
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "db"}},
            "spec": {"containers": [{"name": "a", "image": "registry.example.com/a", "resources": {"limits": {"cpu": "1"}}}]}
        });
        for expr in [
            "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
            "object.spec.containers.all(c, has(c.resources.limits))",
            "!has(object.spec.hostNetwork) || !object.spec.hostNetwork",
            "'app' in object.metadata.labels",
            "has(object.metadata.labels.tier)",
            "object.metadata.name.size() < 64",
            "!has(object.spec.hostPID)",
            "object.spec.containers.size() < 10",
            "request.namespace != 'kube-system'",
        ] {
            let program = compile_in(expr, &Env::policy(false), ReturnType::Bool).unwrap();
            let node = program
                .direct
                .as_deref()
                .unwrap_or_else(|| panic!("{expr}"));
            let answer = with_inputs(&object, None, None, true, |inputs| {
                run_direct(&program, node, inputs).map(|(v, _)| v)
            });
            assert_eq!(answer, Some(Value::Bool(true)), "{expr}");
        }
    }

    #[test]
    fn select_on_null_is_no_such_key() {
        assert_eq!(
            eval("object.metadata.name == 'x'", serde_json::Value::Null),
            Err("no such key: metadata".into())
        );
    }

    #[test]
    fn comprehension_iterations_are_charged() {
        let program = compile("object.items.all(i, i > 0)").unwrap();
        let object = json!({"items": (1..=100).collect::<Vec<_>>()});
        let user = crate::api::UserInfo::default();
        let ev = evaluate_with_cost(
            &program,
            &Activation {
                object: &object,
                old_object: &serde_json::Value::Null,
                request: &serde_json::Value::Null,
                authorizer: &Authorizer::default(),
                user: &user,
            },
        );
        assert_eq!(ev.result, Ok(true));
        // cel-go: `object.items` 2, each iteration `@not_strictly_false(@result)` 2 and
        // `@result && i > 0` 3, the result 1.
        assert_eq!(ev.cost, 2 + 100 * 5 + 1);
    }

    /// cel-go's own validator tests, as data: each expression checked with one string variable
    /// declared, its issues rendered.
    #[test]
    fn cel_go_validator_tables() {
        #[derive(serde::Deserialize)]
        struct Case {
            var: String,
            expr: String,
            issues: String,
        }
        let cases: Vec<Case> = crate::yaml::from_str(include_str!(
            "../../tests/fixtures/cel/cel-go-validators.yaml"
        ))
        .unwrap();
        assert_eq!(cases.len(), 26);
        for case in cases {
            let parsed = parse(&case.expr).unwrap();
            let mut scope = vec![(case.var.clone(), check::Ty::String)];
            let got = match check::check(&parsed, &mut scope, true, u32::MAX) {
                Ok(_) => String::new(),
                Err(issues) => render_issues(&case.expr, &issues).0,
            };
            let got = got.strip_prefix("compilation failed: ").unwrap_or(&got);
            assert_eq!(got, case.issues, "{}", case.expr);
        }
    }

    /// Before 1.30 cel-go's type checker judged aggregate literals (from cel-go 0.16's
    /// `joinTypes`): `dyn` elements pass, the first element not assignable is the error, and
    /// the checker's other errors are reported beside it; the literal validators are absent.
    #[test]
    fn aggregate_literals_before_1_30_are_the_type_checkers() {
        let env = |minor| Env::policy(false).for_release(crate::KubeVersion::new(minor).unwrap());
        let err = |minor, e: &str| {
            compile_in(e, &env(minor), ReturnType::Bool)
                .err()
                .map(|e| e.0)
        };
        for (expr, old, new) in [
            (
                "[1, dyn('a')].size() == 2",
                None,
                Some("1:8: expected type 'int' but found 'dyn'"),
            ),
            (
                "[object.x, 1, 'a'].size() == 3",
                None,
                Some("1:12: expected type 'dyn' but found 'int'"),
            ),
            (
                "duration('1d') > duration('1h')",
                None,
                Some("1:10: invalid duration argument"),
            ),
            (
                "[1, 'a', 2.0].size() == 3",
                Some("1:5: expected type 'int' but found 'string'"),
                Some("1:5: expected type 'int' but found 'string'"),
            ),
            (
                "{'a': 1, 'b': 'x', 'c': true}.size() == 3",
                Some("1:15: expected type 'int' but found 'string'\n"),
                Some("1:25: expected type 'int' but found 'bool'"),
            ),
        ] {
            for (minor, want) in [(29, old), (30, new)] {
                let got = err(minor, expr);
                match want {
                    None => assert_eq!(got, None, "{minor} {expr}"),
                    Some(w) => assert!(
                        got.as_deref().is_some_and(|g| g.contains(w)),
                        "{minor} {expr}: {got:?}"
                    ),
                }
            }
        }
        // The literal's error and the checker's next one, together, sorted by position.
        let both = err(29, "[1, 'a'].size() == 'x'").unwrap();
        assert!(
            both.contains("1:5: expected type 'int' but found 'string'")
                && both.contains("1:17: found no matching overload for '_==_'"),
            "{both}"
        );
        let map = err(29, "{'a': 1, 'b': 'x', 'c': true}.size() == 3").unwrap();
        assert!(
            !map.contains("1:25"),
            "one error per key or value chain: {map}"
        );
    }

    #[test]
    fn static_types() {
        use check::Ty;
        let ty = |e: &str| check::check(&parse(e).unwrap(), &mut Vec::new(), true, u32::MAX);
        assert_eq!(
            ty("request.userInfo.groups"),
            Ok(Ty::List(Box::new(Ty::String)))
        );
        assert_eq!(
            ty("[1, 2].map(x, x * 2)").map(|t| t.name()),
            Ok("list(int)".into())
        );
        assert_eq!(ty("{'a': true}['a']"), Ok(Ty::Bool));
        assert_eq!(ty("object.x ? 1 : 'a'"), Ok(Ty::Dyn));
    }
}

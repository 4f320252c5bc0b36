//! A direct evaluator for the expressions most policies are made of: field selections, `has()`,
//! comparisons of strings and integers, `in` on maps, `size()`, `startsWith`/`endsWith`/
//! `contains` on strings, `!`, `&&`, `||`, `?:` and the `all`/`exists`/`exists_one` macros over
//! lists, read in place from the request's JSON values.
//!
//! cel 0.13 copies every value that crosses a function call between its two value models and
//! builds a scope per evaluation; for a policy check that is most of the time it takes. This
//! evaluator borrows the JSON instead, allocates nothing, and gives up ([`Unsupported`]) on
//! anything it does not model exactly, on every error and on any value it is not sure of the
//! meaning of; the caller then evaluates the expression with cel, which gives the answer, the
//! error text and the cost as before. Where it answers, it answers what cel 0.13 answers: it works
//! on the expression cel runs (after [`super::rewrite`]), evaluates the same nodes in the same
//! order with the same short circuits, and counts the same comprehension steps, so the cost is
//! the same too.

use cel::common::ast::{CallExpr, Expr, LiteralValue, operators};
use cel::parser::Expression;
use kube_cel::cel;

use super::cost::{self, Arg};
use super::{DOC_SELECT_FN, HAS_FN, SELECT_FN, SIZED_FN, TICK_FN, UNWRAP_FN};

/// The expression is outside what this evaluator models, or its evaluation met something it does
/// not (an error, a float, a map to iterate): cel evaluates it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Unsupported;

type Eval<T> = Result<T, Unsupported>;

/// The request variables an expression may read, by their slot in [`super::Inputs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Root {
    Object = 0,
    OldObject = 1,
    Request = 2,
    Params = 3,
    NamespaceObject = 4,
}

/// A compiled expression.
#[derive(Debug)]
pub(super) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Str(Box<str>),
    Root(Root),
    /// A comprehension variable, by its position in the scope.
    Var(usize),
    Select(Box<Node>, Box<str>),
    Has(Box<Node>, Box<str>),
    Not(Box<Node>),
    And(Box<[Node; 2]>),
    Or(Box<[Node; 2]>),
    Cond(Box<[Node; 3]>),
    Compare(Cmp, Box<[Node; 2]>),
    In(Box<[Node; 2]>),
    Add(Box<[Node; 2]>),
    NotStrictlyFalse(Box<Node>),
    Size(Box<Node>),
    Text(TextOp, Box<[Node; 2]>),
    /// A comprehension step and what each step costs.
    Tick(Box<Node>, u64),
    Comprehension(Box<Comprehension>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextOp {
    StartsWith,
    EndsWith,
    Contains,
}

#[derive(Debug)]
pub(super) struct Comprehension {
    range: Node,
    init: Node,
    /// Scope positions of the accumulator and of the iteration variable.
    accu: usize,
    iter: usize,
    cond: Node,
    step: Node,
    result: Node,
}

/// Compiles a rewritten expression, or None when it uses anything this evaluator does not model.
pub(super) fn compile(expr: &Expression) -> Option<Node> {
    let mut scope = Vec::new();
    node(expr, &mut scope).ok()
}

fn pair(a: &Expression, b: &Expression, scope: &mut Vec<String>) -> Eval<Box<[Node; 2]>> {
    Ok(Box::new([node(a, scope)?, node(b, scope)?]))
}

fn node(expr: &Expression, scope: &mut Vec<String>) -> Eval<Node> {
    Ok(match &expr.expr {
        Expr::Literal(l) => match l {
            LiteralValue::Null => Node::Null,
            LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
            LiteralValue::Int(i) => Node::Int(*i.inner()),
            LiteralValue::UInt(u) => Node::UInt(*u.inner()),
            LiteralValue::String(s) => Node::Str(s.inner().into()),
            LiteralValue::Double(_) | LiteralValue::Bytes(_) => return Err(Unsupported),
        },
        Expr::Ident(name) => match scope.iter().rposition(|n| n == name) {
            Some(i) => Node::Var(i),
            None => Node::Root(match name.as_str() {
                "object" => Root::Object,
                "oldObject" => Root::OldObject,
                "request" => Root::Request,
                "params" => Root::Params,
                "namespaceObject" => Root::NamespaceObject,
                _ => return Err(Unsupported),
            }),
        },
        Expr::Call(c) => call(c, scope)?,
        Expr::Comprehension(c) => {
            if c.iter_var2.is_some() {
                return Err(Unsupported);
            }
            // The range and the initial value are evaluated outside the comprehension's scope.
            let range = node(&c.iter_range, scope)?;
            let init = node(&c.accu_init, scope)?;
            let accu = scope.len();
            scope.push(c.accu_var.clone());
            let iter = scope.len();
            scope.push(c.iter_var.clone());
            let inner = (|| {
                Ok(Comprehension {
                    range,
                    init,
                    accu,
                    iter,
                    cond: node(&c.loop_cond, scope)?,
                    step: node(&c.loop_step, scope)?,
                    result: node(&c.result, scope)?,
                })
            })();
            scope.truncate(accu);
            Node::Comprehension(Box::new(inner?))
        }
        _ => return Err(Unsupported),
    })
}

fn field(e: &Expression) -> Eval<Box<str>> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Ok(s.inner().into()),
        _ => Err(Unsupported),
    }
}

fn call(c: &CallExpr, scope: &mut Vec<String>) -> Eval<Node> {
    let args = c.args.as_slice();
    if let Some(target) = c.target.as_deref() {
        // A receiver that is still an identifier names a function's namespace.
        if matches!(target.expr, Expr::Ident(_)) {
            return Err(Unsupported);
        }
        let op = match (c.func_name.as_str(), args) {
            ("size", []) => return Ok(Node::Size(Box::new(node(target, scope)?))),
            ("startsWith", [_]) => TextOp::StartsWith,
            ("endsWith", [_]) => TextOp::EndsWith,
            ("contains", [_]) => TextOp::Contains,
            _ => return Err(Unsupported),
        };
        return Ok(Node::Text(op, pair(target, &args[0], scope)?));
    }
    Ok(match (c.func_name.as_str(), args) {
        (SELECT_FN | DOC_SELECT_FN, [operand, f]) => {
            Node::Select(Box::new(node(operand, scope)?), field(f)?)
        }
        (HAS_FN, [operand, f]) => Node::Has(Box::new(node(operand, scope)?), field(f)?),
        (UNWRAP_FN | "dyn", [x]) => node(x, scope)?,
        // The operators and functions below charge their sized cost themselves.
        (SIZED_FN, [call, _template]) => node(call, scope)?,
        (TICK_FN, [step, cost]) => match &cost.expr {
            Expr::Literal(LiteralValue::Int(n)) => Node::Tick(
                Box::new(node(step, scope)?),
                u64::try_from(*n.inner()).unwrap_or(0),
            ),
            _ => return Err(Unsupported),
        },
        ("size", [x]) => Node::Size(Box::new(node(x, scope)?)),
        (operators::LOGICAL_NOT, [x]) => Node::Not(Box::new(node(x, scope)?)),
        (operators::NOT_STRICTLY_FALSE, [x]) => Node::NotStrictlyFalse(Box::new(node(x, scope)?)),
        (operators::LOGICAL_AND, [a, b]) => Node::And(pair(a, b, scope)?),
        (operators::LOGICAL_OR, [a, b]) => Node::Or(pair(a, b, scope)?),
        (operators::CONDITIONAL, [c, a, b]) => Node::Cond(Box::new([
            node(c, scope)?,
            node(a, scope)?,
            node(b, scope)?,
        ])),
        (operators::IN, [a, b]) => Node::In(pair(a, b, scope)?),
        (operators::ADD, [a, b]) => Node::Add(pair(a, b, scope)?),
        (name, [a, b]) => {
            let cmp = match name {
                operators::EQUALS => Cmp::Eq,
                operators::NOT_EQUALS => Cmp::Ne,
                operators::LESS => Cmp::Lt,
                operators::LESS_EQUALS => Cmp::Le,
                operators::GREATER => Cmp::Gt,
                operators::GREATER_EQUALS => Cmp::Ge,
                _ => return Err(Unsupported),
            };
            Node::Compare(cmp, pair(a, b, scope)?)
        }
        _ => return Err(Unsupported),
    })
}

/// A value as this evaluator holds it, borrowed from the expression or the request.
#[derive(Debug, Clone, Copy)]
pub(super) enum Val<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Str(&'a str),
    /// A JSON map or list.
    Json(&'a serde_json::Value),
    /// A request object whose members are read without making it whole.
    Object(&'a crate::engine::Object),
}

impl<'a> Val<'a> {
    /// A JSON value as cel sees it ([`super::json_value`]): integers as `int` (or `uint` above
    /// `i64`); other numbers are not modelled here.
    pub(super) fn json(v: &'a serde_json::Value) -> Eval<Val<'a>> {
        Ok(match v {
            serde_json::Value::Null => Val::Null,
            serde_json::Value::Bool(b) => Val::Bool(*b),
            serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Val::Int(i),
                (None, Some(u)) => Val::UInt(u),
                _ => return Err(Unsupported),
            },
            serde_json::Value::String(s) => Val::Str(s),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => Val::Json(v),
        })
    }

    /// What the cost rules need of the value.
    fn cost_arg(self) -> Arg {
        match self {
            Val::Str(s) => Arg::str(s),
            Val::Json(v) => json_cost_arg(v),
            _ => Arg::Scalar,
        }
    }

    fn bool(self) -> Eval<bool> {
        match self {
            Val::Bool(b) => Ok(b),
            _ => Err(Unsupported),
        }
    }

    /// The member `name` of a map: None when it has no such member; Err when this is not a map.
    fn member(self, name: &str) -> Eval<Option<&'a serde_json::Value>> {
        match self {
            Val::Json(serde_json::Value::Object(m)) => Ok(m.get(name)),
            Val::Object(o) if o.is_map() => Ok(o.member(name)),
            _ => Err(Unsupported),
        }
    }
}

/// What [`evaluate`] reads: the request's variables and the comprehension variables in scope.
pub(super) struct Frame<'a> {
    pub(super) roots: [Option<Val<'a>>; 5],
    /// The comprehension variables; None for an iteration variable before the first step.
    scope: Vec<Option<Val<'a>>>,
    /// Cost charged by comprehension steps.
    pub(super) ticks: u64,
}

impl<'a> Frame<'a> {
    /// Adds a step's cost.
    fn charge(&mut self, cost: u64) {
        self.ticks = self.ticks.saturating_add(cost);
    }

    /// A frame over the request variables (None: not available to this evaluator).
    pub(super) fn new(roots: [Option<Val<'a>>; 5]) -> Self {
        Frame {
            roots,
            scope: Vec::new(),
            ticks: 0,
        }
    }
}

/// Evaluates `node`; [`Unsupported`] when cel must.
pub(super) fn evaluate<'a>(node: &'a Node, f: &mut Frame<'a>) -> Eval<Val<'a>> {
    Ok(match node {
        Node::Null => Val::Null,
        Node::Bool(b) => Val::Bool(*b),
        Node::Int(i) => Val::Int(*i),
        Node::UInt(u) => Val::UInt(*u),
        Node::Str(s) => Val::Str(s),
        Node::Root(r) => f.roots[*r as usize].ok_or(Unsupported)?,
        Node::Var(i) => f.scope.get(*i).copied().flatten().ok_or(Unsupported)?,
        Node::Select(operand, name) => {
            let v = evaluate(operand, f)?.member(name)?.ok_or(Unsupported)?;
            Val::json(v)?
        }
        Node::Has(operand, name) => Val::Bool(evaluate(operand, f)?.member(name)?.is_some()),
        Node::Not(x) => Val::Bool(!evaluate(x, f)?.bool()?),
        Node::NotStrictlyFalse(x) => Val::Bool(evaluate(x, f)?.bool()?),
        // cel 0.13 evaluates the right side unless the left is false (`&&`) or true (`||`),
        // and answers only with a bool on each side here.
        Node::And(ab) => {
            let left = evaluate(&ab[0], f)?.bool()?;
            Val::Bool(left && evaluate(&ab[1], f)?.bool()?)
        }
        Node::Or(ab) => {
            let left = evaluate(&ab[0], f)?.bool()?;
            Val::Bool(left || evaluate(&ab[1], f)?.bool()?)
        }
        Node::Cond(cab) => {
            if evaluate(&cab[0], f)?.bool()? {
                evaluate(&cab[1], f)?
            } else {
                evaluate(&cab[2], f)?
            }
        }
        Node::Compare(cmp, ab) => {
            let a = evaluate(&ab[0], f)?;
            let b = evaluate(&ab[1], f)?;
            let order = match (a, b) {
                (Val::Int(a), Val::Int(b)) => a.cmp(&b),
                (Val::UInt(a), Val::UInt(b)) => a.cmp(&b),
                (Val::Str(a), Val::Str(b)) => a.cmp(b),
                (Val::Bool(a), Val::Bool(b)) if matches!(cmp, Cmp::Eq | Cmp::Ne) => a.cmp(&b),
                (Val::Null, Val::Null) if matches!(cmp, Cmp::Eq | Cmp::Ne) => {
                    std::cmp::Ordering::Equal
                }
                _ => return Err(Unsupported),
            };
            let name = match cmp {
                Cmp::Eq => operators::EQUALS,
                Cmp::Ne => operators::NOT_EQUALS,
                Cmp::Lt => operators::LESS,
                Cmp::Le => operators::LESS_EQUALS,
                Cmp::Gt => operators::GREATER,
                Cmp::Ge => operators::GREATER_EQUALS,
            };
            f.charge(cost::call_cost(
                name,
                &[a.cost_arg(), b.cost_arg()],
                Arg::Scalar,
                || 1,
            ));
            Val::Bool(match cmp {
                Cmp::Eq => order.is_eq(),
                Cmp::Ne => order.is_ne(),
                Cmp::Lt => order.is_lt(),
                Cmp::Le => order.is_le(),
                Cmp::Gt => order.is_gt(),
                Cmp::Ge => order.is_ge(),
            })
        }
        Node::In(ab) => {
            let a = evaluate(&ab[0], f)?;
            let b = evaluate(&ab[1], f)?;
            let Val::Str(key) = a else {
                return Err(Unsupported);
            };
            // Membership in a map costs 1, in a list its size.
            let size = match b {
                Val::Json(serde_json::Value::Array(items)) => Arg::Sized(items.len() as u64),
                _ => Arg::Scalar,
            };
            f.charge(cost::call_cost(
                operators::IN,
                &[a.cost_arg(), size],
                Arg::Scalar,
                || 1,
            ));
            match b {
                Val::Json(serde_json::Value::Object(m)) => Val::Bool(m.contains_key(key)),
                Val::Json(serde_json::Value::Array(items)) => {
                    let mut found = false;
                    for item in items {
                        match item {
                            serde_json::Value::String(s) => found |= s == key,
                            _ => return Err(Unsupported),
                        }
                    }
                    Val::Bool(found)
                }
                _ => return Err(Unsupported),
            }
        }
        Node::Add(ab) => {
            let a = evaluate(&ab[0], f)?;
            let b = evaluate(&ab[1], f)?;
            f.charge(cost::call_cost(
                operators::ADD,
                &[a.cost_arg(), b.cost_arg()],
                Arg::Scalar,
                || 1,
            ));
            match (a, b) {
                (Val::Int(a), Val::Int(b)) => Val::Int(a.checked_add(b).ok_or(Unsupported)?),
                _ => return Err(Unsupported),
            }
        }
        // `size` as the context defines it: a string's code points, a list's or a map's entries.
        Node::Size(x) => {
            let n = match evaluate(x, f)? {
                Val::Str(s) => s.chars().count(),
                Val::Json(serde_json::Value::Array(items)) => items.len(),
                Val::Json(serde_json::Value::Object(m)) => m.len(),
                _ => return Err(Unsupported),
            };
            Val::Int(i64::try_from(n).map_err(|_| Unsupported)?)
        }
        Node::Text(op, ab) => {
            let (Val::Str(a), Val::Str(b)) = (evaluate(&ab[0], f)?, evaluate(&ab[1], f)?) else {
                return Err(Unsupported);
            };
            let name = match op {
                TextOp::StartsWith => "startsWith",
                TextOp::EndsWith => "endsWith",
                TextOp::Contains => "contains",
            };
            f.charge(cost::call_cost(
                name,
                &[Arg::str(a), Arg::str(b)],
                Arg::Scalar,
                || 1,
            ));
            Val::Bool(match op {
                TextOp::StartsWith => a.starts_with(b),
                TextOp::EndsWith => a.ends_with(b),
                TextOp::Contains => a.contains(b),
            })
        }
        Node::Tick(step, cost) => {
            let v = evaluate(step, f)?;
            f.charge(*cost);
            v
        }
        Node::Comprehension(c) => {
            let accu = evaluate(&c.init, f)?;
            // Only lists: a map's keys come in cel's hash order, which decides where the loop
            // stops and so its cost.
            let Val::Json(serde_json::Value::Array(items)) = evaluate(&c.range, f)? else {
                return Err(Unsupported);
            };
            let depth = f.scope.len();
            if depth != c.accu {
                return Err(Unsupported);
            }
            f.scope.push(Some(accu));
            f.scope.push(None);
            let result = (|| {
                for item in items {
                    if !evaluate(&c.cond, f)?.bool()? {
                        break;
                    }
                    f.scope[c.iter] = Some(Val::json(item)?);
                    let next = evaluate(&c.step, f)?;
                    f.scope[c.accu] = Some(next);
                }
                evaluate(&c.result, f)
            })();
            f.scope.truncate(depth);
            result?
        }
    })
}

/// What the cost rules need of a JSON value: a string's sizes, an array's or an object's entries.
pub(super) fn json_cost_arg(v: &serde_json::Value) -> Arg {
    match v {
        serde_json::Value::String(s) => Arg::str(s),
        serde_json::Value::Array(items) => Arg::Sized(items.len() as u64),
        serde_json::Value::Object(m) => Arg::Sized(m.len() as u64),
        _ => Arg::Scalar,
    }
}

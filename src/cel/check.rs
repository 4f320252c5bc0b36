//! A partial static check standing in for cel-go's type checker: declared variables and
//! functions, the fields of the typed `request` and `namespaceObject` variables, the operators'
//! overloads, field selection and comprehension ranges where the operands' types are known, and
//! the expression's output type where it can be known.

use kube_cel::cel;

use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use cel::parser::Expression;

/// A static type. `Unknown` is what this checker cannot infer; it is accepted where cel-go
/// might or might not be, so that no valid expression is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Timestamp,
    List(Box<Ty>),
    Map(Box<Ty>),
    Dyn,
    Object(&'static str),
    /// A nested `Object.<field path>` literal's type (MutatingAdmissionPolicy).
    Struct(std::sync::Arc<str>),
    /// The `variables` of a policy: each declared name with its type.
    Record(std::sync::Arc<Vec<(String, Ty)>>),
    Unknown,
}

impl Ty {
    /// cel-go's rendering of the type.
    pub(crate) fn name(&self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(v) => format!("map(string, {})", v.name()),
            Ty::Dyn | Ty::Unknown => "dyn".into(),
            Ty::Object(n) => (*n).into(),
            Ty::Struct(n) => n.to_string(),
            Ty::Record(_) => "kubernetes.variables".into(),
        }
    }
}

/// A check failure: message and the identifier or field to point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    pub(crate) message: String,
    pub(crate) token: String,
}

/// A scope entry that declares the mutation types (`Object{…}`, `JSONPatch{…}`).
pub(crate) const PATCH_TYPES: &str = "@patch-types";

const REQUEST: &str = "kubernetes.AdmissionRequest";
const NAMESPACE: &str = "kubernetes.Namespace";
const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
const DECISION: &str = "kubernetes.authorization.Decision";

fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}

fn map(t: Ty) -> Ty {
    Ty::Map(Box::new(t))
}

/// Fields of the object types `compile.go` declares (`BuildRequestType`, `BuildNamespaceType`).
fn field_type(object: &str, field: &str) -> Option<Ty> {
    use Ty::*;
    let t = match (object, field) {
        (REQUEST, "kind" | "requestKind") => Object("kubernetes.GroupVersionKind"),
        (REQUEST, "resource" | "requestResource") => Object("kubernetes.GroupVersionResource"),
        (REQUEST, "subResource" | "requestSubResource" | "name" | "namespace" | "operation") => {
            String
        }
        (REQUEST, "userInfo") => Object("kubernetes.UserInfo"),
        (REQUEST, "dryRun") => Bool,
        (REQUEST, "options") => Dyn,
        ("kubernetes.GroupVersionKind", "group" | "version" | "kind") => String,
        ("kubernetes.GroupVersionResource", "group" | "version" | "resource") => String,
        ("kubernetes.UserInfo", "username" | "uid") => String,
        ("kubernetes.UserInfo", "groups") => list(String),
        ("kubernetes.UserInfo", "extra") => map(list(String)),
        (NAMESPACE, "metadata") => Object("kubernetes.NamespaceMetadata"),
        (NAMESPACE, "spec") => Object("kubernetes.NamespaceSpec"),
        (NAMESPACE, "status") => Object("kubernetes.NamespaceStatus"),
        ("kubernetes.NamespaceSpec", "finalizers") => list(String),
        ("kubernetes.NamespaceStatus", "conditions") => {
            list(Object("kubernetes.NamespaceCondition"))
        }
        ("kubernetes.NamespaceStatus", "phase") => String,
        ("kubernetes.NamespaceCondition", "status" | "type" | "message" | "reason") => String,
        ("kubernetes.NamespaceCondition", "lastTransitionTime") => Timestamp,
        (
            "kubernetes.NamespaceMetadata",
            "name" | "generateName" | "namespace" | "UID" | "resourceVersion",
        ) => String,
        ("kubernetes.NamespaceMetadata", "labels" | "annotations") => map(String),
        ("kubernetes.NamespaceMetadata", "creationTimestamp" | "deletionTimestamp") => Timestamp,
        ("kubernetes.NamespaceMetadata", "deletionGracePeriodSeconds" | "generation") => Int,
        ("kubernetes.NamespaceMetadata", "finalizers") => list(String),
        (AUTHORIZER, "requestResource") => Object(RESOURCE_CHECK),
        _ => return None,
    };
    Some(t)
}

/// Variables of the webhook matchConditions environment (no `params`, no `variables`).
fn variable_type(name: &str) -> Option<Ty> {
    match name {
        "object" | "oldObject" => Some(Ty::Dyn),
        "request" => Some(Ty::Object(REQUEST)),
        "namespaceObject" => Some(Ty::Object(NAMESPACE)),
        "authorizer" => Some(Ty::Object(AUTHORIZER)),
        _ => None,
    }
}

/// Result types of the functions available at run time; `Unknown` where it depends on the
/// arguments. A name absent here is not callable.
fn function_type(name: &str, target: Option<&Ty>) -> Option<Ty> {
    use Ty::*;
    let t = match name {
        "contains"
        | "startsWith"
        | "endsWith"
        | "matches"
        | "isSorted"
        | "isQuantity"
        | "isGreaterThan"
        | "isLessThan"
        | "isURL"
        | "isIP"
        | "isCIDR"
        | "isSemver"
        | "sets.contains"
        | "sets.equivalent"
        | "sets.intersects"
        | "containsIP"
        | "containsCIDR"
        | "isLoopback"
        | "isUnspecified"
        | "isGlobalUnicast"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "ip.isCanonical"
        | "isInteger"
        | "math.isNaN"
        | "math.isInf"
        | "math.isFinite"
        | "hasValue"
        | "allowed"
        | "errored" => Bool,
        "size" | "int" | "indexOf" | "lastIndexOf" | "compareTo" | "asInteger" | "major"
        | "minor" | "patch" | "prefixLength" | "family" | "math.bitAnd" | "math.bitOr"
        | "math.bitXor" | "math.bitNot" | "math.bitShiftLeft" | "math.bitShiftRight"
        | "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => Int,
        "uint" => Uint,
        "double" | "asApproximateFloat" | "math.sqrt" | "math.ceil" | "math.floor"
        | "math.round" | "math.trunc" => Double,
        "string"
        | "lowerAscii"
        | "upperAscii"
        | "trim"
        | "replace"
        | "substring"
        | "charAt"
        | "join"
        | "reason"
        | "error"
        | "format"
        | "strings.quote"
        | "getScheme"
        | "getHost"
        | "getHostname"
        | "getPort"
        | "getEscapedPath"
        | "find"
        | "jsonpatch.escapeKey" => String,
        "bytes" => Bytes,
        "timestamp" => Timestamp,
        "split" | "findAll" => list(String),
        "lists.range" => list(Int),
        "getQuery" => map(list(String)),
        "dyn" => Dyn,
        "check" => Object(DECISION),
        "path" if target == Some(&Object(AUTHORIZER)) => Object(PATH_CHECK),
        "group" if target == Some(&Object(AUTHORIZER)) => Object(GROUP_CHECK),
        "serviceAccount" if target == Some(&Object(AUTHORIZER)) => Object(AUTHORIZER),
        "resource" | "subresource" | "namespace" | "name"
            if matches!(target, Some(Object(GROUP_CHECK | RESOURCE_CHECK))) =>
        {
            Object(RESOURCE_CHECK)
        }
        "path"
        | "group"
        | "serviceAccount"
        | "resource"
        | "subresource"
        | "namespace"
        | "name"
        | "max"
        | "min"
        | "duration"
        | "optional.none"
        | "optional.of"
        | "optional.ofNonZeroValue"
        | "value"
        | "or"
        | "orValue"
        | "add"
        | "sub"
        | "sign"
        | "cidr"
        | "distinct"
        | "first"
        | "last"
        | "flatten"
        | "format.byte"
        | "format.date"
        | "format.datetime"
        | "format.labelValue"
        | "format.named"
        | "format.qualifiedName"
        | "format.uri"
        | "format.uuid"
        | "ip"
        | "masked"
        | "math.abs"
        | "math.greatest"
        | "math.least"
        | "quantity"
        | "reverse"
        | "semver"
        | "slice"
        | "sort"
        | "sum"
        | "url"
        | "validate" => Unknown,
        _ => return None,
    };
    Some(t)
}

/// Names with a dot are namespaced functions (`sets.contains(...)`), parsed as member calls
/// on an identifier.
pub(crate) fn is_namespace(prefix: &str, func: &str) -> bool {
    function_type(&format!("{prefix}.{func}"), None).is_some()
}

fn unify(a: Ty, b: Ty) -> Ty {
    match (a, b) {
        (a, b) if a == b => a,
        (Ty::Unknown, other) | (other, Ty::Unknown) => other,
        (Ty::List(a), Ty::List(b)) => list(unify(*a, *b)),
        (Ty::Map(a), Ty::Map(b)) => map(unify(*a, *b)),
        _ => Ty::Dyn,
    }
}

fn undeclared(name: &str) -> Issue {
    Issue {
        message: format!("undeclared reference to '{name}' (in container '')"),
        token: name.to_string(),
    }
}

/// Infers the type of `expr`, with `scope` holding comprehension variables.
pub(crate) fn infer(expr: &Expression, scope: &mut Vec<(String, Ty)>) -> Result<Ty, Issue> {
    match &expr.expr {
        Expr::Literal(l) => Ok(match l {
            LiteralValue::Boolean(_) => Ty::Bool,
            LiteralValue::Bytes(_) => Ty::Bytes,
            LiteralValue::Double(_) => Ty::Double,
            LiteralValue::Int(_) => Ty::Int,
            LiteralValue::Null => Ty::Null,
            LiteralValue::String(_) => Ty::String,
            LiteralValue::UInt(_) => Ty::Uint,
        }),
        Expr::Ident(name) => scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .or_else(|| variable_type(name))
            .ok_or_else(|| undeclared(name)),
        Expr::Select(sel) => {
            let operand = infer(&sel.operand, scope)?;
            let field_ty = match &operand {
                Ty::Object("Object") | Ty::Struct(_) => Ty::Dyn,
                Ty::Object("JSONPatch") => match sel.field.as_str() {
                    "op" | "path" | "from" => Ty::String,
                    "value" => Ty::Dyn,
                    _ => {
                        return Err(Issue {
                            message: format!("undefined field '{}'", sel.field),
                            token: format!(".{}", sel.field),
                        });
                    }
                },
                Ty::Object(o) => field_type(o, &sel.field).ok_or_else(|| Issue {
                    message: format!("undefined field '{}'", sel.field),
                    token: format!(".{}", sel.field),
                })?,
                Ty::Map(v) => (**v).clone(),
                Ty::Record(fields) => fields
                    .iter()
                    .find(|(n, _)| *n == sel.field)
                    .map(|(_, t)| t.clone())
                    .ok_or_else(|| Issue {
                        message: format!("undefined field '{}'", sel.field),
                        token: format!(".{}", sel.field),
                    })?,
                Ty::Dyn => Ty::Dyn,
                t if is_known(t) => {
                    return Err(Issue {
                        message: format!("type '{}' does not support field selection", t.name()),
                        token: format!(".{}", sel.field),
                    });
                }
                _ => Ty::Unknown,
            };
            Ok(if sel.test { Ty::Bool } else { field_ty })
        }
        Expr::List(l) => {
            let mut elem: Option<Ty> = None;
            for e in &l.elements {
                let t = infer(e, scope)?;
                elem = Some(match elem {
                    None => t,
                    Some(prev) => unify(prev, t),
                });
            }
            Ok(list(elem.unwrap_or(Ty::Unknown)))
        }
        Expr::Map(m) => {
            let mut value: Option<Ty> = None;
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        infer(&e.key, scope)?;
                        let t = infer(&e.value, scope)?;
                        value = Some(match value {
                            None => t,
                            Some(prev) => unify(prev, t),
                        });
                    }
                    EntryExpr::StructField(f) => {
                        return Err(undeclared(&f.field));
                    }
                }
            }
            Ok(map(value.unwrap_or(Ty::Unknown)))
        }
        Expr::Struct(s) => {
            let declared = scope.iter().any(|(n, _)| n == PATCH_TYPES);
            let name = s.type_name.as_str();
            if !declared || !super::patch::is_patch_type(name) {
                return Err(undeclared(name));
            }
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    if name == "JSONPatch"
                        && !["op", "path", "from", "value"].contains(&f.field.as_str())
                    {
                        return Err(Issue {
                            message: format!("undefined field '{}'", f.field),
                            token: f.field.clone(),
                        });
                    }
                    let ty = infer(&f.value, scope)?;
                    if name == "JSONPatch"
                        && f.field != "value"
                        && !matches!(ty, Ty::String | Ty::Dyn | Ty::Unknown)
                    {
                        return Err(Issue {
                            message: format!(
                                "expected type of field '{}' is 'string' but provided type is '{}'",
                                f.field,
                                ty.name()
                            ),
                            token: f.field.clone(),
                        });
                    }
                }
            }
            Ok(match name {
                "JSONPatch" => Ty::Object("JSONPatch"),
                "Object" => Ty::Object("Object"),
                _ => Ty::Struct(name.into()),
            })
        }
        Expr::Comprehension(c) => {
            let range = infer(&c.iter_range, scope)?;
            let accu = infer(&c.accu_init, scope)?;
            let item = match &range {
                Ty::List(e) => (**e).clone(),
                Ty::Map(_) => Ty::String,
                Ty::Dyn => Ty::Dyn,
                t if is_known(t) => {
                    return Err(Issue {
                        message: format!(
                            "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                            t.name()
                        ),
                        token: String::new(),
                    });
                }
                _ => Ty::Unknown,
            };
            let depth = scope.len();
            scope.push((c.accu_var.clone(), accu.clone()));
            scope.push((c.iter_var.clone(), item));
            if let Some(v2) = &c.iter_var2 {
                scope.push((v2.clone(), Ty::Unknown));
            }
            let checked = (|| {
                infer(&c.loop_cond, scope)?;
                let step = infer(&c.loop_step, scope)?;
                scope.push((c.accu_var.clone(), unify(accu, step)));
                infer(&c.result, scope)
            })();
            scope.truncate(depth);
            checked
        }
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            let target = match call.target.as_deref() {
                Some(t) => match &t.expr {
                    Expr::Ident(prefix)
                        if is_namespace(prefix, name)
                            && !scope.iter().any(|(n, _)| n == prefix) =>
                    {
                        for a in &call.args {
                            infer(a, scope)?;
                        }
                        return function_type(&format!("{prefix}.{name}"), None)
                            .ok_or_else(|| undeclared(name));
                    }
                    _ => Some(infer(t, scope)?),
                },
                None => None,
            };
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                args.push(infer(a, scope)?);
            }
            if call.target.is_none()
                && let Some(issue) = operator_issue(name, &args)
            {
                return Err(issue);
            }
            match name {
                operators::LOGICAL_AND
                | operators::LOGICAL_OR
                | operators::LOGICAL_NOT
                | operators::EQUALS
                | operators::NOT_EQUALS
                | operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS
                | operators::IN
                | operators::NOT_STRICTLY_FALSE => Ok(Ty::Bool),
                operators::CONDITIONAL => {
                    let mut it = args.into_iter().skip(1);
                    match (it.next(), it.next()) {
                        (Some(a), Some(b)) => Ok(unify(a, b)),
                        _ => Ok(Ty::Unknown),
                    }
                }
                // A timestamp's difference is a duration, which this checker does not type.
                operators::SUBSTRACT
                    if args.iter().all(|t| t == &Ty::Timestamp) && args.len() == 2 =>
                {
                    Ok(Ty::Unknown)
                }
                operators::ADD
                | operators::SUBSTRACT
                | operators::MULTIPLY
                | operators::DIVIDE
                | operators::MODULO
                | operators::NEGATE => Ok(args
                    .into_iter()
                    .filter(|t| !matches!(t, Ty::Dyn | Ty::Unknown))
                    .reduce(unify)
                    .unwrap_or(Ty::Dyn)),
                operators::INDEX => Ok(match args.first() {
                    Some(Ty::List(e) | Ty::Map(e)) => (**e).clone(),
                    Some(Ty::Dyn) => Ty::Dyn,
                    _ => Ty::Unknown,
                }),
                operators::OPT_INDEX | operators::OPT_SELECT => Ok(Ty::Unknown),
                _ => function_type(name, target.as_ref()).ok_or_else(|| undeclared(name)),
            }
        }
        Expr::Unspecified => Err(Issue {
            message: "unexpected empty expression".into(),
            token: String::new(),
        }),
    }
}

/// A type this checker knows for certain and that is neither a map, an object nor dynamic: the
/// operands whose operators, field selection and comprehension use cel-go checks.
fn is_known(t: &Ty) -> bool {
    matches!(
        t,
        Ty::Bool
            | Ty::Int
            | Ty::Uint
            | Ty::Double
            | Ty::String
            | Ty::Bytes
            | Ty::Null
            | Ty::Timestamp
            | Ty::List(_)
    )
}

/// cel-go's standard overloads of the operators (with the cross-type numeric comparisons
/// Kubernetes enables from 1.28), for operands whose types are all known (maps included): the
/// error its checker reports when none applies, at the operator.
fn operator_issue(name: &str, args: &[Ty]) -> Option<Issue> {
    use Ty::*;
    if !args.iter().all(|t| is_known(t) || matches!(t, Map(_))) {
        return None;
    }
    let numeric = |t: &Ty| matches!(t, Int | Uint | Double);
    let (symbol, ok) = match (name, args) {
        (operators::ADD, [a, b]) => (
            "+",
            matches!(
                (a, b),
                (Int, Int)
                    | (Uint, Uint)
                    | (Double, Double)
                    | (String, String)
                    | (Bytes, Bytes)
                    | (List(_), List(_))
            ),
        ),
        (operators::SUBSTRACT, [a, b]) => (
            "-",
            matches!(
                (a, b),
                (Int, Int) | (Uint, Uint) | (Double, Double) | (Timestamp, Timestamp)
            ),
        ),
        (operators::MULTIPLY | operators::DIVIDE, [a, b]) => (
            if name == operators::MULTIPLY {
                "*"
            } else {
                "/"
            },
            matches!((a, b), (Int, Int) | (Uint, Uint) | (Double, Double)),
        ),
        (operators::MODULO, [a, b]) => ("%", matches!((a, b), (Int, Int) | (Uint, Uint))),
        (operators::NEGATE, [a]) => ("-", matches!(a, Int | Double)),
        (operators::LOGICAL_NOT, [a]) => ("!", matches!(a, Bool)),
        (operators::LOGICAL_AND | operators::LOGICAL_OR, [a, b]) => (
            if name == operators::LOGICAL_AND {
                "&&"
            } else {
                "||"
            },
            matches!((a, b), (Bool, Bool)),
        ),
        (
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS,
            [a, b],
        ) => (
            match name {
                operators::LESS => "<",
                operators::LESS_EQUALS => "<=",
                operators::GREATER => ">",
                _ => ">=",
            },
            (numeric(a) && numeric(b))
                || (a == b && matches!(a, Bool | String | Bytes | Timestamp)),
        ),
        _ => return None,
    };
    let types: Vec<std::string::String> = args.iter().map(Ty::name).collect();
    (!ok).then(|| Issue {
        message: format!(
            "found no matching overload for '{name}' applied to '({})'",
            types.join(", ")
        ),
        token: symbol.to_string(),
    })
}

/// Depth of the expression tree, without recursion (so any parsed tree is safe to measure).
pub(crate) fn depth(expr: &Expression) -> usize {
    let mut max = 0;
    let mut stack = vec![(expr, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        for child in children(e) {
            stack.push((child, d + 1));
        }
    }
    max
}

/// Number of nodes, an approximation of cel-go's per-node evaluation cost.
pub(crate) fn node_count(expr: &Expression) -> u64 {
    let mut n = 0u64;
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        n += 1;
        stack.extend(children(e));
    }
    n
}

pub(crate) fn children(e: &Expression) -> Vec<&Expression> {
    match &e.expr {
        Expr::Call(c) => c
            .target
            .as_deref()
            .into_iter()
            .chain(c.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

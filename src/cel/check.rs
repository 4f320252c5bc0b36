//! A partial static check standing in for cel-go's type checker: declared variables and
//! functions, the fields of the typed `request` and `namespaceObject` variables (and of
//! `object`/`oldObject`/`params` typed from a schema, for `status.typeChecking`), the operators'
//! overloads (`_==_`, `_!=_` and `@in` included), those of the standard and Kubernetes library
//! functions and methods it declares as data, field selection and comprehension ranges where the
//! operands' types are known, and the expression's output type where it can be known; then,
//! when the checker found nothing, the AST validators of Kubernetes' environment (homogeneous
//! aggregate literals, `duration`/`timestamp`/`matches` literal arguments).

use kube_cel::cel;

use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};
use cel::parser::Expression;

use crate::schema::{self, Schema, TypeId};

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
    /// A map's key and value types.
    Map(Box<Ty>, Box<Ty>),
    Dyn,
    Object(&'static str),
    /// A nested `Object.<field path>` literal's type (MutatingAdmissionPolicy).
    Struct(std::sync::Arc<str>),
    /// The `variables` of a policy: each declared name with its type.
    Record(std::sync::Arc<Vec<(String, Ty)>>),
    /// An object typed by its kind's schema (the ValidatingAdmissionPolicy type checker's
    /// `object`, `oldObject` and `params`).
    Typed(Typed),
    /// The element type of an empty list or map literal: cel-go's free type variable, bound by
    /// the first type it is joined with (`dyn` when nothing binds it).
    Free,
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
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Dyn | Ty::Unknown | Ty::Free => "dyn".into(),
            Ty::Object(n) => (*n).into(),
            Ty::Struct(n) => n.to_string(),
            Ty::Record(_) => "kubernetes.variables".into(),
            Ty::Typed(t) => t.schema.get(t.id).name.to_string(),
        }
    }

    /// cel-go's `FormatCELType`, the rendering in its checker's and validators' messages
    /// (`null`, `timestamp`, where the declared type's name is `null_type`,
    /// `google.protobuf.Timestamp`).
    pub(crate) fn display(&self) -> String {
        match self {
            Ty::Null => "null".into(),
            Ty::Timestamp => "timestamp".into(),
            Ty::List(e) => format!("list({})", e.display()),
            Ty::Map(k, v) => format!("map({}, {})", k.display(), v.display()),
            t => t.name(),
        }
    }
}

/// A struct type of a release's schema.
#[derive(Clone, Copy)]
pub(crate) struct Typed {
    pub(crate) schema: &'static Schema,
    pub(crate) id: TypeId,
}

impl PartialEq for Typed {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.schema, other.schema) && self.id == other.id
    }
}

impl Eq for Typed {}

impl std::fmt::Debug for Typed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.schema.get(self.id).name)
    }
}

impl Typed {
    /// The CEL type of the field CEL names `field`: the schema's property of that name
    /// escaped as `apiservercel.Escape` does (`__namespace__` for `namespace`, `__dash__` for
    /// `-`), as `SchemaDeclType` declares it.
    fn field(&self, field: &str) -> Option<Ty> {
        let s = self.schema.get(self.id);
        s.fields
            .iter()
            .find(|f| escape(&f.name).as_deref() == Some(field))
            .map(|f| self.of(&f.ty))
    }

    fn of(&self, ty: &schema::Type) -> Ty {
        use schema::Type as S;
        match ty {
            S::String => Ty::String,
            S::Bool => Ty::Bool,
            S::Int(_) => Ty::Int,
            S::Float => Ty::Double,
            S::Bytes => Ty::Bytes,
            S::Time | S::MicroTime => Ty::Timestamp,
            // x-kubernetes-int-or-string is dyn; a quantity's and a raw value's schemas are
            // taken as dyn too (no field of theirs is refused).
            S::IntOrString | S::Quantity | S::Raw | S::Any => Ty::Dyn,
            S::Ptr(t) => self.of(t),
            S::List(t) => list(self.of(t)),
            S::Map(t) => map(self.of(t)),
            S::Struct(id) => Ty::Typed(Typed {
                schema: self.schema,
                id: *id,
            }),
        }
    }
}

/// CEL's reserved words (`celReservedSymbols`): not identifiers, and a schema property of
/// such a name is renamed `__<name>__` (`apiservercel.Escape`).
pub const RESERVED_WORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL name of a schema property, or None when it has none (`apiservercel.Escape`).
fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED_WORDS.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// A check failure: message, the node cel-go reports it at (its source position is looked up
/// when the issue is rendered) and, where the node is not known, the identifier or field to
/// point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    pub(crate) message: String,
    pub(crate) token: String,
    pub(crate) at: Option<Node>,
}

/// A node of the parsed expression an issue is reported at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) id: u64,
    /// A negative number literal: the parser records the position of its digits, cel-go's
    /// that of its sign (`-`).
    pub(crate) signed: bool,
}

impl Node {
    fn of(e: &Expression) -> Node {
        let signed = match &e.expr {
            Expr::Literal(LiteralValue::Int(i)) => *i.inner() < 0,
            Expr::Literal(LiteralValue::Double(d)) => d.inner().is_sign_negative(),
            _ => false,
        };
        Node { id: e.id, signed }
    }
}

impl Issue {
    fn new(message: String, token: impl Into<String>) -> Issue {
        Issue {
            message,
            token: token.into(),
            at: None,
        }
    }

    fn at(message: String, node: &Expression) -> Issue {
        Issue {
            message,
            token: String::new(),
            at: Some(Node::of(node)),
        }
    }
}

/// What a check found besides the error that stops it: the checker's errors after which cel-go
/// goes on (no matching overload), and the errors of the AST validators that run when the
/// checker found none (homogeneous aggregate literals).
#[derive(Debug, Default)]
pub(crate) struct Found {
    checker: Vec<Issue>,
    validator: Vec<Issue>,
    /// Whether cel-go's AST validators run (expressions created on 1.30 and later): the
    /// literal validators, and the homogeneity validator in place of the type checker's older
    /// check of aggregate literals.
    literal_validators: bool,
    /// The release (minor) whose CEL environment declares the functions: a library function
    /// that release lacks is an undeclared reference.
    libraries: u32,
    /// Depth of `format` calls around the node: literals inside them are exempt from the
    /// homogeneity check (`ext.Strings`' format validator configures the exemption).
    exempt: usize,
}

/// A scope entry that declares the mutation types (`Object{…}`, `JSONPatch{…}`).
pub(crate) const PATCH_TYPES: &str = "@patch-types";

const REQUEST: &str = "kubernetes.AdmissionRequest";
/// The type of a type value (`type(x)`, `int`, `net.IP`).
pub(crate) const TYPE: &str = "type";

/// The type denotations an identifier can name (cel-go's standard types).
pub(crate) const TYPE_NAMES: [&str; 10] = [
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];
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
    Ty::Map(Box::new(Ty::String), Box::new(t))
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
        "ip" => Object(IP),
        "cidr" => Object(CIDR),
        "quantity" => Object(QUANTITY),
        "url" => Object(URL),
        "timestamp" => Timestamp,
        "split" | "findAll" => list(String),
        "lists.range" => list(Int),
        "getQuery" => map(list(String)),
        "dyn" => Dyn,
        "type" => Object(TYPE),
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
        | "distinct"
        | "first"
        | "last"
        | "flatten"
        | "format.byte"
        | "format.dns1035Label"
        | "format.dns1035LabelPrefix"
        | "format.dns1123Label"
        | "format.dns1123LabelPrefix"
        | "format.dns1123Subdomain"
        | "format.dns1123SubdomainPrefix"
        | "format.date"
        | "format.datetime"
        | "format.labelValue"
        | "format.named"
        | "format.qualifiedName"
        | "format.uri"
        | "format.uuid"
        | "masked"
        | "math.abs"
        | "math.greatest"
        | "math.least"
        | "reverse"
        | "semver"
        | "slice"
        | "sort"
        | "sum"
        | "validate" => Unknown,
        _ => return None,
    };
    Some(t)
}

/// A release no modelled release reaches: the function is in no Kubernetes CEL environment.
const NEVER: u32 = u32::MAX;

/// The release (minor) whose CEL environment first declares the function `name`, as
/// `k8s.io/apiserver/pkg/cel/environment/base.go` adds the libraries (0: every release).
/// Names several libraries declare (`compareTo`, `isLessThan`, `indexOf`) count from the
/// first.
pub(crate) fn introduced(name: &str) -> u32 {
    match name {
        // library.Quantity
        "quantity" | "isQuantity" | "sign" | "isInteger" | "asInteger" | "asApproximateFloat"
        | "add" | "sub" | "compareTo" | "isGreaterThan" | "isLessThan" => 28,
        // ext.Strings version 2 (version 0 before), ext.Sets
        "format" | "strings.quote" | "join" | "sets.contains" | "sets.equivalent"
        | "sets.intersects" => 29,
        // library.IP, library.CIDR
        "ip"
        | "isIP"
        | "ip.isCanonical"
        | "family"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
        | "cidr"
        | "isCIDR"
        | "containsIP"
        | "containsCIDR"
        | "masked"
        | "prefixLength" => 30,
        // library.Format
        "validate" => 31,
        n if n.starts_with("format.") => 31,
        // library.SemverLib version 1
        "semver" | "isSemver" | "major" | "minor" | "patch" => 33,
        // ext.Lists version 3
        "distinct" | "first" | "last" | "flatten" | "slice" | "sort" | "reverse"
        | "lists.range" => 34,
        // ext.Math is in no release's environment.
        n if n.starts_with("math.") => NEVER,
        _ => 0,
    }
}

/// The Kubernetes library functions that parse a string (global overloads only), with their
/// overloads' parameters: cel-go's checker error when the arguments' types are known and no
/// overload takes them.
fn library_argument_issue(name: &str, args: &[Ty]) -> Option<Issue> {
    const STRING: &[Ty] = &[Ty::String];
    const STRING_BOOL: &[Ty] = &[Ty::String, Ty::Bool];
    let overloads: &[&[Ty]] = match name {
        "isSemver" | "semver" => &[STRING, STRING_BOOL],
        "isQuantity" | "quantity" | "isIP" | "ip" | "isCIDR" | "cidr" | "isURL" | "url" => {
            &[STRING]
        }
        _ => return None,
    };
    let definite = |t: &Ty| is_known(t) || matches!(t, Ty::Map(..) | Ty::Object(_));
    let fits = |params: &&[Ty]| {
        params.len() == args.len() && params.iter().zip(args).all(|(p, a)| !definite(a) || p == a)
    };
    if overloads.iter().any(fits) {
        return None;
    }
    let types: Vec<std::string::String> = args.iter().map(Ty::display).collect();
    Some(Issue::new(
        format!(
            "found no matching overload for '{name}' applied to '({})'",
            types.join(", ")
        ),
        name,
    ))
}

/// cel-go's `stringFormatValidator` (`ext/formatting.go`) for a `format` call on a string
/// literal with a list literal: the clauses parsed as the formatter parses them, each argument's
/// type against its clause's, and no more arguments than clauses. Types this checker does not
/// know, and the element types of nested lists and maps, are accepted.
fn format_issue(call: &Expression, text: &str, args: &[(&Expression, Ty)]) -> Option<Issue> {
    let at_call = |message: String| Some(Issue::at(message, call));
    let b = text.as_bytes();
    let (mut i, mut requested) = (0usize, 0usize);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        let index = requested;
        requested += 1;
        if i + 1 >= b.len() {
            return at_call("unexpected end of string".into());
        }
        if index >= args.len() {
            return at_call(format!("index {index} out of range"));
        }
        let clause = |e: &str| at_call(format!("could not parse formatting clause: {e}"));
        let mut j = i + 1;
        if b[j] == b'.' {
            j += 1;
            let start = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            if j >= b.len() {
                return clause(
                    "error while parsing precision: could not find end of precision specifier",
                );
            }
            if j == start {
                return clause(
                    "error while parsing precision: error while converting precision to integer: strconv.Atoi: parsing \"\": invalid syntax",
                );
            }
        }
        let verb = b[j];
        let (allowed, what): (&[&str], &str) = match verb {
            b's' => (
                &[
                    "list",
                    "map",
                    "int",
                    "uint",
                    "double",
                    "bool",
                    "string",
                    "google.protobuf.Timestamp",
                    "bytes",
                    "google.protobuf.Duration",
                    "type",
                    "null_type",
                ],
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps",
            ),
            b'd' => (
                &["int", "uint"],
                "decimal clause can only be used on integers",
            ),
            b'f' => (
                &["double", "string"],
                "fixed-point clause can only be used on doubles",
            ),
            b'e' => (
                &["double", "string"],
                "scientific clause can only be used on doubles",
            ),
            b'b' => (
                &["int", "uint", "bool"],
                "only integers and bools can be formatted as binary",
            ),
            b'x' | b'X' => (
                &["int", "uint", "string", "bytes"],
                "only integers, byte buffers, and strings can be formatted as hex",
            ),
            b'o' => (
                &["int", "uint"],
                "octal clause can only be used on integers",
            ),
            other => {
                return clause(&format!(
                    "unrecognized formatting clause \"{}\"",
                    char::from(other)
                ));
            }
        };
        let (arg, ty) = &args[index];
        let kind = match ty {
            Ty::List(_) => Some("list"),
            Ty::Map(..) => Some("map"),
            Ty::Bool => Some("bool"),
            Ty::Int => Some("int"),
            Ty::Uint => Some("uint"),
            Ty::Double => Some("double"),
            Ty::String => Some("string"),
            Ty::Bytes => Some("bytes"),
            Ty::Null => Some("null_type"),
            Ty::Timestamp => Some("google.protobuf.Timestamp"),
            _ => None,
        };
        if let Some(kind) = kind
            && !allowed.contains(&kind)
        {
            return Some(Issue::at(
                format!("error during formatting: {what}, was given {kind}"),
                arg,
            ));
        }
        i = j + 1;
    }
    (args.len() > requested).then(|| Issue {
        message: format!(
            "too many arguments supplied to string.format (expected {requested}, got {})",
            args.len()
        ),
        token: String::new(),
        at: Some(Node::of(call)),
    })
}

/// `net.IP` or `net.CIDR`, the types of the IP and CIDR libraries (from 1.30).
pub(crate) fn is_net_type(sel: &cel::common::ast::SelectExpr, libraries: u32) -> bool {
    !sel.test
        && matches!(sel.field.as_str(), "IP" | "CIDR")
        && matches!(&sel.operand.expr, Expr::Ident(n) if n == "net")
        && declared_in("ip", libraries)
}

/// The release whose environment first has cel-go's two-variable comprehensions
/// (`ext.TwoVarComprehensions`).
pub(crate) const TWO_VARIABLE_COMPREHENSIONS: u32 = 32;

/// cel-go's two-variable comprehension macros, by name and argument count, when `call` is one:
/// a member call whose first two arguments are the iteration variables.
pub(crate) fn two_variable_macro(call: &cel::common::ast::CallExpr) -> Option<&'static str> {
    let name = match (call.func_name.as_str(), call.args.len()) {
        ("all", 3) => "all",
        ("exists", 3) => "exists",
        ("existsOne", 3) => "existsOne",
        ("transformList", 3 | 4) => "transformList",
        ("transformMap", 3 | 4) => "transformMap",
        ("transformMapEntry", 3 | 4) => "transformMapEntry",
        _ => return None,
    };
    let ident = |e: &Expression| matches!(e.expr, Expr::Ident(_));
    (call.target.is_some() && ident(&call.args[0]) && ident(&call.args[1])).then_some(name)
}

/// cel-go's error for a comprehension over a value of type `t`.
fn not_a_range(t: &Ty) -> Issue {
    Issue::new(
        format!(
            "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
            t.name()
        ),
        "",
    )
}

/// The type of a two-variable comprehension: its range a list (index and element) or a map
/// (key and value) or `dyn`, its predicate, filter and transform checked with both variables.
fn infer_two_variable(
    macro_name: &str,
    call: &cel::common::ast::CallExpr,
    scope: &mut Vec<(String, Ty)>,
    found: &mut Found,
) -> Result<Ty, Issue> {
    let var = |e: &Expression| match &e.expr {
        Expr::Ident(n) => n.clone(),
        _ => String::new(),
    };
    let (first, second) = (var(&call.args[0]), var(&call.args[1]));
    if first == second {
        return Err(Issue::at(
            format!("duplicate variable name: {first}"),
            &call.args[1],
        ));
    }
    let range = match call.target.as_deref() {
        Some(t) => infer(t, scope, found)?,
        None => Ty::Unknown,
    };
    let (key, value) = match &range {
        Ty::List(e) => (Ty::Int, bound(e)),
        Ty::Map(k, v) => (bound(k), bound(v)),
        Ty::Dyn => (Ty::Dyn, Ty::Dyn),
        t if is_known(t) => {
            return Err(not_a_range(t));
        }
        _ => (Ty::Unknown, Ty::Unknown),
    };
    let depth = scope.len();
    scope.push((first, key.clone()));
    scope.push((second, value));
    let checked = (|| {
        let mut last = Ty::Unknown;
        for a in &call.args[2..] {
            last = infer(a, scope, found)?;
        }
        Ok(last)
    })();
    scope.truncate(depth);
    let last = checked?;
    Ok(match macro_name {
        "transformList" => list(last),
        "transformMap" => Ty::Map(Box::new(key), Box::new(last)),
        // cel-go's `cel.@mapInsert(map, map)` gives `map(dyn, dyn)`.
        "transformMapEntry" => Ty::Map(Box::new(Ty::Dyn), Box::new(Ty::Dyn)),
        _ => Ty::Bool,
    })
}

/// Whether the environment of release `libraries` declares the function `name`.
fn declared_in(name: &str, libraries: u32) -> bool {
    introduced(name) <= libraries
}

/// Names with a dot are namespaced functions (`sets.contains(...)`), parsed as member calls
/// on an identifier.
pub(crate) fn is_namespace(prefix: &str, func: &str) -> bool {
    function_type(&format!("{prefix}.{func}"), None).is_some()
}

fn unify(a: Ty, b: Ty) -> Ty {
    match (a, b) {
        (a, b) if a == b => a,
        (Ty::Unknown | Ty::Free, other) | (other, Ty::Unknown | Ty::Free) => other,
        (Ty::List(a), Ty::List(b)) => list(unify(*a, *b)),
        (Ty::Map(ka, a), Ty::Map(kb, b)) => {
            Ty::Map(Box::new(unify(*ka, *kb)), Box::new(unify(*a, *b)))
        }
        _ => Ty::Dyn,
    }
}

/// How an aggregate literal's element type compares with the first element's, as cel-go's
/// homogeneity validator compares them (`IsEquivalentType`, after the checker bound the free
/// type variables of empty literals).
enum Likeness {
    /// Equivalent: the first element's type with its free variables bound.
    Same(Ty),
    Differ,
    /// A type this checker does not know takes part: no verdict.
    Unsure,
}

fn likeness(expected: &Ty, found: &Ty) -> Likeness {
    use Likeness::*;
    match (expected, found) {
        (Ty::Unknown, _) | (_, Ty::Unknown) => Unsure,
        (Ty::Free, t) | (t, Ty::Free) => Same(t.clone()),
        (Ty::List(a), Ty::List(b)) => match likeness(a, b) {
            Same(t) => Same(list(t)),
            other => other,
        },
        (Ty::Map(ka, va), Ty::Map(kb, vb)) => match (likeness(ka, kb), likeness(va, vb)) {
            (Differ, _) | (_, Differ) => Differ,
            (Same(k), Same(v)) => Same(Ty::Map(Box::new(k), Box::new(v))),
            _ => Unsure,
        },
        (Ty::Record(_), _) | (_, Ty::Record(_)) => Unsure,
        (a, b) if a == b => Same(a.clone()),
        _ => Differ,
    }
}

/// cel-go's `HomogeneousAggregateLiterals` validator over one list literal: the first element
/// whose type differs from the first one's is an error, and the list's check ends there.
fn homogeneous_list(elements: &[(&Expression, Ty)], found: &mut Found) {
    let mut expected: Option<Ty> = None;
    for (e, t) in elements {
        let Some(prev) = &expected else {
            if has_unknown(t) {
                return;
            }
            expected = Some(t.clone());
            continue;
        };
        match likeness(prev, t) {
            Likeness::Same(bound) => expected = Some(bound),
            Likeness::Unsure => {}
            Likeness::Differ => {
                found.validator.push(mismatch(prev, t, e));
                return;
            }
        }
    }
}

/// The check of aggregate literals in cel-go's type checker before the validator
/// (`HomogeneousAggregateLiterals` in cel-go 0.16 and 0.17, Kubernetes 1.28 and 1.29): each
/// element joined with the type so far, an element not assignable to it (dyn is) is a checker
/// error, after which the literal's type is the error type and nothing more is compared.
fn joined_literal<'a>(elements: impl Iterator<Item = (&'a Expression, &'a Ty)>, found: &mut Found) {
    let mut so_far: Option<Ty> = None;
    for (e, t) in elements {
        let Some(prev) = so_far.take() else {
            so_far = Some(t.clone());
            continue;
        };
        if has_unknown(&prev) || has_unknown(t) {
            return;
        }
        if !comparable(&prev, t) {
            found.checker.push(mismatch(&prev, t, e));
            return;
        }
        // cel-go's mostGeneral: dyn (or an unbound variable) over anything more specific.
        so_far = Some(match (&prev, t) {
            (Ty::Dyn | Ty::Free, _) => prev,
            (_, Ty::Dyn) => Ty::Dyn,
            _ => match likeness(&prev, t) {
                Likeness::Same(bound) => bound,
                _ => prev,
            },
        });
    }
}

/// The validator over one map literal: each entry's key and value against the first entry's.
fn homogeneous_map(entries: &[EntryTypes<'_>], found: &mut Found) {
    let Some((((_, key), (_, value)), rest)) = entries.split_first() else {
        return;
    };
    let (mut key, mut value) = (key.clone(), value.clone());
    for ((k, kt), (v, vt)) in rest {
        for (expected, (e, t)) in [(&mut key, (k, kt)), (&mut value, (v, vt))] {
            if has_unknown(expected) {
                continue;
            }
            match likeness(expected, t) {
                Likeness::Same(bound) => *expected = bound,
                Likeness::Unsure => {}
                Likeness::Differ => found.validator.push(mismatch(expected, t, e)),
            }
        }
    }
}

/// A map literal entry's key and value with their types.
type EntryTypes<'a> = ((&'a Expression, Ty), (&'a Expression, Ty));

fn has_unknown(t: &Ty) -> bool {
    match t {
        Ty::Unknown => true,
        Ty::List(e) => has_unknown(e),
        Ty::Map(k, v) => has_unknown(k) || has_unknown(v),
        _ => false,
    }
}

fn mismatch(expected: &Ty, found: &Ty, at: &Expression) -> Issue {
    Issue::at(
        format!(
            "expected type '{}' but found '{}'",
            expected.display(),
            found.display()
        ),
        at,
    )
}

/// Whether cel-go's checker finds `_==_(A, A)` for operands of types `a` and `b`: dyn on
/// either side, the same type, or null and a nullable type (objects, timestamps); lists and maps
/// element by element.
fn comparable(a: &Ty, b: &Ty) -> bool {
    use Ty::*;
    match (a, b) {
        (Dyn | Unknown | Free | Record(_), _) | (_, Dyn | Unknown | Free | Record(_)) => true,
        (Null, t) | (t, Null) => {
            matches!(t, Null | Object(_) | Struct(_) | Typed(_) | Timestamp)
        }
        (List(a), List(b)) => comparable(a, b),
        (Map(ka, va), Map(kb, vb)) => comparable(ka, kb) && comparable(va, vb),
        (a, b) => a == b,
    }
}

/// cel-go's literal validators, in the environment of new expressions from 1.30 (introduced
/// in 1.29's environment, which compiles new expressions with 1.28's options)
/// (`ValidateDurationLiterals`, `ValidateTimestampLiterals`, `ValidateRegexLiterals`): the
/// first argument of `duration`, `timestamp` and `matches`, when a literal, must convert (Go's
/// `time.ParseDuration`; RFC 3339 or Unix seconds within years 1 to 9999) or compile as a
/// regular expression. Other functions and values pass.
fn literal_argument_is_valid(function: &str, value: &LiteralValue) -> bool {
    const MIN_SECONDS: i64 = -62_135_596_800;
    const MAX_SECONDS: i64 = 253_402_300_799;
    match (function, value) {
        ("duration", LiteralValue::String(s)) => go_duration_is_valid(s.inner()),
        // The checker's `int` overload converts at run time with `Int`'s conversion, which
        // has no duration: the validator's evaluation of the literal always fails.
        ("duration", LiteralValue::Int(_)) => false,
        ("timestamp", LiteralValue::String(s)) => crate::schema::codec::parse_rfc3339(s.inner())
            .is_ok_and(|t| (MIN_SECONDS..=MAX_SECONDS).contains(&t.seconds)),
        ("timestamp", LiteralValue::Int(i)) => (MIN_SECONDS..=MAX_SECONDS).contains(i.inner()),
        ("matches", LiteralValue::String(s)) => {
            !stacked_repetition(s.inner()) && regex::Regex::new(s.inner()).is_ok()
        }
        _ => true,
    }
}

/// Whether Go's `time.ParseDuration` accepts `s`: an optional sign, then one or more decimal
/// numbers each with a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), or `0`; at most
/// 2^63-1 nanoseconds.
fn go_duration_is_valid(s: &str) -> bool {
    let rest = s.strip_prefix(['-', '+']).unwrap_or(s);
    if rest == "0" {
        return true;
    }
    if rest.is_empty() {
        return false;
    }
    let mut total: f64 = 0.0;
    let mut rest = rest;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number = &rest[..digits];
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return false;
        }
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let nanos_per_unit: f64 = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return false,
        };
        rest = &rest[unit_len..];
        let value: f64 = format!("0{whole}.{fraction}0")
            .parse()
            .unwrap_or(f64::INFINITY);
        total += value * nanos_per_unit;
    }
    total <= 9_223_372_036_854_775_807.0
}

/// cel-go's name of the type of `e` where it is an optional this checker recognises:
/// `optional.of(x)` and `optional.ofNonZeroValue(x)` of a known type, and a format's
/// `validate(…)` (`optional_type(list(string))`). `string()` has no overload for them.
fn optional_type(e: &Expression, scope: &mut Vec<(String, Ty)>, found: &Found) -> Option<String> {
    if let Some(value) = optional_value(e) {
        let mut scratch = Found {
            literal_validators: found.literal_validators,
            libraries: found.libraries,
            ..Found::default()
        };
        let t = infer(value, scope, &mut scratch).ok()?;
        return (is_known(&t) || t == Ty::Dyn).then(|| format!("optional_type({})", t.display()));
    }
    match &e.expr {
        Expr::Call(c)
            if c.func_name == "validate"
                && declared_in("validate", found.libraries)
                && matches!(c.target.as_deref(), Some(Expression { expr: Expr::Call(f), .. })
                    if matches!(f.target.as_deref(), Some(Expression { expr: Expr::Ident(n), .. }) if n == "format")) =>
        {
            Some("optional_type(list(string))".into())
        }
        _ => None,
    }
}

/// The value of `optional.of(value)` or `optional.ofNonZeroValue(value)`.
fn optional_value(e: &Expression) -> Option<&Expression> {
    match &e.expr {
        Expr::Call(c)
            if matches!(c.func_name.as_str(), "of" | "ofNonZeroValue")
                && matches!(c.target.as_deref(), Some(t) if matches!(&t.expr, Expr::Ident(n) if n == "optional")) =>
        {
            c.args.first()
        }
        _ => None,
    }
}

/// Go's regexp parser (RE2 syntax with Perl flags) refuses a repetition operator right after
/// another (`x**`, `x++`, `x{2}*`; a lazy `?` belongs to the first): the Rust engine accepts
/// some of these.
fn stacked_repetition(pattern: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let mut after_repeat = false;
    while i < chars.len() {
        let repeat_len = match chars[i] {
            '*' | '+' | '?' => 1,
            '{' => {
                let close = chars[i..].iter().position(|c| *c == '}');
                match close {
                    Some(n)
                        if n > 1
                            && chars[i + 1..i + n]
                                .iter()
                                .all(|c| c.is_ascii_digit() || *c == ',')
                            && chars[i + 1].is_ascii_digit()
                            && chars[i + 1..i + n].iter().filter(|c| **c == ',').count() <= 1 =>
                    {
                        n + 1
                    }
                    _ => 0,
                }
            }
            _ => 0,
        };
        if repeat_len > 0 {
            if after_repeat {
                return true;
            }
            i += repeat_len;
            if chars.get(i) == Some(&'?') {
                i += 1;
            }
            after_repeat = true;
            continue;
        }
        after_repeat = false;
        match chars[i] {
            '\\' => i += 2,
            '[' => {
                // A class ends at the first `]` after its first member (`[]a]`, `[^]a]`).
                let mut j = i + 1;
                if chars.get(j) == Some(&'^') {
                    j += 1;
                }
                j += 1;
                while j < chars.len() && chars[j] != ']' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            _ => i += 1,
        }
    }
    false
}

/// Whether cel-go's checker finds `@in` for an element of type `a` and a container of type
/// `b`: `(A, list(A))` or `(A, map(A, B))`, dyn passing as with `_==_`.
fn contained(a: &Ty, b: &Ty) -> bool {
    match b {
        Ty::List(e) | Ty::Map(e, _) => comparable(a, e),
        Ty::Dyn | Ty::Unknown | Ty::Free => true,
        _ => !is_known(b) || matches!(a, Ty::Unknown),
    }
}

fn undefined_field(field: &str) -> Issue {
    Issue::new(format!("undefined field '{field}'"), format!(".{field}"))
}

/// An element type as the expressions that take it out see it: a free variable is unknown.
fn bound(t: &Ty) -> Ty {
    match t {
        Ty::Free => Ty::Unknown,
        t => t.clone(),
    }
}

/// An undeclared identifier or function, which cel-go reports at the node (an identifier's
/// first character, a call's `(`) and checks on past, with the error type every later check
/// accepts.
fn undeclared_soft(name: &str, at: &Expression, found: &mut Found) -> Ty {
    found.checker.push(Issue {
        at: Some(Node::of(at)),
        ..undeclared(name)
    });
    Ty::Unknown
}

fn undeclared(name: &str) -> Issue {
    Issue::new(
        format!("undeclared reference to '{name}' (in container '')"),
        name,
    )
}

/// Checks `expr` with `scope` holding the declared variables: its type, or every issue cel-go
/// reports (the checker's; when it has none, the validators').
pub(crate) fn check(
    expr: &Expression,
    scope: &mut Vec<(String, Ty)>,
    literal_validators: bool,
    libraries: u32,
) -> Result<Ty, Vec<Issue>> {
    let mut found = Found {
        literal_validators,
        libraries,
        ..Found::default()
    };
    match infer(expr, scope, &mut found) {
        Err(issue) => {
            found.checker.push(issue);
            Err(found.checker)
        }
        Ok(_) if !found.checker.is_empty() => Err(found.checker),
        Ok(_) if !found.validator.is_empty() => Err(found.validator),
        Ok(t) => Ok(t),
    }
}

/// Infers the type of `expr`, with `scope` holding comprehension variables; the error returned
/// stops the check, those cel-go goes on after are kept in `found`.
fn infer(expr: &Expression, scope: &mut Vec<(String, Ty)>, found: &mut Found) -> Result<Ty, Issue> {
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
            .or_else(|| {
                TYPE_NAMES
                    .contains(&name.as_str())
                    .then_some(Ty::Object(TYPE))
            })
            .map_or_else(|| Ok(undeclared_soft(name, expr, found)), Ok),
        Expr::Select(sel)
            if is_net_type(sel, found.libraries) && !scope.iter().any(|(n, _)| n == "net") =>
        {
            Ok(Ty::Object(TYPE))
        }
        Expr::Select(sel) => {
            let operand = infer(&sel.operand, scope, found)?;
            let field_ty = match &operand {
                Ty::Object("Object") | Ty::Struct(_) => Ty::Dyn,
                Ty::Object("JSONPatch") => match sel.field.as_str() {
                    "op" | "path" | "from" => Ty::String,
                    "value" => Ty::Dyn,
                    _ => return Err(undefined_field(&sel.field)),
                },
                Ty::Object(o) => {
                    field_type(o, &sel.field).ok_or_else(|| undefined_field(&sel.field))?
                }
                Ty::Typed(t) => t
                    .field(&sel.field)
                    .ok_or_else(|| undefined_field(&sel.field))?,
                Ty::Map(_, v) => bound(v),
                Ty::Record(fields) => fields
                    .iter()
                    .find(|(n, _)| *n == sel.field)
                    .map(|(_, t)| t.clone())
                    .ok_or_else(|| undefined_field(&sel.field))?,
                Ty::Dyn => Ty::Dyn,
                t if is_known(t) => {
                    return Err(Issue::new(
                        format!("type '{}' does not support field selection", t.name()),
                        format!(".{}", sel.field),
                    ));
                }
                _ => Ty::Unknown,
            };
            Ok(if sel.test { Ty::Bool } else { field_ty })
        }
        Expr::List(l) => {
            let mut elements = Vec::with_capacity(l.elements.len());
            for (i, e) in l.elements.iter().enumerate() {
                let mut t = infer(e, scope, found)?;
                if l.optional_indices.contains(&i) {
                    // `?x`: the validator compares the optional's value type.
                    t = match optional_value(e) {
                        Some(value) => infer(value, scope, found)?,
                        None => Ty::Unknown,
                    };
                }
                elements.push((e, t));
            }
            let elem = elements.iter().map(|(_, t)| t.clone()).reduce(unify);
            if !found.literal_validators {
                let types = elements.iter().map(|(e, t)| (*e, t));
                joined_literal(types, found);
            } else if found.exempt == 0 {
                homogeneous_list(&elements, found);
            }
            Ok(list(elem.unwrap_or(Ty::Free)))
        }
        Expr::Map(m) => {
            let mut entries = Vec::with_capacity(m.entries.len());
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        let k = infer(&e.key, scope, found)?;
                        let mut v = infer(&e.value, scope, found)?;
                        if e.optional {
                            // `?key: value`: the validator compares the optional's value type.
                            v = match optional_value(&e.value) {
                                Some(value) => infer(value, scope, found)?,
                                None => Ty::Unknown,
                            };
                        }
                        entries.push(((&e.key, k), (&e.value, v)));
                    }
                    EntryExpr::StructField(f) => {
                        return Err(undeclared(&f.field));
                    }
                }
            }
            let key = entries.iter().map(|((_, k), _)| k.clone()).reduce(unify);
            let value = entries.iter().map(|(_, (_, v))| v.clone()).reduce(unify);
            if !found.literal_validators {
                joined_literal(entries.iter().map(|((k, t), _)| (*k, t)), found);
                joined_literal(entries.iter().map(|(_, (v, t))| (*v, t)), found);
            } else if found.exempt == 0 {
                homogeneous_map(&entries, found);
            }
            Ok(Ty::Map(
                Box::new(key.unwrap_or(Ty::Free)),
                Box::new(value.unwrap_or(Ty::Free)),
            ))
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
                        return Err(Issue::new(
                            format!("undefined field '{}'", f.field),
                            f.field.clone(),
                        ));
                    }
                    let ty = infer(&f.value, scope, found)?;
                    if name == "JSONPatch"
                        && f.field != "value"
                        && !matches!(ty, Ty::String | Ty::Dyn | Ty::Unknown)
                    {
                        return Err(Issue::new(
                            format!(
                                "expected type of field '{}' is 'string' but provided type is '{}'",
                                f.field,
                                ty.name()
                            ),
                            f.field.clone(),
                        ));
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
            let range = infer(&c.iter_range, scope, found)?;
            let accu = infer(&c.accu_init, scope, found)?;
            let item = match &range {
                Ty::List(e) | Ty::Map(e, _) => bound(e),
                Ty::Dyn => Ty::Dyn,
                t if is_known(t) => {
                    return Err(not_a_range(t));
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
                infer(&c.loop_cond, scope, found)?;
                let step = infer(&c.loop_step, scope, found)?;
                scope.push((c.accu_var.clone(), unify(accu, step)));
                infer(&c.result, scope, found)
            })();
            scope.truncate(depth);
            checked
        }
        Expr::Call(call) => {
            let name = call.func_name.as_str();
            if let Some(macro_name) = two_variable_macro(call)
                && found.libraries >= TWO_VARIABLE_COMPREHENSIONS
            {
                return infer_two_variable(macro_name, call, scope, found);
            }
            if name == "format" {
                found.exempt += 1;
            }
            let target = match call.target.as_deref() {
                Some(t) => match &t.expr {
                    Expr::Ident(prefix)
                        if is_namespace(prefix, name)
                            && declared_in(&format!("{prefix}.{name}"), found.libraries)
                            && !scope.iter().any(|(n, _)| n == prefix) =>
                    {
                        for a in &call.args {
                            infer(a, scope, found)?;
                        }
                        return function_type(&format!("{prefix}.{name}"), None)
                            .ok_or_else(|| undeclared(name));
                    }
                    _ => Some(infer(t, scope, found)?),
                },
                None => None,
            };
            let mut args = Vec::with_capacity(call.args.len());
            for a in &call.args {
                args.push(infer(a, scope, found)?);
            }
            if name == "format" {
                found.exempt -= 1;
                if declared_in(name, found.libraries)
                    && let Some(Expression {
                        expr: Expr::Literal(LiteralValue::String(text)),
                        ..
                    }) = call.target.as_deref()
                    && let [
                        Expression {
                            expr: Expr::List(list),
                            ..
                        },
                    ] = call.args.as_slice()
                {
                    // The elements' types, without reporting their issues a second time.
                    let mut scratch = Found {
                        literal_validators: found.literal_validators,
                        libraries: found.libraries,
                        exempt: found.exempt + 1,
                        ..Found::default()
                    };
                    let args: Vec<(&Expression, Ty)> = list
                        .elements
                        .iter()
                        .map(|e| (e, infer(e, scope, &mut scratch).unwrap_or(Ty::Unknown)))
                        .collect();
                    if let Some(issue) = format_issue(expr, text.inner(), &args) {
                        found.validator.push(issue);
                    }
                }
            }
            if found.literal_validators
                && let Some(literal) = call.args.first()
                && let Expr::Literal(value) = &literal.expr
                && !literal_argument_is_valid(name, value)
            {
                found
                    .validator
                    .push(Issue::at(format!("invalid {name} argument"), literal));
            }
            if name == "string"
                && call.target.is_none()
                && let [arg] = call.args.as_slice()
                && let Some(optional) = optional_type(arg, scope, found)
            {
                found.checker.push(Issue::at(
                    format!("found no matching overload for 'string' applied to '({optional})'"),
                    expr,
                ));
                return Ok(Ty::Unknown);
            }
            if call.target.is_none()
                && declared_in(name, found.libraries)
                && let Some(issue) = library_argument_issue(name, &args)
            {
                found.checker.push(Issue {
                    at: Some(Node::of(expr)),
                    ..issue
                });
                return Ok(Ty::Unknown);
            }
            if declared_in(name, found.libraries)
                && let Some(issue) = call_issue(name, target.as_ref(), &args)
            {
                found.checker.push(Issue {
                    at: Some(Node::of(expr)),
                    ..issue
                });
                return Ok(Ty::Unknown);
            }
            if call.target.is_none()
                && let Some(issue) = operator_issue(name, &args)
            {
                // cel-go goes on with the error type, which every later check accepts.
                found.checker.push(Issue {
                    at: Some(Node::of(expr)),
                    ..issue
                });
                return Ok(Ty::Unknown);
            }
            if call.target.is_none()
                && let [a, b] = args.as_slice()
                && match name {
                    operators::EQUALS | operators::NOT_EQUALS => !comparable(a, b),
                    operators::IN => !contained(a, b),
                    _ => false,
                }
            {
                found.checker.push(Issue::at(
                    format!(
                        "found no matching overload for '{name}' applied to '({}, {})'",
                        a.display(),
                        b.display()
                    ),
                    expr,
                ));
                return Ok(Ty::Unknown);
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
                    Some(Ty::List(e) | Ty::Map(_, e)) => bound(e),
                    Some(Ty::Dyn) => Ty::Dyn,
                    _ => Ty::Unknown,
                }),
                operators::OPT_INDEX | operators::OPT_SELECT => Ok(Ty::Unknown),
                _ => Ok(function_type(name, target.as_ref())
                    .filter(|_| declared_in(name, found.libraries))
                    .unwrap_or_else(|| undeclared_soft(name, expr, found))),
            }
        }
        Expr::Unspecified => Err(Issue::new("unexpected empty expression".into(), "")),
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
    if !args.iter().all(|t| is_known(t) || matches!(t, Map(..))) {
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
    let types: Vec<std::string::String> = args.iter().map(Ty::display).collect();
    (!ok).then(|| {
        Issue::new(
            format!(
                "found no matching overload for '{name}' applied to '({})'",
                types.join(", ")
            ),
            symbol,
        )
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

/// A parameter type of a function's overload, as the function tables declare it.
#[derive(Clone, Copy)]
enum Param {
    /// The type cel-go names so (`string`, `timestamp`, `kubernetes.Quantity`); `duration`,
    /// which this checker does not type, is taken by unknown types alone.
    Type(&'static str),
    /// A list of any element type (cel-go's `list(A)`).
    List,
    /// A list of the element type given.
    ListOf(&'static Param),
    Map,
    /// A type parameter: anything.
    Any,
}

/// The parameter types the tables name.
mod param {
    use super::Param::Type;
    use super::{CIDR, IP, Param, QUANTITY, URL};
    pub(super) const BOOL: Param = Type("bool");
    pub(super) const INT: Param = Type("int");
    pub(super) const UINT: Param = Type("uint");
    pub(super) const DOUBLE: Param = Type("double");
    pub(super) const STRING: Param = Type("string");
    pub(super) const BYTES: Param = Type("bytes");
    pub(super) const TIMESTAMP: Param = Type("timestamp");
    pub(super) const DURATION: Param = Type("duration");
    pub(super) const QUANTITY_OBJECT: Param = Type(QUANTITY);
    pub(super) const URL_OBJECT: Param = Type(URL);
    pub(super) const IP_OBJECT: Param = Type(IP);
    pub(super) const CIDR_OBJECT: Param = Type(CIDR);
}

impl Param {
    /// Whether an argument of type `t` may be passed as this parameter: always when the
    /// checker does not know `t` for certain (`dyn`, as in cel-go, or a type it does not model).
    fn takes(self, t: &Ty) -> bool {
        if !definite(t) {
            return true;
        }
        match (self, t) {
            (Param::Any, _) | (Param::List, Ty::List(_)) | (Param::Map, Ty::Map(..)) => true,
            (Param::ListOf(e), Ty::List(t)) => e.takes(t),
            (Param::Type(name), t) => t.display() == name,
            _ => false,
        }
    }
}

/// A type this checker knows for certain, so that an overload may be refused for it.
fn definite(t: &Ty) -> bool {
    is_known(t) || matches!(t, Ty::Map(..) | Ty::Object(_))
}

/// One overload: the receiver of a member overload (none for a global one) and the parameters.
type Overload = (Option<Param>, &'static [Param]);

const QUANTITY: &str = "kubernetes.Quantity";
const URL: &str = "kubernetes.URL";
const IP: &str = "net.IP";
const CIDR: &str = "net.CIDR";

/// The overloads of the functions whose argument types this checker verifies, grouped by the
/// library that declares them (every release declaring the name declares these overloads); none
/// for a function it does not verify.
fn overloads(name: &str) -> &'static [Overload] {
    use Param::{Any, List, ListOf, Map};
    use param::*;
    const S: Option<Param> = Some(STRING);
    const TS: Option<Param> = Some(TIMESTAMP);
    const Q: Option<Param> = Some(QUANTITY_OBJECT);
    const U: Option<Param> = Some(URL_OBJECT);
    const C: Option<Param> = Some(CIDR_OBJECT);
    match name {
        // cel-go's standard library
        "contains" | "startsWith" | "endsWith" => &[(S, &[STRING])],
        "matches" => &[(S, &[STRING]), (None, &[STRING, STRING])],
        "size" => &[
            (S, &[]),
            (Some(BYTES), &[]),
            (Some(List), &[]),
            (Some(Map), &[]),
        ],
        "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
        | "getDayOfWeek" => &[(TS, &[]), (TS, &[STRING])],
        "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            &[(TS, &[]), (TS, &[STRING]), (Some(DURATION), &[])]
        }
        // ext.Strings (version 2)
        "charAt" => &[(S, &[INT])],
        "indexOf" | "lastIndexOf" => &[
            (S, &[STRING]),
            (S, &[STRING, INT]),
            // library.Lists
            (Some(List), &[Any]),
        ],
        "lowerAscii" | "upperAscii" | "trim" => &[(S, &[])],
        "replace" => &[(S, &[STRING, STRING]), (S, &[STRING, STRING, INT])],
        "split" => &[(S, &[STRING]), (S, &[STRING, INT])],
        "substring" => &[(S, &[INT]), (S, &[INT, INT])],
        "join" => &[
            (Some(ListOf(&STRING)), &[]),
            (Some(ListOf(&STRING)), &[STRING]),
        ],
        // library.Lists
        "isSorted" | "min" | "max" => &[(Some(List), &[])],
        "sum" => &[
            (Some(ListOf(&INT)), &[]),
            (Some(ListOf(&UINT)), &[]),
            (Some(ListOf(&DOUBLE)), &[]),
            (Some(ListOf(&DURATION)), &[]),
        ],
        // library.Regex
        "find" => &[(S, &[STRING])],
        "findAll" => &[(S, &[STRING]), (S, &[STRING, INT])],
        // library.URLs
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" | "getQuery" => {
            &[(U, &[])]
        }
        // library.Quantity
        "sign" | "isInteger" | "asInteger" | "asApproximateFloat" => &[(Q, &[])],
        "add" | "sub" => &[(Q, &[QUANTITY_OBJECT]), (Q, &[INT])],
        "compareTo" | "isGreaterThan" | "isLessThan" => &[(Q, &[QUANTITY_OBJECT])],
        // library.IP
        "family"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => &[(Some(IP_OBJECT), &[])],
        // library.CIDR
        "containsIP" => &[(C, &[STRING]), (C, &[IP_OBJECT])],
        "containsCIDR" => &[(C, &[STRING]), (C, &[CIDR_OBJECT])],
        "masked" | "prefixLength" => &[(C, &[])],
        _ => &[],
    }
}

/// The parameter types of the one-argument global overloads of the functions this checker
/// verifies (`size` and the conversions), beside those of `overloads`.
fn unary_overloads(name: &str) -> &'static [Param] {
    use Param::{List, Map};
    use param::*;
    match name {
        "size" => &[STRING, BYTES, List, Map],
        "int" => &[INT, UINT, DOUBLE, STRING, TIMESTAMP, DURATION],
        "uint" | "double" => &[INT, UINT, DOUBLE, STRING],
        // The IP and CIDR libraries add `string` of their objects.
        "string" => &[
            INT,
            UINT,
            DOUBLE,
            STRING,
            BOOL,
            BYTES,
            TIMESTAMP,
            DURATION,
            IP_OBJECT,
            CIDR_OBJECT,
        ],
        "bool" => &[BOOL, STRING],
        "bytes" => &[BYTES, STRING],
        "timestamp" => &[TIMESTAMP, STRING, INT],
        "duration" => &[DURATION, STRING, INT],
        _ => &[],
    }
}

/// cel-go's error for a call of a function this checker verifies that no overload of which
/// takes the receiver (for a method) and the arguments: `'string.(int)'` for a method, `'(int)'`
/// for a global function.
fn call_issue(name: &str, target: Option<&Ty>, args: &[Ty]) -> Option<Issue> {
    let table = overloads(name);
    let unary = unary_overloads(name);
    if table.is_empty() && unary.is_empty() {
        return None;
    }
    let fits = |(receiver, params): &Overload| {
        let receiver_fits = match (receiver, target) {
            (Some(r), Some(t)) => r.takes(t),
            (None, None) => true,
            _ => false,
        };
        receiver_fits
            && params.len() == args.len()
            && params.iter().zip(args).all(|(p, a)| p.takes(a))
    };
    let unary_fits = match (target, args) {
        (None, [a]) => unary.iter().any(|p| p.takes(a)),
        _ => false,
    };
    if unary_fits || table.iter().any(fits) {
        return None;
    }
    let types: Vec<std::string::String> = args.iter().map(Ty::display).collect();
    let receiver = target.map_or(std::string::String::new(), |t| format!("{}.", t.display()));
    Some(Issue::new(
        format!(
            "found no matching overload for '{name}' applied to '{receiver}({})'",
            types.join(", ")
        ),
        name,
    ))
}

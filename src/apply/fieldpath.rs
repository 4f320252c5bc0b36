//! Sets of field paths, as structured-merge-diff's `fieldpath` package has them, and their
//! `FieldsV1` form (the `fieldsV1` of a `managedFields` entry).
//!
//! A path is a list of [`PathElement`]s: a field name (`f:`), the key of an associative list item
//! (`k:`), a set item's value (`v:`) or a list index (`i:`). A [`Set`] holds paths as a tree: at
//! each level the elements that are members themselves and the elements with paths below them.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::jsonpatch::gostr;

/// Why a `FieldsV1` value cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsV1Error {
    /// Not a JSON object (at the top or at a path element).
    #[error("FieldsV1 must be a JSON object")]
    NotAnObject,
    /// Text that is not JSON.
    #[error("FieldsV1 is not JSON: {0}")]
    Json(String),
    /// A key that is not a path element.
    #[error("parsing key as path element: {0}")]
    PathElement(String),
}

/// One step of a field path.
#[derive(Debug, Clone)]
pub enum PathElement {
    /// A field of a struct or a key of a map: `f:name`.
    Field(Box<str>),
    /// An associative list item by its key fields, sorted by name: `k:{"name":"a"}`.
    Key(Vec<(String, Value)>),
    /// A set item by its value: `v:"a"`.
    Value(Value),
    /// A list item by its index (atomic lists' items, never in managed fields): `i:0`.
    Index(i64),
}

impl PathElement {
    /// A field name element.
    pub fn field(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    /// A key element; the fields are sorted by name as upstream sorts them.
    pub fn key(mut fields: Vec<(String, Value)>) -> PathElement {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The element as a `FieldsV1` key: `f:name`, `k:{...}`, `v:...`, `i:N`.
    pub fn serialize(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let mut out = b"k:{".to_vec();
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    gostr::append_string(&mut out, name);
                    out.push(b':');
                    out.extend_from_slice(&crate::jsonpatch::go_marshal(value));
                }
                out.push(b'}');
                String::from_utf8_lossy(&out).into_owned()
            }
            PathElement::Value(v) => {
                let mut out = b"v:".to_vec();
                out.extend_from_slice(&crate::jsonpatch::go_marshal(v));
                String::from_utf8_lossy(&out).into_owned()
            }
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Reads a `FieldsV1` key; `Ok(None)` for a key of an unknown kind, which upstream skips.
    pub fn deserialize(s: &str) -> Result<Option<PathElement>, FieldsV1Error> {
        let bad = || FieldsV1Error::PathElement(format!("invalid path element {s:?}"));
        let b = s.as_bytes();
        if b.len() < 2 {
            return Err(FieldsV1Error::PathElement(
                "key must be 2 characters long:".into(),
            ));
        }
        if b[1] != b':' {
            return Err(FieldsV1Error::PathElement(format!("missing colon: {s}")));
        }
        let rest = &s[2..];
        Ok(Some(match b[0] {
            b'f' => PathElement::Field(rest.into()),
            b'v' => PathElement::Value(crate::json::from_str(rest).map_err(|_| bad())?),
            b'k' => match crate::json::from_str::<Value>(rest).map_err(|_| bad())? {
                Value::Object(m) => PathElement::key(m.into_iter().collect()),
                _ => return Err(bad()),
            },
            b'i' => PathElement::Index(rest.parse().map_err(|_| bad())?),
            _ => return Ok(None),
        }))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Upstream's order: field names, then keys, then values, then indices.
impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    let c = x.0.cmp(&y.0).then_with(|| compare_values(&x.1, &y.1));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// As upstream prints a path element in messages: `.name`, `[name="a"]`, `[="a"]`, `[0]`.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                f.write_str("[")?;
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", value_to_string(value))?;
                }
                f.write_str("]")
            }
            PathElement::Value(v) => write!(f, "[={}]", value_to_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Upstream's `value.ToString`.
fn value_to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => {
                let mut out = Vec::new();
                gostr::push_go_float(&mut out, f);
                String::from_utf8_lossy(&out).into_owned()
            }
            _ => n.to_string(),
        },
        Value::String(s) => crate::gofmt::quote(s),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_to_string).collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", value_to_string(v)))
            .collect(),
    }
}

fn number(v: &Value) -> Option<Result<i64, f64>> {
    let n = v.as_number()?;
    Some(match n.as_i64() {
        Some(i) => Ok(i),
        None => Err(n.as_f64().unwrap_or(f64::NAN)),
    })
}

fn float_cmp(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Equal)
}

/// Upstream's `value.Compare`: numbers, then strings, booleans, lists, maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => match (number(a), number(b)) {
            (Some(Ok(x)), Some(Ok(y))) => x.cmp(&y),
            (Some(Ok(x)), Some(Err(y))) => float_cmp(x as f64, y),
            (Some(Err(x)), Some(Ok(y))) => float_cmp(x, y as f64),
            (Some(Err(x)), Some(Err(y))) => float_cmp(x, y),
            _ => Ordering::Equal,
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            // Keys in order, then values: a map is as a sorted list of its entries.
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                let c = kx.cmp(ky).then_with(|| compare_values(vx, vy));
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Upstream's `value.Equals`: an integer equals the float of the same value.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare_values(a, b) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// A field path.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

/// As upstream prints it: `.spec.containers[name="a"].image`.
impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|pe| write!(f, "{pe}"))
    }
}

/// A set of field paths (`fieldpath.Set`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// A set of these paths.
    pub fn from_paths<I: IntoIterator<Item = Path>>(paths: I) -> Set {
        let mut s = Set::new();
        for p in paths {
            s.insert(&p.0);
        }
        s
    }

    /// Adds a path (the empty path is no member).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether the path is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether no path is a member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// The number of paths.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(Set::len).sum::<usize>()
    }

    /// The paths below `pe`, relative to it.
    pub fn with_prefix(&self, pe: &PathElement) -> Option<&Set> {
        self.children.get(pe)
    }

    /// The elements of this level that are members.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The elements of this level with paths below them, and those paths.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// Paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds the paths of `other`.
    pub fn union_with(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            match self.children.get_mut(pe) {
                Some(mine) => mine.union_with(child),
                None => {
                    if !child.is_empty() {
                        self.children.insert(pe.clone(), child.clone());
                    }
                }
            }
        }
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if let Some(theirs) = other.children.get(pe) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    children.insert(pe.clone(), both);
                }
            }
        }
        Set { members, children }
    }

    /// Paths of this set that `other` lacks (a member of `other` does not remove the paths below
    /// it: upstream's `Difference`).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// Paths of this set that are neither in `other` nor below one of its members.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, child) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            let rest = match other.children.get(pe) {
                Some(theirs) => child.recursive_difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(pe.clone(), rest);
            }
        }
        Set { members, children }
    }

    /// Every path, in upstream's order (a level's members, then its children's paths).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(Path(p));
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The paths that have nothing below them in the set.
    pub fn leaves(&self) -> Set {
        let mut out = Set::new();
        for m in &self.members {
            if !self.children.contains_key(m) {
                out.members.insert(m.clone());
            }
        }
        for (pe, child) in &self.children {
            let l = child.leaves();
            if !l.is_empty() {
                out.children.insert(pe.clone(), l);
            }
        }
        out
    }

    pub(crate) fn members_mut(&mut self) -> &mut BTreeSet<PathElement> {
        &mut self.members
    }

    pub(crate) fn children_mut(&mut self) -> &mut BTreeMap<PathElement, Set> {
        &mut self.children
    }

    /// The set in the `FieldsV1` form, as upstream writes it: members and children in the order
    /// of their path elements, `"."` first in a child that is a member too.
    pub fn to_fields_v1_string(&self) -> String {
        let mut out = String::from("{");
        self.write_v1(false, &mut out);
        out.push('}');
        out
    }

    fn write_v1(&self, include_self: bool, out: &mut String) {
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !std::mem::take(&mut first) {
                out.push(',');
            }
        };
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            sep(out);
            out.push_str("\".\":{}");
        }
        let mut keys: Vec<&PathElement> = self
            .members
            .iter()
            .chain(self.children.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        keys.dedup();
        for pe in keys {
            sep(out);
            let mut key = Vec::new();
            gostr::append_string(&mut key, &pe.serialize());
            out.push_str(&String::from_utf8_lossy(&key));
            out.push(':');
            match self.children.get(pe) {
                Some(child) => {
                    out.push('{');
                    child.write_v1(self.members.contains(pe), out);
                    out.push('}');
                }
                None => out.push_str("{}"),
            }
        }
    }

    /// The set as a `FieldsV1` JSON value (a serde_json map keeps its keys sorted as strings;
    /// [`Set::to_fields_v1_string`] has upstream's order).
    pub fn to_fields_v1(&self) -> Value {
        crate::json::from_str(&self.to_fields_v1_string()).unwrap_or(Value::Object(Map::new()))
    }

    /// Reads a `FieldsV1` value.
    pub fn from_fields_v1(v: &Value) -> Result<Set, FieldsV1Error> {
        let Value::Object(m) = v else {
            return Err(FieldsV1Error::NotAnObject);
        };
        Ok(read_v1(m)?.0.unwrap_or_default())
    }

    /// Reads a `FieldsV1` text.
    pub fn from_fields_v1_str(s: &str) -> Result<Set, FieldsV1Error> {
        let v: Value = crate::json::from_str(s).map_err(|e| FieldsV1Error::Json(e.to_string()))?;
        Set::from_fields_v1(&v)
    }
}

/// The error json-iterator's `ReadMapCB` gives reading `v` (as its compact JSON text) where
/// structured-merge-diff expects an object at the top or as a key's value: the first value
/// that is neither an object nor `null`, and the text 10 and 50 bytes around the byte after
/// its first, as `error found in #N byte of ...|near|..., bigger context ...|context|...`
/// reports them. Keys are written in sorted order (Go keeps the patch's).
pub fn read_map_error(v: &Value) -> Option<String> {
    /// Writes `v` compactly into `out`; the offset just past the first byte of the first value
    /// that is not an object where one is expected.
    fn walk(v: &Value, out: &mut String, expect_object: bool) -> Option<usize> {
        let mut found = None;
        match v {
            Value::Object(m) => {
                out.push('{');
                for (i, (k, child)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push(':');
                    let at = walk(child, out, true);
                    found = found.or(at);
                }
                out.push('}');
            }
            Value::Null => out.push_str("null"),
            other => {
                if expect_object {
                    found = Some(out.len() + 1);
                }
                out.push_str(&serde_json::to_string(other).unwrap_or_default());
            }
        }
        found
    }
    let mut text = String::new();
    let head = walk(v, &mut text, true)?;
    let b = text.as_bytes();
    let found = char::from(b[head - 1]);
    let parsed = &text[head.saturating_sub(10)..(head + 10).min(text.len())];
    let context = &text[head.saturating_sub(50)..(head + 50).min(text.len())];
    Some(format!(
        "ReadMapCB: expect {{ or n, but found {found}, error found in #{} byte of ...|{parsed}|..., bigger context ...|{context}|...",
        head - head.saturating_sub(10)
    ))
}

/// Upstream's reading: a key whose value has no children of its own is a member.
fn read_v1(m: &Map<String, Value>) -> Result<(Option<Set>, bool), FieldsV1Error> {
    let mut children: Option<Set> = None;
    let mut is_member = false;
    for (key, v) in m {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(pe) = PathElement::deserialize(key)? else {
            continue;
        };
        let (grand, child_member) = match v {
            Value::Object(inner) => read_v1(inner)?,
            // json-iterator's `ReadMapCB` reads `null` as an empty object.
            Value::Null => (None, true),
            _ => return Err(FieldsV1Error::NotAnObject),
        };
        if child_member {
            children.get_or_insert_default().members.insert(pe.clone());
        }
        if let Some(g) = grand {
            children.get_or_insert_default().children.insert(pe, g);
        }
    }
    if children.is_none() {
        is_member = true;
    }
    Ok((children, is_member))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_v1_round_trip_in_upstream_order() {
        let text = r#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"f:ports":{"k:{\"port\":9,\"protocol\":\"TCP\"}":{".":{},"f:port":{}},"k:{\"port\":10,\"protocol\":\"TCP\"}":{}},"f:set":{"v:2":{},"v:10":{},"v:\"a\"":{}}}}"#;
        let set = Set::from_fields_v1_str(text).unwrap();
        assert_eq!(set.to_fields_v1_string(), text);
        assert_eq!(set.len(), 8);
    }

    #[test]
    fn set_operations() {
        let p = |s: &[&str]| Path(s.iter().map(|n| PathElement::field(n)).collect());
        let a = Set::from_paths([p(&["a"]), p(&["b", "c"]), p(&["b", "d"])]);
        let b = Set::from_paths([p(&["b", "c"]), p(&["e"])]);
        assert_eq!(a.union(&b).len(), 4);
        assert_eq!(a.intersection(&b), Set::from_paths([p(&["b", "c"])]));
        assert_eq!(
            a.difference(&b),
            Set::from_paths([p(&["a"]), p(&["b", "d"])])
        );
        let top = Set::from_paths([p(&["b"])]);
        assert_eq!(a.difference(&top), a);
        assert_eq!(a.recursive_difference(&top), Set::from_paths([p(&["a"])]));
        let key = PathElement::key(vec![("name".into(), json!("x<"))]);
        assert_eq!(key.serialize(), r#"k:{"name":"x\u003c"}"#);
        assert_eq!(
            Path(vec![PathElement::field("spec"), key]).to_string(),
            r#".spec[name="x<"]"#
        );
    }
}

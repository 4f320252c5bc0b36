//! Patches of the common shape applied to a decoded value directly, without marshalling it.
//!
//! [`Patch::apply_prepared`] marshals the whole document as Go does, applies the patch to those
//! bytes as evanphx does and assembles the result. For the patches webhooks send almost always
//! (`add`, `replace` and `remove` of members and elements that are where the path says) the
//! result is the document with those changes made in place, each new value decoded from its
//! bytes as the assembly decodes it. [`Patch::apply_direct`] makes exactly that, and declines
//! (`None`) everything else, which then takes the long way: other operations, paths that miss,
//! indices that are negative or not written as Go's `strconv.Itoa` writes them, escaped keys,
//! and documents or values the assembly would not take as they are (floats, deep nesting).

use serde_json::Value;

use super::tree::Node;
use super::{Operation, Patch};

/// How many levels of objects and arrays a [plain](is_plain) document has at most: deeper
/// documents and results take the long way (the assembly's own limit).
pub const MAX_DIRECT_NESTING: usize = super::prepared::MAX_ASSEMBLED_DEPTH;

impl Patch {
    /// The patched document when the patch is of the common shape (see the module notes), the
    /// same value [`Patch::apply_prepared`] gives; `None` when it is not (the patch may then
    /// apply or fail the long way).
    pub fn apply_direct(&self, doc: &Value) -> Option<Value> {
        if !is_plain(doc) {
            return None;
        }
        self.apply_direct_to_plain(doc)
    }

    /// [`Patch::apply_direct`] of a document known to be [plain](is_plain).
    pub fn apply_direct_to_plain(&self, doc: &Value) -> Option<Value> {
        self.ops.as_ref()?;
        self.apply_direct_to_plain_owned(doc.clone())
    }

    /// [`Patch::apply_direct_to_plain`] of a document given to be changed (a copy the caller
    /// made): the patch is made in it.
    pub fn apply_direct_to_plain_owned(&self, mut doc: Value) -> Option<Value> {
        debug_assert!(is_plain(&doc), "a document said to be plain is not");
        let ops = self.ops.as_ref()?;
        for op in ops {
            apply(op.as_ref()?, &mut doc)?;
        }
        Some(doc)
    }

    /// The paths [`Patch::apply_direct`] wrote to, in order, each with whether it added or
    /// removed (rather than replaced): meaningful when it applied the patch.
    pub fn direct_edits(&self) -> Vec<(String, bool)> {
        self.ops
            .iter()
            .flatten()
            .flatten()
            .filter_map(|op| Some((op.path().ok()?, op.kind() != "replace")))
            .collect()
    }

    /// Whether the patch reads and writes only what Go's encoding of the object `doc` has as
    /// `doc` has it, so that applying it to `doc` or to that encoding gives objects that decode
    /// alike: every container along each path is there, a map or a list that is not empty (Go
    /// leaves empty ones out, and writes members `doc` may lack, such as `status: {}`), and a
    /// member removed is not a zero value (which Go may leave out). `test`, `move` and `copy`
    /// read values, and count as not.
    pub fn agrees_on_shape(&self, doc: &Value) -> bool {
        let Some(ops) = self.ops.as_ref() else {
            return true;
        };
        ops.iter()
            .all(|op| op.as_ref().is_some_and(|op| agrees_on_shape(op, doc)))
    }
}

fn agrees_on_shape(op: &Operation, doc: &Value) -> bool {
    let kind = op.kind();
    if !matches!(kind.as_ref(), "add" | "replace" | "remove") {
        return false;
    }
    let Ok(path) = op.path() else {
        return false;
    };
    let Some((parents, last)) = path
        .strip_prefix('/')
        .and_then(|p| p.rsplit_once('/').or(Some(("", p))))
    else {
        return false;
    };
    let mut node = doc;
    for segment in parents.split('/').filter(|_| !parents.is_empty()) {
        let next = match node {
            Value::Object(m) if !segment.contains('~') => m.get(segment),
            Value::Array(a) => index(segment).and_then(|i| a.get(i)),
            _ => None,
        };
        match next {
            Some(v @ Value::Object(m)) if !m.is_empty() => node = v,
            Some(v @ Value::Array(a)) if !a.is_empty() => node = v,
            _ => return false,
        }
    }
    if kind != "remove" {
        return true;
    }
    let target = match node {
        Value::Object(m) if !last.contains('~') => m.get(last),
        Value::Array(a) => index(last).and_then(|i| a.get(i)),
        _ => None,
    };
    match target {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::Object(m)) => !m.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

/// Whether `doc` is a document [`Patch::apply_direct`] patches: it holds no float, and nests
/// objects and arrays at most [`MAX_DIRECT_NESTING`] deep.
pub fn is_plain(doc: &Value) -> bool {
    plain(doc, 0)
}

/// Whether `v` holds no float and nests within [`MAX_DIRECT_NESTING`] from `level`.
fn plain(v: &Value, level: usize) -> bool {
    match v {
        Value::Number(n) => !n.is_f64(),
        Value::Object(m) => level < MAX_DIRECT_NESTING && m.values().all(|c| plain(c, level + 1)),
        Value::Array(a) => level < MAX_DIRECT_NESTING && a.iter().all(|c| plain(c, level + 1)),
        _ => true,
    }
}

fn apply(op: &Operation, doc: &mut Value) -> Option<()> {
    enum Kind {
        Add,
        Replace,
        Remove,
    }
    let kind = match op.kind().as_ref() {
        "add" => Kind::Add,
        "replace" => Kind::Replace,
        "remove" => Kind::Remove,
        _ => return None,
    };
    let path = op.path().ok()?;
    let mut segments = path.strip_prefix('/')?.split('/');
    let mut last = segments.next()?;
    let mut depth = 1;
    let mut parent = doc;
    for segment in segments {
        let current = std::mem::replace(&mut last, segment);
        parent = child(parent, current)?;
        if !matches!(parent, Value::Object(_) | Value::Array(_)) {
            return None;
        }
        depth += 1;
    }
    if last.contains('~') {
        return None;
    }
    let value = match kind {
        Kind::Remove => None,
        Kind::Add | Kind::Replace => Some(value(op, depth)?),
    };
    match (parent, kind, value) {
        (Value::Object(m), Kind::Add, Some(v)) => {
            m.insert(last.to_owned(), v);
        }
        (Value::Object(m), Kind::Replace, Some(v)) => {
            *m.get_mut(last)? = v;
        }
        (Value::Object(m), Kind::Remove, None) => {
            m.remove(last)?;
        }
        (Value::Array(a), Kind::Add, Some(v)) => {
            if last == "-" {
                a.push(v);
            } else {
                let i = index(last).filter(|&i| i <= a.len())?;
                a.insert(i, v);
            }
        }
        (Value::Array(a), Kind::Replace, Some(v)) => {
            *a.get_mut(index(last)?)? = v;
        }
        (Value::Array(a), Kind::Remove, None) => {
            let i = index(last).filter(|&i| i < a.len())?;
            a.remove(i);
        }
        _ => return None,
    }
    Some(())
}

/// The member or element `segment` names, where the long way finds the same one.
fn child<'v>(parent: &'v mut Value, segment: &str) -> Option<&'v mut Value> {
    if segment.contains('~') {
        return None;
    }
    match parent {
        Value::Object(m) => m.get_mut(segment),
        Value::Array(a) => a.get_mut(index(segment)?),
        _ => None,
    }
}

/// An index written as Go writes one (no sign, no leading zero).
fn index(segment: &str) -> Option<usize> {
    let b = segment.as_bytes();
    let canonical = !b.is_empty()
        && b.len() <= 9
        && b.iter().all(u8::is_ascii_digit)
        && (b.len() == 1 || b[0] != b'0');
    canonical.then(|| segment.parse().ok()).flatten()
}

/// The operation's `value` as the assembly decodes it, when it is plain and nests within
/// [`MAX_DIRECT_NESTING`] at `depth`.
fn value(op: &Operation, depth: usize) -> Option<Value> {
    let node = op.value()?;
    let raw: &[u8] = match &node {
        Node::Null => return Some(Value::Null),
        Node::Raw(raw) => raw,
        Node::Doc(_) | Node::Ary(_) => return None,
    };
    let v: Value = crate::json::from_slice(raw).ok()?;
    plain(&v, depth).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::super::{Prepared, decode};
    use serde_json::{Value, json};

    #[test]
    fn a_patch_agrees_on_shape_where_it_reaches_only_what_go_writes_alike() {
        let doc = json!({"metadata": {"labels": {}, "name": "p"},
                         "spec": {"containers": [{"name": "c", "ports": []}], "hostname": ""}});
        let agrees = |ops: Value| {
            decode(ops.to_string().as_bytes())
                .unwrap()
                .agrees_on_shape(&doc)
        };
        assert!(agrees(
            json!([{"op": "add", "path": "/metadata/name", "value": "q"}])
        ));
        assert!(agrees(
            json!([{"op": "replace", "path": "/spec/containers/0/name", "value": "d"}])
        ));
        assert!(agrees(
            json!([{"op": "add", "path": "/spec/containers/-", "value": {}}])
        ));
        assert!(agrees(json!([{"op": "remove", "path": "/metadata/name"}])));
        assert!(agrees(json!(null)));
        // An empty map or list, or a missing container, on the way.
        assert!(!agrees(
            json!([{"op": "add", "path": "/metadata/labels/a", "value": "b"}])
        ));
        assert!(!agrees(
            json!([{"op": "add", "path": "/spec/containers/0/ports/-", "value": {}}])
        ));
        assert!(!agrees(
            json!([{"op": "add", "path": "/status/phase", "value": "x"}])
        ));
        // A zero value removed, or a member missing.
        assert!(!agrees(json!([{"op": "remove", "path": "/spec/hostname"}])));
        assert!(!agrees(json!([{"op": "remove", "path": "/spec/nodeName"}])));
        // Operations that read values, and an escaped key on the way.
        for op in ["test", "copy", "move"] {
            assert!(!agrees(
                json!([{"op": op, "path": "/metadata/name", "from": "/metadata/name", "value": "p"}])
            ));
        }
        assert!(!agrees(
            json!([{"op": "add", "path": "/metadata/labels~1x/a", "value": "c"}])
        ));
    }

    fn documents() -> Vec<Value> {
        vec![
            json!({"metadata": {"name": "a", "labels": {"app": "web", "a/b": "c", "t~x": "y"}},
                   "spec": {"containers": [{"name": "c0", "ports": [{"containerPort": 80}]},
                                           {"name": "c1"}],
                            "nil": null, "n": 3, "s": "<&>", "list": [], "map": {}}}),
            json!({"a": [[1, 2], [3]], "b": {"c": {"d": {"e": true}}}, "": {"x": 1}}),
            json!({"f": 1.5, "g": {"h": 1}}),
            json!([1, 2, 3]),
        ]
    }

    fn paths() -> Vec<&'static str> {
        vec![
            "",
            "/",
            "/metadata",
            "/metadata/labels",
            "/metadata/labels/app",
            "/metadata/labels/new",
            "/metadata/labels/a~1b",
            "/metadata/labels/t~0x",
            "/metadata/labels/~2",
            "/metadata/name/x",
            "/spec/containers",
            "/spec/containers/-",
            "/spec/containers/0",
            "/spec/containers/1",
            "/spec/containers/2",
            "/spec/containers/3",
            "/spec/containers/01",
            "/spec/containers/-1",
            "/spec/containers/+1",
            "/spec/containers/0/ports/0/containerPort",
            "/spec/containers/0/ports/-",
            "/spec/nil",
            "/spec/nil/x",
            "/spec/n/x",
            "/spec/list/0",
            "/spec/list/-",
            "/spec/map/k",
            "/spec/missing/k",
            "/a/0/1",
            "/a/1/-",
            "/a/2",
            "/b/c/d/e",
            "//x",
            "/0",
            "/-",
            "/3",
            "/g/h",
            "/f",
            "metadata/name",
            "/spec/containers/99999999999",
        ]
    }

    fn values() -> Vec<&'static str> {
        vec![
            r#""v""#,
            "1",
            "-7",
            "1.5",
            "1e3",
            "null",
            "true",
            r#"{"k":"v","k":"w"}"#,
            r#"[{"name":"sidecar","image":"proxy:1"}]"#,
            r#"{"name":"sidecar"}"#,
            r#""\u003c\ud800""#,
            "{}",
            "[]",
            r#"[[[[1]]]]"#,
        ]
    }

    fn patches() -> Vec<String> {
        let mut out = Vec::new();
        for path in paths() {
            out.push(format!(r#"[{{"op":"remove","path":"{path}"}}]"#));
            for value in values() {
                for op in ["add", "replace", "test", "move", "copy"] {
                    out.push(format!(
                        r#"[{{"op":"{op}","path":"{path}","value":{value},"from":"/metadata"}}]"#
                    ));
                }
            }
            out.push(format!(r#"[{{"op":"add","path":"{path}"}}]"#));
        }
        out.push(r#"[{"op":"add","path":"/metadata/labels/x","value":"1"},{"op":"remove","path":"/metadata/labels/app"},{"op":"replace","path":"/spec/n","value":4}]"#.into());
        out.push(r#"[{"op":"add","path":"/spec/map/k","value":{}},{"op":"add","path":"/spec/map/k/j","value":[1]},{"op":"add","path":"/spec/map/k/j/0","value":0}]"#.into());
        out.push(
            r#"[{"op":"add","path":"/metadata/labels/x","value":"1"},{"op":"bogus","path":"/x"}]"#
                .into(),
        );
        out.push("null".into());
        out.push("[]".into());
        out.push("[null]".into());
        out
    }

    #[test]
    fn the_direct_way_gives_the_long_ways_result_or_declines() {
        let (mut taken, mut declined) = (0, 0);
        for doc in documents() {
            for text in patches() {
                let patch = decode(text.as_bytes()).expect("decodes");
                let direct = patch.apply_direct(&doc);
                let long = patch.apply_prepared(&Prepared::new(&doc));
                match direct {
                    Some(v) => {
                        taken += 1;
                        assert_eq!(Ok(&v), long.as_ref(), "{doc} {text}");
                    }
                    None => declined += 1,
                }
            }
        }
        // Both ways are exercised.
        assert!(
            taken > 200 && declined > 200,
            "{taken} taken, {declined} declined"
        );
    }

    #[test]
    fn a_webhooks_usual_patches_take_the_direct_way() {
        let doc = &documents()[0];
        for text in [
            r#"[{"op":"add","path":"/metadata/labels/injected","value":"yes"}]"#,
            r#"[{"op":"add","path":"/spec/containers/-","value":{"name":"sidecar","image":"proxy:1"}}]"#,
            r#"[{"op":"replace","path":"/spec/containers/0/ports/0/containerPort","value":8080}]"#,
            r#"[{"op":"remove","path":"/metadata/labels/app"}]"#,
        ] {
            let patch = decode(text.as_bytes()).expect("decodes");
            assert!(patch.apply_direct(doc).is_some(), "{text}");
        }
    }
}

//! A JSON-patch applier that behaves like evanphx/json-patch v4 (`DecodePatch` + `Patch.Apply` with
//! the package defaults), the library kube-apiserver applies mutating-webhook patches with.
//!
//! Differences from RFC 6902 that are reproduced on purpose: operations are decoded lazily (an
//! unknown `op` or a bad `path` fails at apply time), negative array indices count from the end,
//! indices are parsed with `strconv.Atoi` (`01`, `+1`), `replace` of a missing object member adds
//! it, `copy` from a missing path copies `null`, `add` without `value` adds `null`, a path without a
//! leading `/` ignores its first segment, `add ""` fails, and `test` compares scalars by their
//! compacted raw bytes. Error texts are Go's.
//!
//! Where Go would panic (a nil map or nil pointer reached through unusual input), the apply fails
//! with an error whose text is the Go runtime message prefixed by `panic: `.

mod direct;
pub(crate) mod gostr;
mod prepared;
mod scan;
mod tree;

pub use direct::{MAX_DIRECT_NESTING, is_plain};
pub use prepared::{Prepared, go_marshal};

use std::borrow::Cow;

use tree::{Fault, Node, ObjMap, Scan, Slot, Splitter};

/// A decoded patch: `jsonpatch.Patch`, kept lazy like evanphx's `[]map[string]*json.RawMessage`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Patch {
    /// `None` for a `null` patch (Go's nil slice).
    ops: Option<Vec<Option<Operation>>>,
}

/// A member of an operation: decoded key and raw value (`None` for a JSON `null`).
type Member = (Box<str>, Option<Box<[u8]>>);

/// One operation's members (keys decoded, sorted, unique); a `None` value is a JSON `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Operation {
    members: Vec<Member>,
}

/// A patch that `jsonpatch.DecodePatch` rejects, with Go `encoding/json`'s message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    /// The error text, e.g. `unexpected end of JSON input`.
    pub message: String,
}

/// A patch that `Patch.Apply` fails on, with evanphx's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApplyError {
    /// The error text, e.g. `testing value /n failed: test failed`.
    pub message: String,
}

impl From<Fault> for ApplyError {
    fn from(f: Fault) -> Self {
        let message = match f {
            Fault::Err(m) => m,
            Fault::Panic(p) => format!("panic: {p}"),
        };
        ApplyError { message }
    }
}

fn err(m: String) -> Fault {
    Fault::Err(m)
}

/// The word Go's `UnmarshalTypeError` uses for a JSON value.
fn json_kind(raw: &[u8]) -> &'static str {
    match raw.first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "bool",
        Some(b'n') => "null",
        _ => "number",
    }
}

fn type_error(raw: &[u8], go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go value of type {go_type}",
        json_kind(raw)
    )
}

/// `jsonpatch.DecodePatch`: `json.Unmarshal` into `[]map[string]*json.RawMessage`.
pub fn decode(patch: &[u8]) -> Result<Patch, DecodeError> {
    let mut children = Vec::new();
    let (s, e) = scan::scan(patch, &mut children).map_err(|message| DecodeError { message })?;
    let raw = patch.get(s..e).unwrap_or_default();
    match raw.first() {
        Some(b'n') => Ok(Patch { ops: None }),
        Some(b'[') => {
            let mut ops = Vec::with_capacity(children.len());
            let mut first_err = None;
            let mut members = Vec::new();
            for c in &children {
                let v = patch.get(c.val.0..c.val.1).unwrap_or_default();
                match v.first() {
                    Some(b'{') if scan::split(v, &mut members) => {
                        ops.push(Some(Operation::new(v, &members)));
                    }
                    Some(b'n') => ops.push(None),
                    _ => {
                        first_err.get_or_insert_with(|| type_error(v, "jsonpatch.Operation"));
                    }
                }
            }
            match first_err {
                Some(message) => Err(DecodeError { message }),
                None => Ok(Patch { ops: Some(ops) }),
            }
        }
        _ => Err(DecodeError {
            message: type_error(raw, "jsonpatch.Patch"),
        }),
    }
}

impl Operation {
    fn new(raw: &[u8], children: &[scan::Child]) -> Operation {
        let mut members: Vec<Member> = children
            .iter()
            .map(|c| {
                let key = raw.get(c.key.0..c.key.1).unwrap_or_default();
                let val = raw.get(c.val.0..c.val.1).unwrap_or_default();
                let val = (val != b"null").then(|| Box::from(val));
                (Box::from(gostr::unquote(key).as_ref()), val)
            })
            .collect();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        members.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                std::mem::swap(&mut later.1, &mut kept.1);
                true
            } else {
                false
            }
        });
        Operation { members }
    }

    /// The member's raw value: `None` if absent or `null` (Go's nil `*json.RawMessage`).
    fn raw(&self, name: &str) -> Option<&[u8]> {
        let i = self
            .members
            .binary_search_by(|(k, _)| k.as_ref().cmp(name))
            .ok()?;
        self.members.get(i)?.1.as_deref()
    }

    /// `Operation.Kind`.
    fn kind(&self) -> Cow<'_, str> {
        match self.raw("op") {
            Some(raw) if raw.first() == Some(&b'"') => gostr::unquote(raw),
            _ => Cow::Borrowed("unknown"),
        }
    }

    /// `Operation.Path` / `Operation.From`: the member decoded as a Go string, or the error text.
    fn string_member(&self, name: &str, missing: &str) -> Result<String, String> {
        match self.raw(name) {
            Some(raw) if raw.first() == Some(&b'"') => Ok(gostr::unquote(raw).into_owned()),
            Some(raw) => Err(type_error(raw, "string")),
            None => Err(missing.to_owned()),
        }
    }

    fn path(&self) -> Result<String, String> {
        self.string_member("path", "operation missing path field: missing value")
    }

    fn from(&self) -> Result<String, String> {
        self.string_member("from", "operation, missing from field: missing value")
    }

    /// `Operation.value()`: `None` when the member is absent (Go's nil `*lazyNode`).
    fn value(&self) -> Option<Node<'_>> {
        let i = self
            .members
            .binary_search_by(|(k, _)| k.as_ref().cmp("value"))
            .ok()?;
        Some(match &self.members.get(i)?.1 {
            None => Node::Null,
            Some(raw) => Node::Raw(Cow::Borrowed(raw)),
        })
    }

    fn apply<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        match self.kind().as_ref() {
            "add" => self.add(root, sp),
            "remove" => self.remove(root, sp),
            "replace" => self.replace(root, sp),
            "move" => self.move_(root, sp),
            "test" => self.test(root, sp),
            "copy" => self.copy(root, sp),
            other => Err(err(format!("Unexpected kind: {other}"))),
        }
    }

    fn add<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let path = self
            .path()
            .map_err(|_| err("add operation failed to decode path: missing value".to_owned()))?;
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(err(format!(
                "add operation does not apply: doc is missing path: \"{path}\": missing value"
            )));
        };
        tree::add(con, &key, self.value())
            .map_err(|f| f.wrap(|m| format!("error in add for path: '{path}': {m}")))
    }

    fn remove<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let path = self
            .path()
            .map_err(|_| err("remove operation failed to decode path: missing value".to_owned()))?;
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(err(format!(
                "remove operation does not apply: doc is missing path: \"{path}\": missing value"
            )));
        };
        tree::remove(con, &key)
            .map(drop)
            .map_err(|m| err(format!("error in remove for path: '{path}': {m}")))
    }

    fn replace<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let path = self
            .path()
            .map_err(|e| err(format!("replace operation failed to decode path: {e}")))?;
        if path.is_empty() {
            let Some(mut val) = self.value() else {
                return Err(Fault::Panic(tree::NIL_DEREF));
            };
            if !val.try_doc(sp) && !val.try_ary(sp) {
                return Err(err(
                    "replace operation value must be object or array: %!w(<nil>)".to_owned(),
                ));
            }
            *root = val;
            return Ok(());
        }
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(err(format!(
                "replace operation does not apply: doc is missing path: {path}: missing value"
            )));
        };
        if tree::get(con, &key).is_err() {
            return Err(err(format!(
                "replace operation does not apply: doc is missing key: {path}: missing value"
            )));
        }
        tree::set(con, &key, self.value())
            .map_err(|f| f.wrap(|m| format!("error in remove for path: '{path}': {m}")))
    }

    fn move_<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let from = self
            .from()
            .map_err(|e| err(format!("move operation failed to decode from: {e}")))?;
        let Some((con, key)) = tree::find_object(root, &from, sp) else {
            return Err(err(format!(
                "move operation does not apply: doc is missing from path: {from}: missing value"
            )));
        };
        let in_move = |m: String| err(format!("error in move for path: '{key}': {m}"));
        tree::get(con, &key).map_err(in_move)?;
        let val = tree::remove(con, &key).map_err(in_move)?;
        let path = self
            .path()
            .map_err(|e| err(format!("move operation failed to decode path: {e}")))?;
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(err(format!(
                "move operation does not apply: doc is missing destination path: {path}: missing value"
            )));
        };
        tree::add(con, &key, val)
            .map_err(|f| f.wrap(|m| format!("error in move for path: '{path}': {m}")))
    }

    fn test<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let path = self
            .path()
            .map_err(|e| err(format!("test operation failed to decode path: {e}")))?;
        let failed = || err(format!("testing value {path} failed: test failed"));
        if path.is_empty() {
            let Some(mut o) = self.value() else {
                return Err(Fault::Panic(tree::NIL_DEREF));
            };
            return if tree::equal(root, &mut o, 0, sp)? {
                Ok(())
            } else {
                Err(failed())
            };
        }
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(err(format!(
                "test operation does not apply: is missing path: {path}: missing value"
            )));
        };
        let val = tree::get(con, &key)
            .map_err(|m| err(format!("error in test for path: '{path}': {m}")))?;
        match (val, self.value()) {
            (None, None | Some(Node::Null)) => Ok(()),
            (Some(v), Some(mut o)) => {
                if tree::equal(v, &mut o, 0, sp)? {
                    Ok(())
                } else {
                    Err(failed())
                }
            }
            _ => Err(failed()),
        }
    }

    fn copy<'a>(&'a self, root: &mut Node<'a>, sp: &dyn Splitter) -> Result<(), Fault> {
        let from = self
            .from()
            .map_err(|e| err(format!("copy operation failed to decode from: {e}")))?;
        let Some((con, key)) = tree::find_object(root, &from, sp) else {
            return Err(err(format!(
                "copy operation does not apply: doc is missing from path: {from}: missing value"
            )));
        };
        tree::get(con, &key).map_err(|m| err(format!("error in copy for from: '{from}': {m}")))?;
        let path = self
            .path()
            .map_err(|_| err("copy operation failed to decode path: missing value".to_owned()))?;
        let missing_dest = || {
            err(format!(
                "copy operation does not apply: doc is missing destination path: {path}: missing value"
            ))
        };
        // Go walks the destination before marshalling the source, and walking converts nodes,
        // which can change how the source marshals: walk first, then look the source up again.
        if tree::find_object(root, &path, sp).is_none() {
            return Err(missing_dest());
        }
        let copied: Slot<'a> = match tree::find_object(root, &from, sp) {
            Some((con, key)) => match tree::get(con, &key) {
                Ok(Some(n)) => {
                    let mut bytes = Vec::new();
                    tree::marshal(Some(n), &mut bytes);
                    Some(Node::Raw(Cow::Owned(bytes)))
                }
                _ => None,
            },
            None => None,
        };
        let Some((con, key)) = tree::find_object(root, &path, sp) else {
            return Err(missing_dest());
        };
        tree::add(con, &key, copied)
            .map_err(|f| f.wrap(|m| format!("error while adding value during copy: {m}")))
    }
}

impl Patch {
    /// The number of operations (0 for a `null` or `[]` patch).
    pub fn len(&self) -> usize {
        self.ops.as_ref().map_or(0, Vec::len)
    }

    /// Whether the patch has no operations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `Patch.Apply`: applies the patch to a JSON document and returns the result as Go marshals
    /// it (compact; decoded objects with sorted keys; untouched subtrees byte-for-byte apart from
    /// compaction and HTML escaping). An empty document is returned unchanged, as Go does.
    pub fn apply(&self, doc: &[u8]) -> Result<Vec<u8>, ApplyError> {
        if doc.is_empty() {
            return Ok(Vec::new());
        }
        let root = self.apply_tree(doc, &Scan, false)?;
        let mut out = Vec::with_capacity(doc.len() + 64);
        tree::marshal(Some(&root), &mut out);
        Ok(out)
    }

    /// [`Patch::apply`] up to the marshalling of the result: the patched document as a lazily
    /// decoded tree whose untouched nodes are still slices of `doc` (which must not be empty).
    /// `sp` splits raw nodes; a `valid` document is known to be valid JSON without surrounding
    /// whitespace that Go's decoder accepts, so `sp` splits it too.
    fn apply_tree<'a>(
        &'a self,
        doc: &'a [u8],
        sp: &dyn Splitter,
        valid: bool,
    ) -> Result<Node<'a>, ApplyError> {
        let first = doc.first().copied().unwrap_or(b' ');
        let mut children = Vec::new();
        let raw = if valid && sp.split(doc, &mut children) {
            doc
        } else {
            let (s, e) =
                scan::scan(doc, &mut children).map_err(|message| ApplyError { message })?;
            doc.get(s..e).unwrap_or_default()
        };
        let mut root = if first == b'[' {
            Node::Ary(tree::ary_from_children(doc, &children))
        } else {
            match raw.first() {
                Some(b'{') => Node::Doc(tree::obj_from_children(doc, &children)),
                Some(b'n') => Node::Doc(ObjMap {
                    nil: true,
                    entries: Vec::new(),
                }),
                _ => {
                    return Err(ApplyError {
                        message: type_error(raw, "jsonpatch.partialDoc"),
                    });
                }
            }
        };
        for op in self.ops.iter().flatten() {
            match op {
                Some(op) => op.apply(&mut root, sp)?,
                None => {
                    return Err(ApplyError {
                        message: "Unexpected kind: unknown".to_owned(),
                    });
                }
            }
        }
        Ok(root)
    }

    /// Serializes `doc` as Go's encoder would (compact, HTML-escaped strings, Go float format, map
    /// iteration order), applies the patch and parses the result back. Integers beyond `i64`/`u64`
    /// come back as floats unless serde_json's `arbitrary_precision` is enabled; invalid UTF-8 and
    /// unpaired surrogates in the result become U+FFFD, as Go's decoder would make them.
    pub fn apply_to_value(&self, doc: &serde_json::Value) -> Result<serde_json::Value, ApplyError> {
        self.apply_prepared(&Prepared::new(doc))
    }

    /// The patch as Go's `json.Marshal` re-encodes the decoded `[]map[string]*json.RawMessage`:
    /// members sorted by key, values compacted and HTML-escaped, no whitespace; `null` for a
    /// `null` patch. Invalid UTF-8 inside values becomes U+FFFD.
    pub fn to_go_json(&self) -> String {
        let Some(ops) = &self.ops else {
            return "null".to_owned();
        };
        let mut out = Vec::with_capacity(64 * ops.len() + 2);
        out.push(b'[');
        for (i, op) in ops.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let Some(op) = op else {
                out.extend_from_slice(b"null");
                continue;
            };
            out.push(b'{');
            for (j, (k, v)) in op.members.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                gostr::append_string(&mut out, k);
                out.push(b':');
                match v {
                    Some(raw) => gostr::compact(&mut out, raw, true),
                    None => out.extend_from_slice(b"null"),
                }
            }
            out.push(b'}');
        }
        out.push(b']');
        match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => gostr::lossy(e.as_bytes()),
        }
    }
}

/// Parses what [`Patch::apply`] returned, as [`Patch::apply_to_value`] does: invalid UTF-8 and
/// unpaired surrogates become U+FFFD; a document serde_json cannot represent is an error.
///
/// A document nested deeper than kube-apiserver reads (a deep value added at a deep place) is
/// the error of the one reader of a patched object there, the decode into its kind
/// ([`crate::json::decode_depth_error`]).
pub fn parse_patched(out: &[u8]) -> Result<serde_json::Value, ApplyError> {
    let e = match crate::json::from_slice(out) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Some(bracket) = crate::json::exceeded_depth(&e) {
        return Err(ApplyError {
            message: crate::json::decode_depth_error(bracket),
        });
    }
    crate::json::from_slice(&sanitize(out)).map_err(|e| ApplyError {
        message: format!("patched document is not representable as a JSON value: {e}"),
    })
}

/// Rewrites every string of valid JSON through Go's decoding (invalid UTF-8 and unpaired
/// surrogates → U+FFFD) so that serde_json accepts it.
fn sanitize(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let mut i = 0;
    while let Some(&c) = json.get(i) {
        if c == b'"' {
            let end = scan::string_end(json, i).unwrap_or(json.len());
            gostr::append_string(
                &mut out,
                &gostr::unquote(json.get(i..end).unwrap_or_default()),
            );
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(patch: &str, doc: &str) -> Result<String, String> {
        let p = decode(patch.as_bytes()).map_err(|e| format!("DECODE {e}"))?;
        p.apply(doc.as_bytes())
            .map(|b| String::from_utf8(b).unwrap())
            .map_err(|e| e.message)
    }

    #[test]
    fn webhook_server_patches() {
        assert_eq!(
            decode(b"[{").unwrap_err().message,
            "unexpected end of JSON input"
        );
        assert_eq!(
            decode(br#"[{"op": "add", "CORRUPTED_KEY":}]"#)
                .unwrap_err()
                .message,
            "invalid character '}' looking for beginning of value"
        );
    }

    #[test]
    fn decode_type_errors() {
        let e = |s: &str| decode(s.as_bytes()).unwrap_err().message;
        assert_eq!(
            e("{}"),
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
        );
        assert_eq!(
            e("\"x\""),
            "json: cannot unmarshal string into Go value of type jsonpatch.Patch"
        );
        assert_eq!(
            e("1"),
            "json: cannot unmarshal number into Go value of type jsonpatch.Patch"
        );
        assert_eq!(
            e("[1, true]"),
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation"
        );
        assert_eq!(decode(b" null ").unwrap().len(), 0);
        assert_eq!(decode(b"[null]").unwrap().len(), 1);
    }

    #[test]
    fn to_go_json_sorts_compacts_and_escapes() {
        let p = decode(
            "[ {\"value\" : { \"b\" : [ 1 , 2 ] , \"a\" : \"<x> & y\u{2028}\" }, \"path\":\"/a\", \"op\":\"add\", \"op\":\"replace\"}, null ]"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            p.to_go_json(),
            r#"[{"op":"replace","path":"/a","value":{"b":[1,2],"a":"\u003cx\u003e \u0026 y\u2028"}},null]"#
        );
        let p = decode(br#"[{"op":"remove","path":"/metadata/labels/remove","\u003ck":null}]"#)
            .unwrap();
        assert_eq!(
            p.to_go_json(),
            r#"[{"\u003ck":null,"op":"remove","path":"/metadata/labels/remove"}]"#
        );
        assert_eq!(decode(b"null").unwrap().to_go_json(), "null");
        assert_eq!(decode(b"[]").unwrap().to_go_json(), "[]");
    }

    #[test]
    fn lazy_nodes_keep_raw_bytes() {
        let doc = r#"{"z":{"y":1,"x":"\u0041<"},"a":{"d":1,"c":2}}"#;
        assert_eq!(
            apply(r#"[{"op":"add","path":"/a/e","value":3}]"#, doc).unwrap(),
            r#"{"a":{"c":2,"d":1,"e":3},"z":{"y":1,"x":"\u0041\u003c"}}"#
        );
        assert_eq!(
            apply(r#"[{"op":"copy","from":"/z","path":"/q"}]"#, doc).unwrap(),
            r#"{"a":{"d":1,"c":2},"q":{"y":1,"x":"\u0041\u003c"},"z":{"y":1,"x":"\u0041\u003c"}}"#
        );
        // Copying marshals the source, so a later raw-byte test sees Go's escaping.
        assert!(apply(
            r#"[{"op":"add","path":"/s","value":"<"},{"op":"test","path":"/s","value":"<"},{"op":"copy","from":"/s","path":"/t"},{"op":"test","path":"/t","value":"<"}]"#,
            "{}"
        )
        .unwrap_err()
        .contains("testing value /t failed"));
    }

    #[test]
    fn go_panics_become_errors() {
        assert_eq!(
            apply(r#"[{"op":"add","path":"/a","value":1}]"#, "null").unwrap_err(),
            "panic: assignment to entry in nil map"
        );
        assert_eq!(apply("[]", "null").unwrap(), "null");
        assert_eq!(
            apply(
                r#"[{"op":"test","path":"/a","value":[null]}]"#,
                r#"{"a":[null]}"#
            )
            .unwrap_err(),
            format!("panic: {}", tree::NIL_DEREF)
        );
        assert_eq!(
            apply(r#"[{"op":"replace","path":""}]"#, "{}").unwrap_err(),
            format!("panic: {}", tree::NIL_DEREF)
        );
    }

    #[test]
    fn misc_error_texts() {
        assert_eq!(
            apply(r#"[{"op":"replace","path":"","value":1}]"#, "{}").unwrap_err(),
            "replace operation value must be object or array: %!w(<nil>)"
        );
        assert_eq!(
            apply(r#"[{"op":"replace","value":1}]"#, "{}").unwrap_err(),
            "replace operation failed to decode path: operation missing path field: missing value"
        );
        assert_eq!(
            apply(r#"[{"op":"move","path":"/a","from":[]}]"#, "{}").unwrap_err(),
            "move operation failed to decode from: json: cannot unmarshal array into Go value of type string"
        );
        assert_eq!(
            apply(r#"[{"op":"add","path":"/a/x","value":1}]"#, r#"{"a":[]}"#).unwrap_err(),
            "error in add for path: '/a/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            apply(r#"[null]"#, "{}").unwrap_err(),
            "Unexpected kind: unknown"
        );
        assert_eq!(
            apply(r#"[{"op":1}]"#, "{}").unwrap_err(),
            "Unexpected kind: unknown"
        );
        assert_eq!(apply("[]", "[1]").unwrap(), "[1]");
        assert_eq!(
            apply("[]", " [1]").unwrap_err(),
            "json: cannot unmarshal array into Go value of type jsonpatch.partialDoc"
        );
        assert_eq!(
            apply("[]", "{").unwrap_err(),
            "unexpected end of JSON input"
        );
        assert_eq!(apply("[]", "").unwrap(), "");
    }
}

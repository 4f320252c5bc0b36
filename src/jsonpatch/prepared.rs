//! Patching a decoded JSON value ([`Patch::apply_to_value`]) without decoding the whole result
//! again.
//!
//! The value is marshalled as Go does while noting where each sub-value's bytes lie. After the
//! patch, every node of the result that is still an untouched slice of those bytes is the
//! sub-value it was marshalled from, so it is cloned instead of decoded; only the containers the
//! patch walked through and the values it brought in are built or decoded.
//!
//! Cloning stands in for decoding only where the two give the same value: never for documents
//! holding floating-point numbers (serde_json's default float parsing is not exact, so a float
//! need not decode to itself), and never for results nested anywhere near serde_json's recursion
//! limit. Anything else (a value the patch brought in that does not decode on its own, say) falls
//! back to marshalling the whole result and decoding it, as before.

use std::io::Write as _;

use serde_json::{Map, Value};

use super::scan::Child;
use super::tree::{self, Node, Scan, Splitter};
use super::{ApplyError, Patch, gostr, parse_patched};

/// Results nesting deeper than this are decoded whole: serde_json refuses documents nested 128
/// levels deep, and a result assembled from parts must fail wherever the whole would.
pub(super) const MAX_ASSEMBLED_DEPTH: usize = 100;

/// A JSON value marshalled as Go's `json.Marshal` writes it, ready for [`Patch::apply_prepared`].
#[derive(Debug)]
pub struct Prepared<'v> {
    bytes: Vec<u8>,
    /// Every sub-value in marshalling order (so by `start`), when recorded.
    spans: Vec<Span<'v>>,
    record: bool,
    /// The document holds no float and does not nest too deeply (see the module notes).
    reusable: bool,
    /// `bytes` are also what serde_json writes for the document: it holds no float and no string
    /// with a character Go escapes and serde_json does not (`<`, `>`, `&`, U+2028, U+2029).
    serde_equal: bool,
    /// Levels of containers in the document.
    depth: usize,
    /// Where the key of the object member being written starts.
    key_start: usize,
}

/// Where one sub-value was written.
#[derive(Debug)]
struct Span<'v> {
    start: usize,
    end: usize,
    /// Where its key starts, for a member of an object (its key ends before `start - 1`).
    key: usize,
    /// The index of the first span after this sub-value's.
    next: usize,
    /// Levels of containers in the sub-value (0 for a scalar).
    depth: usize,
    value: &'v Value,
}

impl<'v> Prepared<'v> {
    /// Marshals `doc`, noting where each sub-value lies.
    pub fn new(doc: &'v Value) -> Prepared<'v> {
        Self::marshal(doc, true)
    }

    fn marshal(doc: &'v Value, record: bool) -> Prepared<'v> {
        // Room for a typical object up front: growing through the small sizes costs more than
        // the unused capacity of a small document.
        let mut p = Prepared {
            bytes: Vec::with_capacity(4096),
            spans: Vec::with_capacity(if record { 256 } else { 0 }),
            record,
            reusable: true,
            serde_equal: true,
            depth: 0,
            key_start: 0,
        };
        p.depth = p.write(doc);
        if p.depth > MAX_ASSEMBLED_DEPTH {
            p.reusable = false;
        }
        p
    }

    /// Go's marshalling of the document.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The marshalled bytes, without the notes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Writes `v` as Go's `json.Marshal` does; returns its nesting depth.
    fn write(&mut self, v: &'v Value) -> usize {
        let start = self.bytes.len();
        let at = self.spans.len();
        if self.record {
            self.spans.push(Span {
                start,
                end: start,
                key: self.key_start,
                next: at + 1,
                depth: 0,
                value: v,
            });
        }
        let depth = match v {
            Value::Null => {
                self.bytes.extend_from_slice(b"null");
                0
            }
            Value::Bool(b) => {
                self.bytes
                    .extend_from_slice(if *b { b"true" } else { b"false" });
                0
            }
            Value::Number(n) => {
                match n.as_f64().filter(|_| n.is_f64()) {
                    Some(f) => {
                        self.reusable = false;
                        self.serde_equal = false;
                        gostr::push_go_float(&mut self.bytes, f);
                    }
                    None => match (n.as_u64(), n.as_i64()) {
                        (Some(u), _) => crate::gofmt::push_decimal(&mut self.bytes, false, u),
                        (None, Some(i)) => {
                            crate::gofmt::push_decimal(&mut self.bytes, i < 0, i.unsigned_abs())
                        }
                        // Writing to a Vec cannot fail.
                        (None, None) => {
                            let _ = write!(self.bytes, "{n}");
                        }
                    },
                }
                0
            }
            Value::String(s) => {
                if gostr::append_string_html(&mut self.bytes, s) {
                    self.serde_equal = false;
                }
                0
            }
            Value::Array(a) => {
                self.bytes.push(b'[');
                let mut depth = 0;
                for (i, e) in a.iter().enumerate() {
                    if i > 0 {
                        self.bytes.push(b',');
                    }
                    depth = depth.max(self.write(e));
                }
                self.bytes.push(b']');
                depth + 1
            }
            Value::Object(m) => {
                self.bytes.push(b'{');
                let mut depth = 0;
                for (i, (k, e)) in m.iter().enumerate() {
                    if i > 0 {
                        self.bytes.push(b',');
                    }
                    self.key_start = self.bytes.len();
                    if gostr::append_string_html(&mut self.bytes, k) {
                        self.serde_equal = false;
                    }
                    self.bytes.push(b':');
                    depth = depth.max(self.write(e));
                }
                self.bytes.push(b'}');
                depth + 1
            }
        };
        let next = self.spans.len();
        if let Some(span) = self.spans.get_mut(at).filter(|_| self.record) {
            span.end = self.bytes.len();
            span.next = next;
            span.depth = depth;
        }
        depth
    }

    /// The sub-value whose marshalling `raw` is, if `raw` is a slice of this document's bytes.
    fn span_of(&self, raw: &[u8]) -> Option<&Span<'v>> {
        self.span_index(raw).and_then(|i| self.spans.get(i))
    }

    /// The index of [`Prepared::span_of`]'s span.
    fn span_index(&self, raw: &[u8]) -> Option<usize> {
        let base = self.bytes.as_ptr() as usize;
        let start = (raw.as_ptr() as usize).checked_sub(base)?;
        if start + raw.len() > self.bytes.len() {
            return None;
        }
        let i = self.spans.binary_search_by_key(&start, |s| s.start).ok()?;
        self.spans
            .get(i)
            .filter(|s| s.end == start + raw.len())
            .map(|_| i)
    }

    /// The value a node of the patched tree decodes to, at `depth` containers down; `None` when
    /// it cannot be assembled (see the module notes).
    fn assemble(&self, node: Option<&Node<'_>>, depth: usize) -> Option<Value> {
        match node {
            None | Some(Node::Null) => Some(Value::Null),
            Some(Node::Raw(raw)) => match self.span_of(raw) {
                Some(span) => {
                    (depth + span.depth <= MAX_ASSEMBLED_DEPTH).then(|| span.value.clone())
                }
                None if depth + nesting(raw) <= MAX_ASSEMBLED_DEPTH => {
                    crate::json::from_slice(raw).ok()
                }
                None => None,
            },
            Some(Node::Doc(m)) if m.nil => Some(Value::Null),
            Some(Node::Doc(m)) if depth < MAX_ASSEMBLED_DEPTH => m
                .entries
                .iter()
                .map(|(k, v)| Some((k.to_string(), self.assemble(v.as_ref(), depth + 1)?)))
                .collect::<Option<Map<String, Value>>>()
                .map(Value::Object),
            Some(Node::Ary(a)) if depth < MAX_ASSEMBLED_DEPTH => a
                .iter()
                .map(|v| self.assemble(v.as_ref(), depth + 1))
                .collect::<Option<Vec<Value>>>()
                .map(Value::Array),
            Some(Node::Doc(_) | Node::Ary(_)) => None,
        }
    }
}

/// Go's `json.Marshal` of a decoded JSON value: the document [`Patch::apply_to_value`] hands to
/// [`Patch::apply`].
pub fn go_marshal(doc: &Value) -> Vec<u8> {
    Prepared::marshal(doc, false).into_bytes()
}

/// How deeply valid JSON bytes nest (0 for a scalar).
fn nesting(raw: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &c in raw {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

impl Splitter for Prepared<'_> {
    /// Children of the document's own sub-values come from the notes taken while marshalling;
    /// anything else is scanned.
    fn split(&self, raw: &[u8], children: &mut Vec<Child>) -> bool {
        let Some(i) = self.span_index(raw) else {
            return Scan.split(raw, children);
        };
        children.clear();
        let Some(span) = self.spans.get(i) else {
            return false;
        };
        let base = span.start;
        let object = raw.first() == Some(&b'{');
        let mut j = i + 1;
        while j < span.next {
            let Some(c) = self.spans.get(j) else {
                return false;
            };
            let key = if object {
                (c.key - base, c.start - 1 - base)
            } else {
                (0, 0)
            };
            children.push(Child {
                key,
                val: (c.start - base, c.end - base),
            });
            j = c.next;
        }
        true
    }
}

/// Writes a value as serde_json does.
fn write_value<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing a string or a JSON value to a Vec cannot fail.
    let _ = serde_json::to_writer(out, value);
}

impl Prepared<'_> {
    /// Writes `value`, what [`Prepared::assemble`] made of `node`, as serde_json writes it:
    /// untouched sub-values are copied from `bytes` (serde_json's own when `serde_equal`), the
    /// rest is serialised.
    fn write_serde(&self, node: Option<&Node<'_>>, value: &Value, out: &mut Vec<u8>) {
        let start = out.len();
        match (node, value) {
            (Some(Node::Raw(raw)), _) if self.span_of(raw).is_some() => {
                out.extend_from_slice(raw);
            }
            (Some(Node::Doc(m)), Value::Object(map)) if !m.nil && m.entries.len() == map.len() => {
                out.push(b'{');
                for (i, ((key, child), (k, v))) in m.entries.iter().zip(map).enumerate() {
                    if key.as_ref() != k.as_str() {
                        out.truncate(start);
                        return write_value(out, value);
                    }
                    if i > 0 {
                        out.push(b',');
                    }
                    write_value(out, k.as_str());
                    out.push(b':');
                    self.write_serde(child.as_ref(), v, out);
                }
                out.push(b'}');
            }
            (Some(Node::Ary(a)), Value::Array(vs)) if a.len() == vs.len() => {
                out.push(b'[');
                for (i, (child, v)) in a.iter().zip(vs).enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    self.write_serde(child.as_ref(), v, out);
                }
                out.push(b']');
            }
            _ => write_value(out, value),
        }
    }
}

impl Patch {
    /// [`Patch::apply_to_value`] on a prepared document: the same result, built mostly from
    /// clones of the document's untouched sub-values.
    pub fn apply_prepared(&self, doc: &Prepared<'_>) -> Result<Value, ApplyError> {
        self.apply_assembled(doc, false).map(|(value, _)| value)
    }

    /// [`Patch::apply_prepared`], also returning the result as `serde_json::to_string` writes it
    /// when that can be taken from the prepared bytes without serialising the whole result
    /// (`None` otherwise: a document with floats or with characters Go escapes differently).
    pub fn apply_prepared_json(
        &self,
        doc: &Prepared<'_>,
    ) -> Result<(Value, Option<String>), ApplyError> {
        self.apply_assembled(doc, true)
    }

    fn apply_assembled(
        &self,
        doc: &Prepared<'_>,
        want_json: bool,
    ) -> Result<(Value, Option<String>), ApplyError> {
        let valid = doc.record && doc.depth <= MAX_ASSEMBLED_DEPTH;
        let root = self.apply_tree(&doc.bytes, doc, valid)?;
        if doc.reusable
            && let Some(value) = doc.assemble(Some(&root), 0)
        {
            let json = (want_json && doc.serde_equal)
                .then(|| {
                    let mut out = Vec::with_capacity(doc.bytes.len() + 64);
                    doc.write_serde(Some(&root), &value, &mut out);
                    String::from_utf8(out).ok()
                })
                .flatten();
            return Ok((value, json));
        }
        let mut out = Vec::with_capacity(doc.bytes.len() + 64);
        tree::marshal(Some(&root), &mut out);
        parse_patched(&out).map(|value| (value, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonpatch::decode;
    use proptest::prelude::*;
    use serde_json::json;

    /// What `apply_to_value` did before documents were prepared: marshal, apply, decode it all.
    fn whole(patch: &Patch, doc: &Value) -> Result<Value, ApplyError> {
        parse_patched(&patch.apply(&go_marshal(doc))?)
    }

    fn check(patch: &[u8], doc: &Value) {
        let p = decode(patch).unwrap();
        let prepared = Prepared::new(doc);
        assert_eq!(prepared.bytes(), go_marshal(doc).as_slice());
        assert_eq!(
            p.apply_prepared(&prepared),
            whole(&p, doc),
            "{}",
            String::from_utf8_lossy(patch)
        );
        if let Ok((value, json)) = p.apply_prepared_json(&prepared) {
            assert_eq!(Ok(value.clone()), whole(&p, doc));
            if let Some(json) = json {
                assert_eq!(json, serde_json::to_string(&value).unwrap());
            }
        }
    }

    #[test]
    fn the_notes_split_values_as_scanning_does() {
        let doc = json!({
            "": [[], {}, [null, {"a\"b": [1, "x"]}], ""],
            "m": {"k": {"e": {}}, "<": -1, "s": "\u{2028}"},
            "z": true,
        });
        let p = Prepared::new(&doc);
        assert_eq!(p.spans.len(), 17);
        for s in &p.spans {
            let raw = &p.bytes[s.start..s.end];
            let (mut noted, mut scanned) = (Vec::new(), Vec::new());
            assert_eq!(
                p.split(raw, &mut noted),
                crate::jsonpatch::scan::split(raw, &mut scanned)
            );
            assert_eq!(format!("{noted:?}"), format!("{scanned:?}"));
        }
    }

    #[test]
    fn the_result_json_is_serde_jsons_when_go_writes_the_same() {
        let doc = json!({
            "metadata": {"labels": {"a": "b\u{1}\n\"x\""}, "name": "x", "list": [1, -2, {}]},
            "spec": {"containers": [{"name": "c", "u": u64::MAX}]},
        });
        for (patch, expected) in [
            (
                r#"[{"op":"add","path":"/spec/containers/-","value":{"name":"s","image":"p:1","name":"t","a":[1.0,2e2]}}]"#,
                true,
            ),
            (
                r#"[{"op":"move","from":"/metadata/labels","path":"/spec/l"}]"#,
                true,
            ),
            (r#"[{"op":"add","path":"/spec/x","value":"<&>"}]"#, true),
            (r#"[{"op":"replace","path":"","value":[1]}]"#, true),
        ] {
            let p = decode(patch.as_bytes()).unwrap();
            let (value, json) = p.apply_prepared_json(&Prepared::new(&doc)).unwrap();
            assert_eq!(json.is_some(), expected, "{patch}");
            assert_eq!(
                json.unwrap(),
                serde_json::to_string(&value).unwrap(),
                "{patch}"
            );
        }
        for doc in [
            json!({"a": "<"}),
            json!({"<": 1}),
            json!({"f": 1.5}),
            json!({"a": "\u{2028}"}),
        ] {
            let p = decode(br#"[{"op":"add","path":"/b","value":1}]"#).unwrap();
            let (value, json) = p.apply_prepared_json(&Prepared::new(&doc)).unwrap();
            assert_eq!(json, None, "{doc}");
            assert_eq!(Ok(value), whole(&p, &doc));
        }
    }

    fn nested(levels: usize) -> Value {
        (0..levels).fold(json!(1), |v, _| json!([v]))
    }

    #[test]
    fn assembled_results_equal_decoded_ones() {
        let doc = json!({
            "metadata": {"labels": {"a": "<b>"}, "name": "x\u{2028}"},
            "spec": {"containers": [{"name": "c", "n": -3, "u": u64::MAX}], "list": [[], {}, null]},
        });
        for patch in [
            r#"[{"op":"add","path":"/metadata/labels/b","value":"c"}]"#,
            r#"[{"op":"add","path":"/spec/containers/-","value":{"name":"s","image":"p:1","x":1.5}}]"#,
            r#"[{"op":"move","from":"/spec/containers/0","path":"/metadata/moved"}]"#,
            r#"[{"op":"copy","from":"/spec","path":"/spec/list/0"}]"#,
            r#"[{"op":"remove","path":"/spec"},{"op":"replace","path":"/metadata/name","value":null}]"#,
            r#"[{"op":"test","path":"/spec/list","value":[[],{},null]}]"#,
            r#"[{"op":"add","path":"/d","value":{"k":1,"k":2,"\u00e9":"\u0041\ud800"}}]"#,
            r#"[{"op":"add","path":"/d","value":1e400}]"#,
            r#"[{"op":"replace","path":"","value":{"fresh":[1,2]}}]"#,
            r#"[]"#,
        ] {
            check(patch.as_bytes(), &doc);
        }
        check(
            b"[{\"op\":\"add\",\"path\":\"/d\",\"value\":\"\xff\"}]",
            &doc,
        );
    }

    #[test]
    fn floats_and_deep_documents_are_decoded_whole() {
        let add = r#"[{"op":"add","path":"/b","value":true}]"#;
        check(add.as_bytes(), &json!({"f": 1.0, "g": 2.5}));
        assert!(!Prepared::new(&json!({"f": 1.0})).reusable);
        for levels in [98, 99, 100, 101, 126, 127, 128, 140] {
            check(add.as_bytes(), &json!({"deep": nested(levels)}));
        }
        for levels in [90, 97, 98, 99, 126, 127] {
            let value = serde_json::to_string(&nested(levels)).unwrap();
            let patch = format!(r#"[{{"op":"add","path":"/a/b","value":{value}}}]"#);
            check(patch.as_bytes(), &json!({"a": {"b": 0}}));
            check(
                patch.as_bytes(),
                &json!({"a": {"b": 0}, "deep": nested(60)}),
            );
        }
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            "\\PC{0,4}".prop_map(Value::String),
            proptest::sample::select(vec!["<", "\u{2028}", "\"\\", "\n"]).prop_map(Value::from),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        proptest::sample::select(vec!["a", "b", "c", "<", "~1"]).prop_map(str::to_owned)
    }

    fn value() -> impl Strategy<Value = Value> {
        scalar().prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map(key(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn path() -> impl Strategy<Value = String> {
        let seg = prop_oneof![
            key(),
            proptest::sample::select(vec!["0", "1", "-", "-1"]).prop_map(str::to_owned),
        ];
        proptest::collection::vec(seg, 0..4)
            .prop_map(|s| s.iter().map(|s| format!("/{s}")).collect())
    }

    fn operation() -> impl Strategy<Value = Value> {
        let op = proptest::sample::select(vec!["add", "remove", "replace", "move", "copy", "test"]);
        (op, path(), path(), value()).prop_map(
            |(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        #[test]
        fn prepared_patching_agrees_with_decoding_the_whole(
            doc in value(),
            ops in proptest::collection::vec(operation(), 0..4),
        ) {
            let patch = serde_json::to_vec(&ops).unwrap();
            let p = decode(&patch).unwrap();
            prop_assert_eq!(p.apply_prepared(&Prepared::new(&doc)), whole(&p, &doc));
            if let Ok((value, Some(json))) = p.apply_prepared_json(&Prepared::new(&doc)) {
                prop_assert_eq!(json, serde_json::to_string(&value).unwrap());
            }
        }
    }
}

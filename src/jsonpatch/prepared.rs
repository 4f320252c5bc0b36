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

use super::tree::{self, Node};
use super::{ApplyError, Patch, gostr, parse_patched};

/// Results nesting deeper than this are decoded whole: serde_json refuses documents nested 128
/// levels deep, and a result assembled from parts must fail wherever the whole would.
const MAX_ASSEMBLED_DEPTH: usize = 100;

/// A JSON value marshalled as Go's `json.Marshal` writes it, ready for [`Patch::apply_prepared`].
#[derive(Debug)]
pub struct Prepared<'v> {
    bytes: Vec<u8>,
    /// Every sub-value in marshalling order (so by `start`), when recorded.
    spans: Vec<Span<'v>>,
    record: bool,
    /// The document holds no float and does not nest too deeply (see the module notes).
    reusable: bool,
}

/// Where one sub-value was written.
#[derive(Debug)]
struct Span<'v> {
    start: usize,
    end: usize,
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
        };
        if p.write(doc) > MAX_ASSEMBLED_DEPTH {
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
                        gostr::push_go_float(&mut self.bytes, f);
                    }
                    None => match (n.as_u64(), n.as_i64()) {
                        (Some(u), _) => push_decimal(&mut self.bytes, false, u),
                        (None, Some(i)) => push_decimal(&mut self.bytes, i < 0, i.unsigned_abs()),
                        // Writing to a Vec cannot fail.
                        (None, None) => {
                            let _ = write!(self.bytes, "{n}");
                        }
                    },
                }
                0
            }
            Value::String(s) => {
                gostr::append_string(&mut self.bytes, s);
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
                    gostr::append_string(&mut self.bytes, k);
                    self.bytes.push(b':');
                    depth = depth.max(self.write(e));
                }
                self.bytes.push(b'}');
                depth + 1
            }
        };
        if let Some(span) = self.spans.get_mut(at).filter(|_| self.record) {
            span.end = self.bytes.len();
            span.depth = depth;
        }
        depth
    }

    /// The sub-value whose marshalling `raw` is, if `raw` is a slice of this document's bytes.
    fn span_of(&self, raw: &[u8]) -> Option<&Span<'v>> {
        let base = self.bytes.as_ptr() as usize;
        let start = (raw.as_ptr() as usize).checked_sub(base)?;
        if start + raw.len() > self.bytes.len() {
            return None;
        }
        let i = self.spans.binary_search_by_key(&start, |s| s.start).ok()?;
        self.spans.get(i).filter(|s| s.end == start + raw.len())
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
                    serde_json::from_slice(raw).ok()
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

/// Appends an integer in decimal, as Go (and serde_json) write integers.
fn push_decimal(out: &mut Vec<u8>, negative: bool, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(digits.get(at..).unwrap_or_default());
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

impl Patch {
    /// [`Patch::apply_to_value`] on a prepared document: the same result, built mostly from
    /// clones of the document's untouched sub-values.
    pub fn apply_prepared(&self, doc: &Prepared<'_>) -> Result<Value, ApplyError> {
        let root = self.apply_tree(&doc.bytes)?;
        if doc.reusable
            && let Some(value) = doc.assemble(Some(&root), 0)
        {
            return Ok(value);
        }
        let mut out = Vec::with_capacity(doc.bytes.len() + 64);
        tree::marshal(Some(&root), &mut out);
        parse_patched(&out)
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
        }
    }
}

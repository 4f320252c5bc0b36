//! AdmissionReview documents (`admission.k8s.io/v1` and `v1beta1`), replayed as captured. A
//! review that also carries a `response` (a tap logging both directions) is read for its
//! `request`.
//!
//! [`read`] takes the request straight from the text; whatever it does not decide on its own
//! goes through [`request`] on the parsed document, which gives every error.

use std::borrow::Cow;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::api::{GroupVersionKind, GroupVersionResource, Operation, UserInfo};
use crate::engine::{Attributes, Object};
use crate::replay::{CapturedRequest, NamespaceState, SourceRef};

use super::intern::{Interner, Recent};
use super::store::Store;
use crate::scan::{self, CHECKED_DEPTH};

/// A field that is wrong, and why.
pub(crate) struct Bad {
    /// Path of the field (`request.operation`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> Bad {
    Bad {
        field: field.to_string(),
        message: message.into(),
    }
}

/// The request of an AdmissionReview document.
pub(crate) fn request(
    doc: Value,
    source: SourceRef,
    store: &Store,
) -> Result<CapturedRequest, (Bad, SourceRef)> {
    match attributes_and_uid(doc) {
        Ok((attrs, uid)) => Ok(captured(attrs, uid, source, store)),
        Err(bad) => Err((bad, source)),
    }
}

/// The captured request of `attrs` and `uid` found at `source`.
pub(crate) fn captured(
    attrs: Attributes,
    uid: String,
    source: SourceRef,
    store: &Store,
) -> CapturedRequest {
    CapturedRequest {
        source,
        uid,
        namespace: namespace_state(&attrs, store),
        attrs,
        audit: None,
        notes: Vec::new(),
        params: None,
    }
}

/// The request of the AdmissionReview written as `text` and its uid, read without parsing the
/// review as a whole: the members are found by the scanner, each field is deserialized from its
/// own bytes, the user and options are shared through `intern` by their text, and objects in
/// compact form are kept as their text, to be parsed when read ([`Object::from_checked_json`]).
/// Every byte is checked as a full parse would check it.
///
/// `None` when the text holds anything this does not decide alone: an error to report, a kind
/// other than `"AdmissionReview"` written as such, a member name written with escapes, a member
/// of the review or of its request that repeats, numbers or nesting near a parser's limits.
/// [`request`] on the parsed document then gives the answer, so results and errors are always
/// those of a full parse.
pub(crate) fn read(text: &[u8], intern: &mut Interner) -> Option<(Attributes, String)> {
    let text = std::str::from_utf8(text).ok()?;
    let b = text.as_bytes();
    let mut version = None;
    let mut kind = None;
    let mut fields: Option<Fields<'_>> = None;
    let end = scan::checked_members(b, 0, 1, |key, v| match key {
        b"apiVersion" if version.is_none() => {
            let end = scan::checked_value_end(b, v, 1)?;
            version = Some(&b[v..end]);
            Some(end)
        }
        b"kind" if kind.is_none() => {
            let end = scan::checked_value_end(b, v, 1)?;
            kind = Some(&b[v..end]);
            Some(end)
        }
        b"request" if fields.is_none() => {
            let mut f = Fields::default();
            let end =
                scan::checked_members(b, v, MEMBER_DEPTH, |key, v| f.member(text, key, v, intern))?;
            fields = Some(f);
            Some(end)
        }
        b"apiVersion" | b"kind" | b"request" => None,
        _ if key.contains(&b'\\') => None,
        _ => scan::checked_value_end(b, v, 1),
    })?;
    if !scan::only_whitespace_after(b, end) {
        return None;
    }
    if !matches!(
        version?,
        br#""admission.k8s.io/v1""# | br#""admission.k8s.io/v1beta1""#
    ) || kind? != br#""AdmissionReview""# {
        return None;
    }
    fields?.finish(intern)
}

/// Nesting of the request's members: the review and the request hold them.
const MEMBER_DEPTH: usize = 2;

/// The request members [`read`] takes, as read so far.
#[derive(Default)]
struct Fields<'t> {
    /// Members met, by their bit in [`Fields::slot`]: a repeated one is left to a full parse.
    seen: u16,
    operation: Option<Operation>,
    kind: Option<Arc<GroupVersionKind>>,
    resource: Option<Arc<GroupVersionResource>>,
    sub_resource: Option<Cow<'t, str>>,
    namespace: Option<Cow<'t, str>>,
    name: Option<Cow<'t, str>>,
    uid: Option<Cow<'t, str>>,
    object: Option<Object>,
    old_object: Option<Object>,
    dry_run: Option<bool>,
    options: Option<Arc<Value>>,
    user_info: Option<Arc<UserInfo>>,
}

impl<'t> Fields<'t> {
    fn slot(key: &[u8]) -> Option<u16> {
        Some(match key {
            b"operation" => 0,
            b"kind" => 1,
            b"resource" => 2,
            b"subResource" => 3,
            b"namespace" => 4,
            b"name" => 5,
            b"uid" => 6,
            b"object" => 7,
            b"oldObject" => 8,
            b"dryRun" => 9,
            b"options" => 10,
            b"userInfo" => 11,
            _ => return None,
        })
    }

    /// Reads the member `key` whose value starts at `v`; returns the value's end.
    fn member(
        &mut self,
        text: &'t str,
        key: &[u8],
        v: usize,
        intern: &mut Interner,
    ) -> Option<usize> {
        let b = text.as_bytes();
        let Some(slot) = Self::slot(key) else {
            if key.contains(&b'\\') {
                return None;
            }
            if let Some(((), n)) = intern.checked.find(&b[v..]) {
                return Some(v + n);
            }
            let end = scan::checked_value_end(b, v, MEMBER_DEPTH)?;
            intern.checked.remember(&b[v..end], ());
            return Some(end);
        };
        if self.seen & (1 << slot) != 0 {
            return None;
        }
        self.seen |= 1 << slot;
        if b[v..].starts_with(b"null") {
            // Null is absent; a required member then leaves the answer to a full parse.
            return Some(v + 4);
        }
        match slot {
            0 => {
                let (op, end) = string_at(text, v)?;
                self.operation = Some(Operation::parse(&op)?);
                Some(end)
            }
            1 => {
                let (kind, end) = typed(&mut intern.kinds, text, v)?;
                self.kind = Some(kind);
                Some(end)
            }
            2 => {
                let (resource, end) = typed(&mut intern.resources, text, v)?;
                self.resource = Some(resource);
                Some(end)
            }
            3..=6 => {
                let (s, end) = string_at(text, v)?;
                *match slot {
                    3 => &mut self.sub_resource,
                    4 => &mut self.namespace,
                    5 => &mut self.name,
                    _ => &mut self.uid,
                } = Some(s);
                Some(end)
            }
            7 | 8 => {
                let (object, end) = embedded_object(text, v)?;
                *if slot == 7 {
                    &mut self.object
                } else {
                    &mut self.old_object
                } = Some(object);
                Some(end)
            }
            9 => {
                let (value, end) = scan::bool_at(b, v)?;
                self.dry_run = Some(value);
                Some(end)
            }
            10 => {
                let (options, n) = intern.options_text(&b[v..], || {
                    embedded(text, v).map(|(value, end)| (value, end - v))
                })?;
                self.options = Some(options);
                Some(v + n)
            }
            _ => {
                if b[v] != b'{' {
                    return None;
                }
                let (user, n) = intern.user_text(
                    &b[v..],
                    || Some(scan::value_end(b, v).ok()? - v),
                    |n| {
                        if scan::checked_value_end(b, v, MEMBER_DEPTH)? != v + n {
                            return None;
                        }
                        crate::json::from_str(&text[v..v + n]).ok()
                    },
                )?;
                self.user_info = Some(user);
                Some(v + n)
            }
        }
    }

    /// The request, when it has what [`attributes_and_uid`] requires.
    fn finish(self, intern: &mut Interner) -> Option<(Attributes, String)> {
        let kind = self.kind?;
        let resource = self.resource?;
        if kind.version.is_empty()
            || kind.kind.is_empty()
            || resource.version.is_empty()
            || resource.resource.is_empty()
        {
            return None;
        }
        let owned = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned).unwrap_or_default();
        let attrs = Attributes {
            operation: self.operation?,
            kind,
            resource,
            sub_resource: owned(self.sub_resource),
            namespace: owned(self.namespace),
            name: owned(self.name),
            object: self.object.map(Arc::new),
            old_object: self.old_object.map(Arc::new),
            dry_run: self.dry_run.unwrap_or(false),
            options: self.options,
            user_info: match self.user_info {
                Some(user) => user,
                None => intern.user(Arc::default()),
            },
        };
        Some((attrs, owned(self.uid)))
    }
}

/// A member deserialized into a Rust type from the object starting at `v` (checked whole), or
/// found again by its text; and its end.
fn typed<T: DeserializeOwned + Clone, const N: usize>(
    recent: &mut Recent<T, N>,
    text: &str,
    v: usize,
) -> Option<(T, usize)> {
    let b = text.as_bytes();
    if let Some((known, n)) = recent.find(&b[v..]) {
        return Some((known.clone(), v + n));
    }
    if b[v] != b'{' {
        return None;
    }
    let end = scan::checked_value_end(b, v, MEMBER_DEPTH)?;
    let value: T = crate::json::from_str(&text[v..end]).ok()?;
    recent.remember(&b[v..end], value.clone());
    Some((value, end))
}

/// The object (`object`, `oldObject`) starting at `v`, and its end: kept as its text when that
/// is compact JSON within the checked limits, else parsed.
fn embedded_object(text: &str, v: usize) -> Option<(Object, usize)> {
    if text.as_bytes()[v] != b'{' {
        return None;
    }
    if let Some(found) = Object::checked_compact(text, v, MEMBER_DEPTH) {
        return Some(found);
    }
    let (value, end) = embedded(text, v)?;
    Some((Object::new(value), end))
}

/// An embedded object (`object`, `oldObject`, `options`) starting at `v`, and its end: parsed
/// where it stands, so that its end is where the parser stopped.
fn embedded(text: &str, v: usize) -> Option<(Value, usize)> {
    if text.as_bytes()[v] != b'{' {
        return None;
    }
    let mut values = serde_json::Deserializer::from_str(&text[v..]).into_iter::<Value>();
    let value = values.next()?.ok()?;
    if deeper_than(&value, CHECKED_DEPTH - MEMBER_DEPTH) {
        return None;
    }
    Some((value, v + values.byte_offset()))
}

/// Whether `value` nests deeper than `limit` (an object or array counting one).
fn deeper_than(value: &Value, limit: usize) -> bool {
    match value {
        Value::Object(m) => limit == 0 || m.values().any(|v| deeper_than(v, limit - 1)),
        Value::Array(a) => limit == 0 || a.iter().any(|v| deeper_than(v, limit - 1)),
        _ => false,
    }
}

/// The string starting at `v`, decoded, and its end.
fn string_at(text: &str, v: usize) -> Option<(Cow<'_, str>, usize)> {
    let end = scan::checked_string_end(text.as_bytes(), v)?;
    let inner = &text[v + 1..end - 1];
    if !inner.contains('\\') {
        return Some((Cow::Borrowed(inner), end));
    }
    Some((Cow::Owned(crate::json::from_str(&text[v..end]).ok()?), end))
}

/// The request of an AdmissionReview document as the dispatcher sees it, and its uid; the
/// document's parts are moved, not copied.
fn attributes_and_uid(doc: Value) -> Result<(Attributes, String), Bad> {
    let Value::Object(mut review) = doc else {
        return Err(bad("", "expected an object"));
    };
    match review.get("apiVersion").and_then(Value::as_str) {
        Some("admission.k8s.io/v1" | "admission.k8s.io/v1beta1") => {}
        Some(other) => {
            return Err(bad(
                "apiVersion",
                format!(
                    "unsupported AdmissionReview version {other:?} (admission.k8s.io/v1 or v1beta1)"
                ),
            ));
        }
        None => return Err(bad("apiVersion", "missing")),
    }
    let mut req = match review.remove("request") {
        Some(Value::Object(r)) => r,
        Some(Value::Null) | None if review.contains_key("response") => {
            return Err(bad(
                "request",
                "missing: a response alone cannot be replayed",
            ));
        }
        Some(Value::Null) | None => return Err(bad("request", "missing")),
        Some(_) => return Err(bad("request", "expected an object")),
    };
    let req = &mut req;
    let op_text: String = required(req, "operation")?;
    let operation = Operation::parse(&op_text).ok_or_else(|| {
        bad(
            "request.operation",
            format!("unknown operation {op_text:?}"),
        )
    })?;
    let kind: GroupVersionKind = required(req, "kind")?;
    if kind.version.is_empty() || kind.kind.is_empty() {
        return Err(bad("request.kind", "needs a version and a kind"));
    }
    let resource: GroupVersionResource = required(req, "resource")?;
    if resource.version.is_empty() || resource.resource.is_empty() {
        return Err(bad("request.resource", "needs a version and a resource"));
    }
    let attrs = Attributes {
        operation,
        kind: kind.into(),
        resource: resource.into(),
        sub_resource: optional(req, "subResource")?.unwrap_or_default(),
        namespace: optional(req, "namespace")?.unwrap_or_default(),
        name: optional(req, "name")?.unwrap_or_default(),
        object: object(req, "object")?.map(|o| Arc::new(Object::new(o))),
        old_object: object(req, "oldObject")?.map(|o| Arc::new(Object::new(o))),
        dry_run: optional(req, "dryRun")?.unwrap_or(false),
        options: object(req, "options")?.map(Arc::new),
        user_info: Arc::new(optional::<UserInfo>(req, "userInfo")?.unwrap_or_default()),
    };
    let uid = optional(req, "uid")?.unwrap_or_default();
    Ok((attrs, uid))
}

/// Labels of the request's namespace as far as they are known: not applicable to cluster-scoped
/// requests and Namespaces themselves.
pub(crate) fn namespace_state(attrs: &Attributes, store: &Store) -> NamespaceState {
    if attrs.namespace.is_empty()
        || attrs.is_namespace_resource()
        || attrs.kind.kind == "Namespace" && attrs.kind.group.is_empty()
    {
        return NamespaceState::NotApplicable;
    }
    match store.namespace_labels(&attrs.namespace) {
        Some(labels) => NamespaceState::Known(Arc::clone(labels)),
        None => NamespaceState::Unknown,
    }
}

/// A field taken out of the request (its strings are moved, not copied).
fn optional<T: DeserializeOwned>(
    req: &mut Map<String, Value>,
    key: &str,
) -> Result<Option<T>, Bad> {
    match req.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v)
            .map(Some)
            .map_err(|e| bad(&format!("request.{key}"), e.to_string())),
    }
}

fn required<T: DeserializeOwned>(req: &mut Map<String, Value>, key: &str) -> Result<T, Bad> {
    optional(req, key)?.ok_or_else(|| bad(&format!("request.{key}"), "missing"))
}

/// An embedded object: an object or null, taken out of the request.
fn object(req: &mut Map<String, Value>, key: &str) -> Result<Option<Value>, Bad> {
    match req.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v)),
        Some(v) => Err(bad(
            &format!("request.{key}"),
            format!(
                "expected an object, found {}",
                crate::api::admission::go_json_type(&v)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::replay::input::{ClusterState, Reader};
    use crate::replay::{IndexUnit, InputItem};

    /// What the whole-document path gives: the attributes and uid, or the field and message of
    /// the problem (`invalid JSON: …` for text that does not parse).
    type Outcome = Result<(Attributes, String), (String, String)>;

    /// [`read`], checking that each object it keeps as text is compact JSON that parses.
    fn read_checked(text: &[u8], intern: &mut Interner) -> Option<(Attributes, String)> {
        let (attrs, uid) = read(text, intern)?;
        for o in attrs.object.iter().chain(&attrs.old_object) {
            if let Some(t) = o.json() {
                assert!(scan::is_compact(t.as_bytes()), "{t}");
                assert!(crate::json::from_str::<Value>(t).is_ok(), "{t}");
            }
        }
        Some((attrs, uid))
    }

    fn full_parse(text: &[u8]) -> Outcome {
        let doc = scan::parse_within::<Value>(text, 2)
            .map_err(|e| (String::new(), format!("invalid JSON: {e}")))?;
        attributes_and_uid(doc).map_err(|b| (b.field, b.message))
    }

    /// The reader's item for `text` read as one document, as an [`Outcome`].
    fn through_reader(text: &[u8]) -> Outcome {
        let mut reader = Reader::new(ClusterState::new());
        let mut items = Vec::new();
        let source = SourceRef {
            file: "t.jsonl".into(),
            index: 1,
            unit: IndexUnit::Line,
            audit_id: None,
            line: None,
        };
        reader.read_document(source, text, &mut |item| items.push(item));
        match items.pop() {
            Some(InputItem::Request(r)) => Ok((r.attrs, r.uid)),
            Some(InputItem::Invalid(p)) => Err((p.field, p.message)),
            other => panic!("unexpected item {other:?}"),
        }
    }

    const BASE: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},"requestKind":{"group":"","version":"v1","kind":"ConfigMap"},"requestResource":{"group":"","version":"v1","resource":"configmaps"},"name":"cm-1","namespace":"bench","operation":"CREATE","userInfo":{"username":"alice","uid":"1c3a5b2e","groups":["developers","system:authenticated"],"extra":{"scopes":["a","b"]}},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-1","namespace":"bench","labels":{"app":"web"}},"data":{"config.yaml":"listen: :8080\nlogLevel: info\n","n":"1"}},"oldObject":null,"dryRun":false,"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}"#;

    /// `BASE` with `from` replaced by `to` (once).
    fn with(from: &str, to: &str) -> String {
        assert!(BASE.contains(from), "{from}");
        BASE.replacen(from, to, 1)
    }

    /// Reviews the scanner reads alone.
    fn read_alone() -> Vec<String> {
        let value: Value = crate::json::from_str(BASE).unwrap();
        vec![
            BASE.to_string(),
            serde_json::to_string_pretty(&value).unwrap(),
            with("admission.k8s.io/v1", "admission.k8s.io/v1beta1"),
            with(
                r#""oldObject":null"#,
                r#""oldObject":{"kind":"ConfigMap","data":{"a":[1,2.5,-0,1e10,true,null]}}"#,
            ),
            with(
                r#","options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}"#,
                "",
            ),
            with(
                r#""userInfo":{"username":"alice","uid":"1c3a5b2e","groups":["developers","system:authenticated"],"extra":{"scopes":["a","b"]}},"#,
                "",
            ),
            with(
                r#""uid":"1c3a5b2e","#,
                r#""uid":"1c3a5b2e","ignored":{"x":[{"y":null}]},"#,
            ),
            with(r#""name":"cm-1""#, r#""name":"cm-\u00e9\"\\/\b\f\n\r\t""#),
            with(r#""namespace":"bench""#, r#""namespace":"ñ-日本-🦀""#),
            with(r#""dryRun":false"#, r#""dryRun":null,"subResource":null"#),
            with(
                r#""dryRun":false"#,
                r#""dryRun":true,"subResource":"status""#,
            ),
            with(r#""userInfo":{"#, r#""userInfo":null,"x":{"#),
            with(r#""options":{"#, r#""options":null,"x":{"#),
            with(
                r#""object":{"apiVersion""#,
                r#""object":{"apiVersion":"v0","apiVersion""#,
            ),
            with(
                r#""extra":{"scopes":["a","b"]}"#,
                r#""extra":{"s":["a"],"s":["b"]}"#,
            ),
            with(
                r#""kind":{"group":"","version":"v1","kind":"ConfigMap"}"#,
                r#""kind" : { "gr\u006fup" : "" , "version":"v1","kind":"ConfigMap" }"#,
            ),
            with(
                r#""request":{"#,
                r#""response":{"uid":"x","allowed":true},"request":{"#,
            ),
            with(
                r#""kind":"AdmissionReview","#,
                r#""kind":"AdmissionReview","other":[[[{}]]],"#,
            ),
            with(r#""name":"cm-1""#, r#""name":null"#),
            with(r#""n":"1""#, r#""n":1e40,"m":"\ud83e\udd80","o":1.5e-3"#),
            with(
                r#""requestKind":{"#,
                r#""requestKind":{"x":[-0.5E+12,0,12345678901234567890123,1e40,"\u00e9"],"#,
            ),
            format!("  {BASE}\n "),
        ]
    }

    /// Reviews left to the whole-document path, each for its reason.
    fn left_to_full_parse() -> Vec<String> {
        let nest = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        vec![
            // Errors of the review.
            with(r#""request":{"#, r#""response":{"uid":"x"},"x":{"#),
            with(
                r#""request":{"#,
                r#""response":{"uid":"x"},"request":null,"x":{"#,
            ),
            with(r#""request":{"#, r#""request":[],"x":{"#),
            with("admission.k8s.io/v1", "admission.k8s.io/v2"),
            with(r#""apiVersion":"admission.k8s.io/v1","#, ""),
            with(r#""apiVersion":"admission.k8s.io/v1""#, r#""apiVersion":1"#),
            with("CREATE", "FOO"),
            with("CREATE", "create"),
            with(r#""operation":"CREATE""#, r#""operation":null"#),
            with(r#""operation":"CREATE","#, ""),
            with(
                r#""version":"v1","kind":"ConfigMap"}"#,
                r#""kind":"ConfigMap"}"#,
            ),
            with(r#""resource":"configmaps"}"#, r#""resource":""}"#),
            // Wrong types.
            with(
                r#""kind":{"group":"","version":"v1","kind":"ConfigMap"}"#,
                r#""kind":"ConfigMap""#,
            ),
            with(
                r#""kind":{"group":"","version":"v1","kind":"ConfigMap"}"#,
                r#""kind":["","v1","ConfigMap"]"#,
            ),
            with(r#""namespace":"bench""#, r#""namespace":7"#),
            with(r#""dryRun":false"#, r#""dryRun":"true""#),
            with(r#""oldObject":null"#, r#""oldObject":[]"#),
            with(
                r#""options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}"#,
                r#""options":"x""#,
            ),
            with(
                r#""groups":["developers","system:authenticated"]"#,
                r#""groups":"developers""#,
            ),
            with(r#""userInfo":{"#, r#""userInfo":["alice"],"x":{"#),
            // Repeated members.
            with(r#""name":"cm-1""#, r#""name":"a","name":"cm-1""#),
            with(
                r#""kind":"AdmissionReview","#,
                r#""kind":"AdmissionReview","request":{},"#,
            ),
            with(
                r#""kind":"AdmissionReview","#,
                r#""apiVersion":"x","kind":"AdmissionReview","#,
            ),
            with(
                r#""username":"alice""#,
                r#""username":"bob","username":"alice""#,
            ),
            with(
                r#""version":"v1","kind":"ConfigMap"}"#,
                r#""version":"v1","kind":"Secret","kind":"ConfigMap"}"#,
            ),
            // Member names with escapes.
            with(r#""name":"cm-1""#, r#""n\u0061me":"cm-1""#),
            with(
                r#""kind":"AdmissionReview","#,
                r#""kind":"AdmissionReview","requ\u0065st":null,"#,
            ),
            // Text that does not parse, or is near a parser's limits.
            with(r#""requestKind":{"#, r#""requestKind":{"x":1e400,"#),
            with(
                r#""requestKind":{"#,
                r#""requestKind":{"x":"\ud83e\udd80","#,
            ),
            with(r#""requestKind":{"#, r#""requestKind":{"x":01,"#),
            with(r#""requestKind":{"#, r#""requestKind":{"x":1.,"#),
            with(r#""requestKind":{"#, r#""requestKind":{"x":-,"#),
            with(r#""requestKind":{"#, r#""requestKind":{"x":tru,"#),
            with(r#""requestKind":{"#, r#""requestKind":{"x":"\ud800","#),
            with(r#""requestKind":{"#, r#""requestKind":{"x":"\x","#),
            with(r#""requestKind":{"#, "\"requestKind\":{\"x\":\"a\tb\","),
            with(
                r#""requestKind":{"#,
                &format!(r#""requestKind":{{"x":{},"#, nest(crate::json::MAX_DEPTH)),
            ),
            with(
                r#""requestKind":{"#,
                &format!(r#""requestKind":{{"x":{},"#, nest(118)),
            ),
            with(r#""username":"alice""#, r#""username":"alice","x":1e400"#),
            with(r#""n":"1""#, r#""n":1e400"#),
            with(r#""n":"1""#, &format!(r#""n":{}"#, nest(125))),
            with(r#""scopes":["a","b"]"#, r#""scopes":["a","b",]"#),
            format!("{BASE}}}"),
            format!("{BASE} x"),
            BASE[..BASE.len() - 1].to_string(),
            String::from_utf8_lossy(&[BASE.as_bytes(), b"\xff"].concat()).into_owned(),
        ]
    }

    #[test]
    fn the_scanner_reads_what_a_full_parse_reads() {
        let mut intern = Interner::default();
        for line in read_alone() {
            let expected = full_parse(line.as_bytes());
            assert!(expected.is_ok(), "{line}: {expected:?}");
            // Twice: the second time the user and options are found by their text.
            for _ in 0..2 {
                let got = read_checked(line.as_bytes(), &mut intern);
                assert!(got.is_some(), "not read alone: {line}");
                assert_eq!(got.ok_or_else(Default::default), expected, "{line}");
            }
            assert_eq!(through_reader(line.as_bytes()), expected, "{line}");
        }
    }

    #[test]
    fn what_the_scanner_does_not_decide_is_left_to_a_full_parse() {
        let mut intern = Interner::default();
        let mut errors = 0;
        for line in left_to_full_parse() {
            let expected = full_parse(line.as_bytes());
            errors += usize::from(expected.is_err());
            assert!(read(line.as_bytes(), &mut intern).is_none(), "{line}");
            if scan::find(line.as_bytes(), (0, line.len()), [b"kind"]).is_ok() {
                assert_eq!(through_reader(line.as_bytes()), expected, "{line}");
            }
        }
        // Most are errors; the others parse, and are read the long way.
        assert!(errors > 34, "{errors}");
    }

    #[test]
    fn deep_objects_are_read_alone_only_within_the_scanners_limit() {
        for depth in [100, 115, 116, 117, 124, 125, 126] {
            let object = format!(
                r#"{{"kind":"X","d":{}1{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let line = with(r#""oldObject":null"#, &format!(r#""oldObject":{object}"#));
            // Beyond serde_json's own limit too: the review reads as kube-apiserver reads.
            let expected = full_parse(line.as_bytes());
            assert!(expected.is_ok(), "depth {depth}");
            match read_checked(line.as_bytes(), &mut Interner::default()) {
                Some(got) => assert_eq!(Ok(got), expected, "depth {depth}"),
                None => assert!(3 + depth > CHECKED_DEPTH, "depth {depth}"),
            }
        }
    }

    fn edit_snippets() -> Vec<&'static str> {
        vec![
            "\"",
            "\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            " ",
            "\n",
            "\t",
            "\u{1}",
            "null",
            "true",
            "1e400",
            "-",
            "0",
            "01",
            "1.5",
            "\\u00e9",
            "\\ud800",
            "é",
            "\\\"",
            "\"name\":\"x\",",
            "\"request\":{},",
            "\"kind\":\"x\",",
            "\"dryRun\":true,",
            "\"options\":{},",
            "\"userInfo\":{\"username\":\"bob\"},",
            "\"object\":null,",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Edits anywhere in a review: whatever the scanner reads alone is what a full parse
        /// reads, with the user and options already known by their text or not.
        #[test]
        fn edited_reviews_read_alone_read_as_a_full_parse(
            base in 0usize..4,
            edits in proptest::collection::vec(
                (any::<prop::sample::Index>(), 0usize..3, prop::sample::select(edit_snippets())),
                1..4,
            ),
        ) {
            let alone = read_alone();
            let bases = [&alone[0], &alone[1], &alone[3], &alone[15]];
            let mut line = bases[base].clone().into_bytes();
            for (at, how, snippet) in edits {
                let at = at.index(line.len() + 1);
                let to = match how {
                    0 => at,
                    1 => at + snippet.len(),
                    _ => at + 1,
                }
                .min(line.len());
                let with: &[u8] = if how == 1 { b"" } else { snippet.as_bytes() };
                line.splice(at..to, with.iter().copied());
            }
            let mut intern = Interner::default();
            for b in bases {
                read(b.as_bytes(), &mut intern);
            }
            if let Some(got) = read_checked(&line, &mut intern) {
                prop_assert_eq!(Ok(got), full_parse(&line), "{}", String::from_utf8_lossy(&line));
            }
        }
    }
}

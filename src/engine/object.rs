//! An admission request's object (`object`, `oldObject`): a JSON value that may be known first by
//! its JSON text, and parsed only when something reads it.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::scan::{self, Span};
use crate::schema::codec::{Encoding, Normality};

/// An object of an admission request, or an object after a patch.
///
/// A captured object usually arrives as compact JSON, the form AdmissionReviews embed it in: such
/// an object keeps that text, reviews send it byte for byte, and its value is parsed the first
/// time something reads it (a selector, a condition, a patch, a view). Many dispatches never do.
///
/// An object the engine derives from another by replacing a few top-level members (the store's
/// `uid`, a registry strategy's `status`) shares the other object and is made whole only when
/// something reads all of it; [`Object::member`] reads one member without that.
pub struct Object {
    value: OnceLock<Value>,
    /// The compact JSON the object was given as; None when it was given as a value.
    json: Option<Box<str>>,
    /// What the object is derived from, when it was derived.
    derived: Option<Box<Derived>>,
    /// Where `json` has its `metadata`, when whoever checked the text recorded it.
    metadata: Option<Box<MetadataSpans>>,
    /// Go's encoding of the value into a schema's struct type, once made (see
    /// [`Object::typed_text`]).
    typed: OnceLock<TypedText>,
    /// Whether the value is as a decode into a schema's struct type leaves it, once asked (see
    /// [`Object::is_normal`]).
    normal: OnceLock<(&'static crate::schema::Schema, crate::schema::TypeId, bool)>,
    /// Whether the value is [plain](crate::jsonpatch::is_plain), once asked or known.
    plain: OnceLock<bool>,
    /// Whether the value is known to be as the scheme's defaulting leaves it.
    defaulted: bool,
}

/// An encoding of an object's value into one struct type of one schema.
#[derive(Clone)]
struct TypedText {
    schema: &'static crate::schema::Schema,
    id: crate::schema::TypeId,
    encoding: Encoding,
    /// The encoding parsed (the value as a decode leaves it) and whether that is plain, once
    /// made; None when the encoding is not Go's.
    normalized: OnceLock<Option<(Value, bool)>>,
    /// Set when `normalized` was first asked for.
    asked: OnceLock<()>,
}

/// Where an object's compact text has its `metadata` (the last member of that name, as Go
/// decodes it), recorded while the text was checked so that the engine need not scan it
/// again. Spans are byte offsets into the text; member names are raw (quotes left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MetadataSpans {
    /// The `metadata` object and its members in text order (name, value); None when the
    /// object has no `metadata` that is an object.
    pub(crate) found: Option<(Span, Vec<(Span, Span)>)>,
}

/// An object as another with some top-level members replaced or removed, normalised into its
/// Go type afterwards if `normalize` says so.
#[derive(Clone)]
struct Derived {
    /// An object whose value is a map.
    base: Arc<Object>,
    /// Members replaced (`Some`) or removed (`None`).
    members: Vec<(Box<str>, Option<Value>)>,
    /// The schema type to normalise the whole object into once it is made.
    normalize: Option<(&'static crate::schema::Schema, crate::schema::TypeId)>,
    /// With `normalize`, by field of its type: what the normalisation does to the member,
    /// once asked.
    normal: Box<[OnceLock<Normal>]>,
    /// With `normalize`: whether normalising the whole object succeeds, once asked.
    normalizes: OnceLock<bool>,
}

/// What normalising a derived object as a whole does to one of its fields' members.
#[derive(Clone)]
enum Normal {
    /// Leaves it as it stands, whatever the other members are.
    AsItIs,
    /// Makes it this (None: absent), when no member's normalisation fails.
    Becomes(Option<Value>),
    /// Fails on it.
    Fails,
}

impl Derived {
    /// The member as replaced, or the base's.
    fn raw_member(&self, name: &str) -> Option<&Value> {
        match self.members.iter().find(|(n, _)| **n == *name) {
            Some((_, value)) => value.as_ref(),
            None => self.base.member(name),
        }
    }

    /// The member of the normalised object (`Some(None)`: it has none), when that is known
    /// without making the object whole: members Go writes as they stand are read as they are,
    /// others are normalised alone when no member's normalisation fails (a failure leaves the
    /// whole object partly normalised).
    fn normal_member(&self, name: &str) -> Option<Option<&Value>> {
        let (schema, id) = self.normalize?;
        let Some(i) = schema.get(id).index_of(name) else {
            // Not a field: dropped.
            return self.normalizes().then_some(None);
        };
        match self.normal(i)? {
            Normal::AsItIs => Some(self.raw_member(name)),
            Normal::Becomes(value) => self.normalizes().then_some(value.as_ref()),
            Normal::Fails => None,
        }
    }

    /// What normalising the whole object does to field `i`'s member.
    fn normal(&self, i: usize) -> Option<&Normal> {
        let (schema, id) = self.normalize?;
        let cell = self.normal.get(i)?;
        Some(cell.get_or_init(|| {
            if !self.base.is_map() {
                return Normal::Fails;
            }
            let name = &*schema.get(id).fields[i].name;
            let raw = self.raw_member(name);
            if raw.is_some_and(|v| crate::schema::codec::member_is_normal(schema, id, name, v)) {
                return Normal::AsItIs;
            }
            let mut alone = serde_json::Map::new();
            if let Some(v) = raw {
                alone.insert(name.to_string(), v.clone());
            }
            let mut alone = Value::Object(alone);
            match crate::schema::codec::normalize_members_in_place(schema, id, &mut alone, &[name])
            {
                Ok(()) => Normal::Becomes(alone.as_object_mut().and_then(|m| m.remove(name))),
                Err(_) => Normal::Fails,
            }
        }))
    }

    /// Whether normalising the whole object succeeds: no field's member fails (members that
    /// are not fields are dropped without looking into them).
    fn normalizes(&self) -> bool {
        *self.normalizes.get_or_init(|| {
            (0..self.normal.len()).all(|i| !matches!(self.normal(i), None | Some(Normal::Fails)))
        })
    }
}

impl Object {
    /// An object given as a value.
    pub fn new(value: Value) -> Self {
        Object {
            value: OnceLock::from(value),
            json: None,
            derived: None,
            metadata: None,
            typed: OnceLock::new(),
            normal: OnceLock::new(),
            plain: OnceLock::new(),
            defaulted: false,
        }
    }

    /// `base` (whose value must be a map) with the top-level `members` replaced (`Some`) or
    /// removed (`None`), then, when `normalize` names a schema type, normalised into it as a
    /// whole (errors leave it partly normalised, as [`crate::schema::codec::normalize_in_place`]
    /// does). Nothing is copied until the whole value is read; a member the normalisation would
    /// leave as it is is read without that.
    pub(crate) fn derived(
        base: &Arc<Object>,
        members: Vec<(Box<str>, Option<Value>)>,
        normalize: Option<(&'static crate::schema::Schema, crate::schema::TypeId)>,
    ) -> Self {
        // Derived from an object that is itself only replaced members: one level, not two.
        let (base, members) = match base.derived.as_deref() {
            Some(d) if d.normalize.is_none() && base.value.get().is_none() => {
                let mut all = d.members.clone();
                for (name, value) in members {
                    match all.iter_mut().find(|(n, _)| *n == name) {
                        Some(slot) => slot.1 = value,
                        None => all.push((name, value)),
                    }
                }
                (Arc::clone(&d.base), all)
            }
            _ => (Arc::clone(base), members),
        };
        let fields = normalize.map_or(0, |(schema, id)| schema.get(id).fields.len());
        Object {
            value: OnceLock::new(),
            json: None,
            derived: Some(Box::new(Derived {
                base,
                members,
                normalize,
                normal: (0..fields).map(|_| OnceLock::new()).collect(),
                normalizes: OnceLock::new(),
            })),
            metadata: None,
            typed: OnceLock::new(),
            normal: OnceLock::new(),
            plain: OnceLock::new(),
            defaulted: false,
        }
    }

    /// A top-level member of the object (None when it has none, or is not a map), read without
    /// making a derived object whole when it can be.
    pub fn member(&self, name: &str) -> Option<&Value> {
        if self.value.get().is_none()
            && let Some(d) = self.derived.as_deref()
        {
            if d.normalize.is_none() {
                return d.raw_member(name);
            }
            if let Some(value) = d.normal_member(name) {
                return value;
            }
        }
        self.value().get(name)
    }

    /// A copy of the value, made without keeping it: a derived object not made whole yet stays
    /// so (its base's members copied with those replaced).
    pub(crate) fn to_owned_value(&self) -> Value {
        if self.members_only()
            && let Some(d) = self.derived.as_deref()
            && let Value::Object(base) = d.base.value()
        {
            let mut map = serde_json::Map::new();
            for (name, value) in base {
                if !d.members.iter().any(|(n, _)| **n == **name) {
                    map.insert(name.clone(), value.clone());
                }
            }
            for (name, value) in &d.members {
                if let Some(v) = value {
                    map.insert(name.to_string(), v.clone());
                }
            }
            return Value::Object(map);
        }
        self.value().clone()
    }

    /// Whether the object is a derived one not made whole yet, whose members
    /// [`Object::member`] reads without making it whole.
    pub(crate) fn members_only(&self) -> bool {
        self.value.get().is_none()
            && self
                .derived
                .as_deref()
                .is_some_and(|d| d.normalize.is_none())
    }

    /// Whether the object's value is a map, known without making a derived object whole.
    pub fn is_map(&self) -> bool {
        match self.derived.as_deref() {
            Some(d) if self.value.get().is_none() => d.base.is_map(),
            _ => self.value().is_object(),
        }
    }

    /// An object given as JSON text that the caller has checked: compact (no whitespace outside
    /// strings) JSON of an object, within serde_json's nesting and number limits. Parsed when
    /// first read.
    pub fn from_checked_json(json: Box<str>) -> Self {
        Object {
            value: OnceLock::new(),
            json: Some(json),
            derived: None,
            metadata: None,
            typed: OnceLock::new(),
            normal: OnceLock::new(),
            plain: OnceLock::new(),
            defaulted: false,
        }
    }

    /// The object whose compact JSON text starts at `v` in `text`, `depth` containers deep,
    /// checked as [`scan::checked_compact_value_end`] checks it, with the places of its
    /// `metadata` recorded on the way; and the text's end. None where that check fails (or
    /// the text at `v` is not an object).
    pub(crate) fn checked_compact(text: &str, v: usize, depth: usize) -> Option<(Self, usize)> {
        let buf = text.as_bytes();
        if buf.get(v) != Some(&b'{') {
            return None;
        }
        let at = |k: &[u8]| k.as_ptr() as usize - buf.as_ptr() as usize - v;
        let mut found = None;
        let end = scan::checked_compact_members(buf, v, depth + 1, |k, m| {
            if k != b"metadata" {
                return scan::checked_compact_value_end(buf, m, depth + 1);
            }
            if buf.get(m) != Some(&b'{') {
                found = None;
                return scan::checked_compact_value_end(buf, m, depth + 1);
            }
            let mut members = Vec::with_capacity(8);
            let end = scan::checked_compact_members(buf, m, depth + 2, |k, x| {
                let end = scan::checked_compact_value_end(buf, x, depth + 2)?;
                let name = at(k);
                members.push(((name, name + k.len()), (x - v, end - v)));
                Some(end)
            })?;
            found = Some(((m - v, end - v), members));
            Some(end)
        })?;
        let mut object = Object::from_checked_json(text[v..end].into());
        object.metadata = Some(Box::new(MetadataSpans { found }));
        Some((object, end))
    }

    /// Where the object's text has its `metadata`, when that was recorded with the text.
    pub(crate) fn metadata_spans(&self) -> Option<&MetadataSpans> {
        self.json.as_ref().and(self.metadata.as_deref())
    }

    /// An object given both as a value and as the compact JSON text that encodes it (such as
    /// Go's encoding of a decoded object), which reviews send as it stands.
    pub fn with_json(value: Value, json: String) -> Self {
        Object {
            value: OnceLock::from(value),
            json: Some(json.into_boxed_str()),
            derived: None,
            metadata: None,
            typed: OnceLock::new(),
            normal: OnceLock::new(),
            plain: OnceLock::new(),
            defaulted: false,
        }
    }

    /// The object's value.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            if let Some(d) = self.derived.as_deref() {
                let mut value = d.base.value().clone();
                if let Value::Object(map) = &mut value {
                    for (name, member) in &d.members {
                        match member {
                            Some(v) => map.insert(name.to_string(), v.clone()),
                            None => map.remove(&**name),
                        };
                    }
                }
                if let Some((schema, id)) = d.normalize {
                    let _ = crate::schema::codec::normalize_in_place(schema, id, &mut value);
                }
                return value;
            }
            let json = self.json.as_deref().unwrap_or("null");
            crate::json::from_str(json).unwrap_or_else(|e| {
                debug_assert!(false, "object text that is not JSON: {e}: {json}");
                Value::Null
            })
        })
    }

    /// Go's encoding of the object into the struct type `id` of `schema`, made by `encode` the
    /// first time it is asked for and kept with the object, so that an object dispatched again
    /// (the console dispatches every request again after each edit) is not encoded again. Asked
    /// for another type, it is made again and not kept.
    pub(crate) fn typed_text(
        &self,
        schema: &'static crate::schema::Schema,
        id: crate::schema::TypeId,
        encode: impl FnOnce() -> Encoding,
    ) -> String {
        let mut encode = Some(encode);
        let made = self.typed.get_or_init(|| TypedText {
            schema,
            id,
            encoding: encode
                .take()
                .map_or_else(|| Encoding::text_only(String::new()), |e| e()),
            normalized: OnceLock::new(),
            asked: OnceLock::new(),
        });
        match encode {
            Some(encode) if !(std::ptr::eq(made.schema, schema) && made.id == id) => {
                encode().text().to_string()
            }
            // Kept from before: its members' places may have been forgotten since.
            Some(_) => {
                made.encoding.remember(schema, id);
                made.encoding.text().to_string()
            }
            None => made.encoding.text().to_string(),
        }
    }

    /// The value as a decode into the struct type `id` of `schema` leaves it, and whether that
    /// is [plain](crate::jsonpatch::is_plain): Go's encoding of it kept with the object (see
    /// [`Object::typed_text`]), parsed and kept the second time it is asked for. None the first
    /// time (parsing costs more than normalising a copy the caller makes anyway, and most
    /// objects are patched once: a replay dispatches each once, the console dispatches the same
    /// ones after each edit), and when no such encoding is kept.
    pub(crate) fn normalized(
        &self,
        schema: &'static crate::schema::Schema,
        id: crate::schema::TypeId,
    ) -> Option<(&Value, bool)> {
        let typed = self
            .typed
            .get()
            .filter(|t| std::ptr::eq(t.schema, schema) && t.id == id && t.encoding.is_typed())?;
        if typed.normalized.get().is_none() && typed.asked.set(()).is_ok() {
            return None;
        }
        let made = typed.normalized.get_or_init(|| {
            let value: Value = crate::json::from_str(typed.encoding.text()).ok()?;
            let plain = crate::jsonpatch::is_plain(&value);
            Some((value, plain))
        });
        made.as_ref().map(|(v, plain)| (v, *plain))
    }

    /// Whether the value is [plain](crate::jsonpatch::is_plain): a patch of it can be applied
    /// directly.
    pub(crate) fn is_plain(&self) -> bool {
        *self.plain.get_or_init(|| {
            // Encoding the value told, when it could.
            let told = self.typed.get().is_some_and(|t| t.encoding.is_plain());
            debug_assert!(
                !told || crate::jsonpatch::is_plain(self.value()),
                "encoding told a value is plain that is not"
            );
            told || crate::jsonpatch::is_plain(self.value())
        })
    }

    /// The object, known to be as kube-apiserver holds it once decoded: defaulted by its kind's
    /// scheme defaulting (`crate::defaulting`), which then leaves it as it is. The replay marks
    /// the objects it decodes itself (a manifest's, an audit event's JSON or merge patch's), and
    /// the engine what a typed patch leaves; the engine then does not default again what a
    /// patch cannot have changed (debug builds check that defaulting would change nothing). An
    /// object given otherwise is defaulted after each patch as a whole.
    pub fn known_defaulted(mut self) -> Self {
        self.defaulted = true;
        self
    }

    /// Whether the object is [known to be defaulted](Object::known_defaulted).
    pub fn is_known_defaulted(&self) -> bool {
        self.defaulted
    }

    /// The object, known to be [plain](crate::jsonpatch::is_plain).
    pub(crate) fn known_plain(self) -> Self {
        // A copy, not the value: a derived object stays one.
        debug_assert!(
            crate::jsonpatch::is_plain(&self.to_owned_value()),
            "an object said to be plain is not"
        );
        let _ = self.plain.set(true);
        self
    }

    /// Whether the value is normal for the struct type `id` of `schema` (as
    /// [`crate::schema::codec::normalize`] leaves it): asked once per object for the first type
    /// asked about.
    pub(crate) fn is_normal(
        &self,
        schema: &'static crate::schema::Schema,
        id: crate::schema::TypeId,
    ) -> bool {
        let check = || crate::schema::codec::is_normal(schema, id, self.value());
        // Encoding the value for that type told, unless it met a float.
        let told = || {
            let typed = self.typed.get()?;
            if !(std::ptr::eq(typed.schema, schema) && typed.id == id) {
                return None;
            }
            let told = match typed.encoding.normality() {
                Normality::Normal => true,
                Normality::NotNormal => false,
                Normality::Unsure => return None,
            };
            debug_assert_eq!(told, check(), "encoding told otherwise than is_normal");
            Some(told)
        };
        let (s, i, normal) = *self
            .normal
            .get_or_init(|| (schema, id, told().unwrap_or_else(check)));
        if std::ptr::eq(s, schema) && i == id {
            normal
        } else {
            check()
        }
    }

    /// The JSON text the object was given as, when it was.
    pub fn json(&self) -> Option<&str> {
        self.json.as_deref()
    }

    /// Whether the value has been parsed (or was given).
    pub fn is_parsed(&self) -> bool {
        self.value.get().is_some()
    }

    /// The value, to change: the text it was given as, if any, no longer describes it and is
    /// dropped.
    pub fn value_mut(&mut self) -> &mut Value {
        self.value();
        self.json = None;
        self.derived = None;
        self.metadata = None;
        self.typed = OnceLock::new();
        self.normal = OnceLock::new();
        self.plain = OnceLock::new();
        self.value.get_mut().expect("parsed above")
    }

    /// The value, taken out.
    pub fn into_value(mut self) -> Value {
        self.value();
        self.value.take().unwrap_or_default()
    }
}

/// Reading the object reads its value, parsed on first use like a `LazyLock`'s.
impl std::ops::Deref for Object {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl Default for Object {
    fn default() -> Self {
        Object::new(Value::Null)
    }
}

impl From<Value> for Object {
    fn from(value: Value) -> Self {
        Object::new(value)
    }
}

impl Clone for Object {
    fn clone(&self) -> Self {
        Object {
            value: self.value.clone(),
            json: self.json.clone(),
            derived: self.derived.clone(),
            metadata: self.metadata.clone(),
            typed: self.typed.clone(),
            normal: self.normal.clone(),
            plain: self.plain.clone(),
            defaulted: self.defaulted,
        }
    }
}

impl PartialEq for Object {
    fn eq(&self, other: &Self) -> bool {
        match (&self.json, &other.json) {
            (Some(a), Some(b)) if a == b => true,
            _ => self.value() == other.value(),
        }
    }
}

impl PartialEq<Value> for Object {
    fn eq(&self, other: &Value) -> bool {
        self.value() == other
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Object::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_normalised_value_is_kept_from_the_second_time_it_is_asked_for() {
        let schema = crate::schema::Schema::for_release(crate::KubeVersion::new(33).unwrap());
        let pod = schema.kind("", "v1", "Pod").unwrap();
        let config_map = schema.kind("", "v1", "ConfigMap").unwrap();
        let value = serde_json::json!({"kind": "Pod", "metadata": {"name": "a", "labels": {}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let o = Object::new(value.clone());
        assert!(o.normalized(schema, pod).is_none(), "nothing encoded yet");
        let encode = || crate::schema::codec::encode_with_places(schema, pod, o.value()).unwrap();
        o.typed_text(schema, pod, encode);
        assert!(o.normalized(schema, pod).is_none(), "the first time");
        let (normal, plain) = o.normalized(schema, pod).expect("the second time");
        assert_eq!(
            *normal,
            crate::schema::codec::normalize(schema, pod, &value)
                .unwrap()
                .0
        );
        assert_ne!(*normal, value);
        assert!(plain);
        assert!(
            std::ptr::eq(normal, o.normalized(schema, pod).unwrap().0),
            "kept"
        );
        assert!(o.normalized(schema, config_map).is_none(), "another type");

        let other = Object::new(value);
        other.typed_text(schema, pod, || Encoding::text_only("{}".into()));
        other.normalized(schema, pod);
        assert!(other.normalized(schema, pod).is_none(), "not Go's encoding");
    }

    #[test]
    fn a_typed_text_is_made_once_per_object_and_type() {
        let schema = crate::schema::Schema::for_release(crate::KubeVersion::new(33).unwrap());
        let pod = schema.kind("", "v1", "Pod").unwrap();
        let config_map = schema.kind("", "v1", "ConfigMap").unwrap();
        let mut o = Object::new(serde_json::json!({"kind": "Pod", "metadata": {"name": "a"}}));
        let made = std::cell::Cell::new(0);
        let encode = |text: &str| {
            made.set(made.get() + 1);
            Encoding::text_only(text.to_string())
        };
        assert_eq!(o.typed_text(schema, pod, || encode("first")), "first");
        assert_eq!(o.typed_text(schema, pod, || encode("second")), "first");
        assert_eq!(made.get(), 1, "kept for the same type");
        assert_eq!(
            o.clone().typed_text(schema, pod, || encode("third")),
            "first"
        );
        assert_eq!(
            o.typed_text(schema, config_map, || encode("other")),
            "other"
        );
        assert_eq!(
            o.typed_text(schema, config_map, || encode("again")),
            "again"
        );
        assert_eq!(o.typed_text(schema, pod, || encode("fourth")), "first");
        o.value_mut()["metadata"]["name"] = "b".into();
        assert_eq!(
            o.typed_text(schema, pod, || encode("changed")),
            "changed",
            "a changed value is encoded again"
        );
        assert_eq!(made.get(), 4);
    }

    #[test]
    fn a_text_is_parsed_when_first_read_and_kept() {
        let text = r#"{"kind":"ConfigMap","metadata":{"name":"a"},"data":{"x":"1"}}"#;
        let o = Object::from_checked_json(text.into());
        assert!(!o.is_parsed());
        assert_eq!(o.json(), Some(text));
        assert_eq!(o.value()["metadata"]["name"], "a");
        assert!(o.is_parsed());
        assert_eq!(o.json(), Some(text));
        assert_eq!(
            o.clone().into_value(),
            crate::json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn a_derived_object_reads_its_members_and_is_made_whole_when_read_whole() {
        let base = Arc::new(Object::new(serde_json::json!(
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "status": {"a": 1}}
        )));
        let first = Arc::new(Object::derived(
            &base,
            vec![(
                "metadata".into(),
                Some(serde_json::json!({"name": "p", "uid": "u"})),
            )],
            None,
        ));
        assert!(first.members_only() && first.is_map());
        assert_eq!(first.member("metadata").unwrap()["uid"], "u");
        assert_eq!(first.member("spec"), base.member("spec"));
        // Derived again: one level over the same base, the later members winning.
        let second = Object::derived(
            &first,
            vec![
                ("status".into(), None),
                ("metadata".into(), Some(serde_json::json!({"name": "q"}))),
            ],
            None,
        );
        assert!(Arc::ptr_eq(&second.derived.as_ref().unwrap().base, &base));
        assert_eq!(second.member("status"), None);
        assert!(second.members_only());
        assert_eq!(
            *second.value(),
            serde_json::json!({"kind": "Pod", "metadata": {"name": "q"}, "spec": {"x": 1}})
        );
        assert!(!second.members_only());
        assert_eq!(first.value()["metadata"]["uid"], "u");
    }

    #[test]
    fn a_derived_object_is_encoded_for_reviews_as_its_whole_value_is() {
        let release = crate::KubeVersion::new(33).unwrap();
        let kind = crate::api::GroupVersionKind::new("", "v1", "Pod");
        let base = Arc::new(Object::new(serde_json::json!({
            "kind": "Pod", "apiVersion": "v1", "unknown": true,
            "metadata": {"name": "p", "labels": {"b": "2", "a": "<1>"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                                     "resources": {"limits": {"cpu": "1000m"}}}]}
        })));
        let derived = Object::derived(
            &base,
            vec![
                (
                    "status".into(),
                    Some(serde_json::json!({"phase": "Pending"})),
                ),
                (
                    "metadata".into(),
                    Some(serde_json::json!({"name": "p", "uid": "u"})),
                ),
            ],
            None,
        );
        let text = super::super::review::typed_object_text(Some(&derived), &kind, release);
        assert!(derived.members_only());
        let whole = super::super::review::typed_object_json(Some(derived.value()), &kind, release);
        assert_eq!(text, whole);
        assert!(text.contains(r#""status":{"phase":"Pending"}"#), "{text}");
    }

    #[test]
    fn a_derived_object_owed_a_normalisation_is_normalised_when_made_whole() {
        let schema = crate::schema::Schema::for_release(crate::KubeVersion::new(33).unwrap());
        let id = schema.kind("", "v1", "ConfigMap").unwrap();
        let base = Arc::new(Object::new(serde_json::json!(
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "unknown": 1}
        )));
        let derived = Object::derived(
            &base,
            vec![("data".into(), Some(serde_json::json!({"k": "v"})))],
            Some((schema, id)),
        );
        assert!(!derived.members_only());
        let mut expected = serde_json::json!(
            {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "unknown": 1, "data": {"k": "v"}}
        );
        crate::schema::codec::normalize_in_place(schema, id, &mut expected).unwrap();
        assert_eq!(derived.member("unknown"), None);
        assert_eq!(*derived.value(), expected);
    }

    /// A Pod like the benchmark's: already as Go writes it, but for its missing `status`.
    fn normal_pod() -> Value {
        let container = |i: usize| {
            serde_json::json!({
                "name": format!("c-{i}"), "image": "registry.example.com/app:v1",
                "args": ["--listen=:8080"],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "MODE", "value": "production"}],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]
            })
        };
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": null,
                         "labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"containers": [container(0), container(1)],
                     "volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
                     "restartPolicy": "Always"}
        })
    }

    #[test]
    fn a_derived_object_owed_a_normalisation_reads_each_member_as_the_whole_normalisation_gives() {
        use serde_json::json;
        // Changes of the normal Pod, each at a JSON pointer (None: removed): some leave it
        // normal, others make normalising change a member, or fail before, at or after it.
        let edits: Vec<Vec<(&str, Option<Value>)>> = vec![
            vec![],
            vec![("/status", Some(json!({"phase": "Pending"})))],
            vec![("/spec/containers/0/resources", None)],
            vec![(
                "/spec/containers/1/resources/limits/cpu",
                Some(json!("1000m")),
            )],
            vec![("/spec/containers/1/resources/limits/cpu", Some(json!(2)))],
            vec![(
                "/metadata/creationTimestamp",
                Some(json!("2024-01-01T00:00:00Z")),
            )],
            vec![(
                "/metadata/creationTimestamp",
                Some(json!("2024-01-01T00:00:00.5Z")),
            )],
            vec![("/spec/unknownField", Some(json!(1)))],
            vec![("/spec/volumes", Some(json!([])))],
            vec![("/spec/hostNetwork", Some(Value::Null))],
            vec![("/spec/nodeSelector", Some(Value::Null))],
            vec![("/spec/nodeSelector", Some(json!({"a": null})))],
            vec![("/spec/hostNetwork", Some(json!(false)))],
            vec![("/spec/containers", Some(json!("x")))],
            vec![("/metadata/name", Some(json!(5)))],
            vec![("/status", Some(json!({"phase": 1})))],
            vec![("/apiVersion", Some(json!(1)))],
            vec![("/extra", Some(json!({"x": 1})))],
            vec![("/Spec", Some(json!({})))],
            vec![(
                "/spec/containers/0/ports/0/containerPort",
                Some(json!(8080.0)),
            )],
            vec![(
                "/spec/containers/0/ports/0/containerPort",
                Some(json!(1_u64 << 40)),
            )],
            vec![("/spec/containers/0/env/0/value", Some(json!("")))],
            vec![("/spec/containers/0/name", Some(Value::Null))],
            vec![("/spec/terminationGracePeriodSeconds", Some(json!(30)))],
            vec![("/spec/overhead", Some(json!({"memory": "1.5"})))],
            vec![("/spec/containers/0/ports/0/hostPort", Some(json!(0)))],
            vec![("/metadata/labels", Some(json!({})))],
            vec![("/metadata/labels/app", Some(Value::Null))],
            vec![("/kind", None), ("/metadata", Some(json!(null)))],
            vec![("/spec", Some(json!(null)))],
            vec![("/spec", None)],
        ];
        // What the strategy replaces: nothing, the metadata and status, or the status removed.
        let replaced: Vec<Vec<(&str, Option<Value>)>> = vec![
            vec![],
            vec![
                (
                    "metadata",
                    Some(json!({"name": "web", "uid": "u", "creationTimestamp": null})),
                ),
                (
                    "status",
                    Some(json!({"phase": "Pending", "qosClass": "Burstable"})),
                ),
            ],
            vec![
                ("status", None),
                ("spec", Some(json!({"containers": [{"name": "c"}]}))),
            ],
            vec![("metadata", Some(json!({"name": "web", "generation": 1.5})))],
        ];
        let names = [
            "apiVersion",
            "kind",
            "metadata",
            "spec",
            "status",
            "extra",
            "Spec",
            "x",
        ];
        let mut bases: Vec<Value> = Vec::new();
        for edit in &edits {
            let mut pod = normal_pod();
            for (pointer, value) in edit {
                let (parent, key) = pointer.rsplit_once('/').unwrap();
                let target = pod.pointer_mut(parent).unwrap();
                match (target, value) {
                    (Value::Object(m), Some(v)) => drop(m.insert(key.into(), v.clone())),
                    (Value::Object(m), None) => drop(m.remove(key)),
                    (Value::Array(a), Some(v)) => a[key.parse::<usize>().unwrap()] = v.clone(),
                    (t, v) => panic!("cannot edit {t} with {v:?}"),
                }
            }
            bases.push(pod);
        }
        bases.extend([Value::Null, json!([1]), json!("pod")]);
        let mut fast = 0;
        for release in [28, 33, 37] {
            let schema =
                crate::schema::Schema::for_release(crate::KubeVersion::new(release).unwrap());
            let id = schema.kind("", "v1", "Pod").unwrap();
            for base in &bases {
                for members in &replaced {
                    let base = Arc::new(Object::new(base.clone()));
                    let members: Vec<(Box<str>, Option<Value>)> = members
                        .iter()
                        .map(|(n, v)| (Box::from(*n), v.clone()))
                        .collect();
                    let whole = Object::derived(&base, members.clone(), Some((schema, id)));
                    let whole = whole.value();
                    for name in names {
                        let derived = Object::derived(&base, members.clone(), Some((schema, id)));
                        // Read twice: the second time from what the first learned.
                        for _ in 0..2 {
                            assert_eq!(
                                derived.member(name),
                                whole.get(name),
                                "{name} of {base:?} with {members:?}"
                            );
                        }
                        fast += usize::from(!derived.is_parsed());
                    }
                }
            }
        }
        let schema = crate::schema::Schema::for_release(crate::KubeVersion::new(37).unwrap());
        let id = schema.kind("", "v1", "Pod").unwrap();
        // The members already as Go writes them are read without making the object whole:
        // the normal Pod's `spec` and `metadata` among them.
        let base = Arc::new(Object::new(normal_pod()));
        let derived = Object::derived(
            &base,
            replaced[1]
                .iter()
                .map(|(n, v)| (Box::from(*n), v.clone()))
                .collect(),
            Some((schema, id)),
        );
        assert!(derived.member("spec").is_some() && derived.member("metadata").is_some());
        assert!(!derived.is_parsed());
        assert!(fast > 300, "{fast}");
    }

    #[test]
    fn objects_are_equal_by_value_whatever_they_were_given_as() {
        let a = Object::from_checked_json(r#"{"b":1,"a":2}"#.into());
        let b = Object::new(serde_json::json!({"a": 2, "b": 1}));
        let c = Object::from_checked_json(r#"{"a":2,"b":1.5}"#.into());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(b.json(), None);
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"a":2,"b":1}"#);
        let back: Object = crate::json::from_str(r#"{"a":2,"b":1}"#).unwrap();
        assert_eq!(back, a);
    }
}

//! An object decoded into its Go type and encoded again, as kube-apiserver's JSON serializer
//! does (`sigs.k8s.io/json` to decode: case-sensitive, unknown fields dropped; `encoding/json` to
//! encode: fields in Go's order, `omitempty`, HTML-safe strings, map keys sorted), and
//! apimachinery's `Semantic.DeepEqual` over what that gives.
//!
//! Decoding and encoding are one pass here: [`encode`] writes the JSON that Go's encoder would
//! write for the value Go's decoder would have made of the input. Defaulting, which the apiserver
//! runs between the two, is not part of it.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use super::{Field, IntType, Schema, Struct, Type, TypeId};
use crate::jsonpatch::gostr;
use crate::quantity::Quantity;

/// Why Go's decoder refuses a value: its message as `encoding/json` words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// The JSON Go writes for `value` decoded into the struct type `id`: fields in Go's order,
/// unknown fields dropped, `omitempty` applied, times at their precision, quantities canonical.
pub fn encode(schema: &Schema, id: TypeId, value: &Value) -> Result<String, DecodeError> {
    written(schema, id, value)?.into_remembered_text(id)
}

/// [`encode`] without remembering the text: for checks that must not change what later splices
/// find remembered.
pub fn encode_unremembered(
    schema: &Schema,
    id: TypeId,
    value: &Value,
) -> Result<String, DecodeError> {
    let mut enc = Encoder::new(schema, 512);
    enc.write(&Type::Struct(id), Some(value))?;
    enc.into_text()
}

/// An encoder that has written `value` as the struct type `id`, every value's place recorded.
fn written<'s>(schema: &'s Schema, id: TypeId, value: &Value) -> Result<Encoder<'s>, DecodeError> {
    let mut enc = Encoder::new(schema, 512);
    enc.tape = Some(Vec::with_capacity(64));
    let root = enc.open(0);
    enc.write(&Type::Struct(id), Some(value))?;
    enc.close(root);
    Ok(enc)
}

/// Where an encoded text has a value: `len` bytes from `start`, counted from where the value
/// it is a member of starts; `key`, its field's index in its struct, or its position in its list
/// or map; `size`, how many places it and its members have (theirs follow its own, in the order
/// they are written). Members are placed relative to their parent so that a value copied from
/// one text into another keeps its members' places as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    start: u32,
    len: u32,
    size: u32,
    key: u32,
}

/// The places of every value of an encoded text, in the order they are written: the whole
/// object's first.
type Tape = std::sync::Arc<[Place]>;

/// A value found in an old text: its place's index in the tape (`usize::MAX` when it was found
/// by a scan), its bytes and its key (see [`Place`]).
#[derive(Clone, Copy, Debug)]
struct At {
    ix: usize,
    start: usize,
    end: usize,
    key: usize,
}

/// The members of `of`, a value at index `of.ix` of `tape`.
fn members_of(tape: &[Place], of: At) -> impl Iterator<Item = At> + '_ {
    let end = tape.get(of.ix).map_or(0, |p| of.ix + p.size as usize);
    let mut ix = of.ix + 1;
    std::iter::from_fn(move || {
        let place = *tape.get(ix).filter(|_| ix < end)?;
        let start = of.start + place.start as usize;
        let at = At {
            ix,
            start,
            end: start + place.len as usize,
            key: place.key as usize,
        };
        ix += (place.size as usize).max(1);
        Some(at)
    })
}

/// The whole object of a tape.
const ROOT: At = At {
    ix: 0,
    start: 0,
    end: 0,
    key: 0,
};

/// What encoding a value told of whether it is normal ([`is_normal`]): the encoder sees every
/// member it drops, adds or writes otherwise than it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Normality {
    /// Written as it is: normal.
    Normal,
    /// Something was written otherwise: not normal.
    NotNormal,
    /// Not told: a float, which only decoding again tells.
    Unsure,
}

/// An object's text as [`encode`] wrote it, with the places of its values when they are known,
/// to be handed to [`encode_spliced`] again later without its scanning the text.
#[derive(Clone, Debug)]
pub(crate) struct Encoding {
    text: Box<str>,
    tape: Option<Tape>,
    normality: Normality,
    /// Whether encoding told that the value is [plain](crate::jsonpatch::is_plain).
    plain: bool,
}

impl Encoding {
    /// A text whose values' places are not known (not written by [`encode`]).
    pub(crate) fn text_only(text: String) -> Self {
        Encoding {
            text: text.into_boxed_str(),
            tape: None,
            normality: Normality::Unsure,
            plain: false,
        }
    }

    /// Whether [`encode`] wrote the text (which knows the places of its values): parsed, it is
    /// the value as a decode leaves it.
    pub(crate) fn is_typed(&self) -> bool {
        self.tape.is_some()
    }

    /// Whether the value encoded is [plain](crate::jsonpatch::is_plain), as far as encoding it
    /// told (false: not told).
    pub(crate) fn is_plain(&self) -> bool {
        self.plain
    }

    /// Whether the value encoded is normal, as far as encoding it told.
    pub(crate) fn normality(&self) -> Normality {
        self.normality
    }

    /// The text.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Makes the values' places known to [`encode_spliced`] and [`encode_changed`] on this
    /// thread again (they know them for the few texts written last), when they are known.
    pub(crate) fn remember(&self, schema: &Schema, id: TypeId) {
        if let Some(tape) = &self.tape {
            remember(
                schema,
                id,
                self.text.as_bytes(),
                std::sync::Arc::clone(tape),
            );
        }
    }
}

/// [`encode`], with the places of its values.
pub(crate) fn encode_with_places(
    schema: &Schema,
    id: TypeId,
    value: &Value,
) -> Result<Encoding, DecodeError> {
    let enc = written(schema, id, value)?;
    let normality = enc.normality;
    // A normal value holds no float (one leaves it unsure), and nests no deeper than its type
    // with the deepest raw member at its bottom.
    let plain = normality == Normality::Normal
        && schema
            .nesting(id)
            .is_some_and(|n| n + enc.raw_depth <= crate::jsonpatch::MAX_DIRECT_NESTING);
    let (text, tape) = enc.into_remembered(id)?;
    Ok(Encoding {
        text: text.into_boxed_str(),
        tape,
        normality,
        plain,
    })
}

/// [`encode`] of a map whose members are read through `member` (an object whose members are
/// not all in one map): the same JSON as [`encode`] of the map.
pub fn encode_members<'v>(
    schema: &Schema,
    id: TypeId,
    member: impl Fn(&str) -> Option<&'v Value>,
) -> Result<String, DecodeError> {
    let mut enc = Encoder::new(schema, 512);
    let st = schema.get(id);
    let mut slots = Slots::empty(st);
    for (i, field) in st.fields.iter().enumerate() {
        slots.set(i, member(&field.name));
    }
    enc.tape = Some(Vec::with_capacity(64));
    let root = enc.open(0);
    enc.write_slots(st, &slots)?;
    enc.close(root);
    enc.into_remembered_text(id)
}

/// The members of an object read one by one (an object whose members are not all in one map).
type Members<'f, 'v> = &'f dyn Fn(&str) -> Option<&'v Value>;

/// The text of an object encoded before, and the places of its values when they are known.
struct Old<'a> {
    text: &'a [u8],
    tape: Option<Tape>,
}

impl<'a> Old<'a> {
    /// `text`, with its places when this module wrote it lately, else None when it is not an
    /// object.
    fn recalled(schema: &Schema, id: TypeId, text: &'a str) -> Option<Self> {
        let text = text.as_bytes();
        let tape = recall(schema, id, text);
        (tape.is_some() || text.first() == Some(&b'{')).then_some(Old { text, tape })
    }

    /// The places of the top-level members, by field of `st`: from the tape, or scanned. None
    /// when a member is not one of its fields.
    fn top_level(&self, st: &Struct) -> Option<Vec<Option<At>>> {
        let mut places = vec![None; st.fields.len()];
        match &self.tape {
            Some(tape) => {
                for at in members_of(tape, ROOT) {
                    *places.get_mut(at.key)? = Some(at);
                }
            }
            None => {
                let mut foreign = false;
                crate::scan::members(self.text, (0, self.text.len()), |k, (start, end)| {
                    match std::str::from_utf8(k).ok().and_then(|k| st.index_of(k)) {
                        Some(key) => {
                            places[key] = Some(At {
                                ix: usize::MAX,
                                start,
                                end,
                                key,
                            });
                        }
                        None => foreign = true,
                    }
                })
                .ok()?;
                if foreign {
                    return None;
                }
            }
        }
        Some(places)
    }

    /// The bytes of the value `at`.
    fn bytes(&self, at: At) -> Result<&'a [u8], Unspliceable> {
        self.text.get(at.start..at.end).ok_or(Unspliceable)
    }
}

/// [`encode`] of an object whose encoding `old` is known and whose top-level members other than
/// `replaced` (a member's new value, or None when it is removed) are as they were: those members'
/// bytes are copied from `old`, only the replaced ones are encoded. None when `old` is not an
/// encoding of a map of that type (a member that is not one of its fields, say).
pub fn encode_spliced(
    schema: &Schema,
    id: TypeId,
    old: &str,
    replaced: &[(&str, Option<&Value>)],
) -> Option<Result<String, DecodeError>> {
    let st = schema.get(id);
    let old = Old::recalled(schema, id, old)?;
    let places = old.top_level(st)?;
    splice(schema, id, &old, |enc, i, field, first| {
        let new = replaced
            .iter()
            .find(|(n, _)| **n == *field.name)
            .map(|r| r.1);
        match (new, places[i]) {
            (Some(value), _) if omitted(schema, field, value) => {}
            (Some(value), _) => {
                enc.separate(st, i, first);
                enc.write_member(st, i, value)?;
            }
            (None, Some(at)) => {
                enc.separate(st, i, first);
                enc.copy(&old, at, i)?;
            }
            (None, None) => {}
        }
        Ok(())
    })
}

/// [`encode`] of `after`, an object of the struct type `id` made from `before`, whose encoding
/// `old` is known: every value, at any depth, that is equal in both keeps its bytes from `old`
/// (a struct's members pair by field, a map's by key, a list's items by position), only the
/// others are encoded. Values below the top level are paired when `deep` (worth it when most of
/// `before` is equal to `after` below its top level, not when `before` was not normal) and `old`'s
/// places are known. `edited`, when given, names every top-level member in which `after` can
/// differ from `before`: the others are copied without being compared. None when `old` is not an
/// encoding of a map of that type.
pub fn encode_changed(
    schema: &Schema,
    id: TypeId,
    old: &str,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
    deep: bool,
    edited: Option<&[String]>,
) -> Option<Result<String, DecodeError>> {
    encode_changed_members(
        schema,
        id,
        old,
        |n| before.get(n),
        |n| after.get(n),
        deep,
        edited,
    )
}

/// [`encode_changed`] of objects whose members are read through `before` and `after` (objects
/// whose members are not all in one map).
pub fn encode_changed_members<'v>(
    schema: &Schema,
    id: TypeId,
    old: &str,
    before: impl Fn(&str) -> Option<&'v Value>,
    after: impl Fn(&str) -> Option<&'v Value>,
    deep: bool,
    edited: Option<&[String]>,
) -> Option<Result<String, DecodeError>> {
    let st = schema.get(id);
    let old = Old::recalled(schema, id, old)?;
    let places = old.top_level(st)?;
    splice(schema, id, &old, |enc, i, field, first| {
        let (new, was) = (after(&field.name), before(&field.name));
        if omitted(schema, field, new) {
            return Ok(());
        }
        enc.separate(st, i, first);
        let unedited = edited.is_some_and(|names| !names.iter().any(|n| *n == *field.name));
        match places[i] {
            Some(at) if unedited || new == was => enc.copy(&old, at, i)?,
            Some(at) if deep && old.tape.is_some() => {
                enc.write_changed_member(st, i, (new, was), &old, at)?
            }
            _ => enc.write_member(st, i, new)?,
        }
        Ok(())
    })
}

/// Why a splice gave up: the old text is not what it was said to be.
struct Unspliceable;

/// A splice's failure: the old text unusable (the whole object is to be encoded), or a value
/// that does not decode.
enum SpliceError {
    Unspliceable,
    Decode(DecodeError),
}

impl From<Unspliceable> for SpliceError {
    fn from(_: Unspliceable) -> Self {
        SpliceError::Unspliceable
    }
}

impl From<DecodeError> for SpliceError {
    fn from(e: DecodeError) -> Self {
        SpliceError::Decode(e)
    }
}

/// Writes an object of the struct type `id` field by field in Go's order, each by `field(encoder,
/// index, field, first)`, which writes it (its comma and name too) or nothing; the text is
/// remembered with its places (a value copied from a scanned text is placed without its
/// members').
fn splice<'s>(
    schema: &'s Schema,
    id: TypeId,
    old: &Old<'_>,
    mut field: impl FnMut(&mut Encoder<'s>, usize, &'s Field, &mut bool) -> Result<(), SpliceError>,
) -> Option<Result<String, DecodeError>> {
    let st = schema.get(id);
    let mut enc = Encoder::new(schema, old.text.len() + 64);
    enc.tape = Some(Vec::with_capacity(
        old.tape.as_ref().map_or(16, |t| t.len() + 16),
    ));
    enc.owner = Some(st);
    let root = enc.open(0);
    enc.out.push(b'{');
    let mut first = true;
    for (i, f) in st.fields.iter().enumerate() {
        match field(&mut enc, i, f, &mut first) {
            Ok(()) => {}
            Err(SpliceError::Unspliceable) => return None,
            Err(SpliceError::Decode(e)) => return Some(Err(e)),
        }
    }
    enc.out.push(b'}');
    enc.close(root);
    Some(enc.into_remembered_text(id))
}

/// A text this module wrote for a struct type, and the places of its values.
struct Written {
    schema: *const Schema,
    id: TypeId,
    text: Box<[u8]>,
    tape: Tape,
}

thread_local! {
    /// The last texts written on this thread, for [`encode_spliced`] to find their members in
    /// without scanning them (the text it is given is most often one written just before).
    static WRITTEN: std::cell::RefCell<std::collections::VecDeque<Written>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// How many texts [`WRITTEN`] keeps.
const WRITTEN_KEPT: usize = 4;

fn remember(schema: &Schema, id: TypeId, text: &[u8], tape: Tape) {
    WRITTEN.with(|cell| {
        let mut written = cell.borrow_mut();
        if written.len() >= WRITTEN_KEPT {
            written.pop_back();
        }
        written.push_front(Written {
            schema,
            id,
            text: text.into(),
            tape,
        });
    });
}

/// The places of `text`'s values when it is one of the texts remembered (same bytes, same type).
fn recall(schema: &Schema, id: TypeId, text: &[u8]) -> Option<Tape> {
    WRITTEN.with(|cell| {
        let written = cell.borrow();
        written
            .iter()
            .find(|w| std::ptr::eq(w.schema, schema) && w.id == id && *w.text == *text)
            .map(|w| std::sync::Arc::clone(&w.tape))
    })
}

/// [`encode`], parsed back into a value: the object as the apiserver holds it after a decode.
pub fn normalize(
    schema: &Schema,
    id: TypeId,
    value: &Value,
) -> Result<(Value, String), DecodeError> {
    let json = encode(schema, id, value)?;
    let value = crate::json::from_str(&json).map_err(|e| DecodeError(e.to_string()))?;
    Ok((value, json))
}

/// [`normalize`]'s value, made in place: what Go's decoder and encoder change is changed (unknown
/// fields dropped, empty `omitempty` fields removed, absent fields Go writes added as their zero
/// value, times, quantities and base64 rewritten), the rest is left where it is. The same errors
/// as [`encode`]; on an error the value is left partly normalised.
pub fn normalize_in_place(
    schema: &Schema,
    id: TypeId,
    value: &mut Value,
) -> Result<(), DecodeError> {
    let mut enc = Encoder::new(schema, 0);
    enc.normalize(&Type::Struct(id), value)
}

/// [`normalize_in_place`] of `value` given `normal`, a normalised object of the same type (the
/// one a patch was applied to, say): the parts of `value` equal to `normal`'s at the same place
/// are normal already and are not walked. The same result and errors.
pub fn normalize_in_place_like(
    schema: &Schema,
    id: TypeId,
    value: &mut Value,
    normal: &Value,
) -> Result<(), DecodeError> {
    let mut enc = Encoder::new(schema, 0);
    enc.normalize_like(&Type::Struct(id), value, normal)
}

/// A place a JSON patch wrote to: the segments of the path of the member or element it added,
/// replaced or removed (unescaped), and whether it added or removed an element of a list, which
/// moves the elements after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit<'a> {
    /// The path's segments, from the root.
    pub path: Vec<&'a str>,
    /// Whether the edit added or removed (rather than replaced).
    pub resizes: bool,
}

impl<'a> Edit<'a> {
    /// The edit at `pointer`, a JSON pointer without escapes (`/spec/containers/-`).
    pub fn new(pointer: &'a str, resizes: bool) -> Self {
        Edit {
            path: pointer.split('/').skip(1).collect(),
            resizes,
        }
    }
}

/// [`normalize_in_place_like`] of `value`, which `normal` became through `edits` alone: what no
/// edit's path reaches is `normal`'s and is not looked at. Below a list whose elements an edit
/// added or removed, the elements from the first one edited on are compared as
/// [`normalize_in_place_like`] compares them. The same result and errors.
pub fn normalize_in_place_edited(
    schema: &Schema,
    id: TypeId,
    value: &mut Value,
    normal: &Value,
    edits: &[Edit<'_>],
) -> Result<(), DecodeError> {
    let edits: Vec<&Edit<'_>> = edits.iter().collect();
    let mut enc = Encoder::new(schema, 0);
    enc.normalize_edited(&Type::Struct(id), value, normal, &edits, 0)
}

/// [`normalize_in_place_edited`] of an object of the struct type `id` (a map) made from one whose
/// members are read through `normal` (an object whose members are not all in one map).
pub fn normalize_in_place_edited_members<'n>(
    schema: &Schema,
    id: TypeId,
    value: &mut Value,
    normal: impl Fn(&str) -> Option<&'n Value>,
    edits: &[Edit<'_>],
) -> Result<(), DecodeError> {
    let edits: Vec<&Edit<'_>> = edits.iter().collect();
    if edits.is_empty() {
        return Ok(());
    }
    let st = schema.get(id);
    let mut enc = Encoder::new(schema, 0);
    let Value::Object(members) = value else {
        return enc.normalize(&Type::Struct(id), value);
    };
    if edits.iter().any(|e| e.path.is_empty()) {
        return normalize_in_place(schema, id, value);
    }
    let names: Vec<&str> = edits.iter().map(|e| e.path[0]).collect();
    let owner = enc.owner.replace(st);
    enc.normalize_members(st, members, Some(&names), Some(&normal), Some((&edits, 0)))?;
    enc.owner = owner;
    Ok(())
}

/// [`normalize_in_place`] for an object whose members other than `members` are already as it
/// leaves them (normalising is idempotent): only the named top-level members are normalised,
/// dropped when Go leaves them out, or added when Go writes them absent, in the order and with
/// the errors the whole normalisation has.
pub fn normalize_members_in_place(
    schema: &Schema,
    id: TypeId,
    value: &mut Value,
    members: &[&str],
) -> Result<(), DecodeError> {
    let st = schema.get(id);
    let Value::Object(map) = value else {
        return normalize_in_place(schema, id, value);
    };
    let mut enc = Encoder::new(schema, 0);
    let owner = enc.owner.replace(st);
    enc.normalize_members(st, map, Some(members), None, None)?;
    enc.owner = owner;
    Ok(())
}

/// Whether [`normalize_in_place`] of an object of the struct type `id` (a map) leaves its
/// member `name`, present with `value`, as it is: a field of the type, not omitted, and written
/// by Go as it stands. Then the normalised object's member is `value` whatever the other members
/// are, even when normalising one of them fails (an error leaves the members after it as they
/// are, and drops nothing). False when unsure.
pub fn member_is_normal(schema: &Schema, id: TypeId, name: &str, value: &Value) -> bool {
    let st = schema.get(id);
    let Some(i) = st.index_of(name) else {
        return false;
    };
    let field = &st.fields[i];
    if omitted(schema, field, Some(value)) {
        return false;
    }
    let mut enc = Encoder::new(schema, 0);
    enc.owner = Some(st);
    enc.is_normal(&field.ty, value)
}

/// Whether `value` is as [`normalize`] into the struct type `id` leaves it.
pub fn is_normal(schema: &Schema, id: TypeId, value: &Value) -> bool {
    // An object that was never decoded most often lacks a member Go writes when absent
    // (`status: {}`): told without walking the others.
    let st = schema.get(id);
    let written = |members: &Map<String, Value>| {
        st.absent_written()
            .iter()
            .all(|&i| members.contains_key(&*st.fields[usize::from(i)].name))
    };
    value.as_object().is_some_and(written)
        && Encoder::new(schema, 0).is_normal(&Type::Struct(id), value)
}

/// The members of `value` a strict decode into the kind's Go type reports as unknown
/// (`sigs.k8s.io/json` with `DisallowUnknownFields`, as the apiserver's strict JSON serializer
/// decodes): each as its path from the root, struct fields and map keys joined by `.`, list items
/// as `[i]` (`spec.template.spec.containers[1].ports[0].containerPortZ`). Members of one object
/// are visited in the map's order (Go reports them in the order of the text, which for values
/// built from CEL, marshalled from maps, is the same). Values of the wrong JSON type are not
/// looked into: decoding reports those first ([`normalize_in_place`]).
pub fn unknown_fields(schema: &Schema, id: TypeId, value: &Value) -> Vec<String> {
    fn walk(schema: &Schema, ty: &Type, value: &Value, path: &mut String, out: &mut Vec<String>) {
        let at = path.len();
        match (ty, value) {
            (Type::Ptr(inner), v) => walk(schema, inner, v, path, out),
            (Type::List(inner), Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    path.push_str(&format!("[{i}]"));
                    walk(schema, inner, item, path, out);
                    path.truncate(at);
                }
            }
            (Type::Map(inner), Value::Object(members)) => {
                for (k, v) in members {
                    push_key(path, k);
                    walk(schema, inner, v, path, out);
                    path.truncate(at);
                }
            }
            (Type::Struct(id), Value::Object(members)) => {
                let st = schema.get(*id);
                for (k, v) in members {
                    push_key(path, k);
                    match st.index_of(k) {
                        Some(i) => walk(schema, &st.fields[i].ty, v, path, out),
                        None => out.push(path.clone()),
                    }
                    path.truncate(at);
                }
            }
            _ => {}
        }
    }
    fn push_key(path: &mut String, key: &str) {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    }
    let mut out = Vec::new();
    walk(
        schema,
        &Type::Struct(id),
        value,
        &mut String::new(),
        &mut out,
    );
    out
}

struct Encoder<'s> {
    schema: &'s Schema,
    out: Vec<u8>,
    /// JSON names from the root, for messages.
    path: Vec<&'s str>,
    /// The struct whose field is being decoded, for messages.
    owner: Option<&'s Struct>,
    /// The places of the values written, when they are recorded.
    tape: Option<Vec<Place>>,
    /// Where the value being written, whose members' places count from its start, starts.
    value_start: u32,
    /// Whether what was written so far is the value as it is.
    normality: Normality,
    /// How deep the deepest raw (`Raw`, `Any`) value written nests.
    raw_depth: usize,
}

/// A place [`Encoder::open`] started: its index, and where the value it is a member of starts.
#[derive(Clone, Copy)]
struct Opened {
    ix: usize,
    parent: u32,
}

/// What a JSON value is called in Go's `UnmarshalTypeError`.
fn json_kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

impl<'s> Encoder<'s> {
    fn new(schema: &'s Schema, capacity: usize) -> Self {
        Encoder {
            schema,
            out: Vec::with_capacity(capacity),
            path: Vec::new(),
            owner: None,
            tape: None,
            value_start: 0,
            normality: Normality::Normal,
            raw_depth: 0,
        }
    }

    /// Notes that a value is written otherwise than it is.
    fn not_normal(&mut self) {
        self.normality = Normality::NotNormal;
    }

    /// Notes a value whose being normal only decoding tells.
    fn unsure(&mut self) {
        if self.normality == Normality::Normal {
            self.normality = Normality::Unsure;
        }
    }

    /// The JSON written, its values' places remembered for [`encode_spliced`] and
    /// [`encode_changed`] when they were recorded.
    fn into_remembered_text(self, id: TypeId) -> Result<String, DecodeError> {
        self.into_remembered(id).map(|(text, _)| text)
    }

    /// [`Encoder::into_remembered_text`], with the places remembered.
    fn into_remembered(mut self, id: TypeId) -> Result<(String, Option<Tape>), DecodeError> {
        let tape: Option<Tape> = self.tape.take().map(Into::into);
        if let Some(tape) = &tape {
            remember(self.schema, id, &self.out, std::sync::Arc::clone(tape));
        }
        Ok((self.into_text()?, tape))
    }

    /// Starts the place of a value about to be written (`key`: see [`Place`]): what
    /// [`Encoder::close`] takes to end it.
    #[inline]
    fn open(&mut self, key: usize) -> Opened {
        let start = self.out.len() as u32;
        let parent = std::mem::replace(&mut self.value_start, start);
        let ix = match &mut self.tape {
            Some(tape) => {
                tape.push(Place {
                    start: start - parent,
                    len: 0,
                    size: 1,
                    key: key as u32,
                });
                tape.len() - 1
            }
            None => 0,
        };
        Opened { ix, parent }
    }

    /// Ends the place [`Encoder::open`] started, after its value and its members.
    #[inline]
    fn close(&mut self, opened: Opened) {
        let start = std::mem::replace(&mut self.value_start, opened.parent);
        let end = self.out.len() as u32;
        if let Some(tape) = &mut self.tape {
            let size = tape.len() - opened.ix;
            if let Some(place) = tape.get_mut(opened.ix) {
                place.len = end - start;
                place.size = size as u32;
            }
        }
    }

    /// Copies the value `at` of `old` as the value `key`, with its members' places when they are
    /// known.
    fn copy(&mut self, old: &Old<'_>, at: At, key: usize) -> Result<(), Unspliceable> {
        let bytes = old.bytes(at)?;
        let start = self.out.len() as u32;
        self.out.extend_from_slice(bytes);
        let Some(tape) = &mut self.tape else {
            return Ok(());
        };
        let subtree = old.tape.as_deref().and_then(|t| {
            let size = t.get(at.ix)?.size as usize;
            t.get(at.ix..at.ix + size)
        });
        let Some(subtree) = subtree else {
            // A value of a scanned text: placed without its members, which pairing then encodes.
            tape.push(Place {
                start: start - self.value_start,
                len: bytes.len() as u32,
                size: 1,
                key: key as u32,
            });
            return Ok(());
        };
        let first = tape.len();
        tape.extend_from_slice(subtree);
        if let Some(root) = tape.get_mut(first) {
            root.start = start - self.value_start;
            root.key = key as u32;
        }
        Ok(())
    }

    /// The JSON written.
    fn into_text(self) -> Result<String, DecodeError> {
        String::from_utf8(self.out).map_err(|e| DecodeError(e.to_string()))
    }

    fn type_error(&self, value: String, ty: &Type) -> DecodeError {
        let go_type = self.go_type(ty);
        match self.owner {
            Some(owner) if !self.path.is_empty() => DecodeError(format!(
                "json: cannot unmarshal {value} into Go struct field {}.{} of type {go_type}",
                owner.go_name().rsplit('.').next().unwrap_or_default(),
                self.path.join(".")
            )),
            _ => DecodeError(format!(
                "json: cannot unmarshal {value} into Go value of type {go_type}"
            )),
        }
    }

    fn go_type(&self, ty: &Type) -> String {
        match ty {
            Type::String => "string".into(),
            Type::Bool => "bool".into(),
            Type::Int(i) => i.go_name().into(),
            Type::Float => "float64".into(),
            Type::Bytes => "[]uint8".into(),
            Type::Time => "v1.Time".into(),
            Type::MicroTime => "v1.MicroTime".into(),
            Type::Quantity => "resource.Quantity".into(),
            Type::IntOrString => "intstr.IntOrString".into(),
            Type::Raw => "runtime.RawExtension".into(),
            Type::Any => "interface {}".into(),
            Type::Ptr(inner) => format!("*{}", self.go_type(inner)),
            Type::List(inner) => format!("[]{}", self.go_type(inner)),
            Type::Map(inner) => format!("map[string]{}", self.go_type(inner)),
            Type::Struct(id) => self.schema.get(*id).go_name().into(),
        }
    }

    /// Writes the Go encoding of `value` (None: absent) decoded into `ty`.
    fn write(&mut self, ty: &Type, value: Option<&Value>) -> Result<(), DecodeError> {
        if value.is_some_and(Value::is_null)
            && matches!(
                ty,
                Type::String
                    | Type::Bool
                    | Type::Int(_)
                    | Type::Float
                    | Type::Quantity
                    | Type::IntOrString
                    | Type::Struct(_)
            )
        {
            // Written as the zero value.
            self.not_normal();
        }
        let value = value.filter(|v| !v.is_null());
        match ty {
            Type::String => match value {
                None => self.out.extend_from_slice(b"\"\""),
                Some(Value::String(s)) => gostr::append_string(&mut self.out, s),
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Bool => match value {
                None | Some(Value::Bool(false)) => self.out.extend_from_slice(b"false"),
                Some(Value::Bool(true)) => self.out.extend_from_slice(b"true"),
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Int(it) => match value {
                None => self.out.push(b'0'),
                Some(Value::Number(n)) => self.write_int(n, *it, ty)?,
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Float => match value {
                None => self.out.push(b'0'),
                Some(Value::Number(n)) => match n.as_f64() {
                    _ if n.is_i64() || n.is_u64() => push_number_int(&mut self.out, n),
                    Some(f) => {
                        self.unsure();
                        gostr::push_go_float(&mut self.out, f)
                    }
                    None => self.out.push(b'0'),
                },
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Bytes => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(Value::String(s)) => {
                    let bytes = decode_base64(s)?;
                    let text = encode_base64(&bytes);
                    if text != *s {
                        self.not_normal();
                    }
                    self.out.push(b'"');
                    self.out.extend_from_slice(text.as_bytes());
                    self.out.push(b'"');
                }
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Time | Type::MicroTime => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(Value::String(s)) => {
                    let t = parse_rfc3339(s)?;
                    let text = if *ty == Type::Time {
                        t.format_seconds()
                    } else {
                        t.format_micros()
                    };
                    if text.as_deref() != Some(s.as_str()) {
                        self.not_normal();
                    }
                    match text {
                        Some(text) => {
                            self.out.push(b'"');
                            self.out.extend_from_slice(text.as_bytes());
                            self.out.push(b'"');
                        }
                        None => self.out.extend_from_slice(b"null"),
                    }
                }
                Some(v) => {
                    return Err(DecodeError(format!(
                        "json: cannot unmarshal {} into Go value of type string",
                        json_kind(v)
                    )));
                }
            },
            Type::Quantity => match value {
                None => self.out.extend_from_slice(b"\"0\""),
                Some(v) => {
                    let text = quantity_text(v)?;
                    if v.as_str() != Some(&*text) {
                        self.not_normal();
                    }
                    self.out.push(b'"');
                    self.out.extend_from_slice(text.as_bytes());
                    self.out.push(b'"');
                }
            },
            Type::IntOrString => match value {
                None => self.out.push(b'0'),
                Some(Value::String(s)) => gostr::append_string(&mut self.out, s),
                Some(Value::Number(n)) => {
                    self.write_int(n, IntType::I32, &Type::Int(IntType::I32))?
                }
                Some(v) => {
                    return Err(DecodeError(format!(
                        "json: cannot unmarshal {} into Go value of type int32",
                        json_kind(v)
                    )));
                }
            },
            Type::Raw | Type::Any => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(v) => {
                    let (float, depth) = raw_shape(v);
                    if float {
                        self.unsure();
                    }
                    self.raw_depth = self.raw_depth.max(depth);
                    write_any(&mut self.out, v)
                }
            },
            Type::Ptr(inner) => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(v) => self.write(inner, Some(v))?,
            },
            Type::List(inner) => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(Value::Array(items)) => {
                    self.out.push(b'[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            self.out.push(b',');
                        }
                        let at = self.open(i);
                        self.write(inner, Some(item))?;
                        self.close(at);
                    }
                    self.out.push(b']');
                }
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Map(inner) => match value {
                None => self.out.extend_from_slice(b"null"),
                Some(Value::Object(members)) => {
                    self.out.push(b'{');
                    for (i, (k, v)) in members.iter().enumerate() {
                        if i > 0 {
                            self.out.push(b',');
                        }
                        gostr::append_string(&mut self.out, k);
                        self.out.push(b':');
                        let at = self.open(i);
                        self.write(inner, Some(v))?;
                        self.close(at);
                    }
                    self.out.push(b'}');
                }
                Some(v) => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Struct(id) => {
                let st = self.schema.get(*id);
                match value {
                    None => self.write_struct(st, None)?,
                    Some(Value::Object(members)) => self.write_struct(st, Some(members))?,
                    Some(v) => return Err(self.type_error(json_kind(v), ty)),
                }
            }
        }
        Ok(())
    }

    /// The members of a struct `st`, normalised in place (`only`: just those named, the rest
    /// being normal already): unknown and omitted members dropped, absent ones Go writes added.
    fn normalize_members<'n>(
        &mut self,
        st: &'s Struct,
        members: &mut Map<String, Value>,
        only: Option<&[&str]>,
        like: Option<Members<'_, 'n>>,
        edits: Option<(&[&Edit<'_>], usize)>,
    ) -> Result<(), DecodeError> {
        let chosen = |name: &str| only.is_none_or(|names| names.contains(&name));
        let mut present = [0u64; 4];
        let mut drop: Vec<String> = Vec::new();
        for (k, v) in members.iter_mut() {
            if !chosen(k) {
                continue;
            }
            let Some(i) = st.index_of(k) else {
                drop.push(k.clone());
                continue;
            };
            let field = &st.fields[i];
            if omitted(self.schema, field, Some(v)) {
                drop.push(k.clone());
                continue;
            }
            if let Some(word) = present.get_mut(i / 64) {
                *word |= 1 << (i % 64);
            }
            self.path.push(&field.name);
            self.owner = Some(st);
            let result = match (like.and_then(|m| m(k)), edits) {
                (Some(normal), Some((edits, depth))) => {
                    let here = edits_at(edits, depth, |s| s == k);
                    self.normalize_edited(&field.ty, v, normal, &here, depth + 1)
                }
                (Some(normal), None) => self.normalize_like(&field.ty, v, normal),
                (None, _) => self.normalize(&field.ty, v),
            };
            self.path.pop();
            result?;
        }
        for k in drop {
            members.remove(&k);
        }
        for &i in st.absent_written() {
            let i = usize::from(i);
            let known = present.get(i / 64).map(|w| w & (1 << (i % 64)) != 0);
            if known == Some(true) {
                continue;
            }
            let field = &st.fields[i];
            if !chosen(&field.name) || members.contains_key(&*field.name) {
                continue;
            }
            let mut zero = Value::Null;
            self.path.push(&field.name);
            self.owner = Some(st);
            let result = self.normalize(&field.ty, &mut zero);
            self.path.pop();
            result?;
            members.insert(field.name.to_string(), zero);
        }
        Ok(())
    }

    /// [`Encoder::normalize`] of `value` given `normal`, a normalised value of the same type at
    /// the same place: what equals it is left as it is.
    fn normalize_like(
        &mut self,
        ty: &Type,
        value: &mut Value,
        normal: &Value,
    ) -> Result<(), DecodeError> {
        if *value == *normal {
            return Ok(());
        }
        match (ty, &mut *value, normal) {
            (Type::Ptr(inner), v, _) if !v.is_null() => self.normalize_like(inner, v, normal),
            (Type::List(inner), Value::Array(items), Value::Array(normal_items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    match normal_items.get(i) {
                        Some(n) => self.normalize_like(inner, item, n)?,
                        None => self.normalize(inner, item)?,
                    }
                }
                Ok(())
            }
            (Type::Map(inner), Value::Object(members), Value::Object(normal_members)) => {
                for (k, item) in members.iter_mut() {
                    match normal_members.get(k) {
                        Some(n) => self.normalize_like(inner, item, n)?,
                        None => self.normalize(inner, item)?,
                    }
                }
                Ok(())
            }
            (Type::Struct(id), Value::Object(members), Value::Object(normal_members)) => {
                let st = self.schema.get(*id);
                let owner = self.owner.replace(st);
                self.normalize_members(
                    st,
                    members,
                    None,
                    Some(&|k: &str| normal_members.get(k)),
                    None,
                )?;
                self.owner = owner;
                Ok(())
            }
            _ => self.normalize(ty, value),
        }
    }

    /// [`Encoder::normalize_like`] of `value`, which `normal` became through `edits` (whose
    /// paths run through this value, `depth` segments down) alone.
    fn normalize_edited(
        &mut self,
        ty: &Type,
        value: &mut Value,
        normal: &Value,
        edits: &[&Edit<'_>],
        depth: usize,
    ) -> Result<(), DecodeError> {
        if edits.is_empty() {
            return Ok(());
        }
        if edits.iter().any(|e| e.path.len() <= depth) {
            return self.normalize_like(ty, value, normal);
        }
        match (ty, &mut *value, normal) {
            (Type::Ptr(inner), v, _) if !v.is_null() => {
                self.normalize_edited(inner, v, normal, edits, depth)
            }
            (Type::List(inner), Value::Array(items), Value::Array(normal_items)) => {
                let resized = edits.iter().any(|e| e.resizes && e.path.len() == depth + 1);
                if resized {
                    // Elements before the first one edited are where they were.
                    let first = edits
                        .iter()
                        .map(|e| match e.path[depth] {
                            "-" => normal_items.len(),
                            s => s.parse().unwrap_or(0),
                        })
                        .min()
                        .unwrap_or(0);
                    for (i, item) in items.iter_mut().enumerate().skip(first) {
                        match normal_items.get(i) {
                            Some(n) => self.normalize_like(inner, item, n)?,
                            None => self.normalize(inner, item)?,
                        }
                    }
                    return Ok(());
                }
                for (i, item) in items.iter_mut().enumerate() {
                    let here = edits_at(edits, depth, |s| s.parse() == Ok(i));
                    match normal_items.get(i) {
                        Some(n) => self.normalize_edited(inner, item, n, &here, depth + 1)?,
                        None => self.normalize(inner, item)?,
                    }
                }
                Ok(())
            }
            (Type::Map(inner), Value::Object(members), Value::Object(normal_members)) => {
                for (k, item) in members.iter_mut() {
                    let here = edits_at(edits, depth, |s| s == k);
                    match normal_members.get(k) {
                        Some(n) => self.normalize_edited(inner, item, n, &here, depth + 1)?,
                        None => self.normalize(inner, item)?,
                    }
                }
                Ok(())
            }
            (Type::Struct(id), Value::Object(members), Value::Object(normal_members)) => {
                let st = self.schema.get(*id);
                let names: Vec<&str> = edits.iter().map(|e| e.path[depth]).collect();
                let owner = self.owner.replace(st);
                self.normalize_members(
                    st,
                    members,
                    Some(&names),
                    Some(&|k: &str| normal_members.get(k)),
                    Some((edits, depth)),
                )?;
                self.owner = owner;
                Ok(())
            }
            _ => self.normalize_like(ty, value, normal),
        }
    }

    /// Normalises `value` (`null` standing for an absent one) as [`Encoder::write`] would
    /// write it, in place.
    fn normalize(&mut self, ty: &Type, value: &mut Value) -> Result<(), DecodeError> {
        match ty {
            Type::Ptr(inner) => {
                if !value.is_null() {
                    self.normalize(inner, value)?;
                }
            }
            Type::List(inner) => match value {
                Value::Null => {}
                Value::Array(items) => {
                    for item in items {
                        self.normalize(inner, item)?;
                    }
                }
                v => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Map(inner) => match value {
                Value::Null => {}
                Value::Object(members) => {
                    for item in members.values_mut() {
                        self.normalize(inner, item)?;
                    }
                }
                v => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Struct(id) => {
                let st = self.schema.get(*id);
                if value.is_null() {
                    *value = Value::Object(Map::new());
                }
                let Value::Object(members) = value else {
                    return Err(self.type_error(json_kind(value), ty));
                };
                let owner = self.owner.replace(st);
                self.normalize_members(st, members, None, None, None)?;
                self.owner = owner;
            }
            // Unchanged when valid; null becomes the zero value.
            Type::String => match value {
                Value::Null => *value = Value::String(String::new()),
                Value::String(_) => {}
                v => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Bool => match value {
                Value::Null => *value = Value::Bool(false),
                Value::Bool(_) => {}
                v => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Int(it) => match value {
                Value::Null => *value = Value::from(0),
                Value::Number(n) => self.check_int(n, *it, ty)?,
                v => return Err(self.type_error(json_kind(v), ty)),
            },
            Type::Quantity => {
                let canonical = match &*value {
                    Value::Null => std::rc::Rc::from("0"),
                    v => quantity_text(v)?,
                };
                if value.as_str() != Some(&*canonical) {
                    *value = Value::String(canonical.to_string());
                }
            }
            Type::Raw | Type::Any if !has_float(value) => {}
            _ => {
                // The rest is rewritten by Go: write it and read it back.
                self.out.clear();
                self.write(ty, Some(value))?;
                *value =
                    crate::json::from_slice(&self.out).map_err(|e| DecodeError(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Whether [`Encoder::normalize`] of `value` succeeds and leaves it as it is, told without
    /// copying it: containers are walked, and only the leaves Go rewrites (times, bytes, floats,
    /// int-or-strings) are normalised on a copy to tell.
    fn is_normal(&mut self, ty: &Type, value: &Value) -> bool {
        match (ty, value) {
            (Type::Ptr(_) | Type::List(_) | Type::Map(_), Value::Null) => true,
            (Type::Ptr(inner), v) => self.is_normal(inner, v),
            (Type::List(inner), Value::Array(items)) => {
                items.iter().all(|item| self.is_normal(inner, item))
            }
            (Type::Map(inner), Value::Object(members)) => {
                members.values().all(|item| self.is_normal(inner, item))
            }
            (Type::Struct(id), Value::Object(members)) => {
                let st = self.schema.get(*id);
                self.struct_is_normal(st, members)
            }
            (Type::String, Value::String(_)) | (Type::Bool, Value::Bool(_)) => true,
            (Type::Int(it), Value::Number(n)) => self.check_int(n, *it, ty).is_ok(),
            (Type::Quantity, Value::String(text)) => {
                quantity_text(value).is_ok_and(|canonical| *canonical == **text)
            }
            (Type::Raw | Type::Any, v) if !has_float(v) => true,
            // A null struct, string, bool, integer or quantity becomes its zero value; another
            // JSON type is an error.
            (
                Type::Struct(_)
                | Type::List(_)
                | Type::Map(_)
                | Type::String
                | Type::Bool
                | Type::Int(_)
                | Type::Quantity,
                _,
            ) => false,
            _ => {
                let mut copy = value.clone();
                self.normalize(ty, &mut copy).is_ok() && copy == *value
            }
        }
    }

    /// [`Encoder::is_normal`] of a struct's members: each a field, not omitted and normal, and
    /// every field Go writes when absent present.
    fn struct_is_normal(&mut self, st: &'s Struct, members: &Map<String, Value>) -> bool {
        // The first 64 fields present, by bit; later ones are looked up.
        let mut present = 0u64;
        for (k, v) in members {
            let Some(i) = st.index_of(k) else {
                return false;
            };
            let field = &st.fields[i];
            if omitted(self.schema, field, Some(v)) || !self.is_normal(&field.ty, v) {
                return false;
            }
            present |= 1u64.checked_shl(i as u32).unwrap_or(0);
        }
        st.absent_written()
            .iter()
            .all(|&i| match 1u64.checked_shl(u32::from(i)) {
                Some(bit) => present & bit != 0,
                None => members.contains_key(&*st.fields[usize::from(i)].name),
            })
    }

    fn write_int(&mut self, n: &Number, it: IntType, ty: &Type) -> Result<(), DecodeError> {
        self.check_int(n, it, ty)?;
        push_number_int(&mut self.out, n);
        Ok(())
    }

    /// Go's decoder's check of an integer field: a whole number within the type's range.
    fn check_int(&self, n: &Number, it: IntType, ty: &Type) -> Result<(), DecodeError> {
        let (min, max) = it.range();
        let value = n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from));
        match value {
            Some(v) if (min..=max).contains(&v) => Ok(()),
            _ => Err(self.type_error(format!("number {n}"), ty)),
        }
    }

    fn write_struct(
        &mut self,
        st: &'s Struct,
        members: Option<&Map<String, Value>>,
    ) -> Result<(), DecodeError> {
        let mut slots = Slots::empty(st);
        if !slots.fill(st, members) {
            // A member that is no field is dropped.
            self.not_normal();
        }
        self.write_slots(st, &slots)
    }

    fn write_slots(&mut self, st: &'s Struct, slots: &Slots<'_>) -> Result<(), DecodeError> {
        self.out.push(b'{');
        let mut first = true;
        let owner = self.owner.replace(st);
        if let Some(present) = slots.present() {
            // Only the fields present or written when absent can be written: visited by bit,
            // in Go's order, instead of every field of the struct.
            let mut bits = present | st.written_when_absent();
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.write_field(st, i, slots.get(i), &mut first)?;
            }
        } else {
            for i in 0..st.fields.len() {
                self.write_field(st, i, slots.get(i), &mut first)?;
            }
        }
        self.owner = owner;
        self.out.push(b'}');
        Ok(())
    }

    /// The comma before field `i` of `st` unless it is the `first` written, and its name.
    fn separate(&mut self, st: &Struct, i: usize, first: &mut bool) {
        if !*first {
            self.out.push(b',');
        }
        *first = false;
        self.out.extend_from_slice(st.key(i));
    }

    /// Writes `value` as field `i` of `st` (its name written already).
    #[inline(always)]
    fn write_member(
        &mut self,
        st: &'s Struct,
        i: usize,
        value: Option<&Value>,
    ) -> Result<(), DecodeError> {
        self.in_member(st, i, |enc, ty| enc.write(ty, value))
    }

    /// [`Encoder::write_changed`] of field `i` of `st` (its name written already), `new` made
    /// from `was`, whose value is `at` in `old`.
    fn write_changed_member(
        &mut self,
        st: &'s Struct,
        i: usize,
        (new, was): (Option<&Value>, Option<&Value>),
        old: &Old<'_>,
        at: At,
    ) -> Result<(), SpliceError> {
        self.in_member(st, i, |enc, ty| enc.write_changed(ty, new, was, old, at))
    }

    /// Writes field `i` of `st` with `write(encoder, its type)`: its place recorded, and its
    /// name on the path for messages.
    #[inline(always)]
    fn in_member<E>(
        &mut self,
        st: &'s Struct,
        i: usize,
        write: impl FnOnce(&mut Self, &Type) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(field) = st.fields.get(i) else {
            return Ok(());
        };
        self.path.push(&field.name);
        self.owner = Some(st);
        let at = self.open(i);
        let result = write(self, &field.ty);
        self.close(at);
        self.path.pop();
        result
    }

    /// Writes `new` of the type `ty` (as [`Encoder::write`]), made from `was` whose encoding is
    /// the value at index `ix` of `old`'s tape: what is equal in both, a struct's member, a
    /// map's value or a list's item at the same position, is copied from `old`.
    fn write_changed(
        &mut self,
        ty: &Type,
        new: Option<&Value>,
        was: Option<&Value>,
        old: &Old<'_>,
        at: At,
    ) -> Result<(), SpliceError> {
        let (new, was) = (new.filter(|v| !v.is_null()), was.filter(|v| !v.is_null()));
        let tape = old.tape.as_deref().ok_or(Unspliceable)?;
        match (ty, new, was) {
            (Type::Ptr(inner), Some(_), Some(_)) => self.write_changed(inner, new, was, old, at)?,
            (Type::Struct(id), Some(Value::Object(new)), Some(Value::Object(was))) => {
                let st = self.schema.get(*id);
                let mut places = vec![None; st.fields.len()];
                for member in members_of(tape, at) {
                    *places.get_mut(member.key).ok_or(Unspliceable)? = Some(member);
                }
                let mut now = Slots::empty(st);
                now.fill(st, Some(new));
                let mut then = Slots::empty(st);
                then.fill(st, Some(was));
                let owner = self.owner.replace(st);
                self.out.push(b'{');
                let mut first = true;
                let mut field = |enc: &mut Self, i: usize| {
                    let Some(field) = st.fields.get(i) else {
                        return Ok(());
                    };
                    let (new, was) = (now.get(i), then.get(i));
                    if omitted(enc.schema, field, new) {
                        return Ok(());
                    }
                    enc.separate(st, i, &mut first);
                    match places[i] {
                        Some(at) if new == was => enc.copy(old, at, i)?,
                        Some(at) => enc.write_changed_member(st, i, (new, was), old, at)?,
                        None => enc.write_member(st, i, new)?,
                    }
                    Ok::<_, SpliceError>(())
                };
                if let Some(present) = now.present() {
                    let mut bits = present | st.written_when_absent();
                    while bits != 0 {
                        let i = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        field(self, i)?;
                    }
                } else {
                    for i in 0..st.fields.len() {
                        field(self, i)?;
                    }
                }
                self.out.push(b'}');
                self.owner = owner;
            }
            (Type::List(inner), Some(Value::Array(new)), Some(Value::Array(was))) => {
                let mut olds = was.iter().zip(members_of(tape, at));
                self.out.push(b'[');
                for (i, item) in new.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    let paired = olds.next();
                    if let Some((_, at)) = paired.filter(|(w, _)| *w == item) {
                        self.copy(old, at, i)?;
                        continue;
                    }
                    let here = self.open(i);
                    match paired {
                        Some((w, at)) => self.write_changed(inner, Some(item), Some(w), old, at)?,
                        None => self.write(inner, Some(item))?,
                    }
                    self.close(here);
                }
                self.out.push(b']');
            }
            (Type::Map(inner), Some(Value::Object(new)), Some(Value::Object(was))) => {
                // Go writes a map's keys sorted, as the map holds them.
                let mut olds = was.iter().zip(members_of(tape, at)).peekable();
                self.out.push(b'{');
                for (i, (key, value)) in new.iter().enumerate() {
                    if i > 0 {
                        self.out.push(b',');
                    }
                    while olds
                        .next_if(|((k, _), _)| k.as_str() < key.as_str())
                        .is_some()
                    {}
                    gostr::append_string(&mut self.out, key);
                    self.out.push(b':');
                    let paired = olds.next_if(|((k, _), _)| *k == key);
                    if let Some(((_, _), at)) = paired.filter(|((_, w), _)| *w == value) {
                        self.copy(old, at, i)?;
                        continue;
                    }
                    let here = self.open(i);
                    match paired {
                        Some(((_, w), at)) => {
                            self.write_changed(inner, Some(value), Some(w), old, at)?
                        }
                        None => self.write(inner, Some(value))?,
                    }
                    self.close(here);
                }
                self.out.push(b'}');
            }
            _ => self.write(ty, new)?,
        }
        Ok(())
    }

    /// Writes field `i` of `st` (with its name and the comma before it unless `first`) unless
    /// Go leaves it out.
    #[inline(always)]
    fn write_field(
        &mut self,
        st: &'s Struct,
        i: usize,
        value: Option<&Value>,
        first: &mut bool,
    ) -> Result<(), DecodeError> {
        let Some(field) = st.fields.get(i) else {
            return Ok(());
        };
        if omitted(self.schema, field, value) {
            if value.is_some() {
                self.not_normal();
            }
            return Ok(());
        }
        if value.is_none() {
            // Written although absent.
            self.not_normal();
        }
        self.separate(st, i, first);
        self.write_member(st, i, value)
    }
}

/// A struct's members by field index: each member looked up once by name, instead of each of
/// the (often many more) fields being searched for among the members.
struct Slots<'v> {
    small: [Option<&'v Value>; 64],
    large: Vec<Option<&'v Value>>,
    /// Bit `i` set when `small[i]` is a member (structs of up to 64 fields).
    present: u64,
}

impl<'v> Slots<'v> {
    // Inlined, so that the 64 slots are made where they are used: returned from a call, they
    // would be copied there.
    #[inline(always)]
    fn empty(st: &Struct) -> Self {
        let mut slots = Slots {
            small: [None; 64],
            large: Vec::new(),
            present: 0,
        };
        if st.fields.len() > slots.small.len() {
            slots.large = vec![None; st.fields.len()];
        }
        slots
    }

    #[inline]
    fn set(&mut self, i: usize, v: Option<&'v Value>) {
        if let Some(slot) = self.small.get_mut(i).filter(|_| self.large.is_empty()) {
            *slot = v;
            if v.is_some() {
                self.present |= 1 << i;
            } else {
                self.present &= !(1 << i);
            }
        } else if let Some(slot) = self.large.get_mut(i) {
            *slot = v;
        }
    }

    /// Sets the slots of `members` (the slots being [`Slots::empty`]'s for `st`); false when
    /// some member is no field of `st`.
    fn fill(&mut self, st: &Struct, members: Option<&'v Map<String, Value>>) -> bool {
        let mut all_fields = true;
        for (k, v) in members.into_iter().flatten() {
            match st.index_of(k) {
                Some(i) => self.set(i, Some(v)),
                None => all_fields = false,
            }
        }
        all_fields
    }

    #[inline]
    fn get(&self, i: usize) -> Option<&'v Value> {
        if self.large.is_empty() {
            self.small.get(i).copied().flatten()
        } else {
            self.large.get(i).copied().flatten()
        }
    }

    /// The fields set, by bit, when the struct has 64 fields or fewer.
    fn present(&self) -> Option<u64> {
        self.large.is_empty().then_some(self.present)
    }
}

type QuantityTexts = std::collections::HashMap<
    Box<str>,
    Result<std::rc::Rc<str>, DecodeError>,
    std::hash::BuildHasherDefault<crate::registry::FxHasher>,
>;

thread_local! {
    /// [`quantity_text`]'s answers for the strings seen last on this thread.
    static QUANTITY_TEXTS: std::cell::RefCell<QuantityTexts> = Default::default();
}

/// The text Go's `MarshalJSON` writes (without its quotes) for a quantity decoded from `value`,
/// or the decode error. Objects repeat a few quantities many times and parsing and printing one
/// costs more than the rest of its encoding, so the answers for strings are remembered per
/// thread (up to 512 strings, then forgotten together).
fn quantity_text(value: &Value) -> Result<std::rc::Rc<str>, DecodeError> {
    fn parse(value: &Value) -> Result<std::rc::Rc<str>, DecodeError> {
        match Quantity::from_json(value) {
            Ok(Some(q)) => Ok(q.to_string().into()),
            Ok(None) => Ok("0".into()),
            Err(e) => Err(DecodeError(e.to_string())),
        }
    }
    let Value::String(text) = value else {
        return parse(value);
    };
    QUANTITY_TEXTS.with(|cell| {
        let mut texts = cell.borrow_mut();
        if let Some(known) = texts.get(text.as_str()) {
            return known.clone();
        }
        let answer = parse(value);
        if texts.len() >= 512 {
            texts.clear();
        }
        texts.insert(text.as_str().into(), answer.clone());
        answer
    })
}

/// Whether Go's encoder writes the field when the decoded value left it unset: not
/// [`omitted`] with no value, told without the schema (a struct's zero value is its absence).
pub(super) fn written_when_absent(field: &Field) -> bool {
    // `is_zero` of an absent value is true for every type but a quantity.
    if field.omitzero && field.ty != Type::Quantity {
        return false;
    }
    !field.omitempty || omitempty_keeps(&field.ty)
}

/// Whether `omitempty` never leaves out a field of this type (a struct, or a type with a JSON
/// form of its own).
pub(super) fn omitempty_keeps(ty: &Type) -> bool {
    matches!(
        ty,
        Type::Time
            | Type::MicroTime
            | Type::Quantity
            | Type::IntOrString
            | Type::Raw
            | Type::Struct(_)
    )
}

/// The edits of `edits` whose segment `depth` down `at` takes.
fn edits_at<'e, 'a>(
    edits: &[&'e Edit<'a>],
    depth: usize,
    at: impl Fn(&str) -> bool,
) -> Vec<&'e Edit<'a>> {
    edits
        .iter()
        .copied()
        .filter(|e| e.path.get(depth).is_some_and(|s| at(s)))
        .collect()
}

/// Whether Go's encoder leaves the field out: `omitempty` on a false, 0, "", nil pointer or empty
/// slice/map/string (never a struct); `omitzero` on the zero value.
fn omitted(schema: &Schema, field: &Field, value: Option<&Value>) -> bool {
    if field.omitzero && is_zero(schema, &field.ty, value) {
        return true;
    }
    if !field.omitempty {
        return false;
    }
    let value = value.filter(|v| !v.is_null());
    match &field.ty {
        Type::String => value.is_none_or(|v| v.as_str() == Some("")),
        Type::Bool => matches!(value, None | Some(Value::Bool(false))),
        Type::Int(_) | Type::Float => match value {
            None => true,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(_) => false,
        },
        Type::Bytes => value.is_none_or(|v| v.as_str() == Some("")),
        Type::Ptr(_) | Type::Any => value.is_none(),
        Type::List(_) => value.is_none_or(|v| v.as_array().is_some_and(Vec::is_empty)),
        Type::Map(_) => value.is_none_or(|v| v.as_object().is_some_and(Map::is_empty)),
        Type::Time
        | Type::MicroTime
        | Type::Quantity
        | Type::IntOrString
        | Type::Raw
        | Type::Struct(_) => false,
    }
}

/// Go's zero value test (`reflect.Value.IsZero`, or the type's `IsZero` method) for `omitzero`.
fn is_zero(schema: &Schema, ty: &Type, value: Option<&Value>) -> bool {
    let value = value.filter(|v| !v.is_null());
    match ty {
        Type::Struct(id) => match value {
            None => true,
            Some(Value::Object(m)) => schema
                .get(*id)
                .fields
                .iter()
                .all(|f| is_zero(schema, &f.ty, m.get(&*f.name))),
            Some(_) => false,
        },
        Type::Time | Type::MicroTime => match value {
            None => true,
            Some(Value::String(s)) => parse_rfc3339(s).is_ok_and(|t| t.is_zero()),
            Some(_) => false,
        },
        Type::Ptr(_) | Type::Any | Type::Raw => value.is_none(),
        Type::List(_) | Type::Map(_) | Type::Bytes => value.is_none(),
        Type::String => value.is_none_or(|v| v.as_str() == Some("")),
        Type::Bool => matches!(value, None | Some(Value::Bool(false))),
        Type::Int(_) | Type::Float | Type::IntOrString => match value {
            None => true,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(_) => false,
        },
        Type::Quantity => false,
    }
}

/// Appends an integer `n` (one `as_i64` or `as_u64` reads) in decimal, as Go writes it;
/// nothing for another number.
fn push_number_int(out: &mut Vec<u8>, n: &Number) {
    let (negative, u) = match (n.as_i64(), n.as_u64()) {
        (Some(i), _) => (i < 0, i.unsigned_abs()),
        (None, Some(u)) => (false, u),
        (None, None) => return,
    };
    crate::gofmt::push_decimal(out, negative, u);
}

/// Whether a float is anywhere in `v` (Go may write it as an integer).
fn has_float(v: &Value) -> bool {
    raw_shape(v).0
}

/// Whether `v` holds a float, and how many levels of objects and arrays it has.
fn raw_shape(v: &Value) -> (bool, usize) {
    let member = |(f, d): (bool, usize), c: &Value| {
        let (g, e) = raw_shape(c);
        (f || g, d.max(e + 1))
    };
    match v {
        Value::Number(n) => (n.is_f64(), 0),
        Value::Array(items) => items.iter().fold((false, 1), member),
        Value::Object(members) => members.values().fold((false, 1), member),
        _ => (false, 0),
    }
}

/// Writes any JSON value as Go's encoder writes an `interface{}` (map keys sorted, strings
/// HTML-escaped, numbers as decoded: integers exactly, others as float64).
fn write_any(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => match n.as_f64() {
            _ if n.is_i64() || n.is_u64() => push_number_int(out, n),
            Some(f) => gostr::push_go_float(out, f),
            None => out.extend_from_slice(n.to_string().as_bytes()),
        },
        Value::String(s) => gostr::append_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_any(out, item);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                gostr::append_string(out, k);
                out.push(b':');
                write_any(out, item);
            }
            out.push(b'}');
        }
    }
}

/// `apiequality.Semantic.DeepEqual` of two objects of the struct type `id`, each as
/// [`normalize`] gives it: equal values, where a nil and an empty slice or map are equal and
/// quantities compare by value.
pub fn semantic_equal(schema: &Schema, id: TypeId, a: &Value, b: &Value) -> bool {
    equal(schema, &Type::Struct(id), Some(a), Some(b))
}

/// [`semantic_equal`] of two maps of the struct type `id` whose members are read through `a` and
/// `b` (objects whose members are not all in one map).
pub fn semantic_equal_members<'a, 'b>(
    schema: &Schema,
    id: TypeId,
    a: impl Fn(&str) -> Option<&'a Value>,
    b: impl Fn(&str) -> Option<&'b Value>,
) -> bool {
    schema
        .get(id)
        .fields
        .iter()
        .all(|f| equal(schema, &f.ty, a(&f.name), b(&f.name)))
}

fn equal(schema: &Schema, ty: &Type, a: Option<&Value>, b: Option<&Value>) -> bool {
    let (a, b) = (a.filter(|v| !v.is_null()), b.filter(|v| !v.is_null()));
    // Equal JSON is equal Go values; only what differs needs the type's rules.
    if a == b {
        return true;
    }
    match ty {
        Type::List(inner) => {
            let (x, y) = (
                a.and_then(Value::as_array).map_or(&[][..], Vec::as_slice),
                b.and_then(Value::as_array).map_or(&[][..], Vec::as_slice),
            );
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(v, w)| equal(schema, inner, Some(v), Some(w)))
        }
        Type::Map(inner) => {
            let empty = Map::new();
            let x = a.and_then(Value::as_object).unwrap_or(&empty);
            let y = b.and_then(Value::as_object).unwrap_or(&empty);
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.get(k)
                        .is_some_and(|w| equal(schema, inner, Some(v), Some(w)))
                })
        }
        Type::Ptr(inner) => match (a, b) {
            (None, None) => true,
            (Some(v), Some(w)) => equal(schema, inner, Some(v), Some(w)),
            _ => false,
        },
        Type::Struct(id) => {
            // Fields absent from both are equal: only the members need comparing.
            let st = schema.get(*id);
            let (x, y) = (a.and_then(Value::as_object), b.and_then(Value::as_object));
            let field = |k: &str| st.index_of(k).map(|i| &st.fields[i]);
            x.into_iter().flatten().all(|(k, v)| {
                field(k).is_none_or(|f| equal(schema, &f.ty, Some(v), y.and_then(|m| m.get(k))))
            }) && y.into_iter().flatten().all(|(k, w)| {
                x.is_some_and(|m| m.contains_key(k))
                    || field(k).is_none_or(|f| equal(schema, &f.ty, None, Some(w)))
            })
        }
        Type::Any | Type::Raw => any_equal(a, b),
        Type::Quantity => {
            let parse = |v: Option<&Value>| {
                v.map_or(Ok(None), Quantity::from_json)
                    .map(|q| q.unwrap_or_default())
            };
            match (parse(a), parse(b)) {
                (Ok(x), Ok(y)) => x.cmp_value(&y).is_eq(),
                _ => a == b,
            }
        }
        Type::Bytes => {
            let empty = |v: Option<&Value>| v.is_none_or(|v| v.as_str() == Some(""));
            a == b || empty(a) && empty(b)
        }
        _ => a == b || is_zero(schema, ty, a) && is_zero(schema, ty, b),
    }
}

/// `Semantic.DeepEqual` of two `interface{}` values: empty and nil slices and maps are equal.
fn any_equal(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| any_equal(Some(v), Some(w)))
        }
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| any_equal(Some(v), Some(w))))
        }
        (Some(v), Some(w)) => v == w,
        _ => false,
    }
}

/// An instant as Go's `time.Time` holds it after `time.Parse(time.RFC3339, …)`: seconds since
/// the epoch in UTC and nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instant {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

/// The zero `time.Time`, 0001-01-01T00:00:00Z, in seconds since the epoch.
const GO_ZERO_SECONDS: i64 = -62_135_596_800;

impl Instant {
    /// Go's `Time.IsZero`.
    pub fn is_zero(self) -> bool {
        self.seconds == GO_ZERO_SECONDS && self.nanos == 0
    }

    /// `metav1.Time`'s JSON: RFC 3339 in UTC at second precision; None (`null`) when zero.
    pub fn format_seconds(self) -> Option<String> {
        if self.is_zero() {
            return None;
        }
        Some(self.format(false))
    }

    /// `metav1.MicroTime`'s JSON: RFC 3339 in UTC with six fractional digits; None when zero.
    pub fn format_micros(self) -> Option<String> {
        if self.is_zero() {
            return None;
        }
        Some(self.format(true))
    }

    fn format(self, micros: bool) -> String {
        let days = self.seconds.div_euclid(86_400);
        let secs = self.seconds.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let mut s = String::with_capacity(27);
        let _ = write!(
            s,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        if micros {
            let _ = write!(s, ".{:06}", self.nanos / 1000);
        }
        s.push('Z');
        s
    }
}

/// Parses RFC 3339 as Go's `time.Parse(time.RFC3339, s)` accepts it (fractional seconds
/// allowed, `Z` or a numeric offset), with Go's message when it does not.
pub fn parse_rfc3339(s: &str) -> Result<Instant, DecodeError> {
    let fail = || {
        DecodeError(format!(
            "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
            crate::gofmt::quote(s),
            crate::gofmt::quote(s)
        ))
    };
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |at: usize, c: u8| b.get(at) == Some(&c);
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        num(0, 4),
        num(5, 2),
        num(8, 2),
        num(11, 2),
        num(14, 2),
        num(17, 2),
    ) else {
        return Err(fail());
    };
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return Err(fail());
    }
    let mut at = 19;
    let mut nanos = 0u32;
    if sep(at, b'.') || sep(at, b',') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return Err(fail());
        }
        let digits = &s[start..at];
        let mut n = 0u32;
        for (i, d) in digits.bytes().take(9).enumerate() {
            n += u32::from(d - b'0') * 10u32.pow(8 - i as u32);
        }
        nanos = n;
    }
    let offset = match b.get(at) {
        Some(b'Z') if at + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if at + 6 == b.len() && sep(at + 3, b':') => {
            let (Some(h), Some(m)) = (num(at + 1, 2), num(at + 4, 2)) else {
                return Err(fail());
            };
            if h >= 24 || m >= 60 {
                return Err(fail());
            }
            let o = h * 3600 + m * 60;
            if c == b'-' { -o } else { o }
        }
        _ => return Err(fail()),
    };
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => return Err(fail()),
    };
    if day < 1 || day > days_in_month || hour >= 24 || minute >= 60 || second >= 60 {
        return Err(fail());
    }
    let days = days_from_civil(year, month, day);
    Ok(Instant {
        seconds: days * 86_400 + hour * 3600 + minute * 60 + second - offset,
        nanos,
    })
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Decodes base64 as Go's `encoding/json` does for `[]byte` (standard alphabet, padding
/// required; `\r` and `\n` ignored), with its message when it cannot.
fn decode_base64(s: &str) -> Result<Vec<u8>, DecodeError> {
    use base64::Engine as _;
    let cleaned: String;
    let input = if s.contains(['\r', '\n']) {
        cleaned = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        cleaned.as_str()
    } else {
        s
    };
    base64::engine::general_purpose::STANDARD
        .decode(input)
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                _ => input.len().saturating_sub(input.len() % 4),
            };
            DecodeError(format!("illegal base64 data at input byte {at}"))
        })
}

fn encode_base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spliced_encoding_is_the_whole_encoding() {
        let schema = Schema::for_release(crate::KubeVersion::OLDEST);
        let id = schema.kind("", "v1", "Pod").expect("Pod");
        let old = serde_json::json!({
            "kind": "Pod", "apiVersion": "v1", "junk": 1,
            "metadata": {"name": "a", "labels": {"b": "<c>"}, "creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1000m"}}}]},
            "status": {"phase": "Pending"}
        });
        let old_text = encode(schema, id, &old).expect("encodes");
        let meta = serde_json::json!({"name": "a", "uid": "u", "creationTimestamp": "2026-01-02T03:04:05Z"});
        let empty_status = serde_json::json!({});
        let cases: [&[(&str, Option<&Value>)]; 4] = [
            &[("metadata", Some(&meta))],
            &[("metadata", Some(&meta)), ("status", None)],
            &[("status", Some(&empty_status))],
            &[("spec", None), ("kind", Some(&Value::Null))],
        ];
        for replaced in cases {
            let mut whole = old.clone();
            for (name, value) in replaced {
                match value {
                    Some(v) => whole[*name] = (*v).clone(),
                    None => {
                        whole.as_object_mut().map(|m| m.remove(*name));
                    }
                }
            }
            // With the old text's members remembered from its encoding, and found by a scan.
            let spliced = encode_spliced(schema, id, &old_text, replaced).expect("an encoding");
            assert!(recall(schema, id, old_text.as_bytes()).is_some());
            WRITTEN.with(|w| w.borrow_mut().clear());
            let scanned = encode_spliced(schema, id, &old_text, replaced).expect("an encoding");
            let want = encode(schema, id, &whole);
            assert_eq!(spliced, want, "{replaced:?}");
            assert_eq!(scanned, want, "{replaced:?}");
            // A spliced text is remembered too: splicing it again gives the encoding again.
            let Ok(text) = &spliced else { continue };
            let again = encode_spliced(schema, id, text, &[]).expect("an encoding");
            assert_eq!(again.as_ref(), Ok(text));
            assert!(recall(schema, id, text.as_bytes()).is_some());
            let old_again = encode(schema, id, &old);
            assert_eq!(old_again.as_ref(), Ok(&old_text));
        }
        let bad_type = serde_json::json!({"name": 1});
        let refused = encode_spliced(schema, id, &old_text, &[("metadata", Some(&bad_type))]);
        assert_eq!(refused.map(|r| r.is_err()), Some(true));
        assert!(encode_spliced(schema, id, r#"{"other":1}"#, &[]).is_none());
    }

    /// Changes a webhook's patch (and the decode and defaulting after it) can make to a Pod, each
    /// at its depth: `(name, pointer of the parent, member or index, new value or None to remove)`.
    fn pod_changes() -> Vec<(&'static str, &'static str, &'static str, Option<Value>)> {
        use serde_json::json;
        vec![
            (
                "a label added",
                "/metadata/labels",
                "injected",
                Some(json!("yes")),
            ),
            ("a label removed", "/metadata/labels", "app", None),
            (
                "the last annotation removed",
                "/metadata",
                "annotations",
                None,
            ),
            (
                "a sidecar appended",
                "/spec/containers",
                "2",
                Some(json!({"name": "sidecar", "image": "proxy:1", "resources": {}})),
            ),
            (
                "an image changed",
                "/spec/containers/0",
                "image",
                Some(json!("app:2")),
            ),
            (
                "a port changed",
                "/spec/containers/1/ports/0",
                "containerPort",
                Some(json!(8443)),
            ),
            (
                "an env var removed from the middle",
                "/spec/containers/0",
                "env",
                Some(json!([{"name": "A", "value": "1"}, {"name": "C", "value": "3"}])),
            ),
            (
                "a container inserted first",
                "/spec",
                "containers",
                Some(
                    json!([{"name": "init", "image": "i", "resources": {}}, {"name": "app", "image": "app:1", "resources": {}}]),
                ),
            ),
            (
                "a limit changed",
                "/spec/containers/0/resources/limits",
                "cpu",
                Some(json!("2")),
            ),
            (
                "a volume's source replaced",
                "/spec/volumes/0",
                "configMap",
                Some(json!({"name": "other"})),
            ),
            (
                "a pointer set",
                "/spec",
                "terminationGracePeriodSeconds",
                Some(json!(5)),
            ),
            ("a spec member removed", "/spec", "volumes", None),
            (
                "a status set",
                "",
                "status",
                Some(json!({"phase": "Running"})),
            ),
            (
                "a label map emptied",
                "/metadata",
                "labels",
                Some(json!({})),
            ),
        ]
    }

    fn changed(
        before: &Value,
        (_, parent, key, value): &(&str, &str, &str, Option<Value>),
    ) -> Value {
        let mut after = before.clone();
        match (after.pointer_mut(parent).expect("the parent"), value) {
            (Value::Object(m), Some(v)) => drop(m.insert((*key).into(), v.clone())),
            (Value::Object(m), None) => drop(m.remove(*key)),
            (Value::Array(a), Some(v)) => {
                let i: usize = key.parse().expect("an index");
                if i < a.len() {
                    a[i] = v.clone();
                } else {
                    a.push(v.clone());
                }
            }
            (Value::Array(a), None) => drop(a.remove(key.parse().expect("an index"))),
            _ => panic!("a container at {parent}"),
        }
        after
    }

    #[test]
    fn an_encoding_of_a_changed_object_is_its_whole_encoding() {
        let schema = Schema::for_release(crate::KubeVersion::NEWEST);
        let id = schema.kind("", "v1", "Pod").expect("Pod");
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web", "tier": "<front>"}, "annotations": {"a": "b"}},
            "spec": {
                "containers": [
                    {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}],
                     "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "metrics", "image": "m:1", "ports": [{"containerPort": 9090, "protocol": "TCP"}], "resources": {}}
                ],
                "volumes": [{"name": "config", "configMap": {"name": "web"}}]
            }
        });
        let (before, _) = normalize(schema, id, &pod).expect("normal");
        let changes = pod_changes();
        for change in &changes {
            let after = changed(&before, change);
            let want = encode(schema, id, &after).expect("encodes");
            let (before_map, after_map) = (before.as_object().unwrap(), after.as_object().unwrap());
            // From a text whose places are remembered, and from one that has to be scanned.
            let old = encode(schema, id, &before).expect("encodes");
            let spliced = encode_changed(schema, id, &old, before_map, after_map, true, None);
            assert_eq!(spliced, Some(Ok(want.clone())), "{}", change.0);
            WRITTEN.with(|w| w.borrow_mut().clear());
            let scanned = encode_changed(schema, id, &old, before_map, after_map, true, None);
            assert_eq!(scanned, Some(Ok(want.clone())), "{} (scanned)", change.0);
            // Told which top-level member changed, the others are copied uncompared.
            let edited = [change.1.split('/').nth(1).unwrap_or(change.2).to_owned()];
            let told = encode_changed(schema, id, &old, before_map, after_map, true, Some(&edited));
            assert_eq!(told, Some(Ok(want.clone())), "{} (told)", change.0);
            let top_level = encode_changed(schema, id, &old, before_map, after_map, false, None);
            assert_eq!(
                top_level,
                Some(Ok(want.clone())),
                "{} (top level)",
                change.0
            );
            // A spliced text has places of its own (from a scanned text, without the members of
            // what it copied): every other change made to the changed object splices again to
            // the whole encoding.
            for scanned in [false, true] {
                let text = || {
                    let old = encode(schema, id, &before).expect("encodes");
                    if scanned {
                        WRITTEN.with(|w| w.borrow_mut().clear());
                    }
                    let text = encode_changed(schema, id, &old, before_map, after_map, true, None)
                        .expect("an encoding")
                        .expect("encodes");
                    assert!(
                        recall(schema, id, text.as_bytes()).is_some(),
                        "{}",
                        change.0
                    );
                    text
                };
                for next in &changes {
                    let Some(again) = after.pointer(next.1).map(|_| changed(&after, next)) else {
                        continue;
                    };
                    let want = encode(schema, id, &again).ok();
                    let spliced = encode_changed(
                        schema,
                        id,
                        &text(),
                        after_map,
                        again.as_object().unwrap(),
                        true,
                        None,
                    )
                    .and_then(Result::ok);
                    assert_eq!(spliced, want, "{} then {} ({scanned})", change.0, next.0);
                }
            }
        }
    }

    /// What encoding tells of an object's being normal is what [`is_normal`] says, on every
    /// object of the real audit log and on the same objects damaged as a manifest or a patch
    /// damages them: unknown fields, nulls, empty lists and maps, quantities and times not as
    /// Go writes them, members removed.
    #[test]
    fn encoding_tells_whether_an_object_is_normal() {
        use serde_json::json;
        let schema = Schema::for_release(crate::KubeVersion::new(32).unwrap());
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/oracle-v1.32/audit.log"
        );
        let log = std::fs::read_to_string(path).expect("the audit log");
        fn damage(v: &mut Value, n: &mut usize, how: usize) {
            match v {
                Value::Object(m) => {
                    *n += 1;
                    if *n % 7 == how {
                        match how {
                            0 => drop(m.insert("notAField".into(), json!(1))),
                            1 => {
                                if let Some(k) = m.keys().next().cloned() {
                                    m.insert(k, Value::Null);
                                }
                            }
                            2 => drop(m.insert("labels".into(), json!({}))),
                            3 => drop(m.insert("cpu".into(), json!("1000m"))),
                            4 => drop(m.insert(
                                "creationTimestamp".into(),
                                json!("2026-01-02T03:04:05.5Z"),
                            )),
                            5 => {
                                if let Some(k) = m.keys().next_back().cloned() {
                                    m.remove(&k);
                                }
                            }
                            _ => drop(m.insert("replicas".into(), json!(1.5))),
                        }
                    }
                    for child in m.values_mut() {
                        damage(child, n, how);
                    }
                }
                Value::Array(items) => {
                    for item in items {
                        damage(item, n, how);
                    }
                }
                _ => {}
            }
        }
        let (mut told, mut unsure) = ([0usize; 2], 0);
        for line in log.lines() {
            let event: Value = crate::json::from_str(line).unwrap();
            let Some(object) = event.get("responseObject") else {
                continue;
            };
            let api_version = object["apiVersion"].as_str().unwrap_or_default();
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let Some(id) = schema.kind(group, version, object["kind"].as_str().unwrap_or_default())
            else {
                continue;
            };
            let (normal, _) = normalize(schema, id, object).expect("normalises");
            for how in 0..8 {
                let mut input = normal.clone();
                if how < 7 {
                    damage(&mut input, &mut 0, how);
                }
                let Ok(encoding) = encode_with_places(schema, id, &input) else {
                    continue;
                };
                let want = is_normal(schema, id, &input);
                assert!(
                    !encoding.is_plain() || crate::jsonpatch::is_plain(&input),
                    "said plain: {input}"
                );
                match encoding.normality() {
                    Normality::Normal => {
                        assert!(want, "said normal: {input}");
                        assert_eq!(encoding.is_plain(), crate::jsonpatch::is_plain(&input));
                    }
                    Normality::NotNormal => assert!(!want, "said not normal: {input}"),
                    Normality::Unsure => unsure += 1,
                }
                if encoding.normality() != Normality::Unsure {
                    told[usize::from(want)] += 1;
                }
            }
        }
        assert!(
            told[0] > 100 && told[1] > 100,
            "{told:?} told, {unsure} unsure"
        );
        // A raw member nested deep enough makes the object too deep to be plain.
        let id = schema.kind("", "v1", "ConfigMap").expect("ConfigMap");
        let nested = |levels: usize| {
            let mut fields = json!({});
            for _ in 1..levels {
                fields = json!({"f:a": fields});
            }
            json!({"metadata": {"name": "a", "creationTimestamp": null,
                "managedFields": [{"manager": "m", "fieldsV1": fields}]}})
        };
        for levels in [90, 96, 97, 120] {
            let (object, _) = normalize(schema, id, &nested(levels)).expect("normalises");
            let encoding = encode_with_places(schema, id, &object).expect("encodes");
            assert_eq!(encoding.normality(), Normality::Normal);
            let plain = crate::jsonpatch::is_plain(&object);
            assert_eq!(encoding.is_plain(), plain, "{levels} levels");
            assert_eq!(plain, levels <= 96, "{levels} levels");
        }
    }

    #[test]
    fn written_when_absent_is_not_omitted_with_no_value() {
        for release in [crate::KubeVersion::OLDEST, crate::KubeVersion::NEWEST] {
            let schema = Schema::for_release(release);
            for i in 0..schema.len() {
                let st = schema.get(TypeId(i as u32));
                for (j, f) in st.fields.iter().enumerate() {
                    let want = !omitted(schema, f, None);
                    assert_eq!(written_when_absent(f), want, "{}.{}", st.name, f.name);
                    if j < 64 {
                        assert_eq!(st.written_when_absent() >> j & 1 == 1, want);
                    }
                }
            }
        }
    }

    #[test]
    fn integers_are_written_as_their_decimal_text() {
        let mut next = crate::testing::xorshift(0x2545_f491_4f6c_dd1d);
        let mut numbers: Vec<Number> = [0, 1, 9, 10, -1, -10, i64::MIN, i64::MAX]
            .into_iter()
            .map(Number::from)
            .chain([u64::MAX, 1 << 63, 10_000_000_000_000_000_000].map(Number::from))
            .collect();
        for _ in 0..2_000 {
            let r = next();
            numbers.push(Number::from(r >> (r % 64)));
            numbers.push(Number::from((r >> (r % 64)) as i64));
        }
        for n in numbers {
            let mut out = b"x".to_vec();
            push_number_int(&mut out, &n);
            assert_eq!(String::from_utf8(out).unwrap(), format!("x{n}"));
        }
    }

    #[test]
    fn rfc3339_as_go_parses_and_formats_it() {
        let t = parse_rfc3339("2026-11-21T05:36:02.123456789+01:30").unwrap();
        assert_eq!(t.nanos, 123_456_789);
        assert_eq!(t.format_seconds().unwrap(), "2026-11-21T04:06:02Z");
        assert_eq!(t.format_micros().unwrap(), "2026-11-21T04:06:02.123456Z");
        assert!(parse_rfc3339("0001-01-01T00:00:00Z").unwrap().is_zero());
        assert_eq!(
            parse_rfc3339("2000-02-29T23:59:59-00:01")
                .unwrap()
                .format_seconds()
                .unwrap(),
            "2000-03-01T00:00:59Z"
        );
        for bad in [
            "",
            "2026-11-21",
            "2026-02-30T00:00:00Z",
            "2026-11-21T05:36:02",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }
}

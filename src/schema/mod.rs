//! The Go types of kube-apiserver's built-in kinds, per release, and what they do to an object.
//!
//! kube-apiserver never keeps an object as bare JSON: it decodes it into the kind's Go type and
//! encodes it again. What that changes follows from the Go struct definitions, which this module
//! carries for every release modelled: fields in Go's order with their JSON names, `omitempty`,
//! pointers, lists and maps, inline (embedded) structs, the types with a JSON form of their own
//! (`metav1.Time`, `resource.Quantity`, `intstr.IntOrString`, raw JSON), and the markers that
//! strategic merge patch and server-side apply read (`+listType`, `+listMapKey`, `+mapType`,
//! `+structType`, `patchStrategy`, `patchMergeKey`), plus declarative `+default` values.
//!
//! The data are generated from the Go sources of kubernetes/api and kubernetes/apimachinery at each
//! release's tag by `src/schema/generate.py` (its output, `src/schema/data/1.N.json.zz`, is
//! committed); the generator also compares them with the OpenAPI documents the apiserver serves.
//! A release's table is decompressed and indexed the first time it is asked for.
//!
//! [`codec`] decodes and encodes objects as Go does; [`codec::semantic_equal`] is
//! apimachinery's `Semantic.DeepEqual`.

pub mod codec;
pub mod convert;
pub mod patchmeta;

use std::collections::HashMap;
use std::io::Read;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::KubeVersion;

pub use codec::{DecodeError, encode, semantic_equal};

/// A struct type's index in its [`Schema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeId(u32);

/// The type of a field, as Go declares it (named non-struct types resolved to what they name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Type {
    /// `string` and the named string types (`PullPolicy`, `types.UID`, ...).
    String,
    /// `bool`.
    Bool,
    /// An integer type, with its width and signedness.
    Int(IntType),
    /// A floating-point type (`float32`, `float64`).
    Float,
    /// `[]byte`: base64 in JSON.
    Bytes,
    /// `metav1.Time`: RFC 3339 at second precision, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// `resource.Quantity`: its canonical string.
    Quantity,
    /// `intstr.IntOrString`: an int32 or a string.
    IntOrString,
    /// JSON kept as it is (`runtime.RawExtension`, `metav1.FieldsV1`).
    Raw,
    /// `interface{}`.
    Any,
    /// A pointer: `null` is nil, anything else is the pointed-to type's value.
    Ptr(Box<Type>),
    /// A slice.
    List(Box<Type>),
    /// A map with string keys.
    Map(Box<Type>),
    /// A struct of the schema.
    Struct(TypeId),
}

/// Go's integer types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    /// `int8`
    I8,
    /// `int16`
    I16,
    /// `int32`
    I32,
    /// `int64` (and `int`)
    I64,
    /// `uint8`
    U8,
    /// `uint16`
    U16,
    /// `uint32`
    U32,
    /// `uint64` (and `uint`)
    U64,
}

impl IntType {
    /// The type's range.
    pub fn range(self) -> (i128, i128) {
        match self {
            IntType::I8 => (i8::MIN.into(), i8::MAX.into()),
            IntType::I16 => (i16::MIN.into(), i16::MAX.into()),
            IntType::I32 => (i32::MIN.into(), i32::MAX.into()),
            IntType::I64 => (i64::MIN.into(), i64::MAX.into()),
            IntType::U8 => (0, u8::MAX.into()),
            IntType::U16 => (0, u16::MAX.into()),
            IntType::U32 => (0, u32::MAX.into()),
            IntType::U64 => (0, u64::MAX.into()),
        }
    }

    /// Go's name of the type.
    pub fn go_name(self) -> &'static str {
        match self {
            IntType::I8 => "int8",
            IntType::I16 => "int16",
            IntType::I32 => "int32",
            IntType::I64 => "int64",
            IntType::U8 => "uint8",
            IntType::U16 => "uint16",
            IntType::U32 => "uint32",
            IntType::U64 => "uint64",
        }
    }
}

/// `+listType`: how server-side apply merges a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// A set of scalars.
    Set,
    /// A map keyed by `+listMapKey` fields.
    Map,
}

/// One field of a struct, in Go's order.
#[derive(Debug, Clone)]
pub struct Field {
    /// The JSON name.
    pub name: Box<str>,
    /// The Go type.
    pub ty: Type,
    /// `omitempty`: left out of the JSON when empty (never for structs).
    pub omitempty: bool,
    /// `omitzero`: left out of the JSON when the zero value.
    pub omitzero: bool,
    /// `+optional`.
    pub optional: bool,
    /// `patchStrategy` (`merge`, `retainKeys`, `merge,retainKeys`, `replace`).
    pub patch_strategy: Option<Box<str>>,
    /// `patchMergeKey`.
    pub patch_merge_key: Option<Box<str>>,
    /// `+listType`.
    pub list_type: Option<ListType>,
    /// `+listMapKey`, in order.
    pub list_map_keys: Box<[Box<str>]>,
    /// `+mapType` (or a field's `+structType`): `atomic` or `granular`.
    pub map_type: Option<Box<str>>,
    /// `+default`, as written in the marker (JSON, or `ref(Name)` for a constant).
    pub default: Option<Box<str>>,
}

/// A struct type.
#[derive(Debug, Clone)]
pub struct Struct {
    /// The Go package (as `core/v1`, `meta/v1`) and name, as `core/v1.Container`.
    pub name: Box<str>,
    /// The fields in Go's order, inline (embedded) structs expanded in place.
    pub fields: Box<[Field]>,
    /// `+structType=atomic`.
    pub atomic: bool,
    by_name: FieldTable,
    /// The fields Go's encoder writes even when the decoded value left them unset (no
    /// `omitempty`, or a struct type, which `omitempty` never leaves out; not `omitzero`).
    absent_written: Box<[u16]>,
    /// Each field's name as Go's encoder writes a member name: quoted, escaped, with the `:`.
    keys: Box<[Box<[u8]>]>,
    /// Bit `i` set when Go writes field `i` (of the first 64) even when it is absent.
    written_when_absent: u64,
}

/// A struct type's nesting while [`Schema::nesting`] works it out.
#[derive(Debug, Clone, Copy)]
enum Nesting {
    Unknown,
    /// Being worked out: met again, the type contains itself.
    Open,
    Known(Option<u32>),
}

/// Kinds by group, then version, then kind.
/// Kinds by group, then version and kind name. The core group is kept apart: a map looks its
/// empty name up with an empty-string comparison, which `memcmp` makes slow
/// ([`crate::api::meta::short_eq`]).
#[derive(Debug, Default)]
struct KindIndex {
    core: VersionIndex,
    groups: FastMap<Box<str>, VersionIndex>,
}

/// Kinds by version, then kind name.
type VersionIndex = FastMap<Box<str>, FastMap<Box<str>, TypeId>>;

impl KindIndex {
    fn group(&self, group: &str) -> Option<&VersionIndex> {
        if group.is_empty() {
            Some(&self.core)
        } else {
            self.groups.get(group)
        }
    }

    fn group_mut(&mut self, group: &str) -> &mut VersionIndex {
        if group.is_empty() {
            &mut self.core
        } else {
            self.groups.entry(group.into()).or_default()
        }
    }
}

/// The maps looked up on every request: keys are short names, hashed cheaply.
type FastMap<K, V> = foldhash::HashMap<K, V>;

/// A struct's fields by JSON name: an open-addressing table (at least twice the size of the
/// struct) probed linearly from a cheap hash of the name's first and last eight bytes and its
/// length, with a multiplier chosen per struct so that (nearly always) every field sits in its
/// own first slot. Each slot keeps the words it hashed, so that a lookup compares two words and a
/// length instead of the names (only names over sixteen bytes compare their middle too). Every
/// member of every object decoded or encoded is looked up here.
#[derive(Debug, Clone, Default)]
struct FieldTable {
    slots: Box<[Slot]>,
    multiplier: u64,
    shift: u32,
}

/// One slot of a [`FieldTable`]: `index` is the field's index plus one (0: empty).
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    words: (u64, u64),
    len: u32,
    index: u16,
}

/// The first and last eight bytes of a name (overlapping when shorter than sixteen bytes; four
/// and four when shorter than eight; each byte when shorter than four): with the length, all of
/// a name up to sixteen bytes.
#[inline(always)]
fn name_words(name: &[u8]) -> (u64, u64) {
    if let (Some(a), Some(b)) = (name.first_chunk::<8>(), name.last_chunk::<8>()) {
        (u64::from_le_bytes(*a), u64::from_le_bytes(*b))
    } else if let (Some(a), Some(b)) = (name.first_chunk::<4>(), name.last_chunk::<4>()) {
        (
            u64::from(u32::from_le_bytes(*a)),
            u64::from(u32::from_le_bytes(*b)),
        )
    } else {
        let byte = |i: usize| name.get(i).copied().map_or(0, u64::from);
        (byte(0) | byte(1) << 8 | byte(2) << 16, 0)
    }
}

impl FieldTable {
    /// Multipliers tried, in order, for a table without displaced fields.
    const MULTIPLIERS: [u64; 4] = [
        0x9e37_79b9_7f4a_7c15,
        0x51_7c_c1_b7_27_22_0a_95,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
    ];

    #[inline(always)]
    fn home(words: (u64, u64), len: usize, multiplier: u64, shift: u32) -> usize {
        let h = (words.0 ^ (len as u64)).wrapping_mul(multiplier) ^ words.1;
        (h.wrapping_mul(multiplier) >> shift) as usize
    }

    fn new(fields: &[Field]) -> FieldTable {
        let mut best: Option<(usize, FieldTable)> = None;
        let mut size = (fields.len() * 2).max(4).next_power_of_two();
        for _ in 0..3 {
            for multiplier in Self::MULTIPLIERS {
                let (displaced, table) = Self::build(fields, size, multiplier);
                if best.as_ref().is_none_or(|(d, _)| displaced < *d) {
                    best = Some((displaced, table));
                }
                if displaced == 0 {
                    return best.map(|(_, t)| t).unwrap_or_default();
                }
            }
            size *= 2;
        }
        best.map(|(_, t)| t).unwrap_or_default()
    }

    /// The table of `size` slots (a power of two) with this multiplier, and how many fields
    /// are not in their first slot.
    fn build(fields: &[Field], size: usize, multiplier: u64) -> (usize, FieldTable) {
        let shift = 64 - size.trailing_zeros();
        let mut slots = vec![Slot::default(); size];
        let mut displaced = 0;
        for (i, f) in fields.iter().enumerate() {
            let Ok(index) = u16::try_from(i + 1) else {
                continue;
            };
            let name = f.name.as_bytes();
            let words = name_words(name);
            let mut at = Self::home(words, name.len(), multiplier, shift);
            // A name given twice is its last field's, as in a map.
            while slots[at].index != 0 && fields[usize::from(slots[at].index) - 1].name != f.name {
                at = (at + 1) & (size - 1);
                displaced += 1;
            }
            slots[at] = Slot {
                words,
                len: name.len() as u32,
                index,
            };
        }
        let table = FieldTable {
            slots: slots.into(),
            multiplier,
            shift,
        };
        (displaced, table)
    }

    #[inline]
    fn get(&self, fields: &[Field], name: &str) -> Option<usize> {
        let size = self.slots.len();
        if size == 0 {
            return None;
        }
        let name = name.as_bytes();
        let words = name_words(name);
        let mut at = Self::home(words, name.len(), self.multiplier, self.shift);
        loop {
            let slot = self.slots.get(at)?;
            if slot.index == 0 {
                return None;
            }
            let i = usize::from(slot.index) - 1;
            if slot.words == words
                && slot.len as usize == name.len()
                && (name.len() <= 16
                    || fields
                        .get(i)
                        .is_some_and(|f| f.name.as_bytes().get(8..) == name.get(8..)))
            {
                return Some(i);
            }
            at = (at + 1) & (size - 1);
        }
    }
}

impl Struct {
    /// The field with this JSON name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.index_of(name).and_then(|i| self.fields.get(i))
    }

    /// The indices of the fields Go writes even when unset.
    pub(crate) fn absent_written(&self) -> &[u16] {
        &self.absent_written
    }

    /// The fields (of the first 64, by bit) Go's encoder writes even when they are absent.
    #[inline]
    pub(crate) fn written_when_absent(&self) -> u64 {
        self.written_when_absent
    }

    /// Field `i`'s name as Go's encoder writes a member's: quoted, escaped, followed by `:`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        self.keys.get(i).map_or(&[], |k| k)
    }

    /// The index in [`Struct::fields`] of the field with this JSON name.
    #[inline]
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(&self.fields, name)
    }

    /// Go's name for the type in messages, as `v1.Container`.
    pub fn go_name(&self) -> &str {
        match self.name.rsplit_once('/') {
            Some((_, tail)) => tail,
            None => &self.name,
        }
    }
}

/// The built-in kinds and their types of one release.
#[derive(Debug)]
pub struct Schema {
    release: KubeVersion,
    source: Box<str>,
    /// Keyed `group/version/Kind`, as the generated data name them.
    kinds: HashMap<Box<str>, TypeId>,
    /// The same by group, then version, then kind, to look up without allocating.
    by_gvk: KindIndex,
    types: Vec<Struct>,
    by_name: FastMap<Box<str>, TypeId>,
    /// Per struct type, once asked: see [`Schema::nesting`].
    nesting: OnceLock<Box<[Option<u32>]>>,
}

impl Schema {
    /// The schema of a release: decompressed and indexed on first use, then shared.
    pub fn for_release(release: KubeVersion) -> &'static Schema {
        static SCHEMAS: [OnceLock<Schema>; 10] = [const { OnceLock::new() }; 10];
        let (index, data) = data_for(release);
        SCHEMAS[index].get_or_init(|| {
            Schema::from_compressed(data, release).unwrap_or_else(|e| {
                debug_assert!(false, "schema data of {release}: {e}");
                Schema::empty(release)
            })
        })
    }

    /// The release modelled.
    pub fn release(&self) -> KubeVersion {
        self.release
    }

    /// The tag of kubernetes/api the data were generated from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The struct type of a built-in kind (`group` empty for the core group).
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<TypeId> {
        self.by_gvk.group(group)?.get(version)?.get(kind).copied()
    }

    /// Every kind the release has, as (group, version, kind).
    pub fn kinds(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.kinds.keys().filter_map(|key| {
            let (group, rest) = key.split_once('/')?;
            let (version, kind) = rest.split_once('/')?;
            Some((group, version, kind))
        })
    }

    /// A struct type by its index.
    pub fn get(&self, id: TypeId) -> &Struct {
        &self.types[id.0 as usize]
    }

    /// How many levels of objects and arrays a value of the struct type `id` has at most, not
    /// counting what its `Raw` and `Any` members hold; None when it contains a type that
    /// contains itself (and so bounds nothing).
    pub fn nesting(&self, id: TypeId) -> Option<usize> {
        let all = self.nesting.get_or_init(|| {
            let mut memo = vec![Nesting::Unknown; self.types.len()];
            for i in 0..self.types.len() {
                self.nesting_of_struct(i, &mut memo);
            }
            memo.into_iter()
                .map(|n| match n {
                    Nesting::Known(d) => d,
                    Nesting::Unknown | Nesting::Open => None,
                })
                .collect()
        });
        all.get(id.0 as usize)
            .copied()
            .flatten()
            .map(|d| d as usize)
    }

    fn nesting_of_struct(&self, i: usize, memo: &mut [Nesting]) -> Option<u32> {
        match memo[i] {
            Nesting::Known(d) => return d,
            Nesting::Open => return None,
            Nesting::Unknown => {}
        }
        memo[i] = Nesting::Open;
        let mut deepest = Some(0u32);
        for f in &self.types[i].fields {
            deepest = deepest
                .zip(self.nesting_of_type(&f.ty, memo))
                .map(|(a, b)| a.max(b));
        }
        let d = deepest.map(|d| d + 1);
        memo[i] = Nesting::Known(d);
        d
    }

    fn nesting_of_type(&self, ty: &Type, memo: &mut [Nesting]) -> Option<u32> {
        match ty {
            Type::Ptr(inner) => self.nesting_of_type(inner, memo),
            Type::List(inner) | Type::Map(inner) => {
                self.nesting_of_type(inner, memo).map(|d| d + 1)
            }
            Type::Struct(id) => self.nesting_of_struct(id.0 as usize, memo),
            _ => Some(0),
        }
    }

    /// A struct type by its name, as `core/v1.Container`.
    pub fn by_name(&self, name: &str) -> Option<TypeId> {
        self.by_name.get(name).copied()
    }

    /// The number of struct types.
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Whether the schema has no types (never, for a release's generated data).
    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    fn empty(release: KubeVersion) -> Schema {
        Schema {
            release,
            source: "".into(),
            kinds: HashMap::new(),
            by_gvk: KindIndex::default(),
            types: Vec::new(),
            by_name: FastMap::default(),
            nesting: OnceLock::new(),
        }
    }

    /// Reads a release's table: zlib-compressed JSON as `generate.py` writes it.
    pub fn from_compressed(data: &[u8], release: KubeVersion) -> Result<Schema, SchemaError> {
        let mut json = Vec::with_capacity(data.len() * 16);
        flate2::read::ZlibDecoder::new(data)
            .read_to_end(&mut json)
            .map_err(|e| SchemaError(format!("cannot decompress: {e}")))?;
        let raw: RawSchema =
            crate::json::from_slice(&json).map_err(|e| SchemaError(format!("{e}")))?;
        Schema::from_raw(raw, release)
    }

    fn from_raw(raw: RawSchema, release: KubeVersion) -> Result<Schema, SchemaError> {
        let mut by_name = FastMap::with_capacity_and_hasher(raw.types.len(), Default::default());
        for (i, name) in raw.types.keys().enumerate() {
            let id = u32::try_from(i).map_err(|_| SchemaError("too many types".into()))?;
            by_name.insert(name.as_str().into(), TypeId(id));
        }
        let mut types = Vec::with_capacity(raw.types.len());
        for (name, st) in raw.types {
            let mut fields = Vec::with_capacity(st.fields.len());
            for f in st.fields {
                let ty = resolve(&f.ty, &by_name)
                    .ok_or_else(|| SchemaError(format!("{name}.{}: unknown type", f.name)))?;
                let list_type = match f.list_type.as_deref() {
                    None => None,
                    Some("atomic") => Some(ListType::Atomic),
                    Some("set") => Some(ListType::Set),
                    Some("map") => Some(ListType::Map),
                    Some(other) => {
                        return Err(SchemaError(format!("{name}.{}: listType {other}", f.name)));
                    }
                };
                if u16::try_from(fields.len() + 1).is_err() {
                    return Err(SchemaError(format!("{name}: too many fields")));
                }
                fields.push(Field {
                    name: f.name.into(),
                    ty,
                    omitempty: f.omitempty,
                    omitzero: f.omitzero,
                    optional: f.optional,
                    patch_strategy: f.patch_strategy.map(Into::into),
                    patch_merge_key: f.patch_merge_key.map(Into::into),
                    list_type,
                    list_map_keys: f.list_map_keys.into_iter().map(Into::into).collect(),
                    map_type: f.map_type.or(f.struct_type).map(Into::into),
                    default: f.default.map(Into::into),
                });
            }
            let absent_written = fields
                .iter()
                .enumerate()
                .filter(|(_, f)| !f.omitzero && (!f.omitempty || codec::omitempty_keeps(&f.ty)))
                .filter_map(|(i, _)| u16::try_from(i).ok())
                .collect();
            let by_name = FieldTable::new(&fields);
            let keys = fields
                .iter()
                .map(|f| {
                    let mut key = Vec::with_capacity(f.name.len() + 3);
                    crate::jsonpatch::gostr::append_string(&mut key, &f.name);
                    key.push(b':');
                    key.into_boxed_slice()
                })
                .collect();
            let written_when_absent = fields
                .iter()
                .take(64)
                .enumerate()
                .filter(|(_, f)| codec::written_when_absent(f))
                .fold(0u64, |bits, (i, _)| bits | 1 << i);
            types.push(Struct {
                name: name.into(),
                fields: fields.into(),
                atomic: st.atomic,
                by_name,
                absent_written,
                keys,
                written_when_absent,
            });
        }
        let mut kinds: HashMap<Box<str>, TypeId> = HashMap::with_capacity(raw.kinds.len());
        for (gvk, type_name) in raw.kinds {
            if gvk.split('/').count() != 3 {
                return Err(SchemaError(format!("kind {gvk:?}")));
            }
            let id = *by_name
                .get(type_name.as_str())
                .ok_or_else(|| SchemaError(format!("kind {gvk}: no type {type_name}")))?;
            kinds.insert(gvk.as_str().into(), id);
        }
        let mut by_gvk = KindIndex::default();
        for (gvk, id) in &kinds {
            let mut parts = gvk.splitn(3, '/');
            if let (Some(g), Some(v), Some(k)) = (parts.next(), parts.next(), parts.next()) {
                by_gvk
                    .group_mut(g)
                    .entry(v.into())
                    .or_default()
                    .insert(k.into(), *id);
            }
        }
        Ok(Schema {
            release,
            source: raw.source.into(),
            kinds,
            by_gvk,
            types,
            by_name,
            nesting: OnceLock::new(),
        })
    }
}

/// Generated data that cannot be read (a build of mismatched files).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schema data: {0}")]
pub struct SchemaError(String);

fn data_for(release: KubeVersion) -> (usize, &'static [u8]) {
    const DATA: [&[u8]; 10] = [
        include_bytes!("data/1.28.json.zz"),
        include_bytes!("data/1.29.json.zz"),
        include_bytes!("data/1.30.json.zz"),
        include_bytes!("data/1.31.json.zz"),
        include_bytes!("data/1.32.json.zz"),
        include_bytes!("data/1.33.json.zz"),
        include_bytes!("data/1.34.json.zz"),
        include_bytes!("data/1.35.json.zz"),
        include_bytes!("data/1.36.json.zz"),
        include_bytes!("data/1.37.json.zz"),
    ];
    let index = (release.minor() - KubeVersion::OLDEST.minor()) as usize;
    let index = index.min(DATA.len() - 1);
    (index, DATA[index])
}

fn resolve(raw: &RawType, by_name: &FastMap<Box<str>, TypeId>) -> Option<Type> {
    Some(match raw {
        RawType::Name(name) => match name.as_str() {
            "string" => Type::String,
            "bool" => Type::Bool,
            "int8" => Type::Int(IntType::I8),
            "int16" => Type::Int(IntType::I16),
            "int32" => Type::Int(IntType::I32),
            "int64" => Type::Int(IntType::I64),
            "uint8" => Type::Int(IntType::U8),
            "uint16" => Type::Int(IntType::U16),
            "uint32" => Type::Int(IntType::U32),
            "uint64" => Type::Int(IntType::U64),
            "float32" | "float64" => Type::Float,
            "bytes" => Type::Bytes,
            "time" => Type::Time,
            "microtime" => Type::MicroTime,
            "quantity" => Type::Quantity,
            "intorstring" => Type::IntOrString,
            "raw" => Type::Raw,
            "any" => Type::Any,
            other => Type::Struct(*by_name.get(other.strip_prefix('@')?)?),
        },
        RawType::Ptr { ptr } => Type::Ptr(Box::new(resolve(ptr, by_name)?)),
        RawType::List { list } => Type::List(Box::new(resolve(list, by_name)?)),
        RawType::Map { map, .. } => Type::Map(Box::new(resolve(map, by_name)?)),
    })
}

#[derive(Deserialize)]
struct RawSchema {
    source: String,
    kinds: std::collections::BTreeMap<String, String>,
    types: std::collections::BTreeMap<String, RawStruct>,
}

#[derive(Deserialize)]
struct RawStruct {
    fields: Vec<RawField>,
    #[serde(default)]
    atomic: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawField {
    name: String,
    #[serde(rename = "type")]
    ty: RawType,
    #[serde(default)]
    omitempty: bool,
    #[serde(default)]
    omitzero: bool,
    #[serde(default)]
    optional: bool,
    patch_strategy: Option<String>,
    patch_merge_key: Option<String>,
    list_type: Option<String>,
    #[serde(default)]
    list_map_keys: Vec<String>,
    map_type: Option<String>,
    struct_type: Option<String>,
    default: Option<String>,
}

/// A field's type in the generated data: a name, or `{"ptr"|"list"|"map": <type>}`.
enum RawType {
    Name(String),
    Ptr { ptr: Box<RawType> },
    List { list: Box<RawType> },
    Map { map: Box<RawType> },
}

/// Read by the shape it has rather than as an untagged enum, which tries each variant in turn
/// and formats an error for each miss: thousands of fields are read when a schema is loaded.
impl<'de> Deserialize<'de> for RawType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawType;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a type name or {"ptr"|"list"|"map": type}"#)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawType, E> {
                Ok(RawType::Name(v.to_string()))
            }

            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<RawType, E> {
                Ok(RawType::Name(v))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<RawType, A::Error> {
                use serde::de::Error;
                let mut found = None;
                // A map's `key` type, and whatever else, is not read.
                while let Some(key) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    let make: fn(Box<RawType>) -> RawType = match &*key {
                        "ptr" => |ptr| RawType::Ptr { ptr },
                        "list" => |list| RawType::List { list },
                        "map" => |map| RawType::Map { map },
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    if found.is_some() {
                        return Err(A::Error::custom("a type with more than one constructor"));
                    }
                    found = Some(make(Box::new(m.next_value::<RawType>()?)));
                }
                found.ok_or_else(|| A::Error::custom("a type with no constructor"))
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field a name is: the last with that name, as a linear search finds it.
    fn linear(st: &Struct, name: &str) -> Option<usize> {
        st.fields.iter().rposition(|f| *f.name == *name)
    }

    #[test]
    fn field_types_are_read_in_every_shape_the_data_has() {
        let read = |text: &str| crate::json::from_str::<RawType>(text);
        let shown = |t: &RawType| -> String {
            fn show(t: &RawType) -> String {
                match t {
                    RawType::Name(n) => n.clone(),
                    RawType::Ptr { ptr } => format!("*{}", show(ptr)),
                    RawType::List { list } => format!("[]{}", show(list)),
                    RawType::Map { map } => format!("map[]{}", show(map)),
                }
            }
            show(t)
        };
        let cases = [
            (r#""string""#, "string"),
            (r#"{"ptr":"int32"}"#, "*int32"),
            (
                r#"{"list":{"ptr":"core/v1.Container"}}"#,
                "[]*core/v1.Container",
            ),
            (
                r#"{"key":"string","map":{"list":"string"}}"#,
                "map[][]string",
            ),
            (r#"{"map":"string","key":"string"}"#, "map[]string"),
        ];
        for (text, expected) in cases {
            assert_eq!(
                read(text).map(|t| shown(&t)).ok().as_deref(),
                Some(expected)
            );
        }
        for bad in [
            r#"{}"#,
            r#"{"key":"string"}"#,
            r#"{"ptr":"a","list":"b"}"#,
            "1",
            "[]",
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_field_table_finds_what_a_linear_search_finds() {
        let schema = Schema::for_release(KubeVersion::OLDEST);
        let mut tried = 0;
        for st in &schema.types {
            let mut names: Vec<String> = Vec::new();
            for f in st.fields.iter() {
                let n = f.name.to_string();
                // The name, and names near it: a byte changed at each end and in the middle,
                // one byte more or less, another case.
                let mut near = vec![
                    n.clone(),
                    format!("{n}x"),
                    format!("x{n}"),
                    n.to_uppercase(),
                    n.chars().skip(1).collect(),
                ];
                if let Some(s) = n.get(..n.len().saturating_sub(1)) {
                    near.push(s.to_string());
                }
                for at in [0, n.len() / 2, n.len().saturating_sub(1), 8, 12] {
                    let mut b = n.clone().into_bytes();
                    if let Some(c) = b.get_mut(at) {
                        *c ^= 0x01;
                        near.extend(String::from_utf8(b).ok());
                    }
                }
                names.extend(near);
            }
            names.extend(["", "a", "ab", "abc", "\u{0}", "kind\u{0}"].map(String::from));
            for name in &names {
                assert_eq!(st.index_of(name), linear(st, name), "{} {name:?}", st.name);
                tried += 1;
            }
        }
        assert!(tried > 10_000, "{tried}");
    }
}

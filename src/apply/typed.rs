//! The walks structured-merge-diff's `typed` package makes over an object and its schema: the
//! field set of an object (`ToFieldSet`), the merge of two objects (`Merge`), their comparison
//! (`Compare`) and the removal of a set of fields (`RemoveItems`).
//!
//! The schema is anything that answers [`TypeModel`]: hookscope's Go types
//! ([`super::GoType`]) or, in tests, structured-merge-diff's own schema language.

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set, values_equal};

/// How server-side apply treats a value of a type (structured-merge-diff's atoms).
#[derive(Debug, Clone, Copy)]
pub enum Atom<'s> {
    /// A scalar, or anything replaced whole (`__untyped_atomic_`).
    Scalar,
    /// A list.
    List(ListRelationship<'s>),
    /// A map or a struct; `atomic` when it is replaced whole.
    Map {
        /// `+mapType=atomic` / `+structType=atomic`.
        atomic: bool,
    },
    /// `__untyped_deduced_`: a map when the value is one (its members deduced too), else a
    /// scalar.
    Deduced,
}

/// How a list's items are told apart.
#[derive(Debug, Clone, Copy)]
pub enum ListRelationship<'s> {
    /// `+listType=atomic` (and lists without a marker): replaced whole.
    Atomic,
    /// `+listType=set`: items are scalars, told apart by value.
    Set,
    /// `+listType=map`: items told apart by these key fields.
    Map(&'s [Box<str>]),
}

/// A schema server-side apply can walk.
pub trait TypeModel {
    /// A type of the schema.
    type Type: Clone;

    /// What a value of the type is.
    fn atom(&self, ty: &Self::Type) -> Atom<'_>;

    /// The type of a list's items.
    fn element(&self, ty: &Self::Type) -> Option<Self::Type>;

    /// The type of a map's member `name`, and whether it is a named (struct) field rather than
    /// a key of a map. None when the type has no such member.
    fn field(&self, ty: &Self::Type, name: &str) -> Option<(Self::Type, bool)>;

    /// The default of a key field of an associative list's item type, used when an item omits it.
    fn key_default(&self, _item: &Self::Type, _key: &str) -> Option<Value> {
        None
    }

    /// Whether an item may omit a key field that has no default (structured-merge-diff v6.3 and
    /// later: the item is then another entry) rather than being refused (v4).
    fn optional_keys(&self) -> bool {
        true
    }
}

/// Why a walk failed: upstream's validation message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WalkError(pub String);

/// The atom of `ty` for `value`: a deduced type is a granular map when the value is an object.
fn atom_for<'s, M: TypeModel>(
    model: &'s M,
    ty: Option<&M::Type>,
    values: [Option<&Value>; 2],
) -> Atom<'s> {
    match ty.map(|t| model.atom(t)) {
        None => Atom::Scalar,
        Some(Atom::Deduced) => {
            if values.iter().flatten().any(|v| v.is_object()) {
                Atom::Map { atomic: false }
            } else {
                Atom::Scalar
            }
        }
        Some(a) => a,
    }
}

fn member_type<M: TypeModel>(model: &M, ty: Option<&M::Type>, name: &str) -> Option<M::Type> {
    let ty = ty?;
    if matches!(model.atom(ty), Atom::Deduced) {
        return Some(ty.clone());
    }
    model.field(ty, name).map(|(t, _)| t)
}

fn is_named<M: TypeModel>(model: &M, ty: Option<&M::Type>, name: &str) -> bool {
    ty.and_then(|t| match model.atom(t) {
        Atom::Deduced => None,
        _ => model.field(t, name),
    })
    .is_some_and(|(_, named)| named)
}

/// The path element of a list item (upstream's `listItemToPathElement`).
pub fn list_item_element<M: TypeModel>(
    model: &M,
    rel: ListRelationship<'_>,
    element: Option<&M::Type>,
    index: usize,
    item: &Value,
) -> Result<PathElement, WalkError> {
    match rel {
        ListRelationship::Atomic => Ok(PathElement::Index(index as i64)),
        ListRelationship::Set => match item {
            Value::Object(_) => Err(WalkError(
                "associative list without keys has an element that's a map type".into(),
            )),
            Value::Array(_) => Err(WalkError(
                "not supported: associative list with lists as elements".into(),
            )),
            v => Ok(PathElement::Value(v.clone())),
        },
        ListRelationship::Map(keys) => {
            let m = match item {
                Value::Null => {
                    return Err(WalkError(
                        "associative list with keys may not have a null element".into(),
                    ));
                }
                Value::Object(m) => m,
                _ => {
                    return Err(WalkError(
                        "associative list with keys may not have non-map elements".into(),
                    ));
                }
            };
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                let v = m
                    .get(&**k)
                    .cloned()
                    .or_else(|| element.and_then(|t| model.key_default(t, k)));
                match v {
                    Some(v) => fields.push((k.to_string(), v)),
                    None if model.optional_keys() => {}
                    None => {
                        return Err(WalkError(format!(
                            "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                            crate::gofmt::quote(k)
                        )));
                    }
                }
            }
            if !keys.is_empty() && fields.is_empty() {
                let quoted: Vec<String> = keys.iter().map(|k| crate::gofmt::quote(k)).collect();
                return Err(WalkError(format!(
                    "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                    quoted.join(" ")
                )));
            }
            Ok(PathElement::key(fields))
        }
    }
}

/// The fields an object sets (upstream's `ToFieldSet`).
pub fn to_field_set<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    value: &Value,
) -> Result<Set, WalkError> {
    let mut set = Set::new();
    let mut path = Vec::new();
    field_set_walk(model, Some(ty), value, &mut path, &mut set)?;
    Ok(set)
}

fn field_set_walk<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    value: &Value,
    path: &mut Vec<PathElement>,
    set: &mut Set,
) -> Result<(), WalkError> {
    match atom_for(model, ty, [Some(value), None]) {
        Atom::Scalar | Atom::Deduced => set.insert(path),
        Atom::List(ListRelationship::Atomic) | Atom::Map { atomic: true } => set.insert(path),
        Atom::List(rel) => {
            let Value::Array(items) = value else {
                return Ok(());
            };
            let element = ty.and_then(|t| model.element(t));
            let mut pes = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                pes.push(list_item_element(model, rel, element.as_ref(), i, item)?);
            }
            let mut seen = std::collections::BTreeSet::new();
            let mut duplicates = std::collections::BTreeSet::new();
            for pe in &pes {
                if !seen.insert(pe) && duplicates.insert(pe) {
                    path.push(pe.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (pe, item) in pes.iter().zip(items) {
                if duplicates.contains(pe) {
                    continue;
                }
                path.push(pe.clone());
                field_set_walk(model, element.as_ref(), item, path, set)?;
                set.insert(path);
                path.pop();
            }
        }
        Atom::Map { atomic: false } => {
            let Value::Object(m) = value else {
                return Ok(());
            };
            for (k, v) in m {
                let t = member_type(model, ty, k);
                path.push(PathElement::field(k));
                field_set_walk(model, t.as_ref(), v, path, set)?;
                let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
                if empty || !is_named(model, ty, k) {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
    Ok(())
}

/// The merge of `rhs` into `lhs` (upstream's `Merge`): maps merged member by member, associative
/// lists item by item, everything else replaced. None when the result is no value at all.
pub fn merge<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Result<Option<Value>, WalkError> {
    merge_walk(model, Some(ty), lhs, rhs)
}

fn keep_rhs(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}

fn merge_walk<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
) -> Result<Option<Value>, WalkError> {
    match atom_for(model, ty, [lhs, rhs]) {
        Atom::Scalar | Atom::Deduced => Ok(keep_rhs(lhs, rhs)),
        Atom::List(rel) => {
            let l = lhs.and_then(Value::as_array);
            let r = rhs.and_then(Value::as_array);
            let empty = l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty);
            if matches!(rel, ListRelationship::Atomic) || empty {
                return Ok(keep_rhs(lhs, rhs));
            }
            merge_list(model, ty, rel, l, r)
        }
        Atom::Map { atomic } => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
            if atomic || empty {
                return Ok(keep_rhs(lhs, rhs));
            }
            let mut out = Map::new();
            let keys = l.into_iter().flat_map(|m| m.keys()).chain(
                r.into_iter()
                    .flat_map(|m| m.keys())
                    .filter(|k| !l.is_some_and(|l| l.contains_key(*k))),
            );
            for k in keys {
                let t = member_type(model, ty, k);
                let merged = merge_walk(
                    model,
                    t.as_ref(),
                    l.and_then(|m| m.get(k)),
                    r.and_then(|m| m.get(k)),
                )?;
                if let Some(v) = merged {
                    out.insert(k.clone(), v);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
    }
}

/// The items of a list with their path elements, and the value each element stands for (Null
/// for an element the list repeats).
fn index_items<M: TypeModel>(
    model: &M,
    rel: ListRelationship<'_>,
    element: Option<&M::Type>,
    items: Option<&Vec<Value>>,
    allow_duplicates: bool,
) -> Result<
    (
        Vec<PathElement>,
        std::collections::BTreeMap<PathElement, Value>,
    ),
    WalkError,
> {
    let mut pes = Vec::new();
    let mut observed = std::collections::BTreeMap::new();
    for (i, item) in items.into_iter().flatten().enumerate() {
        let pe = list_item_element(model, rel, element, i, item)
            .map_err(|e| WalkError(format!("element {i}: {e}")))?;
        if observed.contains_key(&pe) {
            if !allow_duplicates {
                return Err(WalkError(format!("duplicate entries for key {pe}")));
            }
            observed.insert(pe.clone(), Value::Null);
        } else {
            observed.insert(pe.clone(), item.clone());
        }
        pes.push(pe);
    }
    Ok((pes, observed))
}

fn merge_list<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    rel: ListRelationship<'_>,
    lhs: Option<&Vec<Value>>,
    rhs: Option<&Vec<Value>>,
) -> Result<Option<Value>, WalkError> {
    let element = ty.and_then(|t| model.element(t));
    let element = element.as_ref();
    let (rpes, robs) = index_items(model, rel, element, rhs, false)?;
    let (lpes, lobs) = index_items(model, rel, element, lhs, true)?;
    let mut shared = rpes.iter().filter(|pe| lobs.contains_key(*pe));
    let mut next_shared = shared.next();
    let mut merged_rhs = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(lpes.len().max(rpes.len()));
    // Item errors are dropped, as upstream drops them.
    let item = |l: Option<&Value>, r: Option<&Value>, out: &mut Vec<Value>| {
        if let Ok(Some(v)) = merge_walk(model, element, l, r) {
            out.push(v);
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged_rhs.insert(pe.clone());
                item(lobs.get(pe), robs.get(pe), &mut out);
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if robs.contains_key(pe) && next_shared.is_some_and(|n| n != pe) {
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let pe = &lpes[li];
            if !robs.contains_key(pe) {
                item(lhs.and_then(|l| l.get(li)), None, &mut out);
                li += 1;
                continue;
            } else if merged_rhs.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            merged_rhs.insert(pe.clone());
            item(lobs.get(pe), robs.get(pe), &mut out);
            ri += 1;
            if next_shared.is_some_and(|n| n == pe) {
                next_shared = shared.next();
            }
        }
    }
    Ok((!out.is_empty()).then_some(Value::Array(out)))
}

/// What changed between two objects (upstream's `Comparison`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields the new object lacks.
    pub removed: Set,
    /// Fields whose value changed.
    pub modified: Set,
    /// Fields only the new object has.
    pub added: Set,
}

impl Comparison {
    /// Drops the fields of `ignored` and everything below them.
    pub fn exclude(&mut self, ignored: &Set) {
        self.removed = self.removed.recursive_difference(ignored);
        self.modified = self.modified.recursive_difference(ignored);
        self.added = self.added.recursive_difference(ignored);
    }
}

/// Compares two objects (upstream's `Compare`).
pub fn compare<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    lhs: &Value,
    rhs: &Value,
) -> Result<Comparison, WalkError> {
    let mut c = Comparison::default();
    compare_walk(
        model,
        Some(ty),
        Some(lhs),
        Some(rhs),
        &mut Vec::new(),
        &mut c,
    )?;
    Ok(c)
}

fn compare_walk<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> Result<(), WalkError> {
    let leaf = |c: &mut Comparison, path: &[PathElement]| match (lhs, rhs) {
        (None, _) => c.added.insert(path),
        (_, None) => c.removed.insert(path),
        (Some(l), Some(r)) => {
            if !values_equal(l, r) {
                c.modified.insert(path)
            }
        }
    };
    match atom_for(model, ty, [lhs, rhs]) {
        Atom::Scalar | Atom::Deduced => {
            leaf(c, path);
            return Ok(());
        }
        Atom::List(rel) => {
            let l = lhs.and_then(Value::as_array);
            let r = rhs.and_then(Value::as_array);
            let empty = l.is_none_or(Vec::is_empty) && r.is_none_or(Vec::is_empty);
            if matches!(rel, ListRelationship::Atomic) || empty {
                leaf(c, path);
                return Ok(());
            }
            compare_list(model, ty, rel, l, r, path, c)?;
        }
        Atom::Map { atomic } => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            let empty = l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty);
            if atomic || empty {
                leaf(c, path);
                return Ok(());
            }
            let keys: Vec<&String> = l
                .into_iter()
                .flat_map(|m| m.keys())
                .chain(
                    r.into_iter()
                        .flat_map(|m| m.keys())
                        .filter(|k| !l.is_some_and(|l| l.contains_key(*k))),
                )
                .collect();
            for k in keys {
                let t = member_type(model, ty, k);
                path.push(PathElement::field(k));
                compare_walk(
                    model,
                    t.as_ref(),
                    l.and_then(|m| m.get(k)),
                    r.and_then(|m| m.get(k)),
                    path,
                    c,
                )?;
                path.pop();
            }
        }
    }
    if lhs.is_none() {
        c.added.insert(path);
    } else if rhs.is_none() {
        c.removed.insert(path);
    }
    Ok(())
}

fn compare_list<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    rel: ListRelationship<'_>,
    lhs: Option<&Vec<Value>>,
    rhs: Option<&Vec<Value>>,
    path: &mut Vec<PathElement>,
    c: &mut Comparison,
) -> Result<(), WalkError> {
    let element = ty.and_then(|t| model.element(t));
    let element = element.as_ref();
    let mut order: Vec<PathElement> = Vec::new();
    let mut lvals: std::collections::BTreeMap<PathElement, Vec<&Value>> = Default::default();
    let mut rvals: std::collections::BTreeMap<PathElement, Vec<&Value>> = Default::default();
    for (i, item) in lhs.into_iter().flatten().enumerate() {
        let pe = list_item_element(model, rel, element, i, item)?;
        let e = lvals.entry(pe.clone()).or_default();
        if e.is_empty() {
            order.push(pe);
        }
        e.push(item);
    }
    for (i, item) in rhs.into_iter().flatten().enumerate() {
        let pe = list_item_element(model, rel, element, i, item)?;
        let e = rvals.entry(pe.clone()).or_default();
        if e.is_empty() && !lvals.contains_key(&pe) {
            order.push(pe);
        }
        e.push(item);
    }
    for pe in order {
        let l = lvals.get(&pe).map(Vec::as_slice).unwrap_or_default();
        let r = rvals.get(&pe).map(Vec::as_slice).unwrap_or_default();
        path.push(pe);
        match (l.len(), r.len()) {
            (0, 0) => {}
            (0..=1, 0..=1) => compare_walk(
                model,
                element,
                l.first().copied(),
                r.first().copied(),
                path,
                c,
            )?,
            (2.., 2..) => {
                let equal = l.len() == r.len() && l.iter().zip(r).all(|(a, b)| values_equal(a, b));
                if !equal {
                    c.modified.insert(path);
                }
            }
            (2.., _) => {
                if let Some(first) = r.first() {
                    compare_walk(model, element, None, Some(first), path, c)?;
                }
                c.removed.insert(path);
            }
            (_, _) => {
                if let Some(first) = l.first() {
                    compare_walk(model, element, Some(first), None, path, c)?;
                }
                c.added.insert(path);
            }
        }
        path.pop();
    }
    Ok(())
}

/// The object without the fields of `to_remove` (upstream's `RemoveItems`). None stands for
/// `null`: a map or list left with nothing is null, as upstream leaves it.
pub fn remove_items<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    value: &Value,
    to_remove: &Set,
) -> Option<Value> {
    remove_walk(model, Some(ty), value, to_remove)
}

fn remove_walk<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    value: &Value,
    to_remove: &Set,
) -> Option<Value> {
    match atom_for(model, ty, [Some(value), None]) {
        Atom::Scalar | Atom::Deduced => Some(value.clone()),
        Atom::List(rel) => {
            let items = value.as_array()?;
            if items.is_empty() || matches!(rel, ListRelationship::Atomic) {
                return None;
            }
            let element = ty.and_then(|t| model.element(t));
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Ok(pe) = list_item_element(model, rel, element.as_ref(), i, item) else {
                    out.push(item.clone());
                    continue;
                };
                if to_remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                match to_remove.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(sub) => out.push(
                        remove_walk(model, element.as_ref(), item, sub).unwrap_or(Value::Null),
                    ),
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        Atom::Map { atomic } => {
            let m = value.as_object()?;
            if m.is_empty() || atomic {
                return None;
            }
            let mut out = Map::new();
            for (k, v) in m {
                let pe = PathElement::field(k);
                if to_remove.has(std::slice::from_ref(&pe)) {
                    continue;
                }
                let v = match to_remove.with_prefix(&pe).filter(|s| !s.is_empty()) {
                    Some(sub) => {
                        let t = member_type(model, ty, k);
                        remove_walk(model, t.as_ref(), v, sub).unwrap_or(Value::Null)
                    }
                    None => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// The set with every struct field that has paths below it made a member itself (upstream's
/// `EnsureNamedFieldsAreMembers`).
pub fn ensure_named_fields_are_members<M: TypeModel>(model: &M, ty: &M::Type, set: &Set) -> Set {
    ensure_walk(model, Some(ty), set)
}

fn ensure_walk<M: TypeModel>(model: &M, ty: Option<&M::Type>, set: &Set) -> Set {
    let mut out = set.clone();
    let is_map = ty.is_some_and(|t| matches!(model.atom(t), Atom::Map { .. }));
    for (pe, child) in set.children() {
        let child_ty = match pe {
            PathElement::Field(name) => {
                if is_map && is_named(model, ty, name) {
                    out.members_mut().insert(pe.clone());
                }
                if is_map {
                    member_type(model, ty, name)
                } else {
                    None
                }
            }
            PathElement::Key(_) => ty.and_then(|t| match model.atom(t) {
                Atom::List(_) => model.element(t),
                _ => None,
            }),
            _ => None,
        };
        out.children_mut()
            .insert(pe.clone(), ensure_walk(model, child_ty.as_ref(), child));
    }
    out
}

/// Checks an object against the schema as upstream's `Validate` does for what this module
/// models: fields a struct does not declare, list items without keys, duplicate keys. Errors
/// as upstream's `ValidationErrors` prints them (`.spec.foo: field not declared in schema`;
/// several as `errors:` and one per line). Scalar types are not checked.
pub fn validate<M: TypeModel>(model: &M, ty: &M::Type, value: &Value) -> Result<(), WalkError> {
    let mut errors = Vec::new();
    validate_walk(model, Some(ty), value, "", &mut errors);
    match errors.len() {
        0 => Ok(()),
        1 => Err(WalkError(errors.remove(0))),
        _ => Err(WalkError(format!("errors:\n  {}", errors.join("\n  ")))),
    }
}

fn validate_walk<M: TypeModel>(
    model: &M,
    ty: Option<&M::Type>,
    value: &Value,
    path: &str,
    errors: &mut Vec<String>,
) {
    let at = |msg: String| {
        if path.is_empty() {
            msg
        } else {
            format!("{path}: {msg}")
        }
    };
    let Some(t) = ty else { return };
    match (model.atom(t), value) {
        (Atom::List(rel), Value::Array(items)) => {
            let element = model.element(t);
            let mut seen = std::collections::BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let pe = match rel {
                    ListRelationship::Atomic => PathElement::Index(i as i64),
                    _ => match list_item_element(model, rel, element.as_ref(), i, item) {
                        Ok(pe) => pe,
                        Err(e) => {
                            errors.push(at(format!("element {i}: {e}")));
                            return;
                        }
                    },
                };
                if !matches!(rel, ListRelationship::Atomic) && !seen.insert(pe.clone()) {
                    errors.push(at(format!("duplicate entries for key {pe}")));
                }
                let child = format!("{path}{pe}");
                validate_walk(model, element.as_ref(), item, &child, errors);
            }
        }
        (Atom::Map { .. } | Atom::Deduced, Value::Object(m)) => {
            for (k, v) in m {
                let child = format!("{path}.{k}");
                match member_type(model, ty, k) {
                    Some(ft) => validate_walk(model, Some(&ft), v, &child, errors),
                    None => {
                        errors.push(format!("{child}: field not declared in schema"));
                        return;
                    }
                }
            }
        }
        _ => {}
    }
}

/// A manager's set made to fit the schema (upstream's `ReconcileFieldSetWithSchema`): a list or
/// map the schema now makes atomic, owned through paths below it, becomes owned as a whole.
/// None when the set fits already.
pub fn reconcile_with_schema<M: TypeModel>(model: &M, ty: &M::Type, set: &Set) -> Option<Set> {
    let mut to_remove = Set::new();
    let mut to_add = Set::new();
    reconcile_walk(
        model,
        ty,
        Some(set),
        false,
        &mut Vec::new(),
        &mut to_remove,
        &mut to_add,
    );
    if to_remove.is_empty() && to_add.is_empty() {
        return None;
    }
    Some(set.recursive_difference(&to_remove).union(&to_add))
}

fn reconcile_walk<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    set: Option<&Set>,
    is_atomic: bool,
    path: &mut Vec<PathElement>,
    to_remove: &mut Set,
    to_add: &mut Set,
) {
    let child_type = |pe: &PathElement| -> Option<M::Type> {
        match model.atom(ty) {
            Atom::List(_) => model.element(ty),
            Atom::Map { .. } => match pe {
                PathElement::Field(name) => model.field(ty, name).map(|(t, _)| t),
                _ => None,
            },
            _ => None,
        }
    };
    let collapse = |path: &[PathElement], to_remove: &mut Set, to_add: &mut Set| {
        to_remove.insert(path);
        to_add.insert(path);
    };
    match model.atom(ty) {
        Atom::Scalar | Atom::Deduced => return,
        Atom::List(ListRelationship::Atomic) => {
            if !is_atomic {
                collapse(path, to_remove, to_add);
            }
            return;
        }
        Atom::Map { atomic: true } => {
            if !is_atomic
                && set
                    .is_some_and(|s| s.members().next().is_some() || s.children().next().is_some())
            {
                collapse(path, to_remove, to_add);
            }
            return;
        }
        Atom::List(_) | Atom::Map { atomic: false } => {}
    }
    let Some(set) = set else { return };
    let members: std::collections::BTreeSet<&PathElement> = set.members().collect();
    // Upstream visits the elements with paths below them first, then the members.
    let mut visit = |pe: &PathElement, member: bool| {
        let Some(t) = child_type(pe) else { return };
        let below = set.with_prefix(pe);
        path.push(pe.clone());
        reconcile_walk(
            model,
            &t,
            below,
            member && below.is_none(),
            path,
            to_remove,
            to_add,
        );
        path.pop();
    };
    for (pe, _) in set.children() {
        if !members.contains(pe) {
            visit(pe, false);
        }
    }
    for pe in &members {
        visit(pe, true);
    }
}

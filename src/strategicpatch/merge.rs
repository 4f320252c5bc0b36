//! The merge itself: `mergeMap`, `mergeSlice` and their helpers in upstream's `patch.go`, with
//! the options `StrategicMergeMapPatch` uses (parallel lists merged, unmatched nulls ignored).
//!
//! Go visits a patch map's keys in random order; here they are visited in byte order, which
//! matters only where upstream's own result would vary from run to run.

use serde_json::{Map, Value};

use super::govalue::{
    GoType, MAP_TYPE, SLICE_TYPE, bad_arg_type, check_hashable, fmt_list, fmt_map, fmt_s, go_eq,
    go_type, set_contains,
};
use super::sort::slice_stable;
use super::{Error, LookupPatchMeta};

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_STRATEGY: &str = "retainKeys";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

type Object = Map<String, Value>;

static NULL: Value = Value::Null;

fn is_str(v: &Value, s: &str) -> bool {
    matches!(v, Value::String(x) if x == s)
}

fn no_merge_key(m: &Object, merge_key: &str) -> Error {
    Error::NoMergeKey {
        map: fmt_map(m),
        merge_key: merge_key.to_string(),
    }
}

fn nil_dereference() -> Error {
    Error::Panic {
        message: "runtime error: invalid memory address or nil pointer dereference",
    }
}

/// `mergeMap`: merges `patch` into `original`.
pub(crate) fn merge_map<S: LookupPatchMeta>(
    mut original: Object,
    mut patch: Object,
    schema: &S,
) -> Result<Object, Error> {
    if patch.contains_key(DIRECTIVE_MARKER) {
        return handle_directive_in_merge_map(patch);
    }
    apply_retain_keys_directive(&mut original, &mut patch)?;
    merge_patch_into_original(&mut original, &mut patch, schema)?;

    // Lists this loop left with spare room in their Go array (see `merge_slice`).
    let mut capacities: Vec<(String, usize)> = Vec::new();
    for (patch_key, patch_v) in patch {
        let mut k = patch_key;
        let mut is_delete_list = false;
        if k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
            let no_prefix = extract_key(&k, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?;
            is_delete_list = true;
            if !no_prefix.is_empty() {
                k = no_prefix.to_string();
            }
        }
        if patch_v.is_null() {
            original.remove(&k);
            continue;
        }
        let Some(original_v) = original.get_mut(&k) else {
            if !is_delete_list {
                put_patch_value(&mut original, k, patch_v);
            }
            continue;
        };
        if go_type(original_v) != go_type(&patch_v) {
            if !is_delete_list {
                put_patch_value(&mut original, k, patch_v);
            }
            continue;
        }
        match (std::mem::take(original_v), patch_v) {
            (Value::Object(o), Value::Object(p)) => {
                let (sub, meta) = schema.lookup_patch_metadata_for_struct(&k)?;
                let (_, strategy) = extract_retain_keys_patch_strategy(meta.patch_strategies)?;
                *original_v = Value::Object(if strategy != REPLACE_DIRECTIVE {
                    merge_map(o, p, &sub)?
                } else {
                    p
                });
            }
            (Value::Array(o), Value::Array(p)) => {
                let (sub, meta) = schema.lookup_patch_metadata_for_slice(&k)?;
                let (_, strategy) = extract_retain_keys_patch_strategy(meta.patch_strategies)?;
                let capacity = capacities
                    .iter()
                    .find(|(key, _)| *key == k)
                    .map_or(o.len(), |(_, c)| *c);
                let merged = merge_slice_handler(
                    Slice { items: o, capacity },
                    p,
                    &sub,
                    strategy,
                    meta.patch_merge_key,
                    is_delete_list,
                )?;
                if merged.capacity > merged.merged.len() {
                    capacities.push((k, merged.capacity));
                }
                *original_v = Value::Array(merged.merged);
            }
            (_, scalar) => *original_v = scalar,
        }
    }
    Ok(original)
}

/// The patch value taken as it is (nulls inside it discarded, maps with `$patch` dropped).
fn put_patch_value(original: &mut Object, k: String, mut patch_v: Value) {
    discard_null_values_from_patch(&mut patch_v);
    match remove_directives(patch_v) {
        Some(v) => {
            original.insert(k, v);
        }
        None => {
            original.remove(&k);
        }
    }
}

/// `handleDirectiveInMergeMap`: a map carrying `$patch`.
fn handle_directive_in_merge_map(mut patch: Object) -> Result<Object, Error> {
    match patch.get(DIRECTIVE_MARKER) {
        Some(d) if is_str(d, REPLACE_DIRECTIVE) => {
            patch.remove(DIRECTIVE_MARKER);
            Ok(patch)
        }
        Some(d) if is_str(d, DELETE_DIRECTIVE) => Ok(Object::new()),
        d => Err(Error::BadPatchType {
            directive: fmt_s(d.unwrap_or(&NULL)),
            map: fmt_map(&patch),
        }),
    }
}

/// `extractKey`: the field name after `<prefix>/`.
fn extract_key<'k>(s: &'k str, prefix: &str) -> Result<&'k str, Error> {
    match s.split_once('/') {
        Some((head, rest)) if head == prefix => Ok(rest),
        _ if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX => {
            Err(Error::BadPatchFormatForPrimitiveList)
        }
        _ => Err(Error::BadPatchFormatForSetElementOrderList),
    }
}

/// `applyRetainKeysDirective`: clears the fields `$retainKeys` does not name.
fn apply_retain_keys_directive(original: &mut Object, patch: &mut Object) -> Result<(), Error> {
    let Some(retain) = patch.remove(RETAIN_KEYS_DIRECTIVE) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(Error::BadPatchFormatForRetainKeys);
    };
    for v in &retain {
        check_hashable(v)?;
    }
    let retained = |k: &str| retain.iter().any(|v| is_str(v, k));
    for (k, v) in patch.iter() {
        if v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
            || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        {
            continue;
        }
        if !retained(k) {
            return Err(Error::BadPatchFormatForRetainKeys);
        }
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// A list field's value, which must be a list when present.
fn list_field(m: &mut Object, k: &str) -> Result<Option<Vec<Value>>, Error> {
    match m.remove(k) {
        None => Ok(None),
        Some(Value::Array(l)) => Ok(Some(l)),
        Some(other) => Err(bad_arg_type(SLICE_TYPE, &other)),
    }
}

/// `mergePatchIntoOriginal`: each `$setElementOrder/<field>` with its list, merged and put in
/// the directive's order.
fn merge_patch_into_original<S: LookupPatchMeta>(
    original: &mut Object,
    patch: &mut Object,
    schema: &S,
) -> Result<(), Error> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
        .cloned()
        .collect();
    for key in keys {
        let Some(set_order) = patch.remove(&key) else {
            continue;
        };
        let Value::Array(set_order) = set_order else {
            return Err(bad_arg_type(SLICE_TYPE, &set_order));
        };
        let original_key = extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?.to_string();
        let original_list = list_field(original, &original_key)?;
        let patch_list = list_field(patch, &original_key)?;
        let (sub, meta) = schema.lookup_patch_metadata_for_slice(&original_key)?;
        let (_, strategy) = extract_retain_keys_patch_strategy(meta.patch_strategies)?;
        let merge_key = meta.patch_merge_key;
        validate_patch_with_set_order_list(
            patch_list.as_deref().unwrap_or_default(),
            &set_order,
            merge_key,
        )?;

        let (merged, server_view, patch_list) = match (original_list, patch_list) {
            (Some(o), None) => (o.clone(), o, Vec::new()),
            (None, Some(p)) => {
                let merged = p.iter().cloned().filter_map(remove_directives).collect();
                // Go's removeDirectives edits the patch's maps in place, except those it drops.
                let edited = p
                    .into_iter()
                    .map(|v| match &v {
                        Value::Object(m) if !m.contains_key(DIRECTIVE_MARKER) => {
                            remove_directives(v).unwrap_or_default()
                        }
                        _ => v,
                    })
                    .collect();
                (merged, Vec::new(), edited)
            }
            (Some(o), Some(p)) => {
                let original = Slice {
                    capacity: o.len(),
                    items: o,
                };
                let m = merge_slice_handler(original, p.clone(), &sub, strategy, merge_key, false)?;
                (m.merged, m.server_view, p)
            }
            (None, None) => continue,
        };

        let (patch_items, server_only) = if merge_key.is_empty() {
            partition_primitives_by_present_in_list(merged, &set_order)?
        } else {
            partition_maps_by_present_in_list(merged, &set_order, merge_key)?
        };
        let kind = slice_element_type(&[&server_view, &patch_list])?;
        let ordered = normalize_element_order(
            patch_items,
            server_only,
            &set_order,
            &server_view,
            merge_key,
            kind,
        )?;
        original.insert(original_key, Value::Array(ordered));
    }
    Ok(())
}

/// `validatePatchWithSetOrderList`: the patch list's items appear in the `$setElementOrder`
/// list, in the same relative order.
fn validate_patch_with_set_order_list(
    patch_list: &[Value],
    set_order: &[Value],
    merge_key: &str,
) -> Result<(), Error> {
    if set_order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch_list.iter().collect()
    } else {
        let mut kept = Vec::new();
        for v in patch_list {
            let Value::Object(m) = v else {
                return Err(bad_arg_type(MAP_TYPE, v));
            };
            if !m
                .get(DIRECTIVE_MARKER)
                .is_some_and(|d| is_str(d, DELETE_DIRECTIVE))
            {
                kept.push(v);
            }
        }
        kept
    };
    let (mut pi, mut si) = (0, 0);
    while pi < non_delete.len() && si < set_order.len() {
        if matches!(non_delete[pi], Value::Object(m) if m.contains_key(DIRECTIVE_MARKER)) {
            pi += 1;
            continue;
        }
        if merge_key_value_equal(non_delete[pi], &set_order[si], merge_key)? {
            pi += 1;
        }
        si += 1;
    }
    if pi < non_delete.len() && si >= set_order.len() {
        return Err(Error::SetElementOrderMismatch {
            patch_list: fmt_list(patch_list),
            set_element_order: fmt_list(set_order),
        });
    }
    Ok(())
}

/// `mergeKeyValueEqual`.
fn merge_key_value_equal(left: &Value, right: &Value, merge_key: &str) -> Result<bool, Error> {
    if merge_key.is_empty() {
        return go_eq(left, right);
    }
    let Value::Object(l) = left else {
        return Err(bad_arg_type(MAP_TYPE, left));
    };
    let Value::Object(r) = right else {
        return Err(bad_arg_type(MAP_TYPE, right));
    };
    let lv = l.get(merge_key).ok_or_else(|| no_merge_key(l, merge_key))?;
    let rv = r.get(merge_key).ok_or_else(|| no_merge_key(r, merge_key))?;
    go_eq(lv, rv)
}

/// A merged list, and the original list as Go's other holders of its backing array see it
/// afterwards (deletions shift elements left and appended patch items may land in the freed
/// slots); `$setElementOrder` orders by the latter.
struct Merged {
    merged: Vec<Value>,
    /// The capacity of Go's array holding `merged`.
    capacity: usize,
    server_view: Vec<Value>,
}

/// A list and the capacity of the Go array holding it: the length, for the deep copies
/// kube-apiserver patches; more for a list this patch already shortened.
struct Slice {
    items: Vec<Value>,
    capacity: usize,
}

/// `mergeSliceHandler`: merges for the `merge` strategy and parallel deletion lists, replaces
/// otherwise.
fn merge_slice_handler<S: LookupPatchMeta>(
    original: Slice,
    patch: Vec<Value>,
    schema: &S,
    strategy: &str,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Merged, Error> {
    if strategy == MERGE_DIRECTIVE || is_delete_list {
        merge_slice(original, patch, schema, merge_key, is_delete_list)
    } else {
        Ok(Merged {
            capacity: patch.len(),
            merged: patch,
            server_view: original.items,
        })
    }
}

/// `mergeSlice`.
fn merge_slice<S: LookupPatchMeta>(
    original: Slice,
    patch: Vec<Value>,
    schema: &S,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Merged, Error> {
    let Slice {
        items: original,
        capacity,
    } = original;
    if original.is_empty() && patch.is_empty() {
        return Ok(Merged {
            merged: original,
            capacity,
            server_view: Vec::new(),
        });
    }
    let kind = slice_element_type(&[&original, &patch])?;
    if kind != GoType::Map {
        if is_delete_list {
            let merged = delete_from_slice(&original, &patch)?;
            return Ok(Merged {
                merged,
                capacity: original.len(),
                server_view: original,
            });
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        let (merged, array) = deduplicate_scalars(both)?;
        // Go's `append(original, patch...)` reuses the original's array when it has room, and the
        // deduplication then rewrites the original in place.
        let server_view = if original.len() + patch.len() <= capacity {
            array[..original.len()].to_vec()
        } else {
            original
        };
        let merged = order_merged(merged, &patch, &server_view, merge_key, kind)?;
        return Ok(Merged {
            capacity: merged.len(),
            merged,
            server_view,
        });
    }
    if merge_key.is_empty() {
        return Err(Error::NoMergeKeyDeclared {
            type_name: schema.name().to_string(),
        });
    }

    // mergeSliceWithSpecialElements
    let n = original.len();
    let mut server_view = original.clone();
    let mut work = original;
    let mut replace = false;
    let mut patch_without_special = Vec::with_capacity(patch.len());
    for v in patch {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type(MAP_TYPE, &v));
        };
        match m.get(DIRECTIVE_MARKER) {
            None => patch_without_special.push(v),
            Some(d) if is_str(d, DELETE_DIRECTIVE) => {
                let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
                delete_matching_entries(&mut work, &mut server_view, merge_key, value)?;
            }
            Some(d) if is_str(d, REPLACE_DIRECTIVE) => replace = true,
            Some(d) if is_str(d, MERGE_DIRECTIVE) => return Err(Error::MergeDirectiveInList),
            Some(d) => {
                return Err(Error::BadPatchType {
                    directive: fmt_s(d),
                    map: fmt_map(m),
                });
            }
        }
    }
    let (mut work, patch, shares_backing) = if replace {
        (patch_without_special, Vec::new(), false)
    } else {
        (work, patch_without_special, true)
    };
    let server_order = work.clone();

    // mergeSliceWithoutSpecialElements
    for v in &patch {
        let Value::Object(m) = v else {
            return Err(bad_arg_type(MAP_TYPE, v));
        };
        let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
        match find_map_in_slice_based_on_key_value(&work, merge_key, value)? {
            Some(i) => {
                let Value::Object(o) = std::mem::take(&mut work[i]) else {
                    return Err(Error::NotAMap { index: i });
                };
                work[i] = Value::Object(merge_map(o, m.clone(), schema)?);
            }
            None => {
                if shares_backing && work.len() < n {
                    server_view[work.len()] = v.clone();
                }
                work.push(v.clone());
            }
        }
    }
    let merged = order_merged(work, &patch, &server_order, merge_key, kind)?;
    Ok(Merged {
        capacity: merged.len(),
        merged,
        server_view,
    })
}

/// The tail of `mergeSlice`: the patch's items in the patch's order, interleaved with the
/// others in the original's order.
fn order_merged(
    merged: Vec<Value>,
    patch: &[Value],
    original: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, Error> {
    let (patch_items, server_only) = if merge_key.is_empty() {
        partition_primitives_by_present_in_list(merged, patch)?
    } else {
        partition_maps_by_present_in_list(merged, patch, merge_key)?
    };
    normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)
}

/// `deleteMatchingEntries`, with Go's in-place `append(s[:i], s[i+1:]...)` mirrored on the
/// view of the backing array.
fn delete_matching_entries(
    work: &mut Vec<Value>,
    server_view: &mut [Value],
    merge_key: &str,
    value: &Value,
) -> Result<(), Error> {
    while let Some(i) = find_map_in_slice_based_on_key_value(work, merge_key, value)? {
        let len = work.len();
        work.remove(i);
        if len <= server_view.len() {
            let last = server_view[len - 1].clone();
            server_view[i..len].rotate_left(1);
            server_view[len - 1] = last;
        }
    }
    Ok(())
}

/// `findMapInSliceBasedOnKeyValue`: the index of the first map whose merge key equals `value`.
fn find_map_in_slice_based_on_key_value(
    list: &[Value],
    key: &str,
    value: &Value,
) -> Result<Option<usize>, Error> {
    for (i, v) in list.iter().enumerate() {
        let Value::Object(m) = v else {
            return Err(Error::NotAMap { index: i });
        };
        if let Some(candidate) = m.get(key)
            && go_eq(candidate, value)?
        {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// `deleteFromSlice`: the parallel deletion list of a list of scalars.
fn delete_from_slice(current: &[Value], to_delete: &[Value]) -> Result<Vec<Value>, Error> {
    for v in to_delete {
        check_hashable(v)?;
    }
    let mut kept = Vec::with_capacity(current.len());
    for v in current {
        if !set_contains(to_delete, v)? {
            kept.push(v.clone());
        }
    }
    Ok(kept)
}

/// `deduplicateScalars`: drops later duplicates, moving the last element into each hole. Returns
/// the deduplicated list and the whole array as Go leaves it (stale elements past the end).
fn deduplicate_scalars(mut s: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let mut len = s.len();
    let mut i = 0;
    while i + 1 < len {
        let mut j = i + 1;
        while j < len {
            if go_eq(&s[i], &s[j])? {
                s[j] = s[len - 1].clone();
                len -= 1;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    let array = s.clone();
    s.truncate(len);
    Ok((s, array))
}

/// `partitionPrimitivesByPresentInList`.
fn partition_primitives_by_present_in_list(
    original: Vec<Value>,
    partition_by: &[Value],
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    for v in partition_by {
        check_hashable(v)?;
    }
    let (mut present, mut absent) = (Vec::new(), Vec::new());
    for v in original {
        if set_contains(partition_by, &v)? {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// `partitionMapsByPresentInList`.
fn partition_maps_by_present_in_list(
    original: Vec<Value>,
    partition_by: &[Value],
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), Error> {
    let (mut present, mut absent) = (Vec::new(), Vec::new());
    for v in original {
        let Value::Object(m) = &v else {
            return Err(bad_arg_type(MAP_TYPE, &v));
        };
        let value = m.get(merge_key).ok_or_else(|| no_merge_key(m, merge_key))?;
        if find_map_in_slice_based_on_key_value(partition_by, merge_key, value)?.is_some() {
            present.push(v);
        } else {
            absent.push(v);
        }
    }
    Ok((present, absent))
}

/// `sliceElementType`: the one Go type of every element of `lists`.
fn slice_element_type(lists: &[&[Value]]) -> Result<GoType, Error> {
    let mut prev: Option<Option<GoType>> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let current = go_type(v);
        match prev {
            None => {
                let Some(t) = current else {
                    return Err(nil_dereference());
                };
                if t == GoType::Slice {
                    return Err(Error::NoListOfLists);
                }
                prev = Some(current);
            }
            Some(p) if p != current => {
                let printed: Vec<String> = lists.iter().map(|l| fmt_list(l)).collect();
                return Err(Error::ElementTypesNotIdentical {
                    lists: format!("[{}]", printed.join(" ")),
                });
            }
            Some(_) => {}
        }
    }
    prev.flatten().ok_or(Error::NoElements)
}

/// `index`: the position in `list` of the first item equal to `item` (maps: by merge key).
fn index(
    list: &[Value],
    item: &Value,
    merge_key: &str,
    kind: GoType,
) -> Result<Option<usize>, Error> {
    let wanted = index_value(item, merge_key, kind);
    for (i, v) in list.iter().enumerate() {
        if go_eq(wanted, index_value(v, merge_key, kind))? {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// What `index` compares: a map's merge-key value (nil when absent), any other item itself.
fn index_value<'v>(v: &'v Value, merge_key: &str, kind: GoType) -> &'v Value {
    match v {
        Value::Object(m) if kind == GoType::Map => m.get(merge_key).unwrap_or(&NULL),
        _ if kind == GoType::Map => &NULL,
        _ => v,
    }
}

/// `normalizeElementOrder`: `patch` put in `patch_order`, `server_only` in `server_order`, then
/// the two interleaved.
fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, Error> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    merge_sorted_slice(server_only, patch, server_order, merge_key, kind)
}

/// `normalizeSliceOrder`: a stable sort by position in `order` (items missing from it compare
/// as "less", as upstream's comparator has it); `$patch: delete` maps go last.
fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, Error> {
    let (mut to_sort, to_delete) = if kind == GoType::Map {
        for v in to_sort.iter().chain(order) {
            let Value::Object(m) = v else {
                return Err(bad_arg_type(MAP_TYPE, v));
            };
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        let (mut kept, mut deleted) = (Vec::new(), Vec::new());
        for v in to_sort {
            if v.get(DIRECTIVE_MARKER)
                .is_some_and(|d| is_str(d, DELETE_DIRECTIVE))
            {
                deleted.push(v);
            } else {
                kept.push(v);
            }
        }
        (kept, deleted)
    } else {
        (to_sort, Vec::new())
    };
    slice_stable(&mut to_sort, &mut |a: &Value, b: &Value| {
        if let Some(ia) = index(order, a, merge_key, kind)?
            && let Some(ib) = index(order, b, merge_key, kind)?
        {
            return Ok::<bool, Error>(ia < ib);
        }
        Ok(true)
    })?;
    to_sort.extend(to_delete);
    Ok(to_sort)
}

/// `mergeSortedSlice`: inserts the `left` items among the `right` ones where the server order
/// puts them, keeping each side's relative order.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    merge_key: &str,
    kind: GoType,
) -> Result<Vec<Value>, Error> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                let li = index(server_order, l, merge_key, kind)?;
                let ri = index(server_order, r, merge_key, kind)?;
                matches!((li, ri), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// `removeDirectives`: drops every map carrying `$patch`; `None` when `v` itself is one.
fn remove_directives(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.contains_key(DIRECTIVE_MARKER) {
                return None;
            }
            Some(Value::Object(
                m.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(l) => Some(Value::Array(
            l.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// `discardNullValuesFromPatch`: removes null members of maps, at any depth.
fn discard_null_values_from_patch(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            for v in m.values_mut() {
                discard_null_values_from_patch(v);
            }
        }
        Value::Array(l) => {
            for v in l {
                discard_null_values_from_patch(v);
            }
        }
        _ => {}
    }
}

/// `extractRetainKeysPatchStrategy`: whether `retainKeys` is among the strategies, and the other
/// strategy.
fn extract_retain_keys_patch_strategy(strategies: &str) -> Result<(bool, &str), Error> {
    let parts: Vec<&str> = strategies.split(',').collect();
    match parts.as_slice() {
        [one] if *one == RETAIN_KEYS_STRATEGY => Ok((true, "")),
        [one] => Ok((false, one)),
        [a, b] if *a == RETAIN_KEYS_STRATEGY => Ok((true, b)),
        [a, b] if *b == RETAIN_KEYS_STRATEGY => Ok((true, a)),
        _ => Err(Error::UnexpectedPatchStrategy {
            strategies: format!("[{}]", parts.join(" ")),
        }),
    }
}

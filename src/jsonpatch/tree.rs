//! The lazily decoded document of evanphx/json-patch v4: `lazyNode`, `partialDoc`, `partialArray`.
//!
//! A node stays as its raw bytes until a patch path walks through it (or a `test` compares it);
//! only then is it split into its direct children. Marshalling re-encodes decoded containers (keys
//! sorted) and compacts raw nodes, so untouched subtrees keep their original member order,
//! duplicate keys and escape spelling, exactly as Go's output does.

use std::borrow::Cow;

use super::gostr;
use super::scan::{self, Child};

/// A `*lazyNode` slot: `None` is Go's nil pointer (what a JSON `null` decodes to).
pub(crate) type Slot<'a> = Option<Node<'a>>;

/// One `lazyNode`.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    /// `which == eRaw` with `raw == nil`: an operation's `"value": null`.
    Null,
    /// `which == eRaw`: valid JSON bytes without surrounding whitespace.
    Raw(Cow<'a, [u8]>),
    /// `which == eDoc`.
    Doc(ObjMap<'a>),
    /// `which == eAry`.
    Ary(Vec<Slot<'a>>),
}

/// A `partialDoc`: members sorted by key bytes, keys unique.
#[derive(Debug, Default)]
pub(crate) struct ObjMap<'a> {
    /// Go's nil map (decoded from `null`): reads see nothing, writes panic, marshals as `null`.
    pub nil: bool,
    pub entries: Vec<(Cow<'a, str>, Slot<'a>)>,
}

/// Why an operation stopped: an error value Go returns, or a Go runtime panic.
#[derive(Debug)]
pub(crate) enum Fault {
    Err(String),
    Panic(&'static str),
}

impl Fault {
    /// Wraps an error the way `fmt.Errorf("...: %w", err)` does; panics pass through unchanged.
    pub(crate) fn wrap(self, f: impl FnOnce(&str) -> String) -> Fault {
        match self {
            Fault::Err(m) => Fault::Err(f(&m)),
            p => p,
        }
    }
}

pub(crate) const NIL_MAP: &str = "assignment to entry in nil map";
pub(crate) const NIL_DEREF: &str =
    "runtime error: invalid memory address or nil pointer dereference";

/// Nesting limit for `test` comparisons, which recurse; deeper values fail instead of risking the
/// stack (Go has no such limit).
const MAX_EQUAL_DEPTH: usize = 2_000;

impl Drop for Node<'_> {
    fn drop(&mut self) {
        // Iterative, so that deeply nested decoded trees cannot overflow the stack.
        fn take_children<'a>(n: &mut Node<'a>, stack: &mut Vec<Node<'a>>) {
            let mut grab = |s: &mut Slot<'a>| {
                if matches!(s, Some(Node::Doc(_) | Node::Ary(_)))
                    && let Some(n) = s.take()
                {
                    stack.push(n);
                }
            };
            match n {
                Node::Doc(m) => m.entries.iter_mut().for_each(|(_, s)| grab(s)),
                Node::Ary(v) => v.iter_mut().for_each(grab),
                Node::Null | Node::Raw(_) => {}
            }
        }
        let mut stack = Vec::new();
        take_children(self, &mut stack);
        while let Some(mut n) = stack.pop() {
            take_children(&mut n, &mut stack);
        }
    }
}

fn slot_of(raw: &[u8]) -> Slot<'_> {
    if raw == b"null" {
        None
    } else {
        Some(Node::Raw(Cow::Borrowed(raw)))
    }
}

fn span(b: &[u8], (s, e): (usize, usize)) -> &[u8] {
    b.get(s..e).unwrap_or_default()
}

/// Builds a `partialDoc` from an object's children (Go map semantics: the last duplicate wins).
pub(crate) fn obj_from_children<'a>(b: &'a [u8], children: &[Child]) -> ObjMap<'a> {
    let mut entries: Vec<(Cow<'a, str>, Slot<'a>)> = children
        .iter()
        .map(|c| (gostr::unquote(span(b, c.key)), slot_of(span(b, c.val))))
        .collect();
    if !entries.is_sorted_by(|a, b| a.0 < b.0) {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, kept| {
            if later.0 == kept.0 {
                std::mem::swap(&mut later.1, &mut kept.1);
                true
            } else {
                false
            }
        });
    }
    ObjMap {
        nil: false,
        entries,
    }
}

/// Builds a `partialArray` from an array's children.
pub(crate) fn ary_from_children<'a>(b: &'a [u8], children: &[Child]) -> Vec<Slot<'a>> {
    children.iter().map(|c| slot_of(span(b, c.val))).collect()
}

fn own_slot(mut s: Slot<'_>) -> Slot<'static> {
    match &mut s {
        None => None,
        Some(Node::Raw(r)) => Some(Node::Raw(Cow::Owned(std::mem::take(r).into_owned()))),
        Some(_) => Some(Node::Null),
    }
}

/// Splits valid JSON values into their direct children.
pub(crate) trait Splitter {
    /// [`scan::split`]: fills `children` with the direct children of `raw`, a valid JSON value
    /// without surrounding whitespace; false if it is not valid after all.
    fn split(&self, raw: &[u8], children: &mut Vec<Child>) -> bool;
}

/// Splitting by scanning the bytes.
pub(crate) struct Scan;

impl Splitter for Scan {
    fn split(&self, raw: &[u8], children: &mut Vec<Child>) -> bool {
        scan::split(raw, children)
    }
}

/// `json.Unmarshal(raw, &partialDoc)` / `json.Unmarshal(raw, &partialArray)` on a raw node.
fn decode_raw<'a>(raw: &Cow<'a, [u8]>, want_array: bool, sp: &dyn Splitter) -> Option<Node<'a>> {
    fn go<'b>(b: &'b [u8], want_array: bool, sp: &dyn Splitter) -> Option<Node<'b>> {
        let mut children = Vec::new();
        if !sp.split(b, &mut children) {
            return None;
        }
        match (b.first(), want_array) {
            (Some(b'{'), false) => Some(Node::Doc(obj_from_children(b, &children))),
            (Some(b'['), true) => Some(Node::Ary(ary_from_children(b, &children))),
            (Some(b'n'), false) => Some(Node::Doc(ObjMap {
                nil: true,
                entries: Vec::new(),
            })),
            _ => None,
        }
    }
    match raw {
        Cow::Borrowed(b) => go(b, want_array, sp),
        Cow::Owned(v) => {
            let mut n = go(v, want_array, sp)?;
            match &mut n {
                Node::Doc(m) => Some(Node::Doc(ObjMap {
                    nil: m.nil,
                    entries: std::mem::take(&mut m.entries)
                        .into_iter()
                        .map(|(k, s)| (Cow::Owned(k.into_owned()), own_slot(s)))
                        .collect(),
                })),
                Node::Ary(v) => Some(Node::Ary(
                    std::mem::take(v).into_iter().map(own_slot).collect(),
                )),
                _ => None,
            }
        }
    }
}

impl<'a> Node<'a> {
    /// `tryDoc` / `intoDoc` on a raw node; true if the node now is (or already was) a `partialDoc`.
    pub(crate) fn try_doc(&mut self, sp: &dyn Splitter) -> bool {
        match self {
            Node::Doc(_) => true,
            Node::Raw(raw) => match decode_raw(raw, false, sp) {
                Some(n) => {
                    *self = n;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }

    /// `tryAry` / `intoAry`.
    pub(crate) fn try_ary(&mut self, sp: &dyn Splitter) -> bool {
        match self {
            Node::Ary(_) => true,
            Node::Raw(raw) => match decode_raw(raw, true, sp) {
                Some(n) => {
                    *self = n;
                    true
                }
                None => false,
            },
            _ => false,
        }
    }
}

/// evanphx's `isArray`: the first byte after spaces, newlines and tabs (but not `\r`) is `[`.
fn is_array(raw: &[u8]) -> bool {
    raw.iter()
        .find(|&&c| !matches!(c, b' ' | b'\n' | b'\t'))
        .is_some_and(|&c| c == b'[')
}

fn invalid_index(idx: i64) -> String {
    format!("Unable to access invalid index: {idx}: invalid index referenced")
}

impl ObjMap<'_> {
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_ref().cmp(key))
    }
}

/// `container.get`: `Ok(None)` is Go's nil (missing member or null).
pub(crate) fn get<'n, 'a>(
    con: &'n mut Node<'a>,
    key: &str,
) -> Result<Option<&'n mut Node<'a>>, String> {
    match con {
        Node::Doc(m) => Ok(match m.find(key) {
            Ok(i) => m.entries.get_mut(i).and_then(|(_, s)| s.as_mut()),
            Err(_) => None,
        }),
        Node::Ary(v) => {
            let len = v.len() as i64;
            let mut idx = gostr::atoi(key)?;
            if idx < 0 {
                if idx < -len {
                    return Err(invalid_index(idx));
                }
                idx += len;
            }
            if idx >= len {
                return Err(invalid_index(idx));
            }
            Ok(usize::try_from(idx)
                .ok()
                .and_then(|i| v.get_mut(i))
                .and_then(Option::as_mut))
        }
        Node::Null | Node::Raw(_) => Ok(None),
    }
}

/// `container.add`.
pub(crate) fn add<'a>(con: &mut Node<'a>, key: &str, val: Slot<'a>) -> Result<(), Fault> {
    match con {
        Node::Doc(m) => set_member(m, key, val),
        Node::Ary(v) => {
            if key == "-" {
                v.push(val);
                return Ok(());
            }
            let mut idx = gostr::atoi(key).map_err(|e| {
                Fault::Err(format!("value was not a proper array index: '{key}': {e}"))
            })?;
            let size = v.len() as i64 + 1;
            if idx >= size {
                return Err(Fault::Err(invalid_index(idx)));
            }
            if idx < 0 {
                if idx < -size {
                    return Err(Fault::Err(invalid_index(idx)));
                }
                idx += size;
            }
            let at = usize::try_from(idx).unwrap_or(v.len()).min(v.len());
            v.insert(at, val);
            Ok(())
        }
        Node::Null | Node::Raw(_) => Ok(()),
    }
}

fn set_member<'a>(m: &mut ObjMap<'a>, key: &str, val: Slot<'a>) -> Result<(), Fault> {
    if m.nil {
        return Err(Fault::Panic(NIL_MAP));
    }
    match m.find(key) {
        Ok(i) => {
            if let Some(e) = m.entries.get_mut(i) {
                e.1 = val;
            }
        }
        Err(i) => m.entries.insert(i, (Cow::Owned(key.to_owned()), val)),
    }
    Ok(())
}

/// `container.set` (only called after a successful `get`).
pub(crate) fn set<'a>(con: &mut Node<'a>, key: &str, val: Slot<'a>) -> Result<(), Fault> {
    match con {
        Node::Doc(m) => set_member(m, key, val),
        Node::Ary(v) => {
            let len = v.len() as i64;
            let mut idx = gostr::atoi(key).map_err(Fault::Err)?;
            if idx < 0 {
                if idx < -len {
                    return Err(Fault::Err(invalid_index(idx)));
                }
                idx += len;
            }
            match usize::try_from(idx).ok().and_then(|i| v.get_mut(i)) {
                Some(s) => *s = val,
                None => return Err(Fault::Panic("runtime error: index out of range")),
            }
            Ok(())
        }
        Node::Null | Node::Raw(_) => Ok(()),
    }
}

/// `container.remove`, returning what was removed.
pub(crate) fn remove<'a>(con: &mut Node<'a>, key: &str) -> Result<Slot<'a>, String> {
    match con {
        Node::Doc(m) => match m.find(key) {
            Ok(i) => Ok(m.entries.remove(i).1),
            Err(_) => Err(format!(
                "Unable to remove nonexistent key: {key}: missing value"
            )),
        },
        Node::Ary(v) => {
            let len = v.len() as i64;
            let mut idx = gostr::atoi(key)?;
            if idx >= len {
                return Err(invalid_index(idx));
            }
            if idx < 0 {
                if idx < -len {
                    return Err(invalid_index(idx));
                }
                idx += len;
            }
            let at = usize::try_from(idx).unwrap_or(0);
            if at < v.len() {
                Ok(v.remove(at))
            } else {
                Ok(None)
            }
        }
        Node::Null | Node::Raw(_) => Ok(None),
    }
}

/// evanphx's `findObject`: the container holding the last path segment, and that segment decoded.
/// Walking converts the raw nodes along the way, as Go does.
pub(crate) fn find_object<'n, 'a, 'p>(
    root: &'n mut Node<'a>,
    path: &'p str,
    sp: &dyn Splitter,
) -> Option<(&'n mut Node<'a>, Cow<'p, str>)> {
    let mut segs = path.split('/');
    segs.next();
    let mut last = segs.next()?;
    let mut cur = root;
    for seg in segs {
        let part = std::mem::replace(&mut last, seg);
        let next = get(cur, &gostr::decode_key(part)).ok()??;
        let ok = match next {
            Node::Null => false,
            Node::Doc(_) | Node::Ary(_) => true,
            Node::Raw(raw) => {
                if is_array(raw) {
                    next.try_ary(sp)
                } else {
                    next.try_doc(sp)
                }
            }
        };
        if !ok {
            return None;
        }
        cur = next;
    }
    Some((cur, gostr::decode_key(last)))
}

/// `lazyNode.compact()`: `json.Compact` of the raw bytes (nil for a null value).
fn compacted(n: &Node<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Node::Raw(r) = n {
        gostr::compact(&mut out, r, false);
    }
    out
}

/// `lazyNode.equal`. `n` is the document side, whose conversions persist; `o` the operation's
/// value. Members are compared in key order (Go's map order is random, which only matters when one
/// member would make Go panic and another would make it return false).
pub(crate) fn equal(
    n: &mut Node<'_>,
    o: &mut Node<'_>,
    depth: usize,
    sp: &dyn Splitter,
) -> Result<bool, Fault> {
    if depth > MAX_EQUAL_DEPTH {
        return Err(Fault::Err(format!(
            "test operation: value nested deeper than {MAX_EQUAL_DEPTH} levels"
        )));
    }
    if matches!(n, Node::Null | Node::Raw(_)) && !n.try_doc(sp) && !n.try_ary(sp) {
        if !matches!(o, Node::Null | Node::Raw(_)) {
            return Ok(false);
        }
        return Ok(compacted(n) == compacted(o));
    }
    if let Node::Doc(nm) = n {
        if matches!(o, Node::Null | Node::Raw(_)) && !o.try_doc(sp) {
            return Ok(false);
        }
        let Node::Doc(om) = o else {
            return Ok(false);
        };
        if nm.entries.len() != om.entries.len() {
            return Ok(false);
        }
        for (k, v) in nm.entries.iter_mut() {
            let Ok(i) = om.find(k) else {
                return Ok(false);
            };
            let Some((_, ov)) = om.entries.get_mut(i) else {
                return Ok(false);
            };
            match (v, ov) {
                (None, None) => {}
                (Some(v), Some(ov)) => {
                    if !equal(v, ov, depth + 1, sp)? {
                        return Ok(false);
                    }
                }
                _ => return Ok(false),
            }
        }
        return Ok(true);
    }
    let Node::Ary(na) = n else {
        return Ok(false);
    };
    if !o.try_ary(sp) {
        return Ok(false);
    }
    let Node::Ary(oa) = o else {
        return Ok(false);
    };
    if na.len() != oa.len() {
        return Ok(false);
    }
    for (v, ov) in na.iter_mut().zip(oa.iter_mut()) {
        match (v, ov) {
            (Some(v), Some(ov)) => {
                if !equal(v, ov, depth + 1, sp)? {
                    return Ok(false);
                }
            }
            _ => return Err(Fault::Panic(NIL_DEREF)),
        }
    }
    Ok(true)
}

enum Frame<'n, 'a> {
    Obj(std::slice::Iter<'n, (Cow<'a, str>, Slot<'a>)>, bool),
    Ary(std::slice::Iter<'n, Slot<'a>>, bool),
}

/// `json.Marshal` of a node, appended to `out` (iterative, any depth).
pub(crate) fn marshal(root: Option<&Node<'_>>, out: &mut Vec<u8>) {
    let mut stack: Vec<Frame<'_, '_>> = Vec::new();
    let mut pending = Some(root);
    loop {
        if let Some(slot) = pending.take() {
            match slot {
                None | Some(Node::Null) => out.extend_from_slice(b"null"),
                Some(Node::Raw(r)) => gostr::compact(out, r, true),
                Some(Node::Doc(m)) if m.nil => out.extend_from_slice(b"null"),
                Some(Node::Doc(m)) => {
                    out.push(b'{');
                    stack.push(Frame::Obj(m.entries.iter(), true));
                }
                Some(Node::Ary(v)) => {
                    out.push(b'[');
                    stack.push(Frame::Ary(v.iter(), true));
                }
            }
        }
        let Some(top) = stack.last_mut() else {
            return;
        };
        match top {
            Frame::Obj(it, first) => match it.next() {
                Some((k, v)) => {
                    if !std::mem::replace(first, false) {
                        out.push(b',');
                    }
                    gostr::append_string(out, k);
                    out.push(b':');
                    pending = Some(v.as_ref());
                }
                None => {
                    out.push(b'}');
                    stack.pop();
                }
            },
            Frame::Ary(it, first) => match it.next() {
                Some(v) => {
                    if !std::mem::replace(first, false) {
                        out.push(b',');
                    }
                    pending = Some(v.as_ref());
                }
                None => {
                    out.push(b']');
                    stack.pop();
                }
            },
        }
    }
}

//! Server-side apply as kube-apiserver's field manager does it, before admission: the object a
//! `PATCH` of type `application/apply-patch+yaml` produces from the stored object and the apply
//! configuration, and the `managedFields` it carries.
//!
//! The semantics are structured-merge-diff's (`merge.Updater`): [`fieldpath`] has its field sets
//! and their `FieldsV1` form, [`typed`] its walks over an object and a schema ([`TypeModel`]),
//! [`updater`] its apply and update over managers. [`apply`] and [`update`] add what the
//! apiserver's field manager adds around them for a built-in kind ([`GoModel`]): managers
//! identified as the apiserver identifies them, the system fields of `metadata` never owned, the
//! reset fields ignored, times, the entries encoded and sorted, and conflicts worded as the
//! apiserver words them. No IO, no clock: the time of an entry is an input.

pub mod crd;
pub mod fieldpath;
pub mod go;
pub mod scale;
pub mod typed;
pub mod updater;

use std::collections::BTreeMap;

use serde_json::{Map, Value};

pub use crd::{CrdModel, CrdSchemaError, CrdType};
pub use fieldpath::{FieldsV1Error, Path, PathElement, Set};
pub use go::{GoModel, GoType};
pub use typed::{Atom, ListRelationship, TypeModel};
pub use updater::{Conflict, Conflicts, Managers, Updater, UpdaterError, VersionedSet};

use crate::schema::{Schema, TypeId, codec};

/// `operation` of a `managedFields` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Fields set by server-side apply.
    Apply,
    /// Fields set by any other write.
    Update,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedFieldsEntry {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion`.
    pub api_version: String,
    /// `time`, RFC 3339 as the apiserver writes it.
    pub time: Option<String>,
    /// `fieldsV1` (`fieldsType` is `FieldsV1`).
    pub fields: Set,
    /// `subresource`.
    pub subresource: String,
}

impl ManagedFieldsEntry {
    /// The entry as JSON, members in the Go type's order.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert("operation".into(), self.operation.as_str().into());
        m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        if let Some(t) = &self.time {
            m.insert("time".into(), Value::String(t.clone()));
        }
        m.insert("fieldsType".into(), "FieldsV1".into());
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(m)
    }

    /// The entry as Go encodes it: members in the Go type's order, `fieldsV1` in upstream's
    /// order (which [`ManagedFieldsEntry::to_value`] cannot keep), strings escaped as Go escapes
    /// them.
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(128);
        if !self.manager.is_empty() {
            push_member(&mut out, "manager", &self.manager);
        }
        push_member(&mut out, "operation", self.operation.as_str());
        if !self.api_version.is_empty() {
            push_member(&mut out, "apiVersion", &self.api_version);
        }
        if let Some(t) = &self.time {
            push_member(&mut out, "time", t);
        }
        push_member(&mut out, "fieldsType", "FieldsV1");
        out.extend_from_slice(b",\"fieldsV1\":");
        out.extend_from_slice(self.fields.to_fields_v1_string().as_bytes());
        if !self.subresource.is_empty() {
            push_member(&mut out, "subresource", &self.subresource);
        }
        out.push(b'}');
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The identifier the apiserver keys the entry by (`BuildManagerIdentifier`): manager,
    /// operation, the API version of an update, the subresource.
    fn identifier(&self) -> String {
        let mut out = Vec::with_capacity(64);
        // The members of Go's ManagedFieldsEntry in its order, empty ones left out.
        if !self.manager.is_empty() {
            push_member(&mut out, "manager", &self.manager);
        }
        push_member(&mut out, "operation", self.operation.as_str());
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            push_member(&mut out, "apiVersion", &self.api_version);
        }
        if !self.subresource.is_empty() {
            push_member(&mut out, "subresource", &self.subresource);
        }
        out.push(b'}');
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The manager as the apiserver names it in a conflict (`printManager`).
    fn describe(&self) -> String {
        let mut s = crate::gofmt::quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                crate::gofmt::quote(&self.subresource)
            );
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// Appends `"name":"value"` to a JSON object being written, opening it first.
fn push_member(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(if out.is_empty() { b'{' } else { b',' });
    out.extend_from_slice(format!("\"{name}\":").as_bytes());
    crate::jsonpatch::gostr::append_string(out, value);
}

/// `metadata.managedFields`: the entries in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedFields(pub Vec<ManagedFieldsEntry>);

impl ManagedFields {
    /// The entries of an object's `metadata.managedFields` (none when absent).
    pub fn from_object(object: &Value) -> Result<ManagedFields, ApplyError> {
        match object.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => Ok(ManagedFields::default()),
            Some(v) => ManagedFields::from_value(v),
        }
    }

    /// Reads a `managedFields` list as the apiserver decodes it, with its messages (a `fieldsV1`
    /// that cannot be read is reported without upstream's dump of the Go entry).
    pub fn from_value(v: &Value) -> Result<ManagedFields, ApplyError> {
        let bad = |msg: String| ApplyError::ManagedFields(msg);
        let Value::Array(items) = v else {
            return Err(bad("managedFields must be a list".into()));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
            let operation = match s("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err(bad("operation must be `Apply` or `Update`".into())),
            };
            if s("apiVersion").is_empty() {
                return Err(bad("apiVersion must not be empty".into()));
            }
            match s("fieldsType") {
                "FieldsV1" => {}
                "" => {
                    return Err(bad(format!(
                        "missing fieldsType in managed fields entry {i}"
                    )));
                }
                other => {
                    return Err(bad(format!(
                        "invalid fieldsType {} in managed fields entry {i}",
                        crate::gofmt::quote(other)
                    )));
                }
            }
            let fields = match item.get("fieldsV1") {
                None | Some(Value::Null) => Set::new(),
                Some(f) => Set::from_fields_v1(f).map_err(|e| {
                    let inner = match e {
                        FieldsV1Error::NotAnObject => fieldpath::read_map_error(f),
                        _ => None,
                    }
                    .unwrap_or_else(|| e.to_string());
                    bad(format!(
                        "error decoding versioned set from {}: error decoding set: {inner}",
                        go_entry(item)
                    ))
                })?,
            };
            out.push(ManagedFieldsEntry {
                manager: s("manager").into(),
                operation,
                api_version: s("apiVersion").into(),
                time: item.get("time").and_then(Value::as_str).map(Into::into),
                fields,
                subresource: s("subresource").into(),
            });
        }
        Ok(ManagedFields(out))
    }

    /// The entries as Go encodes the list (see [`ManagedFieldsEntry::to_json`]).
    pub fn to_json(&self) -> String {
        let entries: Vec<String> = self.0.iter().map(ManagedFieldsEntry::to_json).collect();
        format!("[{}]", entries.join(","))
    }

    /// The entries as a JSON list.
    pub fn to_value(&self) -> Value {
        Value::Array(self.0.iter().map(ManagedFieldsEntry::to_value).collect())
    }

    /// The entry of the manager's apply, if any.
    pub fn applier(&self, manager: &str) -> Option<&ManagedFieldsEntry> {
        self.0
            .iter()
            .find(|e| e.manager == manager && e.operation == Operation::Apply)
    }
}

/// A managed fields entry as Go's `%v` prints the struct in upstream's decoding error:
/// `{manager operation apiVersion time fieldsType fieldsV1 subresource}`, the time as
/// `time.Time.String` (`2026-11-26 22:19:28 +0000 UTC`, `<nil>` when absent) and `fieldsV1` as
/// its JSON text.
fn go_entry(item: &Value) -> String {
    let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
    let time = match item.get("time").and_then(Value::as_str) {
        None => "<nil>".to_string(),
        Some(t) => go_time(t),
    };
    let fields = item
        .get("fieldsV1")
        .map(|f| serde_json::to_string(f).unwrap_or_default())
        .unwrap_or_else(|| "nil".into());
    format!(
        "{{{} {} {} {time} {} {fields} {}}}",
        s("manager"),
        s("operation"),
        s("apiVersion"),
        s("fieldsType"),
        s("subresource")
    )
}

/// An RFC 3339 time as Go's `time.Time.String` prints it once decoded: `2006-01-02 15:04:05`,
/// the fraction without trailing zeros, then `+0000 UTC` for `Z` or the offset twice for a
/// fixed zone (`+0100 +0100`). Text that is not such a time is left as it stands.
fn go_time(t: &str) -> String {
    let Some((date, rest)) = t.split_once('T') else {
        return t.to_string();
    };
    let (clock, zone) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => return t.to_string(),
    };
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let frac = frac.trim_end_matches('0');
    let frac = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    let zone = match zone {
        "Z" | "z" => "+0000 UTC".to_string(),
        z => {
            let offset = z.replace(':', "");
            format!("{offset} {offset}")
        }
    };
    format!("{date} {hms}{frac} {zone}")
}

/// Why an apply or update is refused, in the apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// 409 Conflict: fields other managers own would change (`Apply failed with N conflicts:
    /// ...`); each cause is the manager (`conflict with "kubectl" using apps/v1`) and the field.
    #[error("{message}")]
    Conflict {
        /// The status message.
        message: String,
        /// `(message, field)` of each `FieldManagerConflict` cause.
        causes: Vec<(String, String)>,
    },
    /// 400 Bad Request: the apply configuration is not one the apiserver takes.
    #[error("{0}")]
    BadRequest(String),
    /// The object's `managedFields` cannot be decoded (an apply fails with it).
    #[error("failed to decode managed fields: {0}")]
    ManagedFields(String),
    /// An object does not fit its type (Go's decoding error, or structured-merge-diff's, as
    /// `failed to create typed patch object (ns/name; apps/v1, Kind=Deployment): .spec.foo:
    /// field not declared in schema`, which the apiserver returns as a 500).
    #[error("{0}")]
    Invalid(String),
}

impl ApplyError {
    /// The `Status` the apiserver answers with: 409 `Conflict` with one `FieldManagerConflict`
    /// cause per field, 400 `BadRequest`, or a 500 without a reason for the rest (errors the
    /// field manager returns unwrapped).
    pub fn status(&self) -> crate::api::meta::Status {
        use crate::api::meta::{Status, StatusCause, StatusDetails};
        let (code, reason, details) = match self {
            ApplyError::Conflict { causes, .. } => (
                409,
                "Conflict",
                Some(StatusDetails {
                    causes: causes
                        .iter()
                        .map(|(message, field)| StatusCause {
                            cause_type: "FieldManagerConflict".into(),
                            message: message.clone(),
                            field: field.clone(),
                        })
                        .collect(),
                    ..Default::default()
                }),
            ),
            ApplyError::BadRequest(_) => (400, "BadRequest", None),
            ApplyError::ManagedFields(_) | ApplyError::Invalid(_) => (500, "", None),
        };
        Status {
            status: "Failure".into(),
            message: self.to_string(),
            reason: reason.into(),
            details,
            code,
        }
    }
}

/// What one write is: who makes it, at which API version, when.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The field manager (`fieldManager`, or what the apiserver derives from the user agent).
    pub manager: &'a str,
    /// The object's `apiVersion` as the request names it (`apps/v1`).
    pub api_version: &'a str,
    /// The object's kind (`Deployment`).
    pub kind: &'a str,
    /// The time the entry records, RFC 3339 at second precision (`2024-05-01T10:00:00Z`).
    pub time: &'a str,
    /// `force` (apply only).
    pub force: bool,
    /// The subresource written, empty for the resource itself.
    pub subresource: &'a str,
    /// The fields the resource's strategy resets and nobody owns (`status` for most resources
    /// with a status subresource), as a set of the resource's paths.
    pub reset_fields: Option<&'a Set>,
}

/// The fields of `metadata` the field manager strips before it records what a manager owns
/// (`managedfields/internal/stripmeta.go`).
pub const SYSTEM_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// The fields of `metadata` the apiserver never records as owned, and `apiVersion`, `kind`.
fn strip_set() -> Set {
    let mut s = Set::new();
    for p in [&["apiVersion"][..], &["kind"], &["metadata"]] {
        s.insert(&p.iter().map(|n| PathElement::field(n)).collect::<Vec<_>>());
    }
    for name in SYSTEM_METADATA {
        s.insert(&[PathElement::field("metadata"), PathElement::field(name)]);
    }
    s
}

/// The field manager's bookkeeping: managers by identifier, and the entry each identifier
/// stands for (its manager, operation, subresource and time).
struct Decoded {
    managers: Managers,
    entries: BTreeMap<String, ManagedFieldsEntry>,
}

/// The managers of `managed`, and the identifier of the request's manager (known from then on).
fn decode(managed: &ManagedFields, req: &Request<'_>, operation: Operation) -> (Decoded, String) {
    let mut d = Decoded {
        managers: Managers::new(),
        entries: BTreeMap::new(),
    };
    for e in &managed.0 {
        d.add(e.clone(), e.fields.clone(), e.operation == Operation::Apply);
    }
    let me = ManagedFieldsEntry {
        manager: req.manager.into(),
        operation,
        api_version: req.api_version.into(),
        time: None,
        fields: Set::new(),
        subresource: req.subresource.into(),
    };
    let my_id = me.identifier();
    d.entries.entry(my_id.clone()).or_insert(me);
    (d, my_id)
}

impl Decoded {
    fn add(&mut self, entry: ManagedFieldsEntry, set: Set, applied: bool) -> String {
        let id = entry.identifier();
        self.managers.insert(
            id.clone(),
            VersionedSet {
                set,
                api_version: entry.api_version.clone(),
                applied,
            },
        );
        self.entries.insert(id.clone(), entry);
        id
    }

    fn time(&self, id: &str) -> i64 {
        seconds(self.entries.get(id).and_then(|e| e.time.as_deref()))
    }

    fn set_time(&mut self, id: &str, time: &str) {
        if let Some(e) = self.entries.get_mut(id) {
            e.time = Some(time.into());
        }
    }

    /// The field manager's `stripMetaManager`: the request's manager never owns `apiVersion`,
    /// `kind` or the system fields of `metadata`.
    fn strip(&mut self, id: &str) {
        if let Some(vs) = self.managers.get_mut(id) {
            vs.set = vs.set.difference(&strip_set());
            if vs.set.is_empty() {
                self.managers.remove(id);
            }
        }
    }

    /// The field manager's `capManagersManager`: beyond ten update entries, the oldest are merged
    /// into one `ancient-changes` entry per API version.
    fn cap_updaters(&mut self) {
        const MAX_UPDATERS: usize = 10;
        let mut updaters: Vec<String> = self
            .managers
            .iter()
            .filter(|(_, vs)| !vs.applied)
            .map(|(id, _)| id.clone())
            .collect();
        if updaters.len() <= MAX_UPDATERS {
            return;
        }
        updaters.sort_by(|a, b| self.time(a).cmp(&self.time(b)).then_with(|| a.cmp(b)));
        let mut first_of_version: BTreeMap<String, String> = BTreeMap::new();
        let mut length = updaters.len();
        for id in &updaters {
            if length <= MAX_UPDATERS {
                break;
            }
            let Some(vs) = self.managers.get(id).cloned() else {
                continue;
            };
            let time = self.entries.get(id).and_then(|e| e.time.clone());
            let bucket = ManagedFieldsEntry {
                manager: "ancient-changes".into(),
                operation: Operation::Update,
                api_version: vs.api_version.clone(),
                time: None,
                fields: Set::new(),
                subresource: String::new(),
            };
            let bucket_id = bucket.identifier();
            match first_of_version.get(&vs.api_version) {
                Some(first) => {
                    if !self.managers.contains_key(&bucket_id) {
                        let moved = self.managers.remove(first).map_or_else(Set::new, |f| f.set);
                        self.add(bucket, moved, false);
                    }
                    let merged = self
                        .managers
                        .get(&bucket_id)
                        .map_or_else(|| vs.set.clone(), |b| vs.set.union(&b.set));
                    self.managers.insert(
                        bucket_id.clone(),
                        VersionedSet {
                            set: merged,
                            ..vs.clone()
                        },
                    );
                    self.managers.remove(id);
                    length -= 1;
                    if let Some(e) = self.entries.get_mut(&bucket_id) {
                        e.time = time;
                    }
                }
                None => {
                    first_of_version.insert(vs.api_version.clone(), id.clone());
                }
            }
        }
    }

    /// The entries the apiserver writes back (`encodeManagedFields`), sorted by operation, time,
    /// manager, API version and subresource.
    fn encode(&self) -> ManagedFields {
        let mut out = Vec::with_capacity(self.managers.len());
        for (id, vs) in &self.managers {
            let Some(base) = self.entries.get(id) else {
                continue;
            };
            let mut e = base.clone();
            e.api_version = vs.api_version.clone();
            e.operation = if vs.applied {
                Operation::Apply
            } else {
                Operation::Update
            };
            e.fields = vs.set.clone();
            out.push(e);
        }
        sort_encoded(&mut out);
        ManagedFields(out)
    }
}

/// Sorts entries as the apiserver writes them (`sortEncodedManagedFields`): by operation, time,
/// manager, API version and subresource.
fn sort_encoded(entries: &mut [ManagedFieldsEntry]) {
    entries.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| seconds(p.time.as_deref()).cmp(&seconds(q.time.as_deref())))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
}

/// Seconds since the epoch of an RFC 3339 time (0 when absent or unreadable), for ordering.
fn seconds(t: Option<&str>) -> i64 {
    let Some(t) = t else { return 0 };
    let num = |s: &str| s.parse::<i64>().ok();
    let parse = || -> Option<i64> {
        let (date, rest) = t.split_once('T')?;
        // RFC 3339's four-digit years keep the arithmetic below far from overflow.
        if date.len() != 10 {
            return None;
        }
        let mut d = date.splitn(3, '-');
        let (y, m, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
        let clock = rest.get(..8)?;
        let mut c = clock.splitn(3, ':');
        let (h, mi, s) = (num(c.next()?)?, num(c.next()?)?, num(c.next()?)?);
        let zone = rest
            .get(8..)?
            .trim_start_matches(|ch: char| ch == '.' || ch.is_ascii_digit());
        let offset = match zone {
            "Z" | "" => 0,
            z if z.len() == 6 => {
                let sign = if z.starts_with('-') { -1 } else { 1 };
                let (zh, zm) = z.get(1..)?.split_once(':')?;
                sign * (num(zh)? * 3600 + num(zm)? * 60)
            }
            _ => return None,
        };
        // Days from the civil date (proleptic Gregorian).
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(days * 86_400 + h * 3600 + mi * 60 + s - offset)
    };
    parse().unwrap_or(0)
}

fn conflict_error(conflicts: &Conflicts, d: &Decoded) -> ApplyError {
    let describe = |id: &str| {
        d.entries
            .get(id)
            .map(ManagedFieldsEntry::describe)
            .unwrap_or_else(|| crate::gofmt::quote(id))
    };
    let causes = conflicts
        .0
        .iter()
        .map(|c| {
            (
                format!("conflict with {}", describe(&c.manager)),
                c.path.to_string(),
            )
        })
        .collect();
    let message = if let [c] = conflicts.0.as_slice() {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            describe(&c.manager),
            c.path
        )
    } else {
        // Grouped by manager identifier, sorted, as upstream groups them.
        let mut lines = Vec::new();
        for (id, paths) in conflicts.by_manager() {
            lines.push(format!("conflicts with {}:", describe(id)));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.0.len(),
            lines.join("\n")
        )
    };
    ApplyError::Conflict { message, causes }
}

fn updater<'s, M: TypeModel>(
    model: &'s M,
    ty: M::Type,
    release: crate::version::KubeVersion,
    req: &Request<'_>,
) -> Updater<'s, M> {
    Updater {
        model,
        ty,
        ignored: req.reset_fields.cloned(),
        // Kubernetes 1.28 vendors structured-merge-diff v4.2.
        noop_by_comparison: release.minor() < 29,
    }
}

fn updater_error(e: UpdaterError, d: &Decoded) -> ApplyError {
    match e {
        UpdaterError::Conflicts(c) => conflict_error(&c, d),
        UpdaterError::Invalid(e) => ApplyError::Invalid(e.0),
    }
}

/// The object as the apiserver holds it (decoded into its Go type), without `managedFields`.
fn typed_object(schema: &Schema, id: TypeId, object: Option<&Value>) -> Result<Value, ApplyError> {
    let mut v = codec::normalize(schema, id, object.unwrap_or(&Value::Null))
        .map_err(|e| ApplyError::Invalid(e.0))?
        .0;
    if let Some(Value::Object(meta)) = v.get_mut("metadata") {
        meta.remove("managedFields");
    }
    Ok(v)
}

fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

fn with_managed_fields(mut object: Value, managed: &ManagedFields) -> Value {
    if let Some(meta) = metadata_mut(&mut object) {
        if managed.0.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), managed.to_value());
        }
    }
    object
}

/// `group/version, Kind=kind`, as Go prints a `GroupVersionKind`.
fn gvk_string(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((group, version)) if !version.contains('/') => {
            format!("{group}/{version}, Kind={kind}")
        }
        Some(_) => "/, Kind=".into(),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

/// The fields of the live object's client-side apply annotation that still hold the values it
/// records (`allowedConflictsFromLastApplied`); None when there is no usable annotation.
fn client_side_applied<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    live: &Value,
    api_version: &str,
) -> Option<Set> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()
        .filter(|t| !t.is_empty())?;
    let last: Value = crate::json::from_str(text).ok()?;
    if last
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        != api_version
    {
        return None;
    }
    typed::validate(model, ty, &last).ok()?;
    let set = typed::to_field_set(model, ty, &last).ok()?;
    let changed = typed::compare(model, ty, &last, live).ok()?;
    Some(
        set.difference(&changed.modified)
            .difference(&changed.added)
            .difference(&changed.removed),
    )
}

/// `kubectl.kubernetes.io/last-applied-configuration`.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The field manager's `lastAppliedUpdater`: an apply by `kubectl` to an object that carries a
/// client-side apply annotation rewrites the annotation to the applied configuration (without
/// the annotation, encoded as Go encodes it, newline-terminated), unless the annotations would
/// then exceed their size limit, in which case it is dropped.
fn sync_last_applied(object: &mut Value, config: &Value, manager: &str) {
    const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
    let has = object
        .pointer(&format!(
            "/metadata/annotations/{}",
            LAST_APPLIED.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if manager != "kubectl" || !has {
        return;
    }
    let mut applied = config.clone();
    if let Some(Value::Object(annotations)) = applied.pointer_mut("/metadata/annotations") {
        annotations.remove(LAST_APPLIED);
    }
    let mut text = crate::jsonpatch::go_marshal(&applied);
    text.push(b'\n');
    let text = String::from_utf8_lossy(&text).into_owned();
    let Some(Value::Object(annotations)) = object.pointer_mut("/metadata/annotations") else {
        return;
    };
    annotations.insert(LAST_APPLIED.into(), Value::String(text));
    let size: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        annotations.remove(LAST_APPLIED);
    }
}

/// Server-side apply of `config` by `req.manager` to `live` (None when the apply creates the
/// object) of the built-in kind `id`: the object the admission webhooks receive, with its
/// `managedFields`, and those entries. `managed` are the live object's entries.
///
/// As the apiserver's field manager: the configuration must name the request's kind and version;
/// the merged object is decoded into its Go type and defaulted; an apply that changes nothing
/// returns the live object (with the entries updated, the applier's time unchanged); `kubectl`
/// keeps a client-side apply annotation in step.
pub fn apply(
    schema: &Schema,
    id: TypeId,
    live: Option<&Value>,
    config: &Value,
    req: &Request<'_>,
    managed: &ManagedFields,
) -> Result<(Value, ManagedFields), ApplyError> {
    let model = GoModel(schema);
    let ty = GoType::Struct(id);
    check_config(&model, &ty, config, req)?;
    let live = typed_object(schema, id, live)?;
    let (merged, live, d) = merge(&model, ty, schema.release(), live, config, req, managed)?;
    let mut object = match merged {
        Some(new) => {
            let (mut v, _) =
                codec::normalize(schema, id, &new).map_err(|e| ApplyError::Invalid(e.0))?;
            let before = v.clone();
            let (group, version) = req
                .api_version
                .split_once('/')
                .unwrap_or(("", req.api_version));
            crate::defaulting::default_object(group, version, req.kind, &mut v, schema.release());
            if v != before {
                v = codec::normalize(schema, id, &v)
                    .map_err(|e| ApplyError::Invalid(e.0))?
                    .0;
            }
            v
        }
        None => live,
    };
    sync_last_applied(&mut object, config, req.manager);
    let managed = d.encode();
    Ok((with_managed_fields(object, &managed), managed))
}

/// Server-side apply of `config` by `req.manager` to `live` (None when the apply creates it), a
/// custom resource whose schema is `model` (its CustomResourceDefinition's, for the version
/// applied): as [`apply`] but for an object the apiserver holds unstructured, which is not
/// decoded into a Go type, and is defaulted by the schema's `default`s rather than by a scheme.
/// `release` is the Kubernetes release modelled.
pub fn apply_custom(
    model: &CrdModel<'_>,
    release: crate::version::KubeVersion,
    live: Option<&Value>,
    config: &Value,
    req: &Request<'_>,
    managed: &ManagedFields,
) -> Result<(Value, ManagedFields), ApplyError> {
    let ty = model.root();
    check_config(model, &ty, config, req)?;
    let mut live = live.cloned().unwrap_or_else(|| {
        // The apply that creates starts from a new object of the kind (`creater.New`).
        let mut m = Map::new();
        m.insert("apiVersion".into(), Value::String(req.api_version.into()));
        m.insert("kind".into(), Value::String(req.kind.into()));
        Value::Object(m)
    });
    if let Some(Value::Object(meta)) = live.get_mut("metadata") {
        meta.remove("managedFields");
    }
    let (merged, live, d) = merge(model, ty, release, live, config, req, managed)?;
    let mut object = match merged {
        Some(mut new) => {
            model.default_object(&mut new);
            new
        }
        None => live,
    };
    sync_last_applied(&mut object, config, req.manager);
    let managed = d.encode();
    Ok((with_managed_fields(object, &managed), managed))
}

/// What the field manager checks of an apply configuration before it merges it: the kind and
/// version the request names, no `managedFields`, and that it fits the schema.
fn check_config<M: TypeModel>(
    model: &M,
    ty: &M::Type,
    config: &Value,
    req: &Request<'_>,
) -> Result<(), ApplyError> {
    let text = |k: &str| config.get(k).and_then(Value::as_str).unwrap_or_default();
    let (patch_version, patch_kind) = (text("apiVersion"), text("kind"));
    if gvk_string(patch_version, patch_kind) != gvk_string(req.api_version, req.kind) {
        return Err(ApplyError::BadRequest(format!(
            "invalid object type: {}",
            gvk_string(patch_version, patch_kind)
        )));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    typed::validate(model, ty, config).map_err(|e| {
        let meta = |k: &str| {
            config
                .pointer(&format!("/metadata/{k}"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        ApplyError::Invalid(format!(
            "failed to create typed patch object ({}/{}; {}): {e}",
            meta("namespace"),
            meta("name"),
            gvk_string(patch_version, patch_kind)
        ))
    })
}

/// The field manager's apply over `model`: the merged object (None when nothing changed), the
/// live object it started from, and the managers afterwards (the applier's time set when the
/// object changed). Conflicts fail it, except those `kubectl` may take over from its
/// client-side apply annotation.
fn merge<M: TypeModel>(
    model: &M,
    ty: M::Type,
    release: crate::version::KubeVersion,
    live: Value,
    config: &Value,
    req: &Request<'_>,
    managed: &ManagedFields,
) -> Result<(Option<Value>, Value, Decoded), ApplyError> {
    let (mut d, my_id) = decode(managed, req, Operation::Apply);
    let updater = updater(model, ty.clone(), release, req);
    let mut managers = d.managers.clone();
    let result = match updater.apply(
        &live,
        config,
        req.api_version,
        &mut managers,
        &my_id,
        req.force,
    ) {
        Err(UpdaterError::Conflicts(conflicts)) if req.manager == "kubectl" => {
            // The field manager's lastAppliedManager: kubectl moving from client-side apply
            // may take the fields its client-side annotation still describes.
            let allowed = client_side_applied(model, &ty, &live, req.api_version);
            let remaining = Conflicts(
                conflicts
                    .0
                    .iter()
                    .filter(|c| !allowed.as_ref().is_some_and(|a| a.has(&c.path.0)))
                    .cloned()
                    .collect(),
            );
            if !remaining.0.is_empty() {
                return Err(conflict_error(&remaining, &d));
            }
            managers = d.managers.clone();
            updater.apply(&live, config, req.api_version, &mut managers, &my_id, true)
        }
        other => other,
    }
    .map_err(|e| updater_error(e, &d))?;
    d.managers = managers;
    d.strip(&my_id);
    if result.is_some() {
        d.set_time(&my_id, req.time);
    }
    Ok((result, live, d))
}

/// An update (create, update, non-apply patch) of the object from `live` (None on create) to
/// `new` by `req.manager`, as the field manager records it: the fields that changed become the
/// manager's `Update` entry at `req.api_version`, other managers lose them, and beyond ten update
/// entries the oldest are merged into `ancient-changes`. An update of an existing object (one
/// with a `metadata.uid`) that has no entries is not tracked, as upstream. `managed` are the
/// entries in force ([`ManagedFields::for_update`]). Returns `new` with its `managedFields`, and
/// those entries.
pub fn update(
    schema: &Schema,
    id: TypeId,
    live: Option<&Value>,
    new: &Value,
    req: &Request<'_>,
    managed: &ManagedFields,
) -> Result<(Value, ManagedFields), ApplyError> {
    const CURRENT: &str = "current-operation";
    let existing = live
        .and_then(|l| l.pointer("/metadata/uid"))
        .and_then(Value::as_str)
        .is_some_and(|uid| !uid.is_empty());
    let new = typed_object(schema, id, Some(new))?;
    if managed.0.is_empty() && existing {
        return Ok((new, ManagedFields::default()));
    }
    let model = GoModel(schema);
    let live = typed_object(schema, id, live)?;
    let (mut d, my_id) = decode(managed, req, Operation::Update);
    updater(&model, GoType::Struct(id), schema.release(), req)
        .update(&live, &new, req.api_version, &mut d.managers, CURRENT)
        .map_err(|e| updater_error(e, &d))?;
    if let Some(vs) = d.managers.remove(CURRENT) {
        let merged = match d.managers.remove(&my_id) {
            Some(previous) => VersionedSet {
                set: vs.set.union(&previous.set),
                ..vs
            },
            None => vs,
        };
        d.managers.insert(my_id.clone(), merged);
        d.set_time(&my_id, req.time);
    }
    d.strip(&my_id);
    d.cap_updaters();
    let managed = d.encode();
    Ok((with_managed_fields(new, &managed), managed))
}

impl ManagedFields {
    /// The entries an update starts from (`decodeLiveOrNew`): those the new object carries,
    /// unless it carries none (or they cannot be read), then the live object's; an empty list or
    /// a single empty entry in the new object resets them. A subresource always starts from the
    /// live object's.
    pub fn for_update(
        live: Option<&Value>,
        new: &Value,
        subresource: &str,
    ) -> Result<ManagedFields, ApplyError> {
        // An error here makes the apiserver leave the new object's entries as they are.
        let from_live = || live.map_or(Ok(ManagedFields::default()), ManagedFields::from_object);
        if !subresource.is_empty() {
            return from_live();
        }
        match new.pointer("/metadata/managedFields") {
            Some(Value::Array(items))
                if items.is_empty()
                    || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty)) =>
            {
                return Ok(ManagedFields::default());
            }
            _ => {}
        }
        match ManagedFields::from_object(new) {
            Ok(m) if !m.0.is_empty() => Ok(m),
            _ => from_live(),
        }
    }
}

#[cfg(test)]
mod tests;

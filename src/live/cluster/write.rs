//! `:apply` of live mode: what a write sends so that it changes only what the user changed, for
//! every admission configuration kind `live` watches (the webhook configurations, the
//! ValidatingAdmissionPolicies and MutatingAdmissionPolicies and their bindings), each in the
//! API version the edit names.
//!
//! The user's change is the comparison of the edit with the cluster's version it was made on
//! (structured-merge-diff's `Compare` over the kind's schema, [`crate::apply::typed::compare`]):
//!
//! * fields changed or added go in a server-side apply configuration that holds only them, what
//!   identifies them (the name, the keys of list items such as each webhook's `name`), and the
//!   fields `hookscope` already owns (an apply configuration is its manager's whole intent: a
//!   field it owned and leaves out would be removed). After the apply, `hookscope` owns those
//!   fields and no other; a field another manager owns makes the apply fail with `409 Conflict`
//!   naming that manager and the field, unless forced;
//! * fields removed go in a JSON patch (`application/json-patch+json`, an update): a `test` of
//!   each field's value in the version edited, then its `remove`, so a field the cluster changed
//!   meanwhile is not removed (the apiserver refuses the whole patch). Server-side apply cannot
//!   remove a field another manager owns; an update removes it from every manager's set.
//!
//! The patch goes first, then the apply; a dry run sends both with `dryRun=All` and shows the
//! apply's answer with the removals made on it.

use serde_json::{Map, Value, json};

use super::failure::{RbacAdvice, api_code, describe};
use super::{AdmissionKind, Cluster, GroupVersion, WriteError};
use crate::api::WebhookConfiguration;
use crate::apply::fieldpath::values_equal;
use crate::apply::{GoModel, GoType, ManagedFields, Path, PathElement, Set, typed};

/// The field manager of hookscope's writes.
pub const FIELD_MANAGER: &str = "hookscope";

/// A configuration as the user edited it, and the cluster's version the edit was made on.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    /// A webhook configuration's kind, or a policy's or binding's.
    pub kind: AdmissionKind,
    /// `metadata.name`.
    pub name: String,
    /// `admissionregistration.k8s.io/v1` (or `v1beta1`, `v1alpha1`): the version read and
    /// written.
    pub api_version: String,
    /// The cluster's version the edit was made on; None for a configuration that does not come
    /// from the cluster (a file): it is then compared with the cluster's current version, and
    /// nothing is removed.
    pub base: Option<Value>,
    /// The edited object.
    pub ours: Value,
}

impl Edit {
    /// An edit of a configuration without a version it was made on (see [`Edit::base`]): the
    /// object of `configuration` as written (name, labels, annotations, webhooks).
    pub fn from_configuration(configuration: &WebhookConfiguration) -> Edit {
        let mut metadata = json!({"name": configuration.name});
        for key in ["labels", "annotations"] {
            if let Some(value) = configuration.metadata.get(key).filter(|v| v.is_object()) {
                metadata[key] = value.clone();
            }
        }
        Edit {
            kind: configuration.kind.into(),
            name: configuration.name.clone(),
            api_version: configuration.api_version.clone(),
            base: None,
            ours: json!({
                "apiVersion": configuration.api_version,
                "kind": configuration.kind.configuration_kind(),
                "metadata": metadata,
                "webhooks": configuration.webhooks,
            }),
        }
    }

    /// An edit of the admission configuration `document` (a webhook configuration, a policy or
    /// a binding, as written) made on `base`, the cluster's version (None: see [`Edit::base`]).
    /// None when the document is not of an admission configuration kind of
    /// `admissionregistration.k8s.io`.
    pub fn from_document(document: &Value, base: Option<Value>) -> Option<Edit> {
        let kind = document.get("kind").and_then(Value::as_str)?;
        let kind = AdmissionKind::ALL.into_iter().find(|k| k.kind() == kind)?;
        let api_version = document.get("apiVersion").and_then(Value::as_str)?;
        let (group, _) = api_version.split_once('/')?;
        if group != crate::config::GROUP {
            return None;
        }
        let name = document
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(Edit {
            kind,
            name: name.to_string(),
            api_version: api_version.to_string(),
            base,
            ours: document.clone(),
        })
    }

    /// The API version of the edit (`v1` when it names none the group serves).
    fn version(&self) -> GroupVersion {
        self.api_version
            .split_once('/')
            .and_then(|(_, v)| GroupVersion::parse(v))
            .unwrap_or(GroupVersion::V1)
    }
}

/// What a write of an [`Edit`] sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The server-side apply configuration (None when nothing is changed or added).
    pub config: Option<Value>,
    /// The fields `hookscope` owns once the apply is done, as the apiserver prints paths.
    pub owned: Vec<String>,
    /// The fields the edit changes or adds.
    pub changed: Vec<String>,
    /// The fields the edit removes (the outermost of each removed subtree).
    pub removed: Vec<Path>,
}

impl Plan {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.removed.is_empty()
    }

    /// The fields removed, as the apiserver prints paths.
    pub fn removed_paths(&self) -> Vec<String> {
        self.removed.iter().map(ToString::to_string).collect()
    }
}

/// The result of [`Cluster::apply_edit`].
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The object the dry run returned (what the server would store).
    pub dry_run: Value,
    /// The object stored by the real write (`None` for a dry run only).
    pub stored: Option<Value>,
    /// The object in force before (None: the write creates it).
    pub current: Option<Value>,
    /// What was sent.
    pub plan: Plan,
    /// With force: the apiserver's conflict message without force (the fields taken over and
    /// the managers that owned them); None when nothing is taken over.
    pub taken_over: Option<String>,
}

/// The schema model of `kind` in `version`: the newest release's that serves it (the list types
/// of the admission kinds have not changed across the releases hookscope models; a version
/// dropped since, such as MutatingAdmissionPolicy's `v1alpha1`, comes from the last release
/// that has it).
fn model(
    kind: AdmissionKind,
    version: GroupVersion,
) -> Option<(GoModel<'static>, GoType<'static>)> {
    (crate::KubeVersion::OLDEST.minor()..=crate::KubeVersion::NEWEST.minor())
        .rev()
        .filter_map(crate::KubeVersion::new)
        .find_map(|release| {
            let schema = crate::schema::Schema::for_release(release);
            let id = schema.kind(crate::config::GROUP, version.as_str(), kind.kind())?;
            Some((GoModel(schema), GoType::Struct(id)))
        })
}

/// Fields no apply configuration names for the edit: the type's, and what the server maintains.
fn ignored() -> Set {
    let mut s = Set::new();
    for name in ["apiVersion", "kind", "status"] {
        s.insert(&[PathElement::field(name)]);
    }
    for name in crate::apply::SYSTEM_METADATA {
        s.insert(&[PathElement::field("metadata"), PathElement::field(name)]);
    }
    s
}

/// What writing `edit` sends, given the object the cluster has now (None: it has none, and the
/// whole edit is applied, creating it).
pub fn plan(edit: &Edit, current: Option<&Value>) -> Result<Plan, WriteError> {
    let invalid = |e: String| WriteError::Unreadable(e);
    let (model, ty) = model(edit.kind, edit.version())
        .ok_or_else(|| invalid(format!("no schema for {} {}", edit.api_version, edit.kind)))?;
    let header = || {
        let mut m = Map::new();
        m.insert("apiVersion".into(), json!(edit.api_version));
        m.insert("kind".into(), json!(edit.kind.kind()));
        m.insert("metadata".into(), json!({"name": edit.name}));
        m
    };
    let Some(current) = current else {
        let mut config = header();
        if let Some(Value::Object(meta)) = edit.ours.get("metadata") {
            for key in ["labels", "annotations"] {
                if let Some(v) = meta.get(key) {
                    config["metadata"][key] = v.clone();
                }
            }
        }
        for (k, v) in edit.ours.as_object().into_iter().flatten() {
            if !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status") {
                config.insert(k.clone(), v.clone());
            }
        }
        let config = Value::Object(config);
        let owned = owned_paths(&model, &ty, &config)?;
        return Ok(Plan {
            changed: owned.clone(),
            owned,
            config: Some(config),
            removed: Vec::new(),
        });
    };
    let base = edit.base.as_ref().unwrap_or(current);
    let mut cmp = typed::compare(&model, &ty, base, &edit.ours).map_err(|e| invalid(e.0))?;
    cmp.exclude(&ignored());
    let changed = cmp.modified.union(&cmp.added);
    let removed = if edit.base.is_some() {
        cmp.removed.clone()
    } else {
        Set::new()
    };
    let managed = ManagedFields::from_object(current).map_err(|e| invalid(e.to_string()))?;
    let mine = managed
        .applier(FIELD_MANAGER)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let changed_paths: Vec<String> = changed
        .leaves()
        .paths()
        .iter()
        .map(ToString::to_string)
        .collect();
    let config = if changed.is_empty() {
        None
    } else {
        let wanted = changed.union(&mine.recursive_difference(&removed));
        let mut config = header();
        if let Some(Value::Object(fields)) = extract(&edit.ours, &wanted) {
            for (k, v) in fields {
                match (k.as_str(), v) {
                    ("apiVersion" | "kind", _) => {}
                    ("metadata", Value::Object(meta)) => {
                        for (mk, mv) in meta {
                            if mk != "name" {
                                config["metadata"][&mk] = mv;
                            }
                        }
                    }
                    (_, v) => {
                        config.insert(k, v);
                    }
                }
            }
        }
        Some(Value::Object(config))
    };
    let owned = match &config {
        Some(c) => owned_paths(&model, &ty, c)?,
        None => mine
            .leaves()
            .paths()
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    Ok(Plan {
        config,
        owned,
        changed: changed_paths,
        removed: outermost(&removed),
    })
}

/// The fields an applier of `config` owns (the metadata the apiserver never records left out).
fn owned_paths(
    model: &GoModel<'_>,
    ty: &GoType<'_>,
    config: &Value,
) -> Result<Vec<String>, WriteError> {
    let set = typed::to_field_set(model, ty, config)
        .map_err(|e| WriteError::Unreadable(e.0))?
        .recursive_difference(&ignored());
    Ok(set
        .leaves()
        .paths()
        .iter()
        .map(ToString::to_string)
        .collect())
}

/// The removed paths with no removed path above them.
fn outermost(removed: &Set) -> Vec<Path> {
    let all = removed.paths();
    all.iter()
        .filter(|p| !(1..p.0.len()).any(|n| removed.has(&p.0[..n])))
        .cloned()
        .collect()
}

/// Whether the list item `item` (at `index`) is the one `pe` names.
fn names_item(pe: &PathElement, index: usize, item: &Value) -> bool {
    match pe {
        PathElement::Key(fields) => fields
            .iter()
            .all(|(k, v)| item.get(k).is_some_and(|i| values_equal(i, v))),
        PathElement::Value(v) => values_equal(item, v),
        PathElement::Index(i) => usize::try_from(*i).is_ok_and(|i| i == index),
        PathElement::Field(_) => false,
    }
}

/// The parts of `value` the paths of `set` name (upstream's `ExtractItems`): a member with
/// nothing below it whole, a list item with its key fields; None when `set` names nothing here.
pub fn extract(value: &Value, set: &Set) -> Option<Value> {
    let element = |pe: &PathElement, v: &Value| -> Option<Value> {
        let below = set.with_prefix(pe).filter(|c| !c.is_empty());
        let member = set.members().any(|m| m == pe);
        match below.and_then(|c| extract(v, c)) {
            Some(mut x) => {
                if let (PathElement::Key(fields), Value::Object(m)) = (pe, &mut x) {
                    for (k, kv) in fields {
                        m.entry(k.clone()).or_insert_with(|| kv.clone());
                    }
                }
                Some(x)
            }
            None if member => Some(v.clone()),
            None => None,
        }
    };
    match value {
        Value::Object(map) => {
            let out: Map<String, Value> = map
                .iter()
                .filter_map(|(k, v)| element(&PathElement::field(k), v).map(|x| (k.clone(), x)))
                .collect();
            (!out.is_empty()).then_some(Value::Object(out))
        }
        Value::Array(items) => {
            let named: Vec<&PathElement> = set
                .members()
                .chain(set.children().map(|(pe, _)| pe))
                .collect();
            let out: Vec<Value> = items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let pe = named.iter().find(|pe| names_item(pe, i, item))?;
                    element(pe, item)
                })
                .collect();
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => None,
    }
}

/// The JSON pointer of `path` in `value`, and the value there (None when it is not there).
fn locate<'v>(value: &'v Value, path: &[PathElement]) -> Option<(String, &'v Value)> {
    let mut pointer = String::new();
    let mut at = value;
    for pe in path {
        match (pe, at) {
            (PathElement::Field(name), Value::Object(m)) => {
                at = m.get(&**name)?;
                pointer.push('/');
                pointer.push_str(&name.replace('~', "~0").replace('/', "~1"));
            }
            (pe, Value::Array(items)) => {
                let (i, item) = items
                    .iter()
                    .enumerate()
                    .find(|(i, item)| names_item(pe, *i, item))?;
                at = item;
                pointer.push_str(&format!("/{i}"));
            }
            _ => return None,
        }
    }
    Some((pointer, at))
}

/// Removes `path` from `value` (nothing when it is not there).
fn remove_at(value: &mut Value, path: &[PathElement]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for pe in parent {
        let next = match (pe, at) {
            (PathElement::Field(name), Value::Object(m)) => m.get_mut(&**name),
            (pe, Value::Array(items)) => items
                .iter_mut()
                .enumerate()
                .find(|(i, item)| names_item(pe, *i, item))
                .map(|(_, item)| item),
            _ => None,
        };
        let Some(next) = next else { return };
        at = next;
    }
    match (last, at) {
        (PathElement::Field(name), Value::Object(m)) => {
            m.remove(&**name);
        }
        (pe, Value::Array(items)) => {
            if let Some(i) = items
                .iter()
                .enumerate()
                .position(|(i, item)| names_item(pe, i, item))
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The JSON patch that removes `removed` from `current`: first a `test` of each field's value
/// in `base` (the version edited), then the removals, later list items first so that indices
/// stay right. None when none of them is in `current`.
pub fn removal_patch(removed: &[Path], base: &Value, current: &Value) -> Option<Value> {
    let mut found: Vec<(Vec<String>, String, Value)> = Vec::new();
    for p in removed {
        let Some((pointer, now)) = locate(current, &p.0) else {
            continue;
        };
        let was = locate(base, &p.0).map_or_else(|| now.clone(), |(_, v)| v.clone());
        let tokens = pointer.split('/').skip(1).map(str::to_string).collect();
        found.push((tokens, pointer, was));
    }
    if found.is_empty() {
        return None;
    }
    // Later first: by token, numbers compared as numbers.
    found.sort_by(|a, b| {
        let key = |t: &String| (t.parse::<u64>().ok(), t.clone());
        b.0.iter().map(key).cmp(a.0.iter().map(key))
    });
    let mut ops: Vec<Value> = found
        .iter()
        .map(|(_, pointer, was)| json!({"op": "test", "path": pointer, "value": was}))
        .collect();
    ops.extend(
        found
            .iter()
            .map(|(_, pointer, _)| json!({"op": "remove", "path": pointer})),
    );
    Some(Value::Array(ops))
}

impl Cluster {
    /// Writes the user's change of an admission configuration (see the module's documentation):
    /// refused with [`WriteError::ReadOnly`] unless writes are allowed. A dry run
    /// (`dryRun=All`) always comes first; its result is the object the server would store.
    /// Unless `dry_run`, the real writes follow. `force` takes over the changed fields other
    /// managers own (and only those) instead of failing with a conflict; the conflict it
    /// overrides is returned in [`Applied::taken_over`].
    pub async fn apply_edit(
        &self,
        edit: &Edit,
        dry_run: bool,
        force: bool,
    ) -> Result<Applied, WriteError> {
        if !self.allow_writes {
            return Err(WriteError::ReadOnly);
        }
        if edit.name.is_empty() {
            return Err(WriteError::NoName);
        }
        let version = edit.version();
        let current = self
            .get_configuration(edit.kind, version, &edit.name)
            .await
            .map_err(|e| self.reject(edit, e, "reading it"))?;
        let plan = plan(edit, current.as_ref())?;
        if plan.is_empty() {
            return Err(WriteError::NothingChanged);
        }
        let removal = match (&edit.base, &current) {
            (Some(base), Some(current)) => removal_patch(&plan.removed, base, current),
            _ => None,
        };
        let path = format!(
            "/apis/{}/{version}/{}/{}",
            crate::config::GROUP,
            edit.kind.resource(),
            edit.name
        );
        let mut taken_over = None;
        let mut result = current.clone().unwrap_or(Value::Null);
        if let Some(patch) = &removal {
            result = self
                .send(edit, &path, JSON_PATCH, patch, true, false)
                .await?;
        }
        if let Some(config) = &plan.config {
            if force {
                match self
                    .send(edit, &path, APPLY_PATCH, config, true, false)
                    .await
                {
                    Err(WriteError::Rejected(f)) if f.reason.contains("409") => {
                        taken_over = Some(conflict_text(&f.reason));
                    }
                    Err(e) => return Err(e),
                    Ok(_) => {}
                }
            }
            result = self
                .send(edit, &path, APPLY_PATCH, config, true, force)
                .await?;
            for p in &plan.removed {
                remove_at(&mut result, &p.0);
            }
        }
        let mut applied = Applied {
            dry_run: result,
            stored: None,
            current,
            plan,
            taken_over,
        };
        if dry_run {
            return Ok(applied);
        }
        if let Some(patch) = &removal {
            applied.stored = Some(
                self.send(edit, &path, JSON_PATCH, patch, false, false)
                    .await?,
            );
        }
        if let Some(config) = &applied.plan.config {
            applied.stored = Some(
                self.send(edit, &path, APPLY_PATCH, config, false, force)
                    .await?,
            );
        }
        Ok(applied)
    }

    /// One `PATCH` of the configuration as field manager `hookscope`.
    async fn send(
        &self,
        edit: &Edit,
        path: &str,
        content_type: &str,
        body: &Value,
        dry_run: bool,
        force: bool,
    ) -> Result<Value, WriteError> {
        let mut query = format!("{path}?fieldManager={FIELD_MANAGER}");
        if dry_run {
            query.push_str("&dryRun=All");
        }
        if force {
            query.push_str("&force=true");
        }
        let what = match (content_type == APPLY_PATCH, dry_run) {
            (true, true) => "applying (dry run)",
            (true, false) => "applying",
            (false, true) => "removing fields (dry run)",
            (false, false) => "removing fields",
        };
        let request = http::Request::patch(query)
            .header(http::header::CONTENT_TYPE, content_type)
            .header(http::header::ACCEPT, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default())
            .map_err(|e| self.reject(edit, kube::Error::HttpError(e), what))?;
        self.client()
            .request::<Value>(request)
            .await
            .map_err(|e| self.reject(edit, e, what))
    }

    /// The refusal of a write, with what to do.
    fn reject(&self, edit: &Edit, e: kube::Error, what: &str) -> WriteError {
        let mut failure = describe(&e, what, &self.target(), std::time::Duration::ZERO);
        if failure.kind == super::FailureKind::Forbidden {
            let plural = edit.kind.resource();
            failure.rbac = Some(RbacAdvice {
                rule: format!(
                    "- apiGroups: [\"admissionregistration.k8s.io\"]\n  resources: [\"{plural}\"]\n  verbs: [\"get\", \"patch\"]"
                ),
                check: format!(
                    "kubectl auth can-i patch {plural}.admissionregistration.k8s.io/{}{}",
                    edit.name,
                    if self.info.context.is_empty() {
                        String::new()
                    } else {
                        format!(" --context {}", self.info.context)
                    }
                ),
            });
        }
        match api_code(&e) {
            Some(409) => {
                failure.action = "Another field manager owns fields this apply changes (named above with each field): apply with force to take over those fields only, or change them with that manager.".to_string();
            }
            Some(422) if what.starts_with("removing") => {
                failure.action = "The cluster changed a field you removed since the version you edited: :rebase or :reload, then apply again.".to_string();
            }
            _ => {}
        }
        WriteError::Rejected(failure)
    }
}

/// `application/apply-patch+yaml`.
const APPLY_PATCH: &str = "application/apply-patch+yaml";
/// `application/json-patch+json`.
const JSON_PATCH: &str = "application/json-patch+json";

/// The apiserver's conflict text (`Apply failed with …`) out of a refusal's reason.
fn conflict_text(reason: &str) -> String {
    reason
        .find("Apply failed")
        .map_or(reason, |i| &reason[i..])
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(timeout: i64, extra_label: bool) -> Value {
        let mut labels = json!({"team": "platform"});
        if extra_label {
            labels["tier"] = json!("gate");
        }
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "guard", "labels": labels},
            "webhooks": [
                {"name": "a.guard.test", "timeoutSeconds": timeout, "failurePolicy": "Ignore",
                 "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "clientConfig": {"url": "https://127.0.0.1:9443/a"}},
                {"name": "b.guard.test", "timeoutSeconds": 5, "failurePolicy": "Ignore",
                 "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "clientConfig": {"url": "https://127.0.0.1:9443/b"}}
            ]
        })
    }

    fn edit(base: Value, ours: Value) -> Edit {
        Edit {
            kind: AdmissionKind::ValidatingWebhookConfiguration,
            name: "guard".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            base: Some(base),
            ours,
        }
    }

    #[test]
    fn one_changed_field_is_applied_with_what_identifies_it() {
        let base = object(10, true);
        let p = plan(&edit(base.clone(), object(3, true)), Some(&base)).unwrap();
        assert_eq!(
            p.config,
            Some(json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "guard"},
                "webhooks": [{"name": "a.guard.test", "timeoutSeconds": 3}]
            }))
        );
        assert_eq!(
            p.changed,
            [r#".webhooks[name="a.guard.test"].timeoutSeconds"#]
        );
        assert!(p.removed.is_empty());
    }

    #[test]
    fn fields_hookscope_owns_stay_in_the_apply_and_removals_are_tested_patches() {
        let mut current = object(3, true);
        current["metadata"]["managedFields"] = json!([{
            "manager": "hookscope", "operation": "Apply",
            "apiVersion": "admissionregistration.k8s.io/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:webhooks": {"k:{\"name\":\"a.guard.test\"}": {
                ".": {}, "f:name": {}, "f:timeoutSeconds": {}}}}
        }]);
        let base = object(3, true);
        let mut ours = object(3, false);
        ours["webhooks"][1]["failurePolicy"] = json!("Fail");
        let p = plan(&edit(base.clone(), ours), Some(&current)).unwrap();
        assert_eq!(
            p.config.as_ref().unwrap()["webhooks"],
            json!([
                {"name": "a.guard.test", "timeoutSeconds": 3},
                {"name": "b.guard.test", "failurePolicy": "Fail"}
            ])
        );
        assert_eq!(p.removed_paths(), [".metadata.labels.tier"]);
        let patch = removal_patch(&p.removed, &base, &current).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/labels/tier", "value": "gate"},
                {"op": "remove", "path": "/metadata/labels/tier"}
            ])
        );
    }

    #[test]
    fn a_removed_webhook_is_removed_by_its_index_in_the_clusters_version() {
        let base = object(10, false);
        let mut ours = base.clone();
        ours["webhooks"].as_array_mut().unwrap().remove(0);
        let p = plan(&edit(base.clone(), ours), Some(&base)).unwrap();
        assert!(p.config.is_none());
        assert_eq!(p.removed_paths(), [r#".webhooks[name="a.guard.test"]"#]);
        let patch = removal_patch(&p.removed, &base, &base).unwrap();
        assert_eq!(patch[0]["path"], "/webhooks/0");
        assert_eq!(patch[0]["value"], base["webhooks"][0]);
        assert_eq!(patch[1], json!({"op": "remove", "path": "/webhooks/0"}));
    }

    fn policy_object(api_version: &str, kind: &str, spec: Value) -> Value {
        json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"name": "p", "labels": {"team": "platform"}},
            "spec": spec,
        })
    }

    /// A policy's or binding's edit is planned over its kind's schema, in the version it names
    /// (MutatingAdmissionPolicy's `v1alpha1` too): a set-list gains only the item added, an
    /// atomic list is sent whole, a changed scalar alone.
    #[test]
    fn policy_edits_apply_only_what_changed_over_their_kinds_schema() {
        let v1 = "admissionregistration.k8s.io/v1";
        let alpha = "admissionregistration.k8s.io/v1alpha1";
        let binding = |actions: Value| {
            policy_object(
                v1,
                "ValidatingAdmissionPolicyBinding",
                json!({"policyName": "p", "validationActions": actions}),
            )
        };
        let base = binding(json!(["Deny"]));
        let edit =
            Edit::from_document(&binding(json!(["Deny", "Audit"])), Some(base.clone())).unwrap();
        assert_eq!(edit.kind, AdmissionKind::ValidatingAdmissionPolicyBinding);
        let p = plan(&edit, Some(&base)).unwrap();
        assert_eq!(
            p.config.unwrap()["spec"],
            json!({"validationActions": ["Audit"]})
        );
        assert_eq!(p.changed, [r#".spec.validationActions[="Audit"]"#]);

        let policy = |message: &str, failure: &str| {
            policy_object(
                v1,
                "ValidatingAdmissionPolicy",
                json!({"failurePolicy": failure, "validations": [
                    {"expression": "true", "message": message},
                    {"expression": "false"}]}),
            )
        };
        let base = policy("a", "Fail");
        let edit = Edit::from_document(&policy("b", "Fail"), Some(base.clone())).unwrap();
        let p = plan(&edit, Some(&base)).unwrap();
        assert_eq!(
            p.config.unwrap()["spec"],
            json!({"validations": [{"expression": "true", "message": "b"}, {"expression": "false"}]}),
            "validations is an atomic list"
        );

        let map = |reinvocation: &str| {
            policy_object(
                alpha,
                "MutatingAdmissionPolicy",
                json!({"reinvocationPolicy": reinvocation, "failurePolicy": "Fail",
                       "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}}]}),
            )
        };
        let base = map("Never");
        let mut ours = map("IfNeeded");
        ours["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("team");
        let edit = Edit::from_document(&ours, Some(base.clone())).unwrap();
        assert_eq!(edit.kind, AdmissionKind::MutatingAdmissionPolicy);
        let p = plan(&edit, Some(&base)).unwrap();
        assert_eq!(
            p.config,
            Some(json!({
                "apiVersion": alpha, "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "p"},
                "spec": {"reinvocationPolicy": "IfNeeded"},
            }))
        );
        assert_eq!(p.removed_paths(), [".metadata.labels.team"]);
        assert!(
            Edit::from_document(&json!({"apiVersion": "v1", "kind": "ConfigMap"}), None).is_none()
        );
    }
}

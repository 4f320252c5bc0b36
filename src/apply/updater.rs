//! structured-merge-diff's `merge.Updater`: apply and update over a set of managers, each owning
//! a set of fields at an API version.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use super::fieldpath::{Path, Set, values_equal};
use super::typed::{
    self, Comparison, TypeModel, WalkError, ensure_named_fields_are_members, to_field_set,
};

/// The fields one manager owns (upstream's `VersionedSet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedSet {
    /// The fields.
    pub set: Set,
    /// The API version they were set at.
    pub api_version: String,
    /// Whether they were applied (an `Apply` entry) rather than updated.
    pub applied: bool,
}

/// Managers by identifier (upstream's `fieldpath.ManagedFields`).
pub type Managers = BTreeMap<String, VersionedSet>;

/// One field owned by another manager that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager's identifier.
    pub manager: String,
    /// The field.
    pub path: Path,
}

/// The conflicts of an apply (upstream's `merge.Conflicts`), in the order upstream lists a
/// manager's paths.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conflicts(pub Vec<Conflict>);

/// structured-merge-diff's own wording (the apiserver words them differently; see
/// [`super::ApplyError`]).
impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [c] = self.0.as_slice() {
            return write!(
                f,
                "conflict with {}: {}",
                crate::gofmt::quote(&c.manager),
                c.path
            );
        }
        let mut lines = Vec::new();
        for (manager, paths) in self.by_manager() {
            lines.push(format!("conflicts with {}:", crate::gofmt::quote(manager)));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        f.write_str(&lines.join("\n"))
    }
}

impl Conflicts {
    /// The conflicts grouped by manager, managers sorted.
    pub fn by_manager(&self) -> BTreeMap<&str, Vec<&Path>> {
        let mut m: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
        for c in &self.0 {
            m.entry(&c.manager).or_default().push(&c.path);
        }
        m
    }
}

/// Why the updater failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdaterError {
    /// Fields owned by other managers would change.
    #[error("{0}")]
    Conflicts(Conflicts),
    /// The objects do not fit the schema.
    #[error("{0}")]
    Invalid(#[from] WalkError),
}

/// An updater of objects of one type.
pub struct Updater<'m, M: TypeModel> {
    /// The schema.
    pub model: &'m M,
    /// The objects' type.
    pub ty: M::Type,
    /// Fields never owned or compared (the apiserver's reset fields, such as `status` for
    /// resources with a status subresource).
    pub ignored: Option<Set>,
    /// How an apply is found to change nothing: by the comparison, ignored fields left out
    /// (structured-merge-diff before v4.3, Kubernetes 1.28), rather than by the objects' equality.
    pub noop_by_comparison: bool,
}

impl<M: TypeModel> Updater<'_, M> {
    /// Every manager's set made to fit the schema (`reconcileManagedFieldsWithSchemaChanges`).
    fn reconcile(&self, managers: &mut Managers) {
        for vs in managers.values_mut() {
            if let Some(set) = typed::reconcile_with_schema(self.model, &self.ty, &vs.set) {
                vs.set = set;
            }
        }
    }

    fn filter(&self, set: Set) -> Set {
        match &self.ignored {
            Some(ignored) => set.recursive_difference(ignored),
            None => set,
        }
    }

    fn update_managers(
        &self,
        old: &Value,
        new: &Value,
        managers: &mut Managers,
        workflow: &str,
        force: bool,
    ) -> Result<Comparison, UpdaterError> {
        let mut compare = typed::compare(self.model, &self.ty, old, new)?;
        if let Some(ignored) = &self.ignored {
            compare.exclude(ignored);
        }
        let changed = compare.modified.union(&compare.added);
        let mut conflicts: BTreeMap<String, Set> = BTreeMap::new();
        for (manager, vs) in managers.iter() {
            if manager == workflow {
                continue;
            }
            let c = vs.set.intersection(&changed);
            if !c.is_empty() {
                conflicts.insert(manager.clone(), c);
            }
        }
        if !force && !conflicts.is_empty() {
            let mut out = Vec::new();
            for (manager, set) in &conflicts {
                for path in set.paths() {
                    out.push(Conflict {
                        manager: manager.clone(),
                        path,
                    });
                }
            }
            return Err(UpdaterError::Conflicts(Conflicts(out)));
        }
        for (manager, vs) in managers.iter_mut() {
            if manager == workflow {
                continue;
            }
            if let Some(c) = conflicts.get(manager) {
                vs.set = vs.set.difference(c);
            }
            if !compare.removed.is_empty() {
                vs.set = vs.set.difference(&compare.removed);
            }
        }
        managers.retain(|_, vs| !vs.set.is_empty());
        Ok(compare)
    }

    /// An update by `manager` (upstream's `Updater.Update`): the fields that changed between
    /// `live` and `new` become the manager's, and other managers lose them.
    pub fn update(
        &self,
        live: &Value,
        new: &Value,
        version: &str,
        managers: &mut Managers,
        manager: &str,
    ) -> Result<(), UpdaterError> {
        let mut proposed = managers.clone();
        self.reconcile(&mut proposed);
        let compare = self.update_managers(live, new, &mut proposed, manager, true)?;
        *managers = proposed;
        let previous = managers
            .remove(manager)
            .map(|vs| vs.set)
            .unwrap_or_default();
        let set = previous
            .difference(&compare.removed)
            .union(&compare.modified)
            .union(&compare.added);
        let set = self.filter(set);
        if !set.is_empty() {
            managers.insert(
                manager.to_string(),
                VersionedSet {
                    set,
                    api_version: version.to_string(),
                    applied: false,
                },
            );
        }
        Ok(())
    }

    /// An apply by `manager` (upstream's `Updater.Apply`): the configuration merged into the
    /// live object, the fields the manager applied before and no longer applies removed unless
    /// another manager owns them, conflicts with other managers unless `force`. None when the
    /// object does not change.
    pub fn apply(
        &self,
        live: &Value,
        config: &Value,
        version: &str,
        managers: &mut Managers,
        manager: &str,
        force: bool,
    ) -> Result<Option<Value>, UpdaterError> {
        let mut proposed = managers.clone();
        self.reconcile(&mut proposed);
        let (model, ty) = (self.model, &self.ty);
        let merged = typed::merge(model, ty, Some(live), Some(config))?
            .unwrap_or_else(|| Value::Object(Map::new()));
        let last = proposed.get(manager).cloned();
        let set = self.filter(to_field_set(model, ty, config)?);
        proposed.insert(
            manager.to_string(),
            VersionedSet {
                set,
                api_version: version.to_string(),
                applied: true,
            },
        );
        let new = self.prune(merged, &proposed, last.as_ref())?;
        let compare = self.update_managers(live, &new, &mut proposed, manager, force)?;
        *managers = proposed;
        let unchanged = if self.noop_by_comparison {
            compare.removed.is_empty() && compare.modified.is_empty() && compare.added.is_empty()
        } else {
            values_equal(live, &new)
        };
        Ok((!unchanged).then_some(new))
    }

    fn prune(
        &self,
        merged: Value,
        managers: &Managers,
        last: Option<&VersionedSet>,
    ) -> Result<Value, UpdaterError> {
        let Some(last) = last.filter(|l| !l.set.is_empty()) else {
            return Ok(merged);
        };
        let (model, ty) = (self.model, &self.ty);
        let ensure = |s: &Set| ensure_named_fields_are_members(model, ty, s);
        let fields =
            |v: &Value| -> Result<Set, WalkError> { Ok(ensure(&to_field_set(model, ty, v)?)) };
        let remove = |s: &Set| typed::remove_items(model, ty, &merged, s).unwrap_or(Value::Null);

        let last_set = ensure(&last.set);
        let pruned = remove(&last_set);
        // Items another manager owns are added back.
        let mut managed = Set::new();
        for vs in managers.values() {
            managed.union_with(&vs.set);
        }
        let merged_set = fields(&merged)?;
        let keep = fields(&pruned)?.union(&ensure(&managed));
        let pruned = remove(&merged_set.difference(&keep));
        // And items the last apply never had below what it removed.
        let pruned_set = fields(&pruned)?;
        Ok(remove(
            &merged_set.difference(&pruned_set).intersection(&last_set),
        ))
    }
}

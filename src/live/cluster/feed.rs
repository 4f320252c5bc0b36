//! What the watchers have seen of one kind: the objects by name, and the changes between them.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::Value;

use crate::api::WebhookConfiguration;
use crate::config::policy::{PolicyObject, PolicySet};

use super::{AdmissionKind, Change, ChangeAction, ConfigurationObject, Seen};

/// The project's reading of a server object: a webhook configuration, or a policy or binding,
/// defaulted as the loader defaults files.
#[derive(Debug, Clone)]
pub(crate) enum Reading {
    Webhook(WebhookConfiguration),
    Policy(Box<PolicyObject>),
}

/// A known object: its JSON as the server sent it, and the project's reading of it.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) object: Value,
    pub(crate) reading: Result<Reading, String>,
}

/// The objects of one kind, and a list in progress.
pub(crate) struct KindStore {
    pub(crate) kind: AdmissionKind,
    /// The release the server runs, whose rules a policy read from it is validated by.
    release: crate::KubeVersion,
    pub(crate) objects: BTreeMap<String, Known>,
    relisting: Option<BTreeMap<String, Value>>,
    /// At least one complete list has been seen.
    pub(crate) synced: bool,
    /// Why the kind cannot be read now (its feed fails), until its watcher progresses again.
    pub(crate) failing: Option<String>,
}

/// Reads a server object with the project's loader (the same defaulting as files get). A policy
/// or binding is also validated as an apiserver of `release` validates a create: one it would
/// refuse (which hookscope's reading of the object may differ on) is a problem, left out of the
/// replays.
pub(crate) fn convert(
    kind: AdmissionKind,
    object: &Value,
    release: crate::KubeVersion,
) -> Result<Reading, String> {
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    let origin = format!("{}/{name}", kind.resource());
    let text = serde_json::to_string(object).map_err(|e| format!("{origin}: {e}"))?;
    if kind.is_policy() {
        let mut loaded = crate::config::parse_policy_documents(&text, &origin);
        if loaded.is_empty() {
            return Err(format!("{origin}: not a {kind}"));
        }
        let mut policy = loaded.swap_remove(0).map_err(|e| e.to_string())?;
        policy.apply_defaults();
        let errors = crate::config::policy::validate_policy_object_in(&policy.object, release);
        return match errors.split_first() {
            None => Ok(Reading::Policy(Box::new(policy.object))),
            Some((first, rest)) => Err(format!(
                "{origin}: left out of the replays, hookscope finds it invalid: {}: {}{}",
                first.field,
                first.message,
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(" (and {} more errors)", rest.len())
                }
            )),
        };
    }
    let mut loaded = crate::config::parse_documents(&text, &origin);
    if loaded.is_empty() {
        return Err(format!("{origin}: empty object"));
    }
    match loaded.swap_remove(0) {
        Ok(mut configuration) => {
            configuration.apply_defaults();
            Ok(Reading::Webhook(configuration.configuration))
        }
        Err(e) => Err(e.to_string()),
    }
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The object without what changes on every write (resourceVersion) or says nothing about the
/// configuration's content (managedFields), for comparisons and diffs.
fn essence(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    copy
}

/// The object as a person edits it: YAML without what the server maintains (resourceVersion,
/// managedFields, uid, creationTimestamp, generation, selfLink), which an apply must not carry.
pub fn editable_yaml(object: &Value) -> String {
    let mut copy = essence(object);
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["uid", "creationTimestamp", "generation", "selfLink"] {
            meta.remove(key);
        }
    }
    serde_saphyr::to_string(&copy).unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"))
}

fn yaml(object: Option<&Value>) -> String {
    match object {
        Some(object) => serde_saphyr::to_string(&essence(object))
            .unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n")),
        None => String::new(),
    }
}

/// A unified diff of the two objects as YAML (resourceVersion and managedFields left out).
pub fn yaml_diff(name: &str, old: Option<&Value>, new: Option<&Value>) -> String {
    let diff = diff_of(name, &yaml(old), &yaml(new), old.is_some(), new.is_some());
    if diff.is_empty() {
        "# only metadata.managedFields changed\n".to_string()
    } else {
        diff
    }
}

/// What an apply changes: a unified diff of the object in force (None: there is none) and the
/// object the server returned, both as [`editable_yaml`].
pub fn apply_diff(name: &str, current: Option<&Value>, applied: &Value) -> String {
    let before = current.map(editable_yaml).unwrap_or_default();
    let diff = diff_of(
        name,
        &before,
        &editable_yaml(applied),
        current.is_some(),
        true,
    );
    if diff.is_empty() {
        format!("# {name}: no change, the cluster already stores this\n")
    } else {
        diff
    }
}

fn diff_of(name: &str, a: &str, b: &str, old: bool, new: bool) -> String {
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(3)
        .header(
            &if old {
                format!("{name} (before)")
            } else {
                "/dev/null".to_string()
            },
            &if new {
                format!("{name} (after)")
            } else {
                "/dev/null".to_string()
            },
        )
        .to_string()
}

/// The latest `managedFields` entry (greatest `time`): its manager, operation and time. On a
/// tie (times have whole seconds, and the apiserver sorts entries of one second by manager), the
/// entry that the write made is preferred: one `old` lacked, else one whose time moved; else
/// the later entry.
pub(crate) fn latest_writer(
    old: Option<&Value>,
    object: &Value,
) -> Option<(String, Option<String>, Option<String>)> {
    let entries = object["metadata"]["managedFields"].as_array()?;
    let time = |e: &Value| e["time"].as_str().unwrap_or("").to_string();
    let newest = entries.iter().map(time).max()?;
    let tied: Vec<&Value> = entries.iter().filter(|e| time(e) == newest).collect();
    let before: &[Value] = old
        .and_then(|o| o["metadata"]["managedFields"].as_array())
        .map_or(&[], Vec::as_slice);
    let same = |a: &Value, b: &Value| {
        a["manager"] == b["manager"]
            && a["operation"] == b["operation"]
            && a["subresource"] == b["subresource"]
    };
    let earlier = |e: &Value| before.iter().find(|b| same(b, e));
    let best = if old.is_none() {
        None
    } else {
        tied.iter()
            .rev()
            .find(|e| earlier(e).is_none())
            .or_else(|| {
                tied.iter()
                    .rev()
                    .find(|e| earlier(e).is_some_and(|b| time(b) != time(e)))
            })
    };
    let best = best.or(tied.last())?;
    Some((
        best["manager"].as_str()?.to_string(),
        best["operation"].as_str().map(str::to_string),
        best["time"].as_str().map(str::to_string),
    ))
}

impl KindStore {
    pub(crate) fn new(kind: AdmissionKind) -> KindStore {
        KindStore {
            kind,
            release: crate::KubeVersion::NEWEST,
            objects: BTreeMap::new(),
            relisting: None,
            synced: false,
            failing: None,
        }
    }

    fn change(
        &self,
        action: ChangeAction,
        name: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        seen: Seen,
    ) -> Change {
        let (who, operation, server_time) = match (action, new) {
            (ChangeAction::Deleted, _) | (_, None) => ("unknown".to_string(), None, None),
            (_, Some(new)) => match latest_writer(old, new) {
                Some((who, operation, time)) => (who, operation, time),
                None => ("unknown".to_string(), None, None),
            },
        };
        let resource_version = new.or(old).map(resource_version).unwrap_or_default();
        Change {
            kind: self.kind,
            name: name.to_string(),
            action,
            observed_at: SystemTime::now(),
            server_time,
            who,
            operation,
            resource_version,
            diff: yaml_diff(name, old, new),
            seen,
        }
    }

    fn store(&mut self, name: &str, object: Value) {
        let reading = convert(self.kind, &object, self.release);
        self.objects
            .insert(name.to_string(), Known { object, reading });
    }

    /// The server's release, learnt on connecting: the objects known are read again by its rules
    /// when it differs from the one they were read by.
    pub(crate) fn set_release(&mut self, release: crate::KubeVersion) {
        if release == self.release {
            return;
        }
        self.release = release;
        for known in self.objects.values_mut() {
            known.reading = convert(self.kind, &known.object, release);
        }
    }

    /// A list starts (again).
    pub(crate) fn begin_list(&mut self) {
        self.relisting = Some(BTreeMap::new());
    }

    /// One object of the list in progress.
    pub(crate) fn listed(&mut self, object: Value) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.relisting
            .get_or_insert_with(BTreeMap::new)
            .insert(name, object);
    }

    /// The list is complete: the first one is the baseline (no changes); a later one (after a
    /// 410 or a reconnect) reports what differs from what was known, and nothing else.
    pub(crate) fn end_list(&mut self) -> (Vec<Change>, bool) {
        let listed = self.relisting.take().unwrap_or_default();
        if !self.synced {
            self.synced = true;
            for (name, object) in listed {
                self.store(&name, object);
            }
            return (Vec::new(), true);
        }
        let mut changes = Vec::new();
        let gone: Vec<String> = self
            .objects
            .keys()
            .filter(|n| !listed.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(old) = self.objects.remove(&name) {
                changes.push(self.change(
                    ChangeAction::Deleted,
                    &name,
                    Some(&old.object),
                    None,
                    Seen::Relist,
                ));
            }
        }
        for (name, object) in listed {
            if let Some(change) = self.apply_inner(&name, object, Seen::Relist) {
                changes.push(change);
            }
        }
        let any = !changes.is_empty();
        (changes, any)
    }

    fn apply_inner(&mut self, name: &str, object: Value, seen: Seen) -> Option<Change> {
        let change = match self.objects.get(name) {
            None => Some(self.change(ChangeAction::Added, name, None, Some(&object), seen)),
            Some(old) if resource_version(&old.object) == resource_version(&object) => None,
            Some(old) if old.object == object => None,
            Some(old) => {
                let old_object = old.object.clone();
                if essence(&old_object) == essence(&object)
                    && old_object["metadata"]["managedFields"]
                        == object["metadata"]["managedFields"]
                {
                    None
                } else {
                    Some(self.change(
                        ChangeAction::Modified,
                        name,
                        Some(&old_object),
                        Some(&object),
                        seen,
                    ))
                }
            }
        };
        self.store(name, object);
        change
    }

    /// An object was added or modified (watch event).
    pub(crate) fn applied(&mut self, object: Value) -> Option<Change> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        self.apply_inner(&name, object, Seen::Event)
    }

    /// An object was deleted (watch event).
    pub(crate) fn deleted(&mut self, object: Value) -> Option<Change> {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let old = self.objects.remove(&name)?;
        let mut change = self.change(
            ChangeAction::Deleted,
            &name,
            Some(&old.object),
            None,
            Seen::Event,
        );
        change.resource_version = resource_version(&object);
        Some(change)
    }

    /// The objects that read as configurations, policies or bindings, by name, as the server
    /// sent them.
    pub(crate) fn objects(&self) -> impl Iterator<Item = ConfigurationObject> + '_ {
        self.objects
            .iter()
            .filter(|(_, known)| known.reading.is_ok())
            .map(|(name, known)| ConfigurationObject {
                kind: self.kind,
                name: name.clone(),
                object: known.object.clone(),
            })
    }

    /// The webhook configurations in dispatch order (by name); the objects that could not be
    /// read go to `problems`.
    pub(crate) fn configurations(&self, problems: &mut Vec<String>) -> Vec<WebhookConfiguration> {
        let mut out = Vec::new();
        for known in self.objects.values() {
            match &known.reading {
                Ok(Reading::Webhook(c)) => out.push(c.clone()),
                Ok(Reading::Policy(_)) => {}
                Err(e) => problems.push(e.clone()),
            }
        }
        out
    }

    /// Adds the policies or bindings that read as such to `set` (by name); the objects that
    /// could not be read go to `problems`.
    pub(crate) fn policies(&self, set: &mut PolicySet, problems: &mut Vec<String>) {
        for known in self.objects.values() {
            match &known.reading {
                Ok(Reading::Policy(p)) => set.insert((**p).clone()),
                Ok(Reading::Webhook(_)) => {}
                Err(e) => problems.push(e.clone()),
            }
        }
    }

    /// The server does not serve this kind: it has no objects (those known before, from a
    /// server that served it, are reported deleted, as a relist would find them gone) and
    /// counts as listed.
    pub(crate) fn not_served(&mut self) -> Vec<Change> {
        self.begin_list();
        let (changes, _) = self.end_list();
        changes
    }
}

/// Why [`rebase`] could not put an edit on a newer version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebaseError {
    /// One of the three texts is not a YAML object.
    #[error("{which} does not read as an object: {message}")]
    Unreadable {
        /// `your text`, `the version you edited`, `the cluster's version`.
        which: &'static str,
        /// The reader's message.
        message: String,
    },
    /// The edit and the cluster changed the same field differently.
    #[error(
        "you and the cluster both changed {path}: keep yours (:keep) or take the cluster's (:reload)"
    )]
    Conflict {
        /// The field, as a path (`webhooks[deny.example.com].failurePolicy`).
        path: String,
    },
}

/// Puts the user's edit (`ours`, made on `base`) on the cluster's newer version `theirs`: every
/// field the edit changed, added or removed is changed so in `theirs`; the others stay as the
/// cluster has them. Lists of objects with a `name` (webhooks, rules are not) are merged item by
/// item, by name; other lists as a whole. The result is editable YAML ([`editable_yaml`]), so
/// comments of the edit are not kept.
pub fn rebase(base: &str, ours: &str, theirs: &str) -> Result<String, RebaseError> {
    let read = |which: &'static str, text: &str| {
        serde_saphyr::from_str::<Value>(text)
            .map_err(|e| e.to_string())
            .and_then(|v| {
                v.is_object()
                    .then_some(v)
                    .ok_or_else(|| "not a mapping".to_string())
            })
            .map_err(|message| RebaseError::Unreadable { which, message })
    };
    let base = read("the version you edited", base)?;
    let ours = read("your text", ours)?;
    let mut merged = read("the cluster's version", theirs)?;
    merge3(Some(&base), Some(&ours), &mut merged, "")?;
    Ok(editable_yaml(&merged))
}

/// Applies the change `base` → `ours` to `theirs` at `path`.
fn merge3(
    base: Option<&Value>,
    ours: Option<&Value>,
    theirs: &mut Value,
    path: &str,
) -> Result<(), RebaseError> {
    if base == ours {
        return Ok(());
    }
    let conflict = || RebaseError::Conflict {
        path: if path.is_empty() {
            "the object".into()
        } else {
            path.trim_start_matches('.').to_string()
        },
    };
    match (base, ours, &mut *theirs) {
        (Some(Value::Object(b)), Some(Value::Object(o)), Value::Object(t)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(o.keys()).collect();
            for key in keys {
                let (bv, ov) = (b.get(key), o.get(key));
                if bv == ov {
                    continue;
                }
                let here = format!("{path}.{key}");
                match (ov, t.get_mut(key)) {
                    (None, Some(tv)) if Some(&*tv) == bv => {
                        t.remove(key);
                    }
                    (None, None) => {}
                    (None, Some(_)) => return Err(RebaseError::Conflict { path: here }),
                    (Some(ov), None) if bv.is_none() => {
                        t.insert(key.clone(), ov.clone());
                    }
                    (Some(_), None) => return Err(RebaseError::Conflict { path: here }),
                    (Some(ov), Some(tv)) => merge3(bv, Some(ov), tv, &here)?,
                }
            }
            Ok(())
        }
        (Some(Value::Array(b)), Some(Value::Array(o)), Value::Array(t))
            if [b, o, &*t]
                .iter()
                .all(|l| l.iter().all(|i| i["name"].is_string())) =>
        {
            let find = |list: &[Value], name: &Value| list.iter().position(|i| i["name"] == *name);
            for item in b.iter().chain(o.iter()) {
                let name = &item["name"];
                let (bi, oi) = (find(b, name).map(|i| &b[i]), find(o, name).map(|i| &o[i]));
                if bi == oi {
                    continue;
                }
                let here = format!("{path}[{}]", name.as_str().unwrap_or(""));
                match (oi, find(t, name)) {
                    (None, Some(ti)) if Some(&t[ti]) == bi => {
                        t.remove(ti);
                    }
                    (None, None) => {}
                    (Some(oi), None) if bi.is_none() => t.push(oi.clone()),
                    (Some(oi), Some(ti)) => merge3(bi, Some(oi), &mut t[ti], &here)?,
                    _ => return Err(RebaseError::Conflict { path: here }),
                }
            }
            Ok(())
        }
        (_, Some(ov), tv) => {
            if base == Some(&*tv) || ov == tv {
                *tv = ov.clone();
                Ok(())
            } else {
                Err(conflict())
            }
        }
        (_, None, _) => Err(conflict()),
    }
}

#[cfg(test)]
mod rebase_tests {
    use super::*;

    const BASE: &str = "metadata:\n  name: c\nwebhooks:\n- name: a\n  failurePolicy: Fail\n  timeoutSeconds: 10\n- name: b\n  failurePolicy: Fail\n";

    #[test]
    fn an_edit_goes_onto_the_clusters_newer_version() {
        let ours = BASE.replace("timeoutSeconds: 10", "timeoutSeconds: 5");
        // The cluster changed another webhook meanwhile, and added a label.
        let theirs = "metadata:\n  name: c\n  labels:\n    team: x\nwebhooks:\n- name: a\n  failurePolicy: Fail\n  timeoutSeconds: 10\n- name: b\n  failurePolicy: Ignore\n";
        let merged: Value = serde_saphyr::from_str(&rebase(BASE, &ours, theirs).unwrap()).unwrap();
        assert_eq!(merged["webhooks"][0]["timeoutSeconds"], 5);
        assert_eq!(merged["webhooks"][1]["failurePolicy"], "Ignore");
        assert_eq!(merged["metadata"]["labels"]["team"], "x");
    }

    #[test]
    fn the_same_field_changed_both_ways_is_a_conflict_named_by_its_path() {
        let ours = BASE.replace("timeoutSeconds: 10", "timeoutSeconds: 5");
        let theirs = BASE.replace("timeoutSeconds: 10", "timeoutSeconds: 20");
        assert_eq!(
            rebase(BASE, &ours, &theirs),
            Err(RebaseError::Conflict {
                path: "webhooks[a].timeoutSeconds".into()
            })
        );
        assert!(matches!(
            rebase(BASE, "- not an object", BASE),
            Err(RebaseError::Unreadable { .. })
        ));
    }
}

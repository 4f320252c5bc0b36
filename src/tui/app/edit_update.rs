//! How the one update follows the editing of configurations: buffers opened, checked, saved,
//! recovered and reloaded; edits put in force and re-dispatched; the What-if of their results.

use std::path::PathBuf;

use ratatui_textarea::CursorMove;

use super::{Baseline, Command, RecoveredText, Run, State, View};
use crate::api::{WebhookConfiguration, WebhookKind};
use crate::config::policy::PolicySet;
use crate::edit::BufferKey;
use crate::live::cluster::AdmissionKind;
use crate::replay::run::ReplayEvent;
use crate::tui::editing::{
    Buffer, BufferOrigin, ChangeCause, EditProblem, check_for, differing_configurations,
    dispatch_rank, policy_template, template,
};
use crate::tui::model::HookCounts;
use crate::tui::source::SourceMsg;

impl State {
    /// The release modelled, as edits are checked for it: the status bar's release (which a
    /// live source may follow with a note on the server's), else the newest.
    pub fn modelled_version(&self) -> crate::KubeVersion {
        (self.kube_version.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }

    /// The buffer the Edit view shows.
    pub fn current_buffer(&self) -> Option<&Buffer> {
        self.buffers.get(self.buffer)
    }

    /// Whether any buffer has unsaved edits.
    pub fn unsaved(&self) -> Vec<String> {
        self.buffers
            .iter()
            .filter(|b| b.modified())
            .map(|b| b.origin.label())
            .collect()
    }

    /// Every configuration in force, from every buffer.
    pub fn configurations_in_force(&self) -> Vec<WebhookConfiguration> {
        self.buffers
            .iter()
            .flat_map(|b| b.in_force.iter().cloned())
            .collect()
    }

    /// Every admission policy and binding in force, from every buffer in order (a later one of
    /// a kind and name replacing an earlier one, as when the files were loaded).
    pub fn policies_in_force(&self) -> PolicySet {
        let mut set = PolicySet::default();
        for p in self.buffers.iter().flat_map(|b| &b.policies_in_force) {
            set.insert(p.clone());
        }
        set
    }

    pub(in crate::tui) fn open_documents(
        &mut self,
        documents: &[crate::tui::source::ConfigDocument],
    ) -> Vec<Command> {
        self.buffers = documents.iter().map(Buffer::from_document).collect();
        self.buffer = 0;
        self.offer_recovery();
        let files: Vec<(PathBuf, String)> = self
            .buffers
            .iter()
            .filter_map(|b| b.path().map(|p| (p.clone(), b.saved.clone())))
            .collect();
        if files.is_empty() {
            Vec::new()
        } else {
            vec![Command::Watch(files)]
        }
    }

    /// Takes in the configurations a live cluster has in force, as documents: a buffer per
    /// object. A buffer without edits follows the cluster; one with edits keeps them, and the
    /// cluster's new text waits for `:reload` or `:keep`. An object deleted in the cluster
    /// takes its buffer with it, unless the buffer has edits.
    pub(in crate::tui) fn sync_cluster_documents(
        &mut self,
        documents: Vec<crate::tui::source::ConfigDocument>,
    ) -> Vec<Command> {
        let origins: Vec<BufferOrigin> = documents
            .iter()
            .map(|d| BufferOrigin::of(&d.origin))
            .collect();
        let current = self.buffers.get(self.buffer).map(|b| b.origin.clone());
        let mut gone = Vec::new();
        self.buffers.retain_mut(|b| {
            if !matches!(b.origin, BufferOrigin::Cluster { .. }) || origins.contains(&b.origin) {
                return true;
            }
            if !b.modified() {
                gone.push(b.origin.label());
                return false;
            }
            // The cluster's text is now nothing; said once, when that changes.
            if !b.saved.is_empty() {
                b.saved.clear();
                gone.push(format!("{} (your edits are kept)", b.origin.label()));
            }
            true
        });
        let mut commands = Vec::new();
        for (d, origin) in documents.into_iter().zip(origins) {
            let Some(i) = self.buffers.iter().position(|b| b.origin == origin) else {
                self.buffers.push(Buffer::from_document(&d));
                continue;
            };
            let b = &mut self.buffers[i];
            if d.text == b.saved {
                continue;
            }
            if b.modified() {
                if b.disk_changed.as_ref() != Some(&d.text) {
                    let text = format!(
                        "{} changed in the cluster while you edit it: :rebase puts your edits on it, :reload takes it, :keep keeps yours",
                        b.origin.label()
                    );
                    b.disk_changed = Some(d.text);
                    self.say(text, true);
                }
                continue;
            }
            b.replace_text(&d.text);
            b.saved = d.text;
            b.in_force = d.configurations;
            b.policies_in_force = d.policies;
            b.disk_changed = None;
            let generation = b.generation;
            commands.extend(self.check_due(i, generation));
        }
        if !gone.is_empty() {
            self.say(
                format!("deleted in the cluster: {}", gone.join(", ")),
                false,
            );
        }
        // In dispatch order, as the Webhooks view lists them; the console's own after.
        self.buffers.sort_by(|a, b| {
            let rank = |o: &BufferOrigin| match o {
                BufferOrigin::Cluster { kind, name } => (dispatch_rank(*kind), name.clone()),
                _ => (u8::MAX, String::new()),
            };
            rank(&a.origin).cmp(&rank(&b.origin))
        });
        self.buffer = current
            .and_then(|o| self.buffers.iter().position(|b| b.origin == o))
            .unwrap_or(0)
            .min(self.buffers.len().saturating_sub(1));
        commands
    }

    /// Whether the configurations in force differ from the live cluster's: a buffer has edits,
    /// or was created in the console.
    pub(in crate::tui) fn live_edited(&self) -> bool {
        self.buffers
            .iter()
            .any(|b| b.modified() || !matches!(b.origin, BufferOrigin::Cluster { .. }))
    }

    /// The buffer defining configuration `name`, or the selected webhook's.
    pub(in crate::tui) fn buffer_for(
        &self,
        name: Option<&str>,
    ) -> Result<(usize, Option<String>), String> {
        let name = match name {
            None if self.view == View::Chain => {
                let call = self
                    .selected_entry()
                    .and_then(|e| e.replayed.outcome.calls.get(self.chain.step));
                return match call {
                    Some(c) => {
                        let kinds = c.policy.is_some().then_some(match c.phase {
                            WebhookKind::Validating => (
                                "ValidatingAdmissionPolicy",
                                "ValidatingAdmissionPolicyBinding",
                            ),
                            WebhookKind::Mutating => {
                                ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")
                            }
                        });
                        self.buffer_of_hook(c.phase, &c.configuration, &c.webhook, kinds)
                    }
                    None => Err("no step is selected".into()),
                };
            }
            None if self.view == View::Webhooks => {
                return match self.hooks.get(self.hook_cursor.selected) {
                    Some(h) => {
                        self.buffer_of_hook(h.phase, &h.configuration, &h.webhook, h.policy_kind())
                    }
                    None => Err("no webhook is selected".into()),
                };
            }
            Some(n) => Some(n.to_string()),
            None if self.view == View::Webhooks => self
                .hooks
                .get(self.hook_cursor.selected)
                .map(|h| h.configuration.clone()),
            None => None,
        };
        // `Kind/name`: a policy or binding of that kind.
        if let Some((kind, object)) = name.as_deref().and_then(|n| n.split_once('/')) {
            return self
                .buffers
                .iter()
                .position(|b| b.defines_policy(kind, object))
                .map(|i| (i, name.clone()))
                .ok_or_else(|| format!("no loaded file defines {kind} {object:?}"));
        }
        match name {
            Some(n) => self
                .buffers
                .iter()
                .position(|b| b.names().contains(&n))
                .map(|i| (i, Some(n.clone())))
                .ok_or_else(|| format!("no loaded configuration is named {n:?}")),
            None if self.buffers.is_empty() => Err(
                "no configuration is loaded: `:new mutating NAME` or `:new validating NAME` creates one"
                    .into(),
            ),
            None => Ok((self.buffer.min(self.buffers.len() - 1), None)),
        }
    }

    /// The buffer defining a webhook's configuration, or a policy's (its binding's when the
    /// policy is defined nowhere), with the line to show: what `e` opens on a Webhooks row or a
    /// Chain step.
    pub(in crate::tui) fn buffer_of_hook(
        &self,
        phase: WebhookKind,
        configuration: &str,
        binding: &str,
        policy_kind: Option<(&'static str, &'static str)>,
    ) -> Result<(usize, Option<String>), String> {
        let Some((policy, binding_kind)) = policy_kind else {
            return self
                .buffers
                .iter()
                .position(|b| {
                    (b.in_force.iter().chain(&b.check.configurations))
                        .any(|c| c.kind == phase && c.name == configuration)
                })
                .map(|i| (i, Some(configuration.to_string())))
                .ok_or_else(|| format!("no loaded configuration is named {configuration:?}"));
        };
        for (kind, name) in [(policy, configuration), (binding_kind, binding)] {
            if let Some(i) = self
                .buffers
                .iter()
                .position(|b| b.defines_policy(kind, name))
            {
                return Ok((i, Some(format!("{kind}/{name}"))));
            }
        }
        Err(format!(
            "{policy} {configuration:?} and its binding {binding:?} are in no loaded file"
        ))
    }

    pub(in crate::tui) fn edit(&mut self, name: Option<&str>) -> Vec<Command> {
        match self.buffer_for(name) {
            Ok((i, name)) => self.open_at(i, name.as_deref()),
            Err(e) => self.say(e, true),
        }
        Vec::new()
    }

    /// The Edit view on buffer `i`, at the object `name` names (`Kind/name` for a policy or
    /// binding, a configuration's name otherwise).
    pub(in crate::tui) fn open_at(&mut self, i: usize, name: Option<&str>) {
        self.buffer = i;
        if let Some(n) = name {
            let b = &self.buffers[i];
            let line = match n.split_once('/') {
                Some((kind, name)) => b.line_of_object(kind, name).unwrap_or(1),
                None => b.line_of(n),
            };
            // Its apiVersion, kind and metadata lines above it.
            self.buffers[i].show_line(line, 3);
        }
        self.view = View::Editor;
    }

    pub(in crate::tui) fn edit_external(&mut self, name: Option<&str>) -> Vec<Command> {
        match self.buffer_for(name) {
            Ok((i, _)) => {
                self.buffer = i;
                vec![Command::ExternalEdit {
                    buffer: i,
                    text: self.buffers[i].text(),
                }]
            }
            Err(e) => {
                self.say(e, true);
                Vec::new()
            }
        }
    }

    pub(in crate::tui) fn new_buffer(
        &mut self,
        mutating: bool,
        name: Option<String>,
    ) -> Vec<Command> {
        self.new_buffers += 1;
        let n = self.new_buffers;
        let name = name.unwrap_or_else(|| format!("new-webhook-{n}"));
        let kind = if mutating {
            WebhookKind::Mutating
        } else {
            WebhookKind::Validating
        };
        let mut b = Buffer::new(BufferOrigin::New(n), "", Vec::new());
        b.replace_text(&template(kind, &name));
        self.buffers.push(b);
        self.buffer = self.buffers.len() - 1;
        self.view = View::Editor;
        self.say(
            format!("new configuration {name}: it takes effect once valid; :w PATH saves it"),
            false,
        );
        self.changed(self.buffer)
    }

    /// `:new mutating-policy|validating-policy [NAME]`: a policy and its binding from a
    /// template, under the newest apiVersion the modelled release serves.
    pub(in crate::tui) fn new_policy_buffer(
        &mut self,
        mutating: bool,
        name: Option<String>,
    ) -> Vec<Command> {
        let version = self.modelled_version();
        let kind = if mutating {
            "MutatingAdmissionPolicy"
        } else {
            "ValidatingAdmissionPolicy"
        };
        let Some(api_version) = crate::config::policy::served_api_version(kind, version) else {
            self.say(format!("Kubernetes {version} serves no {kind}"), true);
            return Vec::new();
        };
        self.new_buffers += 1;
        let n = self.new_buffers;
        let name = name.unwrap_or_else(|| format!("new-policy-{n}"));
        let mut b = Buffer::new(BufferOrigin::New(n), "", Vec::new());
        b.replace_text(&policy_template(kind, api_version, &name));
        self.buffers.push(b);
        self.buffer = self.buffers.len() - 1;
        self.view = View::Editor;
        self.say(
            format!(
                "new {kind} {name} with its binding: it takes effect once valid; :w PATH saves it"
            ),
            false,
        );
        self.changed(self.buffer)
    }

    /// After a change of a buffer's text: check it once typing pauses.
    fn changed(&mut self, buffer: usize) -> Vec<Command> {
        match self.buffers.get(buffer) {
            Some(b) => vec![Command::CheckLater {
                buffer,
                generation: b.generation,
            }],
            None => Vec::new(),
        }
    }

    /// A key of the Edit view, in its mode: None when it is not the editor's (the bindings
    /// decide).
    pub(in crate::tui) fn editor_key(
        &mut self,
        key: crossterm::event::KeyEvent,
    ) -> Option<Vec<Command>> {
        use crate::tui::edit_keys::Outcome;
        let b = self.buffers.get_mut(self.buffer)?;
        match self.editor.key(b, key) {
            Outcome::Edited => {
                b.generation += 1;
                Some(self.changed(self.buffer))
            }
            Outcome::Moved => Some(Vec::new()),
            Outcome::Undo(redo) => Some(self.undo(redo)),
            Outcome::Notice { text, error } => {
                self.say(text, error);
                Some(Vec::new())
            }
            Outcome::NotMine => None,
        }
    }

    pub(in crate::tui) fn undo(&mut self, redo: bool) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(self.buffer) else {
            return Vec::new();
        };
        let done = b.undo_step(redo);
        if done {
            b.generation += 1;
            self.changed(self.buffer)
        } else {
            self.say(
                if redo {
                    "nothing to redo"
                } else {
                    "nothing to undo"
                },
                false,
            );
            Vec::new()
        }
    }

    /// `:delete`: the current buffer's text is empty, and its configurations leave those in
    /// force.
    pub(in crate::tui) fn confirm_delete(&mut self) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(self.buffer) else {
            self.say("no configuration is open", true);
            return Vec::new();
        };
        if !b.text().trim().is_empty() {
            self.say(
                ":delete confirms the deletion an emptied buffer asks for; this one is not empty",
                true,
            );
            return Vec::new();
        }
        if !b.has_in_force() {
            self.say("nothing in force from this buffer to delete", false);
            return Vec::new();
        }
        let n = b.in_force.len() + b.policies_in_force.len();
        b.in_force.clear();
        b.policies_in_force.clear();
        b.check.errors.clear();
        self.edit_generation += 1;
        self.say(
            format!(
                "deleted {n} object{} from those in force; re-dispatching",
                if n == 1 { "" } else { "s" }
            ),
            false,
        );
        vec![Command::Redispatch {
            generation: self.edit_generation,
            configurations: self.configurations_in_force(),
            policies: self.policies_in_force(),
            fresh: false,
        }]
    }

    pub(in crate::tui) fn next_buffer(&mut self) {
        if !self.buffers.is_empty() {
            self.buffer = (self.buffer + 1) % self.buffers.len();
        }
    }

    /// Checks a buffer whose typing paused; a valid change of the configurations in force
    /// asks for a re-dispatch.
    pub(in crate::tui) fn check_due(&mut self, buffer: usize, generation: u64) -> Vec<Command> {
        let Some(b) = self.buffers.get(buffer) else {
            return Vec::new();
        };
        if b.generation != generation || b.checked == generation {
            return Vec::new();
        }
        let text = b.text();
        let version = self.modelled_version();
        let mut checked = check_for(
            &text,
            &b.origin.label(),
            (&b.in_force, &b.policies_in_force),
            version,
        );
        // Two objects of one kind cannot share a name.
        for c in &checked.configurations {
            let twin = self.buffers.iter().enumerate().find(|(i, o)| {
                *i != buffer
                    && o.in_force
                        .iter()
                        .any(|x| x.name == c.name && x.kind == c.kind)
            });
            if let Some((_, o)) = twin {
                checked.errors.push(EditProblem {
                    line: b.line_of(&c.name),
                    column: None,
                    field: "metadata.name".into(),
                    message: format!(
                        "{} {:?} is also defined in {}",
                        c.kind.configuration_kind(),
                        c.name,
                        o.origin.label()
                    ),
                });
            }
        }
        // Nor can two policies (or bindings) of one kind.
        for p in &checked.policies {
            let twin = self.buffers.iter().enumerate().find(|(i, o)| {
                *i != buffer
                    && (o.policies_in_force.iter())
                        .any(|x| x.kind() == p.kind() && x.name() == p.name())
            });
            if let Some((_, o)) = twin {
                checked.errors.push(EditProblem {
                    line: b.line_of_object(p.kind(), p.name()).unwrap_or(1),
                    column: None,
                    field: "metadata.name".into(),
                    message: format!(
                        "{} {:?} is also defined in {}",
                        p.kind(),
                        p.name(),
                        o.origin.label()
                    ),
                });
            }
        }
        // An empty text is a deletion of the configurations in force, never taken silently.
        if text.trim().is_empty() && b.has_in_force() {
            let names = b.in_force_names();
            checked.errors.push(EditProblem {
                line: 1,
                column: None,
                field: String::new(),
                message: format!(
                    "the text is empty: it would delete {} from the configurations in force (:delete confirms, undo brings the text back)",
                    names.join(", ")
                ),
            });
        }
        let mut commands = Vec::new();
        let b = &mut self.buffers[buffer];
        b.checked = generation;
        let errors = checked.errors.len();
        let valid = errors == 0;
        if valid
            && (checked.configurations != b.in_force || checked.policies != b.policies_in_force)
        {
            b.in_force = checked.configurations.clone();
            b.policies_in_force = checked.policies.clone();
            self.edit_generation += 1;
            commands.push(Command::Redispatch {
                generation: self.edit_generation,
                configurations: Vec::new(),
                policies: PolicySet::default(),
                fresh: false,
            });
        }
        let b = &mut self.buffers[buffer];
        b.check = checked;
        if b.modified() {
            commands.push(Command::WriteRecovery {
                key: b.origin.recovery_key(),
                text,
                base: b.saved.clone(),
            });
        } else {
            commands.push(Command::DiscardRecovery(b.origin.recovery_key()));
        }
        if b.text().trim().is_empty() && b.has_in_force() {
            let names = b.in_force_names();
            self.say(
                format!(
                    "the text is empty: a deletion of {}, still in force until :delete confirms it (u undoes)",
                    names.join(", ")
                ),
                true,
            );
        } else if let Some(first) = b.check.errors.first().map(|e| e.line) {
            self.say(
                format!(
                    "{errors} error{} (line {first}): the last valid configuration stays in force",
                    if errors == 1 { "" } else { "s" },
                ),
                true,
            );
        }
        let all = self.configurations_in_force();
        let all_policies = self.policies_in_force();
        for c in &mut commands {
            if let Command::Redispatch {
                configurations,
                policies,
                ..
            } = c
            {
                *configurations = all.clone();
                *policies = all_policies.clone();
            }
        }
        commands
    }

    pub(in crate::tui) fn save(&mut self, path: Option<String>) -> Vec<Command> {
        let Some(b) = self.buffers.get(self.buffer) else {
            self.say("nothing to save: no configuration is open", true);
            return Vec::new();
        };
        if b.text().trim().is_empty() && b.has_in_force() {
            self.say(
                "the text is empty: :delete confirms the deletion first, then :w writes the empty file",
                true,
            );
            return Vec::new();
        }
        let target = match path {
            Some(p) => PathBuf::from(p),
            None => match b.path() {
                Some(p) => p.clone(),
                None => {
                    self.say(
                        format!(
                            "{} has no file: `:w PATH` saves it where you say",
                            b.origin.label()
                        ),
                        true,
                    );
                    return Vec::new();
                }
            },
        };
        vec![Command::Save {
            buffer: self.buffer,
            path: target,
            text: b.text(),
        }]
    }

    pub(in crate::tui) fn saved(
        &mut self,
        buffer: usize,
        text: String,
        result: Result<(PathBuf, Option<PathBuf>), String>,
    ) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(buffer) else {
            return Vec::new();
        };
        match result {
            Ok((path, backup)) => {
                let mut commands = vec![Command::DiscardRecovery(b.origin.recovery_key())];
                if b.path() != Some(&path) {
                    b.save_path = Some(path.clone());
                    commands.push(Command::Watch(vec![(path.clone(), text.clone())]));
                }
                b.saved = text;
                let backup = backup
                    .map(|p| format!(" (previous version kept as {})", p.display()))
                    .unwrap_or_default();
                let invalid = if b.valid() || b.checked != b.generation {
                    ""
                } else {
                    "; it is not valid, the last valid configuration stays in force"
                };
                self.say(format!("saved {}{backup}{invalid}", path.display()), false);
                commands
            }
            Err(e) => {
                self.say(format!("not saved: {e}; the edit is kept"), true);
                Vec::new()
            }
        }
    }

    pub(in crate::tui) fn external_edited(
        &mut self,
        buffer: usize,
        result: Result<String, String>,
    ) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(buffer) else {
            return Vec::new();
        };
        match result {
            // Back from the user's editor in normal mode, wherever the user was: what they
            // type next is a key or a command, never text.
            Ok(text) if text == b.text() => {
                self.editor.normal();
                self.say("Edit cancelled, no changes made.", false);
                Vec::new()
            }
            Ok(text) => {
                // Back where the user was: the view they left, the text taken in one undo step.
                self.editor.normal();
                let b = &mut self.buffers[buffer];
                let at = b.area.cursor();
                b.replace_text(&text);
                // The cursor where it was (within the new text).
                let row = at.0.min(b.area.lines().len().saturating_sub(1));
                let col = at.1.min(b.area.lines()[row].chars().count());
                b.area.move_cursor(CursorMove::Jump(
                    u16::try_from(row).unwrap_or(u16::MAX),
                    u16::try_from(col).unwrap_or(u16::MAX),
                ));
                let generation = b.generation;
                let label = b.origin.label();
                self.buffer = buffer;
                let commands = self.check_due(buffer, generation);
                if self.message.as_ref().is_none_or(|(_, error)| !error) {
                    self.say(
                        format!(
                            "took the editor's text of {label} (u in the Edit view takes it back)"
                        ),
                        false,
                    );
                }
                commands
            }
            Err(e) => {
                self.editor.normal();
                self.say(format!("editor: {e}"), true);
                Vec::new()
            }
        }
    }

    pub(in crate::tui) fn file_changed(
        &mut self,
        path: PathBuf,
        text: Result<String, String>,
    ) -> Vec<Command> {
        let Some(i) = self.buffers.iter().position(|b| b.path() == Some(&path)) else {
            return Vec::new();
        };
        let text = match text {
            Ok(t) => t,
            Err(e) => {
                self.say(format!("{}: {e}", path.display()), true);
                return Vec::new();
            }
        };
        let b = &mut self.buffers[i];
        if text == b.saved {
            return Vec::new();
        }
        if b.modified() {
            b.disk_changed = Some(text);
            self.say(
                format!(
                    "{} changed on disk: :reload takes it, :keep keeps your edits",
                    path.display()
                ),
                true,
            );
            return Vec::new();
        }
        b.replace_text(&text);
        b.saved = text;
        let generation = b.generation;
        self.say(
            format!("{} changed on disk: reloaded", path.display()),
            false,
        );
        self.check_due(i, generation)
    }

    /// `:redispatch`: every request through the configurations in force again, every webhook
    /// called anew (a webhook that was down or slow may answer now). The what-if view then
    /// compares with the first dispatch. Asked while the first dispatch runs, the source does it
    /// once that is done.
    pub(in crate::tui) fn redispatch_fresh(&mut self) -> Vec<Command> {
        let first_running = !self.progress.done && self.live.is_none();
        if self.entries.is_empty() && !first_running {
            self.say(
                "nothing to dispatch again: no request has been replayed",
                true,
            );
            return Vec::new();
        }
        self.edit_generation += 1;
        let text = if first_running {
            "every request will be dispatched again, calling every webhook, once the first dispatch is done".to_string()
        } else {
            format!(
                "dispatching {} requests again, calling every webhook",
                self.entries.len()
            )
        };
        self.say(text, false);
        vec![Command::Redispatch {
            generation: self.edit_generation,
            configurations: self.configurations_in_force(),
            policies: self.policies_in_force(),
            fresh: true,
        }]
    }

    pub(in crate::tui) fn reload(&mut self, keep_mine: bool) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(self.buffer) else {
            return Vec::new();
        };
        let Some(disk) = b.disk_changed.take() else {
            self.say("the file on disk has not changed", false);
            return Vec::new();
        };
        b.saved = disk.clone();
        if keep_mine {
            self.say("your edits are kept; :w overwrites the file on disk", false);
            return Vec::new();
        }
        b.replace_text(&disk);
        let generation = b.generation;
        self.check_due(self.buffer, generation)
    }

    /// `:rebase`: puts the current buffer's edits on the cluster's newer version of it (what
    /// the edit changed, changed so in the newer version; see
    /// [`rebase`](crate::live::cluster::rebase)); a field both changed is refused by name.
    pub(in crate::tui) fn rebase(&mut self) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(self.buffer) else {
            self.say("no configuration is open", true);
            return Vec::new();
        };
        let Some(newer) = b.disk_changed.clone() else {
            let text = format!("{}: the cluster has not changed it", b.origin.label());
            self.say(text, false);
            return Vec::new();
        };
        match crate::live::cluster::rebase(&b.saved, &b.text(), &newer) {
            Ok(text) => {
                b.disk_changed = None;
                b.saved = newer;
                b.replace_text(&text);
                let generation = b.generation;
                let label = b.origin.label();
                self.say(
                    format!("{label}: your edits are on the cluster's newest version"),
                    false,
                );
                self.check_due(self.buffer, generation)
            }
            Err(e) => {
                let text = format!("{}: {e}", b.origin.label());
                self.say(text, true);
                Vec::new()
            }
        }
    }

    /// `:revert`: drops the current buffer's edits, taking the text on disk (a live cluster's
    /// newest version of the configuration, when it changed meanwhile).
    pub(in crate::tui) fn revert(&mut self) -> Vec<Command> {
        let Some(b) = self.buffers.get_mut(self.buffer) else {
            self.say("no configuration is open", true);
            return Vec::new();
        };
        if let Some(newer) = b.disk_changed.take() {
            b.saved = newer;
        } else if !b.modified() {
            let text = format!("{}: no edit to drop", b.origin.label());
            self.say(text, false);
            return Vec::new();
        }
        let text = b.saved.clone();
        b.replace_text(&text);
        let generation = b.generation;
        let label = b.origin.label();
        let mut commands = self.check_due(self.buffer, generation);
        commands.push(Command::DiscardRecovery(
            self.buffers[self.buffer].origin.recovery_key(),
        ));
        self.say(format!("{label}: your edits are dropped"), false);
        commands
    }

    pub(in crate::tui) fn recover(&mut self) -> Vec<Command> {
        let recovered: Vec<RecoveredText> = std::mem::take(&mut self.recovered)
            .into_iter()
            .filter(|r| self.ours(r))
            .collect();
        if recovered.is_empty() {
            self.say("nothing to recover", false);
            return Vec::new();
        }
        let mut commands = Vec::new();
        for r in recovered {
            let at = self
                .buffers
                .iter()
                .position(|b| b.origin.recovery_key() == r.key);
            let i = match at {
                Some(i) => i,
                None => {
                    let origin = match &r.key {
                        BufferKey::File(p) => BufferOrigin::File(p.clone()),
                        BufferKey::Embedded(n) => BufferOrigin::Embedded(n.clone()),
                        BufferKey::New(_) => {
                            self.new_buffers += 1;
                            BufferOrigin::New(self.new_buffers)
                        }
                        BufferKey::Cluster(id) => {
                            let (resource, name) = id.split_once('/').unwrap_or(("", id));
                            let kind = AdmissionKind::ALL
                                .into_iter()
                                .find(|k| k.resource() == resource)
                                .unwrap_or(AdmissionKind::MutatingWebhookConfiguration);
                            BufferOrigin::Cluster {
                                kind,
                                name: name.to_string(),
                            }
                        }
                    };
                    let saved = match &origin {
                        BufferOrigin::File(p) => std::fs::read_to_string(p).unwrap_or_default(),
                        _ => String::new(),
                    };
                    let mut b = Buffer::new(origin, &saved, Vec::new());
                    b.generation = 1;
                    self.buffers.push(b);
                    self.buffers.len() - 1
                }
            };
            let b = &mut self.buffers[i];
            b.replace_text(&r.text);
            // Show the first line that differs from the saved text.
            let first = b
                .saved
                .lines()
                .zip(r.text.lines())
                .position(|(a, c)| a != c)
                .unwrap_or_else(|| b.saved.lines().count().min(r.text.lines().count()));
            b.goto_line(first + 1);
            self.buffer = i;
            commands.extend(self.changed(i));
        }
        self.view = View::Editor;
        self.say("recovered the unsaved edits: :w saves them", false);
        commands
    }

    pub(in crate::tui) fn discard_recovered(&mut self) -> Vec<Command> {
        let recovered: Vec<RecoveredText> = std::mem::take(&mut self.recovered)
            .into_iter()
            .filter(|r| self.ours(r))
            .collect();
        self.say(
            format!("dropped {} recovered edit(s)", recovered.len()),
            false,
        );
        recovered
            .into_iter()
            .map(|r| Command::DiscardRecovery(r.key))
            .collect()
    }

    /// Takes in the recovery copies found at start: those of files that no longer exist are
    /// pruned; the rest wait for this run's buffers, and only those of a buffer this run opened
    /// (or of a new one) are offered.
    pub(in crate::tui) fn recovery_found(&mut self, found: Vec<RecoveredText>) -> Vec<Command> {
        let (stale, kept): (Vec<RecoveredText>, Vec<RecoveredText>) = found
            .into_iter()
            .partition(|r| matches!(&r.key, BufferKey::File(p) if !p.exists()));
        self.recovered = kept;
        self.offer_recovery();
        stale
            .into_iter()
            .map(|r| Command::DiscardRecovery(r.key))
            .collect()
    }

    /// Whether a recovery copy belongs to this run: a buffer it opened whose text is still the
    /// one the edits started from (when the copy says which), or a new buffer.
    fn ours(&self, r: &RecoveredText) -> bool {
        matches!(r.key, BufferKey::New(_))
            || self.buffers.iter().any(|b| {
                b.origin.recovery_key() == r.key
                    && r.base_hash
                        .is_none_or(|h| h == crate::edit::content_hash(&b.saved))
            })
    }

    /// Says, once this run's buffers are open, which unsaved edits `:recover` brings back.
    pub(in crate::tui) fn offer_recovery(&mut self) {
        let names: Vec<String> = (self.recovered.iter())
            .filter(|r| self.ours(r))
            .map(|r| match &r.key {
                BufferKey::File(p) => p
                    .file_name()
                    .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into()),
                other => other.to_string(),
            })
            .collect();
        if names.is_empty() {
            return;
        }
        self.say(
            format!(
                "unsaved edits of {} from an earlier session: :recover opens, :discard drops",
                names.join(", ")
            ),
            false,
        );
    }

    /// Re-dispatch messages from the source.
    pub(in crate::tui) fn on_redispatch(&mut self, msg: SourceMsg) {
        match msg {
            SourceMsg::RedispatchStarted {
                generation,
                hooks,
                total,
            } if generation == self.edit_generation => {
                self.run = Some(Run {
                    generation,
                    hooks,
                    total,
                    results: Vec::with_capacity(total),
                    metrics: crate::metrics::Metrics::new(),
                    timeline: Default::default(),
                });
            }
            SourceMsg::Redispatched {
                generation,
                event,
                metrics,
            } => {
                if let Some(run) = self.run.as_mut().filter(|r| r.generation == generation) {
                    if let ReplayEvent::Replayed(r) = *event {
                        run.timeline.record(r.outcome.elapsed, metrics.as_deref());
                        run.results.push(r);
                    }
                    if let Some(m) = metrics {
                        run.metrics.merge(&m);
                    }
                }
            }
            SourceMsg::RedispatchFinished {
                generation,
                reused,
                sent,
            } => {
                let Some(run) = self.run.take() else {
                    return;
                };
                if run.generation != generation {
                    self.run = Some(run);
                    return;
                }
                self.finish_run(run, reused, sent);
            }
            _ => {}
        }
    }

    fn finish_run(&mut self, run: Run, reused: u64, sent: u64) {
        self.redispatch_calls = (reused, sent);
        let entries = std::mem::take(&mut self.entries);
        self.hooks = run.hooks;
        if self.baseline.is_none() {
            self.baseline = Some(Baseline { entries });
        }
        let selected = self.requests.selected;
        self.annotations.clear();
        self.requests.clear();
        self.metrics = run.metrics;
        self.timeline = run.timeline;
        self.hook_counts = vec![HookCounts::default(); self.hooks.len()];
        for r in run.results {
            self.push_replayed(r);
        }
        self.refilter();
        if let Some(s) = selected.filter(|&s| s < self.entries.len()) {
            self.requests.focus(s);
        }
        let mut whatif = self
            .baseline
            .as_ref()
            .map(|b| {
                crate::edit::compare(
                    b.entries.iter().map(replayed),
                    self.entries.iter().map(replayed),
                )
            })
            .unwrap_or_default();
        whatif.requests.sort_by_key(|r| (!r.flipped(), r.index));
        self.whatif = whatif;
        // The changes not of the user's making are named; the rest are the edits'.
        let (_, by_other) = self.whatif_attribution();
        let not_yours = if by_other > 0 {
            format!(", {by_other} by changes not yours")
        } else {
            String::new()
        };
        self.say(
            format!(
                "re-dispatched {} requests ({reused} replies reused, {sent} calls sent): {} changed, {} verdicts flipped{not_yours} (7: what-if)",
                self.entries.len(),
                self.whatif.requests.len(),
                self.whatif.flipped().count()
            ),
            false,
        );
        self.whatif_cursor = Default::default();
    }
}

/// The result an entry holds (what the what-if compares).
fn replayed(e: &super::Entry) -> &crate::replay::run::Replayed {
    &e.replayed
}

impl State {
    /// How many What-if rows changed by the user's edits, and how many by changes not theirs
    /// (a row may count in both).
    pub fn whatif_attribution(&self) -> (usize, usize) {
        let causes: Vec<Vec<ChangeCause>> = self
            .whatif
            .requests
            .iter()
            .map(|r| self.whatif_causes(r.index))
            .collect();
        let edit = |c: &ChangeCause| matches!(c, ChangeCause::Edit(_));
        (
            causes.iter().filter(|c| c.iter().any(edit)).count(),
            causes.iter().filter(|c| !c.iter().all(edit)).count(),
        )
    }

    /// Why request `index` (a What-if row) differs from the baseline: for each configuration
    /// whose webhooks decided differently, whether the user's edit, the cluster (or the file on
    /// disk) changed it; the webhooks' answers when no configuration did.
    pub fn whatif_causes(&self, index: usize) -> Vec<ChangeCause> {
        let (Some(before), Some(after)) = (
            self.baseline.as_ref().and_then(|b| b.entries.get(index)),
            self.entries.get(index),
        ) else {
            return Vec::new();
        };
        let mut causes = Vec::new();
        for (kind, name, policy) in
            differing_configurations(&before.replayed.outcome, &after.replayed.outcome)
        {
            // A policy's call names the policy (its binding is the "webhook").
            let policy_kind = match kind {
                WebhookKind::Validating => "ValidatingAdmissionPolicy",
                WebhookKind::Mutating => "MutatingAdmissionPolicy",
            };
            let defines = |b: &&Buffer| {
                if policy {
                    b.defines_policy_or_binding(policy_kind, &name)
                } else {
                    b.defines_configuration(kind, &name)
                }
            };
            let policy_kind = policy.then_some(policy_kind);
            // A policy and its bindings may be in several files: a changed one first.
            let changed =
                |b: &&Buffer| b.changed_since_loaded(kind, &name, policy_kind) || b.modified();
            let buffer = (self.buffers.iter())
                .filter(defines)
                .find(changed)
                .or_else(|| self.buffers.iter().find(defines));
            // A configuration of a file (or of the console) in force as it was loaded is no
            // cause: its webhooks decided differently because an earlier step did (a request
            // a policy no longer denies reaches the validating webhooks).
            if let Some(b) = buffer
                && !matches!(
                    b.origin,
                    BufferOrigin::Cluster { .. } | BufferOrigin::New(_)
                )
                && !b.changed_since_loaded(kind, &name, policy_kind)
            {
                continue;
            }
            let cause = match buffer {
                Some(b) if b.modified() || matches!(b.origin, BufferOrigin::New(_)) => {
                    ChangeCause::Edit(name)
                }
                Some(b) if !matches!(b.origin, BufferOrigin::Cluster { .. }) => {
                    ChangeCause::Disk(name)
                }
                // Without a cluster, only the user's edits take objects away.
                None if self.live.is_none() => ChangeCause::Edit(name),
                _ => {
                    let who = self
                        .live
                        .as_deref()
                        .and_then(|l| {
                            l.changes
                                .iter()
                                .rev()
                                .find(|c| c.kind == kind.into() && c.name == name)
                        })
                        .map(|c| c.who.clone())
                        .unwrap_or_else(|| "unknown".into());
                    ChangeCause::Cluster { name, who }
                }
            };
            if !causes.contains(&cause) {
                causes.push(cause);
            }
        }
        if causes.is_empty() {
            causes.push(ChangeCause::Answers);
        }
        causes
    }
}

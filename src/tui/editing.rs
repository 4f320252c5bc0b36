//! Editing configurations in the console: the buffers, their checks, and what an edit changed.
//! State only; the IO (saving, recovery files, the user's editor, file watching) is done by the
//! event loop on the [`Command`]s these functions return.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ratatui_textarea::{CursorMove, TextArea};

use super::source::{ConfigDocument, DocumentOrigin};
use crate::api::{WebhookConfiguration, WebhookKind};
use crate::config::policy::{PolicyObject, PolicySet};
use crate::edit::BufferKey;
use crate::live::cluster::AdmissionKind;

/// How long the console waits after the last keystroke before checking an edit.
pub const CHECK_DELAY: std::time::Duration = std::time::Duration::from_millis(150);

/// Where a buffer's text came from and where it is saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferOrigin {
    /// A file: saved back to it.
    File(PathBuf),
    /// Built in (the demo): saved only where the user says.
    Embedded(String),
    /// Created in the console from a template (the number orders new buffers).
    New(u32),
    /// An object of a live cluster: applied back with `:apply` (only with `--allow-writes`),
    /// saved only where the user says.
    Cluster {
        /// A webhook configuration's kind, or a policy's or binding's.
        kind: AdmissionKind,
        /// `metadata.name`.
        name: String,
    },
}

impl BufferOrigin {
    /// The key under which unsaved text is kept for recovery (file paths made absolute, as
    /// the recovery store keeps them).
    pub fn recovery_key(&self) -> BufferKey {
        match self {
            BufferOrigin::File(p) => {
                BufferKey::File(std::path::absolute(p).unwrap_or_else(|_| p.clone()))
            }
            BufferOrigin::Embedded(n) => BufferKey::Embedded(n.clone()),
            BufferOrigin::New(n) => BufferKey::New(n.to_string()),
            BufferOrigin::Cluster { kind, name } => {
                BufferKey::Cluster(format!("{}/{name}", kind.resource()))
            }
        }
    }

    /// The origin of a buffer over a document from `origin`.
    pub fn of(origin: &DocumentOrigin) -> BufferOrigin {
        match origin {
            DocumentOrigin::File(p) => BufferOrigin::File(p.clone()),
            DocumentOrigin::Embedded(n) => BufferOrigin::Embedded(n.clone()),
            DocumentOrigin::Cluster { kind, name } => BufferOrigin::Cluster {
                kind: *kind,
                name: name.clone(),
            },
        }
    }

    /// As the tab and messages name it.
    pub fn label(&self) -> String {
        match self {
            BufferOrigin::File(p) => p.display().to_string(),
            BufferOrigin::Embedded(n) => format!("{n} (built in)"),
            BufferOrigin::New(n) => format!("new-{n}.yaml"),
            BufferOrigin::Cluster { kind, name } => {
                format!("{}/{name} (cluster)", kind.resource())
            }
        }
    }
}

/// One problem of an edit, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditProblem {
    /// 1-based line in the buffer.
    pub line: usize,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// Field path (`webhooks[0].failurePolicy`), empty for syntax errors.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The result of checking a buffer's text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Checked {
    /// The configurations, defaulted (only meaningful without errors).
    pub configurations: Vec<WebhookConfiguration>,
    /// The admission policies and bindings, defaulted (only meaningful without errors).
    pub policies: Vec<PolicyObject>,
    /// Errors: any one keeps the edit from taking effect.
    pub errors: Vec<EditProblem>,
    /// Warnings (lint, unknown fields).
    pub warnings: Vec<EditProblem>,
}

/// Editor history entries that undo takes back as one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct UndoGroup {
    /// How many entries.
    entries: usize,
    /// Where the cursor was before a whole replacement of the text: undone, it goes back there
    /// (the editor widget would leave it at the end of the text).
    cursor: Option<(usize, usize)>,
}

impl UndoGroup {
    fn of(entries: usize) -> UndoGroup {
        UndoGroup {
            entries,
            cursor: None,
        }
    }
}

/// One configuration text being edited.
#[derive(Debug, Clone)]
pub struct Buffer {
    /// Where it came from.
    pub origin: BufferOrigin,
    /// The editor widget (text, cursor, undo history).
    pub area: TextArea<'static>,
    /// The text as last loaded or saved; the buffer is modified when its text differs.
    pub saved: String,
    /// Where it is saved when it has no file of its own (`:w PATH`).
    pub save_path: Option<PathBuf>,
    /// Bumped on every change of the text.
    pub generation: u64,
    /// The generation last checked.
    pub checked: u64,
    /// The last check's errors and warnings.
    pub check: Checked,
    /// The configurations in force from this buffer: the last valid text's.
    pub in_force: Vec<WebhookConfiguration>,
    /// The admission policies and bindings in force from this buffer: the last valid text's.
    pub policies_in_force: Vec<PolicyObject>,
    /// What was in force from this buffer when it was opened: what the What-if view's causes
    /// are measured against.
    loaded: (Vec<WebhookConfiguration>, Vec<PolicyObject>),
    /// The text on disk changed elsewhere while this buffer had edits: that text, until the
    /// user chooses (`:reload` or `:keep`).
    pub disk_changed: Option<String>,
    /// The editor's history entries grouped as undo takes them back: a typed word, a whole
    /// replacement of the text (an external edit, a reload), any other edit alone.
    undo_groups: Vec<UndoGroup>,
    /// The groups undone, for redo.
    redo_groups: Vec<UndoGroup>,
    /// The last group is a word being typed (another letter joins it).
    typing_word: bool,
}

impl Buffer {
    /// A buffer over `text`.
    pub fn new(origin: BufferOrigin, text: &str, in_force: Vec<WebhookConfiguration>) -> Buffer {
        Buffer {
            origin,
            area: text_area(text),
            saved: text.to_string(),
            save_path: None,
            generation: 0,
            checked: 0,
            check: Checked::default(),
            loaded: (in_force.clone(), Vec::new()),
            in_force,
            policies_in_force: Vec::new(),
            disk_changed: None,
            undo_groups: Vec::new(),
            redo_groups: Vec::new(),
            typing_word: false,
        }
    }

    /// Takes a key into the editor; true when it changed the text. Letters typed one after
    /// another form one undo step with the blank that ends them.
    pub fn input(&mut self, key: crossterm::event::KeyEvent) -> bool {
        use crossterm::event::{KeyCode, KeyModifiers};
        if !self.area.input(key) {
            return false;
        }
        self.redo_groups.clear();
        let letter = match key.code {
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => Some(c),
            _ => None,
        };
        match (letter, self.undo_groups.last_mut()) {
            (Some(c), Some(n)) if self.typing_word => {
                n.entries += 1;
                self.typing_word = !c.is_whitespace();
            }
            (Some(c), _) => {
                self.undo_groups.push(UndoGroup::of(1));
                self.typing_word = !c.is_whitespace();
            }
            (None, _) => {
                self.undo_groups.push(UndoGroup::of(1));
                self.typing_word = false;
            }
        }
        true
    }

    /// Makes one edit of several history entries (a deleted line, a put line) that undo takes
    /// back in one step; `f` returns the entries it made. True when it made any.
    pub fn edit(&mut self, f: impl FnOnce(&mut TextArea<'static>) -> usize) -> bool {
        let entries = f(&mut self.area);
        self.typing_word = false;
        if entries == 0 {
            return false;
        }
        self.undo_groups.push(UndoGroup::of(entries));
        self.redo_groups.clear();
        true
    }

    /// The word being typed is over (insert mode left): the next letter starts a new undo step.
    pub fn end_typing(&mut self) {
        self.typing_word = false;
    }

    /// Undoes (or redoes) one step: a typed word, a whole replacement, or one other edit. False
    /// when there was nothing to take back.
    pub fn undo_step(&mut self, redo: bool) -> bool {
        self.typing_word = false;
        let (from, to) = if redo {
            (&mut self.redo_groups, &mut self.undo_groups)
        } else {
            (&mut self.undo_groups, &mut self.redo_groups)
        };
        // Entries made before any group was recorded go back one at a time.
        let group = from.pop().unwrap_or(UndoGroup::of(1));
        let mut done = 0;
        for _ in 0..group.entries {
            let ok = if redo {
                self.area.redo()
            } else {
                self.area.undo()
            };
            if !ok {
                break;
            }
            done += 1;
        }
        if done > 0 {
            to.push(UndoGroup {
                entries: done,
                ..group
            });
        }
        if let (false, Some((row, col))) = (redo, group.cursor.filter(|_| done > 0)) {
            let lines = self.area.lines();
            let row = row.min(lines.len().saturating_sub(1));
            let col = col.min(lines[row].chars().count());
            self.area.move_cursor(CursorMove::Jump(
                u16::try_from(row).unwrap_or(u16::MAX),
                u16::try_from(col).unwrap_or(u16::MAX),
            ));
        }
        done > 0
    }

    /// A buffer over a source's document.
    pub fn from_document(d: &ConfigDocument) -> Buffer {
        let mut b = Buffer::new(
            BufferOrigin::of(&d.origin),
            &d.text,
            d.configurations.clone(),
        );
        b.policies_in_force = d.policies.clone();
        b.loaded.1 = d.policies.clone();
        b
    }

    /// Whether what is in force of configuration `name` (`policy`: of the policy of `kind` and
    /// `name` and its bindings) differs from what was when the buffer was opened.
    fn changed_since_loaded(&self, kind: WebhookKind, name: &str, policy: Option<&str>) -> bool {
        match policy {
            None => {
                let of = |list: &[WebhookConfiguration]| -> Vec<WebhookConfiguration> {
                    (list.iter())
                        .filter(|c| c.kind == kind && c.name == name)
                        .cloned()
                        .collect()
                };
                of(&self.in_force) != of(&self.loaded.0)
            }
            Some(policy_kind) => {
                let of = |list: &[PolicyObject]| -> Vec<PolicyObject> {
                    (list.iter())
                        .filter(|p| policy_or_binding_of(p, policy_kind, name))
                        .cloned()
                        .collect()
                };
                of(&self.policies_in_force) != of(&self.loaded.1)
            }
        }
    }

    /// Whether anything from this buffer is in force (a configuration, a policy, a binding).
    pub fn has_in_force(&self) -> bool {
        !self.in_force.is_empty() || !self.policies_in_force.is_empty()
    }

    /// The names of what is in force from this buffer, as `:delete` and its warnings list them.
    fn in_force_names(&self) -> Vec<String> {
        let configurations = self.in_force.iter().map(|c| c.name.clone());
        let policies =
            (self.policies_in_force.iter()).map(|p| format!("{}/{}", p.kind(), p.name()));
        configurations.chain(policies).collect()
    }

    /// The 1-based line where the object of `kind` and `name` starts in the text (its
    /// `metadata.name`), when the text holds it: what `e` on a policy or binding opens.
    pub fn line_of_object(&self, kind: &str, name: &str) -> Option<usize> {
        crate::edit::check::object_line(&self.text(), kind, name)
    }

    /// The text being edited.
    pub fn text(&self) -> String {
        let mut t = self.area.lines().join("\n");
        if self.saved.ends_with('\n') || self.saved.is_empty() {
            t.push('\n');
        }
        t
    }

    /// Whether the text differs from what was loaded or saved.
    pub fn modified(&self) -> bool {
        self.text() != self.saved
    }

    /// Whether the text has been checked and is valid.
    pub fn valid(&self) -> bool {
        self.checked == self.generation && self.check.errors.is_empty()
    }

    /// The file this buffer saves to, if it has one.
    pub fn path(&self) -> Option<&PathBuf> {
        match &self.origin {
            BufferOrigin::File(p) => Some(p),
            _ => self.save_path.as_ref(),
        }
    }

    /// Replaces the whole text (a reload, an external editor), keeping the undo history.
    pub fn replace_text(&mut self, text: &str) {
        let before = self.area.cursor();
        self.area.select_all();
        let cut = self.area.cut();
        let inserted = self
            .area
            .insert_str(text.strip_suffix('\n').unwrap_or(text));
        // One undo step brings back the whole text before.
        let entries = usize::from(cut) + usize::from(inserted);
        if entries > 0 {
            self.undo_groups.push(UndoGroup {
                entries,
                cursor: Some((before.0, before.1)),
            });
            self.redo_groups.clear();
        }
        self.typing_word = false;
        self.area.move_cursor(CursorMove::Top);
        self.generation += 1;
    }

    /// Moves the cursor to a 1-based line.
    pub fn goto_line(&mut self, line: usize) {
        let row = u16::try_from(line.saturating_sub(1)).unwrap_or(u16::MAX);
        self.area.move_cursor(CursorMove::Jump(row, 0));
    }

    /// Moves the cursor to a 1-based line shown near the top of the view, `above` lines of
    /// context over it (a configuration opened at its `name:` shows its start, not its name on
    /// the last row).
    pub fn show_line(&mut self, line: usize, above: usize) {
        let want = line.saturating_sub(1).saturating_sub(above);
        let top = usize::from(self.area.scroll_offset().0);
        let delta = want as isize - top as isize;
        self.area
            .scroll((i16::try_from(delta).unwrap_or(i16::MAX), 0));
        self.goto_line(line);
    }

    /// The 1-based line where the `n`-th (1-based) YAML document starts: the line after the
    /// `n-1`-th `---` separator (the top for the first).
    pub fn document_line(&self, n: usize) -> usize {
        if n <= 1 {
            return 1;
        }
        let mut seen = 0;
        for (i, l) in self.area.lines().iter().enumerate() {
            if l.trim_end() == "---" || l.starts_with("--- ") {
                // A leading separator opens the first document.
                if i == 0 {
                    continue;
                }
                seen += 1;
                if seen == n - 1 {
                    return i + 2;
                }
            }
        }
        1
    }

    /// The 1-based line where configuration `name` starts (its `metadata.name` line, else the
    /// top).
    pub fn line_of(&self, name: &str) -> usize {
        let lines = self.area.lines();
        let plain = format!("name: {name}");
        let quoted = format!("name: \"{name}\"");
        let single = format!("name: '{name}'");
        let json = format!("\"name\": \"{name}\"");
        lines
            .iter()
            .position(|l| {
                let t = l.trim();
                t == plain || t == quoted || t == single || t.starts_with(&json)
            })
            .map_or(1, |i| i + 1)
    }

    /// The names of the configurations, policies and bindings this buffer defines (in force, or
    /// last checked).
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.in_force.iter().map(|c| c.name.clone()).collect();
        let checked = self.check.configurations.iter().map(|c| c.name.as_str());
        let policies = (self.policies_in_force.iter())
            .chain(&self.check.policies)
            .map(PolicyObject::name);
        for n in checked.chain(policies) {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        }
        names
    }

    /// Whether this buffer defines (in force, or last checked) the policy of `kind` and `name`
    /// or a binding of it.
    pub fn defines_policy_or_binding(&self, kind: &str, name: &str) -> bool {
        (self.policies_in_force.iter())
            .chain(&self.check.policies)
            .chain(&self.loaded.1)
            .any(|p| policy_or_binding_of(p, kind, name))
    }

    /// Whether this buffer defines (in force, or last checked) the policy or binding of `kind`
    /// and `name`.
    pub fn defines_policy(&self, kind: &str, name: &str) -> bool {
        (self.policies_in_force.iter())
            .chain(&self.check.policies)
            .any(|p| p.kind() == kind && p.name() == name)
    }
}

/// Whether `p` is the policy of `kind` and `name` or a binding of it.
fn policy_or_binding_of(p: &PolicyObject, kind: &str, name: &str) -> bool {
    match p {
        PolicyObject::Binding(b) if kind == "ValidatingAdmissionPolicy" => {
            b.spec.policy_name == name
        }
        PolicyObject::MutatingBinding(b) if kind == "MutatingAdmissionPolicy" => {
            b.spec.policy_name == name
        }
        _ => p.kind() == kind && p.name() == name,
    }
}

fn text_area(text: &str) -> TextArea<'static> {
    let lines: Vec<String> = text
        .strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect();
    let mut area = TextArea::new(lines);
    area.set_tab_length(2);
    area.set_max_histories(1000);
    area
}

/// The template of a new configuration.
pub fn template(kind: WebhookKind, name: &str) -> String {
    let (kind_name, extra) = match kind {
        WebhookKind::Mutating => (
            "MutatingWebhookConfiguration",
            "    reinvocationPolicy: Never\n",
        ),
        WebhookKind::Validating => ("ValidatingWebhookConfiguration", ""),
    };
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\n\
         kind: {kind_name}\n\
         metadata:\n  name: {name}\n\
         webhooks:\n  \
         - name: {name}.example.com\n    \
           clientConfig:\n      url: https://127.0.0.1:8443/{name}\n    \
           rules:\n      \
           - apiGroups: [\"\"]\n        apiVersions: [\"v1\"]\n        \
             operations: [\"CREATE\"]\n        resources: [\"configmaps\"]\n        \
             scope: \"Namespaced\"\n    \
           failurePolicy: Fail\n    \
           sideEffects: None\n    \
           admissionReviewVersions: [\"v1\"]\n    \
           timeoutSeconds: 5\n{extra}"
    )
}

/// The template of a new admission policy of `kind` and its binding, under `api_version`: a
/// ValidatingAdmissionPolicy that denies ConfigMaps of more than 10 keys, a
/// MutatingAdmissionPolicy that labels new ConfigMaps.
pub fn policy_template(kind: &str, api_version: &str, name: &str) -> String {
    let match_constraints = "  matchConstraints:\n    resourceRules:\n    - apiGroups: [\"\"]\n      apiVersions: [\"v1\"]\n      operations: [\"CREATE\", \"UPDATE\"]\n      resources: [\"configmaps\"]\n";
    let (spec, binding) = if kind == "MutatingAdmissionPolicy" {
        (
            "  reinvocationPolicy: Never\n  mutations:\n  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: >\n        Object{metadata: Object.metadata{labels: {\"checked\": \"yes\"}}}\n",
            format!("spec:\n  policyName: {name}\n"),
        )
    } else {
        (
            "  validations:\n  - expression: \"!has(object.data) || size(object.data) <= 10\"\n    message: at most 10 keys\n    reason: Invalid\n",
            format!("spec:\n  policyName: {name}\n  validationActions: [Deny]\n"),
        )
    };
    format!(
        "apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{match_constraints}{spec}---\napiVersion: {api_version}\nkind: {kind}Binding\nmetadata:\n  name: {name}\n{binding}"
    )
}

/// Checks a buffer's text as the apiserver of the newest release modelled would take it; see
/// [`check_for`].
pub fn check(text: &str, file: &str, previous: &[WebhookConfiguration]) -> Checked {
    check_for(text, file, (previous, &[]), crate::KubeVersion::default())
}

/// Checks a buffer's text as the apiserver of `version` would take it: parsed, defaulted and
/// validated (as an update of `previous`, the configurations, policies and bindings it
/// replaces), its admission policies and bindings too; every problem with its line.
pub fn check_for(
    text: &str,
    file: &str,
    previous: (&[WebhookConfiguration], &[PolicyObject]),
    version: crate::KubeVersion,
) -> Checked {
    let checked = crate::edit::check_for(text, file, previous, version);
    let mut out = Checked {
        configurations: checked.webhook_configurations(),
        policies: checked.policies.iter().map(|p| p.object.clone()).collect(),
        ..Checked::default()
    };
    for p in checked.problems {
        let problem = EditProblem {
            line: p.position.line,
            column: p.position.column,
            field: p.field,
            message: p.message,
        };
        match p.severity {
            crate::edit::Severity::Error => out.errors.push(problem),
            crate::edit::Severity::Warning => out.warnings.push(problem),
        }
    }
    out
}

use super::app::{Baseline, Command, RecoveredText, Run, State, View};
use super::model::HookCounts;
use super::source::SourceMsg;
use crate::replay::run::ReplayEvent;

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

    pub(super) fn open_documents(
        &mut self,
        documents: &[super::source::ConfigDocument],
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
    pub(super) fn sync_cluster_documents(
        &mut self,
        documents: Vec<super::source::ConfigDocument>,
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
    pub(super) fn live_edited(&self) -> bool {
        self.buffers
            .iter()
            .any(|b| b.modified() || !matches!(b.origin, BufferOrigin::Cluster { .. }))
    }

    /// The buffer defining configuration `name`, or the selected webhook's.
    pub(super) fn buffer_for(&self, name: Option<&str>) -> Result<(usize, Option<String>), String> {
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
    pub(super) fn buffer_of_hook(
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

    pub(super) fn edit(&mut self, name: Option<&str>) -> Vec<Command> {
        match self.buffer_for(name) {
            Ok((i, name)) => self.open_at(i, name.as_deref()),
            Err(e) => self.say(e, true),
        }
        Vec::new()
    }

    /// The Edit view on buffer `i`, at the object `name` names (`Kind/name` for a policy or
    /// binding, a configuration's name otherwise).
    pub(super) fn open_at(&mut self, i: usize, name: Option<&str>) {
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

    pub(super) fn edit_external(&mut self, name: Option<&str>) -> Vec<Command> {
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

    pub(super) fn new_buffer(&mut self, mutating: bool, name: Option<String>) -> Vec<Command> {
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
    pub(super) fn new_policy_buffer(
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
    pub(super) fn editor_key(&mut self, key: crossterm::event::KeyEvent) -> Option<Vec<Command>> {
        use super::edit_keys::Outcome;
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

    pub(super) fn undo(&mut self, redo: bool) -> Vec<Command> {
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
    pub(super) fn confirm_delete(&mut self) -> Vec<Command> {
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

    pub(super) fn next_buffer(&mut self) {
        if !self.buffers.is_empty() {
            self.buffer = (self.buffer + 1) % self.buffers.len();
        }
    }

    /// Checks a buffer whose typing paused; a valid change of the configurations in force
    /// asks for a re-dispatch.
    pub(super) fn check_due(&mut self, buffer: usize, generation: u64) -> Vec<Command> {
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

    pub(super) fn save(&mut self, path: Option<String>) -> Vec<Command> {
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

    pub(super) fn saved(
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

    pub(super) fn external_edited(
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

    pub(super) fn file_changed(
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
    pub(super) fn redispatch_fresh(&mut self) -> Vec<Command> {
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

    pub(super) fn reload(&mut self, keep_mine: bool) -> Vec<Command> {
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
    pub(super) fn rebase(&mut self) -> Vec<Command> {
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
    pub(super) fn revert(&mut self) -> Vec<Command> {
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

    pub(super) fn recover(&mut self) -> Vec<Command> {
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

    pub(super) fn discard_recovered(&mut self) -> Vec<Command> {
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
    pub(super) fn recovery_found(&mut self, found: Vec<RecoveredText>) -> Vec<Command> {
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
    pub(super) fn offer_recovery(&mut self) {
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
    pub(super) fn on_redispatch(&mut self, msg: SourceMsg) {
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
fn replayed(e: &super::app::Entry) -> &crate::replay::run::Replayed {
    &e.replayed
}

/// What made a request's outcome differ from the What-if baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeCause {
    /// The user's edit of this configuration (or a configuration of the console's own).
    Edit(String),
    /// The cluster changed (or deleted) this configuration, not the user: the configuration
    /// name and the history entry's writer.
    Cluster {
        /// The configuration.
        name: String,
        /// Who changed it, as the history names them (`unknown` when it does not).
        who: String,
    },
    /// The file of this configuration changed on disk, not in the console.
    Disk(String),
    /// No configuration differs for the webhooks that answered differently: the webhooks'
    /// answers changed (calls sent anew).
    Answers,
}

impl ChangeCause {
    /// The cause in a few words, for a What-if row.
    pub fn label(&self) -> String {
        match self {
            ChangeCause::Edit(name) => format!("your edit of {name}"),
            ChangeCause::Cluster { name, who } => format!("cluster: {name} by {who}"),
            ChangeCause::Disk(name) => format!("{name} changed on disk"),
            ChangeCause::Answers => "the webhooks' answers".to_string(),
        }
    }
}

/// A webhook's record in a dispatch, reduced to what decides the outcome.
type CallKey = (Arc<str>, Arc<str>, u8);

/// The configurations (and policies: `true`) whose webhooks (bindings) decided differently.
fn differing_configurations(
    before: &crate::engine::Outcome,
    after: &crate::engine::Outcome,
) -> Vec<(WebhookKind, String, bool)> {
    let view = |o: &crate::engine::Outcome| -> BTreeMap<CallKey, String> {
        o.calls
            .iter()
            .map(|c| {
                (
                    (c.configuration.clone(), c.webhook.clone(), c.round),
                    // Whether it was called and what it did; not why it was skipped (a
                    // changed selector that still skips changes nothing), and the failure
                    // policy only where the call failed.
                    format!(
                        "{:?} {:?} {:?} {:?} {} {:?} {}",
                        c.phase,
                        c.decision,
                        c.allowed,
                        c.patch,
                        c.mutated,
                        c.error,
                        if c.error.is_some() {
                            c.failure_policy
                        } else {
                            ""
                        }
                    ),
                )
            })
            .collect()
    };
    let (b, a) = (view(before), view(after));
    let phase_of = |name: &str| {
        before
            .calls
            .iter()
            .chain(&after.calls)
            .find(|c| &*c.configuration == name)
            .map(|c| (c.phase, c.policy.is_some()))
    };
    let mut out: Vec<(WebhookKind, String, bool)> = Vec::new();
    for key in b.keys().chain(a.keys()) {
        if b.get(key) != a.get(key)
            && let Some((phase, policy)) = phase_of(&key.0)
            && !out
                .iter()
                .any(|(k, n, p)| *k == phase && **n == *key.0 && *p == policy)
        {
            out.push((phase, key.0.to_string(), policy));
        }
    }
    out
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
                    (b.in_force.iter().chain(&b.loaded.0)).any(|c| c.kind == kind && c.name == name)
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

/// Where a cluster object's kind runs in the chain, for listing buffers in dispatch order:
/// mutating policies, mutating webhooks, validating policies, validating webhooks (bindings
/// after their policies).
fn dispatch_rank(kind: AdmissionKind) -> u8 {
    match kind {
        AdmissionKind::MutatingAdmissionPolicy => 0,
        AdmissionKind::MutatingAdmissionPolicyBinding => 1,
        AdmissionKind::MutatingWebhookConfiguration => 2,
        AdmissionKind::ValidatingAdmissionPolicy => 3,
        AdmissionKind::ValidatingAdmissionPolicyBinding => 4,
        AdmissionKind::ValidatingWebhookConfiguration => 5,
    }
}

//! Editing configurations in the console: the buffers, their checks, and what an edit changed
//! (the What-if's causes). State only and below the update: how the update opens, checks, saves
//! and puts buffers in force is app's; the IO (saving, recovery files, the user's editor, file
//! watching) is done by the event loop on the commands it returns.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ratatui_textarea::{CursorMove, TextArea};

use super::source::{ConfigDocument, DocumentOrigin};
use crate::api::{WebhookConfiguration, WebhookKind};
use crate::config::policy::PolicyObject;
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
    pub(crate) fn changed_since_loaded(
        &self,
        kind: WebhookKind,
        name: &str,
        policy: Option<&str>,
    ) -> bool {
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

    /// Whether the buffer defines configuration `name` of `kind`, in force or as loaded.
    pub(crate) fn defines_configuration(&self, kind: WebhookKind, name: &str) -> bool {
        (self.in_force.iter().chain(&self.loaded.0)).any(|c| c.kind == kind && c.name == name)
    }

    /// The names of what is in force from this buffer, as `:delete` and its warnings list them.
    pub(crate) fn in_force_names(&self) -> Vec<String> {
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
pub(crate) fn differing_configurations(
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

/// Where a cluster object's kind runs in the chain, for listing buffers in dispatch order:
/// mutating policies, mutating webhooks, validating policies, validating webhooks (bindings
/// after their policies).
pub(crate) fn dispatch_rank(kind: AdmissionKind) -> u8 {
    match kind {
        AdmissionKind::MutatingAdmissionPolicy => 0,
        AdmissionKind::MutatingAdmissionPolicyBinding => 1,
        AdmissionKind::MutatingWebhookConfiguration => 2,
        AdmissionKind::ValidatingAdmissionPolicy => 3,
        AdmissionKind::ValidatingAdmissionPolicyBinding => 4,
        AdmissionKind::ValidatingWebhookConfiguration => 5,
    }
}

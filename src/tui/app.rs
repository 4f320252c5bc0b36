//! The console's state and its one update path: every change goes through [`update`], which
//! returns the [`Command`]s (IO) for the event loop to perform.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use std::path::PathBuf;

mod edit_update;
mod live_update;

use super::config::Settings;
use super::editing::Buffer;
use super::keymap::{self, Action, Keymap};
use super::model::{self, AnnotationRow, Block, HookCounts, HookInfo, Verdict};
use super::source::SourceMsg;
use super::theme::Theme;
use super::view::hit::ChainHit;
use super::views::{
    AnnotationsView, ChainExtent, ChainView, ListCursor, ProblemsExtent, ProblemsView,
    RequestsView, Scroll, ViewState,
};
use crate::engine::{AuditAnnotation, AuditLevel};
use crate::metrics::Metrics;
use crate::replay::run::{ReplayEvent, Replayed};

pub use super::tabs::View;

/// Input mode.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Mode {
    /// Keys are bindings.
    #[default]
    Normal,
    /// Typing a `:` command; completions shown when several match.
    Command {
        /// The line so far.
        input: String,
        /// Candidates of the last tab.
        completions: Vec<String>,
    },
    /// Typing a `/` filter (applied as typed).
    Filter(String),
    /// A server-side dry run is shown (live, `:apply`): `y` applies it, `n` cancels.
    ConfirmApply,
}

pub use super::views::{ChainPane, SortKey};

pub use super::model::{Entry, rejections, sum_by};

/// Replay progress.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Items expected, when known.
    pub total: Option<usize>,
    /// Items seen (replayed or skipped).
    pub seen: usize,
    /// Items not replayed (not replayable or invalid).
    pub skipped: usize,
    /// The source said it is done.
    pub done: bool,
    /// Calls a recording had no reply for.
    pub missing_replies: usize,
}

/// Everything the console shows. Changed only by [`update`].
#[derive(Debug, Clone)]
pub struct State {
    /// The source's label.
    pub source: String,
    /// Release modelled.
    pub kube_version: String,
    /// Audit level of the annotations shown.
    pub audit_level: AuditLevel,
    /// Replayed requests in input order.
    pub entries: Vec<Entry>,
    /// Problems the source reported (configurations left out, unreadable input, skipped items).
    pub problems: Vec<crate::replay::report::Problem>,
    /// Annotations in the order written.
    pub annotations: Vec<AnnotationRow>,
    /// The merged metrics of every replayed request.
    pub metrics: Metrics,
    /// Webhooks in dispatch order.
    pub hooks: Vec<HookInfo>,
    /// Counts per webhook (same order as `hooks`).
    pub hook_counts: Vec<HookCounts>,
    /// Progress.
    pub progress: Progress,
    /// Current view.
    pub view: View,
    /// Help overlay shown.
    pub help: bool,
    /// Input mode.
    pub mode: Mode,
    /// The Requests view's own state: its filter, sort, rows and cursor — the request in focus,
    /// which the Chain view shows.
    pub requests: RequestsView,
    /// The Chain view's own state: the selected step, the pane with the keys, the detail's
    /// scroll, whether it compares before and after the edits.
    pub chain: ChainView,
    /// The Annotations view's own state: its row cursor and its filter.
    pub annotations_view: AnnotationsView,
    /// The Problems view's own state: its cursor and the file opened at a problem.
    pub problems_view: ProblemsView,
    /// The help overlay's scroll.
    pub help_scroll: Scroll,
    /// The Metrics view's exported samples: their scroll.
    pub samples_scroll: Scroll,
    /// Webhooks view: the selected webhook (index into `hooks`).
    pub hook_cursor: ListCursor,
    /// Secret data shown as captured.
    pub reveal_secrets: bool,
    /// The theme.
    pub theme: Theme,
    /// The theme was chosen on the command line (`--theme`, even `--theme default`): the
    /// settings file's theme does not replace it.
    pub theme_from_command_line: bool,
    /// A one-line message for the status bar.
    pub message: Option<(String, bool)>,
    /// Key bindings.
    pub keymap: Keymap,
    /// Rows a page moves (set from the terminal size).
    pub page: usize,
    /// Terminal size (columns, rows), as last reported.
    pub size: (u16, u16),
    /// The console should end.
    pub quit: bool,
    /// Configuration texts open for editing.
    pub buffers: Vec<Buffer>,
    /// The buffer the Edit view shows.
    pub buffer: usize,
    /// The Edit view's own state: normal or insert mode.
    pub editor: super::edit_keys::EditorState,
    /// The edit in force: bumped whenever the configurations in force change.
    pub edit_generation: u64,
    /// A re-dispatch under way.
    pub run: Option<Run>,
    /// The results before the first edit took effect.
    pub baseline: Option<Baseline>,
    /// What the edits changed, as of the last re-dispatch.
    pub whatif: crate::edit::WhatIf,
    /// What-if: the selected row (index into `whatif.requests`).
    pub whatif_cursor: ListCursor,
    /// Unsaved texts found from an earlier session, offered back.
    pub recovered: Vec<RecoveredText>,
    /// New buffers created so far (numbers them).
    pub new_buffers: u32,
    /// The last re-dispatch's calls: answered from replies already received, and sent.
    pub redispatch_calls: (u64, u64),
    /// A live cluster (`hookscope live`), or None for a replay.
    pub live: Option<Box<super::live::LiveState>>,
    /// Rejections over replay time (the Metrics view's line chart).
    pub timeline: super::timeline::RejectionTimeline,
}

/// A re-dispatch after an edit: results gathered until it finishes, then shown at once.
#[derive(Debug, Clone)]
pub struct Run {
    /// The edit.
    pub generation: u64,
    /// The webhooks of the edited configurations.
    pub hooks: Vec<HookInfo>,
    /// Requests expected.
    pub total: usize,
    /// Results so far.
    pub results: Vec<Box<Replayed>>,
    /// Their metrics.
    pub metrics: Metrics,
    /// Their rejections over replay time.
    pub timeline: super::timeline::RejectionTimeline,
}

/// What the console showed before the first edit took effect: the other side of the what-if.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The requests as first replayed.
    pub entries: Vec<Entry>,
}

/// Unsaved text kept by an earlier session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredText {
    /// The buffer it belonged to.
    pub key: crate::edit::BufferKey,
    /// The text.
    pub text: String,
    /// [`crate::edit::content_hash`] of the file text the edits started from, when recorded.
    pub base_hash: Option<u64>,
}

/// Something that happened.
#[derive(Debug, Clone)]
pub enum Msg {
    /// A key was pressed.
    Key(KeyEvent),
    /// A mouse event.
    Mouse(MouseEvent),
    /// The terminal was resized.
    Resize(u16, u16),
    /// The source said something.
    Source(SourceMsg),
    /// Do this directly (tests, commands).
    Action(Action),
    /// A theme finished loading.
    ThemeLoaded(Result<Theme, String>),
    /// The settings file was read: None when there is none, an error naming the file and the
    /// key when it cannot be used (the defaults stay).
    SettingsLoaded(Result<Option<Settings>, String>),
    /// The typing pause after an edit is over: check the buffer if it is still at `generation`.
    CheckDue {
        /// The buffer.
        buffer: usize,
        /// Its generation when the check was scheduled.
        generation: u64,
    },
    /// A save finished.
    Saved {
        /// The buffer.
        buffer: usize,
        /// The text saved.
        text: String,
        /// Where, and the backup kept; or why not.
        result: Result<(PathBuf, Option<PathBuf>), String>,
    },
    /// The user's editor closed.
    ExternalEdited {
        /// The buffer.
        buffer: usize,
        /// The text it left, or why there is none.
        result: Result<String, String>,
    },
    /// A watched file changed on disk.
    FileChanged {
        /// The file.
        path: PathBuf,
        /// Its new text, or why it cannot be read.
        text: Result<String, String>,
    },
    /// Unsaved texts of an earlier session were found.
    RecoveryFound(Vec<RecoveredText>),
    /// A file was read around a problem's position, or could not be.
    ExcerptRead(Result<super::excerpt::Excerpt, String>),
}

/// IO for the event loop to perform.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Send [`Msg::CheckDue`] after [`CHECK_DELAY`](super::editing::CHECK_DELAY).
    CheckLater {
        /// The buffer.
        buffer: usize,
        /// Its generation now.
        generation: u64,
    },
    /// Ask the source to dispatch every loaded request again with these configurations.
    Redispatch {
        /// The edit.
        generation: u64,
        /// Every configuration in force.
        configurations: Vec<crate::api::WebhookConfiguration>,
        /// Every admission policy and binding in force.
        policies: crate::config::policy::PolicySet,
        /// Call every webhook anew instead of reusing the replies already received.
        fresh: bool,
    },
    /// Save text atomically, keeping a backup; answers with [`Msg::Saved`].
    Save {
        /// The buffer.
        buffer: usize,
        /// The file.
        path: PathBuf,
        /// The text.
        text: String,
    },
    /// Suspend the console and open the text in the user's editor; answers with
    /// [`Msg::ExternalEdited`].
    ExternalEdit {
        /// The buffer.
        buffer: usize,
        /// The text to edit.
        text: String,
    },
    /// Keep unsaved text where a crash cannot take it.
    WriteRecovery {
        /// The buffer's key.
        key: crate::edit::BufferKey,
        /// The text.
        text: String,
        /// The text the edits started from (the file as loaded or saved).
        base: String,
    },
    /// The text of this buffer is saved (or dropped): forget its recovery copy.
    DiscardRecovery(crate::edit::BufferKey),
    /// Watch these files (with the text the console knows of each) for changes made elsewhere;
    /// answers with [`Msg::FileChanged`].
    Watch(Vec<(PathBuf, String)>),
    /// Load a theme (a file read); answers with [`Msg::ThemeLoaded`].
    LoadTheme(String),
    /// Put text on the clipboard: the terminal layer writes [`osc52`] of this payload (the
    /// text, base64-encoded).
    Clipboard(String),
    /// Ask the live source to dispatch these requests with the configurations in force.
    Replay(Vec<crate::replay::CapturedRequest>),
    /// Ask the live source for a server-side apply (or its dry run); answered with
    /// [`LiveMsg::Applied`](super::live::LiveMsg::Applied).
    Apply(super::live::ApplyRequest),
    /// Read a file around a position (a problem of the replay input); answers with
    /// [`Msg::ExcerptRead`].
    ReadExcerpt {
        /// The file.
        path: PathBuf,
        /// Lines or documents.
        unit: crate::replay::IndexUnit,
        /// 1-based; 0 for the file as a whole.
        index: usize,
        /// The problem's reason, shown with the text.
        reason: String,
    },
    /// Restore the terminal and end.
    Quit,
    /// Connect the live source to another kubeconfig context (`:context NAME`).
    Context(String),
}

/// The OSC 52 sequence that asks the terminal to set the clipboard to a base64 payload:
/// `ESC ] 52 ; c ; <base64> BEL`.
pub fn osc52(base64: &str) -> String {
    format!("\x1b]52;c;{base64}\x07")
}

impl State {
    /// A fresh state.
    pub fn new(kube_version: String, audit_level: AuditLevel, theme: Theme) -> State {
        State {
            source: String::new(),
            kube_version,
            audit_level,
            entries: Vec::new(),
            problems: Vec::new(),
            annotations: Vec::new(),
            metrics: Metrics::new(),
            hooks: Vec::new(),
            hook_counts: Vec::new(),
            progress: Progress::default(),
            view: View::Requests,
            help: false,
            mode: Mode::Normal,
            requests: RequestsView::default(),
            chain: ChainView::default(),
            annotations_view: AnnotationsView::default(),
            help_scroll: Scroll::default(),
            problems_view: ProblemsView::default(),
            samples_scroll: Scroll::default(),
            hook_cursor: ListCursor::default(),
            reveal_secrets: false,
            theme,
            theme_from_command_line: false,
            message: None,
            keymap: Keymap::default(),
            page: 20,
            size: (0, 0),
            quit: false,
            buffers: Vec::new(),
            buffer: 0,
            editor: Default::default(),
            edit_generation: 0,
            run: None,
            baseline: None,
            whatif: crate::edit::WhatIf::default(),
            whatif_cursor: ListCursor::default(),
            recovered: Vec::new(),
            new_buffers: 0,
            redispatch_calls: (0, 0),
            live: None,
            timeline: Default::default(),
        }
    }

    /// The views in tab order: the live ones too when a cluster is watched.
    pub fn tabs(&self) -> Vec<View> {
        let live = if self.live.is_some() {
            &View::LIVE[..]
        } else {
            &[]
        };
        // Problems, when there are any (or it is shown), last and without a number.
        let problems =
            (!self.problems.is_empty() || self.view == View::Problems).then_some(View::Problems);
        View::ALL
            .iter()
            .chain(live)
            .copied()
            .chain(problems)
            .collect()
    }

    /// The selected entry.
    pub fn selected_entry(&self) -> Option<&Entry> {
        self.requests.selected.and_then(|i| self.entries.get(i))
    }

    /// Annotations matching the annotation filter.
    pub fn visible_annotations(&self) -> Vec<&AnnotationRow> {
        let f = self.annotations_view.filter.to_lowercase();
        self.annotations
            .iter()
            .filter(|a| {
                f.is_empty()
                    || self.annotation(a).is_some_and(|w| {
                        w.key.to_lowercase().contains(&f) || w.value.to_lowercase().contains(&f)
                    })
                    || self
                        .entries
                        .get(a.request())
                        .is_some_and(|e| model::target(&e.replayed.request.attrs).contains(&f))
            })
            .collect()
    }

    /// The annotation a row of the Annotations view stands for.
    pub fn annotation(&self, row: &AnnotationRow) -> Option<&AuditAnnotation> {
        self.entries
            .get(row.request())?
            .replayed
            .outcome
            .annotations
            .get(row.annotation as usize)
    }

    /// Counts for the status bar: replayed; allowed with no call failed open (`✓`); denied
    /// (`✗`); allowed though a call failed open (`!`). The last three add up to the first.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let mut c = (self.entries.len(), 0, 0, 0);
        for e in &self.entries {
            match e.verdict {
                Verdict::Allowed => c.1 += 1,
                Verdict::FailedOpen => c.3 += 1,
                Verdict::Denied(_) => c.2 += 1,
            }
        }
        c
    }

    pub(super) fn refilter(&mut self) {
        if self.requests.refilter(&self.entries) {
            self.reset_chain();
        }
    }

    pub(super) fn reset_chain(&mut self) {
        let first = self.chain_order().first().copied().unwrap_or(0);
        self.chain.select(first);
    }

    /// Moves the Requests cursor `delta` rows; the Chain view starts over with another request.
    fn move_selection(&mut self, delta: isize) {
        let before = self.requests.selected;
        self.requests.navigate(&(), delta);
        if self.requests.selected != before {
            self.reset_chain();
        }
    }

    /// The selected request's calls in the order the Chain view lists them (dispatch order).
    pub fn chain_order(&self) -> Vec<usize> {
        self.selected_entry()
            .map(|e| model::chain_order(&e.replayed.outcome, &self.hooks))
            .unwrap_or_default()
    }

    fn jump_round(&mut self, forward: bool) {
        let order = self.chain_order();
        let Some(e) = self.selected_entry() else {
            return;
        };
        let calls = &e.replayed.outcome.calls;
        let Some(cur) = calls.get(self.chain.step).map(Block::of) else {
            return;
        };
        let block = |i: &usize| Block::of(&calls[*i]);
        let target = if forward {
            order.iter().find(|i| block(i) > cur).copied()
        } else {
            let prev = order.iter().rev().map(block).find(|b| *b < cur);
            prev.and_then(|p| order.iter().find(|i| block(i) == p).copied())
        };
        match target {
            Some(t) => self.chain.select(t),
            None => self.say(
                if forward {
                    "no later round"
                } else {
                    "no earlier round"
                },
                false,
            ),
        }
    }

    pub(super) fn say(&mut self, text: impl Into<String>, error: bool) {
        self.message = Some((text.into(), error));
    }

    fn on_source(&mut self, msg: SourceMsg) -> Vec<Command> {
        match msg {
            SourceMsg::Started {
                label,
                hooks,
                total,
                documents,
            } => {
                self.source = label;
                self.hook_counts = vec![HookCounts::default(); hooks.len()];
                self.hooks = hooks;
                self.progress.total = total;
                return self.open_documents(&documents);
            }
            SourceMsg::Event { event, metrics } => {
                self.progress.seen += 1;
                if let ReplayEvent::Replayed(r) = event.as_ref() {
                    self.timeline.record(r.outcome.elapsed, metrics.as_deref());
                }
                if let Some(m) = metrics {
                    self.metrics.merge(&m);
                }
                match *event {
                    ReplayEvent::Replayed(r) => {
                        self.push_replayed(r);
                        self.open_live_replay();
                    }
                    ReplayEvent::Skipped(item) => {
                        self.progress.skipped += 1;
                        use crate::replay::report::{Problem, ProblemKind};
                        let problem = match item {
                            crate::replay::InputItem::NotReplayable(p) => {
                                Problem::from_input(ProblemKind::NotReplayable, &p)
                            }
                            crate::replay::InputItem::Invalid(p) => {
                                Problem::from_input(ProblemKind::Invalid, &p)
                            }
                            crate::replay::InputItem::Request(r) => Problem {
                                kind: ProblemKind::NotReplayable,
                                source: r.source.clone(),
                                field: String::new(),
                                message: "skipped".into(),
                            },
                        };
                        self.problems.push(problem);
                    }
                }
            }
            SourceMsg::Problem(p) => self.problems.push(*p),
            SourceMsg::Live(m) => return self.on_live(m),
            SourceMsg::Finished { missing_replies } => {
                self.progress.done = true;
                self.progress.missing_replies = missing_replies;
            }
            other => self.on_redispatch(other),
        }
        Vec::new()
    }

    /// Adds what each webhook did in `r` to the Webhooks view's counts.
    pub(super) fn count_calls(&mut self, r: &Replayed) {
        for (k, stats) in crate::edit::request_stats(r) {
            let at = self.hooks.iter().position(|h| {
                h.phase == k.phase && h.configuration == k.configuration && h.webhook == k.webhook
            });
            if let Some(at) = at {
                self.hook_counts[at].add(&stats);
            }
        }
    }

    pub(super) fn push_replayed(&mut self, r: Box<Replayed>) {
        let index = self.entries.len();
        self.count_calls(&r);
        for (at, a) in r.outcome.annotations.iter().enumerate() {
            if self.audit_level == AuditLevel::None || a.level > self.audit_level {
                continue;
            }
            self.annotations.push(AnnotationRow {
                request: u32::try_from(index).unwrap_or(u32::MAX),
                annotation: u32::try_from(at).unwrap_or(u32::MAX),
            });
        }
        self.entries.push(Entry::new(r));
        if self.requests.push(&self.entries) {
            self.reset_chain();
        }
    }

    fn apply(&mut self, action: Action) -> Vec<Command> {
        use Action as A;
        match action {
            A::Quit => {
                let unsaved = self.unsaved();
                if !unsaved.is_empty() {
                    self.say(
                        format!(
                            "unsaved edits in {}: :w saves, :q! leaves (a recovery copy is kept)",
                            unsaved.join(", ")
                        ),
                        true,
                    );
                    return Vec::new();
                }
                self.quit = true;
                return vec![Command::Quit];
            }
            A::ForceQuit => {
                self.quit = true;
                return vec![Command::Quit];
            }
            A::Edit(name) => return self.edit(name.as_deref()),
            A::EditExternal(name) => return self.edit_external(name.as_deref()),
            A::New(mutating, name) => return self.new_buffer(mutating, name),
            A::NewPolicy(mutating, name) => return self.new_policy_buffer(mutating, name),
            A::Save(path) => return self.save(path),
            A::Undo => return self.undo(false),
            A::Redo => return self.undo(true),
            A::NextBuffer => self.next_buffer(),
            A::Reload => return self.reload(false),
            A::ConfirmDelete => return self.confirm_delete(),
            A::Redispatch => return self.redispatch_fresh(),
            A::KeepMine => return self.reload(true),
            A::Revert => return self.revert(),
            A::Rebase => return self.rebase(),
            A::Recover => return self.recover(),
            A::DiscardRecovered => return self.discard_recovered(),
            A::Help => {
                self.help = !self.help;
                self.help_scroll = Scroll::default();
            }
            A::CommandMode => {
                self.mode = Mode::Command {
                    input: String::new(),
                    completions: Vec::new(),
                }
            }
            A::FilterMode => {
                let current = match (self.view, self.live.as_deref()) {
                    (View::Annotations, _) => self.annotations_view.filter.clone(),
                    (View::Events, Some(live)) => live.events_view.filter.clone(),
                    _ => self.requests.filter().to_string(),
                };
                if self.view != View::Annotations && self.view != View::Events {
                    self.view = View::Requests;
                }
                self.mode = Mode::Filter(current);
            }
            A::NextPane | A::PrevPane => {
                if self.view == View::Chain {
                    self.chain.toggle_pane();
                } else {
                    // Tab means one thing everywhere: the next pane that takes the keys. Views
                    // are switched by their number.
                    let last = self.tabs().len();
                    self.say(
                        format!(
                            "one pane takes the keys in {}: 1–{last} or : switch views",
                            self.view.title()
                        ),
                        false,
                    );
                }
            }
            A::Show(v) => self.view = v,
            A::Up | A::Down | A::PageUp | A::PageDown | A::Top | A::Bottom => self.navigate(action),
            A::Open if self.view == View::WhatIf => {
                if let Some(r) = self.whatif.requests.get(self.whatif_cursor.selected) {
                    self.requests.focus(r.index);
                    self.chain.compare = true;
                    self.view = View::Chain;
                    self.chain.pane = ChainPane::Grid;
                    self.reset_chain();
                }
            }
            A::Open if self.view == View::Problems => return self.open_problem(),
            A::Open if self.view == View::Annotations && self.live.is_some() => {
                return self.open_live_annotation();
            }
            A::Open if self.view == View::Annotations => {
                let shown = self.annotation_count();
                if shown == 0 {
                    return Vec::new();
                }
                let at = self.annotations_view.cursor.at(shown);
                self.open_annotation(at);
            }
            A::Open => {
                if self.requests.selected.is_some() {
                    self.chain.compare = false;
                    self.view = View::Chain;
                    self.chain.pane = ChainPane::Grid;
                }
            }
            A::Back => {
                if self.help {
                    self.help = false;
                } else if self.view == View::Problems && self.problems_view.back() {
                } else if self.view == View::Chain {
                    if self.chain.back() {
                    } else if self.chain.compare {
                        self.chain.compare = false;
                        self.view = View::WhatIf;
                    } else {
                        self.view = View::Requests;
                    }
                } else if self.view == View::Annotations && self.annotations_view.back() {
                } else if self.view == View::Events
                    && self
                        .live
                        .as_deref()
                        .is_some_and(|l| !l.events_view.filter.is_empty())
                {
                    return self.live_action(A::Filter(String::new()));
                } else if !self.requests.filter().is_empty() {
                    return self.requests_action(A::Filter(String::new()));
                } else {
                    self.view = View::Requests;
                }
            }
            A::SortNext | A::SortReverse | A::Sort(_) => return self.requests_action(action),
            A::NextRound => self.jump_round(true),
            A::PrevRound => self.jump_round(false),
            A::Deciding => match self
                .selected_entry()
                .and_then(|e| model::deciding_call(&e.replayed.outcome))
            {
                Some(i) => self.chain.select(i),
                None => self.say("no webhook was called", false),
            },
            A::NextRequest => self.move_selection(1),
            A::PrevRequest => self.move_selection(-1),
            A::ToggleSecrets => {
                self.reveal_secrets = !self.reveal_secrets;
                let text = if self.reveal_secrets {
                    "Secret data revealed"
                } else {
                    "Secret data masked"
                };
                self.say(text, false);
            }
            A::Copy if self.view == View::Annotations && self.live.is_some() => {
                return self.copy_live_annotation();
            }
            A::Copy => return self.copy(),
            A::Zoom(_)
            | A::Pause
            | A::NextInstance
            | A::ReplayEvent
            | A::ReplayEvents
            | A::Namespace(_)
            | A::ToggleNoise
            | A::Context(_) => {
                return self.live_action(action);
            }
            A::Apply(force) => return self.apply_to_cluster(force),
            A::DetailDown => self.scroll_detail(5),
            A::DetailUp => self.scroll_detail(-5),
            A::Theme(name) => return vec![Command::LoadTheme(name)],
            A::Filter(text) if self.view == View::Events && self.live.is_some() => {
                return self.live_action(A::Filter(text));
            }
            A::Filter(text) => {
                if self.view == View::Annotations {
                    self.annotations_view.set_filter(text);
                } else {
                    return self.requests_action(A::Filter(text));
                }
            }
        }
        Vec::new()
    }

    /// An action of the Requests view's own (its sort, its filter), followed up.
    fn requests_action(&mut self, action: Action) -> Vec<Command> {
        if let Some(taken) = self.requests.action(&action, &self.entries) {
            if taken.reselected {
                self.reset_chain();
            }
            if let Some(note) = taken.note {
                self.say(note, false);
            }
        }
        Vec::new()
    }

    /// The text `y` copies: in the Chain view the selected step's object after (its patch on
    /// the detail pane), elsewhere the selected request's final object; Secret data masked
    /// unless revealed.
    fn copy(&mut self) -> Vec<Command> {
        let Some(entry) = self.selected_entry() else {
            self.say("nothing selected to copy", true);
            return Vec::new();
        };
        let mask = entry.secret && !self.reveal_secrets;
        let o = &entry.replayed.outcome;
        let picked = if self.view == View::Chain {
            let applied = o
                .calls
                .get(self.chain.step)
                .and_then(|c| model::applied_patch(o, c));
            match (applied, self.chain.pane) {
                (Some((patch, _)), ChainPane::Detail) => {
                    Ok(("patch", model::masked_patch(&patch, mask)))
                }
                (Some((_, after)), ChainPane::Grid) => {
                    Ok(("object after", model::masked_object(after.value(), mask)))
                }
                (None, _) => Err("this step applied no patch: nothing to copy"),
            }
        } else {
            match &o.object {
                Some(obj) => Ok(("final object", model::masked_object(obj.value(), mask))),
                None => Err("this request has no object to copy"),
            }
        };
        match picked {
            Ok((what, value)) => {
                use base64::Engine as _;
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                let payload = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
                let masked = if mask { ", Secret data masked" } else { "" };
                self.say(
                    format!("copied the {what} ({} bytes{masked})", text.len()),
                    false,
                );
                vec![Command::Clipboard(payload)]
            }
            Err(e) => {
                self.say(e, true);
                Vec::new()
            }
        }
    }

    fn navigate(&mut self, action: Action) {
        use Action as A;
        let page = self.page.max(1) as isize;
        let delta: isize = match action {
            A::Up => -1,
            A::Down => 1,
            A::PageUp => -page,
            A::PageDown => page,
            A::Top => isize::MIN / 2,
            _ => isize::MAX / 2,
        };
        match self.view {
            View::Requests => self.move_selection(delta),
            View::Chain => {
                let data = ChainExtent {
                    order: self.chain_order(),
                    detail: super::view::detail_extent(self).unwrap_or_default().into(),
                };
                self.chain.navigate(&data, delta);
            }
            View::Annotations => self
                .annotations_view
                .navigate(&self.annotation_count(), delta),
            View::Webhooks => self.hook_cursor.navigate(&self.hooks.len(), delta),
            View::WhatIf => self
                .whatif_cursor
                .navigate(&self.whatif.requests.len(), delta),
            View::Cluster => {
                if let Some(l) = self.live.as_mut() {
                    l.cluster_view.navigate(&l.changes.len(), delta);
                }
            }
            View::Events => {
                if let Some(l) = self.live.as_mut() {
                    if action == A::Bottom {
                        l.events_view.follow();
                    } else {
                        let shown = l.shown_events();
                        l.events_view.navigate(&shown, delta);
                    }
                }
            }
            View::Problems => {
                let data = ProblemsExtent {
                    rows: self.problems.len(),
                    excerpt: super::view::excerpt_extent(self).into(),
                };
                self.problems_view.navigate(&data, delta);
            }
            View::Metrics if self.live.is_none() => {
                let extent = super::view::samples_extent(self).into();
                self.samples_scroll.navigate(&extent, delta);
            }
            View::Metrics | View::Editor => {}
        }
    }

    /// Opens the selected problem where it is: a configuration's file in the Edit view at its
    /// document; any other file (a replay input's invalid line or document) read-only, around
    /// the line.
    fn open_problem(&mut self) -> Vec<Command> {
        let Some(p) = self.problems.get(self.problems_view.cursor.selected) else {
            return Vec::new();
        };
        let file = std::path::Path::new(&p.source.file);
        let buffer = self.buffers.iter().position(|b| match &b.origin {
            super::editing::BufferOrigin::File(f) => f == file,
            _ => false,
        });
        match buffer {
            Some(i) if !p.source.file.is_empty() => {
                let line = self.buffers[i].document_line(p.source.index.max(1));
                self.buffers[i].show_line(line, 0);
                self.buffer = i;
                self.view = View::Editor;
                Vec::new()
            }
            _ if p.source.file.is_empty() => {
                self.say("this problem has no file position", false);
                Vec::new()
            }
            _ => vec![Command::ReadExcerpt {
                path: file.to_path_buf(),
                unit: p.source.unit,
                index: p.source.index,
                reason: p.message.clone(),
            }],
        }
    }

    /// A file read around a problem: shown read-only, its line a few rows from the top.
    fn excerpt_read(&mut self, read: Result<super::excerpt::Excerpt, String>) {
        match read {
            Ok(e) => {
                self.problems_view.open(e);
                self.view = View::Problems;
            }
            Err(e) => self.say(format!("cannot open: {e}"), true),
        }
    }

    /// Scrolls the Chain view's detail pane by `delta` lines, within its text.
    fn scroll_detail(&mut self, delta: isize) {
        let extent = super::view::detail_extent(self).unwrap_or_default().into();
        self.chain.detail.navigate(&extent, delta);
    }

    /// The lines an up/down/page/end action moves a scrolled pane by (a page: `page` lines).
    fn scroll_delta(action: &Action, page: usize) -> Option<isize> {
        use Action as A;
        let page = page.max(1) as isize;
        Some(match action {
            A::Up => -1,
            A::Down => 1,
            A::PageUp => -page,
            A::PageDown => page,
            A::Top => isize::MIN / 2,
            A::Bottom => isize::MAX / 2,
            _ => return None,
        })
    }

    /// Scrolls the help overlay by `delta` lines, within its text.
    fn scroll_help(&mut self, delta: isize) {
        let extent = super::view::help_extent(self).into();
        self.help_scroll.navigate(&extent, delta);
    }

    fn on_key(&mut self, key: KeyEvent) -> Vec<Command> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return self.apply(Action::Quit);
        }
        // A terminal sends esc and a key typed right after it as one alt-key: unless a binding
        // takes that alt-key, it is esc, then the key (so a quick `esc 7` from the editor, or
        // `esc :w` from its insert mode, does what was typed).
        if key.modifiers == KeyModifiers::ALT
            && matches!(key.code, KeyCode::Char(_))
            && self.keymap.action(self.view, &key).is_none()
        {
            let mut commands = self.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
            commands.extend(self.on_key(KeyEvent::new(key.code, KeyModifiers::NONE)));
            return commands;
        }
        match std::mem::take(&mut self.mode) {
            Mode::Normal => {
                self.message = None;
                if self.help {
                    // The scrolling keys scroll the overlay; any other key closes it and acts.
                    let action = self.keymap.action(self.view, &key);
                    let (_, height) = super::view::help_extent(self);
                    if let Some(d) = action.as_ref().and_then(|a| Self::scroll_delta(a, height)) {
                        self.scroll_help(d);
                        return Vec::new();
                    }
                    if !matches!(
                        key.code,
                        KeyCode::Char('?') | KeyCode::Esc | KeyCode::Char('q')
                    ) {
                        self.help = false;
                    }
                }
                if self.view == View::Editor && !self.help {
                    // Insert mode types every key but esc and the view's ctrl bindings; normal
                    // mode gives the view's bindings, then vim's keys, then the global ones.
                    // A search being typed takes every key, as insert mode does; esc cancels a
                    // count or a command being typed before it leaves the view, as in vim.
                    let insert = self.editor.mode == super::edit_keys::EditMode::Insert
                        || self.editor.search.is_some();
                    let cancels = key.code == KeyCode::Esc
                        && (self.editor.count.is_some() || self.editor.pending.is_some());
                    let own = self.keymap.action_in(View::Editor, &key);
                    if let Some(a) = own.clone().filter(|_| !insert && !cancels) {
                        return self.apply(a);
                    }
                    if let Some(commands) = self.editor_key(key) {
                        return commands;
                    }
                    return match own {
                        Some(a) => self.apply(a),
                        None if insert => Vec::new(),
                        None => match self.keymap.action(View::Editor, &key) {
                            Some(a) => self.apply(a),
                            None => Vec::new(),
                        },
                    };
                }
                match self.keymap.action(self.view, &key) {
                    Some(a) => self.apply(a),
                    None => Vec::new(),
                }
            }
            Mode::Command {
                mut input,
                completions,
            } => match key.code {
                KeyCode::Esc => Vec::new(),
                KeyCode::Enter => match keymap::parse_command(&input) {
                    Ok(a) => self.apply(a),
                    Err(e) => {
                        if !e.is_empty() {
                            self.say(e, true);
                        }
                        Vec::new()
                    }
                },
                KeyCode::Tab => {
                    let options = keymap::complete(&input);
                    let completions = match options.len() {
                        0 => Vec::new(),
                        1 => {
                            input = options[0].clone();
                            Vec::new()
                        }
                        _ => {
                            let common = keymap::common_prefix(&options);
                            if common.len() > input.len() {
                                input = common;
                            }
                            options
                        }
                    };
                    self.mode = Mode::Command { input, completions };
                    Vec::new()
                }
                KeyCode::Backspace => {
                    if input.pop().is_some() {
                        self.mode = Mode::Command {
                            input,
                            completions: Vec::new(),
                        };
                    }
                    Vec::new()
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    let _ = completions;
                    self.mode = Mode::Command {
                        input,
                        completions: Vec::new(),
                    };
                    Vec::new()
                }
                _ => {
                    self.mode = Mode::Command { input, completions };
                    Vec::new()
                }
            },
            Mode::ConfirmApply => self.confirm_key(key),
            Mode::Filter(mut text) => {
                match key.code {
                    KeyCode::Esc => {
                        text.clear();
                        self.apply(Action::Filter(text));
                    }
                    KeyCode::Enter => {}
                    KeyCode::Backspace => {
                        text.pop();
                        self.apply(Action::Filter(text.clone()));
                        self.mode = Mode::Filter(text);
                    }
                    KeyCode::Char(c) => {
                        text.push(c);
                        self.apply(Action::Filter(text.clone()));
                        self.mode = Mode::Filter(text);
                    }
                    _ => self.mode = Mode::Filter(text),
                }
                Vec::new()
            }
        }
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollDown => self.wheel(m.column, m.row, true),
            MouseEventKind::ScrollUp => self.wheel(m.column, m.row, false),
            MouseEventKind::Down(MouseButton::Left) => self.click(m.column, m.row),
            _ => {}
        }
    }

    /// The wheel moves what is under the mouse: in the Chain view the detail scrolls (three
    /// lines a notch) and the grid steps; elsewhere the view's selection or scroll moves.
    fn wheel(&mut self, x: u16, y: u16, down: bool) {
        if self.help {
            self.scroll_help(if down { 3 } else { -3 });
            return;
        }
        if self.view == View::Chain {
            match super::view::hit::chain_at(self, x, y) {
                Some(ChainHit::Detail) => {
                    self.scroll_detail(if down { 3 } else { -3 });
                    return;
                }
                Some(_) => {
                    let order = self.chain_order();
                    self.chain.step_by(&order, if down { 1 } else { -1 });
                    return;
                }
                None => {}
            }
        }
        self.navigate(if down { Action::Down } else { Action::Up });
    }

    /// Opens the chain of the request that wrote the `i`-th annotation shown, at the step that
    /// wrote it: `…/round_{r}_index_{i}` names the call, a webhook's own annotation is keyed
    /// by its name.
    fn open_annotation(&mut self, i: usize) {
        let Some(row) = self.visible_annotations().get(i).map(|a| **a) else {
            return;
        };
        let Some(entry) = self.entries.get(row.request()) else {
            return;
        };
        let Some(a) = self.annotation(&row) else {
            return;
        };
        let calls = &entry.replayed.outcome.calls;
        let (prefix, name) = a.key.split_once('/').unwrap_or(("", &a.key));
        let position = name
            .strip_prefix("round_")
            .and_then(|rest| rest.split_once("_index_"))
            .and_then(|(r, i)| Some((r.parse::<u8>().ok()?, i.parse::<usize>().ok()?)))
            .and_then(|(round, index)| {
                let phase = if prefix.contains("validating") {
                    crate::api::WebhookKind::Validating
                } else {
                    crate::api::WebhookKind::Mutating
                };
                calls.iter().position(|c| {
                    c.phase == phase
                        && c.policy.is_none()
                        && c.index == index
                        && (phase == crate::api::WebhookKind::Validating || c.round == round)
                })
            })
            .or_else(|| {
                calls.iter().rposition(|c| {
                    &*c.webhook == prefix && c.decision == crate::engine::CallDecision::Called
                })
            })
            .or_else(|| {
                // A policy's annotations: `<policy>/<key>`, and its validation failures.
                calls.iter().position(|c| {
                    c.policy.is_some()
                        && c.decision == crate::engine::CallDecision::Called
                        && (&*c.configuration == prefix
                            || prefix == "validation.policy.admission.k8s.io")
                })
            });
        self.requests.focus(row.request());
        self.chain.compare = false;
        self.view = View::Chain;
        self.chain.pane = ChainPane::Grid;
        self.chain.select(position.unwrap_or(0));
    }

    /// A left click: a tab in the header switches view; a row is selected (Requests, the
    /// Chain's steps, Webhooks, What-if), and a click on the selected row (so also a double
    /// click) opens it; a Requests column title sorts by it (again: reversed); a Chain pane
    /// takes the keys; an annotation opens the chain at the step that wrote it.
    fn click(&mut self, x: u16, y: u16) {
        if self.help {
            self.help = false;
            return;
        }
        if y == 0 {
            if let Some(v) = super::view::tab_at(self, x) {
                self.view = v;
            }
            return;
        }
        if self.mode != Mode::Normal {
            return;
        }
        match self.view {
            View::Requests => {
                if let Some(key) = super::view::hit::requests_column_at(self, x, y) {
                    if self.requests.click_column(key, &self.entries) {
                        self.reset_chain();
                    }
                } else if let Some(pos) = super::view::requests_position_at(self, self.size.1, y) {
                    if self.requests.position() == Some(pos) {
                        self.apply(Action::Open);
                    } else if self.requests.select_position(pos) {
                        self.reset_chain();
                    }
                }
            }
            View::Chain => match super::view::hit::chain_at(self, x, y) {
                Some(ChainHit::Step(i)) => {
                    self.chain.pane = ChainPane::Grid;
                    if self.chain.step != i {
                        self.chain.select(i);
                    }
                }
                Some(ChainHit::Grid) => self.chain.pane = ChainPane::Grid,
                Some(ChainHit::Detail) => self.chain.pane = ChainPane::Detail,
                None => {}
            },
            View::Annotations => {
                if let Some(i) = super::view::hit::annotation_at(self, x, y) {
                    self.open_annotation(i);
                }
            }
            View::Webhooks => {
                if let Some(i) = super::view::hit::webhook_at(self, x, y) {
                    self.hook_cursor.selected = i;
                }
            }
            View::WhatIf => {
                if let Some(i) = super::view::hit::whatif_at(self, x, y) {
                    if self.whatif_cursor.selected == i {
                        self.apply(Action::Open);
                    } else {
                        self.whatif_cursor.selected = i;
                    }
                }
            }
            _ => {}
        }
    }
}

/// Applies one message. The only place state changes.
pub fn update(state: &mut State, msg: Msg) -> Vec<Command> {
    let commands = update_inner(state, msg);
    // The Edit view opens in normal mode, whatever it was left in.
    if state.view != View::Editor {
        state.editor.normal();
    }
    // A file opened from Problems closes with the view.
    if state.view != View::Problems {
        state.problems_view.excerpt = None;
    }
    commands
}

fn update_inner(state: &mut State, msg: Msg) -> Vec<Command> {
    match msg {
        Msg::Key(k) => state.on_key(k),
        Msg::Mouse(m) => {
            state.on_mouse(m);
            Vec::new()
        }
        Msg::Resize(w, h) => {
            state.size = (w, h);
            // Header, borders, table header and status bar take about six rows.
            state.page = usize::from(h.saturating_sub(6)).max(1);
            Vec::new()
        }
        Msg::Source(s) => state.on_source(s),
        Msg::CheckDue { buffer, generation } => state.check_due(buffer, generation),
        Msg::Saved {
            buffer,
            text,
            result,
        } => state.saved(buffer, text, result),
        Msg::ExternalEdited { buffer, result } => state.external_edited(buffer, result),
        Msg::FileChanged { path, text } => state.file_changed(path, text),
        Msg::RecoveryFound(found) => state.recovery_found(found),
        Msg::ExcerptRead(read) => {
            state.excerpt_read(read);
            Vec::new()
        }
        Msg::Action(a) => state.apply(a),
        Msg::ThemeLoaded(Ok(t)) => {
            state.say(format!("theme {}", t.name), false);
            state.theme = t;
            Vec::new()
        }
        Msg::SettingsLoaded(Ok(None)) => Vec::new(),
        Msg::SettingsLoaded(Ok(Some(settings))) => {
            state.keymap = settings.keymap;
            // A theme chosen on the command line wins over the file's.
            match settings.theme {
                Some(t) if !state.theme_from_command_line => vec![Command::LoadTheme(t)],
                _ => Vec::new(),
            }
        }
        Msg::SettingsLoaded(Err(e)) => {
            state.say(format!("settings not used, defaults kept: {e}"), true);
            Vec::new()
        }
        Msg::ThemeLoaded(Err(e)) => {
            state.say(e, true);
            Vec::new()
        }
    }
}

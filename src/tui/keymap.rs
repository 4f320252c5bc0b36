//! Keys and `:` commands as data. The help overlay lists the live keymap, so what it shows is
//! what the keys do.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::tabs::View;

/// Everything a key or a command can ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave the console.
    Quit,
    /// Show or hide the help overlay.
    Help,
    /// Start a `:` command.
    CommandMode,
    /// Start a `/` filter.
    FilterMode,
    /// Next pane (or view, where a view has one pane).
    NextPane,
    /// Previous pane (or view).
    PrevPane,
    /// Go to a view.
    Show(View),
    /// Selection up.
    Up,
    /// Selection down.
    Down,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// First item.
    Top,
    /// Last item (and follow the tail where there is one).
    Bottom,
    /// Open the selection.
    Open,
    /// Back (close overlays, clear the filter, leave the chain).
    Back,
    /// Sort by the next column.
    SortNext,
    /// Reverse the sort.
    SortReverse,
    /// Chain: first step of the next round.
    NextRound,
    /// Chain: first step of the previous round.
    PrevRound,
    /// Chain: the step that decided the verdict.
    Deciding,
    /// Chain: the next request.
    NextRequest,
    /// Chain: the previous request.
    PrevRequest,
    /// Show or mask Secret data.
    ToggleSecrets,
    /// Copy the selected object (or patch) to the clipboard (OSC 52).
    Copy,
    /// Scroll the detail pane down.
    DetailDown,
    /// Scroll the detail pane up.
    DetailUp,
    /// Switch theme (built-in name or path).
    Theme(String),
    /// Filter with this text (empty clears).
    Filter(String),
    /// Sort by a column by name.
    Sort(String),
    /// Edit a configuration (by name; none: the selected webhook's, or the current buffer).
    Edit(Option<String>),
    /// Edit a configuration in the user's editor (`$KUBE_EDITOR`, then `$EDITOR`).
    EditExternal(Option<String>),
    /// A new configuration from a template: mutating or validating, and its name.
    New(bool, Option<String>),
    /// A new admission policy with its binding from a template: mutating or validating, and
    /// its name.
    NewPolicy(bool, Option<String>),
    /// Save the current buffer (to this file, for buffers without one).
    Save(Option<String>),
    /// Undo the last change of the buffer.
    Undo,
    /// Redo.
    Redo,
    /// The next open buffer.
    NextBuffer,
    /// Take the text on disk over the buffer's edits.
    Reload,
    /// Confirm that an emptied buffer deletes its configurations from those in force.
    ConfirmDelete,
    /// Dispatch every request again with the configurations in force, calling every webhook
    /// anew (no reply kept from earlier dispatches is reused).
    Redispatch,
    /// Keep the buffer's edits over the text on disk.
    KeepMine,
    /// Put the buffer's edits on the cluster's newer version of the configuration.
    Rebase,
    /// Drop the buffer's edits: back to the text on disk (for a live cluster's configuration,
    /// the cluster's newest version).
    Revert,
    /// Open the texts recovered from an earlier session.
    Recover,
    /// Drop the texts recovered from an earlier session.
    DiscardRecovered,
    /// Leave even with unsaved edits (their recovery copies stay).
    ForceQuit,
    /// Live metrics: zoom in (`1`: a narrower time window, as `+` suggests) or out (`-1`: a
    /// wider one).
    Zoom(i32),
    /// Live metrics: stop the charts at the latest scrape, or follow again.
    Pause,
    /// Live metrics: chart the next apiserver alone (after the last, their sum again).
    NextInstance,
    /// Live events: replay the selected event against the configurations in force.
    ReplayEvent,
    /// Live events: replay every kept event against the configurations in force.
    ReplayEvents,
    /// Live: show only this namespace's events and annotations (None: every namespace).
    Namespace(Option<String>),
    /// Live: connect to this kubeconfig context instead, as `--context` at start does.
    Context(String),
    /// Live events: show or hide routine traffic (hookscope's own requests, lease renewals,
    /// health, version and discovery requests).
    ToggleNoise,
    /// Live, with `--allow-writes`: server-side apply of the current configuration, after a
    /// dry run shown for confirmation (`true`: take over other managers' fields).
    Apply(bool),
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere.
    Global,
    /// In one view.
    In(View),
}

/// A key with its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key.
    pub code: KeyCode,
    /// Ctrl, Alt (Shift is part of the character).
    pub mods: KeyModifiers,
}

impl Key {
    /// A plain key.
    pub const fn plain(code: KeyCode) -> Key {
        Key {
            code,
            mods: KeyModifiers::NONE,
        }
    }

    /// A character.
    pub const fn ch(c: char) -> Key {
        Key::plain(KeyCode::Char(c))
    }

    /// Ctrl and a character.
    pub const fn ctrl(c: char) -> Key {
        Key {
            code: KeyCode::Char(c),
            mods: KeyModifiers::CONTROL,
        }
    }

    /// Whether a terminal key event is this key (Shift is ignored for characters).
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let mods = ev.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT);
        let code = match ev.code {
            // Some terminals report shift-tab as BackTab, others as shift + Tab.
            KeyCode::Tab if ev.modifiers.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
            c => c,
        };
        code == self.code && mods == self.mods
    }

    /// As the help shows it.
    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCode::Char(' ') => "space".to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::Enter => "enter".into(),
            KeyCode::Esc => "esc".into(),
            KeyCode::Tab => "tab".into(),
            KeyCode::BackTab => "shift-tab".into(),
            KeyCode::PageUp => "pgup".into(),
            KeyCode::PageDown => "pgdn".into(),
            KeyCode::Home => "home".into(),
            KeyCode::End => "end".into(),
            other => format!("{other:?}").to_lowercase(),
        };
        if self.mods.contains(KeyModifiers::CONTROL) {
            format!("ctrl-{base}")
        } else if self.mods.contains(KeyModifiers::ALT) {
            format!("alt-{base}")
        } else {
            base
        }
    }
}

/// One binding: keys, what they do, where, and the help text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The keys (any of them).
    pub keys: Vec<Key>,
    /// What they do.
    pub action: Action,
    /// Where.
    pub scope: Scope,
    /// Help text.
    pub help: &'static str,
}

/// The bindings, looked up in order: view bindings first, then global ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    /// All bindings.
    pub bindings: Vec<Binding>,
}

impl Default for Keymap {
    fn default() -> Self {
        use Action as A;
        use KeyCode as K;
        use Scope::{Global, In};
        let b = |keys: Vec<Key>, action, scope, help| Binding {
            keys,
            action,
            scope,
            help,
        };
        let p = Key::plain;
        let c = Key::ch;
        let bindings = vec![
            b(vec![c('q'), Key::ctrl('c')], A::Quit, Global, "quit"),
            b(vec![c('?')], A::Help, Global, "help (this overlay)"),
            b(
                vec![c(':')],
                A::CommandMode,
                Global,
                "command (tab completes)",
            ),
            b(vec![c('/')], A::FilterMode, Global, "filter"),
            b(
                vec![p(K::Tab)],
                A::NextPane,
                Global,
                "next pane (Chain: grid, detail)",
            ),
            b(vec![p(K::BackTab)], A::PrevPane, Global, "previous pane"),
            b(
                vec![c('1')],
                A::Show(View::Requests),
                Global,
                "requests view",
            ),
            b(vec![c('2')], A::Show(View::Chain), Global, "chain view"),
            b(
                vec![c('3')],
                A::Show(View::Annotations),
                Global,
                "annotations view",
            ),
            b(vec![c('4')], A::Show(View::Metrics), Global, "metrics view"),
            b(
                vec![c('5')],
                A::Show(View::Webhooks),
                Global,
                "webhooks view",
            ),
            b(vec![c('k'), p(K::Up)], A::Up, Global, "up"),
            b(vec![c('j'), p(K::Down)], A::Down, Global, "down"),
            b(
                vec![Key::ctrl('u'), p(K::PageUp)],
                A::PageUp,
                Global,
                "page up",
            ),
            b(
                vec![Key::ctrl('d'), p(K::PageDown)],
                A::PageDown,
                Global,
                "page down",
            ),
            b(vec![c('g'), p(K::Home)], A::Top, Global, "first"),
            b(vec![c('G'), p(K::End)], A::Bottom, Global, "last (follow)"),
            b(
                vec![p(K::Esc)],
                A::Back,
                Global,
                "back / close / clear filter",
            ),
            b(
                vec![c('x')],
                A::ToggleSecrets,
                Global,
                "reveal / mask Secret data",
            ),
            b(
                vec![p(K::Enter), c('l'), p(K::Right)],
                A::Open,
                In(View::Requests),
                "open the chain",
            ),
            b(
                vec![c('y')],
                A::Copy,
                In(View::Requests),
                "copy the final object",
            ),
            b(
                vec![p(K::Enter)],
                A::Open,
                In(View::Annotations),
                "live: open the selected annotation's event, its value in full",
            ),
            b(
                vec![c('y')],
                A::Copy,
                In(View::Annotations),
                "live: copy the selected annotation's value in full (decoded)",
            ),
            b(
                vec![c('s')],
                A::SortNext,
                In(View::Requests),
                "sort by next column",
            ),
            b(
                vec![c('r')],
                A::SortReverse,
                In(View::Requests),
                "reverse sort",
            ),
            b(vec![c(']')], A::NextRound, In(View::Chain), "next round"),
            b(
                vec![c('[')],
                A::PrevRound,
                In(View::Chain),
                "previous round",
            ),
            b(
                vec![c('d')],
                A::Deciding,
                In(View::Chain),
                "step that decided the verdict",
            ),
            b(
                vec![c('n')],
                A::NextRequest,
                In(View::Chain),
                "next request",
            ),
            b(
                vec![c('p')],
                A::PrevRequest,
                In(View::Chain),
                "previous request",
            ),
            b(
                vec![c('y')],
                A::Copy,
                In(View::Chain),
                "copy object after / patch (pane)",
            ),
            b(
                vec![c('J')],
                A::DetailDown,
                In(View::Chain),
                "scroll detail down",
            ),
            b(
                vec![c('K')],
                A::DetailUp,
                In(View::Chain),
                "scroll detail up",
            ),
            b(
                vec![c('h'), p(K::Left)],
                A::Back,
                In(View::Chain),
                "back to requests",
            ),
            b(vec![c('6')], A::Show(View::Editor), Global, "edit view"),
            b(vec![c('7')], A::Show(View::WhatIf), Global, "what-if view"),
            b(
                vec![c('e')],
                A::Edit(None),
                In(View::Webhooks),
                "edit the selected webhook's configuration or policy",
            ),
            b(
                vec![c('E')],
                A::EditExternal(None),
                In(View::Webhooks),
                "edit it in $KUBE_EDITOR / $EDITOR",
            ),
            b(
                vec![c('e')],
                A::Edit(None),
                In(View::Chain),
                "edit the selected step's configuration or policy",
            ),
            b(
                vec![c('E')],
                A::EditExternal(None),
                In(View::Chain),
                "edit it in $KUBE_EDITOR / $EDITOR",
            ),
            b(
                vec![Key::ctrl('s')],
                A::Save(None),
                In(View::Editor),
                "save (atomic, with a backup)",
            ),
            b(vec![Key::ctrl('z')], A::Undo, In(View::Editor), "undo"),
            b(vec![Key::ctrl('y')], A::Redo, In(View::Editor), "redo"),
            b(
                vec![Key::ctrl('n')],
                A::NextBuffer,
                In(View::Editor),
                "next open configuration",
            ),
            b(
                vec![Key::ctrl('e')],
                A::EditExternal(None),
                In(View::Editor),
                "open in $KUBE_EDITOR / $EDITOR",
            ),
            b(
                vec![p(K::Esc)],
                A::Show(View::Webhooks),
                In(View::Editor),
                "normal mode: leave the editor (the edit stays); insert mode: back to normal",
            ),
            b(
                vec![p(K::Enter), c('l'), p(K::Right)],
                A::Open,
                In(View::WhatIf),
                "chain before / after the edit",
            ),
            b(
                vec![p(K::Enter), c('l'), p(K::Right)],
                A::Open,
                In(View::Annotations),
                "the step that wrote it, in the Chain",
            ),
            b(
                vec![p(K::Enter), c('l'), p(K::Right)],
                A::Open,
                In(View::Problems),
                "open the file at the problem: a configuration in the editor, an input read-only",
            ),
            b(
                vec![c('8')],
                A::Show(View::Cluster),
                Global,
                "cluster view (live)",
            ),
            b(
                vec![c('9')],
                A::Show(View::Events),
                Global,
                "events view (live)",
            ),
            b(
                vec![c('+')],
                A::Zoom(1),
                In(View::Metrics),
                "live: zoom in (a narrower time window)",
            ),
            b(
                vec![c('-')],
                A::Zoom(-1),
                In(View::Metrics),
                "live: zoom out (a wider time window)",
            ),
            b(
                vec![c('p')],
                A::Pause,
                In(View::Metrics),
                "live: pause the charts / follow again",
            ),
            b(
                vec![c('i')],
                A::NextInstance,
                In(View::Metrics),
                "live: chart one apiserver, the next one, then their sum",
            ),
            b(
                vec![c('r'), p(K::Enter)],
                A::ReplayEvent,
                In(View::Events),
                "replay the event against the configurations in force",
            ),
            b(
                vec![c('R')],
                A::ReplayEvents,
                In(View::Events),
                "replay every kept event",
            ),
        ];
        Keymap { bindings }
    }
}

impl Keymap {
    /// The action of a key in a view.
    pub fn action(&self, view: View, ev: &KeyEvent) -> Option<Action> {
        let find = |scope: Scope| {
            self.bindings
                .iter()
                .find(|b| b.scope == scope && b.keys.iter().any(|k| k.matches(ev)))
                .map(|b| b.action.clone())
        };
        find(Scope::In(view)).or_else(|| find(Scope::Global))
    }

    /// The action a key has in a view's own bindings only (the editor, where other keys type).
    pub fn action_in(&self, view: View, ev: &KeyEvent) -> Option<Action> {
        self.bindings
            .iter()
            .find(|b| b.scope == Scope::In(view) && b.keys.iter().any(|k| k.matches(ev)))
            .map(|b| b.action.clone())
    }

    /// Gives `action` these keys in every binding of it, and takes them from every other
    /// binding so that no other action shadows them.
    pub fn rebind(&mut self, action: &Action, keys: &[Key]) {
        for b in &mut self.bindings {
            if &b.action == action {
                b.keys = keys.to_vec();
            } else {
                b.keys.retain(|k| !keys.contains(k));
            }
        }
    }

    /// The bindings that apply in a view: its own, then the global ones it does not shadow.
    pub fn for_view(&self, view: View) -> Vec<&Binding> {
        let own: Vec<&Binding> = self
            .bindings
            .iter()
            .filter(|b| b.scope == Scope::In(view))
            .collect();
        let shadowed = |k: &Key| own.iter().any(|b| b.keys.contains(k));
        let global = self
            .bindings
            .iter()
            .filter(|b| b.scope == Scope::Global && !b.keys.iter().all(shadowed));
        own.iter().copied().chain(global).collect()
    }
}

/// The `:` commands: name, argument hint, help.
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("requests", "", "the Requests view"),
    ("chain", "", "the Chain view of the selected request"),
    ("annotations", "", "the Annotations view"),
    ("metrics", "", "the Metrics view"),
    ("webhooks", "", "the Webhooks view"),
    ("help", "", "the help overlay"),
    (
        "theme",
        " NAME|PATH",
        "switch theme (default, light, high-contrast, or a file)",
    ),
    ("filter", " TEXT", "filter the current view (empty clears)"),
    (
        "sort",
        " COLUMN",
        "sort requests: input op resource name verdict called rounds duration",
    ),
    ("reveal", "", "reveal or mask Secret data"),
    (
        "edit",
        " [NAME]",
        "edit a configuration in the console (the selected webhook's)",
    ),
    (
        "edit!",
        " [NAME]",
        "edit a configuration in $KUBE_EDITOR / $EDITOR",
    ),
    (
        "new",
        " mutating|validating|mutating-policy|validating-policy [NAME]",
        "a new configuration, or admission policy with its binding, from a template",
    ),
    (
        "w",
        " [PATH]",
        "save the edited configuration (built-in or new ones need a PATH)",
    ),
    ("edits", "", "the Edit view"),
    ("whatif", "", "the What-if view: what the edits changed"),
    (
        "problems",
        "",
        "what could not be replayed or loaded, with file, line and field",
    ),
    (
        "redispatch",
        "",
        "dispatch every request again, calling every webhook anew",
    ),
    ("reload", "", "take the file on disk over your edits"),
    ("keep", "", "keep your edits over the file on disk"),
    (
        "delete",
        "",
        "an emptied buffer: remove its configurations from those in force",
    ),
    (
        "rebase",
        "",
        "live: put your edits on the cluster's newer version of the configuration",
    ),
    (
        "revert",
        "",
        "drop your edits of the configuration (back to the file's, or the cluster's, version)",
    ),
    (
        "recover",
        "",
        "open the unsaved edits of an earlier session",
    ),
    (
        "discard",
        "",
        "drop the unsaved edits of an earlier session",
    ),
    ("cluster", "", "the Cluster view (live)"),
    ("events", "", "the Events view (live): audit events"),
    (
        "replay",
        "",
        "live: replay every kept audit event against the configurations in force",
    ),
    (
        "ns",
        " NAME|-",
        "live: show one namespace's events and annotations (- shows all)",
    ),
    (
        "context",
        " NAME",
        "live: connect to another context of the kubeconfig, as --context does",
    ),
    (
        "noise",
        "",
        "live: show or hide routine events (hookscope's own, lease renewals, health, /version)",
    ),
    (
        "apply",
        "",
        "live, --allow-writes: apply the configuration to the cluster after a server-side dry run",
    ),
    (
        "apply!",
        "",
        "as apply, taking over fields other field managers own",
    ),
    ("quit", "", "leave"),
    ("q!", "", "leave with unsaved edits (recovery copies stay)"),
];

/// Sort column names, as `:sort` takes them.
pub const SORT_COLUMNS: &[&str] = &[
    "input", "op", "resource", "name", "verdict", "called", "rounds", "duration",
];

fn opt(arg: String) -> Option<String> {
    (!arg.is_empty()).then_some(arg)
}

/// Parses a `:` command line.
pub fn parse_command(line: &str) -> Result<Action, String> {
    let line = line.trim();
    let (name, arg) = line.split_once(' ').unwrap_or((line, ""));
    let arg = arg.trim().to_string();
    let view = |v| Ok(Action::Show(v));
    match name {
        "requests" | "req" => view(View::Requests),
        "chain" => view(View::Chain),
        "annotations" | "ann" => view(View::Annotations),
        "metrics" => view(View::Metrics),
        "webhooks" | "hooks" => view(View::Webhooks),
        "help" => Ok(Action::Help),
        "q" | "quit" => Ok(Action::Quit),
        "q!" | "quit!" => Ok(Action::ForceQuit),
        "edits" => view(View::Editor),
        "whatif" | "what-if" => view(View::WhatIf),
        "cluster" => view(View::Cluster),
        "events" => view(View::Events),
        "problems" => view(View::Problems),
        "replay" => Ok(Action::ReplayEvents),
        "noise" => Ok(Action::ToggleNoise),
        "context" | "ctx" if !arg.is_empty() => Ok(Action::Context(arg)),
        "context" | "ctx" => Err("usage: context NAME (a context of the kubeconfig)".into()),
        "ns" | "namespace" => Ok(Action::Namespace(opt(arg).filter(|a| a != "-" && a != "*"))),
        "apply" => Ok(Action::Apply(false)),
        "apply!" => Ok(Action::Apply(true)),
        "edit" | "e" => Ok(Action::Edit(opt(arg))),
        "edit!" | "e!" => Ok(Action::EditExternal(opt(arg))),
        "new" => {
            let (kind, name) = arg.split_once(' ').unwrap_or((arg.as_str(), ""));
            match kind {
                "mutating" => Ok(Action::New(true, opt(name.trim().to_string()))),
                "validating" => Ok(Action::New(false, opt(name.trim().to_string()))),
                "mutating-policy" => Ok(Action::NewPolicy(true, opt(name.trim().to_string()))),
                "validating-policy" => Ok(Action::NewPolicy(false, opt(name.trim().to_string()))),
                _ => Err(
                    "usage: new mutating|validating|mutating-policy|validating-policy [NAME]"
                        .into(),
                ),
            }
        }
        "w" | "write" => Ok(Action::Save(opt(arg))),
        "reload" => Ok(Action::Reload),
        "delete" => Ok(Action::ConfirmDelete),
        "redispatch" => Ok(Action::Redispatch),
        "keep" => Ok(Action::KeepMine),
        "revert" => Ok(Action::Revert),
        "rebase" => Ok(Action::Rebase),
        "recover" => Ok(Action::Recover),
        "discard" => Ok(Action::DiscardRecovered),
        "reveal" => Ok(Action::ToggleSecrets),
        "theme" if !arg.is_empty() => Ok(Action::Theme(arg)),
        "theme" => Err("usage: theme NAME|PATH".into()),
        "filter" => Ok(Action::Filter(arg)),
        "sort" if SORT_COLUMNS.contains(&arg.as_str()) => Ok(Action::Sort(arg)),
        "sort" => Err(format!("usage: sort {}", SORT_COLUMNS.join("|"))),
        "" => Err(String::new()),
        other => Err(format!("unknown command {other:?} (tab completes)")),
    }
}

/// Completions of a partial command line: whole lines.
pub fn complete(line: &str) -> Vec<String> {
    match line.split_once(' ') {
        None => COMMANDS
            .iter()
            .filter(|(n, ..)| n.starts_with(line))
            .map(|(n, hint, _)| {
                if hint.is_empty() {
                    n.to_string()
                } else {
                    format!("{n} ")
                }
            })
            .collect(),
        Some((cmd, arg)) => {
            let options: &[&str] = match cmd {
                "theme" => &["default", "light", "high-contrast"],
                "sort" => SORT_COLUMNS,
                "new" => &["mutating", "validating"],
                _ => &[],
            };
            options
                .iter()
                .filter(|o| o.starts_with(arg.trim_start()))
                .map(|o| format!("{cmd} {o}"))
                .collect()
        }
    }
}

/// The longest common prefix of completions.
pub fn common_prefix(items: &[String]) -> String {
    let Some(first) = items.first() else {
        return String::new();
    };
    let mut len = first.len();
    for s in &items[1..] {
        len = len.min(
            first
                .char_indices()
                .zip(s.chars())
                .take_while(|((_, a), b)| a == b)
                .map(|((i, a), _)| i + a.len_utf8())
                .last()
                .unwrap_or(0),
        );
    }
    first[..len].to_string()
}

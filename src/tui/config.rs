//! The settings file: `$XDG_CONFIG_HOME/hookscope/config.toml`, else
//! `~/.config/hookscope/config.toml`.
//!
//! ```toml
//! theme = "light"            # a built-in theme name or a theme file's path
//!
//! [keys]                     # action = key, or a list of keys; replaces the action's keys
//! quit = "q"
//! copy = ["y", "ctrl-y"]
//! ```
//!
//! Action names are [`ACTIONS`]; keys are characters (`q`, `G`, `?`), `ctrl-…` or `alt-…` of a
//! character, or a named key (`enter`, `esc`, `tab`, `shift-tab`, `backspace`, `space`, `up`,
//! `down`, `left`, `right`, `pgup`, `pgdn`, `home`, `end`, `f1`…`f12`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyModifiers};
use serde::Deserialize;

use super::keymap::{Action, Key, Keymap};
use super::tabs::View;

/// What the settings file sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Theme name or path, when set.
    pub theme: Option<String>,
    /// The default keymap with the file's overrides applied.
    pub keymap: Keymap,
}

/// Why the settings file was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        message: String,
    },
    /// The file is not valid TOML or has an unknown field.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// `[keys]` names an action the keymap does not have.
    #[error("{path}: [keys] {action}: unknown action (known: {known})")]
    UnknownAction {
        /// The file.
        path: String,
        /// The name given.
        action: String,
        /// The action names.
        known: String,
    },
    /// `[keys]` gives a key that cannot be read.
    #[error("{path}: [keys] {action}: bad key {key:?} ({message})")]
    BadKey {
        /// The file.
        path: String,
        /// The action.
        action: String,
        /// The key as written.
        key: String,
        /// Why.
        message: String,
    },
}

/// The action names `[keys]` takes, with their actions.
pub const ACTIONS: &[(&str, Action)] = &[
    ("quit", Action::Quit),
    ("help", Action::Help),
    ("command", Action::CommandMode),
    ("filter", Action::FilterMode),
    ("next-pane", Action::NextPane),
    ("prev-pane", Action::PrevPane),
    ("view-requests", Action::Show(View::Requests)),
    ("view-chain", Action::Show(View::Chain)),
    ("view-annotations", Action::Show(View::Annotations)),
    ("view-metrics", Action::Show(View::Metrics)),
    ("view-webhooks", Action::Show(View::Webhooks)),
    ("up", Action::Up),
    ("down", Action::Down),
    ("page-up", Action::PageUp),
    ("page-down", Action::PageDown),
    ("top", Action::Top),
    ("bottom", Action::Bottom),
    ("open", Action::Open),
    ("back", Action::Back),
    ("sort-next", Action::SortNext),
    ("sort-reverse", Action::SortReverse),
    ("next-round", Action::NextRound),
    ("prev-round", Action::PrevRound),
    ("deciding", Action::Deciding),
    ("next-request", Action::NextRequest),
    ("prev-request", Action::PrevRequest),
    ("reveal", Action::ToggleSecrets),
    ("copy", Action::Copy),
    ("detail-down", Action::DetailDown),
    ("detail-up", Action::DetailUp),
    ("view-edit", Action::Show(View::Editor)),
    ("view-whatif", Action::Show(View::WhatIf)),
    ("edit", Action::Edit(None)),
    ("edit-external", Action::EditExternal(None)),
    ("save", Action::Save(None)),
    ("undo", Action::Undo),
    ("redo", Action::Redo),
    ("next-buffer", Action::NextBuffer),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    theme: Option<String>,
    #[serde(default)]
    keys: BTreeMap<String, OneOrMany>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Where the settings file is: `$XDG_CONFIG_HOME/hookscope/config.toml` when that variable is
/// set and not empty, else `$HOME/.config/hookscope/config.toml`; None without either.
pub fn path_from(xdg_config_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let base = match (xdg_config_home, home) {
        (Some(x), _) if !x.is_empty() => PathBuf::from(x),
        (_, Some(h)) if !h.is_empty() => Path::new(h).join(".config"),
        _ => return None,
    };
    Some(base.join("hookscope").join("config.toml"))
}

/// The settings file of this user (see [`path_from`]).
pub fn path() -> Option<PathBuf> {
    let var = |k| std::env::var(k).ok();
    path_from(var("XDG_CONFIG_HOME").as_deref(), var("HOME").as_deref())
}

/// Reads the settings file at `path`: None when there is none.
pub fn load(path: &Path) -> Result<Option<Settings>, ConfigError> {
    let shown = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&shown, &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError::Read {
            path: shown,
            message: e.to_string(),
        }),
    }
}

/// Parses settings text; `path` names the file in errors.
pub fn parse(path: &str, text: &str) -> Result<Settings, ConfigError> {
    let file: File = toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_string(),
        message: e.message().to_string(),
    })?;
    let mut keymap = Keymap::default();
    for (name, keys) in &file.keys {
        let Some((_, action)) = ACTIONS.iter().find(|(n, _)| n == name) else {
            return Err(ConfigError::UnknownAction {
                path: path.to_string(),
                action: name.clone(),
                known: ACTIONS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let written = match keys {
            OneOrMany::One(k) => vec![k.clone()],
            OneOrMany::Many(ks) => ks.clone(),
        };
        let bad = |key: &str, message: &str| ConfigError::BadKey {
            path: path.to_string(),
            action: name.clone(),
            key: key.to_string(),
            message: message.to_string(),
        };
        if written.is_empty() {
            return Err(bad("", "no key given"));
        }
        let mut parsed = Vec::new();
        for k in &written {
            parsed.push(parse_key(k).map_err(|m| bad(k, &m))?);
        }
        keymap.rebind(action, &parsed);
    }
    Ok(Settings {
        theme: file.theme,
        keymap,
    })
}

/// Reads one key as the settings file writes it.
pub fn parse_key(text: &str) -> Result<Key, String> {
    let (mods, rest) = if let Some(r) = text.strip_prefix("ctrl-") {
        (KeyModifiers::CONTROL, r)
    } else if let Some(r) = text.strip_prefix("alt-") {
        (KeyModifiers::ALT, r)
    } else {
        (KeyModifiers::NONE, text)
    };
    let mut chars = rest.chars();
    let code = match (chars.next(), chars.next()) {
        (Some(c), None) => KeyCode::Char(c),
        _ => match rest {
            "enter" => KeyCode::Enter,
            "esc" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "shift-tab" => KeyCode::BackTab,
            "backspace" => KeyCode::Backspace,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pgup" | "pageup" => KeyCode::PageUp,
            "pgdn" | "pagedown" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            f if f.starts_with('f') => match f[1..].parse::<u8>() {
                Ok(n @ 1..=12) => KeyCode::F(n),
                _ => return Err("not a key name".into()),
            },
            "" => return Err("empty".into()),
            _ => return Err("not a key name".into()),
        },
    };
    if mods != KeyModifiers::NONE && !matches!(code, KeyCode::Char(_)) {
        return Err("ctrl- and alt- take a character".into());
    }
    Ok(Key { code, mods })
}

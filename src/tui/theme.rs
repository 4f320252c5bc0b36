//! Themes are data: TOML files of named styles and symbols. The default (dark) theme is embedded
//! and complete; every other theme overlays it, so a theme file names only what it changes.

use std::collections::BTreeMap;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The embedded default theme (dark), complete.
pub const DEFAULT_TOML: &str = include_str!("../../themes/default.toml");

/// Themes shipped with the binary, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("default", DEFAULT_TOML),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// Why a theme could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    /// The file could not be read.
    #[error("theme {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not valid TOML, or not the theme layout.
    #[error("theme {name}: {message}")]
    Parse {
        /// Theme name or path.
        name: String,
        /// The parser's message.
        message: String,
    },
    /// A key the console does not know (a typo would otherwise pass silently).
    #[error("theme {name}: unknown {section} key {key:?}")]
    UnknownKey {
        /// Theme name or path.
        name: String,
        /// `styles` or `symbols`.
        section: &'static str,
        /// The key.
        key: String,
    },
    /// A colour or modifier that does not parse.
    #[error("theme {name}: {key}: {message}")]
    BadValue {
        /// Theme name or path.
        name: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// Neither a built-in theme nor a readable file.
    #[error("no theme named {0:?} (built in: default, light, high-contrast; or give a path)")]
    NotFound(String),
}

macro_rules! keys {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $key:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($(#[$vm])* $variant,)* }
        impl $name {
            /// Every key, in file order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];
            /// The key as written in theme files.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $key,)* }
            }
            /// The key named `s`.
            pub fn parse(s: &str) -> Option<$name> {
                match s { $($key => Some($name::$variant),)* _ => None }
            }
        }
    };
}

keys! {
    /// A named style of the `[styles]` table.
    StyleKey {
        /// Text everywhere unless something more specific applies.
        Base = "base",
        /// Secondary text.
        Muted = "muted",
        /// Pane titles.
        Title = "title",
        /// Pane borders.
        Border = "border",
        /// The border of the focused pane.
        BorderFocused = "border_focused",
        /// View tabs.
        Tab = "tab",
        /// The current view's tab.
        TabActive = "tab_active",
        /// Table headers.
        Header = "header",
        /// The selected row or cell.
        Selected = "selected",
        /// The status bar.
        StatusBar = "status_bar",
        /// Highlighted parts of the status bar (view name, mode).
        StatusKey = "status_key",
        /// The `:` and `/` input line.
        CommandLine = "command_line",
        /// Completion candidates.
        Completion = "completion",
        /// Transient messages.
        Message = "message",
        /// Errors.
        Error = "error",
        /// Warnings.
        Warning = "warning",
        /// Allowed verdicts.
        Allowed = "allowed",
        /// Denied verdicts.
        Denied = "denied",
        /// Requests where a webhook failed open.
        FailedOpen = "failed_open",
        /// Chain cell: webhook not called.
        CellSkipped = "cell_skipped",
        /// Chain cell: called, allowed, no change.
        CellCalled = "cell_called",
        /// Chain cell: called and changed the object.
        CellMutated = "cell_mutated",
        /// Chain cell: denied the request.
        CellDenied = "cell_denied",
        /// Chain cell: the call failed and failed the request.
        CellErrored = "cell_errored",
        /// Chain cell: the call failed and the request went on.
        CellFailedOpen = "cell_failed_open",
        /// Added to the cell that decided the verdict.
        CellDeciding = "cell_deciding",
        /// Diff: added lines.
        DiffAdded = "diff_added",
        /// Diff: removed lines.
        DiffRemoved = "diff_removed",
        /// Diff: unchanged lines.
        DiffContext = "diff_context",
        /// JSON documents.
        Json = "json",
        /// Annotation keys.
        AnnotationKey = "annotation_key",
        /// Annotation values.
        AnnotationValue = "annotation_value",
        /// Masked secret values.
        Secret = "secret",
        /// Rejection bars.
        BarRejection = "bar_rejection",
        /// Request bars.
        BarRequest = "bar_request",
        /// Bar labels.
        BarLabel = "bar_label",
        /// Keys in the help overlay.
        HelpKey = "help_key",
        /// Descriptions in the help overlay.
        HelpText = "help_text",
        /// Section titles in the help overlay.
        HelpSection = "help_section",
        /// The progress gauge.
        Progress = "progress",
    }
}

keys! {
    /// A symbol of the `[symbols]` table.
    SymbolKey {
        /// Allowed verdict.
        Allowed = "allowed",
        /// Denied verdict.
        Denied = "denied",
        /// A webhook failed open.
        FailedOpen = "failed_open",
        /// Webhook skipped.
        Skipped = "skipped",
        /// Webhook called.
        Called = "called",
        /// Webhook mutated the object.
        Mutated = "mutated",
        /// Webhook call failed.
        Errored = "errored",
        /// Not known yet.
        Pending = "pending",
        /// Selection marker.
        Selected = "selected",
    }
}

/// A loaded theme: every style and symbol resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// Its name (a built-in name or the path it was read from).
    pub name: String,
    styles: Vec<Style>,
    symbols: Vec<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    styles: BTreeMap<String, StyleSpec>,
    #[serde(default)]
    symbols: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    modifiers: Vec<String>,
}

fn parse_color(s: &str) -> Result<Color, String> {
    let normal = s.trim().to_ascii_lowercase().replace('_', "-");
    if normal == "reset" {
        return Ok(Color::Reset);
    }
    normal
        .parse::<Color>()
        .map_err(|_| format!("{s:?} is not a colour (a name, #rrggbb, 0-255 or reset)"))
}

fn parse_modifier(s: &str) -> Result<Modifier, String> {
    Ok(match s {
        "bold" => Modifier::BOLD,
        "dim" => Modifier::DIM,
        "italic" => Modifier::ITALIC,
        "underlined" => Modifier::UNDERLINED,
        "reversed" => Modifier::REVERSED,
        "crossed-out" => Modifier::CROSSED_OUT,
        other => return Err(format!("{other:?} is not a modifier")),
    })
}

impl Theme {
    /// The embedded default theme.
    pub fn default_theme() -> Theme {
        // The embedded file is checked by the tests; an error here is a build defect.
        Theme::overlay_on(None, "default", DEFAULT_TOML)
            .expect("the embedded default theme is complete and valid")
    }

    /// A built-in theme by name, or a theme file by path, overlaid on the default.
    pub fn load(name_or_path: &str) -> Result<Theme, ThemeError> {
        if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            return Theme::overlay_on(Some(Theme::default_theme()), name, text);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(ThemeError::NotFound(name_or_path.to_string()));
        }
        let text = std::fs::read_to_string(path).map_err(|source| ThemeError::Read {
            path: name_or_path.to_string(),
            source,
        })?;
        Theme::from_toml(name_or_path, &text)
    }

    /// A theme from TOML text, overlaid on the default.
    pub fn from_toml(name: &str, text: &str) -> Result<Theme, ThemeError> {
        Theme::overlay_on(Some(Theme::default_theme()), name, text)
    }

    /// `text` over `base`; without a base every key must be present.
    fn overlay_on(base: Option<Theme>, name: &str, text: &str) -> Result<Theme, ThemeError> {
        let file: File = toml::from_str(text).map_err(|e| ThemeError::Parse {
            name: name.to_string(),
            message: e.message().to_string(),
        })?;
        let complete = base.is_none();
        let mut styles: Vec<Option<Style>> = match &base {
            Some(b) => b.styles.iter().copied().map(Some).collect(),
            None => vec![None; StyleKey::ALL.len()],
        };
        let mut symbols: Vec<Option<String>> = match &base {
            Some(b) => b.symbols.iter().cloned().map(Some).collect(),
            None => vec![None; SymbolKey::ALL.len()],
        };
        let bad = |key: &str, message: String| ThemeError::BadValue {
            name: name.to_string(),
            key: key.to_string(),
            message,
        };
        for (key, spec) in &file.styles {
            let k = StyleKey::parse(key).ok_or_else(|| ThemeError::UnknownKey {
                name: name.to_string(),
                section: "styles",
                key: key.clone(),
            })?;
            let mut style = Style::default();
            if let Some(fg) = &spec.fg {
                style = style.fg(parse_color(fg).map_err(|m| bad(key, m))?);
            }
            if let Some(bg) = &spec.bg {
                style = style.bg(parse_color(bg).map_err(|m| bad(key, m))?);
            }
            for m in &spec.modifiers {
                style = style.add_modifier(parse_modifier(m).map_err(|m| bad(key, m))?);
            }
            styles[k as usize] = Some(style);
        }
        for (key, sym) in &file.symbols {
            let k = SymbolKey::parse(key).ok_or_else(|| ThemeError::UnknownKey {
                name: name.to_string(),
                section: "symbols",
                key: key.clone(),
            })?;
            symbols[k as usize] = Some(sym.clone());
        }
        let missing = |section, key: &str| ThemeError::BadValue {
            name: name.to_string(),
            key: format!("{section}.{key}"),
            message: "missing from a complete theme".into(),
        };
        if complete {
            if let Some(k) = StyleKey::ALL
                .iter()
                .find(|k| styles[**k as usize].is_none())
            {
                return Err(missing("styles", k.as_str()));
            }
            if let Some(k) = SymbolKey::ALL
                .iter()
                .find(|k| symbols[**k as usize].is_none())
            {
                return Err(missing("symbols", k.as_str()));
            }
        }
        Ok(Theme {
            name: name.to_string(),
            styles: styles.into_iter().map(Option::unwrap_or_default).collect(),
            symbols: symbols.into_iter().map(Option::unwrap_or_default).collect(),
        })
    }

    /// The style of `key`, on top of `base`.
    pub fn style(&self, key: StyleKey) -> Style {
        let base = self.styles[StyleKey::Base as usize];
        if key == StyleKey::Base {
            return base;
        }
        base.patch(self.styles[key as usize])
    }

    /// The style of `key` alone (to patch onto another).
    pub fn raw(&self, key: StyleKey) -> Style {
        self.styles[key as usize]
    }

    /// The symbol of `key`.
    pub fn symbol(&self, key: SymbolKey) -> &str {
        &self.symbols[key as usize]
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::default_theme()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_themes_load() {
        for (name, _) in BUILTIN {
            let t = Theme::load(name).unwrap();
            assert_eq!(t.name, *name);
        }
        assert_eq!(
            Theme::load("high-contrast")
                .unwrap()
                .symbol(SymbolKey::Denied),
            "X"
        );
    }

    #[test]
    fn default_lists_every_key() {
        let file: File = toml::from_str(DEFAULT_TOML).unwrap();
        assert_eq!(file.styles.len(), StyleKey::ALL.len());
        assert_eq!(file.symbols.len(), SymbolKey::ALL.len());
    }

    #[test]
    fn docs_list_every_key() {
        let doc = include_str!("../../docs/themes.md");
        for k in StyleKey::ALL {
            assert!(doc.contains(&format!("| `{}` |", k.as_str())), "{k:?}");
        }
        for k in SymbolKey::ALL {
            assert!(doc.contains(&format!("| `{}` |", k.as_str())), "{k:?}");
        }
    }

    #[test]
    fn overlay_errors_name_the_key() {
        let e = Theme::from_toml("t", "[styles]\nbsae = { fg = \"red\" }").unwrap_err();
        assert!(e.to_string().contains("bsae"), "{e}");
        let e = Theme::from_toml("t", "[styles]\nbase = { fg = \"nope\" }").unwrap_err();
        assert!(e.to_string().contains("base"), "{e}");
        let t = Theme::from_toml("t", "[styles]\ndenied = { fg = \"#ff0000\" }").unwrap();
        assert_eq!(t.raw(StyleKey::Denied).fg, Some(Color::Rgb(255, 0, 0)));
        assert_eq!(t.symbol(SymbolKey::Allowed), "✓");
    }
}

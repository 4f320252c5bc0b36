//! Subcommands.

pub mod check;
pub(crate) mod configs;
pub mod live;
pub mod patch;
pub mod replay;
pub mod tui;

use std::io::IsTerminal;

/// Colours for terminal output; plain text when stdout is not a terminal or `NO_COLOR` is set.
pub struct Paint {
    on: bool,
}

impl Paint {
    /// Decides from the environment.
    pub fn stdout() -> Self {
        Self {
            on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn wrap(&self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    /// Red.
    pub fn bad(&self, s: &str) -> String {
        self.wrap("31", s)
    }

    /// Yellow.
    pub fn warn(&self, s: &str) -> String {
        self.wrap("33", s)
    }

    /// Green.
    pub fn good(&self, s: &str) -> String {
        self.wrap("32", s)
    }

    /// Dim.
    pub fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }

    /// Bold.
    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
}

//! Subcommands.

/// `print!` to standard output through [`Stdout`]: a closed stdout ends the program quietly.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::Stdout::print(format_args!($($arg)*))
    };
}

/// `println!` through [`Stdout`].
macro_rules! outln {
    () => {
        out!("\n")
    };
    ($($arg:tt)*) => {
        out!("{}\n", format_args!($($arg)*))
    };
}

/// `eprint!` that never panics: a closed stderr ends the program quietly like a closed stdout.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli::Stdout::print_err(format_args!($($arg)*))
    };
}

/// `eprintln!` through [`err!`].
macro_rules! errln {
    ($($arg:tt)*) => {
        err!("{}\n", format_args!($($arg)*))
    };
}

pub mod check;
pub(crate) mod configs;
pub mod conventions;
pub mod live;
pub mod patch;
pub mod replay;
pub mod tui;

use std::io::{IsTerminal, Write};

/// The exit status when standard output or error is closed under the program (its reader went
/// away, as `head` does): what a shell reports for `grep` or `kubectl` killed by SIGPIPE
/// (128 + 13), without their death by signal, which Rust programs do not get.
pub const CLOSED_OUTPUT: u8 = 141;

/// Standard output as the commands write it: a write that finds it closed ends the program at
/// once with [`CLOSED_OUTPUT`] and no message (nobody is left to read one); any other write
/// error ends it with a message and status 2.
pub struct Stdout;

impl Stdout {
    /// Writes formatted text.
    pub fn print(args: std::fmt::Arguments<'_>) {
        if let Err(e) = std::io::stdout().lock().write_fmt(args) {
            write_failed(&e, "standard output");
        }
    }

    /// Writes formatted text to standard error; only a closed stderr ends the program.
    pub fn print_err(args: std::fmt::Arguments<'_>) {
        if let Err(e) = std::io::stderr().lock().write_fmt(args)
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            std::process::exit(i32::from(CLOSED_OUTPUT));
        }
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stdout().write(buf).inspect_err(fatal)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush().inspect_err(fatal)
    }
}

/// Ends the program after a failed write to standard output, unless the write is to be retried.
fn fatal(e: &std::io::Error) {
    if e.kind() != std::io::ErrorKind::Interrupted {
        write_failed(e, "standard output");
    }
}

/// Ends the program after a failed write to `what`.
fn write_failed(e: &std::io::Error, what: &str) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(CLOSED_OUTPUT));
    }
    let _ = writeln!(std::io::stderr(), "error: writing to {what}: {e}");
    std::process::exit(2)
}

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

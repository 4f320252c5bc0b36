//! Terminal setup and restore. The terminal is restored on exit, on error and on panic.

use std::io::{self, Stdout};

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The console's terminal.
pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Raw mode, the alternate screen and mouse reporting; installs a panic hook that restores the
/// terminal before the panic message is printed.
pub fn setup() -> io::Result<Term> {
    install_panic_hook();
    enable_raw_mode()?;
    let mut out = io::stdout();
    if let Err(e) = execute!(out, EnterAlternateScreen, EnableMouseCapture, cursor::Hide) {
        let _ = restore();
        return Err(e);
    }
    Terminal::new(CrosstermBackend::new(out))
}

/// Leaves raw mode and the alternate screen, shows the cursor. Safe to call more than once.
pub fn restore() -> io::Result<()> {
    let raw = disable_raw_mode();
    execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        cursor::Show
    )?;
    raw
}

/// Takes the terminal back after [`restore`] (the user's editor ran): raw mode, the alternate
/// screen cleared, mouse reporting, and a fresh [`Term`] so the next frame is drawn whole. (The
/// terminal is not asked for its cursor position, which an event reader started before would
/// answer in its place.)
pub fn resume() -> io::Result<Term> {
    enable_raw_mode()?;
    execute!(
        io::stdout(),
        EnterAlternateScreen,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
        EnableMouseCapture,
        cursor::Hide
    )?;
    Terminal::new(CrosstermBackend::new(io::stdout()))
}

fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = restore();
        previous(info);
    }));
}

/// Restores the terminal when dropped (on every way out of the event loop).
#[derive(Debug)]
pub struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = restore();
    }
}

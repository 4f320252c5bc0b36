//! The console: a terminal UI over the replay (and, later, a live cluster).
//!
//! Architecture (the Elm pattern, as in ratatui's templates, gitui and yazi):
//! * [`app::State`] holds everything shown; [`app::update`] is the only place it changes, one
//!   [`app::Msg`] at a time, returning [`app::Command`]s (IO) for the event loop to perform;
//! * a [`source::Source`] (the replay now, a cluster later) runs in a tokio task and sends
//!   [`source::SourceMsg`]s over a bounded channel;
//! * [`view::render`] draws a frame as a pure function of the state;
//! * [`run`] is the event loop: terminal events, source messages and a frame tick; a frame is
//!   drawn only when something changed, at most about 60 times a second.
//!
//! What the views show comes from the engine's [`crate::engine::Outcome`] and its trace only.

pub mod app;
pub mod config;
pub mod demo;
pub mod keymap;
pub mod model;
pub mod source;
pub mod terminal;
pub mod theme;
pub mod view;

use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::mpsc;

use app::{Command, Msg, State};
use source::{CHANNEL_CAPACITY, Source};

/// The shortest time between two frames (about 60 frames a second).
pub const FRAME: Duration = Duration::from_millis(16);

/// Source messages applied between two frames at most, so keys stay responsive while a fast
/// source streams.
const BATCH: usize = 512;

/// Why the console stopped.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// The terminal could not be set up, drawn or read.
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

/// Performs the commands `update` returned; true when the console should end.
fn perform(state: &mut State, commands: Vec<Command>) -> bool {
    let mut quit = false;
    for c in commands {
        match c {
            Command::Quit => quit = true,
            Command::Clipboard(payload) => {
                use std::io::Write as _;
                let mut out = std::io::stdout();
                // A terminal without OSC 52 ignores the sequence; nothing else to do.
                let _ = out
                    .write_all(app::osc52(&payload).as_bytes())
                    .and_then(|()| out.flush());
            }
            Command::LoadTheme(name) => {
                let loaded = theme::Theme::load(&name).map_err(|e| e.to_string());
                let more = app::update(state, Msg::ThemeLoaded(loaded));
                quit |= perform(state, more);
            }
        }
    }
    quit
}

/// Runs the console on this terminal until the user quits. Call from inside a tokio runtime.
pub async fn run(source: Box<dyn Source>, mut state: State) -> Result<(), TuiError> {
    let mut terminal = terminal::setup()?;
    let _guard = terminal::Guard;
    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let task = tokio::spawn(source.run(tx));
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let size = terminal.size()?;
    app::update(&mut state, Msg::Resize(size.width, size.height));
    // The settings file: read here (IO), applied by update(); a bad file leaves the defaults
    // and says why on the status bar.
    let settings = match config::path() {
        Some(p) => config::load(&p).map_err(|e| e.to_string()),
        None => Ok(None),
    };
    let commands = app::update(&mut state, Msg::SettingsLoaded(settings));
    perform(&mut state, commands);
    let mut source_open = true;
    let mut dirty = true;
    loop {
        let mut changed = true;
        let commands = tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) if k.kind != KeyEventKind::Release => app::update(&mut state, Msg::Key(k)),
                Some(Ok(Event::Mouse(m))) => app::update(&mut state, Msg::Mouse(m)),
                Some(Ok(Event::Resize(w, h))) => app::update(&mut state, Msg::Resize(w, h)),
                Some(Ok(_)) => {
                    changed = false;
                    Vec::new()
                }
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            msg = rx.recv(), if source_open => match msg {
                Some(m) => {
                    let mut commands = app::update(&mut state, Msg::Source(m));
                    // Drain what is already queued: one frame for a burst of results.
                    for _ in 0..BATCH {
                        match rx.try_recv() {
                            Ok(m) => commands.extend(app::update(&mut state, Msg::Source(m))),
                            Err(_) => break,
                        }
                    }
                    commands
                }
                None => {
                    source_open = false;
                    Vec::new()
                }
            },
            _ = tick.tick() => {
                if dirty {
                    terminal.draw(|f| view::render(f, &state))?;
                    dirty = false;
                }
                changed = false;
                Vec::new()
            }
        };
        dirty |= changed;
        if perform(&mut state, commands) || state.quit {
            break;
        }
    }
    task.abort();
    drop(terminal);
    Ok(())
}

//! The console: a terminal UI over the replay (and, later, a live cluster).
//!
//! Architecture (the Elm pattern, as in ratatui's templates, gitui and yazi):
//! * [`app::State`] holds everything shown; [`app::update`] is the only place it changes, one
//!   [`app::Msg`] at a time, returning [`app::Command`]s (IO) for the event loop to perform;
//! * each view keeps its own cursor, scroll and what it has open in a [`views::ViewState`],
//!   held by the state and handed the part of the shared state it moves over;
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
pub mod edit_keys;
pub mod editing;
pub mod excerpt;
pub mod filter;
pub mod io;
pub mod keymap;
pub mod live;
pub mod live_source;
pub mod model;
pub mod source;
pub mod tabs;
pub mod terminal;
pub mod theme;
pub mod timeline;
pub mod view;
pub mod views;

use std::time::Duration;

use crossterm::event::{Event, EventStream, KeyEventKind};
use futures::StreamExt;
use tokio::sync::mpsc;

use app::{Command, Msg, State};
use source::{CHANNEL_CAPACITY, Source, SourceCtl};

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

/// The event loop's side of the IO: where commands go.
struct Io {
    /// Requests to the source, forwarded by one task in the order the console made them (a
    /// task per request could deliver an older re-dispatch after a newer one).
    ctl: mpsc::UnboundedSender<SourceCtl>,
    /// Messages back into `update` from IO tasks (timers, saves, the watcher).
    inbox: mpsc::Sender<Msg>,
    /// Where unsaved text is kept.
    recovery: Option<crate::edit::RecoveryStore>,
    /// Files watched for changes made elsewhere.
    watcher: Option<crate::edit::ConfigWatcher>,
    /// An edit in the user's editor, run by the loop between frames.
    external: Option<(usize, String)>,
}

/// A sender whose messages reach `to` in the order they were sent, without the sender ever
/// waiting: one task forwards them. Unbounded, but fed only by the user's actions; `to` stays
/// bounded.
fn forward_in_order<T: Send + 'static>(to: mpsc::Sender<T>) -> mpsc::UnboundedSender<T> {
    let (tx, mut queue) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(m) = queue.recv().await {
            if to.send(m).await.is_err() {
                break;
            }
        }
    });
    tx
}

impl Io {
    fn new(source: mpsc::Sender<SourceCtl>, inbox: mpsc::Sender<Msg>) -> Io {
        Io {
            ctl: forward_in_order(source),
            watcher: io::watcher(inbox.clone()),
            inbox,
            recovery: crate::edit::RecoveryStore::open_default().ok(),
            external: None,
        }
    }
}

/// Performs the commands `update` returned; true when the console should end.
fn perform(state: &mut State, commands: Vec<Command>, io: &mut Io) -> bool {
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
                quit |= perform(state, more, io);
            }
            Command::CheckLater { buffer, generation } => {
                let inbox = io.inbox.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(editing::CHECK_DELAY).await;
                    let _ = inbox.send(Msg::CheckDue { buffer, generation }).await;
                });
            }
            // The source gone, requests to it have nowhere to go.
            Command::Replay(requests) => {
                let _ = io.ctl.send(SourceCtl::Replay { requests });
            }
            Command::Apply(request) => {
                let _ = io.ctl.send(SourceCtl::Apply(request));
            }
            Command::Context(name) => {
                let _ = io.ctl.send(SourceCtl::Context(name));
            }
            Command::Redispatch {
                generation,
                configurations,
                policies,
                fresh,
            } => {
                let _ = io.ctl.send(SourceCtl::Redispatch {
                    generation,
                    configurations,
                    policies,
                    fresh,
                });
            }
            Command::Save { buffer, path, text } => {
                let inbox = io.inbox.clone();
                // The watcher is told first, so this save is not reported as a change.
                if let Some(w) = &io.watcher {
                    w.expect(&path, &text);
                }
                tokio::task::spawn_blocking(move || {
                    let result = crate::edit::save_atomic(&path, &text)
                        .map(|saved| (path, saved.backup))
                        .map_err(|e| e.to_string());
                    let _ = inbox.blocking_send(Msg::Saved {
                        buffer,
                        text,
                        result,
                    });
                });
            }
            Command::ExternalEdit { buffer, text } => io.external = Some((buffer, text)),
            Command::ReadExcerpt {
                path,
                unit,
                index,
                reason,
            } => {
                let inbox = io.inbox.clone();
                tokio::task::spawn_blocking(move || {
                    let read = excerpt::read(&path, unit, index).map(|mut e| {
                        e.reason = reason;
                        e
                    });
                    let _ = inbox.blocking_send(Msg::ExcerptRead(read));
                });
            }
            Command::WriteRecovery { key, text, base } => {
                if let Some(store) = io.recovery.clone() {
                    tokio::task::spawn_blocking(move || {
                        // A full disk loses only the copy; the buffer itself is intact.
                        let _ = store.write_from(&key, &text, Some(&base));
                    });
                }
            }
            Command::DiscardRecovery(key) => {
                if let Some(store) = io.recovery.clone() {
                    tokio::task::spawn_blocking(move || {
                        let _ = store.discard(&key);
                    });
                }
            }
            Command::Watch(files) => {
                for (path, text) in files {
                    io::watch(&mut io.watcher, &path, Some(&text));
                }
            }
        }
    }
    quit
}

/// How [`run_with`] runs the console.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// End as soon as the first frame is drawn (measuring start-up; not for people).
    pub exit_after_first_frame: bool,
}

/// Runs the console on this terminal until the user quits. Call from inside a tokio runtime.
pub async fn run(source: Box<dyn Source>, state: State) -> Result<(), TuiError> {
    run_with(source, state, RunOptions::default()).await
}

/// [`run`] with options.
pub async fn run_with(
    source: Box<dyn Source>,
    mut state: State,
    options: RunOptions,
) -> Result<(), TuiError> {
    let mut terminal = terminal::setup()?;
    let _guard = terminal::Guard;
    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (ctl_tx, ctl_rx) = mpsc::channel(16);
    let (inbox_tx, mut inbox) = mpsc::channel(64);
    let mut io = Io::new(ctl_tx, inbox_tx);
    let task = tokio::spawn(source.run(tx, ctl_rx));
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
    perform(&mut state, commands, &mut io);
    if let Some(store) = &io.recovery {
        let found = io::list_recovery(store);
        let commands = app::update(&mut state, Msg::RecoveryFound(found));
        perform(&mut state, commands, &mut io);
    }
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
            Some(m) = inbox.recv() => app::update(&mut state, m),
            _ = tick.tick() => {
                if dirty {
                    terminal.draw(|f| view::render(f, &state))?;
                    dirty = false;
                    if options.exit_after_first_frame {
                        break;
                    }
                }
                changed = false;
                Vec::new()
            }
        };
        dirty |= changed;
        if perform(&mut state, commands, &mut io) || state.quit {
            break;
        }
        if let Some((buffer, text)) = io.external.take() {
            // The editor owns the terminal until it exits; key events must not be read
            // meanwhile, so the event stream is dropped and made anew.
            drop(events);
            terminal::restore()?;
            let name = format!("{buffer}");
            let result = tokio::task::block_in_place(|| io::run_editor(&text, &name));
            terminal = terminal::resume()?;
            events = EventStream::new();
            let commands = app::update(&mut state, Msg::ExternalEdited { buffer, result });
            if perform(&mut state, commands, &mut io) {
                break;
            }
            dirty = true;
        }
    }
    task.abort();
    drop(terminal);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_reach_the_source_in_the_order_they_were_made() {
        // A bounded channel smaller than the burst: the sender never waits, the order holds.
        let (to, mut rx) = mpsc::channel(2);
        let tx = forward_in_order(to);
        for i in 0..500 {
            tx.send(i).expect("forwarder running");
        }
        drop(tx);
        let mut got = Vec::new();
        while let Some(i) = rx.recv().await {
            got.push(i);
        }
        assert_eq!(got, (0..500).collect::<Vec<_>>());
    }
}

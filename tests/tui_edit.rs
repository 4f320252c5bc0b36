//! Editing configurations in the console, as message sequences through the one update path,
//! with the demo's real source re-dispatching: a valid edit re-runs every request and the
//! what-if counts follow; an invalid edit keeps the configuration in force; saving writes the
//! file; recovered text comes back.

#[path = "common/scratch.rs"]
mod scratch;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hookscope::edit::{BufferKey, content_hash};
use hookscope::engine::AuditLevel;
use hookscope::tui::app::{Command, Mode, Msg, RecoveredText, State, View, update};
use hookscope::tui::edit_keys::EditMode;
use hookscope::tui::keymap::Action;
use hookscope::tui::model::Verdict;
use hookscope::tui::source::{Source, SourceCtl, SourceMsg};
use hookscope::tui::theme::Theme;
use scratch::Scratch;
use tokio::sync::mpsc;

/// The offline demo's source, running, with the console's side of its channels.
struct Harness {
    rt: tokio::runtime::Runtime,
    rx: mpsc::Receiver<SourceMsg>,
    ctl: mpsc::Sender<SourceCtl>,
    state: State,
}

impl Harness {
    /// The demo's source, its first replay done.
    fn start() -> Harness {
        let mut h = Harness::spawn();
        h.pump_until(|m| matches!(m, SourceMsg::Finished { .. }));
        h
    }

    /// The demo's source, started, none of its messages taken yet.
    fn spawn() -> Harness {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel(256);
        let (ctl, ctl_rx) = mpsc::channel(16);
        // The console checks edits for the release the source models.
        let version = hookscope::KubeVersion::default();
        let source = hookscope::tui::demo::offline(version);
        rt.spawn(Box::new(source).run(tx, ctl_rx));
        let state = State::new(version.to_string(), AuditLevel::Request, Theme::default());
        Harness { rt, rx, ctl, state }
    }

    /// Feeds source messages to `update` until one matches.
    fn pump_until(&mut self, done: impl Fn(&SourceMsg) -> bool) {
        loop {
            let m = self
                .rt
                .block_on(async {
                    tokio::time::timeout(std::time::Duration::from_secs(60), self.rx.recv()).await
                })
                .expect("the source answers")
                .expect("the source is running");
            let stop = done(&m);
            update(&mut self.state, Msg::Source(m));
            if stop {
                return;
            }
        }
    }

    /// Performs the commands as the event loop would, for the ones these tests need: a
    /// re-dispatch goes to the source and its results are fed back.
    fn perform(&mut self, commands: Vec<Command>) -> Vec<Command> {
        let mut rest = Vec::new();
        for c in commands {
            match c {
                Command::Redispatch {
                    generation,
                    configurations,
                    policies,
                    fresh,
                } => {
                    let ctl = self.ctl.clone();
                    self.rt
                        .block_on(ctl.send(SourceCtl::Redispatch {
                            generation,
                            configurations,
                            policies,
                            fresh,
                        }))
                        .unwrap();
                    self.pump_until(|m| {
                        matches!(m, SourceMsg::RedispatchFinished { generation: g, .. } if *g == generation)
                    });
                }
                other => rest.push(other),
            }
        }
        rest
    }

    fn act(&mut self, a: Action) -> Vec<Command> {
        update(&mut self.state, Msg::Action(a))
    }

    /// Keys of vim's normal mode (`i`, `A`, `o`, …; `\x1b` is esc), one at a time.
    fn vim(&mut self, keys: &str) -> Vec<Command> {
        self.type_text(keys)
    }

    /// Types text into the editor (in insert mode), one key at a time (`\n` is enter, `\x1b`
    /// esc).
    fn type_text(&mut self, text: &str) -> Vec<Command> {
        let mut out = Vec::new();
        for c in text.chars() {
            let code = match c {
                '\n' => KeyCode::Enter,
                '\x1b' => KeyCode::Esc,
                c => KeyCode::Char(c),
            };
            out.extend(self.key(code, KeyModifiers::NONE));
        }
        out
    }

    fn key(&mut self, code: KeyCode, mods: KeyModifiers) -> Vec<Command> {
        update(&mut self.state, Msg::Key(KeyEvent::new(code, mods)))
    }

    /// The pause after typing is over: the check runs.
    fn check_now(&mut self) -> Vec<Command> {
        let buffer = self.state.buffer;
        let generation = self.state.buffers[buffer].generation;
        update(&mut self.state, Msg::CheckDue { buffer, generation })
    }

    /// Moves the cursor to the start of the first line containing `needle` after line `from`.
    fn goto(&mut self, needle: &str, from: usize) {
        let b = &mut self.state.buffers[self.state.buffer];
        let line = b
            .area
            .lines()
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, l)| l.contains(needle))
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("{needle:?} in the buffer"));
        b.goto_line(line + 1);
    }
}

/// Whether `commands` ask for a re-dispatch.
fn redispatches(commands: &[Command]) -> bool {
    commands
        .iter()
        .any(|c| matches!(c, Command::Redispatch { .. }))
}

fn denied(s: &State) -> usize {
    s.entries
        .iter()
        .filter(|e| matches!(e.verdict, Verdict::Denied(_)))
        .count()
}

/// Replaces `Ignore` on the cursor's line by `Fail` with keys, as a vim user would: `A`
/// (insert at the end of the line), delete the word, type the new one, `esc`.
fn ignore_to_fail(h: &mut Harness) -> Vec<Command> {
    let mut c = h.vim("A");
    for _ in 0.."Ignore".len() {
        c.extend(h.key(KeyCode::Backspace, KeyModifiers::NONE));
    }
    c.extend(h.type_text("Fail"));
    c.extend(h.vim("\x1b"));
    c
}

#[test]
fn a_valid_edit_re_dispatches_and_the_what_if_counts_follow() {
    let mut h = Harness::start();
    let before_denied = denied(&h.state);
    let opens: usize = h.state.hook_counts.iter().map(|c| c.failed_open).sum();
    assert!(opens > 0, "the demo's slow webhook fails open");

    // From the Webhooks view, on the slow webhook: edit its configuration.
    h.act(Action::Show(View::Webhooks));
    let slow = h
        .state
        .hooks
        .iter()
        .position(|x| x.configuration == "30-slow-quota")
        .unwrap();
    h.state.hook_cursor.selected = slow;
    let c = h.key(KeyCode::Char('e'), KeyModifiers::NONE);
    assert!(c.is_empty());
    assert_eq!(h.state.view, View::Editor);
    let start = h.state.buffers[h.state.buffer].line_of("30-slow-quota");
    h.goto("failurePolicy: Ignore", start - 1);

    let typed = ignore_to_fail(&mut h);
    // Each keystroke schedules a check; none takes effect before the pause.
    assert!(
        typed
            .iter()
            .all(|c| matches!(c, Command::CheckLater { .. }))
    );
    assert!(h.state.buffers[h.state.buffer].modified());
    let commands = h.check_now();
    assert!(
        commands
            .iter()
            .any(|c| matches!(c, Command::WriteRecovery { .. })),
        "unsaved text is kept for recovery: {commands:?}"
    );
    let rest = h.perform(commands);
    assert!(
        rest.iter()
            .all(|c| !matches!(c, Command::Redispatch { .. }))
    );

    // Every request was dispatched again: the slow webhook's timeouts now deny. failurePolicy
    // is not part of what a webhook receives, so every reply was reused and no call was sent.
    let s = &h.state;
    let (reused, sent) = s.redispatch_calls;
    assert!(reused > 0);
    assert_eq!(sent, 0);
    assert!(s.baseline.is_some());
    assert_eq!(s.entries.len(), s.baseline.as_ref().unwrap().entries.len());
    let after_denied = denied(s);
    assert_eq!(after_denied, before_denied + opens);
    assert_eq!(s.whatif.flipped().count(), opens);
    let baseline = &s.baseline.as_ref().unwrap().entries;
    assert!(s.whatif.requests.iter().take(opens).all(|r| r.flipped()
        && baseline[r.index].verdict == Verdict::FailedOpen
        && matches!(s.entries[r.index].verdict, Verdict::Denied(500))));
    let quota = s
        .whatif
        .hooks
        .iter()
        .find(|d| d.hook.configuration == "30-slow-quota")
        .unwrap();
    let (b, a) = (quota.before.unwrap(), quota.after.unwrap());
    assert_eq!((b.failed_open, a.failed_open), (opens, 0));
    assert_eq!(b.matched, a.matched);
    // The other views show the edited state: the webhook's counts, the status counts.
    let (_, _, denied_now, open_now) = s.counts();
    assert_eq!((denied_now, open_now), (after_denied, 0));

    // Opening a changed request shows its chain before and after.
    h.act(Action::Show(View::WhatIf));
    h.act(Action::Open);
    assert_eq!(h.state.view, View::Chain);
    assert!(h.state.chain.compare);
    assert_eq!(
        h.state.requests.selected,
        Some(h.state.whatif.requests[0].index)
    );
    h.act(Action::Back);
    assert_eq!(h.state.view, View::WhatIf);
}

#[test]
fn redispatch_calls_every_webhook_again_where_an_edit_reuses_the_replies() {
    let mut h = Harness::start();
    let total = h.state.entries.len();
    let verdicts: Vec<Verdict> = h.state.entries.iter().map(|e| e.verdict).collect();

    let commands = h.act(Action::Redispatch);
    assert!(
        matches!(
            commands.as_slice(),
            [Command::Redispatch { fresh: true, configurations, .. }] if !configurations.is_empty()
        ),
        "{commands:?}"
    );
    assert!(h.perform(commands).is_empty());
    let (reused, sent) = h.state.redispatch_calls;
    assert_eq!(reused, 0, "no reply reused");
    assert!(sent > 0);
    assert_eq!(h.state.entries.len(), total);
    // The demo's webhooks answer as before: nothing changed.
    let again: Vec<Verdict> = h.state.entries.iter().map(|e| e.verdict).collect();
    assert_eq!(again, verdicts);
    assert_eq!(h.state.whatif.requests.len(), 0);

    // The replies of that dispatch are kept: a second, plain re-dispatch (what an edit sends)
    // reuses every one of them.
    h.state.edit_generation += 1;
    let generation = h.state.edit_generation;
    let plain = vec![Command::Redispatch {
        generation,
        configurations: h.state.configurations_in_force(),
        policies: h.state.policies_in_force(),
        fresh: false,
    }];
    assert!(h.perform(plain).is_empty());
    assert_eq!(h.state.redispatch_calls, (sent, 0));
}

#[test]
fn redispatch_asked_during_the_first_dispatch_runs_after_it() {
    let mut h = Harness::spawn();
    h.pump_until(|m| matches!(m, SourceMsg::Event { .. }));
    assert!(!h.state.progress.done);

    let commands = h.act(Action::Redispatch);
    assert!(
        matches!(
            commands.as_slice(),
            [Command::Redispatch { fresh: true, .. }]
        ),
        "{commands:?}"
    );
    assert!(
        matches!(&h.state.message, Some((text, false)) if text.contains("once the first dispatch is done")),
        "{:?}",
        h.state.message
    );
    assert!(h.perform(commands).is_empty());
    assert!(h.state.progress.done);
    let total = h.state.progress.seen;
    assert_eq!(h.state.entries.len(), total);
    let (reused, sent) = h.state.redispatch_calls;
    assert_eq!(reused, 0);
    assert!(sent > 0);
    assert_eq!(
        h.state.baseline.as_ref().map(|b| b.entries.len()),
        Some(total),
        "the what-if compares with the whole first dispatch"
    );
}

#[test]
fn redispatch_is_refused_with_nothing_replayed() {
    let mut state = State::new("1.33".into(), AuditLevel::Request, Theme::default());
    update(
        &mut state,
        Msg::Source(SourceMsg::Finished { missing_replies: 0 }),
    );
    let commands = update(&mut state, Msg::Action(Action::Redispatch));
    assert!(commands.is_empty());
    assert!(
        matches!(&state.message, Some((text, true)) if text.contains("nothing to dispatch again")),
        "{:?}",
        state.message
    );
}

#[test]
fn an_invalid_edit_keeps_the_configuration_in_force() {
    let mut h = Harness::start();
    let in_force = h.state.configurations_in_force();
    h.act(Action::Edit(Some("30-slow-quota".into())));
    let start = h.state.buffers[h.state.buffer].line_of("30-slow-quota");
    h.goto("failurePolicy: Ignore", start - 1);
    let mut c = h.vim("A");
    for _ in 0.."Ignore".len() {
        c.extend(h.key(KeyCode::Backspace, KeyModifiers::NONE));
    }
    h.type_text("Sometimes");
    let line = h.state.buffers[h.state.buffer].area.cursor().0 + 1;
    assert!(
        !redispatches(&h.check_now()),
        "an invalid edit is not dispatched"
    );
    let b = &h.state.buffers[h.state.buffer];
    assert!(!b.valid());
    let e = b
        .check
        .errors
        .iter()
        .find(|e| e.field.ends_with("failurePolicy"))
        .expect("the failurePolicy error");
    assert!(e.message.contains("Sometimes"), "{e:?}");
    assert!(e.line <= line, "the error points into the document: {e:?}");
    assert_eq!(h.state.configurations_in_force(), in_force);
    let (msg, error) = h.state.message.clone().unwrap();
    assert!(error && msg.contains("stays in force"), "{msg}");
    assert!(h.state.baseline.is_none());
}

/// In normal mode `esc` first cancels a count (or a command) being typed, as vim's does; only
/// the next one leaves the Edit view.
#[test]
fn esc_cancels_a_count_before_it_leaves_the_editor() {
    let mut h = Harness::start();
    h.act(Action::Show(View::Webhooks));
    h.act(Action::Edit(Some("40-policy".into())));
    assert_eq!(h.state.view, View::Editor);
    h.vim("7");
    assert_eq!(h.state.editor.count, Some(7));
    h.vim("\x1b");
    assert_eq!(
        h.state.view,
        View::Editor,
        "the count cancelled, still editing"
    );
    assert_eq!(h.state.editor.count, None);
    h.vim("d");
    assert_eq!(h.state.editor.pending, Some('d'));
    h.vim("\x1b");
    assert_eq!(
        h.state.view,
        View::Editor,
        "the command cancelled, still editing"
    );
    assert_eq!(h.state.editor.pending, None);
    h.vim("\x1b");
    assert_eq!(h.state.view, View::Webhooks, "the next esc leaves");
}

#[test]
fn undo_brings_back_the_valid_text() {
    let mut h = Harness::start();
    h.act(Action::Edit(Some("40-policy".into())));
    let before = h.state.buffers[h.state.buffer].text();
    h.vim("i");
    h.type_text("x: [");
    assert_ne!(h.state.buffers[h.state.buffer].text(), before);
    for _ in 0..4 {
        h.key(KeyCode::Char('z'), KeyModifiers::CONTROL);
    }
    assert_eq!(h.state.buffers[h.state.buffer].text(), before);
    assert!(!h.state.buffers[h.state.buffer].modified());
    h.key(KeyCode::Char('y'), KeyModifiers::CONTROL);
    assert!(h.state.buffers[h.state.buffer].modified());
}

#[test]
fn saving_writes_the_file_and_quitting_with_unsaved_edits_asks() {
    let mut h = Harness::start();
    h.act(Action::Edit(Some("20-label-defaulter".into())));
    h.vim("O");
    h.type_text("# edited");
    h.vim("\x1b");
    // Quitting with an unsaved edit does not quit.
    assert!(h.act(Action::Quit).is_empty());
    assert!(!h.state.quit);
    // The built-in demo has no file: saving needs a path.
    assert!(h.act(Action::Save(None)).is_empty());
    assert!(h.state.message.as_ref().unwrap().1);
    let dir = Scratch::new(&format!("hookscope-edit-test-{}", std::process::id()));
    let path = dir.join("demo.yaml");
    let commands = h.act(Action::Save(Some(path.display().to_string())));
    let [
        Command::Save {
            buffer,
            path: p,
            text,
        },
    ] = &commands[..]
    else {
        panic!("{commands:?}")
    };
    assert_eq!(p, &path);
    assert!(text.contains("# edited\n"));
    // The event loop's IO: atomic write, then the answer.
    let backup = hookscope::edit::save_atomic(p, text).unwrap().backup;
    assert_eq!(backup, None);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), *text);
    let after = update(
        &mut h.state,
        Msg::Saved {
            buffer: *buffer,
            text: text.clone(),
            result: Ok((path.clone(), backup)),
        },
    );
    assert!(after.contains(&Command::Watch(vec![(path.clone(), text.clone())])));
    assert!(!h.state.buffers[*buffer].modified());
    // Saved again: the previous version is kept as a backup.
    h.vim("O");
    h.type_text("# twice");
    h.vim("\x1b");
    let commands = h.act(Action::Save(None));
    let [
        Command::Save {
            path: p2, text: t2, ..
        },
    ] = &commands[..]
    else {
        panic!("{commands:?}")
    };
    assert_eq!(p2, &path);
    let backup = hookscope::edit::save_atomic(p2, t2)
        .unwrap()
        .backup
        .unwrap();
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), *text);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), *t2);
}

#[test]
fn a_change_on_disk_reloads_a_clean_buffer_and_asks_for_an_edited_one() {
    let dir = Scratch::new(&format!("hookscope-watch-test-{}", std::process::id()));
    let path = dir.join("hooks.yaml");
    let text = hookscope::tui::demo::configuration_text("https://127.0.0.1:8443", "ca");
    std::fs::write(&path, &text).unwrap();
    let mut s = State::new("1.33".into(), AuditLevel::Request, Theme::default());
    let docs = vec![hookscope::tui::source::ConfigDocument {
        origin: hookscope::tui::source::DocumentOrigin::File(path.clone()),
        text: text.clone(),
        configurations: Vec::new(),
        policies: Vec::new(),
    }];
    let c = update(
        &mut s,
        Msg::Source(SourceMsg::Started {
            label: "t".into(),
            hooks: Vec::new(),
            total: Some(0),
            documents: docs,
        }),
    );
    assert_eq!(c, vec![Command::Watch(vec![(path.clone(), text.clone())])]);
    // Clean buffer: the new text is taken.
    let changed = text.replace("timeoutSeconds: 1\n", "timeoutSeconds: 2\n");
    update(
        &mut s,
        Msg::FileChanged {
            path: path.clone(),
            text: Ok(changed.clone()),
        },
    );
    assert_eq!(s.buffers[0].text(), changed);
    assert!(!s.buffers[0].modified());
    // Edited buffer: the user chooses.
    update(&mut s, Msg::Action(Action::Edit(None)));
    for c in ['i', '#'] {
        update(
            &mut s,
            Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
        );
    }
    let mine = s.buffers[0].text();
    update(
        &mut s,
        Msg::FileChanged {
            path: path.clone(),
            text: Ok(text.clone()),
        },
    );
    assert_eq!(s.buffers[0].text(), mine, "edits are never overwritten");
    assert!(s.buffers[0].disk_changed.is_some());
    update(&mut s, Msg::Action(Action::Reload));
    assert_eq!(s.buffers[0].text(), text);
}

#[test]
fn recovered_text_is_offered_and_restored() {
    let mut h = Harness::start();
    let key = h.state.buffers[0].origin.recovery_key();
    let text = format!("{}# recovered\n", h.state.buffers[0].text());
    update(
        &mut h.state,
        Msg::RecoveryFound(vec![RecoveredText {
            key: key.clone(),
            text: text.clone(),
            base_hash: None,
        }]),
    );
    assert!(h.state.message.as_ref().unwrap().0.contains(":recover"));
    let c = h.act(Action::Recover);
    assert!(matches!(c[..], [Command::CheckLater { .. }]));
    assert_eq!(h.state.buffers[0].text(), text);
    assert!(h.state.buffers[0].modified());
    assert_eq!(h.state.view, View::Editor);
}

#[test]
fn a_new_configuration_from_a_template_takes_effect_once_valid() {
    let mut h = Harness::start();
    let n = h.state.hooks.len();
    let c = h.act(Action::New(false, Some("60-extra".into())));
    assert!(matches!(c[..], [Command::CheckLater { .. }]));
    assert_eq!(h.state.view, View::Editor);
    let commands = h.check_now();
    let b = &h.state.buffers[h.state.buffer];
    assert!(b.valid(), "{:?}", b.check.errors);
    h.perform(commands);
    assert_eq!(h.state.hooks.len(), n + 1);
    // The new webhook's calls are new content: they are sent; the rest are reused.
    let (reused, sent) = h.state.redispatch_calls;
    assert!(reused > 0 && sent > 0, "{reused} {sent}");
    assert!(h.state.hooks.iter().any(|x| x.configuration == "60-extra"));
}

fn screen(s: &State) -> String {
    hookscope::tui::view::render_text(s, 120, 40)
}

#[test]
fn snapshots_of_an_invalid_edit_and_the_what_if_view() {
    let mut h = Harness::start();
    update(&mut h.state, Msg::Resize(120, 40));
    h.act(Action::Edit(Some("30-slow-quota".into())));
    let start = h.state.buffers[h.state.buffer].line_of("30-slow-quota");
    h.goto("timeoutSeconds: 1", start - 1);
    h.vim("A");
    h.type_text("00");
    h.vim("\x1b");
    h.check_now();
    insta::assert_snapshot!("editor_invalid", screen(&h.state));
    // Back to a valid text by undo, then the failurePolicy edit.
    h.key(KeyCode::Char('z'), KeyModifiers::CONTROL);
    h.key(KeyCode::Char('z'), KeyModifiers::CONTROL);
    h.goto("failurePolicy: Ignore", start - 1);
    ignore_to_fail(&mut h);
    let commands = h.check_now();
    h.perform(commands);
    h.act(Action::Show(View::WhatIf));
    insta::assert_snapshot!("whatif", screen(&h.state));
    for (w, hh) in [(80, 24), (250, 60)] {
        let mut s = h.state.clone();
        update(&mut s, Msg::Resize(w, hh));
        let text = hookscope::tui::view::render_text(&s, w, hh);
        insta::assert_snapshot!(format!("sized__whatif_{w}x{hh}"), text);
    }
    h.act(Action::Open);
    insta::assert_snapshot!("whatif_compare", screen(&h.state));
}

#[test]
fn a_failed_save_keeps_the_edit_and_says_why() {
    let mut h = Harness::start();
    h.act(Action::Edit(Some("40-policy".into())));
    h.vim("O");
    h.type_text("# kept");
    // A folder that does not exist: the library's error names the path.
    let path = std::env::temp_dir()
        .join(format!("hookscope-missing-{}", std::process::id()))
        .join("hooks.yaml");
    let commands = h.act(Action::Save(Some(path.display().to_string())));
    let [Command::Save { buffer, text, .. }] = &commands[..] else {
        panic!("{commands:?}")
    };
    let err = hookscope::edit::save_atomic(&path, text)
        .unwrap_err()
        .to_string();
    assert!(err.contains("hooks.yaml"), "{err}");
    update(
        &mut h.state,
        Msg::Saved {
            buffer: *buffer,
            text: text.clone(),
            result: Err(err.clone()),
        },
    );
    let (msg, error) = h.state.message.clone().unwrap();
    assert!(
        error && msg.contains(&err) && msg.contains("the edit is kept"),
        "{msg}"
    );
    assert!(h.state.buffers[*buffer].modified());
    assert!(h.state.buffers[*buffer].text().contains("# kept"));
}

/// An emptied buffer is a deletion: shown as such and kept out of force until `:delete`
/// confirms it; undo brings the text back.
#[test]
fn an_empty_buffer_is_a_deletion_confirmed_not_a_valid_configuration() {
    let mut h = Harness::start();
    h.act(Action::Edit(Some("40-policy".into())));
    let before = denied(&h.state);
    assert!(before > 0);
    h.state.buffers[h.state.buffer].replace_text("  \n");
    assert!(
        !redispatches(&h.check_now()),
        "an empty text is not dispatched"
    );
    let b = &h.state.buffers[h.state.buffer];
    assert!(!b.in_force.is_empty(), "the configurations stay in force");
    assert!(
        b.check.errors[0].message.contains("would delete")
            && b.check.errors[0].message.contains("40-policy"),
        "{:?}",
        b.check.errors
    );
    let text = screen(&h.state);
    assert!(!text.contains("valid, in force"), "{text}");
    // :delete confirms: nothing is in force from the buffer, every request is dispatched again.
    let commands = h.act(Action::ConfirmDelete);
    assert!(
        matches!(commands.as_slice(), [Command::Redispatch { configurations, .. }] if configurations.is_empty()),
        "{commands:?}"
    );
    h.perform(commands);
    // What is still denied, the demo's ValidatingAdmissionPolicy denies.
    let by_webhooks = (h.state.entries.iter())
        .filter(|e| matches!(e.verdict, Verdict::Denied(_)))
        .filter(|e| {
            let message = e
                .replayed
                .outcome
                .status
                .as_ref()
                .map(|s| s.message.as_str());
            !message.is_some_and(|m| m.contains("ValidatingAdmissionPolicy"))
        })
        .count();
    assert_eq!(by_webhooks, 0, "no webhook left to deny");
}

/// After `:edit!` the user is back where they were, and one undo brings back the whole text
/// from before the external edit (not an empty buffer); typed words are undone a word at a time.
#[test]
fn an_external_edit_returns_where_the_user_was_and_undoes_in_one_step() {
    let mut h = Harness::start();
    // In the Edit view, typing: ctrl-e opens the user's editor.
    h.act(Action::Edit(Some("40-policy".into())));
    h.vim("i");
    assert_eq!(h.state.editor.mode, EditMode::Insert);
    let at = h.state.buffers[h.state.buffer].area.cursor().0;
    assert!(at > 0, "the editor opened at the configuration's name");
    let commands = h.key(KeyCode::Char('e'), KeyModifiers::CONTROL);
    let Some(Command::ExternalEdit { buffer, text }) = commands.first().cloned() else {
        panic!("{commands:?}");
    };
    let edited = text.replace("timeoutSeconds: 5", "timeoutSeconds: 7");
    assert_ne!(edited, text);
    update(
        &mut h.state,
        Msg::ExternalEdited {
            buffer,
            result: Ok(edited.clone()),
        },
    );
    assert_eq!(h.state.view, View::Editor, "back where the user was");
    assert_eq!(
        h.state.editor.mode,
        EditMode::Normal,
        "back in normal mode, not typing"
    );
    assert_eq!(h.state.buffers[buffer].text(), edited);
    // `:w` is a command, not text.
    h.vim(":w");
    assert!(
        matches!(&h.state.mode, Mode::Command { input, .. } if input == "w"),
        "{:?}",
        h.state.mode
    );
    h.key(KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(h.state.buffers[buffer].text(), edited);
    // Esc and `:` typed at once reach the console as alt-`:`: still esc, then a command.
    h.vim("i");
    h.key(KeyCode::Char(':'), KeyModifiers::ALT);
    assert_eq!(h.state.editor.mode, EditMode::Normal);
    h.vim("w");
    assert!(
        matches!(&h.state.mode, Mode::Command { input, .. } if input == "w"),
        "{:?}",
        h.state.mode
    );
    h.key(KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(h.state.buffers[buffer].text(), edited);
    // The same from normal mode: esc leaves the editor, and `2` is the Chain view.
    h.key(KeyCode::Char('2'), KeyModifiers::ALT);
    assert_eq!(h.state.view, View::Chain);
    h.act(Action::Show(View::Editor));
    h.vim("u");
    assert_eq!(
        h.state.buffers[buffer].text(),
        text,
        "one undo, the text before"
    );
    assert_eq!(
        h.state.buffers[buffer].area.cursor().0,
        at,
        "and the cursor where it was"
    );
    h.key(KeyCode::Char('y'), KeyModifiers::CONTROL);
    assert_eq!(
        h.state.buffers[buffer].text(),
        edited,
        "one redo, the editor's text"
    );

    // Words typed are undone one word at a time.
    h.goto("timeoutSeconds: 7", 0);
    h.vim("A");
    h.type_text(" # one two");
    let typed = h.state.buffers[buffer].text();
    assert!(typed.contains("timeoutSeconds: 7 # one two"), "{typed}");
    h.key(KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert!(
        h.state.buffers[buffer]
            .text()
            .contains("timeoutSeconds: 7 # one \n")
    );
    h.key(KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert!(
        h.state.buffers[buffer]
            .text()
            .contains("timeoutSeconds: 7 # \n")
    );
}

/// Recovery belongs to this run's files: a copy of a file this run did not open is not offered
/// (nor turned into a buffer), a copy of a file that no longer exists is pruned, and a copy of a
/// buffer this run opened is offered and restored.
#[test]
fn recovery_is_offered_only_for_this_runs_files_and_stale_copies_are_pruned() {
    let mut h = Harness::start();
    let dir = Scratch::new(&format!("hookscope-recovery-scope-{}", std::process::id()));
    let elsewhere = dir.join("validating.yaml");
    std::fs::write(&elsewhere, "kind: ValidatingWebhookConfiguration\n").unwrap();
    let gone = dir.join("gone").join("validating.yaml");
    let ours = h.state.buffers[0].origin.recovery_key();
    let text = format!("{}# recovered\n", h.state.buffers[0].text());
    let found = vec![
        RecoveredText {
            key: ours.clone(),
            text: text.clone(),
            base_hash: Some(content_hash(&h.state.buffers[0].saved)),
        },
        RecoveredText {
            key: BufferKey::File(elsewhere.clone()),
            text: "kind: ValidatingWebhookConfiguration\n# an earlier run's edit\n".into(),
            base_hash: None,
        },
        RecoveredText {
            key: BufferKey::File(gone.clone()),
            text: "# of a deleted folder\n".into(),
            base_hash: None,
        },
    ];
    let commands = update(&mut h.state, Msg::RecoveryFound(found));
    assert_eq!(
        commands,
        vec![Command::DiscardRecovery(BufferKey::File(gone))],
        "the copy of a file that no longer exists is pruned"
    );
    let notice = h.state.message.clone().unwrap().0;
    assert!(notice.contains(":recover"), "{notice}");
    assert!(!notice.contains("validating.yaml"), "{notice}");
    let buffers = h.state.buffers.len();
    h.act(Action::Recover);
    assert_eq!(
        h.state.buffers.len(),
        buffers,
        "no buffer for a file this run did not open"
    );
    assert_eq!(h.state.buffers[0].text(), text);
}

/// The requests the demo's ValidatingAdmissionPolicy denies (their indices).
fn denied_by_replica_limit(s: &State) -> Vec<usize> {
    (s.entries.iter().enumerate())
        .filter(|(_, e)| {
            e.replayed.outcome.status.as_ref().is_some_and(|st| {
                st.message
                    .contains("ValidatingAdmissionPolicy 'demo-replica-limit'")
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The 1-based line of the buffer's cursor.
fn cursor_line(s: &State) -> usize {
    s.buffers[s.buffer].area.cursor().0 + 1
}

#[test]
fn editing_a_policy_re_evaluates_every_request_and_what_if_reports_the_flips() {
    let mut h = Harness::start();
    let denied_before = denied_by_replica_limit(&h.state);
    assert!(
        !denied_before.is_empty(),
        "the demo's replica limit denies a shop Deployment"
    );

    // From the Webhooks view, `e` on the policy's row opens the demo's policy text at the
    // ValidatingAdmissionPolicy (not its binding of the same name, nor the mutating policy).
    h.act(Action::Show(View::Webhooks));
    let row = (h.state.hooks.iter())
        .position(|x| x.configuration == "demo-replica-limit")
        .expect("the policy is listed among the webhooks");
    h.state.hook_cursor.selected = row;
    assert!(h.key(KeyCode::Char('e'), KeyModifiers::NONE).is_empty());
    assert_eq!(h.state.view, View::Editor);
    let b = &h.state.buffers[h.state.buffer];
    assert_eq!(b.origin.label(), "demo-policies.yaml (built in)");
    let lines = b.area.lines().to_vec();
    let policy_at = cursor_line(&h.state);
    assert_eq!(lines[policy_at - 1].trim(), "name: demo-replica-limit");
    assert_eq!(
        lines[policy_at - 3].trim(),
        "kind: ValidatingAdmissionPolicy"
    );

    // The shop's limit goes from 2 to 3 replicas, typed as a vim user would.
    h.goto("'shop' ? 2 : 5", policy_at);
    let mut typed = h.vim("C");
    typed.extend(h.type_text("    expression: \"object.metadata.namespace == 'shop' ? 3 : 5\""));
    typed.extend(h.vim("\x1b"));
    assert!(
        typed
            .iter()
            .all(|c| matches!(c, Command::CheckLater { .. }))
    );
    let commands = h.check_now();
    let policies = commands
        .iter()
        .find_map(|c| match c {
            Command::Redispatch { policies, .. } => Some(policies.clone()),
            _ => None,
        })
        .unwrap_or_else(|| {
            panic!(
                "a valid edit of a policy re-dispatches: {:?}",
                h.state.buffers[h.state.buffer].check.errors
            )
        });
    assert_eq!(policies.validating.len(), 1);
    assert_eq!(policies.mutating.len(), 1, "the file's other policy stays");
    let rest = h.perform(commands);
    assert!(
        rest.iter()
            .all(|c| !matches!(c, Command::Redispatch { .. }))
    );

    // Every request ran again; the shop's 3-replica Deployment is admitted now.
    let s = &h.state;
    assert_eq!(s.entries.len(), s.baseline.as_ref().unwrap().entries.len());
    let denied_after = denied_by_replica_limit(s);
    assert!(denied_after.len() < denied_before.len());
    let flipped: Vec<usize> = s.whatif.flipped().map(|r| r.index).collect();
    assert!(!flipped.is_empty());
    for i in &flipped {
        assert!(
            denied_before.contains(i),
            "request {i} was denied by the policy"
        );
        assert!(s.entries[*i].replayed.outcome.allowed);
        let attrs = &s.entries[*i].replayed.request.attrs;
        assert_eq!(attrs.namespace, "shop");
    }
    // The policy's binding is counted as a webhook is: fewer denials, as many matches.
    let d = (s.whatif.hooks.iter())
        .find(|d| d.hook.configuration == "demo-replica-limit")
        .expect("the policy's binding in the what-if counts");
    assert_eq!(d.hook.webhook, "demo-replica-limit");
    let (b, a) = (d.before.unwrap(), d.after.unwrap());
    assert_eq!(b.matched, a.matched);
    assert_eq!(b.denied - a.denied, flipped.len());
    // The flip is the user's edit of the policy.
    for i in &flipped {
        assert_eq!(
            s.whatif_causes(*i),
            vec![hookscope::tui::editing::ChangeCause::Edit(
                "demo-replica-limit".into()
            )]
        );
    }
    // The What-if view lists it.
    h.act(Action::Show(View::WhatIf));
    h.act(Action::Open);
    assert_eq!(h.state.view, View::Chain);
    assert_eq!(h.state.requests.selected, Some(flipped[0]));

    // From the Chain, `e` on the mutating policy's step opens its document.
    let calls = &h.state.entries[flipped[0]].replayed.outcome.calls;
    let step = (calls.iter())
        .position(|c| &*c.configuration == "demo-owner-label")
        .expect("the mutating policy ran on the Deployment");
    h.state.chain.select(step);
    assert!(h.key(KeyCode::Char('e'), KeyModifiers::NONE).is_empty());
    assert_eq!(h.state.view, View::Editor);
    let at = cursor_line(&h.state);
    let lines = h.state.buffers[h.state.buffer].area.lines().to_vec();
    assert_eq!(lines[at - 1].trim(), "name: demo-owner-label");
    assert_eq!(lines[at - 3].trim(), "kind: MutatingAdmissionPolicy");

    // `:edit KIND/NAME` tells a binding from its policy of the same name.
    h.act(Action::Edit(Some(
        "ValidatingAdmissionPolicyBinding/demo-replica-limit".into(),
    )));
    let at = cursor_line(&h.state);
    assert_eq!(lines[at - 1].trim(), "name: demo-replica-limit");
    assert_eq!(
        lines[at - 3].trim(),
        "kind: ValidatingAdmissionPolicyBinding"
    );
}

/// Two files may not both define a policy of one kind and name (the cluster keeps one object):
/// an edit that would is refused, naming the other file; emptying a file of policies is a
/// deletion, confirmed by `:delete`, which takes them out of those in force.
#[test]
fn policies_across_buffers_are_one_object_per_kind_and_name() {
    let policy = |name: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {name}\nspec:\n  matchConstraints:\n    resourceRules:\n    - {{operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [pods]}}\n  validations:\n  - expression: \"true\"\n"
        )
    };
    let checked = |text: &str| {
        let c = hookscope::tui::editing::check(text, "x.yaml", &[]);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        c.policies
    };
    let doc = |file: &str, text: String| hookscope::tui::source::ConfigDocument {
        origin: hookscope::tui::source::DocumentOrigin::File(file.into()),
        policies: checked(&text),
        text,
        configurations: Vec::new(),
    };
    let mut s = State::new(
        hookscope::KubeVersion::default().to_string(),
        AuditLevel::Request,
        Theme::default(),
    );
    update(
        &mut s,
        Msg::Source(SourceMsg::Started {
            label: "t".into(),
            hooks: Vec::new(),
            total: Some(0),
            documents: vec![doc("a.yaml", policy("one")), doc("b.yaml", policy("two"))],
        }),
    );
    assert_eq!(s.policies_in_force().validating.len(), 2);
    // b.yaml renamed to a.yaml's policy: refused, both stay in force as they were.
    s.buffers[1].replace_text(&policy("one"));
    let generation = s.buffers[1].generation;
    let c = update(
        &mut s,
        Msg::CheckDue {
            buffer: 1,
            generation,
        },
    );
    assert!(c.iter().all(|c| !matches!(c, Command::Redispatch { .. })));
    let errors = &s.buffers[1].check.errors;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "metadata.name");
    assert_eq!(errors[0].line, 4);
    assert_eq!(
        errors[0].message,
        "ValidatingAdmissionPolicy \"one\" is also defined in a.yaml"
    );
    let names: Vec<String> = (s.policies_in_force().validating.iter())
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names, ["one", "two"]);
    // Emptied: a deletion, taken only once confirmed.
    s.buffers[1].replace_text("");
    let generation = s.buffers[1].generation;
    update(
        &mut s,
        Msg::CheckDue {
            buffer: 1,
            generation,
        },
    );
    assert!(
        s.buffers[1].check.errors[0]
            .message
            .contains("it would delete ValidatingAdmissionPolicy/two"),
        "{:?}",
        s.buffers[1].check.errors
    );
    s.buffer = 1;
    let c = update(&mut s, Msg::Action(Action::ConfirmDelete));
    let [Command::Redispatch { policies, .. }] = c.as_slice() else {
        panic!("a deletion re-dispatches: {c:?}");
    };
    let names: Vec<&str> = policies
        .validating
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["one"]);
}

/// `:new mutating-policy NAME` starts a policy and its binding from a template, valid for the
/// release modelled: it takes effect at once, and What-if shows what it changed.
#[test]
fn a_new_policy_from_its_template_takes_effect() {
    let mut h = Harness::start();
    let c = h.act(Action::NewPolicy(true, Some("checked".into())));
    assert_eq!(h.state.view, View::Editor);
    assert!(
        matches!(c.as_slice(), [Command::CheckLater { .. }]),
        "{c:?}"
    );
    let commands = h.check_now();
    let b = &h.state.buffers[h.state.buffer];
    assert!(b.check.errors.is_empty(), "{:?}", b.check.errors);
    assert!(
        b.text().starts_with(&format!(
            "apiVersion: {}\nkind: MutatingAdmissionPolicy\n",
            hookscope::config::policy::served_api_version(
                "MutatingAdmissionPolicy",
                hookscope::KubeVersion::default()
            )
            .unwrap()
        )),
        "{}",
        b.text()
    );
    h.perform(commands);
    let s = &h.state;
    assert!(
        s.hooks
            .iter()
            .any(|x| x.configuration == "checked" && x.webhook == "checked")
    );
    // Every ConfigMap created or updated now carries the label; nothing else changed.
    let changed: Vec<usize> = s.whatif.requests.iter().map(|r| r.index).collect();
    assert!(!changed.is_empty());
    for r in &s.whatif.requests {
        let attrs = &s.entries[r.index].replayed.request.attrs;
        assert_eq!(attrs.resource.resource, "configmaps", "request {}", r.index);
        assert!(
            r.object
                .iter()
                .any(|c| c.pointer() == "/metadata/labels/checked"),
            "{:?}",
            r.object
        );
    }
    let d = (s.whatif.hooks.iter())
        .find(|d| d.hook.configuration == "checked")
        .unwrap();
    assert!(d.before.is_none(), "the policy is new");
    assert_eq!(d.after.unwrap().mutated, changed.len());
}

/// Edits are checked for the release the status bar names, also when a live source adds a note
/// about the server's.
#[test]
fn edits_are_checked_for_the_release_modelled() {
    let mut s = State::new("1.33".into(), AuditLevel::Request, Theme::default());
    assert_eq!(s.modelled_version(), "1.33".parse().unwrap());
    s.kube_version = "1.37 (server v1.40.0 is newer than hookscope models)".into();
    assert_eq!(s.modelled_version(), "1.37".parse().unwrap());
    // A MutatingAdmissionPolicy v1 is refused in 1.33, with the version to write.
    s.kube_version = "1.33".into();
    update(
        &mut s,
        Msg::Action(Action::NewPolicy(true, Some("x".into()))),
    );
    let b = &mut s.buffers[0];
    assert!(
        b.text()
            .starts_with("apiVersion: admissionregistration.k8s.io/v1alpha1\n")
    );
    let text = b.text().replace("/v1alpha1\n", "/v1\n");
    b.replace_text(&text);
    let generation = b.generation;
    update(
        &mut s,
        Msg::CheckDue {
            buffer: 0,
            generation,
        },
    );
    let errors = &s.buffers[0].check.errors;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().all(|e| {
        e.field == "apiVersion"
            && e.message
                .ends_with("write it as admissionregistration.k8s.io/v1alpha1")
    }));
    let binding = text.lines().position(|l| l == "---").unwrap() + 2;
    assert_eq!((errors[0].line, errors[1].line), (1, binding));
}

#[test]
fn slash_in_the_edit_view_searches_its_text_and_the_status_line_shows_it() {
    let mut h = Harness::start();
    update(&mut h.state, Msg::Resize(80, 24));
    h.act(Action::Edit(Some("30-slow-quota".into())));
    let text = h.state.buffers[h.state.buffer].text();
    let line = text
        .lines()
        .position(|l| l.contains("timeoutSeconds"))
        .expect("a timeout in the configuration");
    h.vim("gg/timeoutse");
    // The view stays the editor (elsewhere `/` filters requests) and the prompt is the search's.
    assert_eq!(h.state.view, View::Editor);
    let bottom = hookscope::tui::view::render_text(&h.state, 80, 24)
        .lines()
        .last()
        .unwrap()
        .to_string();
    assert!(bottom.starts_with("/timeoutse"), "{bottom:?}");
    // esc ends the search, not the editor; enter keeps the match.
    h.key(KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(h.state.view, View::Editor);
    h.vim("/timeoutSeconds");
    h.key(KeyCode::Enter, KeyModifiers::NONE);
    let b = &h.state.buffers[h.state.buffer];
    assert_eq!(b.area.cursor().0, line, "the first timeoutSeconds");
    assert_eq!(b.text(), text, "nothing typed into the configuration");
    h.vim("/no-such-text");
    h.key(KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        h.state.message,
        Some(("pattern not found: no-such-text".to_string(), true))
    );
}

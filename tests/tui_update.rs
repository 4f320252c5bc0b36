//! Message sequences through the console's one update path.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hookscope::engine::AuditLevel;
use hookscope::tui::app::{ChainPane, Command, Mode, Msg, SortKey, State, View, update};
use hookscope::tui::keymap::Action;
use hookscope::tui::model::{Block, CellState, Verdict, cell_state};
use hookscope::tui::source::{SourceMsg, collect};
use hookscope::tui::theme::Theme;

fn demo_messages() -> Vec<SourceMsg> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let source = hookscope::tui::demo::offline(hookscope::KubeVersion::default());
    rt.block_on(collect(Box::new(source)))
}

fn loaded() -> State {
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    for m in demo_messages() {
        assert!(update(&mut s, Msg::Source(m)).is_empty());
    }
    s
}

fn key(s: &mut State, c: char) -> Vec<Command> {
    update(
        s,
        Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)),
    )
}

fn code(s: &mut State, c: KeyCode) -> Vec<Command> {
    update(s, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
}

#[test]
fn the_demo_streams_into_the_state() {
    let s = loaded();
    assert!(s.progress.done);
    assert_eq!(s.progress.total, Some(s.entries.len()));
    assert_eq!(s.visible.len(), s.entries.len());
    assert_eq!(s.selected, Some(0));
    assert_eq!(s.hooks.len(), 5);
    let (_, allowed, denied, open) = s.counts();
    assert!(allowed > 0 && denied > 0 && open > 0);
    // The Webhooks view's counts agree with the requests.
    let denials: usize = s.hook_counts.iter().map(|c| c.denied).sum();
    assert_eq!(denials, denied);
    assert!(
        s.annotations
            .iter()
            .any(|a| a.key == "mutation.webhook.admission.k8s.io/round_1_index_0")
    );
}

#[test]
fn metrics_are_the_merge_of_every_request() {
    let s = loaded();
    let rejections = hookscope::tui::app::rejections(&s.metrics);
    let denied = s.counts().2 as f64;
    let total: f64 = rejections.iter().map(|(_, v)| v).sum();
    assert_eq!(total, denied);
    assert!(s.metrics.encode_text().contains(
        "apiserver_admission_webhook_fail_open_count{name=\"quota.slow.demo\",type=\"validating\"}"
    ));
}

#[test]
fn stepping_through_the_chain_to_round_1() {
    let mut s = loaded();
    key(&mut s, 'l');
    assert_eq!(s.view, View::Chain);
    assert_eq!(s.step, 0);
    key(&mut s, ']');
    let calls = s.selected_entry().unwrap().replayed.outcome.calls.clone();
    assert_eq!(Block::of(&calls[s.step]), Block::Round1);
    assert_eq!(&*calls[s.step].webhook, "inject.sidecar.demo");
    key(&mut s, ']');
    assert_eq!(Block::of(&calls[s.step]), Block::Validating);
    key(&mut s, '[');
    key(&mut s, '[');
    assert_eq!(s.step, 0);
    key(&mut s, 'j');
    assert_eq!(s.step, 1);
    key(&mut s, 'k');
    key(&mut s, 'k');
    assert_eq!(s.step, 0, "stepping stops at the first step");
    // Tab moves the keys to the detail pane; j then scrolls it.
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.chain_pane, ChainPane::Detail);
    key(&mut s, 'j');
    assert_eq!((s.step, s.detail_scroll), (0, 1));
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.chain_pane, ChainPane::Grid);
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.view, View::Requests);
}

#[test]
fn deciding_step_of_a_denied_request() {
    let mut s = loaded();
    let denied = s
        .entries
        .iter()
        .position(|e| matches!(e.row.verdict, Verdict::Denied(403)))
        .unwrap();
    for _ in 0..denied {
        key(&mut s, 'j');
    }
    assert_eq!(s.selected, Some(denied));
    code(&mut s, KeyCode::Enter);
    key(&mut s, 'd');
    let e = s.selected_entry().unwrap();
    assert_eq!(
        cell_state(&e.replayed.outcome.calls[s.step]),
        CellState::Denied
    );
    // n / p move between requests and start the chain over.
    key(&mut s, 'n');
    assert_eq!((s.selected, s.step), (Some(denied + 1), 0));
    key(&mut s, 'p');
    assert_eq!(s.selected, Some(denied));
}

#[test]
fn filter_and_sort() {
    let mut s = loaded();
    key(&mut s, '/');
    assert!(matches!(s.mode, Mode::Filter(_)));
    for c in "denied".chars() {
        key(&mut s, c);
    }
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.mode, Mode::Normal);
    assert_eq!(s.filter, "denied");
    assert_eq!(s.visible.len(), s.counts().2);
    assert!(
        s.visible
            .iter()
            .all(|&i| matches!(s.entries[i].row.verdict, Verdict::Denied(_)))
    );
    assert!(s.visible.contains(&s.selected.unwrap()));
    code(&mut s, KeyCode::Esc);
    assert!(s.filter.is_empty());
    assert_eq!(s.visible.len(), s.entries.len());

    update(&mut s, Msg::Action(Action::Sort("duration".into())));
    assert_eq!(s.sort, (SortKey::Duration, false));
    key(&mut s, 'r');
    let first = &s.entries[s.visible[0]].row;
    assert!(s.entries.iter().all(|e| e.row.duration <= first.duration));
}

#[test]
fn command_mode_completes_and_runs() {
    let mut s = loaded();
    key(&mut s, ':');
    for c in "me".chars() {
        key(&mut s, c);
    }
    code(&mut s, KeyCode::Tab);
    assert_eq!(
        s.mode,
        Mode::Command {
            input: "metrics".into(),
            completions: vec![]
        }
    );
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.view, View::Metrics);

    key(&mut s, ':');
    for c in "theme l".chars() {
        key(&mut s, c);
    }
    code(&mut s, KeyCode::Tab);
    let cmds = code(&mut s, KeyCode::Enter);
    assert_eq!(cmds, vec![Command::LoadTheme("light".into())]);
    update(
        &mut s,
        Msg::ThemeLoaded(Theme::load("light").map_err(|e| e.to_string())),
    );
    assert_eq!(s.theme.name, "light");

    key(&mut s, ':');
    for c in "bogus".chars() {
        key(&mut s, c);
    }
    code(&mut s, KeyCode::Enter);
    assert!(
        s.message
            .as_ref()
            .is_some_and(|(m, err)| *err && m.contains("bogus"))
    );
}

#[test]
fn help_secrets_and_quit() {
    let mut s = loaded();
    key(&mut s, '?');
    assert!(s.help);
    code(&mut s, KeyCode::Esc);
    assert!(!s.help);
    key(&mut s, 'x');
    assert!(s.reveal_secrets);
    key(&mut s, 'x');
    assert!(!s.reveal_secrets);
    assert_eq!(key(&mut s, 'q'), vec![Command::Quit]);
    assert!(s.quit);
    let mut s = loaded();
    let cmds = update(
        &mut s,
        Msg::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
    );
    assert_eq!(cmds, vec![Command::Quit]);
}

#[test]
fn annotations_follow_the_tail_until_scrolled() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(120, 40));
    key(&mut s, '3');
    assert_eq!(s.annotation_top, None);
    key(&mut s, 'k');
    assert!(s.annotation_top.is_some());
    key(&mut s, 'G');
    assert_eq!(s.annotation_top, None);
}

#[test]
fn results_arriving_keep_the_selection() {
    let msgs = demo_messages();
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    let mut it = msgs.into_iter();
    for m in it.by_ref().take(6) {
        update(&mut s, Msg::Source(m));
    }
    key(&mut s, 'j');
    key(&mut s, 'j');
    let chosen = s.selected;
    for m in it {
        update(&mut s, Msg::Source(m));
    }
    assert_eq!(s.selected, chosen);
    assert!(s.progress.done);
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn select(s: &mut State, index: usize) {
    key(s, 'g');
    for _ in 0..index {
        key(s, 'j');
    }
    assert_eq!(s.selected, Some(index));
}

#[test]
fn y_copies_the_object_after_the_patch_and_the_final_object() {
    let mut s = loaded();
    // Requests: the selected request's final object.
    let o = s.selected_entry().unwrap().replayed.outcome.clone();
    let final_text = serde_json::to_string_pretty(o.object.as_deref().unwrap()).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&final_text))]);
    assert!(
        s.message
            .as_ref()
            .is_some_and(|(m, err)| !err && m.contains("final object"))
    );
    // Chain, grid pane: the selected step's object after; detail pane: its patch.
    key(&mut s, 'l');
    let step = (0..o.calls.len())
        .find(|&i| hookscope::tui::model::applied_patch(&o, &o.calls[i]).is_some())
        .expect("a step that patched");
    for _ in 0..step {
        key(&mut s, 'j');
    }
    let (patch, after) = hookscope::tui::model::applied_patch(&o, &o.calls[step]).unwrap();
    let after_text = serde_json::to_string_pretty(after).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&after_text))]);
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.chain_pane, ChainPane::Detail);
    let patch_text = serde_json::to_string_pretty(patch).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&patch_text))]);
    // The terminal layer writes the OSC 52 sequence.
    assert_eq!(hookscope::tui::app::osc52("aGk="), "\u{1b}]52;c;aGk=\u{7}");
}

#[test]
fn y_masks_secret_data_unless_revealed() {
    let mut s = loaded();
    let at = s
        .entries
        .iter()
        .position(|e| e.row.secret)
        .expect("a Secret");
    select(&mut s, at);
    let obj = s
        .selected_entry()
        .unwrap()
        .replayed
        .outcome
        .object
        .clone()
        .unwrap();
    let Command::Clipboard(masked) = key(&mut s, 'y').remove(0) else {
        panic!("no clipboard command")
    };
    let masked = String::from_utf8(
        base64::Engine::decode(&base64::engine::general_purpose::STANDARD, masked).unwrap(),
    )
    .unwrap();
    let secret_value = obj["data"].as_object().unwrap().values().next().unwrap();
    assert!(masked.contains("<redacted>"));
    assert!(!masked.contains(secret_value.as_str().unwrap()));
    key(&mut s, 'x');
    let revealed = serde_json::to_string_pretty(&*obj).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&revealed))]);
    assert_ne!(b64(&masked), b64(&revealed));
}

fn click(s: &mut State, column: u16, row: u16) -> Vec<Command> {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    update(
        s,
        Msg::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column,
            row,
            modifiers: KeyModifiers::NONE,
        }),
    )
}

#[test]
fn clicks_select_rows_open_chains_and_switch_tabs() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    // Rows start at terminal row 3 (header line, pane border, column titles).
    click(&mut s, 20, 3 + 4);
    assert_eq!((s.selected, s.view), (Some(4), View::Requests));
    // A click on the selected row (the second click of a double click) opens its chain.
    click(&mut s, 20, 3 + 4);
    assert_eq!((s.selected, s.view), (Some(4), View::Chain));
    // Tabs: " hookscope " then " 1 Requests ", " 2 Chain ", ... each after a space.
    let screen = " hookscope   1 Requests   2 Chain   3 Annotations   4 Metrics   5 Webhooks";
    for (label, view) in [
        ("Metrics", View::Metrics),
        ("Annotations", View::Annotations),
        ("Webhooks", View::Webhooks),
        ("Requests", View::Requests),
    ] {
        let x = screen.find(label).unwrap() as u16;
        click(&mut s, x, 0);
        assert_eq!(s.view, view, "{label}");
    }
    assert_eq!(hookscope::tui::view::tab_at(0), None);
    // Below the last row or on the borders nothing changes.
    click(&mut s, 20, 2);
    click(&mut s, 20, 49);
    assert_eq!((s.selected, s.view), (Some(4), View::Requests));
    // With the selection scrolled down, the rows shown move with it.
    key(&mut s, 'G');
    let last = s.visible.len() - 1;
    let rows = hookscope::tui::view::requests_rows(50);
    if last >= rows {
        click(&mut s, 20, 3);
        assert_eq!(s.selected_position(), Some(last + 1 - rows));
    }
}

//! Every view rendered at 120x40 from the offline demo (fixed uids and durations), in the default
//! theme and in high-contrast (whose symbols differ), compared with the committed snapshots.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hookscope::engine::AuditLevel;
use hookscope::tui::app::{Msg, State, update};
use hookscope::tui::source::collect;
use hookscope::tui::theme::Theme;

fn loaded(theme: &str) -> State {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let source = hookscope::tui::demo::offline("1.35".parse().unwrap());
    let msgs = rt.block_on(collect(Box::new(source)));
    let mut s = State::new(
        "1.35".into(),
        AuditLevel::Request,
        Theme::load(theme).unwrap(),
    );
    update(&mut s, Msg::Resize(120, 40));
    for m in msgs {
        update(&mut s, Msg::Source(m));
    }
    s
}

fn keys(s: &mut State, keys: &str) {
    for c in keys.chars() {
        let code = match c {
            '\n' => KeyCode::Enter,
            '\t' => KeyCode::Tab,
            '\x1b' => KeyCode::Esc,
            c => KeyCode::Char(c),
        };
        update(s, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
    }
}

fn screen(s: &State) -> String {
    hookscope::tui::view::render_text(s, 120, 40)
}

/// (name, keys pressed from the loaded state).
const SCREENS: &[(&str, &str)] = &[
    ("requests", ""),
    ("requests_filtered", "/denied\n"),
    ("chain_round0_patch", "\n"),
    ("chain_round1", "\n]"),
    ("chain_denied_deciding", "j\nd"),
    ("chain_secret_masked", "jjjjjjjjjjjjj\nd"),
    ("annotations", "3"),
    ("metrics", "4"),
    ("webhooks", "5j"),
    ("help_chain", "\n?"),
    ("command_completion", ":t"),
    ("editor", "5jje"),
];

fn check(theme: &str) {
    for (name, k) in SCREENS {
        let mut s = loaded(theme);
        keys(&mut s, k);
        insta::assert_snapshot!(format!("{theme}__{name}"), screen(&s));
    }
}

#[test]
fn default_theme() {
    check("default");
}

#[test]
fn high_contrast_theme() {
    check("high-contrast");
}

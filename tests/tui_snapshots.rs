//! Every view rendered at 120x40 from the offline demo (fixed uids and durations), in the default
//! theme and in high-contrast (whose symbols differ), compared with the committed snapshots; and
//! the Requests and Chain views with their styles recorded (every cell's colours and modifiers),
//! in each built-in theme, so that a theme regression fails too.

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

/// (name, keys pressed from the loaded state) of the screens recorded with their styles.
const STYLED: &[(&str, &str)] = &[
    ("requests", ""),
    ("requests_filtered", "/verdict:denied\n"),
    ("chain_round0_patch", "\n"),
    ("chain_denied_deciding", "j\nd"),
];

/// A style as the snapshots write it: `fg=… bg=… +modifiers`, or `-` for none.
fn style_name(s: ratatui::style::Style) -> String {
    let mut parts = Vec::new();
    if let Some(c) = s.fg {
        parts.push(format!("fg={c:?}"));
    }
    if let Some(c) = s.bg {
        parts.push(format!("bg={c:?}"));
    }
    if let Some(c) = s
        .underline_color
        .filter(|c| *c != ratatui::style::Color::Reset)
    {
        parts.push(format!("ul={c:?}"));
    }
    for (m, _) in s.add_modifier.iter_names() {
        parts.push(format!("+{}", m.to_lowercase()));
    }
    for (m, _) in s.sub_modifier.iter_names() {
        parts.push(format!("-{}", m.to_lowercase()));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// The screen with its styles: each text line followed by a line giving every cell's style as
/// a letter, then the letters' styles (letters in order of first use).
fn styled_screen(s: &State) -> String {
    let (w, h) = (120, 40);
    let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    t.draw(|f| hookscope::tui::view::render(f, s)).unwrap();
    let buf = t.backend().buffer();
    const LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut legend: Vec<String> = Vec::new();
    let mut out = String::new();
    for y in 0..h {
        let text: String = (0..w).map(|x| buf[(x, y)].symbol()).collect();
        let mut marks = String::new();
        for x in 0..w {
            let name = style_name(buf[(x, y)].style());
            let i = match legend.iter().position(|l| *l == name) {
                Some(i) => i,
                None => {
                    legend.push(name);
                    legend.len() - 1
                }
            };
            marks.push(LETTERS.chars().nth(i).expect("fewer styles than letters"));
        }
        out.push_str(&format!("{}\n{}\n", text.trim_end(), marks));
    }
    out.push_str("\nstyles:\n");
    for (i, l) in legend.iter().enumerate() {
        out.push_str(&format!("{} {l}\n", LETTERS.chars().nth(i).unwrap()));
    }
    out
}

#[test]
fn styles_are_recorded_in_every_theme() {
    for theme in ["default", "light", "high-contrast"] {
        for (name, k) in STYLED {
            let mut s = loaded(theme);
            keys(&mut s, k);
            insta::assert_snapshot!(format!("{theme}__styled_{name}"), styled_screen(&s));
        }
    }
}

//! The settings file: where it is, what it sets, and what a bad one says.

use std::path::PathBuf;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use hookscope::engine::AuditLevel;
use hookscope::tui::app::{Command, Msg, State, View, update};
use hookscope::tui::config::{self, ConfigError, parse, parse_key, path_from};
use hookscope::tui::keymap::{Action, Key, Keymap};
use hookscope::tui::theme::Theme;

fn ev(c: KeyCode, m: KeyModifiers) -> KeyEvent {
    KeyEvent::new(c, m)
}

#[test]
fn the_file_is_in_the_config_directory() {
    assert_eq!(
        path_from(Some("/x"), Some("/home/u")),
        Some(PathBuf::from("/x/hookscope/config.toml"))
    );
    assert_eq!(
        path_from(Some(""), Some("/home/u")),
        Some(PathBuf::from("/home/u/.config/hookscope/config.toml"))
    );
    assert_eq!(
        path_from(None, Some("/home/u")),
        Some(PathBuf::from("/home/u/.config/hookscope/config.toml"))
    );
    assert_eq!(path_from(None, None), None);
}

#[test]
fn keys_parse() {
    assert_eq!(parse_key("q"), Ok(Key::ch('q')));
    assert_eq!(parse_key("ctrl-y"), Ok(Key::ctrl('y')));
    assert_eq!(parse_key("enter"), Ok(Key::plain(KeyCode::Enter)));
    assert_eq!(parse_key("f5"), Ok(Key::plain(KeyCode::F(5))));
    assert_eq!(parse_key("space"), Ok(Key::ch(' ')));
    assert!(parse_key("ctrl-enter").is_err());
    assert!(parse_key("f13").is_err());
    assert!(parse_key("bogus").is_err());
}

#[test]
fn overrides_replace_the_actions_keys() {
    let s = parse(
        "config.toml",
        "theme = \"light\"\n[keys]\nquit = \"Q\"\ncopy = [\"c\", \"ctrl-y\"]\nview-chain = \"j\"\n",
    )
    .unwrap();
    assert_eq!(s.theme.as_deref(), Some("light"));
    let k = &s.keymap;
    let none = KeyModifiers::NONE;
    assert_eq!(
        k.action(View::Requests, &ev(KeyCode::Char('Q'), none)),
        Some(Action::Quit)
    );
    assert_eq!(
        k.action(View::Requests, &ev(KeyCode::Char('q'), none)),
        None
    );
    assert_eq!(
        k.action(View::Chain, &ev(KeyCode::Char('y'), KeyModifiers::CONTROL)),
        Some(Action::Copy)
    );
    assert_eq!(
        k.action(View::Requests, &ev(KeyCode::Char('c'), none)),
        Some(Action::Copy)
    );
    // A key taken by an override leaves the action that had it.
    assert_eq!(
        k.action(View::Requests, &ev(KeyCode::Char('j'), none)),
        Some(Action::Show(View::Chain))
    );
    assert_eq!(
        k.action(View::Requests, &ev(KeyCode::Down, none)),
        Some(Action::Down)
    );
    // An empty file is the defaults.
    assert_eq!(parse("c", "").unwrap().keymap, Keymap::default());
    // Every action name is unique.
    let mut names: Vec<_> = config::ACTIONS.iter().map(|(n, _)| *n).collect();
    names.dedup();
    assert_eq!(names.len(), config::ACTIONS.len());
}

#[test]
fn errors_name_the_file_and_the_key() {
    let e = parse("/cfg/hookscope/config.toml", "[keys]\nexplode = \"e\"\n").unwrap_err();
    assert!(matches!(&e, ConfigError::UnknownAction { action, .. } if action == "explode"));
    let text = e.to_string();
    assert!(
        text.contains("/cfg/hookscope/config.toml") && text.contains("explode"),
        "{text}"
    );
    let e = parse("f.toml", "[keys]\nquit = \"ctrl-\"\n").unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("f.toml") && text.contains("quit") && text.contains("ctrl-"),
        "{text}"
    );
    let e = parse("f.toml", "colour = 1\n").unwrap_err();
    assert!(e.to_string().contains("f.toml"));
}

#[test]
fn update_applies_settings_or_keeps_the_defaults() {
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    let settings = parse("f.toml", "theme = \"light\"\n[keys]\nquit = \"Q\"\n").unwrap();
    let cmds = update(&mut s, Msg::SettingsLoaded(Ok(Some(settings))));
    assert_eq!(cmds, vec![Command::LoadTheme("light".into())]);
    let quit = update(&mut s, Msg::Key(ev(KeyCode::Char('Q'), KeyModifiers::NONE)));
    assert_eq!(quit, vec![Command::Quit]);

    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    let err = parse("f.toml", "[keys]\nquit = \"nope\"\n").unwrap_err();
    let cmds = update(&mut s, Msg::SettingsLoaded(Err(err.to_string())));
    assert!(cmds.is_empty());
    assert_eq!(s.keymap, Keymap::default());
    let (text, is_error) = s.message.clone().unwrap();
    assert!(
        is_error && text.contains("f.toml") && text.contains("quit"),
        "{text}"
    );
}

#[test]
fn a_missing_file_is_no_settings() {
    let p = std::env::temp_dir().join("hookscope-no-such-dir/config.toml");
    assert_eq!(config::load(&p), Ok(None));
}

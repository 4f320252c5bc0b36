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
    ("editor", "5jjje"),
    ("walkthrough_defaulter", "/cart\n\nj"),
    ("walkthrough_round1", "/cart\n\nj]"),
];

fn check(theme: &str) {
    for (name, k) in SCREENS {
        let mut s = loaded(theme);
        keys(&mut s, k);
        insta::assert_snapshot!(format!("{theme}__{name}"), screen(&s));
    }
}

/// (name, keys pressed from the loaded state) of every view, drawn at every size.
const VIEWS: &[(&str, &str)] = &[
    ("requests", ""),
    ("chain", "j\n"),
    ("annotations", "3"),
    ("metrics", "4"),
    ("webhooks", "5"),
    ("editor", "6"),
    ("whatif", "7"),
    ("help", "?"),
];

/// The sizes every view is drawn at: a small terminal, a common one, a wide one.
const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (250, 60)];

#[test]
fn every_view_at_every_size() {
    for (w, h) in SIZES {
        for (name, k) in VIEWS {
            let mut s = loaded("default");
            update(&mut s, Msg::Resize(w, h));
            keys(&mut s, k);
            let screen = hookscope::tui::view::render_text(&s, w, h);
            insta::assert_snapshot!(format!("sized__{name}_{w}x{h}"), screen);
        }
    }
}

/// The Chain view's grid is laid out as every table is: where there is room (120 and 250
/// columns) a ValidatingAdmissionPolicy's row shows its policy and binding whole, the grid as
/// wide as its names need (at most 45% of the width) and the detail taking the rest; the result
/// in words goes first (the symbols say the same, and the title says what was hidden), shown at
/// 250 columns; every webhook's name stays whole at every size.
#[test]
fn the_chain_grid_shows_names_whole_where_there_is_room() {
    let policy = "policy demo-replica-limit · demo-replica-limit";
    for (w, h) in SIZES {
        let mut s = loaded("default");
        update(&mut s, Msg::Resize(w, h));
        keys(&mut s, "j\n");
        let screen = hookscope::tui::view::render_text(&s, w, h);
        // The grid's rows: the left pane of the lines below the head and the pane's title.
        let row = |name: &str| {
            screen
                .lines()
                .skip(6)
                .map(|l| l.split("││").next().unwrap_or(l))
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("{name} at {w}x{h}:\n{screen}"))
                .to_string()
        };
        for name in [
            "inject.sidecar.demo",
            "labels.defaulter.demo",
            "quota.slow.demo",
            "policy.validator.demo",
            "warn.deprecations.demo",
        ] {
            assert!(
                !row(name).contains(&format!("{name}…")),
                "{w}x{h}:\n{screen}"
            );
        }
        if w >= 120 {
            row(policy);
        }
        if w >= 250 {
            assert!(row(policy).contains("skipped"), "{w}x{h}:\n{screen}");
            assert!(!screen.contains("hidden"), "{w}x{h}:\n{screen}");
        } else {
            assert!(screen.contains("Steps 1/10 · hidden: RESULT"), "{screen}");
        }
    }
}

/// In the Edit view the help lists normal mode's keys, and leaves out the global bindings they
/// take over there (`k` is up elsewhere, a line up here; `x` reveals Secrets elsewhere, deletes
/// a character here).
#[test]
fn the_help_of_the_edit_view_lists_the_normal_mode_keys() {
    let mut s = loaded("default");
    update(&mut s, Msg::Resize(250, 60));
    keys(&mut s, "6?");
    let screen = hookscope::tui::view::render_text(&s, 250, 60);
    assert!(screen.contains("normal mode (as vim"), "{screen}");
    assert!(screen.contains("dd D"), "{screen}");
    assert!(!screen.contains("reveal / mask Secret data"), "{screen}");
    assert!(!screen.contains("k / ↑"), "{screen}");
    assert!(screen.contains("ctrl-s"), "{screen}");
}

/// Each screen of the user guide (a `text` block after `<!-- screen: NAME -->`) is the committed
/// snapshot NAME, so the guide cannot drift from what the console draws. With
/// `HOOKSCOPE_UPDATE_GUIDE=1` the test writes the snapshots into the guide instead.
#[test]
fn the_user_guide_shows_the_committed_snapshots() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide_path = dir.join("docs/user-guide.md");
    let guide = std::fs::read_to_string(&guide_path).unwrap();
    let marker = "<!-- screen: ";
    let mut out = String::new();
    let mut rest = guide.as_str();
    let mut stale = Vec::new();
    let mut screens = 0;
    while let Some(at) = rest.find(marker) {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        let end = from.find(" -->").expect("a closed screen marker");
        let name = &from[marker.len()..end];
        let snapshot = std::fs::read_to_string(dir.join(format!("tests/snapshots/{name}.snap")))
            .unwrap_or_else(|e| panic!("the guide's screen {name}: {e}"));
        // The snapshot's text after its header.
        let screen = snapshot.splitn(3, "---\n").nth(2).expect("a snapshot body");
        let block_start = from
            .find("```text\n")
            .expect("a text block after the marker");
        let body = &from[block_start + 8..];
        let block_end = body.find("\n```").expect("a closed text block");
        if body[..block_end].trim_end() != screen.trim_end() {
            stale.push(name.to_string());
        }
        out.push_str(&from[..block_start + 8]);
        out.push_str(screen.trim_end());
        rest = &body[block_end..];
        screens += 1;
    }
    out.push_str(rest);
    assert!(screens >= 10, "only {screens} screens marked in the guide");
    if std::env::var_os("HOOKSCOPE_UPDATE_GUIDE").is_some() {
        std::fs::write(&guide_path, out).unwrap();
        return;
    }
    assert!(
        stale.is_empty(),
        "the guide's screens differ from the snapshots {stale:?}: run the test with HOOKSCOPE_UPDATE_GUIDE=1"
    );
}

/// The words the views use are defined once: the help overlay's list, which the user guide's
/// table repeats word for word.
#[test]
fn the_user_guide_defines_the_words_the_help_overlay_defines() {
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/user-guide.md"),
    )
    .unwrap();
    for (word, meaning) in hookscope::tui::view::WORDS {
        let word = word
            .replace("{allowed}", "✓")
            .replace("{denied}", "✗")
            .replace("{open}", "!");
        let row = format!("| `{word}` | {meaning} |");
        assert!(guide.contains(&row), "the guide lacks {row}");
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

/// The words of one pane of the Chain view (the grid on the left, the selected step's detail on
/// the right), the pane borders and line breaks taken out.
fn pane_words(s: &State, grid: bool) -> String {
    let screen = screen(s);
    let mut words = Vec::new();
    for line in screen.lines() {
        let Some((left, right)) = line.split_once("││") else {
            continue;
        };
        let pane = if grid {
            left.trim_start_matches('│')
        } else {
            right.trim_end_matches('│')
        };
        words.extend(pane.split_whitespace().map(str::to_string));
    }
    words.join(" ")
}

fn detail_text(s: &State) -> String {
    pane_words(s, false)
}

#[test]
fn chain_says_why_a_webhook_was_not_reinvoked() {
    // Request #2: the sidecar injector's objectSelector does not select the pod in round 0; the
    // defaulter then changes the object; in round 1 the injector matches but is not called.
    let mut s = loaded("default");
    // `]` lands on the round's first step, the MutatingAdmissionPolicy; `j` the injector.
    keys(&mut s, "j\n]j");
    let text = detail_text(&s);
    assert!(
        text.contains("not called: not reinvoked: it was not called in round 0, and a webhook is never called for the first time in the reinvocation round (round 0: objectSelector"),
        "{text}"
    );
    assert!(!text.contains("no later webhook changed"), "{text}");
}

#[test]
fn chain_says_why_a_webhook_was_reinvoked() {
    let mut s = loaded("default");
    keys(&mut s, "\n]j");
    let text = detail_text(&s);
    assert!(
        text.contains("reinvoked: it was called in round 0 with reinvocationPolicy IfNeeded, and a webhook after it changed the object in that round"),
        "{text}"
    );
}

/// The demo's requests replayed through a webhook that refuses connections (failurePolicy Fail)
/// and, behind it, another mutating webhook and a validating one.
fn refused_chain() -> State {
    use hookscope::replay::replier::AnyReplier;
    use hookscope::replay::run::{IdMode, ReplaySettings, Replayer};
    use hookscope::script::{ScriptedReplier, ScriptedReply};
    use hookscope::tui::source::{
        ConfigDocument, ConsoleReplier, DocumentOrigin, ReplayInput, ReplaySource,
    };
    let text = r#"
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingWebhookConfiguration
metadata: {name: a}
webhooks:
- name: refuses.test
  clientConfig: {url: "https://refuses.test/m"}
  failurePolicy: Fail
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
- name: later.test
  clientConfig: {url: "https://later.test/m"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
- name: validates.test
  clientConfig: {url: "https://validates.test/v"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;
    let configurations: Vec<_> = hookscope::config::parse_documents(text, "refused.yaml")
        .into_iter()
        .map(|l| {
            let mut l = l.expect("configuration loads");
            l.apply_defaults();
            l.configuration
        })
        .collect();
    let version = "1.35".parse().unwrap();
    let engine = std::sync::Arc::new(hookscope::engine::Engine::new(
        &configurations,
        hookscope::engine::EngineOptions::for_version(version),
    ));
    let replier = ScriptedReplier::new([(
        "refuses.test".to_string(),
        ScriptedReply {
            error: Some("refused".into()),
            ..ScriptedReply::default()
        },
    )]);
    let source = ReplaySource {
        label: "refused".into(),
        replayer: Replayer::new(engine, ReplaySettings::default()),
        input: ReplayInput::Items(hookscope::tui::demo::requests()),
        replier: ConsoleReplier::Replay(AnyReplier::Scripted(replier)),
        ids: IdMode::Sequential,
        problems: Vec::new(),
        server: None,
        documents: vec![ConfigDocument {
            origin: DocumentOrigin::Embedded("refused.yaml".into()),
            text: text.into(),
            configurations,
            policies: Vec::new(),
        }],
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let msgs = rt.block_on(collect(Box::new(source)));
    let mut s = State::new(
        "1.35".into(),
        AuditLevel::Request,
        Theme::load("default").unwrap(),
    );
    update(&mut s, Msg::Resize(120, 40));
    for m in msgs {
        update(&mut s, Msg::Source(m));
    }
    s
}

fn grid_text(s: &State) -> String {
    pane_words(s, true)
}

#[test]
fn chain_says_what_a_failed_request_never_considered() {
    let mut s = refused_chain();
    keys(&mut s, "\n");
    let grid = grid_text(&s);
    assert!(
        grid.contains("The request failed in mutating round 0: later webhooks, round 1 and the validating phase were not considered."),
        "{}",
        screen(&s)
    );
    assert!(!grid.contains("later.test"), "{grid}");
}

#[test]
fn chain_says_a_matched_webhook_refused_before_its_call_was_not_called() {
    // Request #7 is a dry run: the v1beta1 default sideEffects Unknown refuses it before any
    // request is sent.
    let mut s = refused_chain();
    keys(&mut s, "jjjjjj\n");
    let text = detail_text(&s);
    assert!(
        text.contains("not called: rule 0 matched /v1, Resource=pods (/v1, Kind=Pod), but the call failed before a request was sent"),
        "{}",
        screen(&s)
    );
    assert!(
        text.contains(r#"admission webhook "refuses.test" does not support dry run"#),
        "{text}"
    );
}

#[test]
fn chain_says_why_there_was_no_round_1() {
    // Request #5, a ConfigMap: no mutating webhook matches, so none changed the object.
    let mut s = refused_chain();
    keys(&mut s, "jjjj\n");
    let screen = screen(&s);
    assert!(screen.contains("#5 CREATE configmaps"), "{screen}");
    assert!(
        screen.contains("· no round 1: no webhook changed the object in round 0"),
        "{screen}"
    );
}

/// Every webhook of every demo request that was not called shows, in the Chain view, exactly
/// the reason the engine recorded for it.
#[test]
fn chain_shows_the_engines_reason_for_every_webhook_not_called() {
    let base = loaded("default");
    let count = base.entries.len();
    let mut checked = 0;
    for i in 0..count {
        let mut s = loaded("default");
        keys(&mut s, &format!("{}\n", "j".repeat(i)));
        let calls = s
            .selected_entry()
            .map(|e| e.replayed.outcome.calls.clone())
            .unwrap_or_default();
        // The grid lists the calls in dispatch order; `j` moves down it.
        let order = s.chain_order();
        assert_eq!(order.len(), calls.len());
        for (at, &step) in order.iter().enumerate() {
            if at > 0 {
                keys(&mut s, "j");
            }
            assert_eq!(s.chain.step, step);
            let c = &calls[step];
            let Some(reason) = c.skip_reason.as_deref() else {
                continue;
            };
            let want = format!("not called: {reason}")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let text = detail_text(&s);
            assert!(
                text.contains(&want),
                "request {} step {step}: want {want:?} in {text:?}",
                i + 1
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} skipped webhooks checked");
}

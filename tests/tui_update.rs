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

/// The demo loaded on a terminal `w`×`h`.
fn loaded_at(w: u16, h: u16) -> State {
    let mut s = loaded();
    update(&mut s, Msg::Resize(w, h));
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
    assert_eq!(s.requests.visible().len(), s.entries.len());
    assert_eq!(s.requests.selected, Some(0));
    // Five webhooks and the bindings of the mutating and the validating policy.
    assert_eq!(s.hooks.len(), 7);
    let (_, allowed, denied, open) = s.counts();
    assert!(allowed > 0 && denied > 0 && open > 0);
    // The Webhooks view's counts agree with the requests, the demo's ValidatingAdmissionPolicy
    // counted with the webhooks (it denies one request).
    let denials: usize = s.hook_counts.iter().map(|c| c.denied).sum();
    let by_policy = s
        .entries
        .iter()
        .filter(|e| {
            e.replayed
                .outcome
                .calls
                .iter()
                .any(|c| c.policy.is_some() && c.allowed == Some(false))
        })
        .count();
    assert_eq!(by_policy, 1);
    assert_eq!(denials, denied);
    // Every request that reached a policy binding counts it as matched or skipped, once.
    for (name, phase) in [
        ("demo-owner-label", hookscope::api::WebhookKind::Mutating),
        (
            "demo-replica-limit",
            hookscope::api::WebhookKind::Validating,
        ),
    ] {
        let at = s.hooks.iter().position(|h| h.webhook == name).unwrap();
        let reached = s
            .entries
            .iter()
            .filter(|e| {
                e.replayed
                    .outcome
                    .calls
                    .iter()
                    .any(|c| &*c.webhook == name && c.phase == phase && c.round == 0)
            })
            .count();
        let c = &s.hook_counts[at];
        assert!(c.skipped() > 0, "{name}: {c:?}");
        assert_eq!(c.matched + c.skipped(), reached, "{name}: {c:?}");
    }
    assert!(
        s.annotations
            .iter()
            .filter_map(|a| s.annotation(a))
            .any(|a| &*a.key == "mutation.webhook.admission.k8s.io/round_1_index_0")
    );
}

/// `✓`, `✗` and `!` of the status bar are three kinds of request: they add up to the requests
/// replayed, and a request allowed though a call failed open is counted under `!` alone.
#[test]
fn the_status_counts_add_up_to_the_requests() {
    let s = loaded();
    let (replayed, allowed, denied, open) = s.counts();
    assert_eq!(allowed + denied + open, replayed);
    let want_open = s
        .entries
        .iter()
        .filter(|e| e.verdict == Verdict::FailedOpen)
        .count();
    assert!(want_open > 0);
    assert_eq!(open, want_open);
    let line = status_line(&s);
    assert!(
        line.contains(&format!("✓ {allowed} ✗ {denied} ! {open}")),
        "{line}"
    );
}

/// "matched" and the other per-webhook words count the same thing in the Webhooks view and in
/// What-if: the Webhooks view's counts equal the what-if counts of the same results.
#[test]
fn webhooks_counts_mean_what_the_what_if_counts_mean() {
    let s = loaded();
    let results: Vec<_> = s.entries.iter().map(|e| &*e.replayed).collect();
    let stats = hookscope::edit::hook_stats(results);
    let mut checked = 0;
    for (h, c) in s.hooks.iter().zip(&s.hook_counts) {
        let Some((_, w)) = stats.iter().find(|(k, _)| {
            k.phase == h.phase && k.configuration == h.configuration && k.webhook == h.webhook
        }) else {
            continue;
        };
        assert_eq!(c, w, "{}", h.webhook);
        // A request matched a webhook or skipped it, never both.
        assert!(c.matched + c.skipped() <= s.entries.len(), "{}", h.webhook);
        checked += 1;
    }
    assert_eq!(checked, s.hooks.len());
}

/// The Chain view lists a request's webhooks in dispatch order, each with its position in that
/// order (the Webhooks view's POS), whether it was called or skipped.
#[test]
fn the_chain_lists_webhooks_in_dispatch_order_by_position() {
    let mut s = loaded_at(160, 50);
    let positions: std::collections::HashMap<String, usize> = s
        .hooks
        .iter()
        .map(|h| (h.webhook.clone(), h.position))
        .collect();
    let mut checked = 0;
    for i in 0..s.entries.len() {
        key(&mut s, '1');
        select(&mut s, i);
        key(&mut s, '2');
        let screen = hookscope::tui::view::render_text(&s, 160, 50);
        let mut last: Option<usize> = None;
        for line in screen.lines() {
            let Some((grid, _)) = line.split_once("││") else {
                continue;
            };
            let words: Vec<&str> = grid.trim_start_matches('│').split_whitespace().collect();
            if words
                .first()
                .is_some_and(|w| *w == "mutating" || *w == "validating")
            {
                last = None;
                continue;
            }
            // A policy's step names its policy and binding, not a position.
            if words.contains(&"policy") {
                continue;
            }
            // A step: [marker] symbol position name state.
            let Some(at) = words.iter().position(|w| positions.contains_key(*w)) else {
                continue;
            };
            let shown: usize = words[at - 1].parse().expect("a position before the name");
            assert_eq!(shown, positions[words[at]], "request {}: {line}", i + 1);
            assert!(
                last.is_none_or(|l| l < shown),
                "request {}: {screen}",
                i + 1
            );
            last = Some(shown);
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked}");
}

/// At any width, a number in the Requests or Webhooks table is shown whole or its column is
/// dropped whole and named in the pane's title; a dry run keeps its `dry` mark.
#[test]
fn numbers_are_whole_or_their_column_is_named_hidden() {
    let mut s = loaded();
    for width in [50u16, 60, 70, 80, 90, 100, 120, 160, 250] {
        update(&mut s, Msg::Resize(width, 60));
        key(&mut s, '1');
        let screen = hookscope::tui::view::render_text(&s, width, 60);
        let lines: Vec<&str> = screen.lines().collect();
        let title = lines[1];
        for (row, line) in lines[3..].iter().enumerate() {
            let Some(e) = s.requests.visible().get(row).map(|&i| s.entries[i].row()) else {
                break;
            };
            let duration = format!(" {:.1} ms", e.duration.as_secs_f64() * 1000.0);
            assert!(
                line.contains(&duration) || title.contains("TIME"),
                "{width}: {duration:?} in {line:?}\n{screen}"
            );
            let called = format!(" {} ", e.called);
            assert!(
                line.contains(&called) || title.contains("CALL"),
                "{width}: {called:?} in {line:?}"
            );
            if e.dry_run {
                assert!(line.contains(" dry "), "{width}: {line:?}");
            }
        }
        key(&mut s, '5');
        let screen = hookscope::tui::view::render_text(&s, width, 60);
        let lines: Vec<&str> = screen.lines().collect();
        for (i, c) in s.hook_counts.iter().enumerate() {
            let cells: Vec<&str> = lines[3 + i].trim_matches('│').split_whitespace().collect();
            for (n, title) in [(c.matched, "MATCH"), (c.failed_open, "OPEN")] {
                assert!(
                    cells.contains(&n.to_string().as_str()) || lines[1].contains(title),
                    "{width}: {title} {n} in {:?}",
                    lines[3 + i]
                );
            }
        }
    }
}

#[test]
fn metrics_are_the_merge_of_every_request() {
    let s = loaded();
    let rejections = hookscope::tui::app::rejections(&s.metrics);
    let denied = s.counts().2 as f64;
    let total: f64 = rejections.iter().map(|(_, v)| v).sum();
    // The demo's policy denies one request, counted in the policy's own metric.
    let by_policy = s
        .metrics
        .samples()
        .iter()
        .filter(|m| {
            m.name == "apiserver_validating_admission_policy_check_total"
                && m.labels
                    .iter()
                    .any(|(k, v)| k == "enforcement_action" && v == "deny")
        })
        .map(|m| m.value)
        .sum::<f64>();
    assert_eq!(by_policy, 1.0);
    assert_eq!(total + by_policy, denied);
    assert!(s.metrics.encode_text().contains(
        "apiserver_admission_webhook_fail_open_count{name=\"quota.slow.demo\",type=\"validating\"}"
    ));
}

#[test]
fn rejections_over_replay_time_end_at_the_exported_totals() {
    let s = loaded();
    let t = &s.timeline;
    let elapsed: std::time::Duration = s.entries.iter().map(|e| e.replayed.outcome.elapsed).sum();
    assert_eq!(
        t.clock, elapsed,
        "the replay clock is the dispatch durations"
    );
    assert!(!t.series.is_empty());
    for ((name, error_type), total) in hookscope::tui::app::rejections(&s.metrics) {
        let series = t
            .series
            .iter()
            .find(|x| x.name == name && x.error_type == error_type)
            .unwrap_or_else(|| panic!("a line for {name} {error_type}"));
        assert_eq!(series.points.last().unwrap().1, total);
        // Counts only grow, on a clock that only moves forward.
        assert!(
            series
                .points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1)
        );
    }
}

#[test]
fn stepping_through_the_chain_to_round_1() {
    let mut s = loaded();
    key(&mut s, 'l');
    assert_eq!(s.view, View::Chain);
    assert_eq!(s.chain.step, 0);
    key(&mut s, ']');
    let calls = s.selected_entry().unwrap().replayed.outcome.calls.clone();
    assert_eq!(Block::of(&calls[s.chain.step]), Block::Round1);
    // The round opens with the mutating policy, as the apiserver runs it.
    assert_eq!(&*calls[s.chain.step].webhook, "demo-owner-label");
    assert_eq!(&*calls[s.chain.step + 1].webhook, "inject.sidecar.demo");
    key(&mut s, ']');
    assert_eq!(Block::of(&calls[s.chain.step]), Block::Validating);
    key(&mut s, '[');
    key(&mut s, '[');
    assert_eq!(s.chain.step, 0);
    key(&mut s, 'j');
    assert_eq!(s.chain.step, 1);
    key(&mut s, 'k');
    key(&mut s, 'k');
    assert_eq!(s.chain.step, 0, "stepping stops at the first step");
    // Tab moves the keys to the detail pane; j then scrolls it.
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.chain.pane, ChainPane::Detail);
    key(&mut s, 'j');
    assert_eq!((s.chain.step, s.chain.detail.top), (0, 1));
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.chain.pane, ChainPane::Grid);
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.view, View::Requests);
}

#[test]
fn deciding_step_of_a_denied_request() {
    let mut s = loaded();
    let denied = s
        .entries
        .iter()
        .position(|e| matches!(e.verdict, Verdict::Denied(403)))
        .unwrap();
    for _ in 0..denied {
        key(&mut s, 'j');
    }
    assert_eq!(s.requests.selected, Some(denied));
    code(&mut s, KeyCode::Enter);
    key(&mut s, 'd');
    let e = s.selected_entry().unwrap();
    assert_eq!(
        cell_state(&e.replayed.outcome.calls[s.chain.step]),
        CellState::Denied
    );
    // n / p move between requests and start the chain over.
    key(&mut s, 'n');
    assert_eq!((s.requests.selected, s.chain.step), (Some(denied + 1), 0));
    key(&mut s, 'p');
    assert_eq!(s.requests.selected, Some(denied));
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
    assert_eq!(s.requests.filter(), "denied");
    assert_eq!(s.requests.visible().len(), s.counts().2);
    assert!(
        s.requests
            .visible()
            .iter()
            .all(|&i| matches!(s.entries[i].verdict, Verdict::Denied(_)))
    );
    assert!(s.requests.visible().contains(&s.requests.selected.unwrap()));
    code(&mut s, KeyCode::Esc);
    assert!(s.requests.filter().is_empty());
    assert_eq!(s.requests.visible().len(), s.entries.len());

    update(&mut s, Msg::Action(Action::Sort("duration".into())));
    assert_eq!(s.requests.sort(), (SortKey::Duration, false));
    key(&mut s, 'r');
    let first = s.entries[s.requests.visible()[0]].row();
    assert!(s.entries.iter().all(|e| e.row().duration <= first.duration));
}

/// Results that arrive while the table is sorted (either way, filtered or not) land where
/// sorting the whole table would put them.
#[test]
fn results_arriving_under_a_sort_land_in_sorted_place() {
    let msgs = demo_messages();
    for (column, reverse, filter) in [
        ("duration", false, ""),
        ("verdict", true, ""),
        ("name", false, "pods"),
        ("called", true, "denied"),
    ] {
        let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
        update(&mut s, Msg::Action(Action::Sort(column.into())));
        if reverse {
            key(&mut s, 'r');
        }
        s.requests
            .action(&Action::Filter(filter.into()), &s.entries);
        for m in msgs.iter().cloned() {
            update(&mut s, Msg::Source(m));
        }
        assert!(s.entries.len() > 30, "the demo streamed in");
        assert_eq!(s.requests.sort().1, reverse, "{column}");
        let arrived = s.requests.visible().to_vec();
        assert!(!arrived.is_empty(), "{column} {filter}");
        // Choosing the same sort again sorts the whole table afresh.
        update(&mut s, Msg::Action(Action::Sort(column.into())));
        if reverse {
            key(&mut s, 'r');
        }
        assert_eq!(s.requests.sort().1, reverse);
        assert_eq!(
            arrived,
            s.requests.visible(),
            "sorted by {column}, reversed {reverse}, filter {filter:?}"
        );
    }
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
    assert_eq!(s.annotations_view.cursor.selected, None);
    key(&mut s, 'k');
    assert!(s.annotations_view.cursor.selected.is_some());
    key(&mut s, 'G');
    assert_eq!(s.annotations_view.cursor.selected, None);
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
    let chosen = s.requests.selected;
    for m in it {
        update(&mut s, Msg::Source(m));
    }
    assert_eq!(s.requests.selected, chosen);
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
    assert_eq!(s.requests.selected, Some(index));
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
    let after_text = serde_json::to_string_pretty(&*after).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&after_text))]);
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.chain.pane, ChainPane::Detail);
    let patch_text = serde_json::to_string_pretty(&patch).unwrap();
    assert_eq!(key(&mut s, 'y'), vec![Command::Clipboard(b64(&patch_text))]);
    // The terminal layer writes the OSC 52 sequence.
    assert_eq!(hookscope::tui::app::osc52("aGk="), "\u{1b}]52;c;aGk=\u{7}");
}

#[test]
fn y_masks_secret_data_unless_revealed() {
    let mut s = loaded();
    let at = s.entries.iter().position(|e| e.secret).expect("a Secret");
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
    assert_eq!((s.requests.selected, s.view), (Some(4), View::Requests));
    // A click on the selected row (the second click of a double click) opens its chain.
    click(&mut s, 20, 3 + 4);
    assert_eq!((s.requests.selected, s.view), (Some(4), View::Chain));
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
    assert_eq!(hookscope::tui::view::tab_at(&s, 0), None);
    // Below the last row or on the borders nothing changes.
    click(&mut s, 20, 1);
    click(&mut s, 20, 49);
    assert_eq!((s.requests.selected, s.view), (Some(4), View::Requests));
    // With the selection scrolled down, the rows shown move with it.
    key(&mut s, 'G');
    let last = s.requests.visible().len() - 1;
    let rows = hookscope::tui::view::requests_rows(50);
    if last >= rows {
        click(&mut s, 20, 3);
        assert_eq!(s.requests.position(), Some(last + 1 - rows));
    }
}

fn wheel(s: &mut State, column: u16, row: u16, down: bool) {
    use crossterm::event::{MouseEvent, MouseEventKind};
    let kind = if down {
        MouseEventKind::ScrollDown
    } else {
        MouseEventKind::ScrollUp
    };
    update(
        s,
        Msg::Mouse(MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        }),
    );
}

fn type_filter(s: &mut State, text: &str) {
    key(s, '/');
    for c in text.chars() {
        key(s, c);
    }
    code(s, KeyCode::Enter);
}

/// The rows the Requests view shows: (the "#" column, namespace/name), from the screen.
fn shown_rows(s: &State) -> Vec<(usize, String)> {
    let screen = hookscope::tui::view::render_text(s, 200, 50);
    screen
        .lines()
        .skip(3)
        .filter_map(|l| {
            let l = l.trim_start_matches('│').trim_start_matches(['▸', ' ']);
            let mut words = l.split_whitespace();
            let n: usize = words.next()?.parse().ok()?;
            let target = words.find(|w| w.contains('/') || *w == "sandbox")?;
            Some((n, target.to_string()))
        })
        .collect()
}

/// The bottom line of the screen at 200×50 (status bar or input line).
fn status_line(s: &State) -> String {
    let screen = hookscope::tui::view::render_text(s, 200, 50);
    screen.lines().last().unwrap_or_default().to_string()
}

/// Which rows pass a filter, by hand.
fn passing(s: &State, f: impl Fn(&hookscope::tui::model::RequestRow) -> bool) -> Vec<usize> {
    (0..s.entries.len())
        .filter(|&i| f(&s.entries[i].row()))
        .collect()
}

#[test]
fn field_filters_by_verdict_webhook_and_namespace() {
    let mut s = loaded();
    type_filter(&mut s, "verdict:denied");
    assert_eq!(s.requests.filter(), "verdict:denied");
    let denied = passing(&s, |r| matches!(r.verdict, Verdict::Denied(_)));
    assert_eq!(s.requests.visible(), denied);
    assert_eq!(denied.len(), s.counts().2);
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.requests.visible().len(), s.entries.len());

    // Fields combine with each other and with plain words; every term must hold.
    type_filter(&mut s, "ns:shop verdict:403 cart");
    let want = passing(&s, |r| {
        r.namespace == "shop" && r.verdict == Verdict::Denied(403) && r.target.contains("cart")
    });
    assert!(!want.is_empty());
    assert_eq!(s.requests.visible(), want);
    code(&mut s, KeyCode::Esc);

    // namespace: is ns:, and the namespace must be exactly the one named.
    type_filter(&mut s, "namespace:sho");
    assert!(s.requests.visible().is_empty());
    code(&mut s, KeyCode::Esc);
    type_filter(&mut s, "namespace:payments");
    assert_eq!(
        s.requests.visible(),
        passing(&s, |r| r.namespace == "payments")
    );
    code(&mut s, KeyCode::Esc);

    // webhook: a called webhook's name contains the text.
    type_filter(&mut s, "webhook:quota");
    let want = passing(&s, |r| r.webhooks.iter().any(|w| w == "quota.slow.demo"));
    assert!(!want.is_empty() && want.len() < s.entries.len());
    assert_eq!(s.requests.visible(), want);
    code(&mut s, KeyCode::Esc);

    // failed-open and its negation; allowed takes failed-open requests too (they were admitted).
    type_filter(&mut s, "verdict:failed-open");
    let open = passing(&s, |r| r.verdict == Verdict::FailedOpen);
    assert_eq!(
        (s.requests.visible().to_vec(), open.len()),
        (open, s.counts().3)
    );
    code(&mut s, KeyCode::Esc);
    type_filter(&mut s, "!verdict:allowed");
    assert_eq!(s.requests.visible(), denied);
    code(&mut s, KeyCode::Esc);
    // Plain words can be negated too, and mixed with the rest.
    type_filter(&mut s, "pods !cart ns:shop");
    let want = passing(&s, |r| {
        r.resource == "pods" && !r.target.contains("cart") && r.namespace == "shop"
    });
    assert!(!want.is_empty());
    assert_eq!(s.requests.visible(), want);
}

#[test]
fn the_status_line_says_what_the_filter_does() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    key(&mut s, '/');
    for c in "verdict:den ns:shop".chars() {
        key(&mut s, c);
    }
    // While typing, the input line shows what the filter so far keeps.
    let n = s.requests.visible().len();
    let last = status_line(&s);
    assert!(last.starts_with("/verdict:den ns:shop"), "{last}");
    assert!(
        last.contains(&format!(
            "filter verdict denied · namespace shop: {n}/{}",
            s.entries.len()
        )),
        "{last}"
    );
    code(&mut s, KeyCode::Enter);
    let last = status_line(&s);
    assert!(
        last.contains("filter verdict denied · namespace shop"),
        "{last}"
    );

    // A verdict that is none says so, in the status line, and shows nothing.
    code(&mut s, KeyCode::Esc);
    type_filter(&mut s, "verdict:maybe");
    assert!(s.requests.visible().is_empty());
    let last = status_line(&s);
    assert!(
        last.contains("filter not used: verdict:maybe: expected allowed, denied"),
        "{last}"
    );
    // The help lists the fields.
    code(&mut s, KeyCode::Esc);
    key(&mut s, '?');
    let help = hookscope::tui::view::render_text(&s, 200, 50);
    for field in [
        "verdict: / v:",
        "webhook: / hook:",
        "ns: / namespace:",
        "!TERM",
    ] {
        assert!(help.contains(field), "{field}\n{help}");
    }
}

#[test]
fn a_filter_set_before_the_results_arrive_keeps_only_matching_ones() {
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    update(
        &mut s,
        Msg::Action(Action::Filter("verdict:denied ns:payments".into())),
    );
    for m in demo_messages() {
        update(&mut s, Msg::Source(m));
    }
    let want = passing(&s, |r| {
        matches!(r.verdict, Verdict::Denied(_)) && r.namespace == "payments"
    });
    assert!(!want.is_empty());
    assert_eq!(s.requests.visible(), want);
    assert_eq!(s.requests.selected, Some(want[0]));
}

#[test]
fn the_number_column_is_the_input_position_under_sorting_and_filtering() {
    let mut s = loaded();
    let check = |s: &State| {
        let rows = shown_rows(s);
        assert_eq!(rows.len(), s.requests.visible().len());
        for ((n, target), &i) in rows.iter().zip(s.requests.visible()) {
            assert_eq!(*n, i + 1, "{target}");
            assert_eq!(*target, s.entries[n - 1].row().target);
        }
        rows
    };
    let unsorted = check(&s);
    assert!(
        unsorted
            .iter()
            .enumerate()
            .all(|(row, (n, _))| *n == row + 1)
    );
    update(&mut s, Msg::Action(Action::Sort("name".into())));
    let by_name = check(&s);
    assert_ne!(
        by_name[0].0, 1,
        "sorted by name, the first row is not the first request"
    );
    key(&mut s, 'r');
    check(&s);
    // The Chain view's title gives the same number, not the request's place in its file.
    let (n, target) = by_name[3].clone();
    s.entries[n - 1].replayed.request.source.index = 999;
    update(&mut s, Msg::Action(Action::Sort("name".into())));
    key(&mut s, 'g');
    for _ in 0..3 {
        key(&mut s, 'j');
    }
    code(&mut s, KeyCode::Enter);
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    assert!(
        screen.lines().nth(1).unwrap().contains(&format!("#{n} ")),
        "{target}\n{screen}"
    );
    assert!(screen.lines().nth(1).unwrap().contains(&target));
    code(&mut s, KeyCode::Esc);

    type_filter(&mut s, "verdict:denied");
    let denied = check(&s);
    assert!(
        denied
            .iter()
            .all(|(n, _)| matches!(s.entries[n - 1].verdict, Verdict::Denied(_)))
    );
}

#[test]
fn clicking_a_column_title_sorts_by_it_and_again_reverses() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    let titles = screen.lines().nth(2).unwrap().to_string();
    let col = |t: &str| titles[..titles.find(t).unwrap()].chars().count() as u16;
    click(&mut s, col("VERDICT"), 2);
    assert_eq!(s.requests.sort(), (SortKey::Verdict, false));
    click(&mut s, col("VERDICT") + 2, 2);
    assert_eq!(s.requests.sort(), (SortKey::Verdict, true));
    click(&mut s, col("DURATION"), 2);
    assert_eq!(s.requests.sort(), (SortKey::Duration, false));
    click(&mut s, col("NAMESPACE/NAME") + 5, 2);
    assert_eq!(s.requests.sort(), (SortKey::Name, false));
    click(&mut s, col("#"), 2);
    assert_eq!(s.requests.sort(), (SortKey::Input, false));
}

#[test]
fn the_wheel_moves_the_selection_in_requests_and_webhooks() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    wheel(&mut s, 30, 10, true);
    wheel(&mut s, 30, 10, true);
    assert_eq!(s.requests.selected, Some(2));
    wheel(&mut s, 30, 10, false);
    assert_eq!(s.requests.selected, Some(1));
    key(&mut s, '5');
    wheel(&mut s, 30, 5, true);
    assert_eq!(s.hook_cursor.selected, 1);
}

/// The screen row of the Chain grid that shows call `i`, the grid drawn in `columns`: the
/// lines below the request's heading naming its webhook, the n-th of them when `i` is the n-th
/// call of that webhook.
fn step_row(
    screen: &str,
    calls: &[hookscope::engine::CallRecord],
    i: usize,
    columns: std::ops::Range<usize>,
) -> u16 {
    let name = &*calls[i].webhook;
    let nth = calls[..i].iter().filter(|c| &*c.webhook == name).count();
    screen
        .lines()
        .enumerate()
        .filter(|(y, l)| {
            let part: String = l.chars().skip(columns.start).take(columns.len()).collect();
            *y > 5 && part.contains(name)
        })
        .nth(nth)
        .map(|(y, _)| y as u16)
        .unwrap_or_else(|| panic!("no row shows call {i} ({name})"))
}

#[test]
fn clicks_in_the_chain_pick_steps_and_panes() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.view, View::Chain);
    let calls = s.selected_entry().unwrap().replayed.outcome.calls.clone();
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    // Click each step's row of the grid, found on the screen by its webhook's name.
    let lines: Vec<&str> = screen.lines().collect();
    let mut clicked = 0;
    for want in (0..calls.len()).rev() {
        let y = step_row(&screen, &calls, want, 0..46);
        click(&mut s, 10, y);
        assert_eq!(s.chain.step, want, "row {y}");
        clicked += 1;
    }
    assert_eq!(clicked, calls.len());
    // A block title is no step: the selection stays.
    let title_y = lines
        .iter()
        .position(|l| l.contains("mutating · round 0"))
        .unwrap() as u16;
    // The reinvoked injector (after round 0's mutating policy and two webhooks, and round 1's
    // mutating policy).
    let row = step_row(&screen, &calls, 4, 0..46);
    click(&mut s, 10, row);
    click(&mut s, 10, title_y);
    assert_eq!(s.chain.step, 4);
    // The detail pane takes the keys when clicked, the grid when clicked again.
    click(&mut s, 100, 20);
    assert_eq!(s.chain.pane, ChainPane::Detail);
    click(&mut s, 10, row);
    assert_eq!(s.chain.pane, ChainPane::Grid);
    // The wheel scrolls the detail under the mouse, and steps over the grid.
    wheel(&mut s, 100, 20, true);
    wheel(&mut s, 100, 20, true);
    assert_eq!((s.chain.step, s.chain.detail.top), (4, 6));
    wheel(&mut s, 100, 20, false);
    assert_eq!(s.chain.detail.top, 3);
    wheel(&mut s, 10, row, true);
    assert_eq!((s.chain.step, s.chain.detail.top), (5, 0));
    wheel(&mut s, 10, row, false);
    assert_eq!(s.chain.step, 4);
}

#[test]
fn clicks_select_webhooks_and_close_the_help() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    key(&mut s, '5');
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    for (i, h) in s.hooks.clone().iter().enumerate().rev() {
        let y = screen.lines().position(|l| l.contains(&h.webhook)).unwrap() as u16;
        click(&mut s, 40, y);
        assert_eq!(s.hook_cursor.selected, i, "{}", h.webhook);
    }
    // The column titles select nothing.
    click(&mut s, 40, 2);
    assert_eq!(s.hook_cursor.selected, 0);
    key(&mut s, '?');
    assert!(s.help);
    click(&mut s, 40, 10);
    assert!(!s.help);
    assert_eq!(
        s.hook_cursor.selected, 0,
        "the click that closes the help does nothing else"
    );
}

#[test]
fn an_explicit_theme_wins_over_the_settings_file() {
    let settings = || hookscope::tui::config::parse("config.toml", "theme = \"light\"\n").unwrap();
    // --theme default given: the file's theme is not loaded.
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    s.theme_from_command_line = true;
    assert!(update(&mut s, Msg::SettingsLoaded(Ok(Some(settings())))).is_empty());
    assert_eq!(s.theme.name, "default");
    // No --theme: the file's theme is.
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    assert_eq!(
        update(&mut s, Msg::SettingsLoaded(Ok(Some(settings())))),
        vec![Command::LoadTheme("light".into())]
    );
    // At runtime :theme switches whatever chose the theme first.
    let mut s = State::new("1.37".into(), AuditLevel::Request, Theme::default());
    s.theme_from_command_line = true;
    key(&mut s, ':');
    for c in "theme high-contrast".chars() {
        key(&mut s, c);
    }
    assert_eq!(
        code(&mut s, KeyCode::Enter),
        vec![Command::LoadTheme("high-contrast".into())]
    );
}

#[test]
fn clicks_in_what_if_select_and_open_a_request() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    // An edit that made three requests warn: the what-if lists them.
    s.baseline = Some(hookscope::tui::app::Baseline {
        entries: s.entries.clone(),
    });
    for i in [3, 10, 20] {
        s.entries[i].replayed.outcome.warnings.push("edited".into());
    }
    let before = s.baseline.as_ref().unwrap().entries.iter();
    s.whatif = hookscope::edit::compare(
        before.map(|e| &*e.replayed),
        s.entries.iter().map(|e| &*e.replayed),
    );
    assert_eq!(s.whatif.requests.len(), 3);
    key(&mut s, '7');
    assert_eq!(s.view, View::WhatIf);
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    let row_of = |n: usize| {
        screen
            .lines()
            .position(|l| {
                l.trim_start_matches('│')
                    .trim_start_matches(['▸', ' '])
                    .starts_with(&format!("{n} "))
            })
            .unwrap() as u16
    };
    click(&mut s, 30, row_of(21));
    assert_eq!(s.whatif_cursor.selected, 2);
    click(&mut s, 30, row_of(11));
    assert_eq!((s.whatif_cursor.selected, s.view), (1, View::WhatIf));
    // The selected row clicked again opens the chain before / after.
    click(&mut s, 30, row_of(11));
    assert_eq!(
        (s.view, s.chain.compare, s.requests.selected),
        (View::Chain, true, Some(10))
    );

    // Side by side, a click on a step of the "after" grid selects it; the wheel over the diff
    // scrolls it.
    let calls = s.selected_entry().unwrap().replayed.outcome.calls.clone();
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    let last = calls.len() - 1;
    let y = step_row(&screen, &calls, last, 100..200);
    click(&mut s, 120, y);
    assert_eq!(s.chain.step, last);
    click(&mut s, 20, y);
    assert_eq!(s.chain.step, last, "the \"before\" grid selects nothing");
    wheel(&mut s, 100, 45, true);
    assert_eq!(
        (s.chain.step, s.chain.detail.top),
        (last, 0),
        "the diff fits its pane: the wheel does not scroll it into blank space"
    );
}

fn ctrl(s: &mut State, c: char) -> Vec<Command> {
    update(
        s,
        Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)),
    )
}

/// The title of the pane drawn on `row` of the screen.
fn pane_title(screen: &str, row: usize) -> String {
    screen.lines().nth(row).unwrap_or_default().to_string()
}

#[test]
fn the_chain_detail_scrolls_within_its_text_and_says_where() {
    let mut s = loaded_at(80, 24);
    // Request #2's deciding step (a denial, its review sent and answered) in a narrow pane.
    key(&mut s, 'j');
    code(&mut s, KeyCode::Enter);
    key(&mut s, 'd');
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.chain.pane, ChainPane::Detail);
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    assert!(pane_title(&screen, 5).contains("1–"), "{screen}");
    key(&mut s, 'G');
    let bottom = s.chain.detail.top;
    assert!(bottom > 0);
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    let title = pane_title(&screen, 5);
    assert!(title.contains(&format!("{}–", bottom + 1)), "{title}");
    // Past the end there is nothing: G again, ctrl-d and pgdn stay; k comes back one line.
    key(&mut s, 'G');
    ctrl(&mut s, 'd');
    code(&mut s, KeyCode::PageDown);
    assert_eq!(s.chain.detail.top, bottom);
    key(&mut s, 'k');
    assert_eq!(s.chain.detail.top, bottom - 1);
    ctrl(&mut s, 'u');
    key(&mut s, 'g');
    assert_eq!(s.chain.detail.top, 0);
    // A step that fits its pane (the first, skipped) does not scroll at all.
    update(&mut s, Msg::Resize(250, 60));
    code(&mut s, KeyCode::Esc);
    key(&mut s, 'g');
    code(&mut s, KeyCode::Tab);
    key(&mut s, 'G');
    ctrl(&mut s, 'd');
    assert_eq!(s.chain.detail.top, 0);
}

#[test]
fn the_help_overlay_scrolls_to_its_last_command_at_80_by_24() {
    let mut s = loaded_at(80, 24);
    key(&mut s, '?');
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    assert!(!screen.contains("as apply, taking over"), "{screen}");
    assert!(pane_title(&screen, 1).contains("1–20/"), "{screen}");
    key(&mut s, 'G');
    assert!(s.help, "scrolling keeps the overlay open");
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    assert!(screen.contains("quit"), "{screen}");
    assert!(screen.contains("as apply, taking over"), "{screen}");
    let end = s.help_scroll.top;
    key(&mut s, 'j');
    assert_eq!(s.help_scroll.top, end);
    key(&mut s, 'k');
    assert_eq!(s.help_scroll.top, end - 1);
    // Words are never run together: each key is followed by a blank before its meaning.
    key(&mut s, 'g');
    key(&mut s, '?');
    key(&mut s, '1');
    key(&mut s, '?');
    let screen = hookscope::tui::view::render_text(&s, 160, 45);
    assert!(!screen.contains("hook:a"), "{screen}");
    assert!(!screen.contains("namespace:the"), "{screen}");
    code(&mut s, KeyCode::Esc);
    assert!(!s.help);
}

#[test]
fn the_metrics_samples_scroll_and_say_where() {
    let mut s = loaded_at(80, 24);
    key(&mut s, '4');
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    assert!(screen.contains("Exported samples"), "{screen}");
    let title = screen
        .lines()
        .find(|l| l.contains("Exported samples"))
        .unwrap()
        .to_string();
    assert!(title.contains("1–"), "{title}");
    key(&mut s, 'G');
    let end = s.samples_scroll.top;
    assert!(end > 0);
    key(&mut s, 'j');
    assert_eq!(s.samples_scroll.top, end);
    key(&mut s, 'k');
    assert_eq!(s.samples_scroll.top, end - 1);
}

#[test]
fn enter_on_an_annotation_opens_its_step_in_the_chain() {
    let mut s = loaded_at(120, 40);
    key(&mut s, '3');
    key(&mut s, 'g');
    let first = *s.visible_annotations()[0];
    let key_name = s.annotation(&first).unwrap().key.to_string();
    assert!(s.annotations_view.cursor.selected == Some(0));
    let screen = hookscope::tui::view::render_text(&s, 120, 40);
    assert!(screen.lines().nth(3).unwrap().contains('▸'), "{screen}");
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.view, View::Chain);
    assert_eq!(s.requests.selected, Some(first.request()));
    // `…/round_{r}_index_{i}`: the step is that round's call at that index.
    if let Some(rest) = key_name.split_once("/round_").map(|(_, r)| r.to_string()) {
        let (round, index) = rest.split_once("_index_").unwrap();
        let c = &s.selected_entry().unwrap().replayed.outcome.calls[s.chain.step];
        assert_eq!(c.round.to_string(), round);
        assert_eq!(c.index.to_string(), index);
    }
}

#[test]
fn the_filter_parser_takes_fields_prefixes_and_negation() {
    use hookscope::tui::filter::{FilterError, RequestFilter, Term, VerdictTerm};
    let parse = |t: &str| RequestFilter::parse(t).map(|f| f.terms);
    assert_eq!(
        parse("v:den !NS:kube-system Hook:Policy"),
        Ok(vec![
            (false, Term::Verdict(VerdictTerm::Denied)),
            (true, Term::Namespace("kube-system".into())),
            (false, Term::Webhook("policy".into())),
        ])
    );
    assert_eq!(
        parse("verdict:open verdict:422 verdict:a"),
        Ok(vec![
            (false, Term::Verdict(VerdictTerm::FailedOpen)),
            (false, Term::Verdict(VerdictTerm::Code(422))),
            (false, Term::Verdict(VerdictTerm::Allowed)),
        ])
    );
    // A field still being typed constrains nothing; an unknown field is a plain word.
    assert_eq!(parse("verdict: ns: ! "), Ok(vec![]));
    assert_eq!(
        parse("system:serviceaccount Cart"),
        Ok(vec![
            (false, Term::Text("system:serviceaccount".into())),
            (false, Term::Text("cart".into())),
        ])
    );
    assert_eq!(
        parse("ns:shop verdict:nope"),
        Err(FilterError::Verdict("nope".into()))
    );
}

#[test]
fn a_click_on_an_annotation_opens_the_step_that_wrote_it() {
    let mut s = loaded();
    update(&mut s, Msg::Resize(200, 50));
    key(&mut s, '3');
    let screen = hookscope::tui::view::render_text(&s, 200, 50);
    // (row, request number, shortened key) of the rows shown.
    let rows: Vec<(u16, usize, String)> = screen
        .lines()
        .enumerate()
        .skip(3)
        .filter_map(|(y, l)| {
            let mut words = l.trim_start_matches('│').split_whitespace();
            let n = words.next()?.strip_prefix('#')?.parse().ok()?;
            let _target = words.next()?;
            Some((y as u16, n, words.next()?.to_string()))
        })
        .collect();
    let pick = |want: &dyn Fn(&str) -> bool| {
        rows.iter()
            .find(|(_, _, k)| want(k))
            .cloned()
            .unwrap_or_else(|| panic!("no such row in\n{screen}"))
    };
    let cases = [
        pick(&|k| k == "mutation/round_1_index_0"),
        pick(&|k| k == "patch/round_0_index_1"),
        pick(&|k| k.starts_with("failed-open/")),
        pick(&|k| k == "inject/injected"),
    ];
    for (y, n, k) in cases {
        click(&mut s, 60, y);
        assert_eq!(
            (s.view, s.requests.selected),
            (View::Chain, Some(n - 1)),
            "{k}"
        );
        let call = &s.selected_entry().unwrap().replayed.outcome.calls[s.chain.step];
        let (round, index) = (call.round, call.index);
        match k.as_str() {
            "mutation/round_1_index_0" => assert_eq!((round, index), (1, 0)),
            "patch/round_0_index_1" => assert_eq!((round, index), (0, 1)),
            "inject/injected" => assert_eq!(&*call.webhook, "inject.sidecar.demo"),
            _ => assert_eq!(
                (&*call.webhook, call.phase),
                ("quota.slow.demo", hookscope::api::WebhookKind::Validating)
            ),
        }
        code(&mut s, KeyCode::Esc);
        key(&mut s, '3');
    }
    // The column titles open nothing.
    click(&mut s, 60, 2);
    assert_eq!(s.view, View::Annotations);
}

#[test]
fn e_opens_a_configuration_at_its_start_not_its_name_on_the_last_row() {
    for (w, h) in [(80u16, 24u16), (120, 40)] {
        let mut s = loaded_at(w, h);
        for k in "5jjjjje".chars() {
            key(&mut s, k);
        }
        assert_eq!(s.view, View::Editor);
        let screen = hookscope::tui::view::render_text(&s, w, h);
        let lines: Vec<&str> = screen.lines().collect();
        let top = lines
            .iter()
            .position(|l| l.contains("valid, in force"))
            .unwrap();
        let name = lines
            .iter()
            .position(|l| l.contains("name: 40-policy"))
            .unwrap_or_else(|| panic!("{screen}"));
        assert_eq!(name - top, 4, "{w}x{h}:\n{screen}");
        assert!(lines[name - 3].contains("apiVersion:"), "{screen}");
    }
}

#[test]
fn tab_means_next_pane_in_every_view() {
    let mut s = loaded_at(120, 40);
    for view in ['1', '3', '4', '5', '7'] {
        key(&mut s, view);
        let before = s.view;
        code(&mut s, KeyCode::Tab);
        assert_eq!(s.view, before, "tab does not switch views");
        assert!(
            s.message
                .as_ref()
                .is_some_and(|(m, _)| m.contains("switch views")),
            "{:?}",
            s.message
        );
    }
    key(&mut s, '2');
    code(&mut s, KeyCode::Tab);
    assert_eq!((s.view, s.chain.pane), (View::Chain, ChainPane::Detail));
}

/// A console whose only `--webhooks` file (two documents) was left out, as the replay source
/// reports it.
fn nothing_loaded() -> State {
    use hookscope::replay::report::{Problem, ProblemKind};
    use hookscope::replay::{IndexUnit, SourceRef};
    use hookscope::tui::source::{ConfigDocument, DocumentOrigin};
    let mut s = State::new("1.35".into(), AuditLevel::Request, Theme::default());
    update(&mut s, Msg::Resize(160, 40));
    let text = "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: a}\nwebhooks: []\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: b}\nwebhooks:\n- name: b.example.com\n  timeoutSeconds: 31\n";
    update(
        &mut s,
        Msg::Source(SourceMsg::Started {
            label: "replay 1 file".into(),
            hooks: Vec::new(),
            total: Some(0),
            documents: vec![ConfigDocument {
                origin: DocumentOrigin::File("hooks.yaml".into()),
                text: text.into(),
                configurations: Vec::new(),
                policies: Vec::new(),
            }],
        }),
    );
    let problem = Problem {
        kind: ProblemKind::Configuration,
        source: SourceRef {
            file: "hooks.yaml".into(),
            index: 2,
            unit: IndexUnit::Document,
            audit_id: None,
            line: None,
        },
        field: "webhooks[0].timeoutSeconds".into(),
        message: "Invalid value: 31: the timeout value must be between 1 and 30 seconds".into(),
    };
    update(&mut s, Msg::Source(SourceMsg::Problem(Box::new(problem))));
    update(
        &mut s,
        Msg::Source(SourceMsg::Finished { missing_replies: 0 }),
    );
    s
}

#[test]
fn problems_are_listed_with_file_position_field_and_reason() {
    let mut s = nothing_loaded();
    // Nothing loaded is said where the requests are, not only counted.
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    assert!(screen.contains("no configuration loaded"), "{screen}");
    assert!(screen.contains("1 problems: :problems"), "{screen}");
    assert!(
        screen.lines().next().unwrap().contains("! Problems"),
        "{screen}"
    );
    key(&mut s, ':');
    for c in "problems".chars() {
        key(&mut s, c);
    }
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.view, View::Problems);
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    let row = screen
        .lines()
        .find(|l| l.contains("configuration left out"))
        .unwrap_or_else(|| panic!("{screen}"));
    for part in [
        "hooks.yaml document 2",
        "webhooks[0].timeoutSeconds",
        "must be between 1 and 30 seconds",
    ] {
        assert!(row.contains(part), "{part}: {row}");
    }
    assert!(
        screen.contains("No webhook configuration loaded"),
        "{screen}"
    );
    // enter opens the file at the document that was left out.
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.view, View::Editor);
    let screen = hookscope::tui::view::render_text(&s, 160, 40);
    assert!(screen.contains(" · 6:1 · "), "{screen}");
}

/// At 80 columns the table clips a long reason; the pane under it shows the selected problem in
/// full, wrapped, with its whole place and field.
#[test]
fn the_selected_problem_is_shown_in_full_under_the_table() {
    use hookscope::replay::report::{Problem, ProblemKind};
    use hookscope::replay::{IndexUnit, SourceRef};
    let mut s = nothing_loaded();
    let problem = Problem {
        kind: ProblemKind::Invalid,
        source: SourceRef {
            file: "captures/requests.jsonl".into(),
            index: 17,
            unit: IndexUnit::Line,
            audit_id: None,
            line: None,
        },
        field: "request.object.metadata.labels".into(),
        message: "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string:\nat line 17, column 12 of an input that goes on and on (the end of a long reason)".into(),
    };
    update(&mut s, Msg::Source(SourceMsg::Problem(Box::new(problem))));
    s.view = View::Problems;
    code(&mut s, KeyCode::Down);
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    let joined: String = screen
        .lines()
        .map(|l| l.trim_matches(|c: char| c == '│' || c.is_whitespace()))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(joined.contains("(the end of a long reason)"), "{screen}");
    assert!(
        joined
            .contains("invalid · captures/requests.jsonl line 17 · request.object.metadata.labels"),
        "{screen}"
    );
    // The first problem is shown when it is selected.
    code(&mut s, KeyCode::Up);
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    assert!(
        screen.contains("hooks.yaml document 2 · webhooks[0]"),
        "{screen}"
    );
}

#[test]
fn a_long_notice_never_hides_the_progress() {
    let mut s = loaded_at(80, 24);
    s.message = Some((
        "unsaved edits of validating.yaml, mutating.yaml and three more files from an earlier session: :recover opens, :discard drops".into(),
        false,
    ));
    let screen = hookscope::tui::view::render_text(&s, 80, 24);
    let status = screen.lines().last().unwrap();
    assert!(status.contains("34 done"), "{status}");
    assert!(status.contains("unsaved edits of"), "{status}");
    assert!(status.contains('…'), "{status}");
}

/// The Requests view's own state, driven on its own over the demo's entries: rows arriving one
/// by one land where filtering and sorting them all at once puts them; an unusable filter shows
/// nothing and says why; the cursor stays within the rows, and from a hidden request it starts
/// at the first row.
#[test]
fn requests_view_owns_its_rows_and_cursor() {
    use hookscope::tui::views::{RequestsView, ViewState};
    let s = loaded();
    let mut arriving = RequestsView::default();
    arriving.action(&Action::Sort("verdict".into()), &[]);
    arriving.action(&Action::Filter("pods".into()), &[]);
    for n in 1..=s.entries.len() {
        arriving.push(&s.entries[..n]);
    }
    let mut whole = arriving.clone();
    assert!(!whole.refilter(&s.entries), "the cursor stays where it was");
    assert_eq!(arriving.visible(), whole.visible());
    assert!(!whole.visible().is_empty());

    let taken = whole.action(&Action::Filter("verdict:nope".into()), &s.entries);
    assert!(whole.visible().is_empty() && whole.parsed().is_err());
    assert_eq!(taken.map(|t| t.reselected), Some(true));
    assert_eq!(whole.action(&Action::Up, &s.entries), None, "not its own");

    let mut v = RequestsView::default();
    v.refilter(&s.entries);
    v.navigate(&(), isize::MAX / 2);
    assert_eq!(v.position(), Some(s.entries.len() - 1));
    v.action(&Action::Filter("verdict:denied".into()), &s.entries);
    let hidden = (0..s.entries.len())
        .find(|i| !v.visible().contains(i))
        .unwrap();
    v.focus(hidden);
    assert_eq!(v.position(), None);
    v.navigate(&(), 1);
    assert_eq!(v.selected, Some(v.visible()[1]), "one row from the first");
}

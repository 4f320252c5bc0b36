//! The console under a live audit stream: `cargo bench --bench live_console`.
//!
//! The oracle log's events are ingested once (as the live source does) and cycled. With the
//! console already holding its limit of 10,000 events (so every new one pages out the oldest):
//!
//! * `update_5000_events`: `update` taking in 5,000 audit events, one second of the stream at
//!   the target rate; divan prints events per second;
//! * `frame_events` / `frame_annotations`: one frame of the Events and Annotations views at
//!   200×50 while following the tail.
//!
//! Before the timings it prints the console's memory after 10,000 and after 100,000 events:
//! with the limit, the second is no larger than the first.

#[path = "../src/allocator.rs"]
mod allocator;
#[path = "support/counting.rs"]
mod counting;
#[path = "support/frame.rs"]
mod frame;

use std::sync::OnceLock;

use divan::Bencher;
use divan::counter::ItemsCount;
use hookscope::engine::AuditLevel;
use hookscope::replay::input::{ClusterState, Reader};
use hookscope::tui::app::{Msg, State, View, update};
use hookscope::tui::keymap::Action;
use hookscope::tui::live::{AuditRecord, LiveMsg, LiveState, records_of_lines};
use hookscope::tui::source::SourceMsg;
use hookscope::tui::theme::Theme;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Events the console keeps.
const KEEP: usize = 10_000;

/// One second of the stream at the target rate.
const PER_SECOND: usize = 5_000;

struct Loaded {
    records: Vec<AuditRecord>,
    // A Mutex only because the state (its editor widgets) is not Sync.
    full: std::sync::Mutex<State>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();

/// The oracle log's events at their final stage, as the live source sends them.
fn records() -> Vec<AuditRecord> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oracle-v1.32/audit.log"
    ))
    .expect("the oracle audit log");
    records_of_lines(
        "audit.log",
        text.lines(),
        Reader::new(ClusterState::default()),
    )
}

fn console() -> State {
    let mut s = State::new("1.32".into(), AuditLevel::Request, Theme::default());
    s.live = Some(Box::new(LiveState::new("bench".into(), KEEP, false)));
    update(&mut s, Msg::Resize(200, 50));
    s
}

fn feed(state: &mut State, records: &[AuditRecord], n: usize) {
    for r in records.iter().cycle().take(n) {
        update(
            state,
            Msg::Source(SourceMsg::Live(LiveMsg::Audit(Box::new(r.clone())))),
        );
    }
}

fn main() {
    let records = records();
    let before = counting::live();
    let mut state = console();
    feed(&mut state, &records, KEEP);
    let at_limit = counting::live() - before;
    feed(&mut state, &records, 9 * KEEP);
    let after = counting::live() - before;
    let live = state.live.as_deref().expect("live");
    eprintln!(
        "{} distinct events cycled; console memory with {} events kept: {:.1} MB after {} events, {:.1} MB after {} ({} paged out)",
        records.len(),
        live.events.len(),
        at_limit as f64 / 1e6,
        KEEP,
        after as f64 / 1e6,
        live.events_seen,
        live.paged_out(),
    );
    assert!(after <= at_limit + at_limit / 10, "memory is bounded");
    let _ = LOADED.set(Loaded {
        records,
        full: std::sync::Mutex::new(state),
    });
    divan::main();
}

fn full() -> State {
    LOADED
        .get()
        .expect("loaded in main")
        .full
        .lock()
        .expect("not poisoned")
        .clone()
}

/// One second of the stream at 5,000 events per second, taken in by `update`.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn update_5000_events(bencher: Bencher) {
    let loaded = LOADED.get().expect("loaded in main");
    let state = full();
    bencher
        .counter(ItemsCount::new(PER_SECOND))
        .with_inputs(|| state.clone())
        .bench_local_values(|mut s| {
            feed(&mut s, &loaded.records, PER_SECOND);
            s
        });
}

fn frame(bencher: Bencher, view: View) {
    let mut state = full();
    update(&mut state, Msg::Action(Action::Show(view)));
    frame::bench_frame(bencher, &state);
}

/// One frame of the Events view with 10,000 events kept.
#[divan::bench]
fn frame_events(bencher: Bencher) {
    frame(bencher, View::Events);
}

/// One frame of the Annotations view with 10,000 events kept.
#[divan::bench]
fn frame_annotations(bencher: Bencher) {
    frame(bencher, View::Annotations);
}

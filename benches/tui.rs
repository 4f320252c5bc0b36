//! The console: `cargo bench --bench tui`.
//!
//! `frame/<view>`: one frame of each view drawn at 200×50 on ratatui's `TestBackend`, with
//! 100,000 replayed requests loaded into the state (the demo's 34 results, then copies of them
//! with varied names), as the event loop draws it.
//!
//! Before the timings, the bench prints the memory a loaded request takes: the bytes its replayed
//! result holds (request, objects, outcome, trace), and the bytes loading it into the state adds
//! on top (row, annotations, indices), both counted by a global allocator that keeps the live
//! total.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicIsize, Ordering};

use divan::Bencher;
use hookscope::engine::AuditLevel;
use hookscope::replay::run::{ReplayEvent, Replayed};
use hookscope::tui::app::{Msg, State, View, update};
use hookscope::tui::source::{SourceMsg, collect};
use hookscope::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The binary's allocator, with the live total counted.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static INNER: mimalloc::MiMalloc = mimalloc::MiMalloc;

// SAFETY: every call is forwarded to mimalloc unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract is passed on.
        unsafe { INNER.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Requests loaded.
const REQUESTS: usize = 100_000;

// A Mutex only because the state (its editor widgets) is not Sync; each bench clones it once.
static STATE: OnceLock<std::sync::Mutex<State>> = OnceLock::new();

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The demo's messages, replayed offline once.
fn demo_messages() -> Vec<SourceMsg> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let source = hookscope::tui::demo::offline(hookscope::KubeVersion::default());
    rt.block_on(collect(Box::new(source)))
}

/// Loads the state and prints the memory per request.
fn load() -> State {
    let msgs = demo_messages();
    let originals: Vec<Replayed> = msgs
        .iter()
        .filter_map(|m| match m {
            SourceMsg::Event { event, .. } => match event.as_ref() {
                ReplayEvent::Replayed(r) => Some(r.as_ref().clone()),
                ReplayEvent::Skipped(_) => None,
            },
            _ => None,
        })
        .collect();
    let mut state = State::new("1.35".into(), AuditLevel::Request, Theme::default());
    update(&mut state, Msg::Resize(200, 50));
    let mut demo_loaded = 0;
    for m in msgs {
        if matches!(m, SourceMsg::Event { .. }) {
            demo_loaded += 1;
        }
        if !matches!(m, SourceMsg::Finished { .. }) {
            update(&mut state, Msg::Source(m));
        }
    }
    let copies = REQUESTS - demo_loaded;
    // The copies' replayed results, built first: their size is the objects' share.
    let before_results = live();
    let results: Vec<SourceMsg> = (0..copies)
        .map(|i| {
            let mut r = originals[i % originals.len()].clone();
            r.request.attrs.name = format!("{}-{i}", r.request.attrs.name);
            SourceMsg::Event {
                event: Box::new(ReplayEvent::Replayed(Box::new(r))),
                metrics: None,
            }
        })
        .collect();
    let after_results = live();
    for m in results {
        update(&mut state, Msg::Source(m));
    }
    update(
        &mut state,
        Msg::Source(SourceMsg::Finished { missing_replies: 0 }),
    );
    let loaded = live();
    let per = |bytes: isize| bytes as f64 / copies as f64;
    // The message vector and the event boxes are freed while loading: count them as results.
    let message_overhead = (copies * std::mem::size_of::<SourceMsg>()
        + copies * std::mem::size_of::<ReplayEvent>()) as isize;
    let results_bytes = after_results - before_results - message_overhead;
    let state_bytes = loaded - before_results - results_bytes;
    eprintln!(
        "memory per loaded request ({copies} copies of the demo's {} results): \
         replayed result {:.0} B (request, objects, outcome, trace); \
         added by the console state {:.0} B (row, annotations, indices)",
        originals.len(),
        per(results_bytes),
        per(state_bytes),
    );
    assert_eq!(state.entries.len(), REQUESTS);
    state
}

fn main() {
    let _ = STATE.set(std::sync::Mutex::new(load()));
    divan::main();
}

fn frame(bencher: Bencher, view: View) {
    let mut state = STATE
        .get()
        .expect("loaded in main")
        .lock()
        .expect("not poisoned")
        .clone();
    update(
        &mut state,
        Msg::Action(hookscope::tui::keymap::Action::Show(view)),
    );
    if view == View::Chain {
        // The first request of the demo: a Pod through both rounds.
        update(
            &mut state,
            Msg::Action(hookscope::tui::keymap::Action::NextRound),
        );
    }
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).expect("a test terminal");
    bencher.bench_local(|| {
        terminal
            .draw(|f| hookscope::tui::view::render(f, &state))
            .expect("drawn");
    });
}

/// One frame of the Requests view.
#[divan::bench]
fn frame_requests(bencher: Bencher) {
    frame(bencher, View::Requests);
}

/// One frame of the Chain view (round 1 of a Pod).
#[divan::bench]
fn frame_chain(bencher: Bencher) {
    frame(bencher, View::Chain);
}

/// One frame of the Annotations view (following the tail).
#[divan::bench]
fn frame_annotations(bencher: Bencher) {
    frame(bencher, View::Annotations);
}

/// One frame of the Metrics view.
#[divan::bench]
fn frame_metrics(bencher: Bencher) {
    frame(bencher, View::Metrics);
}

/// One frame of the Webhooks view.
#[divan::bench]
fn frame_webhooks(bencher: Bencher) {
    frame(bencher, View::Webhooks);
}

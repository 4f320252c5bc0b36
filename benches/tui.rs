//! The console: `cargo bench --bench tui`.
//!
//! `frame/<view>`: one frame of each view drawn at 200×50 on ratatui's `TestBackend`, with
//! 100,000 replayed requests loaded into the state (the demo's 34 results, then copies of them
//! with varied names), as the event loop draws it.
//!
//! Before the timings, the bench prints the memory a loaded request takes, counted by a global
//! allocator that keeps the live total: the bytes a replayed result holds (request, objects,
//! outcome, trace), measured on fresh offline demo replays and split into the distinct JSON
//! objects it refers to (each shared allocation counted once) and everything beyond them; and
//! the bytes loading a request into the console state adds (row, annotations, indices). Their
//! sum is the honest figure a loaded request costs beyond its distinct objects.

#[path = "../src/allocator.rs"]
mod allocator;
#[path = "support/counting.rs"]
mod counting;
#[path = "support/frame.rs"]
mod frame;

use std::collections::HashSet;
use std::sync::OnceLock;

use divan::Bencher;
use hookscope::engine::{AuditLevel, CallRecord, Object, StepKind, TraceStep};
use hookscope::replay::run::{ReplayEvent, Replayed};
use hookscope::tui::app::{Msg, State, View, update};
use hookscope::tui::source::{SourceMsg, collect};
use hookscope::tui::theme::Theme;
use serde_json::Value;

#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

/// Requests loaded.
const REQUESTS: usize = 100_000;

// A Mutex only because the state (its editor widgets) is not Sync; each bench clones it once.
static STATE: OnceLock<std::sync::Mutex<State>> = OnceLock::new();

/// The demo's messages, replayed offline once.
fn demo_messages() -> Vec<SourceMsg> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let source = hookscope::tui::demo::offline(hookscope::KubeVersion::default());
    rt.block_on(collect(Box::new(source)))
}

/// Fresh demo replays measured for the memory figure.
const MEMORY_RUNS: usize = 10;

/// The replayed results of one offline demo run, boxed as the console holds them.
#[allow(clippy::vec_box)] // the boxes are part of what is measured
fn demo_results(msgs: Vec<SourceMsg>) -> Vec<Box<Replayed>> {
    msgs.into_iter()
        .filter_map(|m| match m {
            SourceMsg::Event { event, .. } => match *event {
                ReplayEvent::Replayed(r) => Some(r),
                ReplayEvent::Skipped(_) => None,
            },
            _ => None,
        })
        .collect()
}

/// Every JSON object a replayed result refers to: the request's, the outcome's, the trace's
/// before/after and review objects. The same allocation may appear many times.
fn objects_of(r: &Replayed) -> Vec<&Value> {
    let a = &r.request.attrs;
    let mut out: Vec<&Value> = a
        .object
        .iter()
        .chain(&a.old_object)
        .map(|o| o.value())
        .collect();
    out.extend(r.outcome.object.as_deref().map(Object::value));
    out.extend(r.outcome.trace.objects().map(|o| o.value()));
    out
}

/// Prints the memory a replayed request takes, measured on fresh offline demo replays (objects
/// are the replay's own, as when a capture is loaded): the whole result, the distinct JSON
/// objects in it (each allocation once, however many steps refer to it), and the rest, which it
/// returns (bytes per request).
fn print_result_memory() -> f64 {
    drop(demo_results(demo_messages()));
    let before = counting::live();
    let mut results: Vec<Box<Replayed>> = Vec::new();
    for _ in 0..MEMORY_RUNS {
        results.extend(demo_results(demo_messages()));
    }
    results.shrink_to_fit();
    let total =
        counting::live() - before - (results.len() * std::mem::size_of::<Box<Replayed>>()) as isize;
    // The distinct objects, each sized by the allocations a clone of it makes (a clone's
    // vectors are no larger than the original's, so this errs towards a larger remainder).
    let mut seen: HashSet<*const Value> = HashSet::new();
    let mut objects = 0isize;
    for o in results.iter().flat_map(|r| objects_of(r)) {
        if seen.insert(o as *const Value) {
            let at = counting::live();
            let copy = o.clone();
            objects += counting::live() - at;
            drop(copy);
        }
    }
    let n = results.len() as f64;
    // What a clone of each part allocates: shared allocations (objects, names, the review texts
    // and reply bodies a trace shares) are not copied by a clone, so they stay in the remainder.
    let clone_bytes = |f: &dyn Fn(&Replayed) -> Box<dyn std::any::Any>| {
        let mut bytes = 0isize;
        for r in &results {
            let at = counting::live();
            let copy = f(r);
            bytes += counting::live() - at;
            drop(copy);
        }
        bytes as f64 / n
    };
    let request = clone_bytes(&|r| Box::new(r.request.clone()));
    let annotations = clone_bytes(&|r| Box::new(r.outcome.annotations.clone()));
    let calls_owned = clone_bytes(&|r| Box::new(r.outcome.calls.clone()));
    let trace_owned = clone_bytes(&|r| Box::new(r.outcome.trace.clone()));
    // The reply bodies the trace keeps, each shared allocation once (an `Arc<str>`'s two
    // counters, then the text, rounded to its alignment).
    let mut bodies_seen: HashSet<*const u8> = HashSet::new();
    let mut bodies = 0usize;
    for r in &results {
        for s in r.outcome.steps() {
            if let StepKind::ReplyReceived { body: Some(b), .. } = s.kind
                && bodies_seen.insert(b.as_ptr())
            {
                bodies += (16 + b.len()).next_multiple_of(8);
            }
        }
    }
    let bodies = bodies as f64 / n;
    let steps: usize = results.iter().map(|r| r.outcome.trace.len()).sum();
    let calls: usize = results.iter().map(|r| r.outcome.calls.capacity()).sum();
    eprintln!(
        "memory per replayed request ({MEMORY_RUNS} fresh offline demo runs, {} requests): \
         {:.0} B in all; distinct JSON objects {:.0} B ({:.1} per request); \
         beyond the distinct objects {:.0} B (trace, call records, annotations, request fields)",
        results.len(),
        total as f64 / n,
        objects as f64 / n,
        seen.len() as f64 / n,
        (total - objects) as f64 / n,
    );
    eprintln!(
        "  of which the trace's step array {:.0} B ({:.1} steps of {} B), the call records' array \
         {:.0} B ({:.1} of {} B); the rest is what steps and records point to",
        (steps * std::mem::size_of::<TraceStep>()) as f64 / n,
        steps as f64 / n,
        std::mem::size_of::<TraceStep>(),
        (calls * std::mem::size_of::<CallRecord>()) as f64 / n,
        calls as f64 / n,
        std::mem::size_of::<CallRecord>(),
    );
    eprintln!(
        "  copies of the parts (shared allocations not copied): request without its objects {request:.0} B; \
         annotations {annotations:.0} B; call records {calls_owned:.0} B; trace {trace_owned:.0} B; \
         shared by the trace's steps: reply bodies {bodies:.0} B"
    );
    eprintln!(
        "  sizes: Replayed {} B (its Outcome {} B), CapturedRequest {} B, CallRecord {} B, \
         TraceStep {} B, AuditAnnotation {} B",
        std::mem::size_of::<Replayed>(),
        std::mem::size_of::<hookscope::engine::Outcome>(),
        std::mem::size_of::<hookscope::replay::CapturedRequest>(),
        std::mem::size_of::<CallRecord>(),
        std::mem::size_of::<TraceStep>(),
        std::mem::size_of::<hookscope::engine::AuditAnnotation>(),
    );
    (total - objects) as f64 / n
}

/// Loads the state and prints the memory the console state adds per request.
fn load() -> State {
    let beyond_objects = print_result_memory();
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
    // The copies' replayed results, built first (they share the originals' objects, so their
    // size is not a request's: that figure comes from fresh replays above).
    let before_results = counting::live();
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
    let after_results = counting::live();
    for m in results {
        update(&mut state, Msg::Source(m));
    }
    update(
        &mut state,
        Msg::Source(SourceMsg::Finished { missing_replies: 0 }),
    );
    let loaded = counting::live();
    let per = |bytes: isize| bytes as f64 / copies as f64;
    // The message vector and the event boxes are freed while loading: count them as results.
    let message_overhead = (copies * std::mem::size_of::<SourceMsg>()
        + copies * std::mem::size_of::<ReplayEvent>()) as isize;
    let results_bytes = after_results - before_results - message_overhead;
    let state_bytes = loaded - before_results - results_bytes;
    eprintln!(
        "memory added by the console state per loaded request ({copies} copies of the demo's {} \
         results): {:.0} B (row, annotations, indices)",
        originals.len(),
        per(state_bytes),
    );
    eprintln!(
        "memory per loaded request beyond its distinct objects, the state's share included: \
         {:.0} B (the replayed result {beyond_objects:.0} B + the console state {:.0} B; \
         target < 4,096 B)",
        beyond_objects + per(state_bytes),
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
    frame::bench_frame(bencher, &state);
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

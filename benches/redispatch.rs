//! Re-dispatch after an edit: `cargo bench --bench redispatch`.
//!
//! 10,000 loaded requests (the demo's captured requests cycled, each copy with its own object
//! name) were replayed once through the demo's configurations with a [`ReusingReplier`], which
//! kept every reply. The edit makes the slow quota webhook's failurePolicy `Fail`; no call's
//! content changes, so every reply comes from the cache. Measured on a current-thread tokio
//! runtime (one core):
//!
//! * `redispatch_all_reused`: the loaded requests through the edited engine, results collected
//!   in input order;
//! * `edit_to_what_if`: what the console does on each edit: check the text, build the engine,
//!   re-dispatch, compare with the results before the edit.
//!
//! And the console answering keys meanwhile. The re-dispatch runs in the source's task; the event
//! loop reads a key between two batches of at most 513 source messages, and the results are
//! swapped in by one `update` when the run finishes. A key therefore waits at most the longest of
//! these, plus one frame:
//!
//! * `console_batch`: `update` over one batch of 513 re-dispatched results;
//! * `console_finish`: `update` on `RedispatchFinished` (rows, annotations, counts and the what-if
//!   comparison rebuilt for 10,000 requests);
//! * `console_frame`: one frame of the Requests view at 200×50 during the run;
//! * `console_key`: `update` on a key (`j`) during the run.

#[path = "support/frame.rs"]
mod frame;

use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use divan::Bencher;
use hookscope::edit::{
    CancelToken, Redispatched, ReplyCache, ReusingReplier, check, compare, redispatch,
};
use hookscope::engine::AuditLevel;
use hookscope::engine::EngineOptions;
use hookscope::replay::run::{IdMode, ReplaySettings, Replayer};
use hookscope::replay::{CapturedRequest, InputItem};
use hookscope::tui::app::{Command, Msg, State, View, update};
use hookscope::tui::demo::{self, DemoReplier};
use hookscope::tui::keymap::Action;
use hookscope::tui::source::{CHANNEL_CAPACITY, ReplayInput, Source, SourceCtl, SourceMsg};
use hookscope::tui::theme::Theme;
use tokio::sync::mpsc;

#[path = "../src/allocator.rs"]
mod allocator;

// The allocator of the `hookscope` binary, so the figures are the console's.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

const REQUESTS: usize = 10_000;

struct Loaded {
    requests: Arc<[CapturedRequest]>,
    before: Redispatched,
    edited_text: String,
    previous: Vec<hookscope::api::WebhookConfiguration>,
    replier: ReusingReplier<DemoReplier>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn renamed(r: &CapturedRequest, i: usize) -> CapturedRequest {
    let mut r = r.clone();
    let name = format!("{}-{i}", r.attrs.name);
    for o in [&mut r.attrs.object, &mut r.attrs.old_object]
        .into_iter()
        .flatten()
    {
        if let Some(m) = std::sync::Arc::make_mut(o)
            .value_mut()
            .get_mut("metadata")
            .and_then(|m| m.as_object_mut())
        {
            m.insert("name".into(), name.clone().into());
        }
    }
    r.attrs.name = name;
    r
}

fn replayer(text: &str, previous: &[hookscope::api::WebhookConfiguration]) -> Replayer {
    let engine = check(text, "demo", previous)
        .engine(EngineOptions::default())
        .expect("a valid edit");
    Replayer::new(Arc::new(engine), ReplaySettings::default())
}

async fn run(loaded: &Loaded, replayer: &Replayer) -> Redispatched {
    redispatch(
        Arc::clone(&loaded.requests),
        replayer,
        loaded.replier.clone(),
        IdMode::Random,
        &CancelToken::new(),
        |_| {},
    )
    .await
    .expect("not cancelled")
}

fn load() -> Loaded {
    let demo: Vec<CapturedRequest> = demo::requests()
        .into_iter()
        .filter_map(|i| match i {
            InputItem::Request(r) => Some(*r),
            _ => None,
        })
        .collect();
    let requests: Arc<[CapturedRequest]> = (0..REQUESTS)
        .map(|i| renamed(&demo[i % demo.len()], i))
        .collect();
    let ca = base64::engine::general_purpose::STANDARD.encode("demo-ca");
    let text = demo::WEBHOOKS_YAML
        .replace("${URL}", "https://127.0.0.1:8443")
        .replace("${CA}", &ca);
    let slow = "  failurePolicy: Ignore\n  sideEffects: None\n  timeoutSeconds: 1\n";
    assert!(text.contains(slow));
    let edited_text = text.replace(
        slow,
        "  failurePolicy: Fail\n  sideEffects: None\n  timeoutSeconds: 1\n",
    );
    let cache = ReplyCache::default();
    let replier = ReusingReplier::new(DemoReplier, cache.clone());
    let previous = check(&text, "demo", &[]).webhook_configurations();
    let mut loaded = Loaded {
        requests,
        before: Redispatched {
            results: Vec::new(),
            metrics: hookscope::metrics::Metrics::new(),
        },
        edited_text,
        previous,
        replier,
    };
    let rt = runtime();
    loaded.before = rt.block_on(run(&loaded, &replayer(&text, &[])));
    let filled = cache.stats();
    let after = rt.block_on(run(
        &loaded,
        &replayer(&loaded.edited_text, &loaded.previous),
    ));
    let reused = cache.stats();
    assert_eq!(reused.misses, filled.misses, "every reply reused");
    let flipped = compare(&loaded.before.results, &after.results)
        .flipped()
        .count();
    eprintln!(
        "{REQUESTS} requests, {} replies kept, {} calls answered from the cache per re-dispatch, {flipped} verdicts flipped by the edit",
        reused.entries,
        reused.hits - filled.hits,
    );
    loaded
}

fn main() {
    let _ = LOADED.set(load());
    let _ = CONSOLE.set(std::sync::Mutex::new(console()));
    divan::main();
}

/// The loaded requests through the edited engine, every reply from the cache.
#[divan::bench(sample_count = 5, sample_size = 1)]
fn redispatch_all_reused(bencher: Bencher) {
    let loaded = LOADED.get().expect("loaded in main");
    let rt = runtime();
    let replayer = replayer(&loaded.edited_text, &loaded.previous);
    bencher.bench_local(|| rt.block_on(run(loaded, &replayer)));
}

/// Check, engine, re-dispatch and comparison: one edit as the console handles it.
#[divan::bench(sample_count = 5, sample_size = 1)]
fn edit_to_what_if(bencher: Bencher) {
    let loaded = LOADED.get().expect("loaded in main");
    let rt = runtime();
    bencher.bench_local(|| {
        let replayer = replayer(&loaded.edited_text, &loaded.previous);
        let after = rt.block_on(run(loaded, &replayer));
        compare(&loaded.before.results, &after.results)
    });
}

/// The console with 10,000 requests loaded, and the messages of one re-dispatch after an edit.
struct Console {
    loaded: State,
    started: SourceMsg,
    results: Vec<SourceMsg>,
    finished: SourceMsg,
}

// A Mutex only because the state (its editor widgets) is not Sync.
static CONSOLE: OnceLock<std::sync::Mutex<Console>> = OnceLock::new();

/// One batch of source messages, as the event loop drains them between two key reads.
const BATCH: usize = 513;

/// Loads the console through the offline demo source with 10,000 requests, makes the edit in
/// the editor by keys, and records what the source sends for the re-dispatch.
fn console() -> Console {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let items: Vec<InputItem> = LOADED
        .get()
        .expect("loaded first")
        .requests
        .iter()
        .map(|r| InputItem::Request(Box::new(r.clone())))
        .collect();
    let mut source = demo::offline(hookscope::KubeVersion::default());
    source.input = ReplayInput::Items(items);
    let (tx, mut rx) = mpsc::channel(CHANNEL_CAPACITY);
    let (ctl, ctl_rx) = mpsc::channel(16);
    rt.spawn(Box::new(source).run(tx, ctl_rx));
    let mut state = State::new("1.35".into(), AuditLevel::Request, Theme::default());
    update(&mut state, Msg::Resize(200, 50));
    loop {
        let m = rt.block_on(rx.recv()).expect("the source runs");
        let done = matches!(m, SourceMsg::Finished { .. });
        update(&mut state, Msg::Source(m));
        if done {
            break;
        }
    }
    assert_eq!(state.entries.len(), REQUESTS);

    // The edit: on the slow webhook's configuration, failurePolicy Ignore becomes Fail.
    update(&mut state, Msg::Action(Action::Show(View::Webhooks)));
    state.hook_cursor.selected = state
        .hooks
        .iter()
        .position(|h| h.configuration == "30-slow-quota")
        .expect("the slow webhook");
    update(&mut state, Msg::Key(key(KeyCode::Char('e'))));
    let b = state.buffer;
    let start = state.buffers[b].line_of("30-slow-quota");
    let line = state.buffers[b]
        .area
        .lines()
        .iter()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.contains("failurePolicy: Ignore"))
        .map(|(i, _)| i)
        .expect("the slow webhook's failurePolicy");
    state.buffers[b].goto_line(line + 1);
    update(&mut state, Msg::Key(key(KeyCode::End)));
    for _ in 0.."Ignore".len() {
        update(&mut state, Msg::Key(key(KeyCode::Backspace)));
    }
    for c in "Fail".chars() {
        update(&mut state, Msg::Key(key(KeyCode::Char(c))));
    }
    let generation = state.buffers[b].generation;
    let commands = update(
        &mut state,
        Msg::CheckDue {
            buffer: b,
            generation,
        },
    );
    let (generation, configurations, policies) = commands
        .into_iter()
        .find_map(|c| match c {
            Command::Redispatch {
                generation,
                configurations,
                policies,
                ..
            } => Some((generation, configurations, policies)),
            _ => None,
        })
        .expect("a valid edit re-dispatches");
    update(&mut state, Msg::Action(Action::Show(View::Requests)));
    rt.block_on(ctl.send(SourceCtl::Redispatch {
        generation,
        configurations,
        policies,
        fresh: false,
    }))
    .expect("the source listens");
    let mut started = None;
    let mut results = Vec::with_capacity(REQUESTS);
    let finished = loop {
        match rt.block_on(rx.recv()).expect("the source runs") {
            m @ SourceMsg::RedispatchStarted { .. } => started = Some(m),
            m @ SourceMsg::Redispatched { .. } => results.push(m),
            m @ SourceMsg::RedispatchFinished { .. } => break m,
            _ => {}
        }
    };
    let started = started.expect("the run started");
    let mut check = state.clone();
    update(&mut check, Msg::Source(started.clone()));
    for m in &results {
        update(&mut check, Msg::Source(m.clone()));
    }
    update(&mut check, Msg::Source(finished.clone()));
    eprintln!(
        "console: {} results re-dispatched, {} verdicts flipped",
        results.len(),
        check.whatif.flipped().count()
    );
    assert!(
        check.whatif.flipped().count() > 0,
        "the edit flips verdicts"
    );
    Console {
        loaded: state,
        started,
        results,
        finished,
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The loaded console with the re-dispatch started and its first `results` results taken in.
fn during_run(results: usize) -> (State, Vec<SourceMsg>) {
    let console = CONSOLE
        .get()
        .expect("loaded in main")
        .lock()
        .expect("not poisoned");
    let mut state = console.loaded.clone();
    update(&mut state, Msg::Source(console.started.clone()));
    for m in &console.results[..results] {
        update(&mut state, Msg::Source(m.clone()));
    }
    let rest = console.results[results..]
        .iter()
        .chain(std::iter::once(&console.finished))
        .cloned()
        .collect();
    (state, rest)
}

/// `update` over one batch of re-dispatched results, half-way through the run.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn console_batch(bencher: Bencher) {
    let (state, rest) = during_run(REQUESTS / 2);
    let batch: Vec<SourceMsg> = rest.into_iter().take(BATCH).collect();
    bencher
        .with_inputs(|| (state.clone(), batch.clone()))
        .bench_local_values(|(mut state, batch)| {
            for m in batch {
                update(&mut state, Msg::Source(m));
            }
            state
        });
}

/// `update` on the end of the run: the results swapped in and compared.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn console_finish(bencher: Bencher) {
    let (state, rest) = during_run(REQUESTS);
    let finished = rest.into_iter().last().expect("the end of the run");
    bencher
        .with_inputs(|| (state.clone(), finished.clone()))
        .bench_local_values(|(mut state, finished)| {
            update(&mut state, Msg::Source(finished));
            state
        });
}

/// One frame of the Requests view, half-way through the run.
#[divan::bench(sample_count = 20)]
fn console_frame(bencher: Bencher) {
    let (state, _) = during_run(REQUESTS / 2);
    frame::bench_frame(bencher, &state);
}

/// A key during the run: the selection moves down.
#[divan::bench(sample_count = 20)]
fn console_key(bencher: Bencher) {
    let (state, _) = during_run(REQUESTS / 2);
    bencher
        .with_inputs(|| state.clone())
        .bench_local_values(|mut state| {
            update(&mut state, Msg::Key(key(KeyCode::Char('j'))));
            state
        });
}

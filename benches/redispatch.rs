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

use std::sync::{Arc, OnceLock};

use base64::Engine as _;
use divan::Bencher;
use hookscope::edit::{
    CancelToken, Redispatched, ReplyCache, ReusingReplier, check, compare, redispatch,
};
use hookscope::engine::EngineOptions;
use hookscope::replay::run::{IdMode, ReplaySettings, Replayer};
use hookscope::replay::{CapturedRequest, InputItem};
use hookscope::tui::demo::{self, DemoReplier};

// The allocator of the `hookscope` binary, so the figures are the console's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

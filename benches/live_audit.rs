//! Rate of the live audit path: ingestion (event decode, admission annotations, the replay
//! reader) over the oracle log's 928 events, the capture writer, and the follower end to end
//! (a log file read from its start, every line sent over a bounded channel and ingested).
//!
//! `cargo bench --bench live_audit`. Each counter is in events, so divan prints events per
//! second.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use divan::Bencher;
use divan::counter::ItemsCount;
use hookscope::live::audit::{
    AuditFeed, CaptureOptions, CaptureWriter, FollowOptions, Ingester, Origin, RawEvent, follow,
};
use hookscope::replay::IndexUnit;
use hookscope::replay::input::{ClusterState, Reader};

/// How many times the oracle log is repeated in the followed file.
const FOLLOW_REPEAT: usize = 10;

fn main() {
    divan::main();
}

fn oracle_text() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oracle-v1.32/audit.log"
    );
    std::fs::read_to_string(path).expect("the oracle audit log")
}

fn oracle_events() -> Vec<RawEvent> {
    oracle_text()
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| RawEvent {
            origin: Origin {
                source: "audit.log".into(),
                index: i + 1,
                unit: IndexUnit::Line,
            },
            text: Bytes::from(l.to_string()),
        })
        .collect()
}

/// Decode, annotations and the replay reader, event by event, with a fresh reader per pass.
#[divan::bench(sample_count = 20)]
fn ingest(bencher: Bencher) {
    let events = oracle_events();
    bencher.counter(ItemsCount::new(events.len())).bench(|| {
        let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
        let mut items = 0;
        for e in &events {
            items += ingester.ingest(e).items.len();
        }
        items + ingester.finish().len()
    });
}

/// Writing the events to a capture file (Secret redaction on, as by default).
#[divan::bench(sample_count = 20)]
fn capture(bencher: Bencher) {
    let events = oracle_events();
    let dir = std::env::temp_dir().join(format!("hookscope-bench-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let path = dir.join("capture.log");
    bencher.counter(ItemsCount::new(events.len())).bench(|| {
        let mut w = CaptureWriter::create(&path, CaptureOptions::default()).expect("create");
        for e in &events {
            w.write(e).expect("write");
        }
        w.finish().expect("finish")
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// The follower reading a file of the oracle log repeated, through a bounded channel of 1024,
/// each event ingested as it arrives.
#[divan::bench(sample_count = 10)]
fn follow_and_ingest(bencher: Bencher) {
    let dir = std::env::temp_dir().join(format!("hookscope-bench-follow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary folder");
    let path: PathBuf = dir.join("audit.log");
    let text = oracle_text();
    let total = text.lines().filter(|l| !l.trim().is_empty()).count() * FOLLOW_REPEAT;
    std::fs::write(&path, text.repeat(FOLLOW_REPEAT)).expect("write the log");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    bencher.counter(ItemsCount::new(total)).bench(|| {
        runtime.block_on(async {
            let (tx, mut rx) = tokio::sync::mpsc::channel(1024);
            let options = FollowOptions {
                from_start: true,
                poll_interval: Duration::from_millis(1),
                ..FollowOptions::default()
            };
            let task = tokio::spawn(follow(path.clone(), options, tx));
            let mut ingester = Ingester::new(Reader::new(ClusterState::default()));
            let mut seen = 0;
            while seen < total {
                match rx.recv().await {
                    Some(AuditFeed::Event(e)) => {
                        ingester.ingest(&e);
                        seen += 1;
                    }
                    Some(AuditFeed::Notice(_)) => {}
                    None => break,
                }
            }
            task.abort();
            seen
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
}

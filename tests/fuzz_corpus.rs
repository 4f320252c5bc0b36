//! Every file of the fuzz targets' seed corpora (tests/fuzz/corpus/TARGET), and the crashes
//! fuzzing found (kept beside them once fixed), run through the targets' bodies in the ordinary
//! test suite: none may panic. The fuzzing itself: tests/fuzz/README.md.

#[path = "fuzz/src/lib.rs"]
mod targets;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fuzz/corpus");

fn run(target: &str, body: fn(&[u8])) {
    let dir = std::path::Path::new(CORPUS).join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{target}: empty corpus");
    for file in files {
        let data = std::fs::read(&file).expect("corpus file");
        body(&data);
    }
}

#[test]
fn input() {
    run("input", targets::input);
}

#[test]
fn configurations() {
    run("configurations", targets::configurations);
}

#[test]
fn json_patch() {
    run("json_patch", targets::json_patch);
}

#[test]
fn strategic_merge() {
    run("strategic_merge", targets::strategic_merge);
}

#[test]
fn apply() {
    run("apply", targets::apply);
}

#[test]
fn metrics_text() {
    run("metrics_text", targets::metrics_text);
}

#[test]
fn small_files() {
    run("small_files", targets::small_files);
}

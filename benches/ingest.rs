//! Ingest benchmarks for `hookscope replay` inputs (being written).

fn main() {
    divan::main();
}

//! Drawing the console for benches: one frame at 200×50 on ratatui's `TestBackend`.

use divan::Bencher;
use hookscope::tui::app::State;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Times one frame of `state` as the event loop draws it.
pub fn bench_frame(bencher: Bencher, state: &State) {
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).expect("a test terminal");
    bencher.bench_local(|| {
        terminal
            .draw(|f| hookscope::tui::view::render(f, state))
            .expect("drawn");
    });
}

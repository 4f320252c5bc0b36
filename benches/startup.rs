//! Start-up of the console: `cargo bench --bench startup`.
//!
//! Each sample runs the real `hookscope` binary (built with the bench profile) on a fresh
//! pseudo-terminal, 200×50, until it has drawn its first frame, and waits for it to exit:
//!
//! * `first_frame/demo` — `hookscope tui --demo`, what `hookscope` alone opens: the CA minted,
//!   the demo webhooks served over HTTPS on 127.0.0.1, the terminal set up, the first frame drawn;
//! * `first_frame/demo_offline` — `hookscope tui --demo-offline` (no certificates, no sockets);
//! * `pty_floor` — the same pseudo-terminal running `true`, the cost of the harness itself, to
//!   subtract from the two above.
//!
//! The binary's hidden `--exit-after-first-frame` flag ends it right after the first frame, so a
//! sample is start-up, one frame, and the terminal restored. The pseudo-terminal is util-linux
//! `script`; without it the bench says so and measures nothing. Settings and recovery folders
//! point at an empty scratch folder, so the user's own files play no part.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn main() {
    if !has_script() {
        eprintln!("startup bench skipped: `script` (util-linux) is needed for a pseudo-terminal");
        return;
    }
    divan::main();
    let _ = std::fs::remove_dir_all(scratch());
}

fn has_script() -> bool {
    Command::new("script")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An empty folder for `XDG_CONFIG_HOME` and `XDG_STATE_HOME`.
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("hookscope-startup-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch folder");
        d
    })
}

/// Runs `command` in a 200×50 pseudo-terminal and waits for it.
fn in_pty(command: &str) {
    let dir = scratch();
    let status = Command::new("script")
        .args([
            "-qefc",
            &format!("stty cols 200 rows 50; {command}"),
            "/dev/null",
        ])
        .env("TERM", "xterm-256color")
        .env("XDG_CONFIG_HOME", dir)
        .env("XDG_STATE_HOME", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("script runs");
    assert!(status.success(), "{command}: {status}");
}

fn console(mode: &str) {
    let bin = env!("CARGO_BIN_EXE_hookscope");
    in_pty(&format!("exec {bin} tui {mode} --exit-after-first-frame"));
}

mod first_frame {
    #[divan::bench(sample_count = 30, sample_size = 1)]
    fn demo() {
        super::console("--demo");
    }

    #[divan::bench(sample_count = 30, sample_size = 1)]
    fn demo_offline() {
        super::console("--demo-offline");
    }
}

#[divan::bench(sample_count = 30, sample_size = 1)]
fn pty_floor() {
    in_pty("exec true");
}

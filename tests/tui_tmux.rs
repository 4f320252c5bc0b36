//! End to end: the real binary in tmux, driven by keys, checked by what the screen shows. The
//! demo opens (webhooks over HTTPS on 127.0.0.1), a request is stepped to round 1, `?` lists the
//! keys, the metrics view shows a rejection, and `q` quits and restores the terminal.
//! Skipped, with a message, when tmux is not installed.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "console"]).stdout)
            .into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }

    /// Waits until the screen shows every one of `texts`.
    fn wait_for(&self, texts: &[&str], what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if texts.iter().all(|t| s.contains(t)) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the screen never showed {texts:?}; it shows:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Our own server on our own socket only.
        let _ = self.cmd(&["kill-server"]);
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn demo_in_tmux() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let t = Tmux {
        socket: format!("hookscope-test-{}", std::process::id()),
    };
    // After the console ends the shell prints its exit status and whether the terminal is back
    // in canonical mode, then waits so the pane can be read.
    // No settings file (a directory that does not exist): the keys are the defaults.
    let config_home =
        std::env::temp_dir().join(format!("hookscope-test-none-{}", std::process::id()));
    let config_home = config_home.display();
    let script = format!(
        "XDG_CONFIG_HOME='{config_home}' '{bin}'; echo \"exit=$?\"; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon; sleep 30"
    );
    let out = t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "console",
        "-x",
        "120",
        "-y",
        "40",
        "sh",
        "-c",
        &script,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");

    // The demo opens and replays every request over HTTPS.
    let s = t.wait_for(&["1 Requests", "shop/web-1", "34 done"], "demo opens");
    assert!(s.contains("demo (https 127.0.0.1)"), "{s}");
    assert!(s.contains("denied 403"), "{s}");

    // The first request through the chain, stepped to round 1.
    t.keys(&["Enter"]);
    t.wait_for(&["#1 CREATE pods shop/web-1", "Steps 1/"], "chain opens");
    t.keys(&["j"]);
    t.wait_for(&["Steps 2/"], "next step");
    t.keys(&["]"]);
    let s = t.wait_for(
        &["Step: inject.sidecar.demo · mutating · round 1"],
        "jump to round 1",
    );
    assert!(
        s.contains("reinvoked: an earlier webhook changed the object"),
        "{s}"
    );

    // Help lists the keys of the live keymap.
    t.keys(&["?"]);
    let s = t.wait_for(&["Help", "Chain keys"], "help overlay");
    for k in ["next round", "step that decided the verdict", "quit"] {
        assert!(s.contains(k), "help lacks {k:?}:\n{s}");
    }
    t.keys(&["Escape"]);

    // The metrics view shows the policy webhook's rejections.
    t.keys(&["4"]);
    t.wait_for(
        &[
            "apiserver_admission_webhook_rejection_count",
            "policy.validator.demo no_error",
        ],
        "metrics view",
    );

    // q quits, the exit status is 0 and the terminal is back in canonical mode, off the
    // alternate screen.
    t.keys(&["q"]);
    // Wait for the stty line too ("icanon" or "-icanon"), printed just after the exit status.
    let s = t.wait_for(&["exit=0", "icanon"], "quit");
    let lines: Vec<&str> = s.lines().map(str::trim).collect();
    assert!(lines.contains(&"icanon"), "terminal left in raw mode:\n{s}");
    assert!(!s.contains("1 Requests"), "console still on screen:\n{s}");
    let alt = t.cmd(&["display-message", "-p", "-t", "console", "#{alternate_on}"]);
    assert_eq!(String::from_utf8_lossy(&alt.stdout).trim(), "0");
}

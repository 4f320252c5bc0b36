//! End to end: the real binary in tmux, driven by keys, checked by what the screen shows. The
//! demo opens (webhooks over HTTPS on 127.0.0.1), a request is stepped to round 1, `?` lists the
//! keys, the metrics view shows a rejection, an edit of a configuration flips verdicts in the
//! What-if view, and `:q!` quits and restores the terminal. A second run is killed with SIGKILL
//! in the middle of an edit, and the next one recovers the text. Skipped, with a message, when
//! tmux is not installed. And in a pseudo-terminal (util-linux `script`), the first frame shows
//! that a `--theme` given on the command line wins over the settings file's.

#[path = "common/scratch.rs"]
mod scratch;

use scratch::Scratch;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long a test waits for the screen before it fails showing what it awaited and what the
/// screen shows: long enough never to fire on a working run, however loaded the machine.
const WAIT: Duration = Duration::from_secs(120);

/// What the shell of a session runs after the console ends: it waits, so that the pane can be
/// read, for longer than any wait of a test (the test's tmux server is killed when it ends).
const LINGER: &str = "sleep 600";

/// One tmux server of a test's own (its socket), and the session keys go to.
struct Tmux {
    socket: String,
    target: &'static str,
    /// Only the owner kills the server when dropped.
    owner: bool,
}

impl Tmux {
    /// A server of its own for this test, named after `name` and the process.
    fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("hookscope-{name}-{}", std::process::id()),
            target: "console",
            owner: true,
        }
    }

    /// Starts session `target` at 120x40 running `script` with `sh -c`, and addresses it.
    fn session(&self, target: &'static str, script: &str) -> Tmux {
        self.session_sized(target, script, (120, 40))
    }

    /// Starts session `target` at `size` (columns, rows) running `script` with `sh -c`.
    fn session_sized(&self, target: &'static str, script: &str, size: (u16, u16)) -> Tmux {
        let (w, h) = (size.0.to_string(), size.1.to_string());
        let out = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            target,
            "-x",
            &w,
            "-y",
            &h,
            "sh",
            "-c",
            script,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        Tmux {
            socket: self.socket.clone(),
            target,
            owner: false,
        }
    }

    fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", self.target]).stdout)
            .into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", self.target];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }

    /// Waits until the screen shows every one of `texts`.
    fn wait_for(&self, texts: &[&str], what: &str) -> String {
        let deadline = Instant::now() + WAIT;
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

impl Tmux {
    /// Waits until the screen no longer shows `text`.
    fn wait_gone(&self, text: &str, what: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let s = self.screen();
            if !s.contains(text) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: the screen still shows {text:?}:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Our own server on our own socket only.
        if self.owner {
            let _ = self.cmd(&["kill-server"]);
        }
    }
}

/// A folder of this test's own, emptied first and removed when the test ends. Emptied first
/// matters: a session left with `:q!` or killed keeps its recovery copies by design, and process
/// ids recur across runs on one machine. Declared before the test's tmux server, it is removed
/// after the server and its consoles are killed.
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("hookscope-{name}-{}", std::process::id()))
}

/// The shell script that runs the demo console with settings and recovery copies in
/// `config_home` (an empty folder: the default keys, nothing of an earlier run offered), then
/// runs `after`.
fn demo_script(config_home: &Scratch, after: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let home = config_home.display();
    format!("XDG_CONFIG_HOME='{home}' XDG_STATE_HOME='{home}' '{bin}'; {after}")
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
    let config_home = scratch("test-none");
    let server = Tmux::new("test");
    // After the console ends the shell prints its exit status and whether the terminal is back
    // in canonical mode, then waits so the pane can be read.
    let script = demo_script(
        &config_home,
        "echo \"exit=$?\"; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon; sleep 600",
    );
    let t = server.session("console", &script);

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
    // The round opens with the MutatingAdmissionPolicy; the injector is the next step.
    t.wait_for(
        &["demo-owner-label · mutating · round 1"],
        "jump to round 1",
    );
    t.keys(&["j"]);
    let s = t.wait_for(
        &["inject.sidecar.demo · mutating · round 1"],
        "jump to round 1",
    );
    assert!(
        s.contains("reinvoked: it was called in round 0 with reinvocationPolicy"),
        "{s}"
    );

    // Help lists the keys of the live keymap.
    t.keys(&["?"]);
    // The whole overlay: a capture can land while the frame is being written.
    t.wait_for(
        &[
            "Help",
            "Chain keys",
            "next round",
            "step that decided the verdict",
            "quit",
        ],
        "help overlay",
    );
    // Escape and the next key sent together read as alt-key: wait for the escape to land.
    t.keys(&["Escape"]);
    t.wait_for(&["CHAIN "], "help closed");
    t.wait_gone("Chain keys", "help closed");

    // The metrics view shows the policy webhook's rejections.
    t.keys(&["4"]);
    t.wait_for(
        &[
            "apiserver_admission_webhook_rejection_count",
            "policy.validator.demo no_error",
        ],
        "metrics view",
    );

    // Edit the slow webhook's configuration: failurePolicy Ignore becomes Fail, so its timeouts
    // deny instead of failing open.
    t.keys(&["5"]);
    t.wait_for(&["30-slow-quota"], "webhooks view");
    // The demo's mutating policy binding is listed first, its validating one before the
    // validating webhooks.
    for _ in 0..4 {
        t.keys(&["j"]);
    }
    t.keys(&["e"]);
    t.wait_for(
        &["demo-webhooks.yaml (built in)", "name: 30-slow-quota"],
        "editor",
    );
    // As a vim user: the view opens in normal mode; down to the line, `$b` onto the word,
    // `C` changes it to the end of the line, esc back to normal mode.
    t.wait_for(&["EDIT  NORMAL"], "the editor opens in normal mode");
    for _ in 0..11 {
        t.keys(&["j"]);
    }
    t.keys(&["$", "b", "C"]);
    // Emptied, the value is in force already: failurePolicy defaults to Fail, as the
    // apiserver's defaulting does. That re-dispatch is awaited before the word is typed, since
    // a key that lands after its message clears the message.
    t.wait_for(
        &["EDIT  INSERT", "re-dispatched 34 requests", "3 changed"],
        "insert mode, and the re-dispatch of the emptied value",
    );
    t.keys(&["-l", "Fail"]);
    t.wait_for(&["failurePolicy: Fail "], "the word typed");
    t.keys(&["Escape"]);
    t.wait_for(&["EDIT  NORMAL"], "normal mode");
    t.keys(&["Escape"]);
    t.wait_for(&["WEBHOOKS "], "editor left");
    t.keys(&["7"]);
    let s = t.wait_for(
        &["3 of 34 requests changed", "3 verdicts flipped"],
        "what-if",
    );
    assert!(
        s.contains("allowed (open)") && s.contains("denied 500"),
        "{s}"
    );

    // q does not quit with an unsaved edit; :q! does. The exit status is 0 and the terminal is
    // back in canonical mode, off the alternate screen.
    t.keys(&["q"]);
    t.wait_for(&["unsaved edits in demo-webhooks.yaml"], "quit refused");
    t.keys(&[":"]);
    t.keys(&["-l", "q!"]);
    t.keys(&["Enter"]);
    // Wait for the stty line too ("icanon" or "-icanon"), printed just after the exit status.
    let s = t.wait_for(&["exit=0", "icanon"], "quit");
    let lines: Vec<&str> = s.lines().map(str::trim).collect();
    assert!(lines.contains(&"icanon"), "terminal left in raw mode:\n{s}");
    assert!(!s.contains("1 Requests"), "console still on screen:\n{s}");
    let alt = t.cmd(&["display-message", "-p", "-t", "console", "#{alternate_on}"]);
    assert_eq!(String::from_utf8_lossy(&alt.stdout).trim(), "0");
}

/// The console as a person sees it on a small terminal (80×24) and, resized, on a wide one
/// (250×60): no number, mark or word cut, the help overlay scrolled to its end, names shown whole
/// where there is room.
#[test]
fn the_console_at_80_by_24_and_250_by_60() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let config_home = scratch("sizes");
    let server = Tmux::new("sizes");
    let script = demo_script(&config_home, LINGER);
    let t = server.session_sized("console", &script, (80, 24));
    let s = t.wait_for(
        &["Requests", "shop/web-1", "34 done"],
        "demo opens at 80x24",
    );
    let lines: Vec<&str> = s.lines().collect();
    // Every duration whole (a number with its one decimal and its unit), the dry-run mark kept.
    let rows: Vec<&&str> = lines.iter().filter(|l| l.contains(" CREATE ")).collect();
    assert!(rows.len() > 10, "{s}");
    for row in rows {
        let cells: Vec<&str> = row
            .trim_end()
            .trim_end_matches('│')
            .split_whitespace()
            .collect();
        let [.., n, unit] = cells.as_slice() else {
            panic!("{row:?}")
        };
        assert_eq!(*unit, "ms", "{row:?}");
        assert!(n.parse::<f64>().is_ok() && n.contains('.'), "{row:?}");
    }
    assert!(s.contains("CREATE dry"), "{s}");
    // The status bar and the tabs drop whole parts rather than cut a word.
    let status = lines.iter().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(status.trim_end().ends_with("? help"), "{status:?}");
    assert!(status.contains("✓ 22 ✗ 9 ! 3"), "{status:?}");
    assert!(!lines[0].trim_end().ends_with(" E"), "{:?}", lines[0]);

    // Webhooks: every count shown.
    t.keys(&["5"]);
    let s = t.wait_for(&["WEBHOOKS ", "MATCH"], "webhooks at 80x24");
    let row = s
        .lines()
        .find(|l| l.contains("labels.defa"))
        .unwrap_or_default();
    assert!(row.contains(" 23 "), "{s}");
    let row = s
        .lines()
        .find(|l| l.contains("quota.slow"))
        .unwrap_or_default();
    assert!(
        row.trim_end()
            .trim_end_matches('│')
            .trim_end()
            .ends_with('3'),
        "{s}"
    );

    // The help overlay scrolls to its last command and says where it is.
    t.keys(&["?"]);
    t.wait_for(&["Help", "1–20/"], "help at 80x24");
    t.keys(&["G"]);
    t.wait_for(&["as apply, taking over"], "help scrolled to its end");
    t.keys(&["Escape"]);
    t.wait_gone("Help", "help closed");

    // Wide: every tab and part of the status bar, names whole.
    t.cmd(&["resize-window", "-t", "console", "-x", "250", "-y", "60"]);
    // The wide redraw first (the full column titles), then the next key.
    t.wait_for(&["FAIL-OPEN", "MATCHED"], "webhooks redrawn at 250x60");
    t.keys(&["1"]);
    let s = t.wait_for(
        &["7 What-if", "payments/db-credentials", "│ k8s 1."],
        "requests at 250x60",
    );
    assert!(s.contains("NAMESPACE/NAME"), "{s}");
    assert!(!s.contains('…'), "nothing cut at 250 columns:\n{s}");
    t.keys(&["5"]);
    let s = t.wait_for(
        &["50-deprecation-warner ─ warn.deprecations.demo"],
        "webhooks wide",
    );
    assert!(s.contains("FAIL-OPEN"), "{s}");
}

#[test]
fn an_edit_survives_sigkill() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let dir = scratch("kill");
    let server = Tmux::new("kill");
    let pid_file = dir.join("pid");
    let env = format!(
        "XDG_CONFIG_HOME='{d}/config' XDG_STATE_HOME='{d}/state'",
        d = dir.display()
    );
    // The inner shell writes its pid and becomes the console, so that pid is the console's; the
    // outer one keeps the session (and the tmux server) alive after the kill.
    let first = format!(
        "sh -c \"echo \\$\\$ > '{}'; {env} exec '{bin}' tui --demo-offline\"; {LINGER}",
        pid_file.display()
    );
    let t = server.session("console", &first);
    t.wait_for(&["34 done"], "demo opens");
    t.keys(&[":"]);
    t.keys(&["-l", "edit 40-policy"]);
    t.keys(&["Enter"]);
    t.wait_for(&["name: 40-policy", "EDIT  NORMAL"], "editor");
    t.keys(&["O"]);
    t.wait_for(&["EDIT  INSERT"], "insert mode");
    t.keys(&["-l", "# a line typed before the crash"]);
    // The check after the typing pause writes the recovery copy: a temporary file renamed into
    // place, so only a finished copy holding the typed line counts.
    let recovery = dir.join("state/hookscope/recovery");
    let written = || {
        std::fs::read_dir(&recovery).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                !name.starts_with('.')
                    && name.ends_with(".json")
                    && std::fs::read_to_string(e.path())
                        .is_ok_and(|text| text.contains("# a line typed before the crash"))
            })
        })
    };
    let deadline = Instant::now() + WAIT;
    while !written() {
        assert!(
            Instant::now() < deadline,
            "no recovery copy holding the typed line in {} within {WAIT:?}",
            recovery.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let killed = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());

    // The next session offers the text back.
    let second = format!("{env} '{bin}' tui --demo-offline; {LINGER}");
    let again = server.session("again", &second);
    again.wait_for(&[":recover"], "recovery offered");
    again.keys(&[":"]);
    again.keys(&["-l", "recover"]);
    again.keys(&["Enter"]);
    again.wait_for(&["# a line typed before the crash"], "text recovered");
}

/// The shell script that runs the offline demo with settings and recovery copies in `dir` and,
/// as `$KUBE_EDITOR`, a shell script of `dir` running `body` on the file it is given (`$1`).
fn with_editor(dir: &Scratch, body: &str) -> String {
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let editor = dir.join("editor.sh");
    std::fs::write(&editor, format!("#!/bin/sh\n{body}\n")).unwrap();
    let made = Command::new("chmod")
        .arg("+x")
        .arg(&editor)
        .status()
        .unwrap();
    assert!(made.success());
    format!(
        "XDG_CONFIG_HOME='{d}' XDG_STATE_HOME='{d}' KUBE_EDITOR='{e}' '{bin}' tui --demo-offline; {LINGER}",
        d = dir.display(),
        e = editor.display()
    )
}

#[test]
fn edit_bang_runs_the_users_editor_and_takes_its_text() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let dir = scratch("editor");
    let server = Tmux::new("editor");
    // An "editor" that changes the slow webhook's failurePolicy in place, as a person would.
    let script = with_editor(
        &dir,
        "sed -i 's/failurePolicy: Ignore/failurePolicy: Fail/' \"$1\"",
    );
    let t = server.session("console", &script);
    t.wait_for(&["34 done"], "demo opens");
    t.keys(&[":"]);
    t.keys(&["-l", "edit! 30-slow-quota"]);
    t.keys(&["Enter"]);
    // The console comes back with the editor's text, which takes effect.
    t.wait_for(
        &["re-dispatched 34 requests", "verdicts flipped"],
        "edit! taken",
    );
}

/// The bytes the binary writes to a 120x40 pseudo-terminal (util-linux `script`) until its first
/// frame, with the settings folder `config_home`; None when `script` is missing.
fn first_frame(config_home: &std::path::Path, args: &str) -> Option<Vec<u8>> {
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let command = format!(
        "stty cols 120 rows 40; exec {bin} tui --demo-offline {args} --exit-after-first-frame"
    );
    let out = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("XDG_CONFIG_HOME", config_home)
        .env("XDG_STATE_HOME", config_home)
        .output()
        .ok()?;
    assert!(out.status.success(), "{command}: {out:?}");
    Some(out.stdout)
}

/// The escape sequences the header's title is drawn with: what precedes " hookscope ".
fn title_style(frame: &[u8]) -> Vec<u8> {
    let at = frame
        .windows(11)
        .position(|w| w == b" hookscope ")
        .expect("the header is drawn");
    let start = frame[..at]
        .iter()
        .rposition(|&b| b == b'H')
        .map_or(0, |i| i + 1);
    frame[start..at].to_vec()
}

#[test]
fn a_theme_given_on_the_command_line_wins_over_the_settings_file() {
    let home = Scratch::new(&format!("hookscope-theme-{}", std::process::id()));
    std::fs::create_dir_all(home.join("hookscope")).unwrap();
    std::fs::write(home.join("hookscope/config.toml"), "theme = \"light\"\n").unwrap();
    let empty = home.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let runs = (|| {
        Some((
            first_frame(&empty, "")?,
            first_frame(&home, "")?,
            first_frame(&home, "--theme default")?,
            first_frame(&empty, "--theme light")?,
        ))
    })();
    let Some((plain, from_file, explicit_default, explicit_light)) = runs else {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return;
    };
    let (plain, from_file) = (title_style(&plain), title_style(&from_file));
    assert_ne!(plain, from_file, "the settings file's light theme is used");
    assert_eq!(
        title_style(&explicit_default),
        plain,
        "--theme default wins"
    );
    assert_eq!(title_style(&explicit_light), from_file);
}

/// The Edit view driven as a vim user drives it, at 80×24: it opens in normal mode (the status
/// line says so); `o` types a line, `esc` goes back; `:edit!` in the middle of typing opens the
/// user's editor and comes back in normal mode, so the `:w PATH` typed next saves the editor's
/// text instead of becoming text; `u` takes the whole external edit back in one step, then the
/// typed words one at a time; an editor that empties the text leaves a deletion, shown as such,
/// never "valid, in force", that `:w` refuses until `:delete` confirms it.
#[test]
fn the_editor_is_modal_as_vim_and_edit_bang_returns_to_normal_mode() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let dir = scratch("vim");
    let server = Tmux::new("vim");
    // An "editor" that sets the slow webhook's timeout to 2, or, once the file `empty` exists,
    // empties the text.
    let flag = dir.join("empty");
    let script = with_editor(
        &dir,
        &format!(
            "if [ -e '{}' ]; then : > \"$1\"; else sed -i 's/timeoutSeconds: 1$/timeoutSeconds: 2/' \"$1\"; fi",
            flag.display()
        ),
    );
    let t = server.session_sized("console", &script, (80, 24));
    t.wait_for(&["34 done"], "demo opens");
    t.keys(&[":"]);
    t.keys(&["-l", "edit 30-slow-quota"]);
    t.keys(&["Enter"]);
    t.wait_for(&["name: 30-slow-quota", "EDIT  NORMAL"], "normal mode");
    // `:` in normal mode is the command line, `esc` leaves it.
    t.keys(&[":"]);
    t.wait_gone("EDIT  NORMAL", "command line");
    t.keys(&["Escape"]);
    t.wait_for(&["EDIT  NORMAL"], "back from the command line");
    t.keys(&["o"]);
    t.wait_for(&["EDIT  INSERT"], "o inserts");
    t.keys(&["-l", "# one two"]);
    t.wait_for(&["# one two"], "typed");
    // Still typing: `:edit!` cannot be typed here, ctrl-e opens the editor.
    t.keys(&["C-e"]);
    t.wait_for(&["re-dispatched 34", "EDIT  NORMAL"], "edit! returns");
    let saved = dir.join("saved.yaml");
    t.keys(&[":"]);
    t.keys(&["-l", &format!("w {}", saved.display())]);
    t.keys(&["Enter"]);
    t.wait_for(&["saved "], ":w saved");
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(text.contains("timeoutSeconds: 2\n"), "{text}");
    assert!(text.contains("# one two\n"), "{text}");
    assert!(!text.contains(":w"), "a command became text:\n{text}");

    // One `u`: the text before the external edit (typed words kept); two more: the words.
    // The configuration in force changes back, and its re-dispatch is awaited: its message
    // would otherwise replace those of the commands typed next when it comes late.
    t.keys(&["u"]);
    t.wait_for(&["re-dispatched 34"], "the undone edit re-dispatched");
    let undone = dir.join("undone.yaml");
    t.keys(&[":"]);
    t.keys(&["-l", &format!("w {}", undone.display())]);
    t.keys(&["Enter"]);
    t.wait_for(&["saved "], ":w saved the undone text");
    let text = std::fs::read_to_string(&undone).unwrap();
    assert!(text.contains("timeoutSeconds: 1\n"), "{text}");
    assert!(text.contains("# one two\n"), "{text}");
    t.keys(&["u"]);
    t.wait_gone("# one two", "the last word undone");
    t.wait_for(&["# one"], "the first word kept");

    // An editor that empties the text: a deletion, not a valid configuration.
    std::fs::write(&flag, "").unwrap();
    t.keys(&["C-e"]);
    let s = t.wait_for(
        &[
            "empty: a deletion",
            "would delete 10-sidecar-injector",
            "EDIT  NORMAL",
        ],
        "emptied",
    );
    assert!(!s.contains("valid, in force"), "{s}");
    t.keys(&[":"]);
    t.keys(&["-l", "w"]);
    t.keys(&["Enter"]);
    t.wait_for(&["the text is empty: :delete confirms"], ":w refused");
    // `u` brings the text back in one step.
    t.keys(&["u"]);
    t.wait_for(&["valid, in force", "failurePolicy"], "undone");
    t.wait_gone("empty: a deletion", "undone");
}

/// `enter` on a Problems row of the replay input (an invalid line) opens that file read-only at
/// the line, marked, with the line in full and the reason under it; `esc` comes back to the
/// list. At 80×24, as a person would reach it: `:problems`, `j`, `enter`.
#[test]
fn enter_on_an_input_problem_opens_the_file_at_its_line() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let dir = scratch("input-problem");
    let server = Tmux::new("input-problem");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let reviews =
        std::fs::read_to_string(format!("{fixtures}/replay/input/reviews.jsonl")).unwrap();
    let mut lines: Vec<&str> = reviews.lines().collect();
    lines.insert(2, "{\"kind\": \"AdmissionReview\", oops");
    let input = dir.join("in.jsonl");
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let script = format!(
        "XDG_CONFIG_HOME='{d}' XDG_STATE_HOME='{d}' '{bin}' tui --input '{i}' --webhooks '{fixtures}/config/validating.yaml' --script /dev/null; {LINGER}",
        d = dir.display(),
        i = input.display(),
    );
    let t = server.session_sized("console", &script, (80, 24));
    t.wait_for(&["problems: :problems"], "replayed");
    t.keys(&[":"]);
    t.keys(&["-l", "problems"]);
    t.keys(&["Enter"]);
    let s = t.wait_for(&["key must be a string"], "problems listed");
    // The file by its name, so that its line shows at 80 columns.
    assert!(s.contains("in.jsonl line 3"), "{s}");
    // Down to the invalid line's row.
    let rows: Vec<&str> = s.lines().filter(|l| l.contains("invalid ")).collect();
    let at = rows
        .iter()
        .position(|l| l.contains("key must be a string"))
        .unwrap();
    for _ in 0..at {
        t.keys(&["j"]);
    }
    t.keys(&["Enter"]);
    let s = t.wait_for(
        &[
            "in.jsonl · line 3 · read-only",
            "▶3 {\"kind\": \"AdmissionReview\", oops",
        ],
        "the file at its line",
    );
    assert!(
        s.contains("invalid JSON: key must be a string at line 3"),
        "{s}"
    );
    assert!(
        s.contains(" 2 {\"kind\":\"AdmissionReview\""),
        "the lines around it:\n{s}"
    );
    t.keys(&["Escape"]);
    t.wait_for(&["Problems 3"], "back to the list");
    t.wait_gone("read-only", "the file closed");
}

/// A file of admission policies alone is editable as a person sees it: `e` on the policy's row
/// of the Webhooks view opens it, an edit of the validation's expression is checked and takes
/// effect, and the What-if view shows the verdicts it flipped.
#[test]
fn editing_a_policy_file_flips_verdicts_in_the_what_if_view() {
    if !tmux_available() {
        println!("skipped: tmux is not installed");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_hookscope");
    let dir = scratch("policy-edit");
    let server = Tmux::new("policy-edit");
    // The binding first, so that the validation is the file's last line.
    let policies = dir.join("policies.yaml");
    std::fs::write(
        &policies,
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: few-keys
spec:
  policyName: few-keys
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: few-keys
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE], apiGroups: [\"\"], apiVersions: [v1], resources: [configmaps]}
  validations:
  - expression: \"!has(object.data) || size(object.data) <= 1\"
",
    )
    .unwrap();
    // Three ConfigMaps with 0, 2 and 3 keys: the last two are denied.
    let review = |name: &str, keys: usize| {
        let data: serde_json::Map<String, serde_json::Value> = (0..keys)
            .map(|i| (format!("k{i}"), serde_json::Value::from("v")))
            .collect();
        serde_json::json!({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
            "request": {"uid": name, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": name, "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "bob"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "shop"}, "data": data},
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}})
        .to_string()
    };
    let input = dir.join("in.jsonl");
    std::fs::write(
        &input,
        [review("none", 0), review("two", 2), review("three", 3)].join("\n") + "\n",
    )
    .unwrap();
    let script = format!(
        "XDG_CONFIG_HOME='{d}' XDG_STATE_HOME='{d}' '{bin}' tui --input '{i}' --webhooks '{p}' --script /dev/null; {LINGER}",
        d = dir.display(),
        i = input.display(),
        p = policies.display(),
    );
    let t = server.session("console", &script);
    t.wait_for(&["3 replayed", "✗ 2"], "replayed");
    t.keys(&["5"]);
    t.wait_for(&["few-keys ─ few-keys"], "the policy's row");
    t.keys(&["e"]);
    t.wait_for(
        &["policies.yaml ·", "kind: ValidatingAdmissionPolicy"],
        "the file opened",
    );
    // At the end of the validation's line, `1` becomes `3`.
    t.keys(&["G"]);
    t.keys(&["$"]);
    t.keys(&["h"]);
    t.keys(&["x"]);
    t.keys(&["i"]);
    t.keys(&["-l", "3"]);
    t.wait_for(&["size(object.data) <= 3\""], "the edit typed");
    // Awaited before the next key, which clears the message.
    t.wait_for(&["re-dispatched 3 requests"], "the edit took effect");
    t.keys(&["Escape"]);
    t.wait_for(&["EDIT  NORMAL"], "normal mode");
    // In the editor's normal mode a digit is a count (shown as vim shows it): `esc` cancels it,
    // the next `esc` leaves the editor, then `7` is the What-if view. Each key is awaited on the
    // screen before the next, as a person types them: a terminal sends `esc` and a key typed
    // right after it as one alt-key.
    t.keys(&["7"]);
    t.wait_for(&["NORMAL 7"], "the count shown");
    t.keys(&["Escape"]);
    t.wait_gone("NORMAL 7", "the count cancelled");
    t.wait_for(
        &["EDIT  NORMAL"],
        "still in the editor once the count is cancelled",
    );
    t.keys(&["Escape"]);
    t.wait_for(&[" WEBHOOKS "], "the editor left");
    t.keys(&["7"]);
    let s = t.wait_for(
        &["2 of 3 requests changed", "shop/three"],
        "the what-if view",
    );
    assert!(s.contains("shop/two"), "{s}");
    assert!(s.contains("shop/three"), "{s}");
    assert!(s.contains("your edit of few-keys"), "{s}");
    t.keys(&[":"]);
    t.keys(&["-l", "q!"]);
    t.keys(&["Enter"]);
}

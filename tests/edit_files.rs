//! Nothing is lost: atomic saves with a backup, recovery entries that survive a SIGKILL, and a
//! watcher that notices outside changes (also rename-over saves) but not our own saves.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use hookscope::edit::{
    BufferKey, ConfigWatcher, ContentHash, FileChange, FileContent, RecoveryStore, backup_path,
    save_atomic,
};
use tokio::sync::mpsc;

/// A fresh directory for one test, in the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "hookscope-edit-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn save_replaces_atomically_and_keeps_a_backup() {
    let dir = scratch("save");
    let file = dir.join("hooks.yaml");
    std::fs::write(&file, "old: content\n").expect("seed");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let saved = save_atomic(&file, "new: content\n").expect("saved");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "new: content\n");
    let backup = saved.backup.clone().expect("a backup");
    assert_eq!(backup, backup_path(&file));
    assert_eq!(backup, dir.join("hooks.yaml.bak"));
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "old: content\n");
    assert_eq!(saved.bytes, 13);
    assert_eq!(saved.hash, ContentHash::of(b"new: content\n"));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "permissions kept");
    // No temporary file is left behind.
    assert_eq!(names_in(&dir), ["hooks.yaml", "hooks.yaml.bak"]);
    // A second save keeps the content it replaces.
    save_atomic(&file, "newer\n").expect("saved");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "new: content\n");
    // A new file has no backup.
    let fresh = save_atomic(&dir.join("fresh.yaml"), "x: 1\n").expect("saved");
    assert_eq!(fresh.backup, None);
    // Errors name the path.
    let missing = dir.join("no-such-dir").join("f.yaml");
    let err = save_atomic(&missing, "x").expect_err("no directory");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_through_a_symbolic_link_replaces_the_target() {
    let dir = scratch("link");
    let target = dir.join("real.yaml");
    std::fs::write(&target, "a\n").unwrap();
    let link = dir.join("link.yaml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let saved = save_atomic(&link, "b\n").expect("saved");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "b\n");
    assert_eq!(saved.path, target.canonicalize().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Set in the child process: the recovery directory to write into.
const CHILD_ENV: &str = "HOOKSCOPE_EDIT_RECOVERY_CHILD";
const UNSAVED: &str = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: half-typed}\nwebhooks:\n- name: x.example.com\n  timeoutSeconds: 3 # ünïcode\n";

/// The child role of `recovery_survives_sigkill`: writes entries mid-edit, says so, and waits to
/// be killed. Without the variable (a normal test run) it does nothing.
#[test]
fn recovery_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let store = RecoveryStore::new(PathBuf::from(dir));
    let key = BufferKey::File(PathBuf::from("/configs/hooks.yaml"));
    // Earlier keystrokes, then the latest text.
    store.write(&key, "apiVersion: admission").expect("write");
    store.write(&key, UNSAVED).expect("write");
    store
        .write(&BufferKey::Embedded("demo".into()), "demo text")
        .expect("write");
    println!("written");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn recovery_survives_sigkill() {
    let dir = scratch("recovery");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "recovery_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let said = lines.find(|l| l.as_ref().is_ok_and(|l| l.contains("written")));
    // Child::kill sends SIGKILL on Unix.
    child.kill().expect("killed");
    let status = child.wait().expect("reaped");
    assert!(said.is_some(), "the child wrote its entries");
    assert!(!status.success());
    let store = RecoveryStore::new(&dir);
    let (entries, problems) = store.list().expect("listed");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(entries.len(), 2);
    let file = entries
        .iter()
        .find(|e| matches!(&e.key, BufferKey::File(_)))
        .expect("the file buffer");
    assert_eq!(file.text, UNSAVED, "the exact latest text");
    assert_eq!(
        file.original.as_deref(),
        Some(Path::new("/configs/hooks.yaml"))
    );
    assert_ne!(file.pid, std::process::id());
    let demo = store
        .get(&BufferKey::Embedded("demo".into()))
        .expect("read")
        .expect("present");
    assert_eq!(demo.text, "demo text");
    // Discarded after a save (or on the user's choice).
    assert!(store.discard(&file.key).expect("discarded"));
    assert!(!store.discard(&file.key).expect("nothing left"));
    assert_eq!(store.list().expect("listed").0.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recovery_lists_an_empty_or_missing_store_and_reports_bad_entries() {
    let dir = scratch("recovery-empty");
    let store = RecoveryStore::new(dir.join("not-yet"));
    assert!(store.list().expect("listed").0.is_empty());
    let store = RecoveryStore::new(&dir);
    std::fs::write(dir.join("garbage.json"), "{").unwrap();
    store.write(&BufferKey::New("1".into()), "t").unwrap();
    let (entries, problems) = store.list().expect("listed");
    assert_eq!(entries.len(), 1);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].to_string().contains("garbage.json"));
    assert_eq!(
        entries[0].base_hash, None,
        "written without the text it started from"
    );
    // The text an edit started from is kept as its hash, to offer it only against that text.
    let key = BufferKey::File(dir.join("hooks.yaml"));
    store.write_from(&key, "edited", Some("as loaded")).unwrap();
    let entry = store.get(&key).unwrap().expect("kept");
    assert_eq!(
        entry.base_hash,
        Some(hookscope::edit::content_hash("as loaded"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Entries untouched for longer than the limit (14 days) are pruned when the console lists
/// them at start, and so are old files that are not readable entries; younger ones stay.
#[test]
fn recovery_entries_older_than_fourteen_days_are_pruned() {
    use hookscope::edit::RECOVERY_MAX_AGE;
    use std::time::SystemTime;
    assert_eq!(RECOVERY_MAX_AGE, Duration::from_secs(14 * 24 * 3600));
    let dir = scratch("recovery-prune");
    let store = RecoveryStore::new(&dir);
    let now = SystemTime::now();
    let old = store.write(&BufferKey::New("old".into()), "old").unwrap();
    let young = store
        .write(&BufferKey::New("young".into()), "young")
        .unwrap();
    // The old entry was last written 15 days ago, the young one 13 days ago.
    let age = |path: &Path, days: u64| {
        let mut record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let then = now - Duration::from_secs(days * 24 * 3600);
        let ms = then
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        record["savedAtMs"] = ms.into();
        std::fs::write(path, serde_json::to_vec(&record).unwrap()).unwrap();
    };
    age(&old, 15);
    age(&young, 13);
    // An unreadable file and a write's leftover, both a month old; a fresh unreadable one.
    let garbage = dir.join("garbage.json");
    let leftover = dir.join(".tmp-write");
    for p in [&garbage, &leftover] {
        std::fs::write(p, "{").unwrap();
        std::fs::File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(now - Duration::from_secs(30 * 24 * 3600))
            .unwrap();
    }
    std::fs::write(dir.join("fresh.json"), "{").unwrap();

    // What the console offers at start: the young entry only; the old files are gone.
    let offered = hookscope::tui::io::list_recovery(&store);
    assert_eq!(offered.len(), 1, "{offered:?}");
    assert_eq!(offered[0].text, "young");
    assert_eq!(
        names_in(&dir),
        vec![
            "fresh.json".to_string(),
            young.file_name().unwrap().to_string_lossy().into_owned()
        ]
    );
    // A day later the young one is 14 days and a day old: pruned too.
    let removed = store
        .prune_older_than(RECOVERY_MAX_AGE, now + Duration::from_secs(2 * 24 * 3600))
        .unwrap();
    assert_eq!(removed, vec![young.clone()]);
    let _ = std::fs::remove_dir_all(&dir);
}

async fn next_change(rx: &mut mpsc::Receiver<FileChange>) -> FileChange {
    tokio::time::timeout(Duration::from_secs(120), rx.recv())
        .await
        .expect("a change within 120 s")
        .expect("watcher running")
}

/// The change to `want`. A write in place truncates the file first: when the writer is held up
/// longer than the debounce between the two steps, the empty file is reported on the way.
async fn change_to(rx: &mut mpsc::Receiver<FileChange>, want: &str) -> FileChange {
    loop {
        let c = next_change(rx).await;
        if c.content == FileContent::Text(want.into()) {
            return c;
        }
        assert_eq!(
            c.content,
            FileContent::Text(String::new()),
            "on the way to {want:?}"
        );
    }
}

/// Nothing arrives for a while (the watcher debounces 50 ms; waiting 10 times that).
async fn quiet(rx: &mut mpsc::Receiver<FileChange>) {
    if let Ok(Some(c)) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
        panic!("unexpected change: {c:?}");
    }
}

#[tokio::test]
async fn watcher_sees_outside_changes_and_ignores_our_saves() {
    let dir = scratch("watch");
    let file = dir.join("hooks.yaml");
    std::fs::write(&file, "one\n").unwrap();
    let (tx, mut rx) = mpsc::channel(8);
    let mut watcher = ConfigWatcher::new(tx, Duration::from_millis(50)).expect("watcher");
    watcher.watch(&file, Some("one\n")).expect("watched");

    // An editor writing in place.
    std::fs::write(&file, "two\n").unwrap();
    let c = change_to(&mut rx, "two\n").await;
    assert_eq!(c.path, file);

    // An editor writing a new file and renaming it over.
    let tmp = dir.join(".hooks.yaml.swp");
    std::fs::write(&tmp, "three\n").unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    let c = next_change(&mut rx).await;
    assert_eq!(c.content, FileContent::Text("three\n".into()));

    // Our own save is not reported; an outside change after it is.
    watcher.save(&file, "four\n").expect("saved");
    quiet(&mut rx).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "four\n");
    std::fs::write(&file, "five\n").unwrap();
    assert_eq!(change_to(&mut rx, "five\n").await.path, file);

    // Other files in the directory are not reported; removal is.
    std::fs::write(dir.join("other.yaml"), "x").unwrap();
    quiet(&mut rx).await;
    std::fs::remove_file(&file).unwrap();
    assert_eq!(next_change(&mut rx).await.content, FileContent::Removed);

    watcher.unwatch(&file).expect("unwatched");
    std::fs::write(&file, "six\n").unwrap();
    quiet(&mut rx).await;
    let _ = std::fs::remove_dir_all(&dir);
}

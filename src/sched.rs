//! How the replay's helper threads are scheduled.
//!
//! `hookscope replay` runs the dispatches and their HTTPS exchanges on one thread, and reads
//! inputs and writes outputs on two others that work ahead of it and behind it, in batches. On a
//! machine with few cores, the webhook under test often runs on the same machine: each time the
//! dispatching thread hands over a batch it wakes a helper, and Linux tends to place a woken
//! thread on its waker's core and to let it preempt the waker, so the dispatching thread (and the
//! webhook it is waiting for) queue behind work that could have waited. Marked as batch work, a
//! helper keeps its share of the CPU, but waking it no longer preempts the thread running.

/// Marks the calling thread as batch work (Linux's `SCHED_BATCH`; elsewhere nothing changes).
/// An error leaves the thread as it was, which only costs speed.
pub fn as_batch_work() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the duration of the call; pid 0 is the
        // calling thread, and the call reads nothing else.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The policy of the calling thread.
    fn policy() -> libc::c_int {
        // SAFETY: a plain query of the calling thread's policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn only_the_thread_that_asks_becomes_batch_work() {
        let before = policy();
        let helper = std::thread::spawn(|| {
            as_batch_work().expect("an unprivileged thread may become batch work");
            policy()
        });
        assert_eq!(helper.join().unwrap(), libc::SCHED_BATCH);
        assert_eq!(policy(), before, "the spawning thread keeps its policy");
    }
}

//! The process groups an agent's background shell runs started (its sub-agents' included),
//! ended when the agent goes: a detached `tail -f` or dev server must not outlive the agent
//! that the host freed.
//!
//! A group is ended with `SIGKILL` to the whole group, and only while its leader has not been
//! reaped: an unreaped leader keeps its pid, and so the group id, from being reused, so the
//! signal can never reach an unrelated process. The reaper waits for the leader's exit
//! without reaping it, then reaps it under the same lock the ending takes.

use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// One started group, shared by its reaper and the agent's list.
#[derive(Debug)]
pub(crate) struct OwnedGroup {
    pgid: Pid,
    /// True once the leader was reaped: from then on its id may belong to someone else.
    reaped: Mutex<bool>,
}

/// The same group: a group id names one group while its leader is unreaped.
impl PartialEq for OwnedGroup {
    fn eq(&self, other: &Self) -> bool {
        self.pgid == other.pgid
    }
}

impl OwnedGroup {
    /// Starts the reaper of `child`, the leader of its own process group (`process_group(0)`).
    pub(crate) fn adopt(child: Child) -> Arc<OwnedGroup> {
        let group = Arc::new(OwnedGroup {
            pgid: Pid::from_raw(child.id() as i32),
            reaped: Mutex::new(false),
        });
        let reaper = group.clone();
        // Without a reaper thread the leader stays a zombie, which keeps its group id ours to end.
        let _ = std::thread::Builder::new()
            .name("agentao-bg-reaper".into())
            .spawn(move || reaper.reap(child));
        group
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        self.reaped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for the leader to exit, then reaps it (no zombie is left) under the lock.
    #[cfg(any(
        target_os = "android",
        target_os = "freebsd",
        all(target_os = "linux", not(target_env = "uclibc"))
    ))]
    fn reap(&self, mut child: Child) {
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        while let Err(nix::errno::Errno::EINTR) = waitid(
            Id::Pid(self.pgid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        ) {}
        let mut reaped = self.lock();
        let _ = child.wait();
        *reaped = true;
    }

    /// Without a `waitid` that can leave the leader unreaped, it is polled under the lock.
    #[cfg(not(any(
        target_os = "android",
        target_os = "freebsd",
        all(target_os = "linux", not(target_env = "uclibc"))
    )))]
    fn reap(&self, mut child: Child) {
        loop {
            let mut reaped = self.lock();
            if !matches!(child.try_wait(), Ok(None)) {
                *reaped = true;
                return;
            }
            drop(reaped);
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn has_ended(&self) -> bool {
        *self.lock()
    }

    /// Kills every process of the group, if its leader is still ours.
    pub(crate) fn end(&self) {
        let reaped = self.lock();
        if !*reaped {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// The groups one agent started, shared by its sub-agents' tool services.
#[derive(Debug, Default)]
pub(crate) struct BackgroundProcesses {
    inner: Mutex<Groups>,
}

#[derive(Debug, Default)]
struct Groups {
    /// Set when the agent went: a group started later (a turn still finishing) is ended at once.
    closed: bool,
    live: Vec<Arc<OwnedGroup>>,
}

impl BackgroundProcesses {
    fn lock(&self) -> MutexGuard<'_, Groups> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `group` to end with the agent (or ends it now, if the agent is gone).
    pub(crate) fn keep(&self, group: Arc<OwnedGroup>) {
        let mut groups = self.lock();
        if groups.closed {
            drop(groups);
            group.end();
            return;
        }
        groups.live.retain(|g| !g.has_ended());
        groups.live.push(group);
    }

    /// Ends every group kept, and every one kept from now on.
    pub(crate) fn end_all(&self) {
        let live = {
            let mut groups = self.lock();
            groups.closed = true;
            std::mem::take(&mut groups.live)
        };
        for group in live {
            group.end();
        }
    }

    /// How many groups are kept whose leader still runs.
    #[cfg(test)]
    pub(crate) fn running(&self) -> usize {
        self.lock().live.iter().filter(|g| !g.has_ended()).count()
    }
}

impl Drop for BackgroundProcesses {
    fn drop(&mut self) {
        self.end_all();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt as _;
    use std::time::{Duration, Instant};

    use super::*;

    fn start(script: &str) -> Arc<OwnedGroup> {
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .spawn()
            .unwrap();
        OwnedGroup::adopt(child)
    }

    fn wait(mut done: impl FnMut() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn ending_kills_the_group_and_a_finished_leader_is_left_alone() {
        let procs = BackgroundProcesses::default();
        let forever = start("sleep 60 & sleep 60");
        let pgid = forever.pgid;
        procs.keep(forever.clone());
        let quick = start("exit 0");
        procs.keep(quick.clone());
        assert!(
            wait(|| quick.has_ended()),
            "the reaper reaped the quick one"
        );
        assert_eq!(procs.running(), 1);
        procs.end_all();
        // The group is gone: its leader reaped, and no member left to signal.
        assert!(wait(|| forever.has_ended()));
        assert!(wait(|| killpg(pgid, None) == Err(nix::errno::Errno::ESRCH)));
        // Kept after the end: ended at once.
        let late = start("sleep 60");
        procs.keep(late.clone());
        assert!(wait(|| late.has_ended()));
    }
}

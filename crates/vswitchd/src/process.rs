//! The daemon's process as OVS's daemons run: a pidfile that holds a
//! POSIX `fcntl` write lock for as long as the process lives (ovs-appctl
//! and ovs-ctl take a pidfile nobody locks as stale, and a second daemon
//! finds the lock taken), and `--detach`: the process forks, the parent
//! waits until the child says its first configuration is applied (or
//! dies), and exits with that.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A locked pidfile; removed when dropped. Nothing else in the process
/// may open and close the file: closing any descriptor of it drops the
/// process's fcntl locks on it (POSIX).
#[derive(Debug)]
pub struct Pidfile {
    path: PathBuf,
    _file: File,
}

fn lock_request(kind: libc::c_short) -> libc::flock {
    // SAFETY: flock is a plain C struct; all zeroes is a valid value (the
    // whole file from offset 0), the fields set below make the request.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl
}

/// The pid that holds a write lock on `file`, if a process does.
fn lock_holder(file: &File) -> Option<libc::pid_t> {
    let mut fl = lock_request(libc::F_WRLCK as libc::c_short);
    // SAFETY: F_GETLK on a descriptor we own, with a valid flock to fill.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    (r == 0 && fl.l_type != libc::F_UNLCK as libc::c_short).then_some(fl.l_pid)
}

impl Pidfile {
    /// Creates `path`, locks it and writes this process's id into it. A
    /// pidfile another live process locks is an error naming it.
    pub fn create(path: &Path) -> Result<Pidfile, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(path)
            .map_err(|e| format!("pidfile {}: {e}", path.display()))?;
        let fl = lock_request(libc::F_WRLCK as libc::c_short);
        // SAFETY: F_SETLK on a descriptor we own, with a valid request.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &fl) };
        if r != 0 {
            let why = std::io::Error::last_os_error();
            return Err(match lock_holder(&file) {
                Some(pid) => format!(
                    "pidfile {} is locked by process {pid}: is another ovs-vswitchd running?",
                    path.display()
                ),
                None => format!("pidfile {}: cannot lock it ({why})", path.display()),
            });
        }
        file.set_len(0)
            .and_then(|()| (&file).write_all(format!("{}\n", std::process::id()).as_bytes()))
            .map_err(|e| format!("pidfile {}: {e}", path.display()))?;
        Ok(Pidfile {
            path: path.to_path_buf(),
            _file: file,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Pidfile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The child's side of `--detach`: tells the waiting parent the daemon
/// is ready (then the parent exits 0). Dropped without [`Detached::ready`]
/// (the child failed): the parent exits 1.
#[derive(Debug)]
pub struct Detached {
    pipe: Option<OwnedFd>,
}

impl Detached {
    /// Tells the parent; standard input, output and error go to
    /// /dev/null (the terminal is the parent's).
    pub fn ready(&mut self) {
        if let Some(fd) = self.pipe.take() {
            let mut f = File::from(fd);
            let _ = f.write_all(b"1");
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                for target in 0..3 {
                    // SAFETY: dup2 of a descriptor we own onto the standard
                    // ones; nothing else holds them as Rust objects.
                    unsafe { libc::dup2(null.as_raw_fd(), target) };
                }
            }
        }
    }
}

/// Forks: the parent waits for the child's [`Detached::ready`] and exits
/// (0 when it came, 1 when the child ended first); the child, in a
/// session of its own, goes on with the returned handle. Call before any
/// thread starts (a fork keeps only the calling thread).
pub fn detach() -> Result<Detached, String> {
    let mut fds = [0; 2];
    // SAFETY: pipe fills the two descriptors of a valid array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "--detach: pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: both descriptors were just made and are owned only here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fork in a process with one thread (the caller's promise);
    // the child goes on with copies of what this thread owns.
    match unsafe { libc::fork() } {
        -1 => Err(format!(
            "--detach: fork: {}",
            std::io::Error::last_os_error()
        )),
        0 => {
            drop(rd);
            // SAFETY: setsid has no arguments; it fails only for a group
            // leader, which a child just forked is not.
            unsafe { libc::setsid() };
            Ok(Detached { pipe: Some(wr) })
        }
        _child => {
            drop(wr);
            let mut b = [0u8; 1];
            let code = match File::from(rd).read(&mut b) {
                Ok(1) => 0,
                _ => 1,
            };
            std::process::exit(code);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfile_is_locked_while_held_and_removed_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pid");
        let p = Pidfile::create(&path).unwrap();
        // Another process sees the lock (fcntl locks are the process's
        // own, so the check is made from a child: Python's lockf is fcntl).
        let probe = |path: &Path| {
            std::process::Command::new("python3")
                .args(["-c", "import fcntl,sys; f=open(sys.argv[1],'r+'); fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB)"])
                .arg(path)
                .status()
                .map(|s| s.success())
        };
        if let Ok(free) = probe(&path) {
            assert!(!free, "another process could lock a held pidfile");
        }
        // (Read only now: closing any descriptor of the file drops the
        // process's fcntl locks on it, POSIX's rule.)
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(p);
        assert!(!path.exists(), "removed when dropped");
    }
}

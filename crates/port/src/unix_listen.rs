//! Listening unix sockets that are owner-only from the first instant and
//! never replace anything but a stale socket.
//!
//! Every listening socket Sluice makes (the control socket, OpenFlow
//! `punix:`, `stream:punix:` ports) goes through [`listen`]:
//! - whatever is at the path already is left alone unless it is a socket
//!   nobody answers on (a stale one from a run that died); a regular file,
//!   a directory, a symlink or a live socket is refused with an error;
//! - the socket is bound inside a fresh directory of mode 0700 next to the
//!   path, made 0600 there, and renamed into place, so no other user can
//!   connect in the moment between `bind` and `chmod` (the process umask,
//!   which `bind` obeys, is never changed: it is process-wide, and other
//!   threads create files);
//! - [`SocketFile::remove`] deletes the path at exit only while it is still
//!   the socket this process bound (same device and inode), never a file
//!   someone put there since.

use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The longest path a unix socket address holds (`sun_path` less its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The socket file a [`listen`] made: removed by [`SocketFile::remove`]
/// only while it is still that socket.
#[derive(Debug, Clone)]
pub struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketFile {
    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket if the path still names the one this process
    /// bound; returns whether it did.
    pub fn remove(&self) -> bool {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => {
                std::fs::remove_file(&self.path).is_ok()
            }
            _ => false,
        }
    }
}

/// Checks what is at `path` before a socket is bound there: nothing, or a
/// stale socket, is fine; anything else is an error that says what is
/// there.
pub fn check_replaceable(path: &Path) -> Result<(), String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let ft = meta.file_type();
    if !ft.is_socket() {
        let what = if ft.is_dir() {
            "a directory"
        } else if ft.is_symlink() {
            "a symbolic link"
        } else if ft.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        return Err(format!(
            "{} exists and is {what}: not replacing it (only a stale socket is replaced)",
            path.display()
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(format!(
            "{}: another process is listening there",
            path.display()
        ));
    }
    Ok(())
}

/// Binds a listening unix socket at `path`, owner-only (0600) from the
/// first instant, replacing only a stale socket (see the module text).
pub fn listen(path: &Path) -> Result<(UnixListener, SocketFile), String> {
    let shown = path.display();
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(format!(
            "{shown}: a unix socket path is at most {MAX_SOCKET_PATH} bytes"
        ));
    }
    check_replaceable(path)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let private = private_dir(&parent).map_err(|e| format!("{shown}: {e}"))?;
    let staged = private.join("s");
    let result = (|| {
        if staged.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!(
                "{shown}: the directory is too deep to bind a socket in privately ({} of at most {MAX_SOCKET_PATH} bytes); use a shorter path",
                staged.as_os_str().len()
            ));
        }
        let listener = UnixListener::bind(&staged).map_err(|e| format!("{shown}: {e}"))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{shown}: {e}"))?;
        // What is at the path may have changed since the check: look again
        // just before the rename, which replaces atomically.
        check_replaceable(path)?;
        std::fs::rename(&staged, path).map_err(|e| format!("{shown}: {e}"))?;
        let m = std::fs::symlink_metadata(path).map_err(|e| format!("{shown}: {e}"))?;
        Ok((
            listener,
            SocketFile {
                path: path.to_path_buf(),
                dev: m.dev(),
                ino: m.ino(),
            },
        ))
    })();
    let _ = std::fs::remove_file(&staged);
    let _ = std::fs::remove_dir(&private);
    result
}

/// Makes a new directory of mode 0700 in `parent` (a name nobody has:
/// `mkdir` fails on one that exists, so it is this process's own).
fn private_dir(parent: &Path) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let mut last = None;
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            ".sl{:x}",
            std::process::id() ^ nanos.rotate_left(13) ^ n.wrapping_mul(0x9e37_79b9)
        );
        let dir = parent.join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn refuses_a_regular_file_and_leaves_it() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("precious.txt");
        std::fs::write(&p, "precious\n").unwrap();
        let e = listen(&p).unwrap_err();
        assert!(e.contains("regular file"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "precious\n");
        // Nothing left behind: no private directory.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn refuses_a_directory_a_symlink_and_a_live_socket() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        assert!(listen(&dir).unwrap_err().contains("directory"));
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &link).unwrap();
        assert!(listen(&link).unwrap_err().contains("symbolic link"));
        let live = d.path().join("live");
        let (_l, _f) = listen(&live).unwrap();
        assert!(listen(&live).unwrap_err().contains("listening"));
    }

    #[test]
    fn replaces_a_stale_socket_and_is_owner_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.sock");
        drop(UnixListener::bind(&p).unwrap()); // stale: nobody listens
        let (l, f) = listen(&p).unwrap();
        assert_eq!(mode(&p), 0o600);
        let _c = UnixStream::connect(&p).unwrap();
        assert!(l.accept().is_ok());
        assert!(f.remove());
        assert!(!p.exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn remove_leaves_a_file_put_in_its_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.sock");
        let (_l, f) = listen(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "someone else's").unwrap();
        assert!(!f.remove());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "someone else's");
    }

    #[test]
    fn a_path_too_long_is_an_error() {
        let p = PathBuf::from(format!("/tmp/{}", "x".repeat(120)));
        assert!(listen(&p).unwrap_err().contains("at most"));
    }
}

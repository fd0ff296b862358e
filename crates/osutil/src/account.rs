//! OS accounts: looking one up by name, and acting as one for a moment (root only).
//!
//! Why act as another account: PostgreSQL's default local authentication on Debian is `peer`
//! (pg_hba.conf `local all postgres peer`), which lets a unix-socket connection in as the database user
//! whose name is the connecting process's OS user, read from the socket's peer credentials
//! (`SO_PEERCRED`, unix(7)); the kernel records them when the socket connects, from the effective IDs. A
//! root audit asked to connect as `user=postgres` therefore connects with the effective user and group of
//! the `postgres` account and takes root's back at once: the open connection keeps the identity it was
//! made with, nothing else is done meanwhile.

use std::ffi::CString;
use std::io;

/// An OS account from the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its name.
    pub name: String,
    /// Its user ID.
    pub uid: u32,
    /// Its primary group ID.
    pub gid: u32,
}

/// The account named `name`, if the password database has one.
pub fn by_name(name: &str) -> Option<Account> {
    let c = CString::new(name).ok()?;
    // SAFETY: an all-zero passwd is a valid value of the plain C struct; getpwnam_r fills it.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `c` is a NUL-terminated string, `pw` and `found` are
    // live locals, and `buf` is writable for the length passed. The strings it fills point into `buf`,
    // which outlives their use here (only the numeric IDs are read).
    let r =
        unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
    (r == 0 && !found.is_null()).then(|| Account {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// This process's effective user ID.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Restores root's effective IDs when dropped, on every path out of [`as_account`] (a panic included).
struct Restore {
    gid: u32,
}

impl Drop for Restore {
    fn drop(&mut self) {
        // The user first (only root may set the group back), then the group. Both are this process's own
        // saved IDs, which it may always take back.
        // SAFETY: seteuid and setegid have no memory preconditions; glibc applies them to every thread.
        unsafe {
            if libc::seteuid(0) != 0 || libc::setegid(self.gid) != 0 {
                // Going on with another account's IDs would do the rest of the run as it: stop here.
                libc::abort();
            }
        }
    }
}

/// Runs `f` with the effective group and user IDs of `account`, then takes root's back. Only for root
/// (this process's real and saved user ID 0): anyone else gets an error and `f` does not run.
pub fn as_account<T>(account: &Account, f: impl FnOnce() -> T) -> io::Result<T> {
    if effective_uid() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "acting as another account needs root",
        ));
    }
    // SAFETY: getegid has no preconditions and cannot fail.
    let gid = unsafe { libc::getegid() };
    // SAFETY: setegid has no memory preconditions; on failure nothing changed.
    if unsafe { libc::setegid(account.gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let restore = Restore { gid };
    // SAFETY: seteuid has no memory preconditions; on failure the group is set back by `restore`.
    if unsafe { libc::seteuid(account.uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let out = f();
    drop(restore);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_found_and_nobody_else_is_invented() {
        let root = by_name("root").expect("root in the password database");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(by_name("no-such-account-preemptlab").is_none());
        assert!(by_name("bad\0name").is_none());
    }
}

//! `--control`: turn the perf events off and on while a diagnosis runs, from another program, the way
//! `perf record --control` does: one command a line on a control descriptor (`enable`, `disable`, `stop`),
//! each answered with `ack` on an optional acknowledgement descriptor once it has taken effect.
//!
//! What it is for: a measurement of what the events cost can switch them second by second under one
//! steady load, with the diagnosis itself running all the while (scripts/diagnose-overhead `--toggle`), or
//! an operator can watch only a phase of a longer run. While the events are off the processes are still
//! followed (fork and exit records come from an always-on event of their own) and /proc is still read;
//! the time they were off is recorded and the rates are of the time they were on.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::{AsRawFd, FromRawFd};

/// A command read from the control descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Turn the events on (each still follows its `--*-duty` schedule).
    Enable,
    /// Turn every event off.
    Disable,
    /// End the window now (as SIGINT does, without marking the result interrupted).
    Stop,
}

/// Where the commands come from and the acknowledgements go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `fifo:CTL[,ACK]`: named pipes, opened here.
    Fifo {
        /// Commands.
        ctl: String,
        /// Acknowledgements.
        ack: Option<String>,
    },
    /// `fd:CTL[,ACK]`: descriptors inherited from the parent.
    Fd {
        /// Commands.
        ctl: i32,
        /// Acknowledgements.
        ack: Option<i32>,
    },
}

/// Parses `fifo:CTL[,ACK]` or `fd:CTL[,ACK]`.
pub fn parse(text: &str) -> Result<Spec, String> {
    let bad = || {
        format!("{text:?}: give fifo:CONTROL[,ACK] (named pipes) or fd:CONTROL[,ACK] (open descriptors)")
    };
    let (kind, rest) = text.split_once(':').ok_or_else(bad)?;
    let (ctl, ack) = match rest.split_once(',') {
        Some((c, a)) => (c, Some(a)),
        None => (rest, None),
    };
    if ctl.is_empty() || ack == Some("") {
        return Err(bad());
    }
    match kind {
        "fifo" => Ok(Spec::Fifo {
            ctl: ctl.to_string(),
            ack: ack.map(str::to_string),
        }),
        "fd" => {
            let fd = |s: &str| s.parse::<i32>().ok().filter(|n| *n > 2).ok_or_else(bad);
            Ok(Spec::Fd {
                ctl: fd(ctl)?,
                ack: ack.map(fd).transpose()?,
            })
        }
        _ => Err(bad()),
    }
}

/// The open control channel.
#[derive(Debug)]
pub struct Control {
    ctl: File,
    ack: Option<File>,
    pending: Vec<u8>,
    closed: bool,
}

impl Control {
    /// Opens the channel (a FIFO's writer may come later: the control side is opened without blocking).
    pub fn open(spec: &Spec) -> io::Result<Control> {
        let (ctl, ack) = match spec {
            Spec::Fifo { ctl, ack } => {
                let c = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(ctl)?;
                let a = match ack {
                    Some(p) => Some(OpenOptions::new().write(true).open(p)?),
                    None => None,
                };
                (c, a)
            }
            Spec::Fd { ctl, ack } => {
                for fd in std::iter::once(*ctl).chain(*ack) {
                    // SAFETY: F_GETFD on any integer is harmless; it only reports whether it is open.
                    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                // SAFETY: the descriptors were checked open above and are handed to this process for
                // --control alone (the caller passed them on the command line); each is owned once.
                let c = unsafe { File::from_raw_fd(*ctl) };
                // SAFETY: as above.
                let a = ack.map(|fd| unsafe { File::from_raw_fd(fd) });
                // SAFETY: fcntl on an open descriptor this process owns.
                unsafe {
                    let flags = libc::fcntl(c.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(c.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
                (c, a)
            }
        };
        Ok(Control {
            ctl,
            ack,
            pending: Vec::new(),
            closed: false,
        })
    }

    /// The descriptor to poll for commands; None once its writer has closed it (a FIFO whose writer went
    /// away would poll readable for ever).
    pub fn fd(&self) -> Option<i32> {
        (!self.closed).then(|| self.ctl.as_raw_fd())
    }

    /// The commands that have arrived, in order; lines that are no command come back as `Err(line)`.
    pub fn read(&mut self) -> Vec<Result<Command, String>> {
        let mut buf = [0u8; 512];
        while !self.closed {
            match self.ctl.read(&mut buf) {
                Ok(0) => self.closed = true,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut out = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line).trim().to_string();
            if !text.is_empty() {
                out.push(command(&text).ok_or(text));
            }
        }
        out
    }

    /// Answers a command: `ack`, or `err TEXT` for a line that is no command.
    pub fn answer(&mut self, ok: Result<(), &str>) {
        if let Some(a) = self.ack.as_mut() {
            let line = match ok {
                Ok(()) => "ack\n".to_string(),
                Err(what) => format!("err {what}\n"),
            };
            let _ = a.write_all(line.as_bytes());
        }
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spec::Fifo { ctl, ack: None } => write!(f, "fifo:{ctl}"),
            Spec::Fifo { ctl, ack: Some(a) } => write!(f, "fifo:{ctl},{a}"),
            Spec::Fd { ctl, ack: None } => write!(f, "fd:{ctl}"),
            Spec::Fd { ctl, ack: Some(a) } => write!(f, "fd:{ctl},{a}"),
        }
    }
}

impl std::str::FromStr for Spec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse(text)
    }
}

fn command(text: &str) -> Option<Command> {
    match text {
        "enable" => Some(Command::Enable),
        "disable" => Some(Command::Disable),
        "stop" => Some(Command::Stop),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_name_the_forms() {
        assert_eq!(
            parse("fifo:/tmp/c,/tmp/a"),
            Ok(Spec::Fifo {
                ctl: "/tmp/c".into(),
                ack: Some("/tmp/a".into())
            })
        );
        assert_eq!(parse("fd:7"), Ok(Spec::Fd { ctl: 7, ack: None }));
        assert_eq!(
            parse("fd:7,8"),
            Ok(Spec::Fd {
                ctl: 7,
                ack: Some(8)
            })
        );
        for bad in ["fd:1", "fd:x", "fifo:", "fifo:a,", "pipe:3", "7"] {
            assert!(parse(bad).unwrap_err().contains("fifo:CONTROL"), "{bad}");
        }
    }

    #[test]
    fn commands_come_line_by_line_through_a_real_pipe() {
        let mut fds = [0i32; 2];
        // SAFETY: fds is a valid 2-element array for pipe(2) to fill.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut acks = [0i32; 2];
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pipe(acks.as_mut_ptr()) }, 0);
        let mut c = Control::open(&Spec::Fd {
            ctl: fds[0],
            ack: Some(acks[1]),
        })
        .unwrap();
        // SAFETY: the write ends are open descriptors this test owns, each wrapped once.
        let (mut w, mut ack_r) = unsafe { (File::from_raw_fd(fds[1]), File::from_raw_fd(acks[0])) };
        assert!(c.read().is_empty());
        w.write_all(b"disable\nenab").unwrap();
        assert_eq!(c.read(), vec![Ok(Command::Disable)]);
        w.write_all(b"le\n\nhello\nstop\n").unwrap();
        assert_eq!(
            c.read(),
            vec![Ok(Command::Enable), Err("hello".into()), Ok(Command::Stop)]
        );
        c.answer(Ok(()));
        c.answer(Err("hello"));
        drop(c);
        let mut got = String::new();
        ack_r.read_to_string(&mut got).unwrap();
        assert_eq!(got, "ack\nerr hello\n");
    }
}

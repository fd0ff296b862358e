//! The stop flag: SIGINT, SIGTERM, SIGHUP (a dropped ssh session) and SIGQUIT set a flag instead of
//! killing the process; long runs (benches, a guest) poll it, stop their workers and unwind through their
//! guards, so every change to the host is undone on these exit paths too.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The last stop signal's number.
static WHICH: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// The signals that end a run cleanly: Ctrl-C, `kill`, a hang-up (the terminal or ssh session went away)
/// and Ctrl-\\ (SIGQUIT).
pub const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// A stop signal's handler could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("installing a handler of signal {signal}: {err}")]
pub struct SignalError {
    /// The signal's number.
    pub signal: i32,
    /// What the registration said.
    pub err: std::io::Error,
}

/// Installs the handlers of [`STOP_SIGNALS`] (idempotent). After this, Ctrl-C sets the flag; a second Ctrl-C
/// while the flag is set still only sets it: the run always cleans up.
pub fn install_signal_flag() -> Result<(), SignalError> {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    let which = WHICH.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for signal in STOP_SIGNALS {
        signal_hook::flag::register(signal, Arc::clone(flag))
            .and_then(|_| {
                signal_hook::flag::register_usize(signal, Arc::clone(which), signal as usize)
            })
            .map_err(|err| SignalError { signal, err })?;
    }
    Ok(())
}

/// True once one of [`STOP_SIGNALS`] arrived.
pub fn interrupted() -> bool {
    // Relaxed: the flag carries no data; a poll that misses the store sees it on the next one.
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// The exit code of a run a stop signal ended: 128 + the signal's number, as a shell reports a process
/// the signal killed (130 for Ctrl-C, 129 for a hang-up, 143 for SIGTERM).
pub fn interrupted_exit_code() -> i32 {
    match WHICH.get().map(|w| w.load(Ordering::Relaxed)) {
        Some(sig) if sig > 0 => 128 + sig as i32,
        _ => 130,
    }
}

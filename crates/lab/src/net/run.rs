//! `bench net`: TCP and UDP over loopback or a veth pair between two network namespaces. `stream`
//! measures throughput at the sender and at the receiver (and UDP loss); `pingpong` measures round trips.
//! Each cell records the deltas of the kernel's TCP counters (`/proc/net/snmp`, `/proc/net/netstat`) on
//! both sides and each end's CPU time and context switches.
//!
//! With `netns` set the server threads join the namespace of [`super::netns`]; the threads of a repetition
//! are [`super::ends`]', what they record besides their traffic [`super::counters`]'.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::matrix::{self, At, Bench, Matrix, Order, Step, Unopened};
use crate::options::OptionError;

use super::counters::{add_use, delta, read_counters};
use super::ends::{self, Shared, Traffic};
use super::netns::{recover_stale_netns, NetnsGuard, NS_ADDR};

use axes::{NetPath, NetTest};
use results::net::{Cell, CellSummary, NetResult, Rep, RttPcts, Spec};
use results::Status;

/// Why a net run stopped or the namespace could not be made. Messages name options by field; `render`
/// names them as the caller does.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The spec is refused (`net::options::check`).
    #[error(transparent)]
    Spec(#[from] OptionError),
    /// The namespace and veth pair need root.
    #[error("creating a network namespace and a veth pair needs root: run as root, or measure over loopback")]
    NotRoot,
    /// `ip` could not be run.
    #[error("running ip {args}: {err} (apt-get install iproute2)")]
    IpMissing {
        /// Its arguments.
        args: String,
        /// Why.
        err: std::io::Error,
    },
    /// `ip` failed.
    #[error("ip {args}: {stderr}")]
    Ip {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// The namespace could not be entered.
    #[error("entering network namespace {name}: {err}")]
    Enter {
        /// The namespace.
        name: String,
        /// Why.
        err: std::io::Error,
    },
    /// The stop-signal handler could not be installed.
    #[error(transparent)]
    Signal(#[from] osutil::stop::SignalError),
    /// The result file could not be written.
    #[error(transparent)]
    Write(#[from] osutil::output::OutputError),
}

impl NetError {
    /// The message with every option named by `name` (the command line passes its flag spelling).
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        match self {
            NetError::Spec(e) => e.render(name),
            // Every variant by name, no catch-all: a new variant whose Display calls render must say
            // its own words here, or Display and render would call each other for ever.
            NetError::NotRoot
            | NetError::IpMissing { .. }
            | NetError::Ip { .. }
            | NetError::Enter { .. }
            | NetError::Signal(_)
            | NetError::Write(_) => self.to_string(),
        }
    }
}

/// Runs one repetition of `test` with `size`-byte messages: one server and one client thread per stream,
/// started together at the gate, the window measured, the servers drained and stopped.
fn run_once(
    test: NetTest,
    size: usize,
    spec: &Spec,
    ns: Option<&NetnsGuard>,
) -> Result<Rep, String> {
    let t = Traffic {
        tcp: test.tcp(),
        stream: test.stream(),
        size,
    };
    let n = spec.streams as usize;
    let sh = Arc::new(Shared::default());
    let server_ip = if ns.is_some() { NS_ADDR } else { "127.0.0.1" };
    // Servers: one thread per stream, bound in the namespace when asked; each reports its port.
    let (port_tx, port_rx) = std::sync::mpsc::channel::<Result<u16, String>>();
    let mut servers = Vec::new();
    for _ in 0..n {
        let (sh, port_tx) = (Arc::clone(&sh), port_tx.clone());
        let ns_name = ns.map(|g| g.name().to_string());
        let bind = format!("{server_ip}:0");
        servers.push(std::thread::spawn(move || {
            ends::server(&sh, t, &bind, ns_name.as_deref(), &port_tx)
        }));
    }
    drop(port_tx);
    let mut ports = Vec::new();
    for _ in 0..n {
        match port_rx.recv() {
            Ok(Ok(p)) => ports.push(p),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("a server thread ended before binding".into()),
        }
    }
    let window = Duration::from_secs_f64(spec.duration_s);
    let clients: Vec<_> = ports
        .into_iter()
        .map(|port| {
            let sh = Arc::clone(&sh);
            let addr: SocketAddr = format!("{server_ip}:{port}").parse().expect("an address");
            std::thread::spawn(move || ends::client(&sh, t, addr, window))
        })
        .collect();
    let c0 = read_counters();
    start(&sh, n);
    let t0 = Instant::now();
    let mut rep = Rep::default();
    let mut rtt = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let mut first_err = None;
    for c in clients {
        match c
            .join()
            .map_err(|_| "a client thread panicked".to_string())?
        {
            Ok((u, h)) => {
                add_use(&mut rep.client, &u);
                if let Some(h) = h {
                    rtt.add(&h).expect("same bounds");
                }
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    // What the receivers had at the end of the window (in-flight data arrives during the drain).
    let recv_at_end = sh.recv_bytes.load(Ordering::Relaxed) as f64;
    // Let the receivers drain what is in flight, then stop them.
    std::thread::sleep(Duration::from_millis(50));
    sh.stop.store(true, Ordering::Relaxed);
    let c1 = read_counters();
    let mut server_delta: BTreeMap<String, i64> = BTreeMap::new();
    for s in servers {
        match s
            .join()
            .map_err(|_| "a server thread panicked".to_string())?
        {
            Ok((u, a, b)) => {
                add_use(&mut rep.server, &u);
                if server_delta.is_empty() {
                    server_delta = delta(&a, &b);
                }
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    rep.client_counters = delta(&c0, &c1);
    rep.server_counters = if ns.is_some() {
        server_delta
    } else {
        rep.client_counters.clone()
    };
    rates(&mut rep, &sh, t, elapsed, recv_at_end, &rtt);
    Ok(rep)
}

/// Opens the gate once every end waits at it (10 s at most; the run is stopped when one never came).
fn start(sh: &Shared, streams: usize) {
    let ends = 2 * streams as u64;
    let wait = Instant::now();
    while sh.ready.load(Ordering::Relaxed) < ends
        && !sh.stop.load(Ordering::Relaxed)
        && wait.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    if sh.ready.load(Ordering::Relaxed) < ends {
        sh.stop.store(true, Ordering::Relaxed);
    }
    sh.go.store(true, Ordering::Relaxed);
}

/// The repetition's rates over `elapsed` seconds: messages and bytes each way, UDP loss, or the round
/// trips' percentiles for a ping-pong.
fn rates(
    rep: &mut Rep,
    sh: &Shared,
    t: Traffic,
    elapsed: f64,
    recv_at_end: f64,
    rtt: &Histogram<u64>,
) {
    let secs = elapsed.max(1e-9);
    let sent_b = sh.sent_bytes.load(Ordering::Relaxed) as f64;
    let sent_m = sh.sent_msgs.load(Ordering::Relaxed) as f64;
    let recv_m = sh.recv_msgs.load(Ordering::Relaxed) as f64;
    rep.msgs_per_s = sent_m / secs;
    if t.stream {
        rep.sender_bytes_per_s = sent_b / secs;
        rep.receiver_bytes_per_s = recv_at_end / secs;
        rep.recv_msgs_per_s = if t.tcp {
            recv_at_end / t.size as f64 / secs
        } else {
            recv_m / secs
        };
        if !t.tcp && sent_m > 0.0 {
            rep.udp_loss = Some((1.0 - recv_m / sent_m).max(0.0));
        }
    } else if !rtt.is_empty() {
        let us = |q: f64| rtt.value_at_quantile(q) as f64 / 1000.0;
        rep.rtt_us = Some(RttPcts {
            p50: us(0.5),
            p90: us(0.9),
            p99: us(0.99),
            p999: us(0.999),
            max: rtt.max() as f64 / 1000.0,
        });
        rep.sender_bytes_per_s = sent_m * t.size as f64 / secs;
        rep.receiver_bytes_per_s = rep.sender_bytes_per_s;
    }
}

/// Runs the matrix (tests x sizes x repetitions) on the matrix driver, writing the result after each cell.
pub fn run(
    spec: Spec,
    out: &std::path::Path,
    models: Option<matrix::ModelAxis>,
    on_cell: impl FnMut(&Cell),
) -> Result<NetResult, NetError> {
    osutil::stop::install_signal_flag()?;
    crate::net::options::check(&spec)?;
    for line in recover_stale_netns() {
        osutil::msg!("preemptlab: {line}");
    }
    let ns = if spec.netns {
        Some(NetnsGuard::create()?)
    } else {
        None
    };
    let mut res = NetResult {
        envelope: matrix::unfinished(results::Kind::BenchNet),
        spec: spec.clone(),
        cells: Vec::new(),
    };
    for &test in &spec.tests {
        for &size in &spec.msg_sizes {
            let mut cell = Cell {
                test,
                msg_size: size,
                streams: spec.streams,
                path: if spec.netns {
                    NetPath::Netns
                } else {
                    NetPath::Loopback
                },
                preempt: None,
                status: Status::Ok,
                reason: None,
                reps: Vec::new(),
                summary: None,
            };
            if !test.tcp() && size > 65_507 {
                cell.status = Status::Skipped;
                cell.reason = Some(format!(
                    "{size}-byte messages: a UDP datagram carries at most 65507 bytes"
                ));
            }
            res.cells.push(cell);
        }
    }
    // One group per preemption model (one in all when it is not an axis).
    let one = res.cells.len();
    let (groups, switching) = matrix::plan(&mut res.cells, one, models, |c, m| c.preempt = Some(m));
    let matrix = Matrix {
        groups,
        repeat: spec.repeat,
        order: Order::CellMajor,
        noun: "repetitions",
        out,
        written: false,
        switching,
    };
    let mut bench = NetBench {
        spec: &spec,
        ns: ns.as_ref(),
        on_cell,
    };
    let res = matrix.run(&mut bench, res);
    drop(ns);
    res
}

/// `bench net` on the matrix driver: one group; the namespace (when asked) lives for the whole run.
struct NetBench<'a, F> {
    spec: &'a Spec,
    ns: Option<&'a NetnsGuard>,
    on_cell: F,
}

impl<F: FnMut(&Cell)> Bench for NetBench<'_, F> {
    type Doc = NetResult;
    type Shared = ();
    type Error = NetError;

    fn open(
        &mut self,
        _: &mut NetResult,
        _: std::ops::Range<usize>,
        _: u32,
    ) -> Result<(), Unopened<NetError>> {
        Ok(())
    }

    fn rep(&mut self, _: &mut (), cell: &Cell, _: At) -> Step<Rep, NetError> {
        match run_once(cell.test, cell.msg_size, self.spec, self.ns) {
            Ok(r) if !osutil::stop::interrupted() => Step::Rep(r),
            Ok(_) => Step::Interrupted,
            Err(e) => Step::Cell(Status::Failed, e),
        }
    }

    fn close(&mut self, _: ()) -> Result<(), NetError> {
        Ok(())
    }

    fn summarize(&self, cell: &mut Cell) {
        let f = |g: &dyn Fn(&Rep) -> f64| {
            stats::summarize(&cell.reps.iter().map(g).collect::<Vec<_>>())
        };
        let p99: Vec<f64> = cell
            .reps
            .iter()
            .filter_map(|r| r.rtt_us.as_ref().map(|x| x.p99))
            .collect();
        cell.summary = Some(CellSummary {
            sender_bytes_per_s: f(&|r| r.sender_bytes_per_s),
            receiver_bytes_per_s: f(&|r| r.receiver_bytes_per_s),
            msgs_per_s: f(&|r| r.msgs_per_s),
            rtt_p99_us: (!p99.is_empty()).then(|| stats::summarize(&p99)),
        });
    }

    fn on_done(&mut self, cell: &Cell) {
        (self.on_cell)(cell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_made_otherwise_is_checked_too() {
        let s = Spec {
            tests: vec![NetTest::UdpStream],
            msg_sizes: vec![65_536],
            streams: 0,
            duration_s: 1.0,
            repeat: 1,
            netns: false,
        };
        let dir = tempfile::tempdir().unwrap();
        let e = run(s, &dir.path().join("r.json"), None, |_| {}).unwrap_err();
        assert_eq!(e.to_string(), "streams 0: 1..1024");
        assert!(!dir.path().join("r.json").exists());
    }

    #[test]
    fn loopback_stream_and_pingpong_move_data() {
        let spec = Spec {
            tests: vec![],
            msg_sizes: vec![],
            streams: 2,
            duration_s: 0.3,
            repeat: 1,
            netns: false,
        };
        let r = run_once(NetTest::TcpStream, 16384, &spec, None).unwrap();
        assert!(r.sender_bytes_per_s > 1e6, "{r:?}");
        // The receivers got what was written, less what was in flight at the end.
        assert!(
            (r.receiver_bytes_per_s / r.sender_bytes_per_s - 1.0).abs() < 0.1,
            "{r:?}"
        );
        assert!(r.client_counters["OutSegs"] > 0);
        let r = run_once(NetTest::UdpPingpong, 64, &spec, None).unwrap();
        let rtt = r.rtt_us.unwrap();
        assert!(rtt.p50 > 0.0 && rtt.p50 <= rtt.p99 && rtt.p99 <= rtt.max);
        assert!(r.msgs_per_s > 100.0);
    }
}

//! `bench net`: TCP and UDP over loopback or a veth pair between two network namespaces. `stream`
//! measures throughput at the sender and at the receiver (and UDP loss); `pingpong` measures round trips.
//! Each cell records the deltas of the kernel's TCP counters (`/proc/net/snmp`, `/proc/net/netstat`) on
//! both sides and each end's CPU time and context switches.
//!
//! With `netns` set the server threads join a namespace this module creates (`ip netns add`), joined to the
//! host namespace by a veth pair with 10.203.0.1/30 (host) and 10.203.0.2/30 (namespace); deleting the
//! namespace removes both ends of the pair. [`NetnsGuard`] deletes it on drop, and a run that died without
//! cleaning up leaves a name with its PID that the next run removes.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::matrix::{self, At, Bench, Matrix, Order, Step, Unopened};
use crate::options::OptionError;

use axes::{NetPath, NetTest};
use results::net::{Cell, CellSummary, EndUse, NetResult, Rep, RttPcts, Spec};
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

/// The TCP counters recorded around each cell: (file, section, field).
pub const COUNTERS: [(&str, &str, &str); 9] = [
    ("snmp", "Tcp", "RetransSegs"),
    ("snmp", "Tcp", "OutSegs"),
    ("netstat", "TcpExt", "TCPFastRetrans"),
    ("netstat", "TcpExt", "TCPSackRecovery"),
    ("netstat", "TcpExt", "TCPDSACKRecv"),
    ("netstat", "TcpExt", "TCPDSACKOfoRecv"),
    ("netstat", "TcpExt", "TCPLostRetransmit"),
    ("netstat", "TcpExt", "TCPTimeouts"),
    ("netstat", "TcpExt", "TCPSACKReorder"),
];

/// Parses the two-line-per-section format of /proc/net/snmp and /proc/net/netstat
/// (`Tcp: names...` then `Tcp: values...`) into section -> name -> value.
pub fn parse_counters(text: &str) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((sec, n)), Some((sec2, v))) = (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if sec != sec2 {
            continue;
        }
        let m = out.entry(sec.to_string()).or_default();
        for (k, x) in n.split_whitespace().zip(v.split_whitespace()) {
            if let Ok(x) = x.parse() {
                m.insert(k.to_string(), x);
            }
        }
    }
    out
}

/// Reads the recorded counters in the calling thread's network namespace.
fn read_counters() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let snmp =
        parse_counters(&std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap_or_default());
    let netstat = parse_counters(
        &std::fs::read_to_string("/proc/thread-self/net/netstat").unwrap_or_default(),
    );
    for (file, sec, name) in COUNTERS {
        let src = if file == "snmp" { &snmp } else { &netstat };
        if let Some(v) = src.get(sec).and_then(|m| m.get(name)) {
            out.insert(name.to_string(), *v);
        }
    }
    out
}

fn delta(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    b.iter()
        .map(|(k, v)| (k.clone(), v - a.get(k).copied().unwrap_or(0)))
        .collect()
}

fn thread_use() -> EndUse {
    let u = hostfacts::rusage::Usage::now(hostfacts::rusage::Who::Thread);
    EndUse {
        user_s: u.user_ns as f64 / 1e9,
        sys_s: u.sys_ns as f64 / 1e9,
        nvcsw: u.nvcsw,
        nivcsw: u.nivcsw,
    }
}

fn use_delta(a: &EndUse, b: &EndUse) -> EndUse {
    EndUse {
        user_s: b.user_s - a.user_s,
        sys_s: b.sys_s - a.sys_s,
        nvcsw: b.nvcsw - a.nvcsw,
        nivcsw: b.nivcsw - a.nivcsw,
    }
}

fn add_use(a: &mut EndUse, b: &EndUse) {
    a.user_s += b.user_s;
    a.sys_s += b.sys_s;
    a.nvcsw += b.nvcsw;
    a.nivcsw += b.nivcsw;
}

/// A network namespace and veth pair, removed on drop.
pub struct NetnsGuard {
    name: String,
}

/// Host-side and namespace-side addresses of the veth pair.
pub const HOST_ADDR: &str = "10.203.0.1";
/// The namespace side.
pub const NS_ADDR: &str = "10.203.0.2";

fn ip(args: &[&str]) -> Result<(), NetError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|err| NetError::IpMissing {
            args: args.join(" "),
            err,
        })?;
    if !out.status.success() {
        return Err(NetError::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Deletes namespaces named `preemptlab-<pid>` whose process is gone; returns what it did.
pub fn recover_stale_netns() -> Vec<String> {
    let mut done = Vec::new();
    let Ok(rd) = std::fs::read_dir("/run/netns") else {
        return done;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix("preemptlab-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pgharness::procsample::alive(pid) {
            continue;
        }
        if ip(&["netns", "del", &name]).is_ok() {
            done.push(format!(
                "removed network namespace {name}, left by run {pid}"
            ));
        }
    }
    done
}

impl NetnsGuard {
    /// Creates the namespace and the veth pair with addresses, both ends up (root).
    pub fn create() -> Result<NetnsGuard, NetError> {
        if !osutil::is_root() {
            return Err(NetError::NotRoot);
        }
        let name = format!("preemptlab-{}", std::process::id());
        let veth_host = format!("plh{}", std::process::id() % 100_000);
        let veth_ns = format!("pln{}", std::process::id() % 100_000);
        ip(&["netns", "add", &name])?;
        let g = NetnsGuard { name: name.clone() };
        ip(&[
            "link", "add", &veth_host, "type", "veth", "peer", "name", &veth_ns, "netns", &name,
        ])?;
        ip(&["addr", "add", &format!("{HOST_ADDR}/30"), "dev", &veth_host])?;
        ip(&["link", "set", &veth_host, "up"])?;
        ip(&[
            "-n",
            &name,
            "addr",
            "add",
            &format!("{NS_ADDR}/30"),
            "dev",
            &veth_ns,
        ])?;
        ip(&["-n", &name, "link", "set", &veth_ns, "up"])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(g)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Moves the calling thread into the namespace.
    pub fn enter(&self) -> Result<(), NetError> {
        let enter = |err| NetError::Enter {
            name: self.name.clone(),
            err,
        };
        let f = std::fs::File::open(format!("/run/netns/{}", self.name)).map_err(enter)?;
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a namespace fd for this thread only.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(enter(std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            osutil::msg!("preemptlab: removing network namespace {}: {e}", self.name);
        }
    }
}

/// What a server thread returns: its resource use and its namespace's counters before and after.
type ServerEnd = (EndUse, BTreeMap<String, i64>, BTreeMap<String, i64>);

struct Shared {
    stop: AtomicBool,
    go: AtomicBool,
    ready: AtomicU64,
    sent_bytes: AtomicU64,
    sent_msgs: AtomicU64,
    recv_bytes: AtomicU64,
    recv_msgs: AtomicU64,
}

/// Runs one repetition of `test` with `size`-byte messages.
/// Waits at the start gate; false when the run was stopped instead.
fn gate(sh: &Shared) -> bool {
    sh.ready.fetch_add(1, Ordering::Relaxed);
    while !sh.go.load(Ordering::Relaxed) {
        if sh.stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    !sh.stop.load(Ordering::Relaxed)
}

fn run_once(
    test: NetTest,
    size: usize,
    spec: &Spec,
    ns: Option<&NetnsGuard>,
) -> Result<Rep, String> {
    let (tcp, stream) = (test.tcp(), test.stream());
    let n = spec.streams as usize;
    let sh = Arc::new(Shared {
        stop: AtomicBool::new(false),
        go: AtomicBool::new(false),
        ready: AtomicU64::new(0),
        sent_bytes: AtomicU64::new(0),
        sent_msgs: AtomicU64::new(0),
        recv_bytes: AtomicU64::new(0),
        recv_msgs: AtomicU64::new(0),
    });
    let server_ip = if ns.is_some() { NS_ADDR } else { "127.0.0.1" };
    // Servers: one thread per stream, bound in the namespace when asked; each reports its port.
    let (port_tx, port_rx) = std::sync::mpsc::channel::<Result<u16, String>>();
    let ns_name = ns.map(|g| g.name().to_string());
    let mut servers = Vec::new();
    for _ in 0..n {
        let sh = Arc::clone(&sh);
        let port_tx = port_tx.clone();
        let ns_name = ns_name.clone();
        let bind = format!("{server_ip}:0");
        servers.push(std::thread::spawn(move || -> Result<ServerEnd, String> {
            if let Some(name) = &ns_name {
                let g = NetnsGuard { name: name.clone() };
                let r = g.enter().map_err(|e| e.to_string());
                std::mem::forget(g); // not ours to delete
                if let Err(e) = r {
                    let _ = port_tx.send(Err(e.clone()));
                    return Err(e);
                }
            }
            let mut buf = vec![0u8; size.max(65_536)];
            if tcp {
                let l = TcpListener::bind(&bind).map_err(|e| format!("bind {bind}: {e}"))?;
                let _ = port_tx.send(Ok(l.local_addr().map_err(|e| e.to_string())?.port()));
                let (mut s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
                s.set_nodelay(true).ok();
                s.set_read_timeout(Some(Duration::from_millis(200))).ok();
                let c0 = read_counters();
                if !gate(&sh) {
                    return Err("stopped before the start".into());
                }
                let u0 = thread_use();
                loop {
                    if stream {
                        match s.read(&mut buf) {
                            Ok(0) => break,
                            Ok(k) => {
                                sh.recv_bytes.fetch_add(k as u64, Ordering::Relaxed);
                            }
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut =>
                            {
                                if sh.stop.load(Ordering::Relaxed) {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    } else {
                        // Echo exactly one message.
                        match s.read_exact(&mut buf[..size]) {
                            Ok(()) => {
                                if s.write_all(&buf[..size]).is_err() {
                                    break;
                                }
                            }
                            Err(e)
                                if e.kind() == std::io::ErrorKind::WouldBlock
                                    || e.kind() == std::io::ErrorKind::TimedOut =>
                            {
                                if sh.stop.load(Ordering::Relaxed) {
                                    break;
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                let u1 = thread_use();
                Ok((use_delta(&u0, &u1), c0, read_counters()))
            } else {
                let sock = UdpSocket::bind(&bind).map_err(|e| format!("bind {bind}: {e}"))?;
                let _ = port_tx.send(Ok(sock.local_addr().map_err(|e| e.to_string())?.port()));
                sock.set_read_timeout(Some(Duration::from_millis(100))).ok();
                let c0 = read_counters();
                if !gate(&sh) {
                    return Err("stopped before the start".into());
                }
                let u0 = thread_use();
                while !sh.stop.load(Ordering::Relaxed) {
                    match sock.recv_from(&mut buf) {
                        Ok((k, from)) => {
                            if stream {
                                sh.recv_bytes.fetch_add(k as u64, Ordering::Relaxed);
                                sh.recv_msgs.fetch_add(1, Ordering::Relaxed);
                            } else {
                                let _ = sock.send_to(&buf[..k], from);
                            }
                        }
                        Err(_) => continue,
                    }
                }
                let u1 = thread_use();
                Ok((use_delta(&u0, &u1), c0, read_counters()))
            }
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
    let dur = Duration::from_secs_f64(spec.duration_s);
    let mut clients = Vec::new();
    for port in ports {
        let sh = Arc::clone(&sh);
        let addr: SocketAddr = format!("{server_ip}:{port}").parse().expect("an address");
        clients.push(std::thread::spawn(
            move || -> Result<(EndUse, Option<Histogram<u64>>), String> {
                let msg = vec![0x5Au8; size];
                let mut back = vec![0u8; size];
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
                if tcp {
                    let conn = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"));
                    let Ok(mut s) = conn else {
                        sh.stop.store(true, Ordering::Relaxed);
                        return Err(conn.err().unwrap_or_default());
                    };
                    s.set_nodelay(!stream).ok();
                    if !gate(&sh) {
                        return Err("stopped before the start".into());
                    }
                    let u0 = thread_use();
                    let t = Instant::now();
                    // Counted locally: shared counters written per message would bounce a cache line
                    // between the sender's and the receiver's CPUs.
                    let mut sent = 0u64;
                    while t.elapsed() < dur && !osutil::stop::interrupted() {
                        if stream {
                            if s.write_all(&msg).is_err() {
                                break;
                            }
                        } else {
                            let t0 = Instant::now();
                            if s.write_all(&msg).is_err() || s.read_exact(&mut back).is_err() {
                                break;
                            }
                            let _ = hist.record(t0.elapsed().as_nanos().max(1) as u64);
                        }
                        sent += 1;
                    }
                    sh.sent_msgs.fetch_add(sent, Ordering::Relaxed);
                    if stream {
                        sh.sent_bytes
                            .fetch_add(sent * size as u64, Ordering::Relaxed);
                    }
                    let u1 = thread_use();
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    Ok((use_delta(&u0, &u1), (!stream).then_some(hist)))
                } else {
                    let sock = UdpSocket::bind(if addr.ip().is_loopback() {
                        "127.0.0.1:0"
                    } else {
                        "0.0.0.0:0"
                    })
                    .map_err(|e| format!("bind: {e}"))?;
                    sock.connect(addr)
                        .map_err(|e| format!("connect {addr}: {e}"))?;
                    sock.set_read_timeout(Some(Duration::from_millis(200))).ok();
                    if !gate(&sh) {
                        return Err("stopped before the start".into());
                    }
                    let u0 = thread_use();
                    let t = Instant::now();
                    let mut sent = 0u64;
                    while t.elapsed() < dur && !osutil::stop::interrupted() {
                        if stream {
                            if sock.send(&msg).is_ok() {
                                sent += 1;
                            }
                        } else {
                            let t0 = Instant::now();
                            if sock.send(&msg).is_ok() && sock.recv(&mut back).is_ok() {
                                let _ = hist.record(t0.elapsed().as_nanos().max(1) as u64);
                                sent += 1;
                            }
                        }
                    }
                    sh.sent_msgs.fetch_add(sent, Ordering::Relaxed);
                    if stream {
                        sh.sent_bytes
                            .fetch_add(sent * size as u64, Ordering::Relaxed);
                    }
                    let u1 = thread_use();
                    Ok((use_delta(&u0, &u1), (!stream).then_some(hist)))
                }
            },
        ));
    }
    let c0 = read_counters();
    let wait = Instant::now();
    while sh.ready.load(Ordering::Relaxed) < 2 * n as u64
        && !sh.stop.load(Ordering::Relaxed)
        && wait.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    if sh.ready.load(Ordering::Relaxed) < 2 * n as u64 {
        sh.stop.store(true, Ordering::Relaxed);
    }
    sh.go.store(true, Ordering::Relaxed);
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
    let secs = elapsed.max(1e-9);
    let sent_b = sh.sent_bytes.load(Ordering::Relaxed) as f64;
    let sent_m = sh.sent_msgs.load(Ordering::Relaxed) as f64;
    let recv_m = sh.recv_msgs.load(Ordering::Relaxed) as f64;
    rep.msgs_per_s = sent_m / secs;
    rep.client_counters = delta(&c0, &c1);
    rep.server_counters = if ns.is_some() {
        server_delta
    } else {
        rep.client_counters.clone()
    };
    if stream {
        rep.sender_bytes_per_s = sent_b / secs;
        rep.receiver_bytes_per_s = recv_at_end / secs;
        rep.recv_msgs_per_s = if tcp {
            recv_at_end / size as f64 / secs
        } else {
            recv_m / secs
        };
        if !tcp && sent_m > 0.0 {
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
        rep.sender_bytes_per_s = sent_m * size as f64 / secs;
        rep.receiver_bytes_per_s = rep.sender_bytes_per_s;
    }
    Ok(rep)
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
    fn counters_parse_the_two_line_sections() {
        let t = "Tcp: RtoAlgorithm RetransSegs OutSegs\nTcp: 1 17 4000\nUdp: InDatagrams\nUdp: 5\n";
        let m = parse_counters(t);
        assert_eq!(m["Tcp"]["RetransSegs"], 17);
        assert_eq!(m["Udp"]["InDatagrams"], 5);
        let live = read_counters();
        assert!(
            live.contains_key("RetransSegs") && live.contains_key("TCPFastRetrans"),
            "{live:?}"
        );
    }

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

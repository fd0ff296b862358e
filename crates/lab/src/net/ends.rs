//! The two ends of one `bench net` repetition, one thread per stream on each side: a server (bound in the
//! namespace when asked, it receives, or echoes one message at a time) and a client (it sends for the
//! window, or sends and waits for each echo, timing the round trip). Both wait at one start gate and
//! report their own CPU use; the server also its namespace's counters before and after.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use results::net::EndUse;

use super::counters::{read_counters, thread_use, use_delta};

/// What a server thread returns: its resource use and its namespace's counters before and after.
pub(super) type ServerEnd = (EndUse, BTreeMap<String, i64>, BTreeMap<String, i64>);

/// What a client thread returns: its resource use and, for a ping-pong, its round trips (ns).
pub(super) type ClientEnd = (EndUse, Option<Histogram<u64>>);

/// What the threads of one repetition share: the gate, the stop flag and the counts.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) stop: AtomicBool,
    pub(super) go: AtomicBool,
    pub(super) ready: AtomicU64,
    pub(super) sent_bytes: AtomicU64,
    pub(super) sent_msgs: AtomicU64,
    pub(super) recv_bytes: AtomicU64,
    pub(super) recv_msgs: AtomicU64,
}

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

/// A read that timed out: the loop looks at the stop flag and reads again.
fn timed_out(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut
}

/// What one end does: TCP or UDP, a stream or a ping-pong, `size`-byte messages.
#[derive(Clone, Copy)]
pub(super) struct Traffic {
    pub(super) tcp: bool,
    pub(super) stream: bool,
    pub(super) size: usize,
}

/// One server thread: joins the namespace `ns` when given, binds `bind`, sends its port on `port_tx`,
/// then serves until the stop flag.
pub(super) fn server(
    sh: &Shared,
    t: Traffic,
    bind: &str,
    ns: Option<&str>,
    port_tx: &Sender<Result<u16, String>>,
) -> Result<ServerEnd, String> {
    if let Some(name) = ns {
        if let Err(e) = super::netns::enter(name).map_err(|e| e.to_string()) {
            let _ = port_tx.send(Err(e.clone()));
            return Err(e);
        }
    }
    let mut buf = vec![0u8; t.size.max(65_536)];
    if t.tcp {
        let l = TcpListener::bind(bind).map_err(|e| format!("bind {bind}: {e}"))?;
        let _ = port_tx.send(Ok(l.local_addr().map_err(|e| e.to_string())?.port()));
        let (mut s, _) = l.accept().map_err(|e| format!("accept: {e}"))?;
        s.set_nodelay(true).ok();
        s.set_read_timeout(Some(Duration::from_millis(200))).ok();
        let c0 = read_counters();
        if !gate(sh) {
            return Err("stopped before the start".into());
        }
        let u0 = thread_use();
        tcp_serve(sh, t, &mut s, &mut buf);
        Ok((use_delta(&u0, &thread_use()), c0, read_counters()))
    } else {
        let sock = UdpSocket::bind(bind).map_err(|e| format!("bind {bind}: {e}"))?;
        let _ = port_tx.send(Ok(sock.local_addr().map_err(|e| e.to_string())?.port()));
        sock.set_read_timeout(Some(Duration::from_millis(100))).ok();
        let c0 = read_counters();
        if !gate(sh) {
            return Err("stopped before the start".into());
        }
        let u0 = thread_use();
        udp_serve(sh, t, &sock, &mut buf);
        Ok((use_delta(&u0, &thread_use()), c0, read_counters()))
    }
}

/// Receives a TCP stream, or echoes exactly one message at a time, until the peer closes or the stop flag.
fn tcp_serve(sh: &Shared, t: Traffic, s: &mut TcpStream, buf: &mut [u8]) {
    loop {
        let r = if t.stream {
            match s.read(buf) {
                Ok(0) => return,
                Ok(k) => {
                    sh.recv_bytes.fetch_add(k as u64, Ordering::Relaxed);
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            s.read_exact(&mut buf[..t.size])
                .map(|()| s.write_all(&buf[..t.size]).is_ok())
                .and_then(|wrote| match wrote {
                    true => Ok(()),
                    false => Err(std::io::ErrorKind::BrokenPipe.into()),
                })
        };
        match r {
            Ok(()) => {}
            Err(e) if timed_out(&e) => {
                if sh.stop.load(Ordering::Relaxed) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Counts UDP datagrams received, or echoes each to its sender, until the stop flag.
fn udp_serve(sh: &Shared, t: Traffic, sock: &UdpSocket, buf: &mut [u8]) {
    while !sh.stop.load(Ordering::Relaxed) {
        if let Ok((k, from)) = sock.recv_from(buf) {
            if t.stream {
                sh.recv_bytes.fetch_add(k as u64, Ordering::Relaxed);
                sh.recv_msgs.fetch_add(1, Ordering::Relaxed);
            } else {
                let _ = sock.send_to(&buf[..k], from);
            }
        }
    }
}

/// One client thread: connects to `addr`, waits at the gate, sends for `window` (or until a stop signal).
pub(super) fn client(
    sh: &Shared,
    t: Traffic,
    addr: SocketAddr,
    window: Duration,
) -> Result<ClientEnd, String> {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let (u0, sent) = if t.tcp {
        let conn = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"));
        let Ok(mut s) = conn else {
            sh.stop.store(true, Ordering::Relaxed);
            return Err(conn.err().unwrap_or_default());
        };
        s.set_nodelay(!t.stream).ok();
        if !gate(sh) {
            return Err("stopped before the start".into());
        }
        let u0 = thread_use();
        let sent = tcp_send(t, &mut s, window, &mut hist);
        let _ = s.shutdown(std::net::Shutdown::Write);
        (u0, sent)
    } else {
        let local = if addr.ip().is_loopback() {
            "127.0.0.1:0"
        } else {
            "0.0.0.0:0"
        };
        let sock = UdpSocket::bind(local).map_err(|e| format!("bind: {e}"))?;
        sock.connect(addr)
            .map_err(|e| format!("connect {addr}: {e}"))?;
        sock.set_read_timeout(Some(Duration::from_millis(200))).ok();
        if !gate(sh) {
            return Err("stopped before the start".into());
        }
        let u0 = thread_use();
        (u0, udp_send(t, &sock, window, &mut hist))
    };
    sh.sent_msgs.fetch_add(sent, Ordering::Relaxed);
    if t.stream {
        sh.sent_bytes
            .fetch_add(sent * t.size as u64, Ordering::Relaxed);
    }
    Ok((use_delta(&u0, &thread_use()), (!t.stream).then_some(hist)))
}

/// Sends over TCP for `window`: a stream, or a message and its echo at a time (each round trip into
/// `hist`). The messages sent, counted locally: shared counters written per message would bounce a cache
/// line between the sender's and the receiver's CPUs.
fn tcp_send(t: Traffic, s: &mut TcpStream, window: Duration, hist: &mut Histogram<u64>) -> u64 {
    let msg = vec![0x5Au8; t.size];
    let mut back = vec![0u8; t.size];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < window && !osutil::stop::interrupted() {
        if t.stream {
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
    sent
}

/// Sends UDP datagrams for `window`, or a datagram and its echo at a time; datagrams sent (a ping-pong
/// counts only those answered).
fn udp_send(t: Traffic, sock: &UdpSocket, window: Duration, hist: &mut Histogram<u64>) -> u64 {
    let msg = vec![0x5Au8; t.size];
    let mut back = vec![0u8; t.size];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < window && !osutil::stop::interrupted() {
        if t.stream {
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
    sent
}

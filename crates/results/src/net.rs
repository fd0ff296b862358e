//! `bench net`: TCP and UDP stream and ping-pong over loopback or a veth pair.

use std::collections::BTreeMap;

use axes::{NetPath, NetTest};
use serde::{Deserialize, Serialize};
use stats::Summary;

use crate::{Envelope, Status};

/// The experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// Tests: tcp-stream, udp-stream, tcp-pingpong, udp-pingpong.
    pub tests: Vec<NetTest>,
    /// Message sizes, bytes.
    pub msg_sizes: Vec<usize>,
    /// Connections (stream) or concurrent ping-pong pairs.
    pub streams: u32,
    /// Measured seconds per repetition.
    pub duration_s: f64,
    /// Repetitions.
    pub repeat: u32,
    /// Between two network namespaces over veth instead of loopback.
    pub netns: bool,
}

/// One end's resource use during a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EndUse {
    /// User CPU, s.
    pub user_s: f64,
    /// System CPU, s.
    pub sys_s: f64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
}

/// One repetition.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Rep {
    /// Bytes per second written by the sender (stream).
    pub sender_bytes_per_s: f64,
    /// Bytes per second read by the receiver (stream).
    pub receiver_bytes_per_s: f64,
    /// Messages per second at the sender (stream) or round trips per second (pingpong).
    pub msgs_per_s: f64,
    /// Messages per second at the receiver (stream).
    pub recv_msgs_per_s: f64,
    /// UDP stream: share of datagrams sent but not received.
    pub udp_loss: Option<f64>,
    /// Ping-pong round trip, us.
    pub rtt_us: Option<RttPcts>,
    /// Kernel counter deltas on the client side (name -> delta).
    pub client_counters: BTreeMap<String, i64>,
    /// Kernel counter deltas on the server side (the same namespace as the client on loopback).
    pub server_counters: BTreeMap<String, i64>,
    /// Client threads' resource use.
    pub client: EndUse,
    /// Server threads' resource use.
    pub server: EndUse,
}

/// Round-trip percentiles, us.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RttPcts {
    /// Median.
    pub p50: f64,
    /// 90th.
    pub p90: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
}

/// Centres and spreads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    /// Sender throughput, bytes/s.
    pub sender_bytes_per_s: Summary,
    /// Receiver throughput, bytes/s.
    pub receiver_bytes_per_s: Summary,
    /// Messages (or round trips) per second.
    pub msgs_per_s: Summary,
    /// RTT p99, us (pingpong).
    pub rtt_p99_us: Option<Summary>,
}

/// One test x size cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// tcp-stream, udp-stream, tcp-pingpong, udp-pingpong.
    pub test: NetTest,
    /// Message size, bytes.
    pub msg_size: usize,
    /// Streams.
    pub streams: u32,
    /// loopback or netns.
    pub path: NetPath,
    /// The preemption model it ran under, when the run switched between models (`--switch-preempt
    /// none,lazy`); otherwise absent, and the model is the host's (`host.kernel.preemption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<axes::model::Model>,
    /// Ran, skipped, failed, interrupted.
    pub status: Status,
    /// Why not.
    pub reason: Option<String>,
    /// Repetitions.
    pub reps: Vec<Rep>,
    /// Summary.
    pub summary: Option<CellSummary>,
}

/// A `bench net` result file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NetResult {
    /// Tool, command line, time, host.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The experiment.
    pub spec: Spec,
    /// Cells.
    pub cells: Vec<Cell>,
}

//! The network namespace `bench net --netns` measures across: made with `ip netns add`, joined to the host
//! namespace by a veth pair with 10.203.0.1/30 (host) and 10.203.0.2/30 (namespace); deleting the
//! namespace removes both ends of the pair. [`NetnsGuard`] deletes it on drop, and a run that died without
//! cleaning up leaves a name with its PID that the next run removes ([`recover_stale_netns`]).

use std::process::Command;

use super::run::NetError;

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
        enter(&self.name)
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            osutil::msg!("preemptlab: removing network namespace {}: {e}", self.name);
        }
    }
}

/// Moves the calling thread into the namespace `name` (setns(2) moves only the calling thread).
pub(super) fn enter(name: &str) -> Result<(), NetError> {
    let enter = |err| NetError::Enter {
        name: name.to_string(),
        err,
    };
    let f = std::fs::File::open(format!("/run/netns/{name}")).map_err(enter)?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| enter(e.into()))
}

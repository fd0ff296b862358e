//! The host's identity for `fleet`: its machine ID (`/etc/machine-id`, machine-id(5)) hashed for this
//! application, so that two hosts with one kernel host name (cloned images, `localhost`) stay two hosts
//! while the raw ID, which systemd asks programs not to disclose, never leaves the host.
//!
//! The derivation is systemd's `sd_id128_get_machine_app_specific()` (sd-id128(3)): HMAC-SHA256 keyed by
//! the 16 bytes of the machine ID over the 16 bytes of an application ID, the first 16 bytes of it made a
//! version 4 UUID. `systemd-id128 machine-id --app-specific=08564301aa244b6e908c20ee3b6efea1` prints the
//! same ID on a host.
//!
//! A `preemptlab vm` guest is a machine of its own, but it sees the host's root filesystem (virtme-ng shares
//! it), `/etc/machine-id` included: hashed as above its results would carry the host's ID and `fleet` would
//! merge them with the host's. So the launcher, which knows the guest's set-up, gives the guest its ID on
//! the kernel command line, `preemptlab.host_id=vm-<32 hex digits>` ([`GUEST_PARAM`]), and [`read`] prefers
//! that parameter (the last one on `/proc/cmdline`) to the machine ID. The guest's ID is the same HMAC keyed
//! by the host's machine ID over the application ID followed by the guest's set-up ([`GuestSetup`]: the
//! kernel image, the model it boots, its vCPUs and memory), made a version 4 UUID and prefixed `vm-`
//! ([`guest_id`]): the same set-up on the same host gets the same ID run after run, another kernel, model
//! or size another one, none of them the host's, and the raw machine ID stays on the host. A launching host
//! without a machine ID passes `none`, and the guest's ID is unavailable (it never falls back to the
//! host's file). A dotted parameter is a module parameter to the kernel: it is neither an error nor handed to
//! init.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::host::Host;
use results::host::fact::Fact;

/// preemptlab's application ID (made once with `systemd-id128 new`).
pub const APP_ID: [u8; 16] = [
    0x08, 0x56, 0x43, 0x01, 0xaa, 0x24, 0x4b, 0x6e, 0x90, 0x8c, 0x20, 0xee, 0x3b, 0x6e, 0xfe, 0xa1,
];

/// Where the machine ID is.
pub const MACHINE_ID: &str = "/etc/machine-id";

/// The 16 bytes of a machine ID as machine-id(5) writes it (32 lowercase hex digits, a newline); None
/// for anything else (an empty file: an image not yet booted; `uninitialized`).
pub fn parse_machine_id(text: &str) -> Option<[u8; 16]> {
    let t = text.trim();
    if t.len() != 32 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, byte) in id.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
    }
    // All zeros is no ID.
    (id != [0; 16]).then_some(id)
}

/// HMAC-SHA256 keyed by `machine_id` over `message`, its first 16 bytes made a version 4 UUID (variant 1,
/// RFC 4122) as sd_id128 makes it, in 32 lowercase hex digits.
fn keyed_uuid(machine_id: &[u8; 16], message: &[&[u8]]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(machine_id)
        .expect("HMAC takes a key of any length");
    for part in message {
        mac.update(part);
    }
    let digest = mac.finalize().into_bytes();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The application-specific ID of `machine_id`, as 32 lowercase hex digits.
pub fn app_specific(machine_id: &[u8; 16]) -> String {
    keyed_uuid(machine_id, &[&APP_ID])
}

/// The kernel parameter that gives a `preemptlab vm` guest its ID.
pub const GUEST_PARAM: &str = "preemptlab.host_id";

/// What [`GUEST_PARAM`] holds when the launching host has no machine ID.
pub const GUEST_WITHOUT_ID: &str = "none";

/// What starts a guest's ID, and tells it from a host's.
pub const GUEST_PREFIX: &str = "vm-";

/// What makes a guest the machine it is, for its ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestSetup<'a> {
    /// The kernel image it boots (its canonical path).
    pub kernel_image: &'a str,
    /// The preemption model it boots (`preempt=`, else the kernel's default; `default` when unknown).
    pub preempt: &'a str,
    /// Its vCPUs.
    pub vcpus: u32,
    /// Its memory, MiB.
    pub memory_mib: u64,
}

/// The ID of a guest with `setup` started on the host whose machine ID is `machine_id`: `vm-` and 32
/// lowercase hex digits. The set-up's fields go in separated by NUL bytes, which no path holds.
pub fn guest_id(machine_id: &[u8; 16], setup: &GuestSetup) -> String {
    let GuestSetup {
        kernel_image,
        preempt,
        vcpus,
        memory_mib,
    } = setup;
    let described = format!(
        "preemptlab vm guest\0kernel_image={kernel_image}\0preempt={preempt}\0vcpus={vcpus}\0memory_mib={memory_mib}"
    );
    format!(
        "{GUEST_PREFIX}{}",
        keyed_uuid(machine_id, &[&APP_ID, described.as_bytes()])
    )
}

/// True for a guest's ID as [`guest_id`] makes it.
pub fn is_guest_id(id: &str) -> bool {
    id.strip_prefix(GUEST_PREFIX).is_some_and(|hex| {
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The value of the last [`GUEST_PARAM`] on a kernel command line (the one the guest goes by), if any.
pub fn guest_param(cmdline: &str) -> Option<&str> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix(GUEST_PARAM)?.strip_prefix('='))
        .next_back()
}

/// The kernel parameter (`preemptlab.host_id=...`) that gives a guest with `setup`, started on `host`, its
/// ID: [`guest_id`] of the host's machine ID, or [`GUEST_WITHOUT_ID`] when the host has none.
pub fn guest_kernel_param(host: &Host, setup: &GuestSetup) -> String {
    let id = host
        .fact(MACHINE_ID)
        .value
        .as_deref()
        .and_then(parse_machine_id)
        .map(|m| guest_id(&m, setup));
    format!(
        "{GUEST_PARAM}={}",
        id.as_deref().unwrap_or(GUEST_WITHOUT_ID)
    )
}

/// The host's ID for preemptlab: a `preemptlab vm` guest's from the kernel command line ([`GUEST_PARAM`]),
/// else from the machine ID; unavailable (with the reason) where there is none.
pub fn read(host: &Host) -> Fact<String> {
    let cmdline = host.fact("/proc/cmdline");
    if let Some(given) = cmdline.value.as_deref().and_then(guest_param) {
        let source = format!(
            "/proc/cmdline {GUEST_PARAM}= (a preemptlab vm guest: the launching host's machine ID hashed with the guest's kernel, model, vCPUs and memory)"
        );
        return if is_guest_id(given) {
            Fact::known(given.to_string(), source)
        } else if given == GUEST_WITHOUT_ID {
            Fact::unavailable(
                source,
                "the host that started this guest has no machine ID (systemd-machine-id-setup makes one there)",
            )
        } else {
            Fact::unavailable(
                source,
                format!(
                    "{given:?} is not a guest ID (vm- and 32 hex digits; preemptlab vm passes one)"
                ),
            )
        };
    }
    let raw = host.fact(MACHINE_ID);
    let source = format!("{MACHINE_ID}, hashed for preemptlab (sd-id128 app-specific)");
    match raw.value {
        Some(text) => match parse_machine_id(&text) {
            Some(id) => Fact::known(app_specific(&id), source),
            None => Fact::unavailable(
                source,
                "not a machine ID (empty or uninitialized: systemd-machine-id-setup makes one)",
            ),
        },
        None => Fact::unavailable(
            source,
            raw.unavailable.unwrap_or_else(|| "unreadable".into()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_specific_id_is_systemds() {
        // Computed with Python's hmac and hashlib the way sd_id128_get_machine_app_specific() does; the same
        // code gave systemd-id128's answer for a real machine ID.
        let id = parse_machine_id("0123456789abcdef0123456789abcdef\n").unwrap();
        assert_eq!(app_specific(&id), "881798f9f4164f58a6e07347221fd7a4");
    }

    #[test]
    fn only_a_machine_id_parses() {
        for bad in [
            "",
            "uninitialized\n",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdeg",
            "00000000000000000000000000000000",
            "0123456789abcdef0123456789abcdef0",
        ] {
            assert!(parse_machine_id(bad).is_none(), "{bad:?}");
        }
    }

    const SETUP: GuestSetup = GuestSetup {
        kernel_image: "/k/vmlinuz-6.18",
        preempt: "none",
        vcpus: 2,
        memory_mib: 2048,
    };

    #[test]
    fn a_guest_id_is_the_hosts_machine_id_keyed_over_the_set_up() {
        // Computed with Python's hmac and hashlib from the description in the module doc.
        let m = parse_machine_id("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(guest_id(&m, &SETUP), "vm-d8d429a008ab4feaa0e218414c777cdd");
        assert!(is_guest_id(&guest_id(&m, &SETUP)));
        // Stable for one set-up; another kernel, model, size or host is another guest, never the host.
        let same_image = String::from("/k/vmlinuz-6.18");
        let same = GuestSetup {
            kernel_image: &same_image,
            ..SETUP
        };
        assert_eq!(guest_id(&m, &same), guest_id(&m, &SETUP));
        let others = [
            GuestSetup {
                kernel_image: "/k/vmlinuz-7.2",
                ..SETUP
            },
            GuestSetup {
                preempt: "lazy",
                ..SETUP
            },
            GuestSetup { vcpus: 1, ..SETUP },
            GuestSetup {
                memory_mib: 512,
                ..SETUP
            },
        ];
        let mut ids: Vec<String> = others.iter().map(|o| guest_id(&m, o)).collect();
        ids.push(guest_id(&m, &SETUP));
        ids.push(guest_id(&[7; 16], &SETUP));
        ids.push(format!("{GUEST_PREFIX}{}", app_specific(&m)));
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "{ids:?}");
    }

    #[test]
    fn the_last_guest_parameter_counts_and_only_a_guest_id_is_one() {
        assert_eq!(guest_param("console=ttyS0 preempt=none"), None);
        assert_eq!(
            guest_param("a preemptlab.host_id=x b preemptlab.host_id=vm-1 c"),
            Some("vm-1")
        );
        assert_eq!(guest_param("preemptlab.host_idx=vm-1"), None);
        assert!(!is_guest_id("d8d429a008ab4feaa0e218414c777cdd"));
        assert!(!is_guest_id("vm-D8D429A008AB4FEAA0E218414C777CDD"));
        assert!(!is_guest_id("vm-d8d429a008ab4feaa0e218414c777cd"));
        assert!(is_guest_id("vm-d8d429a008ab4feaa0e218414c777cdd"));
    }

    fn tree(machine_id: &str, cmdline: Option<&str>) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("etc")).unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("etc/machine-id"), machine_id).unwrap();
        if let Some(c) = cmdline {
            std::fs::write(t.path().join("proc/cmdline"), c).unwrap();
        }
        t
    }

    /// Regression: a `preemptlab vm` guest sees the host's /etc/machine-id, so its results carried the
    /// host's ID and `fleet` merged them with the host's. The launcher's parameter is the guest's ID now.
    #[test]
    fn a_guest_goes_by_the_id_on_its_command_line_not_the_hosts_machine_id_regression() {
        let host_mid = "0123456789abcdef0123456789abcdef\n";
        let on_host = read(&Host::at(tree(host_mid, Some("ro quiet\n")).path()));
        assert_eq!(
            on_host.value.as_deref(),
            Some("881798f9f4164f58a6e07347221fd7a4")
        );
        // What the launcher passes, read back in the guest (which sees the host's machine ID).
        let launcher = tree(host_mid, None);
        let param = guest_kernel_param(&Host::at(launcher.path()), &SETUP);
        assert_eq!(
            param,
            "preemptlab.host_id=vm-d8d429a008ab4feaa0e218414c777cdd"
        );
        let guest = tree(host_mid, Some(&format!("console=ttyS0 {param} init=/x\n")));
        let id = read(&Host::at(guest.path()));
        assert_eq!(
            id.value.as_deref(),
            Some("vm-d8d429a008ab4feaa0e218414c777cdd")
        );
        assert!(id.source.contains("preemptlab vm guest"), "{}", id.source);
        // A launcher without a machine ID: the guest has no ID, and does not take the host's file.
        let param = guest_kernel_param(&Host::at(tree("", None).path()), &SETUP);
        assert_eq!(param, "preemptlab.host_id=none");
        let id = read(&Host::at(tree(host_mid, Some(&param)).path()));
        assert_eq!(id.value, None);
        assert!(id.unavailable.unwrap().contains("has no machine ID"));
        let id = read(&Host::at(
            tree(host_mid, Some("preemptlab.host_id=mine")).path(),
        ));
        assert_eq!(id.value, None);
        assert!(id.unavailable.unwrap().contains("not a guest ID"));
    }
}

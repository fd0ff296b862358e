//! The host's identity for `fleet`: its machine ID (`/etc/machine-id`, machine-id(5)) hashed for this
//! application, so that two hosts with one kernel host name (cloned images, `localhost`) stay two hosts
//! while the raw ID, which systemd asks programs not to disclose, never leaves the host.
//!
//! The derivation is systemd's `sd_id128_get_machine_app_specific()` (sd-id128(3)): HMAC-SHA256 keyed by
//! the 16 bytes of the machine ID over the 16 bytes of an application ID, the first 16 bytes of it made a
//! version 4 UUID. `systemd-id128 machine-id --app-specific=08564301aa244b6e908c20ee3b6efea1` prints the
//! same ID on a host.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::fact::Fact;
use crate::host::Host;

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

/// The application-specific ID of `machine_id`, as 32 lowercase hex digits.
pub fn app_specific(machine_id: &[u8; 16]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(machine_id)
        .expect("HMAC takes a key of any length");
    mac.update(&APP_ID);
    let digest = mac.finalize().into_bytes();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    // A version 4 UUID, variant 1 (RFC 4122), as sd_id128 makes it.
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The host's ID for preemptlab, from its machine ID; unavailable (with the reason) where there is none.
pub fn read(host: &Host) -> Fact<String> {
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
}

# shellcheck shell=bash
# Shell helpers the scripts that fetch from Debian's archive share (scripts/kernels, scripts/cross-arm64,
# scripts/arm64-root). Sourced, not run: the caller defines die() first.
#
# The archive is the one this host's own apt sources already use, never a host typed in here.

# The host's Debian archive URI (not the security archive), from deb822 and one-line sources.
host_mirror() {
  local uri="" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri=$(awk 'tolower($1)=="uris:" { for (i = 2; i <= NF; i++) print $i }' "$f" \
      | grep -v -- '-security' | grep -E '/debian/?$' | head -n1) || true
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ]; then
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -r "$f" ] || continue
      uri=$(awk '$1=="deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' "$f" \
        | grep -v -- '-security' | grep -E '/debian/?$' | head -n1) || true
      [ -n "$uri" ] && break
    done
  fi
  [ -n "$uri" ] || die "no Debian archive URI in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources; add one to the host's apt sources"
  echo "${uri%/}"
}

# The archive's keyring on this host.
keyring() {
  local k=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -r "$k" ] || die "$k missing: apt-get install debian-archive-keyring"
  echo "$k"
}

# The host's own apt settings that decide whether the archive's Release files are taken (a snapshot archive's
# are past their Valid-Until; the host's apt is told to accept them) and how it is reached (a proxy), as
# mmdebstrap --aptopt words: a chroot's apt reads its own configuration, not the host's.
host_aptopts() {
  apt-config dump 2>/dev/null \
    | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy) ' \
    | sed 's/^/--aptopt=/'
}

# Installs the Debian packages named when their command or file is missing: `need_packages CMD_OR_PATH:PKG...`
# (a word with a slash is a path that must exist, else a command on PATH). As root only; `$1` names the caller.
need_packages() {
  local who=$1 w missing=()
  shift
  for w in "$@"; do
    local what=${w%%:*} pkg=${w#*:}
    if [[ $what == */* ]]; then [ -e "$what" ] && continue; else command -v "$what" >/dev/null && continue; fi
    missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing ${missing[*]}; run as root or: apt-get install ${missing[*]}"
  echo "$who: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# Registers QEMU's aarch64 user-mode emulator with binfmt_misc when this kernel does not run arm64 programs
# yet (mmdebstrap --architectures=arm64 runs the packages' maintainer scripts through it), from the rule
# qemu-user-static ships (flag F: the interpreter is opened now, so it works inside a chroot too). Sets
# `binfmt_registered` to the entry it added, for `binfmt_unregister` on exit; an entry that was there
# before is left alone.
# binfmt_misc itself, when mounted here, is unmounted again.
binfmt_registered=""
binfmt_mounted=""
binfmt_aarch64() {
  local rule=/usr/lib/binfmt.d/qemu-aarch64.conf dir=/proc/sys/fs/binfmt_misc
  [ -r "$rule" ] || die "$rule missing: apt-get install qemu-user-static"
  if [ ! -e "$dir/register" ]; then
    mount -t binfmt_misc binfmt_misc "$dir" || die "cannot mount binfmt_misc on $dir (needs root)"
    binfmt_mounted=$dir
  fi
  [ -e "$dir/qemu-aarch64" ] && return 0
  cat "$rule" > "$dir/register" || die "registering $rule with binfmt_misc failed"
  binfmt_registered="$dir/qemu-aarch64"
}
binfmt_unregister() {
  if [ -n "$binfmt_registered" ] && [ -e "$binfmt_registered" ]; then
    echo -1 > "$binfmt_registered" || true
  fi
  if [ -n "$binfmt_mounted" ]; then
    umount "$binfmt_mounted" || true
  fi
  binfmt_registered=""
  binfmt_mounted=""
}

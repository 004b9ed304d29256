#!/usr/bin/env bash
# `make test-other-release`: the whole suite on the other Debian release than this machine's, in a
# debootstrap chroot, as a new user of that release would run it (`make setup && make test`).
# Debian 12 machines test on Debian 13 and the other way round; RELEASE=bookworm|trixie chooses.
# For developers before they stop, not for CI (it takes a fresh system and the whole suite).
#
# The chroot gets this machine's CA certificates, its apt and npm settings (the registries as this
# machine reaches them) and a clone of the committed HEAD, never the work tree's loose files.
# KEEP=1 keeps the chroot's root for the next run (the mounts are always removed).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "make test-other-release: needs root (debootstrap, chroot and mounts); run it as root" >&2
  exit 2
fi

host_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
case "${RELEASE:-}" in
  "") if [ "$host_release" = trixie ]; then RELEASE=bookworm; else RELEASE=trixie; fi ;;
  bookworm | trixie) ;;
  *)
    echo "make test-other-release: RELEASE must be bookworm or trixie, not '$RELEASE'" >&2
    exit 2
    ;;
esac
root=${ROOT:-/var/tmp/svcd-$RELEASE-root}

# The mirror this machine's apt uses: the first URIs: line of a deb822 source, else the first
# `deb` line of sources.list.
mirror_of_host() {
  local uri
  uri=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$uri" ] || uri=$(grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')
  echo "$uri"
}
mirror=${MIRROR:-$(mirror_of_host)}
if [ -z "$mirror" ]; then
  echo "make test-other-release: no Debian mirror found in /etc/apt; set MIRROR=<url of a Debian mirror>" >&2
  exit 2
fi

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" 2>/dev/null || true
  done
  if [ "${KEEP:-0}" != 1 ] && [ -d "$root" ]; then rm -rf --one-file-system "$root"; fi
}
trap cleanup EXIT

mount_in() { # type-or-bind, source, target under $root
  mkdir -p "$root$3"
  if [ "$1" = bind ]; then mount --bind "$2" "$root$3"; else mount -t "$1" "$2" "$root$3"; fi
  mounts+=("$root$3")
}

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
  echo "other release: debootstrap $RELEASE into $root (progress below)"
  rm -rf --one-file-system "$root"
  debootstrap --include=ca-certificates "$RELEASE" "$root" "$mirror"
fi

echo "other release: CA certificates, apt and npm settings from this machine"
cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
grep -lE '^Acquire::' /etc/apt/apt.conf.d/* 2>/dev/null | while read -r f; do cp "$f" "$root/etc/apt/apt.conf.d/"; done
[ -f "$HOME/.npmrc" ] && cp "$HOME/.npmrc" "$root/root/.npmrc"
cp /etc/resolv.conf "$root/etc/resolv.conf"

mount_in proc proc /proc
mount_in sysfs sysfs /sys
mount_in bind /dev /dev
mount_in devpts devpts /dev/pts
mount_in tmpfs tmpfs /dev/shm
mount_in tmpfs tmpfs /run
mkdir -p "$root/run/lock" # as systemd-tmpfiles makes it at boot
# Debian 13 mounts /tmp as tmpfs by default, Debian 12 does not: the chroot does as the release does.
if [ "$RELEASE" = trixie ]; then mount_in tmpfs tmpfs /tmp; fi

chroot "$root" update-ca-certificates >/dev/null
# What a new user brings to the project's own `make setup`: git, make, and Node.js with npm.
# (debootstrap's --include does not resolve npm's dependencies, apt-get does.)
chroot "$root" apt-get update -q
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends git make nodejs npm

# A clone of HEAD, and shared/ beside it as CI has it (read-only), when this checkout has one.
rm -rf "$root/src" && mkdir -p "$root/src"
git clone -q . "$root/src/main"
if [ -d ../shared ]; then mount_in bind "$(cd ../shared && pwd)" /src/shared; fi

echo "other release: make setup && make test in Debian $RELEASE ($(git rev-parse --short HEAD))"
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
  bash -c 'cd /src/main && make setup && make test'

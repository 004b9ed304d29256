#!/usr/bin/env bash
# `make deb`: the one artifact an appliance image ships — build/svcd_<version>_amd64.deb with the
# Deno runtime, the daemon bundled into one JavaScript file, the systemd unit, the nginx example and
# a default policy. (`deno compile` needs a denort base no registry here carries; see design notes.)
set -euo pipefail
cd "$(dirname "$0")/.."
DENO=$PWD/node_modules/.bin/deno
VERSION=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' package.json)
OUT=$PWD/build
ROOT=$OUT/deb-root
rm -rf "$ROOT"
mkdir -p "$ROOT"/{DEBIAN,usr/bin,usr/lib/svcd,lib/systemd/system,etc/svcd,etc/default,usr/share/doc/svcd}

echo "deb: bundling main.ts"
"$DENO" bundle --quiet --platform deno -o "$ROOT/usr/lib/svcd/svcd.js" main.ts
# The public listener runs in a Worker; its module is bundled beside the daemon, where
# lib/server/public_listener.ts looks for it.
"$DENO" bundle --quiet --platform deno -o "$ROOT/usr/lib/svcd/svcd-public-worker.js" \
  lib/server/public_worker.ts
runtime=$("$DENO" eval --quiet 'console.log(Deno.execPath())')
echo "deb: runtime $runtime"
install -m 0755 "$runtime" "$ROOT/usr/lib/svcd/deno"
cat >"$ROOT/usr/bin/svcd" <<'SH'
#!/bin/sh
# svcd: the bundled daemon on the packaged Deno runtime, with the narrowest permissions that work.
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
exec /usr/lib/svcd/deno run --no-config --no-remote --no-npm \
  --allow-ffi --allow-read --allow-write --allow-env=CREDENTIALS_DIRECTORY,NOTIFY_SOCKET --allow-run=systemd-creds \
  /usr/lib/svcd/svcd.js "$@"
SH
chmod 0755 "$ROOT/usr/bin/svcd"
install -m 0644 packaging/svcd.service "$ROOT/lib/systemd/system/svcd.service"
install -m 0644 packaging/svcd.default "$ROOT/etc/default/svcd"
install -m 0644 packaging/nginx-svcd.conf README.md "$ROOT/usr/share/doc/svcd/"
printf '# subject<TAB>key label, one grant per line; reload with: systemctl reload svcd\n' \
  >"$ROOT/etc/svcd/policy"
chmod 0640 "$ROOT/etc/svcd/policy"

cat >"$ROOT/DEBIAN/control" <<CTL
Package: svcd
Version: $VERSION
Architecture: amd64
Maintainer: svcd team <svcd@localhost>
Depends: libc6, systemd (>= 250)
Recommends: softhsm2, nginx
Section: admin
Priority: optional
Description: remote signing service in front of a PKCS#11 v3.2 module
 Signs and verifies (ML-DSA, composite ML-DSA-65+Ed25519, ECDSA, Ed25519, RSA-PSS) for clients
 authenticated by a TLS proxy, over a UNIX socket, with a tamper-evident audit log.
CTL
printf '/etc/svcd/policy\n/etc/default/svcd\n' >"$ROOT/DEBIAN/conffiles"
cat >"$ROOT/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  getent group svcd-proxy >/dev/null || addgroup --system svcd-proxy
  getent passwd svcd >/dev/null || adduser --system --group --no-create-home --home /var/lib/svcd svcd
  # The proxy user reaches the socket through svcd-proxy; the daemon checks its uid (--proxy-uid).
  if getent passwd www-data >/dev/null; then adduser www-data svcd-proxy >/dev/null; fi
  chgrp svcd /etc/svcd/policy
  if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null || true; fi
fi
SH
chmod 0755 "$ROOT/DEBIAN/postinst"

deb="$OUT/svcd_${VERSION}_amd64.deb"
dpkg-deb --root-owner-group -Zgzip --build "$ROOT" "$deb" >/dev/null
echo "deb: $deb ($(du -h "$deb" | cut -f1))"

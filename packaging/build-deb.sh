#!/usr/bin/env bash
# `make deb`: the one artifact an appliance image ships — build/svcd_<version>_amd64.deb with the
# Deno runtime, the daemon bundled into one JavaScript file, the systemd unit with its sysusers and
# tmpfiles, the maintainer scripts, the nginx example, the documentation (README.md, docs/*.md), the
# man pages and, for the client side, the PKCS#11 client module
# (/usr/lib/x86_64-linux-gnu/svcd/libsvcd-pkcs11.so, built here when not built yet).
# (`deno compile` needs a denort base no registry here carries; see the design notes.)
set -euo pipefail
cd "$(dirname "$0")/.."
. packaging/lib.sh
VERSION=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' package.json)
OUT=$PWD/build
ROOT=$OUT/deb-root
rm -rf "$ROOT"
mkdir -p "$ROOT"/{DEBIAN,usr/bin,usr/lib/svcd,usr/lib/systemd/system,usr/lib/sysusers.d} \
  "$ROOT"/{usr/lib/tmpfiles.d,etc/svcd,etc/default,usr/share/doc/svcd,usr/lib/x86_64-linux-gnu/svcd,usr/share/man/man8}

echo "deb: building the PKCS#11 client module"
make --no-print-directory -C pkcs11-module build/libsvcd-pkcs11.so >/dev/null
install -m 0644 pkcs11-module/build/libsvcd-pkcs11.so "$ROOT/usr/lib/x86_64-linux-gnu/svcd/"
strip --strip-unneeded "$ROOT/usr/lib/x86_64-linux-gnu/svcd/libsvcd-pkcs11.so"
install -m 0644 pkcs11-module/README.md "$ROOT/usr/share/doc/svcd/libsvcd-pkcs11.md"

echo "deb: bundling main.ts"
bundle_svcd "$ROOT/usr/lib/svcd"
runtime=$("$DENO" eval --quiet 'console.log(Deno.execPath())')
echo "deb: runtime $runtime"
install -m 0755 "$runtime" "$ROOT/usr/lib/svcd/deno"
flags=$(svcd_permission_flags)
client_flags=$(svcd_client_permission_flags)
cat >"$ROOT/usr/bin/svcd" <<SH
#!/bin/sh
# svcd: the bundled daemon on the packaged Deno runtime, with the narrowest permissions that work:
# \`svcd client\` reaches the network and reads SVCD_*; every other command never does.
export DENO_NO_UPDATE_CHECK=1 NO_COLOR=1
if [ "\$1" = client ]; then
  exec /usr/lib/svcd/deno run --no-config --no-remote --no-npm \\
    $client_flags \\
    /usr/lib/svcd/svcd.js "\$@"
fi
exec /usr/lib/svcd/deno run --no-config --no-remote --no-npm \\
  $flags \\
  /usr/lib/svcd/svcd.js "\$@"
SH
chmod 0755 "$ROOT/usr/bin/svcd"
install -m 0644 packaging/svcd.service "$ROOT/usr/lib/systemd/system/svcd.service"
install -m 0644 packaging/svcd-crl.path packaging/svcd-crl-reload.service "$ROOT/usr/lib/systemd/system/"
install -m 0644 packaging/svcd.sysusers "$ROOT/usr/lib/sysusers.d/svcd.conf"
install -m 0644 packaging/svcd.tmpfiles "$ROOT/usr/lib/tmpfiles.d/svcd.conf"
install -m 0644 packaging/svcd.default "$ROOT/etc/default/svcd"
install -m 0644 packaging/nginx-svcd.conf README.md docs/*.md "$ROOT/usr/share/doc/svcd/"
# README.md links docs/<page>.md as in a checkout; the pages sit beside it (where the unit's
# Documentation= and the tools' help name operations.md), so docs/ is that same folder.
ln -s . "$ROOT/usr/share/doc/svcd/docs"
# svcd(8) and svcd-GROUP(8), generated from the option tables --help prints, gzipped as Debian wants.
"$DENO" run --quiet --allow-read --allow-write packaging/man.ts "$ROOT/usr/share/man/man8" >/dev/null
gzip -9n "$ROOT"/usr/share/man/man8/*.8
printf '# subject<TAB>key label, one grant per line; reload with: systemctl reload svcd\n' \
  >"$ROOT/etc/svcd/policy"
chmod 0640 "$ROOT/etc/svcd/policy"

cat >"$ROOT/DEBIAN/control" <<CTL
Package: svcd
Version: $VERSION
Architecture: amd64
Maintainer: svcd team <svcd@localhost>
Depends: libc6 (>= 2.31), adduser, systemd (>= 250), libcurl4 (>= 7.74), libjson-c5, libssl3
Recommends: softhsm2, nginx
Section: admin
Priority: optional
Description: remote signing service in front of a PKCS#11 v3.2 module
 Signs and verifies (ML-DSA, composite ML-DSA-65+Ed25519, ECDSA, Ed25519, RSA-PSS) for clients
 authenticated by a TLS proxy, over a UNIX socket, with a tamper-evident audit log.
 Clients sign with svcd client, or from any PKCS#11 application through the client module
 /usr/lib/x86_64-linux-gnu/svcd/libsvcd-pkcs11.so.
CTL
printf '/etc/svcd/policy\n/etc/default/svcd\n' >"$ROOT/DEBIAN/conffiles"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm \
  "$ROOT/DEBIAN/"

deb="$OUT/svcd_${VERSION}_amd64.deb"
dpkg-deb --root-owner-group -Zzstd -z3 --build "$ROOT" "$deb" >/dev/null
echo "deb: $deb ($(du -h "$deb" | cut -f1))"

#!/usr/bin/env bash
# `make binary`: build/svcd and build/svcd-client, two executables (`deno compile`) of the one
# bundle. A compiled program has a single permission set, so the daemon's binary keeps the daemon's
# flags (no network) and `svcd client` gets its own binary with the client's flags (network, the
# SVCD_* variables; no FFI, no subprocess), its first argument `client` built in:
# `svcd-client sign …` is `svcd client sign …`.
# It needs DENORT_BIN: a denort, the runtime-only base that `deno compile` writes the program
# into. No registry reachable here carries one (see the design notes); the Debian package
# (make deb) is the artifact built and tested here.
#
# How a denort is told from another executable: a denort is the runtime that, when started,
# looks for the program section `deno compile` added and refuses to start without it, with the
# message "Could not find standalone binary section." (Deno's cli/rt). The deno CLI shares the
# section's name (it writes the section) but not that message, and any other executable has
# neither — so the message is what is checked. A deno CLI given as DENORT_BIN would otherwise
# give a file that starts the REPL instead of svcd.
set -euo pipefail
cd "$(dirname "$0")/.."
. packaging/lib.sh
DENORT_MARKER="Could not find standalone binary section."

refuse() {
  echo "make binary: $1" >&2
  echo "make binary: the Debian package (make deb) is the artifact built here" >&2
  exit 2
}
[ -n "${DENORT_BIN:-}" ] || refuse "set DENORT_BIN to a denort $("$DENO" --version | head -1 | cut -d' ' -f2) executable"
[ -f "$DENORT_BIN" ] && [ -x "$DENORT_BIN" ] || refuse "DENORT_BIN=$DENORT_BIN is not an executable file"
if ! LC_ALL=C grep -aqF "$DENORT_MARKER" "$DENORT_BIN"; then
  refuse "DENORT_BIN=$DENORT_BIN is not a denort (it lacks the runtime's embedded-program check; the deno CLI is not a denort)"
fi

OUT=${SVCD_BUILD_DIR:-$PWD/build}
SRC=$OUT/binary-src
rm -rf "$SRC"
mkdir -p "$SRC"
echo "binary: bundling main.ts"
bundle_svcd "$SRC"
flags=$(svcd_permission_flags)
client_flags=$(svcd_client_permission_flags)
# From a folder holding only the bundle, with no config and no npm: nothing but svcd.js and the
# daemon's Workers is embedded (compiling main.ts in the checkout would embed all of node_modules).
echo "binary: compiling $SRC/svcd.js with $DENORT_BIN (the daemon's permissions)"
# shellcheck disable=SC2086
(cd "$SRC" && DENORT_BIN="$DENORT_BIN" "$DENO" compile --no-config --no-npm $flags \
  --include svcd-public-worker.js --include svcd-request-worker.js --include svcd-policy-worker.js \
  --include svcd-sign-worker.js \
  -o "$OUT/svcd" svcd.js)
echo "binary: compiling $SRC/svcd.js as svcd-client (the client's permissions)"
# The client runs no listener: no Worker is embedded. `client` after the script is kept in the
# executable and comes before the arguments it is started with.
# shellcheck disable=SC2086
(cd "$SRC" && DENORT_BIN="$DENORT_BIN" "$DENO" compile --no-config --no-npm $client_flags \
  -o "$OUT/svcd-client" svcd.js client)
echo "binary: $OUT/svcd $OUT/svcd-client"

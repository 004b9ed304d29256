#!/usr/bin/env bash
# Shared by build-deb.sh and build-binary.sh: the one list of runtime permissions (deno.json's
# `svcd` task) and the one bundle of the daemon (main.ts and what it imports, nothing else).
DENO=${DENO:-$PWD/node_modules/.bin/deno}

# The permission flags of `deno task svcd`, so the package, the binary and development agree.
svcd_permission_flags() {
  local flags
  flags=$(sed -nE 's/.*"svcd": "deno run (.*) main\.ts".*/\1/p' deno.json)
  if [ -z "$flags" ]; then echo "packaging: no svcd task in deno.json" >&2; return 1; fi
  echo "$flags"
}

# The permission flags of `deno task client` (`svcd client`): the network and SVCD_*, no FFI and no
# subprocess; the daemon's own flags stay without network access.
svcd_client_permission_flags() {
  local flags
  flags=$(sed -nE 's/.*"client": "deno run (.*) main\.ts client".*/\1/p' deno.json)
  if [ -z "$flags" ]; then echo "packaging: no client task in deno.json" >&2; return 1; fi
  echo "$flags"
}

# bundle_svcd DIR: DIR/svcd.js, main.ts and its imports as one JavaScript file (npm code
# inlined), DIR/svcd-public-worker.js, the public listener's Worker, which
# lib/server/threads/public_threads.ts looks for beside the bundle, and DIR/svcd-request-worker.js, the
# authenticated listener's request thread (--threads), which lib/server/threads/request_threads.ts looks for,
# DIR/svcd-policy-worker.js, the policy file's reader thread (lib/server/threads/policy_reader.ts),
# and DIR/svcd-sign-worker.js, the sign thread (lib/token/sign_thread/sign_thread.ts).
bundle_svcd() {
  "$DENO" bundle --quiet --platform deno -o "$1/svcd.js" main.ts
  "$DENO" bundle --quiet --platform deno -o "$1/svcd-public-worker.js" lib/server/threads/public_thread.ts
  "$DENO" bundle --quiet --platform deno -o "$1/svcd-request-worker.js" lib/server/threads/request_thread.ts
  "$DENO" bundle --quiet --platform deno -o "$1/svcd-policy-worker.js" lib/server/threads/policy_thread.ts
  "$DENO" bundle --quiet --platform deno -o "$1/svcd-sign-worker.js" lib/token/sign_thread/_worker.ts
}

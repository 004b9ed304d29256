#!/usr/bin/env bash
# `make test`: the whole suite once against SoftHSM2, then the tests in tests/both_modules/ again
# against the project's own PKCS#11 v3.2 test module (tests/module). Ends with a plain
# "N passed, M failed" line, which CI reads.
set -uo pipefail
cd "$(dirname "$0")/.."
DENO=node_modules/.bin/deno
export NO_COLOR=1 DENO_NO_UPDATE_CHECK=1

if [ ! -x "$DENO" ]; then
  echo "make test: Deno is not installed here; run 'make setup' first" >&2
  exit 2
fi
if [ ! -f /usr/lib/softhsm/libsofthsm2.so ]; then
  echo "make test: SoftHSM2 is missing; run 'make setup' (as root it installs softhsm2)" >&2
  exit 2
fi

passed=0
failed=0
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_suite() { # name, env assignments..., -- files...
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  [ $# -gt 0 ] || return 0
  echo "== $name"
  env "${envs[@]}" "$DENO" test -A --quiet "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line
  line=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$log" | tail -1)
  local p f
  p=$(sed -E 's/.*\| ([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.*\| ([0-9]+) failed.*/\1/' <<<"$line")
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [ "$rc" -ne 0 ]; then
    status=1
    [ -n "$line" ] || failed=$((failed + 1))
  fi
}

# The C tests: the test module's own (ML-DSA known answers, every function through the table)
# and the client module's unit tests (configuration, /token parsing, mechanism plans, the status
# table; the certificate walk under malformed input). Each program counts as one.
echo "== C tests (svcmod, libsvcd-pkcs11)"
for test in tests/module:mldsa_test tests/module:p11_test pkcs11-module:unit_test pkcs11-module:cert_test; do
  dir=${test%%:*} prog=${test#*:}
  if make --no-print-directory -s -C "$dir" "build/$prog" >/dev/null &&
    (cd "$dir" && if [ "$prog" = p11_test ]; then "build/$prog" build/libsvcmod.so; else "build/$prog"; fi) >"$log" 2>&1; then
    tail -1 "$log"
    passed=$((passed + 1))
  else
    cat "$log"
    failed=$((failed + 1)); status=1
  fi
done

mapfile -t all < <(find lib ffi tests -name '*_test.ts' | sort)
# The second run: tests/both_modules/, plus any file still named *_matrix_test.ts (the old naming;
# such a file belongs in tests/both_modules/).
mapfile -t matrix < <({ find tests/both_modules -name '*_test.ts'; find lib ffi tests -name '*_matrix_test.ts'; } | sort -u)

run_suite "SoftHSM2 2.6.1" SVCD_TEST_MODULE=softhsm -- "${all[@]}"
if [ -f tests/module/build/libsvcmod.so ]; then
  run_suite "svcmod (PKCS#11 v3.2 test module)" SVCD_TEST_MODULE=svcmod -- "${matrix[@]}"
elif [ ${#matrix[@]} -gt 0 ]; then
  echo "make test: tests/module/build/libsvcmod.so is missing; run 'make setup'" >&2
  failed=$((failed + 1)); status=1
fi

echo "$passed passed, $failed failed"
exit $status

#!/usr/bin/env bash
# `make demo`: a fresh SoftHSM2 token with demo keys, a CA (`svcd ca init`) with one client
# certificate and a policy in .demo/, then the daemon in the foreground on .demo/auth.sock (the
# caller as the proxy uid) and .demo/public.sock (certificates, OCSP). Ctrl-C stops it.
# DEMO_MODULE=svcmod uses the project's PKCS#11 v3.2 test module (ML-DSA and composite keys).
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=$PWD/.demo
DENO=$PWD/node_modules/.bin/deno
[ -x "$DENO" ] || { echo "make demo: run 'make setup' first" >&2; exit 2; }
svcd() { "$DENO" task -q svcd "$@"; }

rm -rf "$DEMO"
mkdir -p "$DEMO"/{tokens,creds,audit,state}
SUBJECT="CN=demo-client,O=Example,C=DE"
if [ "${DEMO_MODULE:-softhsm}" = svcmod ]; then
  MODULE=$PWD/tests/module/build/libsvcmod.so
  printf 'tokendir = %s\nsecure_heap_kb = 4096\n' "$DEMO/tokens" >"$DEMO/svcmod.conf"
  export SVCMOD_CONF=$DEMO/svcmod.conf
  KEYS="demo-ec:ec-p256 demo-ed:ed25519 demo-mldsa:ml-dsa-65 demo-composite:composite-mldsa65-ed25519"
  CA_KEY_TYPE=ml-dsa-65
else
  MODULE=/usr/lib/softhsm/libsofthsm2.so
  printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' \
    "$DEMO/tokens" >"$DEMO/softhsm2.conf"
  export SOFTHSM2_CONF=$DEMO/softhsm2.conf
  KEYS="demo-ec:ec-p256 demo-ed:ed25519"
  CA_KEY_TYPE=ec-p256
fi
export CREDENTIALS_DIRECTORY=$DEMO/creds

echo "demo: initialising token 'demo' in $DEMO/tokens"
svcd token init --module "$MODULE" --token demo --plain-credential-dir "$DEMO/creds"
: >"$DEMO/policy"
for pair in $KEYS; do
  svcd token keygen --module "$MODULE" --token demo --key-label "${pair%%:*}" --key-type "${pair##*:}"
  printf '%s\t%s\n' "$SUBJECT" "${pair%%:*}" >>"$DEMO/policy"
done
svcd token list --module "$MODULE" --token demo

echo "demo: a CA over the token key demo-ca ($CA_KEY_TYPE) and a client certificate for $SUBJECT"
CA=$DEMO/ca
svcd ca init --ca-dir "$CA" --module "$MODULE" --token demo --key-label demo-ca \
  --key-type "$CA_KEY_TYPE" --subject "CN=svcd demo CA,O=Example,C=DE"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEMO/client.key" \
  -subj "/C=DE/O=Example/CN=demo-client" -out "$DEMO/client.csr" 2>/dev/null
svcd ca issue --ca-dir "$CA" --module "$MODULE" --token demo --csr "$DEMO/client.csr" \
  --out "$DEMO/client.pem"

SOCK=$DEMO/auth.sock
PUB=$DEMO/public.sock
cat <<TXT

demo: the daemon starts below. In another terminal:

  # sign
  printf 'hello' | curl -sS --unix-socket $SOCK -H 'X-SVC-Client-Subject: $SUBJECT' \\
      -H 'X-SVC-Key: demo-ec' --data-binary @- http://svcd/sign -o /tmp/demo.sig -D -
  # verify: signature, then message, with the signature's length
  (cat /tmp/demo.sig; printf 'hello') | curl -sS --unix-socket $SOCK \\
      -H 'X-SVC-Client-Subject: $SUBJECT' -H 'X-SVC-Key: demo-ec' \\
      -H "X-SVC-Signature-Length: \$(stat -c %s /tmp/demo.sig)" --data-binary @- http://svcd/verify -i
  # health, and the caller's keys
  curl -sS --unix-socket $SOCK -H 'X-SVC-Client-Subject: $SUBJECT' http://svcd/health
  curl -sS --unix-socket $SOCK -H 'X-SVC-Client-Subject: $SUBJECT' http://svcd/token
  # the public socket: the CA chain, and OCSP for the demo client certificate
  curl -sS --unix-socket $PUB http://svcd/certificates
  openssl ocsp -issuer $CA/ca.pem -cert $DEMO/client.pem -reqout /tmp/demo-ocsp.req
  curl -sS --unix-socket $PUB -H 'Content-Type: application/ocsp-request' \\
      --data-binary @/tmp/demo-ocsp.req http://svcd/ocsp -o /tmp/demo-ocsp.resp
  # (the request carries a nonce, which the answer echoes; -no_nonce because openssl compares it
  #  with a fresh request of its own when given -cert)
  openssl ocsp -respin /tmp/demo-ocsp.resp -issuer $CA/ca.pem -CAfile $CA/ca.pem \\
      -cert $DEMO/client.pem -no_nonce   # EC CA (DEMO_MODULE=svcmod: ML-DSA, which openssl 3.0 lacks)
  # revoke it: the next OCSP answer says revoked, no restart
  ${SOFTHSM2_CONF:+SOFTHSM2_CONF=$SOFTHSM2_CONF }${SVCMOD_CONF:+SVCMOD_CONF=$SVCMOD_CONF }CREDENTIALS_DIRECTORY=$DEMO/creds \\
      $DENO task -q svcd ca revoke \$(openssl x509 -noout -serial -in $DEMO/client.pem | cut -d= -f2) \\
      --reason keyCompromise --ca-dir $CA --module $MODULE --token demo
  # audit chain
  CREDENTIALS_DIRECTORY=$DEMO/creds ${SOFTHSM2_CONF:+SOFTHSM2_CONF=$SOFTHSM2_CONF }${SVCMOD_CONF:+SVCMOD_CONF=$SVCMOD_CONF }\\
      $DENO task -q svcd audit verify --module $MODULE --token demo --audit-dir $DEMO/audit

TXT
# The demo's PIN is a plain file on disk (no service manager here): accepted, with a warning.
exec "$DENO" task -q svcd serve --module "$MODULE" --token demo --socket "$SOCK" --allow-weak-credential \
  --proxy-uid "$(id -u)" --policy "$DEMO/policy" --audit-dir "$DEMO/audit" --state-dir "$DEMO/state" \
  --public-socket "$PUB" --revocation-db "$CA/index.txt" --ocsp-label demo-ca --ca-cert "$CA/ca.pem"

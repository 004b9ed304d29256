#!/usr/bin/env bash
# `make demo`: a fresh SoftHSM2 token with demo keys, a CA (`svcd ca init`) with one client
# certificate and a policy in .demo/, the daemon on .demo/auth.sock and .demo/public.sock, and
# nginx in front of it with the packaged example configuration (packaging/nginx-svcd.conf; only
# paths and ports changed, as tests/support/nginx.ts does): TLS on a loopback port, the demo's
# client certificate required. The demo signs through nginx, shows that nginx's subject header
# replaced the one the client sent, verifies the signature (svcd client verify, and openssl), then
# serves until Ctrl-C (DEMO_EXIT=1: stops after the demonstration).
# DEMO_MODULE=svcmod uses the project's PKCS#11 v3.2 test module (ML-DSA and composite keys);
# DEMO_DIR=DIR puts the demo's files there instead of .demo (tests/demo_test.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${DEMO_DIR:-$PWD/.demo}
DENO=$PWD/node_modules/.bin/deno
[ -x "$DENO" ] || { echo "make demo: run 'make setup' first" >&2; exit 2; }
# `svcd client` is its own task: it alone may reach the network.
svcd() {
  if [ "$1" = client ]; then shift; "$DENO" task -q client "$@"; else "$DENO" task -q svcd "$@"; fi
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# Prints a command as the reader would type it (from the repository's folder), then runs it.
show() {
  local line="" a
  for a in "$@"; do
    a=${a//$DEMO/.demo}
    if [[ $a =~ ^[A-Za-z0-9_@%+=:,./-]+$ ]]; then line+=" $a"; else line+=" '$a'"; fi
  done
  printf '\n$%s\n' "$line"
  "$@"
}

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
mkdir -p "$DEMO/tls" "$DEMO/nginx"
# nginx checks client certificates against the CA's CRL: an empty one to start with.
svcd ca crl --ca-dir "$CA" --module "$MODULE" --token demo --out "$DEMO/tls/client-ca.crl" >/dev/null

echo "demo: nginx's server certificate for 127.0.0.1, from a server CA the client trusts (--cacert)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
  -subj "/CN=svcd demo server CA" -keyout "$DEMO/tls/server-ca.key" -out "$DEMO/tls/server-ca.pem" \
  2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
  -keyout "$DEMO/tls/server.key" 2>/dev/null |
  openssl x509 -req -CA "$DEMO/tls/server-ca.pem" -CAkey "$DEMO/tls/server-ca.key" -days 7 \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n') \
    -out "$DEMO/tls/server.pem" 2>/dev/null
PORT=$(free_port)
PUBLIC_PORT=$(free_port)
METRICS_PORT=$(free_port)
# The packaged example, paths and ports changed; nginx's workers run as this user, the proxy uid.
sed -e "s|unix:/run/svcd/auth.sock|unix:$SOCK|" -e "s|unix:/run/svcd/public.sock|unix:$PUB|" \
  -e "s|unix:/run/svcd/metrics.sock|unix:$DEMO/metrics.sock|" \
  -e "s|/etc/svcd/tls/server.pem|$DEMO/tls/server.pem|" \
  -e "s|/etc/svcd/tls/server.key|$DEMO/tls/server.key|" \
  -e "s|/etc/svcd/tls/client-ca.pem|$CA/ca.pem|" \
  -e "s|/var/lib/svcd/crl/full.pem|$DEMO/tls/client-ca.crl|" \
  -e "s|listen 443 ssl;|listen 127.0.0.1:$PORT ssl;|" -e "s|listen 80;|listen 127.0.0.1:$PUBLIC_PORT;|" \
  -e "s|listen 9464;|listen 127.0.0.1:$METRICS_PORT;|" packaging/nginx-svcd.conf >"$DEMO/nginx/site.conf"
{
  if [ "$(id -u)" = 0 ]; then echo "user $(id -un) $(id -gn);"; fi
  cat <<CONF
worker_processes 1;
pid $DEMO/nginx/nginx.pid;
error_log $DEMO/nginx/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $DEMO/nginx/body;
  proxy_temp_path $DEMO/nginx/proxy;
  include $DEMO/nginx/site.conf;
}
CONF
} >"$DEMO/nginx/nginx.conf"

RUNTIME=$("$DENO" eval --quiet 'console.log(Deno.execPath())')
daemon=""
stop_all() {
  if [ -f "$DEMO/nginx/nginx.pid" ]; then
    /usr/sbin/nginx -p "$DEMO/nginx" -c "$DEMO/nginx/nginx.conf" -e "$DEMO/nginx/error.log" -s stop \
      2>/dev/null || true
  fi
  if [ -n "$daemon" ]; then
    kill -TERM "$daemon" 2>/dev/null || true
    wait "$daemon" 2>/dev/null || true
  fi
}
trap stop_all EXIT
trap 'exit 130' INT TERM

echo "demo: the daemon on $SOCK and $PUB (log: $DEMO/daemon.log)"
# The demo's PIN is a plain file on disk (no service manager here): accepted, with a warning.
# Run by the runtime itself (not through `deno task`), so the TERM at the end reaches the daemon.
"$RUNTIME" run --allow-ffi --allow-read --allow-write --allow-env=CREDENTIALS_DIRECTORY,NOTIFY_SOCKET \
  --allow-run=systemd-creds main.ts serve --module "$MODULE" --token demo --socket "$SOCK" --allow-weak-credential \
  --proxy-uid "$(id -u)" --policy "$DEMO/policy" --audit-dir "$DEMO/audit" --state-dir "$DEMO/state" \
  --public-socket "$PUB" --revocation-db "$CA/index.txt" --ocsp-label demo-ca --ca-cert "$CA/ca.pem" \
  2>"$DEMO/daemon.log" &
daemon=$!
# Waits for the condition itself: the socket answers /health (or the daemon has exited).
until curl -sf --unix-socket "$SOCK" -H "X-SVC-Client-Subject: $SUBJECT" -o /dev/null http://svcd/health; do
  kill -0 "$daemon" 2>/dev/null || { cat "$DEMO/daemon.log" >&2; exit 1; }
  sleep 0.1
done
/usr/sbin/nginx -p "$DEMO/nginx" -c "$DEMO/nginx/nginx.conf" -e "$DEMO/nginx/error.log"
echo "demo: nginx on https://127.0.0.1:$PORT (client certificate required) and http://127.0.0.1:$PUBLIC_PORT"

TLS="--cacert $DEMO/tls/server-ca.pem --cert $DEMO/client.pem --key $DEMO/client.key"
printf 'hello' >"$DEMO/hello.txt"
cat <<TXT

demo: a signature through nginx. The client also sends its own X-SVC-Client-Subject claiming to
be CN=admin: nginx replaces it with the subject of the client certificate, which the audit log
records and the policy grants.
TXT
# shellcheck disable=SC2086  # TLS is several words on purpose
show curl -sS $TLS -H 'X-SVC-Client-Subject: CN=admin,O=Example,C=DE' -H 'X-SVC-Key: demo-ec' \
  --data-binary @"$DEMO/hello.txt" -o "$DEMO/hello.sig" -w '%{http_code}\n' \
  "https://127.0.0.1:$PORT/sign"
printf '\n$ grep %s %s | tail -n 1\n' "'\"event\":\"sign\"'" ".demo/audit/audit.log.*"
grep '"event":"sign"' "$DEMO"/audit/audit.log.* | tail -n 1
export SVCD_ADDR=https://127.0.0.1:$PORT SVCD_CACERT=$DEMO/tls/server-ca.pem \
  SVCD_CLIENT_CERT=$DEMO/client.pem SVCD_CLIENT_KEY=$DEMO/client.key
cat <<TXT

demo: verified with the key's public key fetched through nginx (svcd client, SVCD_ADDR=$SVCD_ADDR
and the certificate files in SVCD_CACERT, SVCD_CLIENT_CERT, SVCD_CLIENT_KEY):
TXT
show svcd client verify --key-label demo-ec "$DEMO/hello.txt" "$DEMO/hello.sig"
cat <<TXT

demo: signed again through nginx in openssl's form (ECDSA X9.62 DER) and verified by openssl with
the public key from the token:
TXT
show svcd client sign --key-label demo-ec --format der --out "$DEMO/hello.der" "$DEMO/hello.txt"
show svcd token pubkey --module "$MODULE" --token demo --key-label demo-ec --out "$DEMO/demo-ec.pem"
show openssl dgst -sha256 -verify "$DEMO/demo-ec.pem" -signature "$DEMO/hello.der" "$DEMO/hello.txt"

cat <<TXT

demo: more to try in another terminal, through nginx:

  export SVCD_ADDR=$SVCD_ADDR SVCD_CACERT=$SVCD_CACERT \\
      SVCD_CLIENT_CERT=$SVCD_CLIENT_CERT SVCD_CLIENT_KEY=$SVCD_CLIENT_KEY
  $DENO task -q client keys
  curl -sS $TLS \\
      https://127.0.0.1:$PORT/token
  # verify: signature, then message, with the signature's length
  (cat $DEMO/hello.sig; printf 'hello') | curl -sS $TLS \\
      -H 'X-SVC-Key: demo-ec' -H "X-SVC-Signature-Length: \$(stat -c %s $DEMO/hello.sig)" \\
      --data-binary @- https://127.0.0.1:$PORT/verify -i
  # the public side: the CA chain, and OCSP for the demo client certificate
  curl -sS http://127.0.0.1:$PUBLIC_PORT/certificates
  openssl ocsp -issuer $CA/ca.pem -cert $DEMO/client.pem -no_nonce \\
      -url http://127.0.0.1:$PUBLIC_PORT/ocsp -CAfile $CA/ca.pem

and on the daemon's sockets directly (as the proxy uid):

  curl -sS --unix-socket $SOCK -H 'X-SVC-Client-Subject: $SUBJECT' http://svcd/health
  # revoke the client: the next OCSP answer says revoked, no restart
  ${SOFTHSM2_CONF:+SOFTHSM2_CONF=$SOFTHSM2_CONF }${SVCMOD_CONF:+SVCMOD_CONF=$SVCMOD_CONF }CREDENTIALS_DIRECTORY=$DEMO/creds \\
      $DENO task -q svcd ca revoke \$(openssl x509 -noout -serial -in $DEMO/client.pem | cut -d= -f2) \\
      --reason keyCompromise --ca-dir $CA
  # audit chain
  CREDENTIALS_DIRECTORY=$DEMO/creds ${SOFTHSM2_CONF:+SOFTHSM2_CONF=$SOFTHSM2_CONF }${SVCMOD_CONF:+SVCMOD_CONF=$SVCMOD_CONF }\\
      $DENO task -q svcd audit verify --module $MODULE --token demo --audit-dir $DEMO/audit

TXT
if [ "${DEMO_EXIT:-0}" = 1 ]; then
  echo "demo: done (DEMO_EXIT=1)"
  exit 0
fi
echo "demo: serving until Ctrl-C"
wait "$daemon"

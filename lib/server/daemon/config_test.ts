import assert from "node:assert/strict";
import { ConfigError, parseServeArgs } from "./config.ts";
import { SERVE_COMMAND, SERVE_OPTIONS } from "./serve_options.ts";
import { groupHelp } from "../../cli/options.ts";

const serveHelp = () => groupHelp(SERVE_COMMAND);
import { checkFileLimit, StartupError } from "./daemon.ts";

const env = { get: (_: string) => undefined };

Deno.test("config: the contract's defaults (queue depth 256, session cap 127)", () => {
  const c = parseServeArgs(["--proxy-uid", "33"], env);
  assert.equal(c.listener.queueDepth, 256);
  assert.equal(c.token.maxSessions, 127);
  assert.equal(c.listener.maxBodyBytes, 1 << 20);
  assert.equal(c.listener.proxyUid, 33);
});

Deno.test("config: each option lands in the structure its library takes", () => {
  const c = parseServeArgs([
    "--proxy-uid=7",
    "--socket=/s",
    "--policy=/p",
    "--policy-max-grants=2000000",
    "--module=/m.so",
    "--token=t",
    "--workers=3",
    "--queue-depth=9",
    "--max-body=100",
    "--max-sessions=5",
    "--inline-sign-limit-us=0",
    "--audit-dir=/a",
    "--state-dir=/st",
    "--checkpoint-every=50",
    "--refusal-threshold=4",
    "--allow-weak-credential",
  ], env);
  assert.deepEqual(c.listener, {
    path: "/s",
    proxyUid: 7,
    queueDepth: 9,
    maxBodyBytes: 100,
    workers: 3,
  });
  assert.deepEqual(c.token, {
    modulePath: "/m.so",
    tokenLabel: "t",
    maxSessions: 5,
    inlineSignLimitUs: 0,
    signThread: false, // --inline-sign-limit-us=0: every signature on the pool, none quick
    credentialsDir: undefined,
    allowWeakCredential: true,
  });
  assert.equal(parseServeArgs(["--proxy-uid", "1"], env).token.allowWeakCredential, false);
  assert.equal(parseServeArgs(["--proxy-uid", "1"], env).token.inlineSignLimitUs, 300);
  assert.equal(
    parseServeArgs(["--proxy-uid", "1"], env).token.signThread,
    navigator.hardwareConcurrency > 1,
    "the main thread alone: a sign thread when there is a second core",
  );
  const withThreads = parseServeArgs(["--proxy-uid", "1", "--threads", "2"], env);
  assert.equal(withThreads.token.signThread, false, "request threads sign on their own threads");
  assert.deepEqual(c.audit, {
    dir: "/a",
    checkpointEvery: 50,
    checkpointIntervalMs: 60_000,
    syslogSocket: "/dev/log",
  });
  assert.equal(c.metrics, undefined);
  assert.deepEqual(c.policy, { path: "/p", maxGrants: 2_000_000 });
  assert.equal(c.throttle.stateDir, "/st");
  assert.equal(c.throttle.threshold, 4);
  assert.equal(c.throttle.refillSeconds, 60, "unset tuning takes lib/throttle's default");
  assert.equal(c.public, undefined);
});

Deno.test("config: --proxy-uid is required and numbers are checked with a message naming the option", () => {
  assert.throws(
    () => parseServeArgs([], env),
    (e) =>
      e instanceof ConfigError && e.option === "proxy-uid" &&
      /--proxy-uid is required/.test(e.message),
  );
  for (const bad of ["-1", "1.5", "x", "0x10", "99999999999"]) {
    assert.throws(
      () => parseServeArgs(["--proxy-uid", "33", "--workers", bad], env),
      (e) => e instanceof ConfigError && e.option === "workers" && /--workers/.test(e.message),
    );
  }
  assert.throws(() => parseServeArgs(["--proxy-uid", "33", "--bogus"], env), ConfigError);
  assert.throws(
    () => parseServeArgs(["--proxy-uid", "33", "--policy", ""], env),
    /--policy is empty/,
  );
});

Deno.test("config: refusal-budget values are checked together and named by their option", () => {
  assert.throws(
    () => parseServeArgs(["--proxy-uid", "33", "--refusal-base-delay", "600"], env),
    (e) =>
      e instanceof ConfigError && e.option === "refusal-max-delay" &&
      /^--refusal-max-delay must be a whole number from 600 to 86400, got 300$/.test(e.message),
  );
  const c = parseServeArgs(
    ["--proxy-uid", "33", "--refusal-base-delay", "600", "--refusal-max-delay", "900"],
    env,
  );
  assert.equal(c.throttle.baseDelaySeconds, 600);
  assert.equal(c.throttle.maxDelaySeconds, 900);
});

Deno.test("config: CREDENTIALS_DIRECTORY comes from the environment", () => {
  const c = parseServeArgs(["--proxy-uid", "0"], {
    get: (n) => n === "CREDENTIALS_DIRECTORY" ? "/run/c" : undefined,
  });
  assert.equal(c.token.credentialsDir, "/run/c");
});

Deno.test("config: help lists every option of the table", () => {
  const help = serveHelp();
  for (const flag of Object.keys(SERVE_OPTIONS)) assert.ok(help.includes(`--${flag}`), flag);
});

Deno.test("config: the public listener's part, absent without --public-socket", () => {
  assert.equal(parseServeArgs(["--proxy-uid", "33"], env).public, undefined);
  const all = parseServeArgs([
    "--proxy-uid=33",
    "--public-socket=/p.sock",
    "--revocation-db=/r.db",
    "--ocsp-label=o",
    "--ocsp-cert=/o.pem",
  ], env);
  assert.deepEqual(all.public, {
    socket: "/p.sock",
    revocationDb: "/r.db",
    ocspLabel: "o",
    caCertificates: "/var/lib/svcd/ca/ca.pem",
    responderCertificate: "/o.pem",
    validitySeconds: 3600,
    maxEntries: 10_000_000,
    threads: 2,
    nice: 19,
    crl: undefined, // no --ca-dir: the public side keeps no CRLs
  });
  const threads = (args: string[]) =>
    parseServeArgs([
      "--proxy-uid=33",
      "--public-socket=/p",
      "--revocation-db=/r",
      "--ocsp-label=o",
      ...args,
    ], env)
      .public?.threads;
  assert.equal(threads(["--public-threads=1"]), 1);
  assert.throws(
    () => threads(["--public-threads=0"]),
    (e) => e instanceof ConfigError && e.option === "public-threads",
  );
});

Deno.test("config: --public-socket needs --revocation-db and --ocsp-label; they need it", () => {
  const refused = (args: string[], option: string, pattern: RegExp) =>
    assert.throws(
      () => parseServeArgs(["--proxy-uid=33", ...args], env),
      (e) => e instanceof ConfigError && e.option === option && pattern.test(e.message),
      args.join(" "),
    );
  refused(["--public-socket=/p", "--ocsp-label=o"], "revocation-db", /needs --revocation-db/);
  refused(["--public-socket=/p", "--revocation-db=/r"], "ocsp-label", /needs --ocsp-label/);
  refused(["--ocsp-label=o"], "ocsp-label", /--ocsp-label needs --public-socket/);
  refused(["--revocation-db=/r"], "revocation-db", /needs --public-socket/);
  refused(["--public-url=ftp://x"], "public-url", /not an http\(s\) URL/);
  refused(["--public-url=http://x/?q"], "public-url", /not an http\(s\) URL/);
  const url = parseServeArgs(["--proxy-uid=33", "--public-url=https://pki.example/"], env);
  assert.equal(url.publicUrl, "https://pki.example");
});

Deno.test("config: the open-file limit check names the number to change", () => {
  const c = parseServeArgs(["--proxy-uid", "33"], env);
  checkFileLimit(c, { soft: 4096, hard: 4096 });
  assert.throws(
    () =>
      checkFileLimit({ ...c, listener: { ...c.listener, queueDepth: 5000 } }, {
        soft: 4096,
        hard: 4096,
      }),
    (e) => e instanceof StartupError && /lower --queue-depth or raise LimitNOFILE/.test(e.message),
  ); // Each public thread counts its handler slots and sessions: 2 × 256 + 3 × (16 + 127) + slack.
  const pub = parseServeArgs([
    "--proxy-uid=33",
    "--public-socket=/p",
    "--revocation-db=/r",
    "--ocsp-label=o",
  ], env);
  assert.throws(
    () => checkFileLimit(pub, { soft: 900, hard: 4096 }),
    (e) => e instanceof StartupError && /× 3 thread\(s\) with a listener/.test(e.message),
  );
  checkFileLimit(pub, { soft: 1100, hard: 4096 });
  // Request threads too: 256 + 3 × (16 + 127) + 64 = 749.
  const threaded = parseServeArgs(["--proxy-uid=33", "--threads=2"], env);
  assert.throws(
    () => checkFileLimit(threaded, { soft: 700, hard: 4096 }),
    (e) => e instanceof StartupError && /× 3 thread\(s\) with a listener/.test(e.message),
  );
  checkFileLimit(threaded, { soft: 749, hard: 4096 });
});

Deno.test({
  name: "config: the daemon's options load neither the token CLI nor its crypto libraries",
  permissions: { run: true, read: true, env: true },
  fn: async () => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", new URL("./config.ts", import.meta.url).pathname],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const graph = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: { specifier: string }[];
    };
    const loaded = graph.modules.map((m) => m.specifier);
    assert.ok(loaded.some((s) => s.endsWith("/lib/token/defaults.ts")), loaded.join("\n"));
    for (const s of loaded) {
      assert.ok(!s.includes("/lib/token_admin/"), `config.ts loads ${s}`);
      assert.ok(!s.startsWith("npm:"), `config.ts loads ${s}`);
    }
  },
});

Deno.test("config: --threads is at most --workers; the default is lowered to --workers", () => {
  const threads = (args: string[]) => parseServeArgs(["--proxy-uid", "33", ...args], env).threads;
  assert.equal(threads(["--threads=0"]), 0, "0: the main thread serves the socket");
  assert.equal(threads(["--workers=4", "--threads=4"]), 4);
  assert.equal(threads([]), 0, "default: the main thread serves (measured faster on 2 cores)");
  assert.equal(threads(["--workers=1", "--threads=1"]), 1);
  assert.throws(
    () => threads(["--workers=2", "--threads=3"]),
    (e) => e instanceof ConfigError && e.option === "threads" && /--workers 2/.test(e.message),
  );
  assert.match(serveHelp(), /--threads N +threads serving the authenticated socket/);
});

Deno.test("checkpoint interval, syslog socket and metrics socket options", () => {
  const c = parseServeArgs([
    "--proxy-uid",
    "33",
    "--checkpoint-interval",
    "5",
    "--syslog-socket",
    "/tmp/x/log",
    "--metrics-socket",
    "/run/svcd/metrics.sock",
  ]);
  assert.equal(c.audit.checkpointIntervalMs, 5000);
  assert.equal(c.audit.syslogSocket, "/tmp/x/log");
  assert.deepEqual(c.metrics, { socket: "/run/svcd/metrics.sock", peerUid: 33 });
  const own = parseServeArgs(["--proxy-uid", "33", "--metrics-socket", "/m", "--metrics-uid", "7"]);
  assert.equal(own.metrics?.peerUid, 7);
  assert.equal(
    parseServeArgs(["--proxy-uid", "1", "--syslog-socket", "none"]).audit.syslogSocket,
    undefined,
  );
  assert.throws(
    () => parseServeArgs(["--proxy-uid", "1", "--metrics-uid", "7"]),
    /needs --metrics-socket/,
  );
  assert.throws(
    () => parseServeArgs(["--proxy-uid", "1", "--checkpoint-interval", "0"]),
    /from 1 to 86400/,
  );
});

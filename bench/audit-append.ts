/**
 * Audit append throughput with group commit: appends/s and fdatasync per append at c = 1, 16, 64
 * concurrent appenders, with the MAC computed by Web Crypto and by the real token (SoftHSM2
 * `svc-audit`, C_Sign CKM_SHA256_HMAC), plus the serial MAC rate that caps the chain.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/audit-append.ts            # both key kinds
 * node_modules/.bin/deno run -A bench/audit-append.ts --no-token # Web Crypto only
 * ```
 */
import { benchArgs } from "./_args.ts";
import { type AuditKeys, auditKeysFromToken, AuditLog } from "../lib/audit/mod.ts";
import { softwareAuditKeys } from "../tests/support/audit_software_keys.ts";
import { Token } from "../lib/token/mod.ts";
import { makeTestToken } from "../tests/support/token.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Audit append throughput with group commit: appends/s and fdatasync per append at " +
    "c = 1, 16, 64 concurrent appenders, with the MAC computed by Web Crypto and by the real " +
    "token (SoftHSM2 svc-audit), plus the serial MAC rate that caps the chain.",
  options: {
    "no-token": { type: "boolean", default: false, help: "Web Crypto only, no token" },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/audit-append.ts",
    "node_modules/.bin/deno run -A bench/audit-append.ts --no-token",
  ],
});

const CONCURRENCY = [1, 16, 64];
/** Appends per run: enough for a steady state, small enough for a shared 2-core machine. */
const APPENDS: Record<number, number> = { 1: 2_000, 16: 20_000, 64: 40_000 };

/** One line shaped like the daemon's sign line. */
const SIGN_FIELDS = {
  key: "k-ec",
  mechanism: "CKM_ECDSA",
  message_sha256: "ab".repeat(32),
  signature_sha256: "cd".repeat(32),
};

interface Row {
  keys: string;
  c: number;
  appends: number;
  perSecond: number;
  syncsPerAppend: number;
  meanGroup: number;
  p99Ms: number;
}

async function measure(name: string, keys: AuditKeys, c: number): Promise<Row> {
  const dir = await Deno.makeTempDir({ prefix: "bench-audit-" });
  const log = await AuditLog.open({ dir, keys, login: { bench: true } });
  const total = APPENDS[c];
  const latencies: number[] = [];
  let next = 0;
  const before = log.stats();
  const t0 = performance.now();
  const worker = async () => {
    while (next < total) {
      const id = next++;
      const start = performance.now();
      await log.append("sign", "CN=bench,O=Example", { ...SIGN_FIELDS, request_id: `r${id}` });
      latencies.push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
  const seconds = (performance.now() - t0) / 1000;
  const after = log.stats();
  await log.close();
  await Deno.remove(dir, { recursive: true });
  latencies.sort((a, b) => a - b);
  const lines = after.lines - before.lines;
  const syncs = after.syncs - before.syncs;
  return {
    keys: name,
    c,
    appends: total,
    perSecond: Math.round(total / seconds),
    syncsPerAppend: Number((syncs / total).toFixed(3)),
    meanGroup: Number((lines / syncs).toFixed(1)),
    p99Ms: Number(latencies[Math.floor(latencies.length * 0.99)].toFixed(2)),
  };
}

/** MACs per second when each waits for the previous one, as the chain must. */
async function serialMacRate(keys: AuditKeys): Promise<number> {
  const data = new Uint8Array(300);
  const n = 5_000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await keys.mac(data);
  return Math.round(n / ((performance.now() - t0) / 1000));
}

async function runAll(name: string, keys: AuditKeys): Promise<void> {
  console.log(`${name}: serial MAC rate (the chain's ceiling) ${await serialMacRate(keys)}/s`);
  for (const c of CONCURRENCY) {
    const r = await measure(name, keys, c);
    console.log(
      `  c=${String(c).padStart(2)}  ${String(r.perSecond).padStart(6)} appends/s  ` +
        `${r.syncsPerAppend} fdatasync/append  mean group ${r.meanGroup}  p99 ${r.p99Ms} ms  (${r.appends} appends)`,
    );
  }
}

if (import.meta.main) {
  console.log(`audit append bench (temp dir on ${Deno.build.os}; fdatasync on the work disk)`);
  await runAll("Web Crypto HMAC", (await softwareAuditKeys()).keys);
  if (!values["no-token"]) {
    const t = await makeTestToken();
    try {
      for (const [k, v] of Object.entries(t.env)) Deno.env.set(k, v);
      const token = Token.open({ modulePath: t.modulePath, tokenLabel: t.tokenLabel });
      await token.login(Token.readPinCredential(t.credentialsDir));
      await runAll("token svc-audit (SoftHSM2)", auditKeysFromToken(token));
      token.close();
    } finally {
      await t.cleanup();
    }
  }
}

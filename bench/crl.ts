/**
 * CRLs at scale: an index.txt of --certs certificates (default 1 000 000) with --revoked of them
 * revoked (default 100 000), made in a temporary folder. In the same run, on the same file:
 *
 * 1. svcd's path, whole: the compact reader loads the file, one pass encodes the revoked entries,
 *    the full CRL is written and signed (ECDSA P-256; node:crypto in software, so the figure is the
 *    daemon's work and not the token's);
 * 2. the same with --partitions (default 16): the full CRL and every partition's;
 * 3. `openssl ca -gencrl` on the same index with a P-256 key file;
 * 4. one revocation more, then the daemon's CrlKeeper round: the file re-read, the changed
 *    partition re-signed and written, then the full CRL; timed until each is written;
 * 5. the same round's steps one by one: where its time goes.
 *
 * Prints ms per step (median of --runs), the ratio to openssl, and the resident memory.
 *
 * Usage: deno run -A bench/crl.ts [--certs N] [--revoked N] [--partitions N] [--runs N]
 */
import { createPrivateKey, sign } from "node:crypto";
import { benchArgs, count, valueOption } from "./_args.ts";
import { IndexFileSource } from "../lib/ocsp/index_source.ts";
import { RevokedSet } from "../lib/ca/crl.ts";
import { CrlKeeper, crlTimes, signCrls, writeCrlFiles } from "../lib/ca/crl_publish.ts";
import type { Signer } from "../lib/ocsp/algorithms.ts";
import { readCertificates } from "../lib/ocsp/certificate.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "CRLs of --certs certificates (--revoked of them revoked): svcd's load, build and " +
    "sign, whole and in --partitions, against openssl ca -gencrl on the same index.txt in the " +
    "same run; after one revocation more, the daemon's round until the partition's CRL is " +
    "written and until the full CRL is; resident memory.",
  options: {
    certs: valueOption(count, "1000000", "certificates in index.txt"),
    revoked: valueOption(count, "100000", "of them revoked"),
    partitions: valueOption(count, "16", "CRL partitions"),
    runs: valueOption(count, "3", "runs per figure (median)"),
  },
  examples: ["deno run -A bench/crl.ts", "deno run -A bench/crl.ts --certs 100000 --runs 5"],
});
const certs = Number(values.certs), revoked = Number(values.revoked);
const partitions = Number(values.partitions), runs = Number(values.runs);
const dir = await Deno.makeTempDir({ prefix: "svcd-bench-crl-" });

async function run(cmd: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** index.txt's text with its first valid certificate revoked. */
function revokeOneMore(text: string): string {
  const at = text.indexOf("\nV\t") + 1;
  const valid = "V\t301231235959Z\t\t";
  return text.slice(0, at) + "R\t301231235959Z\t250601000000Z,superseded\t" +
    text.slice(at + valid.length);
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return median(times);
}

try {
  // The CA: a P-256 key file for openssl, the same key signing svcd's CRLs in software.
  await run("openssl", [
    "ecparam",
    "-name",
    "prime256v1",
    "-genkey",
    "-noout",
    "-out",
    `${dir}/ca.key`,
  ]);
  await run("openssl", [
    "req",
    "-new",
    "-x509",
    "-key",
    `${dir}/ca.key`,
    "-out",
    `${dir}/ca.pem`,
    "-days",
    "30",
    "-subj",
    "/CN=bench CA",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  const key = createPrivateKey(await Deno.readTextFile(`${dir}/ca.key`));
  const signer: Signer = {
    keyType: "ec-p256",
    sign: (tbs) => new Uint8Array(sign("sha256", tbs, { key, dsaEncoding: "ieee-p1363" })),
  };
  const ca = readCertificates(await Deno.readFile(`${dir}/ca.pem`))[0];
  const issuer = { name: ca.subject, spki: ca.spki, crlUrl: "http://pki.example.org/crl" };

  // index.txt: 16-byte serials counted up from a random start, as svcd ca issues them.
  const index = `${dir}/index.txt`;
  const start = 0x4000_0000_0000_0000_0000_0000_0000_0000n +
    BigInt(Math.floor(Math.random() * 1e12));
  const every = Math.max(1, Math.floor(certs / revoked));
  const lines: string[] = [];
  let made = 0;
  for (let i = 0; i < certs; i++) {
    const serial = (start + BigInt(i)).toString(16).toUpperCase();
    const r = i % every === 0 && made < revoked;
    if (r) made++;
    lines.push(
      r
        ? `R\t301231235959Z\t250101000000Z,keyCompromise\t${serial}\tunknown\t/CN=c${i}`
        : `V\t301231235959Z\t\t${serial}\tunknown\t/CN=c${i}`,
    );
  }
  await Deno.writeTextFile(index, lines.join("\n") + "\n");
  lines.length = 0;
  console.log(
    `index.txt: ${certs} certificates, ${made} revoked, ${
      (Deno.statSync(index).size / 1e6).toFixed(0)
    } MB`,
  );

  const now = Date.now();
  const times = crlTimes(now, 7 * 86400, BigInt(now));
  // Each run reads the file afresh, as after a change (a new source: nothing loaded yet).
  const svcd = async (n: number) => {
    const source = new IndexFileSource(index, { maxEntries: certs + 10 });
    const set = new RevokedSet(n);
    if (await source.forEachRevoked(set.add) === null) throw new Error(source.lastError!);
    return await signCrls(issuer, set, set.scopes(), times, signer);
  };
  const rssBefore = Deno.memoryUsage().rss;
  const whole = await timed(() => svcd(1));
  const parted = await timed(() => svcd(partitions));
  const rss = Deno.memoryUsage().rss;

  await Deno.writeTextFile(`${dir}/crlnumber`, "01\n");
  await Deno.writeTextFile(
    `${dir}/ca.cnf`,
    `[ca]\ndefault_ca = b\n[b]\ndatabase = ${index}\ncertificate = ${dir}/ca.pem\n` +
      `private_key = ${dir}/ca.key\ncrlnumber = ${dir}/crlnumber\ndefault_md = sha256\n` +
      `default_crl_days = 7\nnew_certs_dir = ${dir}\n`,
  );
  await Deno.writeTextFile(`${dir}/index.txt.attr`, "unique_subject = no\n");
  const openssl = await timed(() =>
    run("openssl", ["ca", "-config", `${dir}/ca.cnf`, "-gencrl", "-out", `${dir}/openssl.crl`])
  );

  // The daemon's round after one revocation: the file re-read, the changed CRLs re-signed; the
  // time until the revoked certificate's partition is written, and until the round is done.
  const out = await Deno.makeTempDir({ dir });
  const source = new IndexFileSource(index, { maxEntries: certs + 10 });
  let number = BigInt(now);
  let partitionWritten = NaN;
  const keeper = new CrlKeeper({
    source,
    issuer,
    partitions,
    signer,
    validitySeconds: 7 * 86400,
    dir: out,
    takeNumber: (atLeast) => Promise.resolve(number = atLeast > number ? atLeast : number + 1n),
    log: console.error,
    onWritten: (crls) => {
      if (crls.some((c) => c.scope !== "full")) partitionWritten ||= performance.now();
    },
  });
  await keeper.round();
  const untilPartition: number[] = [], untilFull: number[] = [];
  let text = await Deno.readTextFile(index);
  for (let i = 0; i < runs; i++) {
    text = revokeOneMore(text);
    await Deno.writeTextFile(index, text);
    partitionWritten = NaN;
    const t = performance.now();
    const signed = await keeper.round();
    untilFull.push(performance.now() - t);
    untilPartition.push(partitionWritten - t);
    if (signed.length !== 2) throw new Error(`expected 2 CRLs re-signed, got ${signed.length}`);
  }
  // Where a round's time goes: the keeper's steps one by one, after one revocation more each.
  const steps: Record<string, number[]> = {};
  const step = async <T>(name: string, fn: () => T | Promise<T>): Promise<T> => {
    const t = performance.now();
    const result = await fn();
    (steps[name] ??= []).push(performance.now() - t);
    return result;
  };
  const parts = await Deno.makeTempDir({ dir });
  let before = new RevokedSet(partitions);
  await source.forEachRevoked(before.add);
  for (let i = 0; i < runs; i++) {
    text = revokeOneMore(text);
    await Deno.writeTextFile(index, text);
    await step("re-read index.txt (the OCSP side's load)", () => source.current());
    const set = new RevokedSet(partitions);
    await step("encode the revoked entries", () => source.forEachRevoked(set.add));
    const [full, k] = await step("compare with the last set", () => set.changedSince(before));
    const [partCrl] = await step(
      "sign the partition",
      () => signCrls(issuer, set, [k], times, signer),
    );
    await step("write the partition", () => writeCrlFiles(parts, [partCrl]));
    const [fullCrl] = await step(
      "sign the full CRL",
      () => signCrls(issuer, set, [full], times, signer),
    );
    await step("write the full CRL (DER and PEM)", () => writeCrlFiles(parts, [fullCrl]));
    before = set;
  }

  console.log(`svcd whole (load + build + sign):       ${whole.toFixed(0)} ms`);
  console.log(`svcd ${partitions} partitions + full:          ${parted.toFixed(0)} ms`);
  console.log(`openssl ca -gencrl:                     ${openssl.toFixed(0)} ms`);
  console.log(`ratio whole / openssl:                  ${(whole / openssl).toFixed(2)}`);
  console.log(`ratio partitioned / openssl:            ${(parted / openssl).toFixed(2)}`);
  console.log(
    `one revocation, keeper round until the partition is written: ${
      median(untilPartition).toFixed(0)
    } ms (runs: ${untilPartition.map((x) => x.toFixed(0)).join(", ")})`,
  );
  console.log(
    `one revocation, keeper round until the full CRL is written:  ${
      median(untilFull).toFixed(0)
    } ms (runs: ${untilFull.map((x) => x.toFixed(0)).join(", ")})`,
  );
  for (const [name, ms] of Object.entries(steps)) {
    console.log(`  ${name.padEnd(42)} ${median(ms).toFixed(0).padStart(4)} ms`);
  }
  console.log(
    `resident memory: ${(rssBefore / 1e6).toFixed(0)} MB before the CRLs, ${
      (rss / 1e6).toFixed(0)
    } MB after`,
  );
} finally {
  await Deno.remove(dir, { recursive: true });
}

/**
 * The public listener has its own workers, so anonymous traffic cannot starve the authenticated
 * side; measured here: /sign throughput and p99 at c=16 (16 identities) on the authenticated
 * socket, idle and then under a flood of POST /ocsp on the public socket, in the same run against
 * the same daemon. The flood asks with a nonce, so every answer is signed live by the token: the
 * heaviest request the public socket takes. Each load generator is its own process (bench/load.ts).
 * Target: under the flood, throughput ≥ 0.5 × and p99 ≤ 3 × the idle figures.
 *
 * @example
 * ```sh
 * deno run -A bench/public-isolation.ts --seconds 5 --flood 64
 * ```
 */
import { benchArgs, count, oneOf, positiveNumber, valueOption } from "./_args.ts";
import type { LoadResult } from "./load.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { makeTestCa, publicListenerArgs } from "../tests/support/ca.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { certIdFor, encodeOcspRequest, readCertificates } from "../lib/ocsp/mod.ts";
import { KEY_TYPES } from "../lib/token/mod.ts";

const LOAD = new URL("./load.ts", import.meta.url).pathname;

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Whether anonymous traffic can starve the authenticated side: /sign throughput and " +
    "p99 at c=16 on the authenticated socket, idle and then under a flood of POST /ocsp with a " +
    "nonce (signed live by the token) on the public socket, against the same daemon.",
  options: {
    seconds: valueOption(positiveNumber, "5", "seconds per figure"),
    flood: valueOption(count, "64", "the flood's concurrency"),
    "ca-key": {
      type: "string",
      default: "ec-p256",
      check: oneOf(Object.keys(KEY_TYPES)),
      help: "the CA's key type (what signs each OCSP answer)",
    },
  },
  examples: ["deno run -A bench/public-isolation.ts --seconds 5 --flood 64"],
});
const seconds = Number(values.seconds);

/** bench/load.ts in its own process; resolves with its JSON line. */
async function load(args: string[]): Promise<LoadResult> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", LOAD, ...args, "--seconds", String(seconds), "--warmup", "0.5"],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (out.code !== 0) throw new Error(`bench/load.ts ${args.join(" ")} exited ${out.code}`);
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
}

function row(name: string, r: LoadResult): string {
  return `${name.padEnd(34)} ${r.perSecond.toFixed(0).padStart(7)} req/s  p50 ${
    r.p50ms.toFixed(2).padStart(6)
  } ms  p99 ${r.p99ms.toFixed(2).padStart(6)} ms  errors ${r.errors}`;
}

const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
const ca = await makeTestCa(token, { keyLabel: "ca", keyType: values["ca-key"] });
const work = await Deno.makeTempDir({ prefix: "svcd-isolation-" });
const publicSocket = `${work}/public.sock`;
const policy = Array.from({ length: 16 }, (_, i) => `CN=bench${i},O=Bench\tk-ec`).join("\n") + "\n";
const daemon = await startDaemon({
  token,
  workDir: work,
  policy,
  args: publicListenerArgs(ca, publicSocket),
});
try {
  const issuer = readCertificates(Deno.readFileSync(ca.caPem))[0];
  const requestFile = `${work}/ocsp-request.der`;
  Deno.writeFileSync(
    requestFile,
    encodeOcspRequest({
      certIds: [certIdFor(issuer, Uint8Array.of(0x42))],
      nonce: new Uint8Array(16),
    }),
  );
  const sign = ["--socket", daemon.socket, "--key", "k-ec", "--concurrency", "16"];
  const flood = [
    "--socket",
    publicSocket,
    "--path",
    "/ocsp",
    "--key",
    "none",
    "--concurrency",
    values.flood,
    "--body-file",
    requestFile,
  ];
  console.log(
    `public-socket isolation — ${token.module.name}, ${seconds}s per figure, CA key ${
      values["ca-key"]
    }, flood c=${values.flood} nonce OCSP`,
  );
  const idle = await load(sign);
  console.log(row("/sign c=16, public idle", idle));
  const floodAlone = await load(flood);
  console.log(row(`/ocsp flood c=${values.flood} alone`, floodAlone));
  const [underFlood, floodBeside] = await Promise.all([load(sign), load(flood)]);
  console.log(row("/sign c=16, under the flood", underFlood));
  console.log(row(`/ocsp flood c=${values.flood} beside /sign`, floodBeside));
  const throughput = underFlood.perSecond / idle.perSecond;
  const p99 = underFlood.p99ms / idle.p99ms;
  console.log(
    `under the flood: throughput ${throughput.toFixed(2)} × idle (target ≥ 0.5), ` +
      `p99 ${p99.toFixed(2)} × idle (target ≤ 3)`,
  );
} finally {
  await daemon.stop();
  await token.cleanup();
  await Deno.remove(work, { recursive: true });
}

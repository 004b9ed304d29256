/**
 * `svcd client sign --format cms` of a big file (on a tmpfs, so the disk is out of it) with an
 * ECDSA P-256 key certified by `svcd ca certify`, through nginx (TLS, client certificate) to the
 * real daemon, against `sha256sum` of the same file in the same run: interleaved rounds, medians, the ratio printed
 * (target ≥ 0.9 × sha256sum's speed; nothing asserted). The file is hashed by the client and only
 * the signed attributes go to /sign, so the client is bound by its SHA-256 as sha256sum is. The
 * first signature is checked with `openssl cms -verify` before anything is timed.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/cms-sign.ts --rounds 5 --gib 1
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption } from "./_args.ts";
import { writeBigFile } from "./_big_file.ts";
import { mountFs } from "../tests/support/mounts.ts";
import { runCommand } from "../tests/support/command.ts";
import { runClientThroughNginx, startClientStack } from "../tests/support/client_nginx.ts";
import { makeTestCa, type TestCa } from "../tests/support/ca.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures:
    "svcd client sign --format cms of a big file on a tmpfs (ECDSA P-256, svcd ca certify), " +
    "through nginx to the daemon, against sha256sum of the same file: interleaved rounds, " +
    "medians, the ratio of their speeds (target ≥ 0.9).",
  options: {
    rounds: valueOption(count, "5", "rounds, interleaved"),
    gib: {
      type: "string",
      default: "1",
      check: positiveNumber,
      value: "GIB",
      help: "the file's size in GiB",
    },
  },
  examples: ["node_modules/.bin/deno run -A bench/cms-sign.ts --rounds 5 --gib 1"],
});
const ROUNDS = Number(values.rounds);
const BYTES = Math.round(Number(values.gib) * (1 << 30) / (1 << 20)) * (1 << 20);
const LABEL = "b-cms";

let ca: TestCa | undefined;
const stack = await startClientStack({
  keys: { [LABEL]: "ec-p256" },
  prefix: "svcd-bench-cms-",
  daemonArgs: async (dir, token) => {
    ca = await makeTestCa(token, { keyLabel: "svcd-ca", keyType: "ec-p256", dir: `${dir}/ca` });
    return ["--ca-cert", ca.caPem];
  },
});
const { pki, nginx, dir } = stack;
const cleanups: Array<() => Promise<unknown>> = [() => stack.stop()];
try {
  const certified = await ca!.run("certify", [
    "--key-label",
    LABEL,
    "--profile",
    "document-signing",
  ]);
  if (certified.code !== 0) throw new Error(`svcd ca certify: ${certified.text}`);
  const root = ca!.caPem;

  const tmpfs = await mountFs("tmpfs", { mode: 0o755, sizeMiB: (BYTES >> 20) + 16 });
  cleanups.unshift(() => tmpfs.cleanup());
  const big = `${tmpfs.path}/big`;
  await writeBigFile(big, BYTES);
  const p7s = `${dir}/big.p7s`;
  const signCms = async () => {
    const r = await runClientThroughNginx(nginx, pki, [
      ...["sign", "--key-label", LABEL, "--format", "cms", "--out", p7s, big],
    ]);
    if (r.code !== 0) throw new Error(`svcd client sign --format cms: ${r.text}`);
  };
  await signCms();
  const checked = await runCommand("openssl", [
    ...["cms", "-verify", "-binary", "-inform", "DER", "-in", p7s, "-content", big],
    ...["-CAfile", root, "-out", "/dev/null"],
  ]);
  if (checked.code !== 0) throw new Error(`openssl cms -verify refused it: ${checked.text}`);

  const timed = async (fn: () => Promise<unknown>) => {
    const t0 = performance.now();
    await fn();
    return (performance.now() - t0) / 1000;
  };
  const cms: number[] = [];
  const sha256sum: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    cms.push(await timed(signCms));
    sha256sum.push(
      await timed(async () => {
        const r = await runCommand("sha256sum", [big]);
        if (r.code !== 0) throw new Error(r.text);
      }),
    );
    console.log(
      `round ${round}: svcd client sign --format cms ${cms.at(-1)!.toFixed(2)} s, sha256sum ` +
        `${sha256sum.at(-1)!.toFixed(2)} s`,
    );
  }
  const m = { cms: median(cms), sha256sum: median(sha256sum) };
  const mib = BYTES / (1 << 20);
  console.log(
    `median: ${mib} MiB: svcd client sign --format cms ${m.cms.toFixed(2)} s (${
      (mib / m.cms).toFixed(0)
    } MiB/s), sha256sum ${m.sha256sum.toFixed(2)} s (${(mib / m.sha256sum).toFixed(0)} MiB/s): ` +
      `${(m.sha256sum / m.cms).toFixed(2)} × sha256sum's speed (target ≥ 0.9)`,
  );
} finally {
  for (const c of cleanups) await c().catch(() => {});
}

function median(v: number[]): number {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

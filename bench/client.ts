/**
 * `svcd client sign` through nginx (TLS, client certificate) against what bounds it, in interleaved
 * rounds with medians; figures printed, nothing asserted:
 * - a 1 GiB file (on a tmpfs, so the disk is out of it) with an ECDSA P-256 key in digest mode,
 *   through nginx to the real daemon, against `sha256sum` of the same file (the client is bound by
 *   its hashing: target ≥ 0.8 × sha256sum's speed). A daemon that lists no digest modes stops the
 *   run: the file must go by digest.
 * - 1 000 small files signed in sequence with an Ed25519 key (message mode, so both send the same
 *   requests), one `svcd client sign` run against a curl loop (target ≥ 1 ×).
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/client.ts --rounds 3 --files 1000 --gib 1
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption } from "./_args.ts";
import { curlNginx, curlTlsArgs } from "../tests/support/nginx.ts";
import { runClientThroughNginx, startClientStack } from "../tests/support/client_nginx.ts";
import { mountFs } from "../tests/support/mounts.ts";
import { runCommand } from "../tests/support/command.ts";
import { writeBigFile } from "./_big_file.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "svcd client sign through nginx (TLS, client certificate) against what bounds it, in " +
    "interleaved rounds with medians: a big file on a tmpfs in digest mode (ECDSA P-256) against " +
    "sha256sum of the same file, and small files signed in sequence (Ed25519) against a curl loop.",
  options: {
    rounds: valueOption(count, "3", "rounds, interleaved"),
    files: valueOption(count, "1000", "small files (1 KiB each)"),
    gib: {
      type: "string",
      default: "1",
      check: positiveNumber,
      value: "GIB",
      help: "the big file's size in GiB",
    },
  },
  examples: ["node_modules/.bin/deno run -A bench/client.ts --rounds 3 --files 1000 --gib 1"],
});
const ROUNDS = Number(values.rounds);
const FILES = Number(values.files);
const BIG_BYTES = Number(values.gib) * (1 << 30);

const stack = await startClientStack({
  keys: { "b-ec": "ec-p256", "b-ed": "ed25519" },
  prefix: "svcd-bench-client-",
});
const { pki, nginx, dir } = stack;
const cleanups: Array<() => Promise<unknown>> = [() => stack.stop()];
try {
  const listed = JSON.parse(
    new TextDecoder().decode((await curlNginx(nginx, pki, pki.clients[0], "/token", [])).body),
  ) as { keys: Array<{ digests?: string[] }> };
  if (!listed.keys.some((k) => k.digests?.includes("sha-256"))) {
    throw new Error("the daemon lists no digest mode for b-ec: the 1 GiB file cannot go by digest");
  }

  const client = pki.clients[0];
  const runClient = async (args: string[]): Promise<string> => {
    const r = await runClientThroughNginx(nginx, pki, args);
    if (r.code !== 0) throw new Error(`svcd client ${args[0]}: ${r.text}`);
    return r.stdout;
  };

  const tmpfs = await mountFs("tmpfs", { mode: 0o755, sizeMiB: (BIG_BYTES >> 20) + 16 });
  cleanups.unshift(() => tmpfs.cleanup());
  const big = `${tmpfs.path}/big`;
  await writeBigFile(big, BIG_BYTES);
  const small = `${dir}/small`;
  await Deno.mkdir(small);
  const smallFiles: string[] = [];
  for (let i = 0; i < FILES; i++) {
    const f = `${small}/f${i}`;
    await Deno.writeFile(f, crypto.getRandomValues(new Uint8Array(1024)));
    smallFiles.push(f);
  }

  const curlLoop = async (port: number, files: string[]): Promise<void> => {
    for (const f of files) {
      const r = await runCommand("curl", [
        "-sS",
        "--fail",
        ...curlTlsArgs(pki.caCert, client),
        "-H",
        "X-SVC-Key: b-ed",
        "--data-binary",
        `@${f}`,
        "-o",
        `${f}.curl.sig`,
        `https://localhost:${port}/sign`,
      ]);
      if (r.code !== 0) throw new Error(`curl: ${r.text}`);
    }
  };
  const timed = async (fn: () => Promise<unknown>) => {
    const t0 = performance.now();
    await fn();
    return (performance.now() - t0) / 1000;
  };
  const results: Record<string, number[]> = { client: [], sha256sum: [], many: [], curl: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    results.client.push(
      await timed(async () => {
        const out = await runClient(["sign", "--key-label", "b-ec", big]);
        if (!out.includes("digest sha-256")) throw new Error(`not by digest: ${out}`);
      }),
    );
    results.sha256sum.push(
      await timed(async () => {
        const r = await runCommand("sha256sum", [big]);
        if (r.code !== 0) throw new Error(r.text);
      }),
    );
    results.many.push(
      await timed(() => runClient(["sign", "--key-label", "b-ed", ...smallFiles])),
    );
    results.curl.push(await timed(() => curlLoop(nginx.port, smallFiles)));
    console.log(
      `round ${round}: 1 GiB client ${results.client.at(-1)!.toFixed(2)} s, sha256sum ` +
        `${results.sha256sum.at(-1)!.toFixed(2)} s; ${FILES} files client ` +
        `${results.many.at(-1)!.toFixed(2)} s, curl loop ${results.curl.at(-1)!.toFixed(2)} s`,
    );
  }
  const m = Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)]));
  const gib = BIG_BYTES / (1 << 30);
  console.log(
    `median: ${gib} GiB: svcd client sign ${m.client.toFixed(2)} s (${
      (BIG_BYTES / (1 << 20) / m.client).toFixed(0)
    } MiB/s), sha256sum ${m.sha256sum.toFixed(2)} s: ${(m.sha256sum / m.client).toFixed(2)} × ` +
      `sha256sum's speed (target ≥ 0.8)`,
  );
  console.log(
    `median: ${FILES} small files: svcd client sign ${m.many.toFixed(2)} s (${
      (FILES / m.many).toFixed(0)
    }/s), curl loop ${m.curl.toFixed(2)} s (${(FILES / m.curl).toFixed(0)}/s): ` +
      `${(m.curl / m.many).toFixed(2)} × the curl loop's speed (target ≥ 1)`,
  );
} finally {
  for (const c of cleanups) await c().catch(() => {});
}

function median(v: number[]): number {
  const s = [...v].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/**
 * `svcd client` run in this process against the stand-in svcd (fake_svcd.ts): its lines, its
 * stderr and the Retry-After waits it would have made, for the client's unit tests.
 *
 * @example
 * ```ts
 * import { client, withFake } from "./fake_client.ts";
 * import { fakeKey } from "./fake_svcd.ts";
 * await withFake([fakeKey("k", "ec-p256", ["sha-256"])], async (fake, dir) => {
 *   const r = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
 * });
 * ```
 */
import { runClientCommand } from "../../lib/client/cli.ts";
import { type FakeKey, type FakeSvcd, startFakeSvcd } from "./fake_svcd.ts";

/** One run of the client. */
export interface Run {
  code: number;
  out: string[];
  err: string;
  waits: number[];
}

/** Runs the command in this process, collecting its lines and the Retry-After waits. */
export async function client(fake: FakeSvcd, args: string[], env = {}): Promise<Run> {
  const out: string[] = [];
  const waits: number[] = [];
  let err = "";
  const original = console.error;
  console.error = (...parts: unknown[]) => void (err += parts.join(" ") + "\n");
  try {
    const [command, ...rest] = args;
    const code = await runClientCommand(
      [command, "--insecure-http", "--addr", `unix:${fake.socket}`, ...rest],
      { print: (l) => out.push(l), env, wait: (s) => (waits.push(s), Promise.resolve()) },
    );
    return { code, out, err, waits };
  } finally {
    console.error = original;
  }
}

/** Runs `fn` against a fake holding `keys`, in a temp folder removed afterwards. */
export async function withFake(
  keys: FakeKey[],
  fn: (fake: FakeSvcd, dir: string) => Promise<void>,
  opts: { maxBody?: number } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "svcd-client-" });
  const fake = await startFakeSvcd(dir, keys, opts);
  try {
    await fn(fake, dir);
  } finally {
    await fake.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * What bench/compare.ts and bench/p11client.ts share to run "p11-kit remote": Debian's
 * `p11-kit server` in front of a token, reached through p11-kit-client.so, and bench/p11load.c (a C
 * PKCS#11 load of T threads, one session each) built with gcc and libp11-kit-dev.
 *
 * @example
 * ```ts
 * import { buildCLoad, startP11KitServer } from "./_p11kit.ts";
 * import type { TestToken } from "../tests/support/token.ts";
 * declare const token: TestToken, dir: string;
 * const load = await buildCLoad(dir);
 * const server = await startP11KitServer(token, dir);
 * // run `load` with P11KIT_CLIENT and server.env …
 * await server.stop();
 * ```
 */
import type { TestToken } from "../tests/support/token.ts";

/** Debian's p11-kit client module: a PKCS#11 library that forwards to `p11-kit server`. */
export const P11KIT_CLIENT = "/usr/lib/x86_64-linux-gnu/pkcs11/p11-kit-client.so";
const LOAD_C = new URL("./p11load.c", import.meta.url).pathname;

/** What bench/p11load prints. */
export interface CLoad {
  signatures: number;
  seconds: number;
  perSecond: number;
  cpuUsPerSignature: number;
}

/** Builds bench/p11load.c into `dir`; returns the binary's path. */
export async function buildCLoad(dir: string): Promise<string> {
  const out = `${dir}/p11load`;
  const cc = await new Deno.Command("gcc", {
    args: ["-O2", "-std=c11", "-I/usr/include/p11-kit-1", "-o", out, LOAD_C, "-ldl", "-lpthread"],
    stderr: "piped",
  }).output();
  if (!cc.success) {
    throw new Error(
      `building bench/p11load.c failed (needs gcc and libp11-kit-dev):\n` +
        new TextDecoder().decode(cc.stderr),
    );
  }
  return out;
}

/** `p11-kit server` for the token, in the foreground; resolves once its socket exists. */
export async function startP11KitServer(token: TestToken, dir: string) {
  const socket = `${dir}/p11-kit.sock`;
  const server = new Deno.Command("p11-kit", {
    args: [
      "server",
      "-f",
      "--provider",
      token.modulePath,
      "-n",
      socket,
      `pkcs11:token=${token.tokenLabel}`,
    ],
    env: token.env,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await Deno.stat(socket)).isSocket) break;
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      server.kill("SIGKILL");
      throw new Error("p11-kit server did not create its socket within 10 s");
    }
    await new Promise((r) => setTimeout(r, 20)); // polling a file the server creates
  }
  return {
    pid: server.pid,
    env: { P11_KIT_SERVER_ADDRESS: `unix:path=${socket}` },
    async stop() {
      server.kill("SIGTERM");
      await server.status;
    },
  };
}

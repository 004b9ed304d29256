/**
 * A service manager's notification socket for tests: a UNIX datagram socket that collects the
 * sd_notify messages a daemon sends to `$NOTIFY_SOCKET`, waiting for them in a blocking recv on
 * a thread (never by sleeping).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { startDaemon } from "./daemon.ts";
 * import type { TestToken } from "./token.ts";
 * declare const dir: string, token: TestToken, policy: string;
 * const n = listenNotify(`${dir}/notify.sock`);
 * const d = await startDaemon({ token: { ...token, env: { ...token.env, NOTIFY_SOCKET: n.path } }, policy });
 * assert.match(await n.next(), /READY=1/);
 * n.close();
 * ```
 */
import {
  AF_UNIX,
  libc,
  sendDatagram,
  SOCK,
  SOCKADDR_UN_SIZE,
  sockaddrUn,
  sockaddrUnRaw,
} from "../../ffi/libc.ts";

/** A bound notification socket. */
export interface NotifySocket {
  path: string;
  /** The next datagram, as text. */
  next(): Promise<string>;
  close(): void;
}

/**
 * Binds a datagram socket at `path` (removed by close).
 *
 * @example
 * ```ts
 * const n = listenNotify("/tmp/x/notify.sock");
 * ```
 */
export function listenNotify(path: string): NotifySocket {
  const lib = Deno.dlopen("libc.so.6", {
    socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
    bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
    recv: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize", nonblocking: true },
    close: { parameters: ["i32"], result: "i32" },
  });
  const fd = lib.symbols.socket(AF_UNIX, SOCK.DGRAM | SOCK.CLOEXEC, 0);
  if (fd < 0 || lib.symbols.bind(fd, sockaddrUn(path), SOCKADDR_UN_SIZE) !== 0) {
    lib.close();
    throw new Error(`cannot bind a datagram socket at ${path}`);
  }
  const buf = new Uint8Array(4096);
  let pending: Promise<unknown> = Promise.resolve();
  let waiting = 0;
  return {
    path,
    next() {
      waiting++;
      const got = pending.then(async () => {
        const n = Number(await lib.symbols.recv(fd, buf, BigInt(buf.length), 0));
        waiting--;
        if (n < 0) throw new Error("recv on the notification socket failed");
        return new TextDecoder().decode(buf.subarray(0, n));
      });
      pending = got.catch(() => {});
      return got;
    },
    close() {
      // Closing the fd does not wake a thread blocked in recv on it; a last datagram does.
      if (waiting > 0) {
        const c = libc(), wake = c.socket(AF_UNIX, SOCK.DGRAM | SOCK.CLOEXEC, 0);
        sendDatagram(wake, new Uint8Array(1), sockaddrUnRaw(new TextEncoder().encode(path)));
        c.close(wake);
      }
      lib.symbols.close(fd);
      lib.close();
      Deno.removeSync(path);
    },
  };
}

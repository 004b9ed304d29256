/**
 * One listening socket served by several listeners, one per isolate (thread): each accepts from
 * the same file descriptor (the kernel hands every connection to exactly one accept), and the
 * queue depth bounds the connections all of them hold together. Each listener publishes how many
 * it holds in its own slot of a SharedArrayBuffer at every change; an accept adds the others'
 * slots to its own count. Two listeners accepting in the same instant can each miss the other's
 * newest connection, so the bound can be passed by at most one connection per other listener.
 *
 * @example
 * ```ts
 * import { shareSocket } from "./shared_socket.ts";
 * import { openUnixListener } from "./socket.ts";
 * const path = `${Deno.makeTempDirSync()}/s.sock`;
 * const shared = shareSocket(openUnixListener(path, 1024), 2);
 * // shared[0] to one Worker's Listener.open({ …, shared: shared[0] }), shared[1] to the other's
 * console.log(shared.length); // 2
 * ```
 */
import type { UnixListenerSocket } from "./socket.ts";

/** What one listener of a shared socket is given (crosses isolates by structured clone). */
export interface SharedSocket {
  socket: UnixListenerSocket;
  /** Connections each listener holds, one Int32 per listener, on a SharedArrayBuffer. */
  held: Int32Array;
  /** This listener's index in `held`. */
  slot: number;
}

/**
 * The shares of `socket` for `listeners` listeners; the caller keeps the socket open until every
 * listener has closed, then closes it (closeUnixListener).
 *
 * @example
 * ```ts
 * import { openUnixListener } from "./socket.ts";
 * declare const path: string;
 * const [first, second] = shareSocket(openUnixListener(path, 1024), 2);
 * ```
 */
export function shareSocket(socket: UnixListenerSocket, listeners: number): SharedSocket[] {
  if (!Number.isInteger(listeners) || listeners < 1) {
    throw new Error(`a shared socket needs at least one listener, got ${listeners}`);
  }
  const held = new Int32Array(new SharedArrayBuffer(4 * listeners));
  return Array.from({ length: listeners }, (_, slot) => ({ socket, held, slot }));
}

/**
 * Records that this listener now holds `count` connections.
 */
export function publishHeld(shared: SharedSocket, count: number): void {
  Atomics.store(shared.held, shared.slot, count);
}

/**
 * Connections the other listeners of the socket hold.
 */
export function heldByOthers(shared: SharedSocket): number {
  let sum = 0;
  for (let i = 0; i < shared.held.length; i++) {
    if (i !== shared.slot) sum += Atomics.load(shared.held, i);
  }
  return sum;
}

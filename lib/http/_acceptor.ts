/**
 * Acceptance: who may hold a connection. A peer whose SO_PEERCRED cannot be read or
 * whose uid is not the proxy's is refused without a byte; past the queue depth a connection gets
 * one constant 503 and is closed.
 *
 * @example
 * ```ts
 * import { acceptVerdict } from "./_acceptor.ts";
 * const verdict = acceptVerdict({ pid: 1, uid: 33, gid: 33 }, 33, 300, 256);
 * console.log(verdict.kind); // "queue_full": answer QUEUE_FULL_BYTES and close
 * ```
 */
import type { PeerCred } from "../../ffi/libc.ts";
import { problem } from "./problem.ts";
import { serializeResponse } from "./response.ts";

/** The whole response to a connection past the queue depth, serialised once. */
export const QUEUE_FULL_BYTES: Uint8Array = serializeResponse(
  problem(503, "Queue full", "too many connections are waiting; retry", [["Retry-After", "1"]]),
);

/** What happens to an accepted connection. */
export type AcceptVerdict =
  | { kind: "accept"; peer: PeerCred }
  | { kind: "no_peer" }
  | { kind: "refused_uid"; peer: PeerCred }
  | { kind: "queue_full" };

/**
 * The verdict on a connection from `peer` (null: SO_PEERCRED failed) when `held` connections are
 * already held and `queueDepth` may be; `proxyUid` null accepts any uid (the public socket).
 *
 * @example
 * ```ts
 * acceptVerdict({ pid: 1, uid: 33, gid: 33 }, 33, 0, 256).kind; // "accept"
 * ```
 */
export function acceptVerdict(
  peer: PeerCred | null,
  proxyUid: number | null,
  held: number,
  queueDepth: number,
): AcceptVerdict {
  if (peer === null) return { kind: "no_peer" };
  if (proxyUid !== null && peer.uid !== proxyUid) return { kind: "refused_uid", peer };
  if (held >= queueDepth) return { kind: "queue_full" };
  return { kind: "accept", peer };
}

/**
 * The end of a listener Worker (./public_worker.ts, ./request_worker.ts), on its own side: its
 * listener first (what it holds is served up to the grace), then its sessions, closed only once no
 * module call of its own runs any more (a call still running after the grace keeps them: the
 * module is then left to the process exit, see ./worker_group.ts).
 *
 * @example
 * ```ts ignore
 * await stopWorker({ listener, serving, token }, 10_000);
 * ```
 */
import type { Listener } from "../../http/mod.ts";
import type { Token } from "../../token/mod.ts";

/** What a listener Worker runs. */
export interface WorkerService {
  listener: Listener | undefined;
  /** The listener's serve() promise. */
  serving: Promise<void> | undefined;
  token: Token | undefined;
}

/**
 * Closes the listener, waits for its loop, then closes the token's sessions when idle.
 * @example await stopWorker({ listener, serving, token }, graceMs)
 */
export async function stopWorker(service: WorkerService, graceMs: number): Promise<void> {
  await service.listener?.close(graceMs);
  await service.serving;
  if (service.token && await service.token.whenIdle(graceMs)) service.token.close();
}

/**
 * A module's sessions as tests see them from outside the token, through the module's function
 * table (ffi/pkcs11's wrapFunctionTable, as pkcs11_calls.ts counts calls): every call through the
 * table in this isolate, by a Token or anything else, is watched from then on.
 *
 * - `watchSessionUse(modulePath)`: whether a session was given a call while a nonblocking call
 *   on it was still running — two operations on one session at once, which the pool must never
 *   allow (a synchronous call cannot overlap another on the one JavaScript thread).
 * - `refuseSessionsBeyond(modulePath, more)`: the module answers C_OpenSession with
 *   CKR_HOST_MEMORY once `more` sessions opened from now on are open, as a module with a session
 *   cap does.
 *
 * @example
 * ```ts
 * import { refuseSessionsBeyond, watchSessionUse } from "./pkcs11_sessions.ts";
 * const watch = watchSessionUse("/usr/lib/softhsm/libsofthsm2.so");
 * const lift = refuseSessionsBeyond("/usr/lib/softhsm/libsofthsm2.so", 2);
 * // … sign concurrently …
 * lift();
 * watch.stats().overlaps; // → 0
 * ```
 */
import {
  CKR,
  loadModule,
  type Pkcs11Module,
  type TableEntry,
  wrapFunctionTable,
} from "../../ffi/pkcs11/mod.ts";

/** What a watch saw since it started. */
export interface SessionUseStats {
  /** Sign and verify operations started (C_SignInit, C_VerifyInit). */
  operations: number;
  /** Calls made on a session while a nonblocking call on it was still running (must stay 0). */
  overlaps: number;
  /** Most nonblocking calls running at one moment, over all sessions. */
  maxConcurrent: number;
  /** Distinct sessions that started a sign or verify operation. */
  sessionsUsed: number;
}

/** A watch over a module's sessions, from the moment it was made. */
export interface SessionWatch {
  stats(): SessionUseStats;
}

/** The entries whose first argument is not a session: a slot, flags or nothing. */
const NOT_ON_A_SESSION = new Set([
  "C_Initialize",
  "C_Finalize",
  "C_GetInfo",
  "C_GetSlotList",
  "C_GetSlotInfo",
  "C_GetTokenInfo",
  "C_GetMechanismList",
  "C_GetMechanismInfo",
  "C_InitToken",
  "C_OpenSession",
  "C_CloseAllSessions",
  "C_WaitForSlotEvent",
]);
const OPERATION_STARTS = new Set(["C_SignInit", "C_VerifyInit"]);

interface Watched {
  /** Nonblocking calls running, by session. */
  running: Map<number, number>;
  runningTotal: number;
  watches: Set<WatchState>;
  /** Sessions opened while a cap is in force, and the cap. */
  cap: { more: number; open: Set<number> } | undefined;
}

interface WatchState {
  stats: SessionUseStats;
  used: Set<number>;
}

const watched = new Map<Pkcs11Module, Watched>();

/**
 * Starts watching the sessions of the module at `modulePath` (loaded once per isolate, so every
 * Token of this isolate on that path goes through the watch).
 */
export function watchSessionUse(modulePath: string): SessionWatch {
  const state: WatchState = {
    stats: { operations: 0, overlaps: 0, maxConcurrent: 0, sessionsUsed: 0 },
    used: new Set(),
  };
  watchedModule(modulePath).watches.add(state);
  return { stats: () => ({ ...state.stats, sessionsUsed: state.used.size }) };
}

/**
 * From now on, C_OpenSession on the module at `modulePath` answers CKR_HOST_MEMORY while `more`
 * sessions opened after this call are open. Returns the function that lifts the cap.
 */
export function refuseSessionsBeyond(modulePath: string, more: number): () => void {
  const w = watchedModule(modulePath);
  w.cap = { more, open: new Set() };
  return () => w.cap = undefined;
}

function watchedModule(modulePath: string): Watched {
  const mod = loadModule(modulePath);
  let w = watched.get(mod);
  if (!w) {
    const made: Watched = {
      running: new Map(),
      runningTotal: 0,
      watches: new Set(),
      cap: undefined,
    };
    wrapFunctionTable(mod, (name, entry) => watching(made, name, entry));
    watched.set(mod, made);
    w = made;
  }
  return w;
}

function watching(w: Watched, name: string, entry: TableEntry): TableEntry {
  const fn = name.replace(/Async$/, "");
  const nonblocking = fn !== name;
  if (fn === "C_OpenSession") return (...args) => openSession(w, entry, args);
  if (fn === "C_CloseSession") {
    return (...args) => {
      w.cap?.open.delete(Number(args[0]));
      return entry(...args);
    };
  }
  if (fn === "C_CloseAllSessions" || fn === "C_Finalize") {
    return (...args) => {
      w.cap?.open.clear();
      return entry(...args);
    };
  }
  if (NOT_ON_A_SESSION.has(fn)) return entry;
  return (...args) => {
    const session = Number(args[0]);
    noteCall(w, fn, session);
    if (!nonblocking) return entry(...args);
    running(w, session, +1);
    return (entry(...args) as Promise<unknown>).finally(() => running(w, session, -1));
  };
}

function openSession(w: Watched, entry: TableEntry, args: never[]): unknown {
  const cap = w.cap;
  if (cap && cap.open.size >= cap.more) return CKR.HOST_MEMORY;
  const rv = entry(...args);
  if (cap && rv === CKR.OK) {
    const out = args[4] as Uint8Array;
    cap.open.add(Number(new DataView(out.buffer, out.byteOffset, 8).getBigUint64(0, true)));
  }
  return rv;
}

function noteCall(w: Watched, fn: string, session: number): void {
  const overlapping = (w.running.get(session) ?? 0) > 0;
  for (const { stats, used } of w.watches) {
    if (overlapping) stats.overlaps++;
    if (OPERATION_STARTS.has(fn)) {
      stats.operations++;
      used.add(session);
    }
  }
}

function running(w: Watched, session: number, delta: 1 | -1): void {
  const now = (w.running.get(session) ?? 0) + delta;
  if (now > 0) w.running.set(session, now);
  else w.running.delete(session);
  w.runningTotal += delta;
  for (const { stats } of w.watches) {
    stats.maxConcurrent = Math.max(stats.maxConcurrent, w.runningTotal);
  }
}

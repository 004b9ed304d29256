/**
 * The refusal counts on disk: one node:sqlite file in WAL mode, written through on every counted
 * refusal. A process restart therefore loses nothing that a call returned. Ordinary refusals commit
 * with synchronous=NORMAL (no fsync; a power cut can forget the last few, which only makes a count a
 * little lower); a crossing commits with synchronous=FULL (fsync), so not even a power cut forgets
 * that an identity is limited.
 *
 * The file is opened with an exclusive lock, so a second daemon on the same --state-dir fails at
 * start instead of racing. A file that is not ours, corrupt or unreadable is a StateError: the daemon
 * must not start with silently reset counts.
 *
 * @example
 * ```ts
 * const store = StateStore.open("/var/lib/svcd");
 * for (const [identity, entry] of store.loadAll()) console.log(identity, entry.count);
 * store.close();
 * ```
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import type { BudgetEntry } from "./curve.ts";

/** File name of the refusal state inside --state-dir. */
export const STATE_FILE_NAME = "refusals.sqlite";

const APPLICATION_ID = 0x73766364; // "svcd": marks the file as ours
const SCHEMA_VERSION = 1;

/**
 * The state file cannot be used; the message names the file and what to do.
 *
 * @example
 * ```ts
 * declare const stateDir: string;
 * try {
 *   StateStore.open(stateDir);
 * } catch (e) {
 *   if (e instanceof StateError) console.error(e.message); // names the file and what to do
 * }
 * ```
 */
export class StateError extends Error {
  override name = "StateError";
  constructor(readonly path: string, readonly kind: StateErrorKind, message: string) {
    super(message);
  }
}

/**
 * Why the state file cannot be used: its folder is unusable, another process holds it (a running
 * daemon), it is damaged or not ours, or a different svcd version wrote it.
 *
 * @example
 * ```ts
 * const kind: StateErrorKind = "in-use";
 * ```
 */
export type StateErrorKind = "no-folder" | "in-use" | "unusable" | "other-version";

/** SQLite's result codes for a database another connection holds (node:sqlite `errcode`). */
const SQLITE_BUSY = 5, SQLITE_LOCKED = 6;

/**
 * The table of refusal entries, one row per identity.
 *
 * @example
 * ```ts
 * import type { BudgetEntry } from "./curve.ts";
 * declare const store: StateStore;
 * declare const entry: BudgetEntry;
 * store.write("CN=alice", entry, { durable: true });
 * ```
 */
export class StateStore {
  #db: DatabaseSync;
  #upsert: StatementSync;
  #remove: StatementSync;
  #removeForgotten: StatementSync;

  private constructor(readonly path: string, db: DatabaseSync) {
    this.#db = db;
    this.#upsert = db.prepare(
      `INSERT INTO refusals (identity, count, anchor_ms, limited_until_ms, touched_ms)
       VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (identity) DO UPDATE SET count = excluded.count, anchor_ms = excluded.anchor_ms,
         limited_until_ms = excluded.limited_until_ms, touched_ms = excluded.touched_ms`,
    );
    this.#remove = db.prepare("DELETE FROM refusals WHERE identity = ?");
    this.#removeForgotten = db.prepare(
      "DELETE FROM refusals WHERE limited_until_ms <= ?1 AND anchor_ms + count * ?2 <= ?1",
    );
  }

  /**
   * Opens (or creates) `<stateDir>/refusals.sqlite`; throws StateError if it cannot be trusted.
   *
   * @example
   * ```ts
   * const store = StateStore.open("/var/lib/svcd");
   * ```
   */
  static open(stateDir: string): StateStore {
    const path = `${stateDir.replace(/\/+$/, "")}/${STATE_FILE_NAME}`;
    requireDirectory(stateDir, path);
    const existed = fileExists(path);
    let db: DatabaseSync | undefined;
    try {
      db = new DatabaseSync(path);
      configure(db);
      checkIntegrity(db, path);
      ensureSchema(db, path);
      return new StateStore(path, db);
    } catch (e) {
      db?.close();
      if (e instanceof StateError) throw e;
      if (isHeldElsewhere(e)) throw inUse(path);
      // A file that was never there is not corrupt: say what keeps it from being made.
      if (!existed) throw cannotCreate(stateDir, path, (e as Error).message);
      throw unusable(path, (e as Error).message);
    }
  }

  /**
   * Every row, least recently refused first; throws StateError on a row that cannot be right.
   *
   * @example
   * ```ts
   * declare const store: StateStore;
   * const entries = new Map(store.loadAll());
   * ```
   */
  loadAll(): [string, BudgetEntry][] {
    const rows = this.#db.prepare(
      `SELECT identity, count, anchor_ms, limited_until_ms, touched_ms FROM refusals
       ORDER BY touched_ms, rowid`,
    ).all();
    return rows.map((row) => {
      const entry = {
        count: row.count,
        anchorMs: row.anchor_ms,
        limitedUntilMs: row.limited_until_ms,
        touchedMs: row.touched_ms,
      };
      if (typeof row.identity !== "string" || !Object.values(entry).every(isWholeNumber)) {
        throw unusable(this.path, `a row holds values svcd never writes (${JSON.stringify(row)})`);
      }
      return [row.identity, entry as BudgetEntry];
    });
  }

  /**
   * Writes one identity's entry and drops the evicted ones, in one transaction; `durable` forces it
   * to disk before returning (used at a crossing).
   *
   * @example
   * ```ts
   * declare const store: StateStore;
   * const now = Date.now();
   * store.write("CN=alice", { count: 1, anchorMs: now, limitedUntilMs: 0, touchedMs: now });
   * ```
   */
  write(identity: string, e: BudgetEntry, opts: { durable?: boolean; evicted?: string[] } = {}) {
    const evicted = opts.evicted ?? [];
    if (opts.durable) this.#db.exec("PRAGMA synchronous = FULL");
    try {
      if (evicted.length > 0) this.#db.exec("BEGIN IMMEDIATE");
      try {
        this.#upsert.run(identity, e.count, e.anchorMs, e.limitedUntilMs, e.touchedMs);
        for (const gone of evicted) this.#remove.run(gone);
        if (evicted.length > 0) this.#db.exec("COMMIT");
      } catch (err) {
        if (this.#db.isTransaction) this.#db.exec("ROLLBACK");
        throw err;
      }
    } finally {
      if (opts.durable) this.#db.exec("PRAGMA synchronous = NORMAL");
    }
  }

  /**
   * Drops one identity (evicted).
   */
  remove(identity: string): void {
    this.#remove.run(identity);
  }

  /**
   * Drops every row that has decayed to zero and is not limited at `nowMs`.
   *
   * @example
   * ```ts
   * declare const store: StateStore;
   * store.removeForgotten(Date.now(), 60_000);
   * ```
   */
  removeForgotten(nowMs: number, refillMs: number): void {
    this.#removeForgotten.run(nowMs, refillMs);
  }

  /**
   * Number of rows (for tests and diagnostics).
   */
  rowCount(): number {
    return Number(this.#db.prepare("SELECT count(*) AS n FROM refusals").get()?.n);
  }

  /**
   * Checkpoints the WAL into the file and closes it.
   */
  close(): void {
    if (!this.#db.isOpen) return;
    try {
      this.#db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } finally {
      this.#db.close();
    }
  }
}

function isWholeNumber(v: unknown): boolean {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function requireDirectory(stateDir: string, path: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(stateDir);
  } catch (e) {
    throw new StateError(
      path,
      "no-folder",
      `refusal state: cannot use --state-dir ${stateDir} (${(e as Error).message}); create it, ` +
        `owned by the daemon's user and mode 0700, or point --state-dir at the right folder`,
    );
  }
  if (!info.isDirectory) {
    throw new StateError(
      path,
      "no-folder",
      `refusal state: --state-dir ${stateDir} is not a directory`,
    );
  }
}

function configure(db: DatabaseSync): void {
  db.exec("PRAGMA locking_mode = EXCLUSIVE");
  db.exec("PRAGMA busy_timeout = 0");
  const mode = db.prepare("PRAGMA journal_mode = WAL").get()?.journal_mode;
  if (mode !== "wal") throw new Error(`could not switch the journal to WAL (got ${mode})`);
  db.exec("PRAGMA synchronous = NORMAL");
}

function checkIntegrity(db: DatabaseSync, path: string): void {
  const problems = db.prepare("PRAGMA quick_check").all().map((r) => String(r.quick_check));
  if (problems.length !== 1 || problems[0] !== "ok") {
    throw unusable(path, `the integrity check failed: ${problems.slice(0, 3).join("; ")}`);
  }
}

function ensureSchema(db: DatabaseSync, path: string): void {
  const appId = Number(db.prepare("PRAGMA application_id").get()?.application_id);
  const version = Number(db.prepare("PRAGMA user_version").get()?.user_version);
  const tables = Number(db.prepare("SELECT count(*) AS n FROM sqlite_schema").get()?.n);
  if (appId === 0 && version === 0 && tables === 0) {
    createSchema(db);
    return;
  }
  if (appId !== APPLICATION_ID) {
    throw unusable(path, "it is an SQLite file, but not svcd's refusal state");
  }
  if (version !== SCHEMA_VERSION) {
    throw new StateError(
      path,
      "other-version",
      `refusal state ${path} has schema version ${version}; this svcd reads version ` +
        `${SCHEMA_VERSION}. Run the svcd that wrote it, or move the file aside to start with empty counts`,
    );
  }
}

function createSchema(db: DatabaseSync): void {
  db.exec(`BEGIN IMMEDIATE;
    CREATE TABLE refusals (
      identity TEXT PRIMARY KEY NOT NULL,
      count INTEGER NOT NULL CHECK (count >= 0),
      anchor_ms INTEGER NOT NULL,
      limited_until_ms INTEGER NOT NULL,
      touched_ms INTEGER NOT NULL
    ) STRICT;
    PRAGMA application_id = ${APPLICATION_ID};
    PRAGMA user_version = ${SCHEMA_VERSION};
    COMMIT;`);
}

function isHeldElsewhere(e: unknown): boolean {
  const code = (e as { errcode?: unknown }).errcode;
  return code === SQLITE_BUSY || code === SQLITE_LOCKED;
}

function inUse(path: string): StateError {
  return new StateError(
    path,
    "in-use",
    `refusal state ${path} is locked by another process (a running svcd?); stop it first, or ` +
      `give this daemon its own --state-dir`,
  );
}

function fileExists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function cannotCreate(stateDir: string, path: string, why: string): StateError {
  return new StateError(
    path,
    "no-folder",
    `refusal state ${path} cannot be created (${why}): --state-dir ${stateDir} must be writable by ` +
      `the daemon's user (the unit's StateDirectory= makes /var/lib/svcd so); fix its owner or mode`,
  );
}

function unusable(path: string, why: string): StateError {
  return new StateError(
    path,
    "unusable",
    `refusal state ${path} is corrupt or unreadable (${why}). svcd will not start with it, so ` +
      `that refusal counts are not silently reset: move it aside (mv ${path} ${path}.bad, with its ` +
      `-wal file if any) to start with empty counts, or restore it from a backup`,
  );
}

/**
 * The sign thread: one Worker of the process that makes the main isolate's quick signatures, so
 * that the thread serving every request spends its time on the requests while the signature's
 * arithmetic runs on the other core.
 *
 * Why not the thread pool (a nonblocking FFI call, where slow keys go: ../sign_placement.ts): each
 * call there costs a futex wake of a pool thread, a promise and a turn of the event loop, more than
 * a software token's signature. Here the jobs go into a ring in shared memory (./_slots.ts):
 * posting one is a few stores, and the thread is woken only when it sleeps; the main isolate learns
 * of the jobs done by one `Atomics.waitAsync` at a time, which settles every job done since, in
 * order. No message crosses per signature.
 *
 * What stays on the main isolate: the session pool, the key copies and their lifetimes (the caller
 * holds the session and the key until the promise settles, as for the pool), and each key's
 * placement, which the thread's own hold time per signature feeds. A job the ring cannot carry —
 * a mechanism with a parameter, a message larger than {@link DATA_ROOM}, a full ring — is not
 * taken: `sign` returns undefined and the caller signs on its own thread as before.
 *
 * @example
 * ```ts
 * import { SignThread } from "./sign_thread.ts";
 * import type { Pkcs11Module } from "../../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module, session: number, key: number, digest: Uint8Array;
 * const thread = SignThread.start(mod, 0.3)!;
 * const signed = await thread.sign(session, key, { mechanism: 0x1041 }, digest); // CKM_ECDSA
 * thread.close();
 * ```
 */
import { CKR, Pkcs11Error, type Pkcs11Module } from "../../../ffi/pkcs11/mod.ts";
import { finishSign, type Handle, type MechanismChoice } from "../sessions.ts";
import {
  CONTROL,
  CONTROL_BYTES,
  DATA_AT,
  DATA_ROOM,
  SIGNATURE_AT,
  SIGNATURE_ROOM,
  SLOT,
  slotOf,
  slotOffset,
  SLOTS,
} from "./_slots.ts";
import type { SignThreadSetup } from "./_worker.ts";

export { DATA_ROOM };

/**
 * The thread's module: ./_worker.ts, or in the packaged bundle (where this code is in svcd.js)
 * svcd-sign-worker.js beside it, bundled on its own (packaging/lib.sh).
 */
function workerModule(): URL | undefined {
  // Looked for here, not left to the Worker: a Worker that fails to load may end the process.
  return WORKER_FILES.map((file) => new URL(file, import.meta.url)).find(isFile);
}

const WORKER_FILES = ["./_worker.ts", "./svcd-sign-worker.js"];

function isFile(url: URL): boolean {
  try {
    return Deno.statSync(url).isFile;
  } catch {
    return false;
  }
}

/** How long closing waits for a signature the thread is making (ms). */
const CLOSE_WAIT_MS = 5000;

/** A signature the thread made, and how long it held the thread (ms). */
export interface SignedOnThread {
  signature: Uint8Array;
  heldMs: number;
}

interface Job {
  resolve(signed: SignedOnThread): void;
  reject(err: Error): void;
}

/**
 * One sign thread and its ring.
 *
 * @example
 * ```ts
 * import { SignThread } from "./sign_thread.ts";
 * import type { Pkcs11Module } from "../../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module;
 * SignThread.start(mod, 0.3)?.close();
 * ```
 */
export class SignThread {
  readonly #control: Int32Array;
  readonly #words: BigInt64Array;
  readonly #held: Float64Array;
  readonly #bytes: Uint8Array;
  readonly #worker: Worker | undefined;
  readonly #jobs: (Job | undefined)[] = new Array(SLOTS);
  /** Jobs posted and jobs settled, as the thread counts them (Int32s that wrap). */
  #posted = 0;
  #settled = 0;
  #watching = false;
  #signed = 0;
  #closed = false;
  #outOfModule = true;
  readonly #mod: Pkcs11Module;

  private constructor(mod: Pkcs11Module, setup: SignThreadSetup) {
    this.#mod = mod;
    this.#control = new Int32Array(setup.control);
    this.#words = new BigInt64Array(setup.ring);
    this.#held = new Float64Array(setup.ring);
    this.#bytes = new Uint8Array(setup.ring);
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    this.started = promise;
    // Whoever asks is told; a Token never asked must not end the process with it.
    promise.catch(() => {});
    const module = workerModule();
    if (!module) {
      const where = WORKER_FILES.map((file) => new URL(file, import.meta.url).pathname);
      reject(new Error(`the sign thread's module is missing: ${where.join(" or ")}`));
      this.#closed = true;
      return;
    }
    const worker = this.#worker = new Worker(module, { type: "module", name: "svcd-sign" });
    worker.onmessage = () => resolve();
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(`the sign thread stopped: ${e.message}`));
      this.close();
    };
    worker.postMessage(setup);
  }

  /**
   * Settles once the thread runs its loop; rejects when its module could not be loaded or it
   * failed (it is then closed: every job still out is refused and none is taken any more).
   */
  readonly started: Promise<void>;

  /**
   * Starts the thread for `mod` (loaded and initialised by this process); undefined when the
   * module leaves C_SignInit or C_Sign out of its table. `exactAboveMs`: as HoldTimer's.
   */
  static start(mod: Pkcs11Module, exactAboveMs: number): SignThread | undefined {
    const signInit = mod.entry("C_SignInit");
    const sign = mod.entry("C_Sign");
    if (!signInit || !sign) return undefined;
    return new SignThread(mod, {
      control: new SharedArrayBuffer(CONTROL_BYTES),
      ring: new SharedArrayBuffer(slotOffset(SLOTS)),
      signInit: BigInt(Deno.UnsafePointer.value(signInit)),
      sign: BigInt(Deno.UnsafePointer.value(sign)),
      exactAboveMs,
    });
  }

  /** Signatures the thread made (for tests and benches). */
  get signed(): number {
    return this.#signed;
  }

  /**
   * C_SignInit + C_Sign on the thread, with `session` and `key` held by the caller until the
   * promise settles; rejects with Pkcs11Error. Undefined when the ring cannot carry the job (see
   * the module comment): the caller signs elsewhere.
   */
  sign(
    session: Handle,
    key: Handle,
    choice: MechanismChoice,
    data: Uint8Array,
  ): Promise<SignedOnThread> | undefined {
    if (this.#closed || choice.parameter || data.byteLength > DATA_ROOM) return undefined;
    if (((this.#posted - this.#settled) | 0) >= SLOTS) return undefined;
    const at = slotOffset(slotOf(this.#posted));
    const w = at / 8;
    this.#words[w + SLOT.SESSION] = BigInt(session);
    this.#words[w + SLOT.KEY] = BigInt(key);
    this.#words[w + SLOT.MECHANISM] = BigInt(choice.mechanism);
    this.#words[w + SLOT.MECHANISM + 1] = 0n;
    this.#words[w + SLOT.MECHANISM + 2] = 0n;
    this.#words[w + SLOT.DATA_LENGTH] = BigInt(data.byteLength);
    this.#bytes.set(data, at + DATA_AT);
    const { promise, resolve, reject } = Promise.withResolvers<SignedOnThread>();
    this.#jobs[slotOf(this.#posted)] = { resolve, reject };
    this.#posted = (this.#posted + 1) | 0;
    Atomics.store(this.#control, CONTROL.POSTED, this.#posted);
    if (Atomics.load(this.#control, CONTROL.SLEEPING) === 1) {
      Atomics.notify(this.#control, CONTROL.POSTED);
    }
    this.#watch();
    return promise;
  }

  /**
   * Stops the thread: a signature it is making finishes first (waited for up to `waitMs`: the
   * session and the key it uses must outlive it), the jobs it did are settled, the others refused.
   * False when the thread was still in the module after `waitMs`: the caller must then leave the
   * module to the process exit instead of closing its sessions and finalising it.
   */
  close(waitMs = CLOSE_WAIT_MS): boolean {
    if (this.#closed) return this.#outOfModule;
    this.#closed = true;
    Atomics.store(this.#control, CONTROL.STOP, 1);
    Atomics.notify(this.#control, CONTROL.POSTED);
    this.#outOfModule = this.#waitOutOfModule(waitMs);
    this.#worker?.terminate();
    this.#settleThrough(Atomics.load(this.#control, CONTROL.DONE));
    const refused = new Error("the sign thread was closed before it made this signature");
    for (; this.#settled !== this.#posted; this.#settled = (this.#settled + 1) | 0) {
      this.#take(slotOf(this.#settled))?.reject(refused);
    }
    return this.#outOfModule;
  }

  #waitOutOfModule(waitMs: number): boolean {
    const until = performance.now() + waitMs;
    while (Atomics.load(this.#control, CONTROL.IN_MODULE) === 1) {
      const left = until - performance.now();
      if (left <= 0) return false;
      Atomics.wait(this.#control, CONTROL.IN_MODULE, 1, left);
    }
    return true;
  }

  /** Waits (without blocking) for the thread to count past the jobs settled so far. */
  #watch(): void {
    if (this.#watching || this.#closed) return;
    this.#watching = true;
    const wait = Atomics.waitAsync(this.#control, CONTROL.DONE, this.#settled);
    if (wait.async) void wait.value.then(() => this.#settleDone());
    else queueMicrotask(() => this.#settleDone());
  }

  /** Settles every job the thread has done, in order; watches again while jobs are out. */
  #settleDone(): void {
    this.#watching = false;
    if (this.#closed) return;
    this.#settleThrough(Atomics.load(this.#control, CONTROL.DONE));
    if (this.#settled !== this.#posted) this.#watch();
  }

  #settleThrough(done: number): void {
    for (; this.#settled !== done; this.#settled = (this.#settled + 1) | 0) {
      const job = this.#take(slotOf(this.#settled));
      if (!job) continue;
      try {
        job.resolve(this.#result(slotOffset(slotOf(this.#settled))));
      } catch (err) {
        job.reject(err as Error);
      }
    }
  }

  /** The signature a done slot holds; throws what the module said instead. */
  #result(at: number): SignedOnThread {
    const w = at / 8;
    const rv = Number(this.#words[w + SLOT.RV]);
    const failed = this.#words[w + SLOT.FAILED_CALL] === 0n ? "C_SignInit" : "C_Sign";
    const heldMs = this.#held[w + SLOT.HELD_MS];
    const length = Number(this.#words[w + SLOT.SIGNATURE_LENGTH]);
    // The operation is still active and the caller still holds the session: finish it here.
    if (rv === CKR.BUFFER_TOO_SMALL && failed === "C_Sign") {
      return { signature: this.#finishLarger(at, length), heldMs };
    }
    if (rv !== CKR.OK) throw new Pkcs11Error(failed, rv);
    if (length > SIGNATURE_ROOM) {
      throw new Error(`C_Sign said ${length} bytes, past the ${SIGNATURE_ROOM} it was given`);
    }
    this.#signed++;
    return { signature: this.#bytes.slice(at + SIGNATURE_AT, at + SIGNATURE_AT + length), heldMs };
  }

  /** C_Sign again on this thread, into a buffer of the `length` the module asked for. */
  #finishLarger(at: number, length: number): Uint8Array {
    const w = at / 8;
    const dataLength = Number(this.#words[w + SLOT.DATA_LENGTH]);
    const data = this.#bytes.slice(at + DATA_AT, at + DATA_AT + dataLength);
    return finishSign(this.#mod, Number(this.#words[w + SLOT.SESSION]), data, length);
  }

  #take(slot: number): Job | undefined {
    const job = this.#jobs[slot];
    this.#jobs[slot] = undefined;
    return job;
  }
}

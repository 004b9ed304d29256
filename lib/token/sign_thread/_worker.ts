/**
 * The sign thread's own loop (./sign_thread.ts has the why): it takes the jobs of the ring in
 * order, makes each signature with C_SignInit + C_Sign on the session and key the main isolate
 * checked out for it, times how long it held the thread, and counts it done. It blocks in
 * `Atomics.wait` while the ring is empty (a Worker may block; it runs nothing else), and binds the
 * two entries of the function table itself, from the addresses the main isolate sent: the module
 * is loaded and logged in once per process.
 */
import { CKR, SIGNATURES } from "../../../ffi/pkcs11/mod.ts";
import { HoldTimer, THIS_THREAD } from "../sign_placement.ts";
import {
  CONTROL,
  DATA_AT,
  SIGNATURE_AT,
  SIGNATURE_ROOM,
  SLOT,
  slotOf,
  slotOffset,
} from "./_slots.ts";

/** What the main isolate sends once, to start the loop. */
export interface SignThreadSetup {
  control: SharedArrayBuffer;
  ring: SharedArrayBuffer;
  /** Addresses of C_SignInit and C_Sign in the module's function table. */
  signInit: bigint;
  sign: bigint;
  /** The hold time above which the thread's CPU time is read instead of the wall clock (ms). */
  exactAboveMs: number;
}

/**
 * A signature that slept but ended within this (ms) counts its CPU time, not its wall time: the
 * module's locks are shared with the main thread's seal and every other thread in the module, and
 * a wait for one of them, stretched by preemption on a busy machine, is not a slow key. A module
 * that blocks for longer still moves its keys to the pool.
 */
const LOCK_WAIT_MS = 5;

/** An idle thread looks at the stop flag this often (ms) even when nobody notifies it. */
const IDLE_CHECK_MS = 1000;

// deno-lint-ignore no-explicit-any
const scope = self as any;
scope.onmessage = (e: MessageEvent<SignThreadSetup>) => {
  // Started means bound: a failure to bind the module's entries reaches `started`, not a job.
  const loop = prepare(e.data);
  scope.postMessage("started");
  loop();
};

/** Binds the module's two entries and the timer; returns the loop over the ring's jobs. */
function prepare(setup: SignThreadSetup): () => void {
  const control = new Int32Array(setup.control);
  const job = jobRunner(setup);
  return () => {
    let next = Atomics.load(control, CONTROL.DONE);
    while (Atomics.load(control, CONTROL.STOP) === 0) {
      if (Atomics.load(control, CONTROL.POSTED) === next) {
        waitForJob(control, next);
        continue;
      }
      Atomics.store(control, CONTROL.IN_MODULE, 1);
      try {
        job(slotOffset(slotOf(next)));
      } finally {
        leaveModule(control);
      }
      next = (next + 1) | 0;
      Atomics.store(control, CONTROL.DONE, next);
      Atomics.notify(control, CONTROL.DONE);
    }
  };
}

/** One job: C_SignInit + C_Sign on the slot at byte `at`, its results written back into it. */
function jobRunner(setup: SignThreadSetup): (at: number) => void {
  const words = new BigInt64Array(setup.ring);
  const held = new Float64Array(setup.ring);
  const bytes = new Uint8Array(setup.ring);
  const signInit = entryAt(setup.signInit, SIGNATURES.C_SignInit);
  const sign = entryAt(setup.sign, SIGNATURES.C_Sign);
  const timer = new HoldTimer(setup.exactAboveMs, THIS_THREAD, LOCK_WAIT_MS);
  return (at) => {
    const w = at / 8;
    const dataLength = Number(words[w + SLOT.DATA_LENGTH]);
    timer.start();
    let rv = signInit.call(
      words[w + SLOT.SESSION],
      bytes.subarray(at + 8 * SLOT.MECHANISM),
      words[w + SLOT.KEY],
    );
    words[w + SLOT.FAILED_CALL] = 0n;
    if (rv === CKR.OK) {
      words[w + SLOT.SIGNATURE_LENGTH] = BigInt(SIGNATURE_ROOM);
      rv = sign.call(
        words[w + SLOT.SESSION],
        bytes.subarray(at + DATA_AT, at + DATA_AT + dataLength),
        BigInt(dataLength),
        bytes.subarray(at + SIGNATURE_AT, at + SIGNATURE_AT + SIGNATURE_ROOM),
        bytes.subarray(at + 8 * SLOT.SIGNATURE_LENGTH),
      );
      words[w + SLOT.FAILED_CALL] = 1n;
    }
    held[w + SLOT.HELD_MS] = timer.heldMs();
    words[w + SLOT.RV] = BigInt(rv);
  };
}

/** Out of the module: a close waiting for that is woken (it set STOP before it waits). */
function leaveModule(control: Int32Array): void {
  Atomics.store(control, CONTROL.IN_MODULE, 0);
  if (Atomics.load(control, CONTROL.STOP) === 1) Atomics.notify(control, CONTROL.IN_MODULE);
}

/** Sleeps until a job is posted after `next`, or the idle check comes round. */
function waitForJob(control: Int32Array, next: number): void {
  Atomics.store(control, CONTROL.SLEEPING, 1);
  // Posted between the look and the flag: the poster may not have seen the flag, so do not sleep.
  if (Atomics.load(control, CONTROL.POSTED) === next) {
    Atomics.wait(control, CONTROL.POSTED, next, IDLE_CHECK_MS);
  }
  Atomics.store(control, CONTROL.SLEEPING, 0);
}

/** The table entry at `address`, bound with the signature ffi/pkcs11 gives that entry. */
function entryAt<D extends Deno.ForeignFunction>(address: bigint, def: D): Deno.UnsafeFnPointer<D> {
  return new Deno.UnsafeFnPointer(Deno.UnsafePointer.create(address) as Deno.PointerObject<D>, def);
}

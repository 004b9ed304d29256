import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { DatabaseSync } from "node:sqlite";
import { type BudgetOptions, RefusalBudget } from "./budget.ts";
import { budgetDefaults } from "./options.ts";
import { STATE_FILE_NAME, StateError } from "./store.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
const T0 = Date.UTC(2025, 0, 1);

/** A clock the test moves by hand. */
class Clock {
  ms = T0;
  now = () => this.ms;
  advance(seconds: number) {
    this.ms += seconds * 1000;
  }
}

type Opts = Omit<BudgetOptions, "stateDir" | "now">;

async function withBudget(
  opts: Opts,
  fn: (
    b: RefusalBudget,
    ctx: { dir: string; clock: Clock; reopen: (o?: Opts) => RefusalBudget },
  ) => void,
) {
  const dir = moduleTempDir("svcd-budget-");
  const clock = new Clock();
  const open = (o: Opts = opts) => RefusalBudget.open({ ...o, stateDir: dir, now: clock.now });
  let current = open();
  const reopen = (o?: Opts) => {
    current.close();
    return current = open(o);
  };
  try {
    fn(current, { dir, clock, reopen });
  } finally {
    try {
      current.close();
    } catch { /* a test may have closed it */ }
    await Deno.remove(dir, { recursive: true });
  }
}

const refuse = (b: RefusalBudget, id: string, times: number) => {
  const crossings = [];
  for (let i = 0; i < times; i++) {
    const r = b.recordRefusal(id);
    if (r.crossed) crossings.push(r);
  }
  return crossings;
};

const SMALL: Opts = { threshold: 3, refillSeconds: 60, baseDelaySeconds: 5, maxDelaySeconds: 40 };

Deno.test("crossing at the threshold limits with Retry-After = base delay", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    assert.deepEqual(b.recordRefusal(ALICE), { count: 1, crossed: false, delaySeconds: 0 });
    assert.deepEqual(b.recordRefusal(ALICE), { count: 2, crossed: false, delaySeconds: 0 });
    assert.deepEqual(b.check(ALICE), { limited: false });
    assert.deepEqual(b.recordRefusal(ALICE), { count: 3, crossed: true, delaySeconds: 5 });
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 5 });
    clock.advance(2.5);
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 3 }, "rounded up");
    assert.equal(b.limitedCount(), 1);
  });
});

Deno.test("a limited identity is refused while another identity is served", async () => {
  await withBudget(SMALL, (b) => {
    refuse(b, ALICE, 3);
    refuse(b, BOB, 2);
    assert.equal(b.check(ALICE).limited, true);
    assert.deepEqual(b.check(BOB), { limited: false });
    assert.deepEqual(b.check("CN=carol"), { limited: false });
    assert.equal(b.limitedCount(), 1);
  });
});

Deno.test("a burst of 1000 refusals crosses exactly once, with the base delay", async () => {
  await withBudget({ ...SMALL, threshold: 10 }, (b) => {
    const crossings = refuse(b, ALICE, 1000);
    assert.equal(crossings.length, 1);
    assert.deepEqual(crossings[0], { count: 10, crossed: true, delaySeconds: 5 });
    const late = b.recordRefusal(ALICE);
    assert.equal(late.crossed, false);
    assert.equal(late.count, 10, "refusals while limited are not counted");
  });
});

Deno.test("after the delay a good request passes (no lock); the next refusal doubles the delay", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    refuse(b, ALICE, 3);
    clock.advance(4.999);
    assert.equal(b.check(ALICE).limited, true);
    clock.advance(0.001);
    assert.deepEqual(b.check(ALICE), { limited: false });
    assert.equal(b.limitedCount(), 0);
    assert.deepEqual(b.recordRefusal(ALICE), { count: 4, crossed: true, delaySeconds: 10 });
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 10 });
  });
});

Deno.test("the delay grows with the count up to the ceiling and every delay ends", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    const delays = [];
    for (let episode = 0; episode < 8; episode++) {
      const [crossing] = refuse(b, ALICE, episode === 0 ? 3 : 1);
      delays.push(crossing.delaySeconds);
      clock.advance(crossing.delaySeconds);
      assert.deepEqual(b.check(ALICE), { limited: false }, `episode ${episode} ends`);
    }
    assert.deepEqual(delays, [5, 10, 20, 40, 40, 40, 40, 40]);
  });
});

Deno.test("the count and the delay hold across close and open (restart)", async () => {
  await withBudget(SMALL, (_b, { clock, reopen }) => {
    refuse(_b, ALICE, 3);
    refuse(_b, BOB, 1);
    clock.advance(1);
    let b = reopen();
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 4 });
    assert.equal(b.limitedCount(), 1);
    assert.deepEqual(b.check(BOB), { limited: false });
    clock.advance(4);
    assert.deepEqual(b.check(ALICE), { limited: false });
    b = reopen();
    assert.deepEqual(b.recordRefusal(ALICE), { count: 4, crossed: true, delaySeconds: 10 });
    assert.deepEqual(b.recordRefusal(BOB), { count: 2, crossed: false, delaySeconds: 0 });
  });
});

Deno.test("a restart with a lower ceiling caps a persisted delay", async () => {
  await withBudget({ ...SMALL, baseDelaySeconds: 30, maxDelaySeconds: 300 }, (_b, { reopen }) => {
    refuse(_b, ALICE, 3);
    assert.equal(_b.check(ALICE).limited, true);
    const b = reopen({ ...SMALL, baseDelaySeconds: 5, maxDelaySeconds: 10 });
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 10 });
  });
});

Deno.test("a clock that jumps back never makes Retry-After exceed the ceiling", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    refuse(b, ALICE, 3);
    clock.advance(-3600);
    assert.deepEqual(b.check(ALICE), { limited: true, retryAfterSeconds: 40 });
  });
});

Deno.test("the count decays by one per refill interval", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    refuse(b, ALICE, 2);
    clock.advance(59);
    assert.equal(b.recordRefusal(ALICE).crossed, true, "within the interval nothing decays");
    clock.advance(5);
    refuse(b, BOB, 2);
    clock.advance(60);
    assert.deepEqual(b.recordRefusal(BOB), { count: 2, crossed: false, delaySeconds: 0 });
    clock.advance(120);
    assert.deepEqual(b.recordRefusal(BOB), { count: 1, crossed: false, delaySeconds: 0 });
  });
});

Deno.test("decay keeps partial progress: refusals do not restart the refill clock", async () => {
  await withBudget(SMALL, (b, { clock }) => {
    refuse(b, ALICE, 2); // t = 0
    clock.advance(50);
    b.recordRefusal(ALICE); // crosses at count 3
    clock.advance(10); // t = 60: one decays, though the last refusal was 10 s ago
    assert.deepEqual(b.check(ALICE), { limited: false });
    assert.deepEqual(b.recordRefusal(ALICE), { count: 3, crossed: true, delaySeconds: 5 });
  });
});

Deno.test("identities decayed to zero are dropped from memory and from the file", async () => {
  await withBudget(SMALL, (b, { clock, dir }) => {
    refuse(b, ALICE, 2);
    refuse(b, BOB, 1);
    assert.equal(b.size, 2);
    clock.advance(120);
    b.recordRefusal("CN=carol"); // the sweep runs on a refusal once per interval
    assert.equal(b.size, 1);
    b.close();
    assert.equal(rowCount(`${dir}/${STATE_FILE_NAME}`), 1);
  });
});

Deno.test("100 000 distinct subjects stay within the cap, in memory and on disk", async () => {
  const maxEntries = 1000;
  await withBudget({ ...SMALL, maxEntries }, (b, { dir, reopen }) => {
    const started = performance.now();
    for (let i = 0; i < 100_000; i++) {
      b.recordRefusal(`CN=client-${i},O=Example`);
      if (b.size > maxEntries) assert.fail(`size ${b.size} after ${i + 1} subjects`);
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `  100 000 distinct refusals: ${seconds.toFixed(2)} s, ` +
        `${(seconds * 1e6 / 100_000).toFixed(1)} µs each`,
    );
    assert.equal(b.size, maxEntries);
    const after = reopen();
    assert.equal(after.size, maxEntries);
    after.close();
    assert.equal(rowCount(`${dir}/${STATE_FILE_NAME}`), maxEntries);
  });
});

Deno.test("eviction spares limited identities, so a flood of new subjects lifts no limit", async () => {
  await withBudget({ ...SMALL, maxEntries: 50 }, (b) => {
    refuse(b, ALICE, 3);
    for (let i = 0; i < 10_000; i++) b.recordRefusal(`CN=flood-${i}`);
    assert.equal(b.size, 50);
    assert.equal(b.check(ALICE).limited, true);
  });
});

Deno.test("eviction spares limited identities even when many of them are the oldest", async () => {
  await withBudget({ ...SMALL, maxEntries: 150 }, (b) => {
    const limited = Array.from({ length: 100 }, (_, i) => `CN=limited-${i}`);
    for (const id of limited) refuse(b, id, 3);
    for (let i = 0; i < 5_000; i++) b.recordRefusal(`CN=flood-${i}`);
    assert.equal(b.size, 150);
    for (const id of limited) assert.equal(b.check(id).limited, true, id);
  });
});

Deno.test("a lower cap at open evicts the least recently refused", async () => {
  await withBudget(SMALL, (b, { clock, reopen }) => {
    for (const id of ["CN=a", "CN=b", "CN=c", "CN=d"]) {
      b.recordRefusal(id);
      clock.advance(1);
    }
    b.recordRefusal("CN=a"); // now the most recent
    const small = reopen({ ...SMALL, maxEntries: 2 });
    assert.equal(small.size, 2);
    assert.equal(small.recordRefusal("CN=a").count, 3, "kept");
    assert.equal(small.recordRefusal("CN=b").count, 1, "evicted, starts again");
  });
});

Deno.test("very long identities are keyed by hash: distinct, recognised, bounded on disk", async () => {
  await withBudget(SMALL, (b, { dir }) => {
    const long1 = "CN=" + "x".repeat(10_000);
    const long2 = "CN=" + "x".repeat(9_999) + "y";
    refuse(b, long1, 3);
    assert.equal(b.check(long1).limited, true);
    assert.deepEqual(b.check(long2), { limited: false });
    b.close();
    const db = new DatabaseSync(`${dir}/${STATE_FILE_NAME}`);
    const longest = db.prepare("SELECT max(length(identity)) AS n FROM refusals").get()?.n;
    db.close();
    assert.ok(Number(longest) < 100, `stored key length ${longest}`);
  });
});

Deno.test("latin1 identities (UTF-8 bytes as chars) survive a restart unchanged", async () => {
  const subject = "CN=J\xc3\xbcrgen \x80\xff,O=Ex";
  await withBudget(SMALL, (b, { reopen }) => {
    refuse(b, subject, 3);
    assert.equal(reopen().check(subject).limited, true);
  });
});

Deno.test("a failed write is reported and the in-memory count still holds", async () => {
  const errors: Error[] = [];
  await withBudget({ ...SMALL, onStoreError: (e) => errors.push(e) }, (b) => {
    b.recordRefusal(ALICE);
    b.close();
    refuse(b, ALICE, 2);
    assert.ok(errors.length >= 2, `errors: ${errors.length}`);
    assert.equal(b.check(ALICE).limited, true);
  });
});

Deno.test("unset or undefined options take the documented defaults; bad ones are refused", async () => {
  await withBudget({ threshold: undefined, maxDelaySeconds: undefined }, (b) => {
    assert.deepEqual({ ...b.tuning }, budgetDefaults());
  });
  assert.deepEqual(budgetDefaults(), {
    threshold: 10,
    refillSeconds: 60,
    baseDelaySeconds: 5,
    maxDelaySeconds: 300,
    maxEntries: 10_000,
  });
  const dir = await Deno.makeTempDir();
  try {
    for (const bad of [{ threshold: 0 }, { refillSeconds: 1.5 }, { maxDelaySeconds: 1 }]) {
      assert.throws(() => RefusalBudget.open({ stateDir: dir, ...bad }), RangeError);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function rowCount(path: string): number {
  const db = new DatabaseSync(path);
  try {
    return Number(db.prepare("SELECT count(*) AS n FROM refusals").get()?.n);
  } finally {
    db.close();
  }
}

/** Opens a budget on `dir` and returns the StateError it throws. */
function stateError(dir: string): StateError {
  try {
    RefusalBudget.open({ stateDir: dir }).close();
  } catch (e) {
    assert.ok(e instanceof StateError, `expected StateError, got ${e}`);
    return e;
  }
  assert.fail("expected open to fail");
}

async function inTempDir(fn: (dir: string, file: string) => Promise<void> | void) {
  const dir = moduleTempDir("svcd-state-");
  try {
    await fn(dir, `${dir}/${STATE_FILE_NAME}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a state file of garbage stops start-up with a message naming the file", async () => {
  await inTempDir((dir, file) => {
    Deno.writeFileSync(file, new TextEncoder().encode("not a database\n".repeat(500)));
    const e = stateError(dir);
    assert.equal(e.path, file);
    assert.ok(e.message.includes(file), e.message);
    assert.match(e.message, /corrupt or unreadable.*move it aside/);
    assert.ok(Deno.statSync(file).size > 0, "the file is left for the operator");
  });
});

Deno.test("a state file with damaged pages stops start-up", async () => {
  await inTempDir((dir, file) => {
    const b = RefusalBudget.open({ stateDir: dir });
    for (let i = 0; i < 2000; i++) b.recordRefusal(`CN=client-${i}`);
    b.close();
    const bytes = Deno.readFileSync(file);
    bytes.fill(0xa5, 4096, bytes.length - 4096); // keep the header, wreck the pages
    Deno.writeFileSync(file, bytes);
    assert.ok(stateError(dir).message.includes(file));
  });
});

Deno.test("an SQLite file that is not svcd's state is refused", async () => {
  await inTempDir((dir, file) => {
    const db = new DatabaseSync(file);
    db.exec("CREATE TABLE other (x INTEGER)");
    db.close();
    const foreign = stateError(dir);
    assert.equal(foreign.kind, "unusable");
    assert.match(foreign.message, /not svcd's refusal state/);
  });
});

Deno.test("an unreadable state path or a missing state dir stops start-up with what to do", async () => {
  await inTempDir((dir, file) => {
    Deno.mkdirSync(file);
    assert.ok(stateError(dir).message.includes(file));
    const missing = stateError(`${dir}/nope`);
    assert.equal(missing.kind, "no-folder");
    assert.match(missing.message, /--state-dir .*nope.*create it/);
  });
});

Deno.test("a second budget on the same state dir is refused while the first holds it", async () => {
  await inTempDir((dir) => {
    const first = RefusalBudget.open({ stateDir: dir });
    try {
      const held = stateError(dir);
      assert.equal(held.kind, "in-use");
      assert.match(held.message, /locked by another process/);
      assert.doesNotMatch(held.message, /corrupt/, "a held file is not called corrupt");
    } finally {
      first.close();
    }
    RefusalBudget.open({ stateDir: dir }).close();
  });
});

Deno.test({
  name: "a state file that cannot be created is not called corrupt: the folder is named",
  ignore: Deno.uid() !== 0,
  fn: async () => {
    // A read-only tmpfs: not even root may create the file there.
    const dir = moduleTempDir("svcd-state-ro-");
    const mount = await new Deno.Command("mount", {
      args: ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir],
    }).output();
    assert.ok(mount.success);
    try {
      const e = stateError(dir);
      assert.match(
        e.message,
        /cannot be created .*--state-dir .* must be writable by the daemon's user/,
      );
      assert.doesNotMatch(e.message, /corrupt/);
    } finally {
      await new Deno.Command("umount", { args: [dir] }).output();
      await Deno.remove(dir);
    }
  },
});

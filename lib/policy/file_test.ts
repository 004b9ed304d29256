import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { policyByteLimit, PolicyFile } from "./file.ts";
import { PolicyError } from "./policy.ts";
import { policyOfSize } from "../../tests/support/policy.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";

async function withPolicy(text: string, fn: (path: string) => Promise<void>) {
  const dir = moduleTempDir("svcd-policy-");
  const path = `${dir}/policy`;
  await Deno.writeTextFile(path, text);
  try {
    await fn(path);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function loadError(path: string, options = {}): Promise<PolicyError> {
  try {
    await PolicyFile.load(path, options);
  } catch (e) {
    assert.ok(e instanceof PolicyError, `expected PolicyError, got ${e}`);
    return e;
  }
  assert.fail("expected load to fail");
}

Deno.test("load reads the grants; a reload installs the new file", async () => {
  await withPolicy(`${ALICE}\tk1\n`, async (path) => {
    const file = await PolicyFile.load(path);
    assert.equal(file.current.allows(ALICE, "k1"), true);
    await Deno.writeTextFile(path, `${BOB}\tk2\n`);
    const r = await file.reload();
    assert.ok(r.ok);
    assert.equal(r.policy, file.current);
    assert.equal(file.current.allows(ALICE, "k1"), false);
    assert.equal(file.current.allows(BOB, "k2"), true);
  });
});

Deno.test("a parse error at start is thrown, naming file and line", async () => {
  await withPolicy(`# c\n${ALICE}\tk1\nbroken line\n`, async (path) => {
    const e = await loadError(path);
    assert.equal(e.line, 3);
    assert.ok(e.message.startsWith(`${path} line 3: no TAB`), e.message);
  });
});

Deno.test("an unreadable or missing file at start is thrown with line 0 and a hint", async () => {
  await withPolicy("", async (path) => {
    const missing = await loadError(`${path}.missing`);
    assert.equal(missing.line, 0);
    assert.match(missing.message, /cannot read the policy file .*--policy/);
    const dir = await loadError(path.replace(/\/policy$/, ""));
    assert.match(dir.message, /not a regular file/);
  });
});

Deno.test("a zero-byte file at start is valid, refuses everyone and warns", async () => {
  await withPolicy("", async (path) => {
    const file = await PolicyFile.load(path);
    assert.equal(file.current.size, 0);
    assert.match(file.current.warnings.join("\n"), /grants nothing/);
  });
});

Deno.test("a reload that fails to parse keeps the old grants and says why with the line", async () => {
  await withPolicy(`${ALICE}\tk1\n`, async (path) => {
    const file = await PolicyFile.load(path);
    const before = file.current;
    await Deno.writeTextFile(path, `${BOB}\tk2\n${BOB} k3\n`);
    const r = await file.reload();
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.error : "", new RegExp(`^${path} line 2: no TAB.*keeping the policy`));
    assert.equal(file.current, before);
    assert.equal(file.current.allows(ALICE, "k1"), true);
    assert.equal(file.current.allows(BOB, "k2"), false);
  });
});

Deno.test("a reload of an unreadable file keeps the old grants", async () => {
  await withPolicy(`${ALICE}\tk1\n`, async (path) => {
    const file = await PolicyFile.load(path);
    await Deno.remove(path);
    const r = await file.reload();
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.error : "", /cannot read the policy file.*keeping the policy in force/);
    assert.equal(file.current.allows(ALICE, "k1"), true);
  });
});

Deno.test("a reload never installs a zero-byte file; a comment-only file revokes all", async () => {
  await withPolicy(`${ALICE}\tk1\n`, async (path) => {
    const file = await PolicyFile.load(path);
    await Deno.writeTextFile(path, "");
    const r = await file.reload();
    assert.equal(r.ok, false);
    assert.match(!r.ok ? r.error : "", /empty \(0 bytes\).*leave a comment line/);
    assert.equal(file.current.allows(ALICE, "k1"), true);
    await Deno.writeTextFile(path, "# all grants revoked\n");
    const revoked = await file.reload();
    assert.ok(revoked.ok);
    assert.equal(file.current.allows(ALICE, "k1"), false);
    assert.match(revoked.policy.warnings.join("\n"), /grants nothing/);
  });
});

Deno.test("concurrent reloads both complete and the last result is the policy in force", async () => {
  await withPolicy(`${ALICE}\tk1\n`, async (path) => {
    const file = await PolicyFile.load(path);
    await Deno.writeTextFile(path, `${BOB}\tk2\n`);
    const first = file.reload();
    const second = file.reload();
    const [a, b] = await Promise.all([first, second]);
    assert.ok(a.ok && b.ok);
    assert.equal(file.current, b.policy);
  });
});

Deno.test("a grant of a reserved label is refused at load and at reload, naming file and line", async () => {
  const reservedLabels = new Set(["svc-audit", "svc-audit-sign"]);
  await withPolicy(`${ALICE}\tk1\n${BOB}\tsvc-audit-sign\n`, async (path) => {
    const e = await PolicyFile.load(path, { reservedLabels }).then(
      () => assert.fail("a policy granting an audit key was accepted"),
      (err) => err as PolicyError,
    );
    assert.ok(e instanceof PolicyError);
    assert.equal(e.line, 2);
    assert.match(e.message, /line 2: label 'svc-audit-sign' is reserved .*remove this line/);
    // Without the option the same file parses: the refusal comes from the reserved set.
    assert.equal((await PolicyFile.load(path)).current.allows(BOB, "svc-audit-sign"), true);

    await Deno.writeTextFile(path, `${ALICE}\tk1\n`);
    const file = await PolicyFile.load(path, { reservedLabels });
    await Deno.writeTextFile(path, `${ALICE}\tk1\n${ALICE}\tsvc-audit\n`);
    const r = await file.reload();
    assert.ok(!r.ok);
    assert.match(r.error, /label 'svc-audit' is reserved.*keeping the policy in force/s);
    assert.equal(file.current.allows(ALICE, "svc-audit"), false);
    assert.equal(file.current.allows(ALICE, "k1"), true);
  });
});

Deno.test("a policy of exactly --policy-max-grants grants loads; one grant more is refused at start and at reload", async () => {
  const maxGrants = 1000;
  const grants = (n: number) =>
    "# comment\n" + Array.from({ length: n }, (_, i) => `CN=c${i},O=Ex\tk${i % 3}\n`).join("");
  await withPolicy(grants(maxGrants) + `CN=c0,O=Ex\tk0\n`, async (path) => {
    const file = await PolicyFile.load(path, { maxGrants });
    assert.equal(file.current.size, maxGrants, "a duplicate is not a grant more");
    assert.ok(file.current.allows(`CN=c${maxGrants - 1},O=Ex`, `k${(maxGrants - 1) % 3}`));

    await Deno.writeTextFile(path, grants(maxGrants + 1));
    const r = await file.reload();
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.match(r.error, new RegExp(`line ${maxGrants + 2}: more than ${maxGrants} grants`));
      assert.match(r.error, /--policy-max-grants/);
      assert.match(r.error, new RegExp(`keeping the policy in force \\(${maxGrants} grants\\)`));
    }
    assert.equal(file.current.size, maxGrants, "the policy in force stays");
    assert.ok(file.current.allows("CN=c0,O=Ex", "k0"));
    assert.equal(file.current.allows(`CN=c${maxGrants},O=Ex`, `k${maxGrants % 3}`), false);

    try {
      await PolicyFile.load(path, { maxGrants });
      assert.fail("expected load to fail");
    } catch (e) {
      assert.ok(e instanceof PolicyError);
      assert.equal(e.line, maxGrants + 2);
      assert.match(e.message, /more than 1000 grants; a policy may hold at most 1000/);
    }
  });
});

Deno.test("a policy file of exactly the byte limit loads; one byte more is refused at start and at reload", async () => {
  const limit = policyByteLimit(10);
  assert.equal(limit, 1 << 20, "never less than 1 MiB");
  const largest = policyOfSize(limit, [], 10);
  assert.equal(largest.length, limit);
  await withPolicy(largest, async (path) => {
    const file = await PolicyFile.load(path, { maxGrants: 10 });
    assert.ok(file.current.allows("CN=client-0,O=Example,C=DE", "k0"));
    assert.equal(file.fileBytes, limit);
    const grants = file.current.size;

    await Deno.writeTextFile(path, largest + "\n");
    const r = await file.reload();
    assert.equal(r.ok, false);
    if (!r.ok) {
      assert.match(r.error, new RegExp(`${limit + 1} bytes; .*at most ${limit}`));
      assert.match(r.error, new RegExp(`keeping the policy in force \\(${grants} grants\\)`));
    }
    assert.equal(file.current.size, grants, "the policy in force stays");
    assert.ok(file.current.allows("CN=client-0,O=Example,C=DE", "k0"));

    const e = await loadError(path, { maxGrants: 10 });
    assert.equal(e.line, 0);
    assert.match(e.message, /at most 1048576 bytes \(256 per grant --policy-max-grants allows\)/);
  });
});

import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { parseIndex } from "../ocsp/mod.ts";
import { CaFolder, CaFolderError, serialHex } from "./store.ts";

async function folder(): Promise<CaFolder> {
  const dir = moduleTempDir("svcd-ca-");
  return await CaFolder.create(dir, { keyLabel: "ca" }, Uint8Array.of(0x30, 0), 0x10n);
}

const EXPIRES = Date.UTC(2030, 0, 1);

Deno.test("store: concurrent issuers under the lock get distinct serials and lose no index line", async () => {
  const f = await folder();
  try {
    await Promise.all(Array.from({ length: 12 }, (_, i) =>
      f.locked(async () => {
        const serial = serialHex(await f.takeSerial());
        await f.appendIndex({ status: "V", expires: EXPIRES, serial, subject: `/CN=c${i}` });
      })));
    const { entries } = await f.readIndex();
    assert.equal(entries.length, 12);
    assert.equal(new Set(entries.map((e) => e.serial)).size, 12);
    assert.equal((await Deno.readTextFile(CaFolder.paths(f.dir).serial)).trim(), "1C");
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("store: revoke replaces index.txt by rename, keeps its mode and every other byte, leaves no temp file", async () => {
  const f = await folder();
  try {
    const path = CaFolder.paths(f.dir).index;
    const text = "# kept comment\n" +
      "V\t301231235959Z\t\t0A\tunknown\t/CN=a\n" +
      "V\t20510101000000Z\t\t0B\tcerts/0B.pem\t/CN=b/O=x\n" +
      "R\t301231235959Z\t250101000000Z,superseded\t0C\tunknown\t/CN=c\n";
    await Deno.writeTextFile(path, text);
    await Deno.chmod(path, 0o640);
    const inode = (await Deno.stat(path)).ino;
    const revokedAt = Date.UTC(2026, 10, 22, 12, 0, 0);
    const was = await f.locked(() => f.revoke("b", revokedAt, 1));
    assert.equal(was.status, "V");
    const after = await Deno.readTextFile(path);
    assert.equal(
      after,
      text.replace(
        "V\t20510101000000Z\t\t0B",
        "R\t20510101000000Z\t261122120000Z,keyCompromise\t0B",
      ),
    );
    const info = await Deno.stat(path);
    assert.notEqual(info.ino, inode, "rewritten in place, not replaced");
    assert.equal(info.mode! & 0o777, 0o640);
    assert.deepEqual(
      [...Deno.readDirSync(f.dir)].map((e) => e.name).filter((n) => n.endsWith(".tmp")),
      [],
    );
    assert.equal(parseIndex(after)[1].reason, 1);
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("store: a file that does not parse is never rewritten; the error names the line", async () => {
  const f = await folder();
  try {
    const path = CaFolder.paths(f.dir).index;
    const text = "V\t301231235959Z\t\t0A\tunknown\t/CN=a\nV\tgarbage\n";
    await Deno.writeTextFile(path, text);
    await assert.rejects(f.locked(() => f.revoke("0A", Date.now(), 1)), (err: Error) => {
      assert.ok(err instanceof CaFolderError);
      assert.match(err.message, /index line 2/);
      return true;
    });
    await assert.rejects(
      f.appendIndex({ status: "V", expires: EXPIRES, serial: "0F", subject: "/CN=f" }),
      CaFolderError,
    );
    assert.equal(await Deno.readTextFile(path), text);
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("store: an existing CA is never overwritten by create", async () => {
  const f = await folder();
  try {
    await assert.rejects(
      CaFolder.create(f.dir, { keyLabel: "other" }, Uint8Array.of(0x30, 0), 1n),
      /already holds a CA/,
    );
    assert.equal((await CaFolder.open(f.dir)).config.keyLabel, "ca");
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

Deno.test("store: a damaged ca.json or a missing serial file is named with what to do", async () => {
  const f = await folder();
  try {
    await Deno.remove(CaFolder.paths(f.dir).serial);
    await assert.rejects(f.takeSerial(), /serial is missing; it holds the next serial/);
    await Deno.writeTextFile(CaFolder.paths(f.dir).config, "{keyLabel: ca");
    await assert.rejects(CaFolder.open(f.dir), /ca\.json is not JSON/);
    await Deno.writeTextFile(CaFolder.paths(f.dir).config, "null");
    await assert.rejects(CaFolder.open(f.dir), /names no keyLabel/);
  } finally {
    await Deno.remove(f.dir, { recursive: true });
  }
});

// Parser strictness over a real socket: each malformed request is refused with a problem body and
// never reaches the handler. These would fail if a Deno upgrade changed node:_http_common's parser.
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import {
  type ContinueCheck,
  DEFAULT_MAX_HEADER_BYTES,
  type HttpRequest,
  Listener,
  problem,
} from "./mod.ts";
import {
  bytes,
  exchange,
  header,
  parseRawResponse,
  readAtMost,
  readToEnd,
  writeAll,
} from "../../tests/support/raw_http.ts";

async function withEcho(
  fn: (path: string, seen: HttpRequest[], l: Listener) => Promise<void>,
  maxBodyBytes = 1024,
  continueCheck?: ContinueCheck,
): Promise<void> {
  const dir = moduleTempDir("svcd-strict-");
  const path = `${dir}/s.sock`;
  const seen: HttpRequest[] = [];
  const l = Listener.open({
    path,
    proxyUid: Deno.uid(),
    workers: 2,
    maxBodyBytes,
    continueCheck,
    handler: (req) => {
      seen.push(req);
      return Promise.resolve({ status: 200, body: req.body });
    },
  });
  const served = l.serve();
  try {
    await fn(path, seen, l);
  } finally {
    await l.close(1000);
    await served;
    Deno.removeSync(dir, { recursive: true });
  }
}

const H = "Host: svcd\r\n";
const REFUSED: Array<[name: string, request: string, status: number]> = [
  [
    "duplicate Content-Length",
    `POST / HTTP/1.1\r\n${H}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc`,
    400,
  ],
  [
    "differing Content-Length",
    `POST / HTTP/1.1\r\n${H}Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd`,
    400,
  ],
  ["Content-Length list", `POST / HTTP/1.1\r\n${H}Content-Length: 3, 3\r\n\r\nabc`, 400],
  ["negative Content-Length", `POST / HTTP/1.1\r\n${H}Content-Length: -3\r\n\r\nabc`, 400],
  [
    "CL then TE",
    `POST / HTTP/1.1\r\n${H}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    400,
  ],
  [
    "TE then CL",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n`,
    400,
  ],
  [
    "TE other than chunked",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    400,
  ],
  [
    "two TE headers",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    400,
  ],
  ["TE in HTTP/1.0", `POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, 400],
  [
    "bad chunk size",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`,
    400,
  ],
  [
    "trailer fields",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nX-SVC-Client-Subject: CN=t\r\n\r\n`,
    400,
  ],
  ["obs-fold", `GET / HTTP/1.1\r\n${H}X-SVC-Client-Subject: CN=a\r\n  CN=b\r\n\r\n`, 400],
  ["obs-fold with tab", `GET / HTTP/1.1\r\n${H}X-A: a\r\n\tb\r\n\r\n`, 400],
  ["bare LF in a header", `GET / HTTP/1.1\r\n${H}X-A: a\nX-B: b\r\n\r\n`, 400],
  ["bare LF everywhere", `GET / HTTP/1.1\nHost: svcd\n\n`, 400],
  ["bare CR", `GET / HTTP/1.1\r\n${H}X-A: a\rX-B: b\r\n\r\n`, 400],
  ["NUL in a header value", `GET / HTTP/1.1\r\n${H}X-A: a\x00b\r\n\r\n`, 400],
  ["NUL in a header name", `GET / HTTP/1.1\r\n${H}X\x00A: ab\r\n\r\n`, 400],
  ["control byte in a header value", `GET / HTTP/1.1\r\n${H}X-A: a\x01b\r\n\r\n`, 400],
  ["DEL in a header value", `GET / HTTP/1.1\r\n${H}X-A: a\x7fb\r\n\r\n`, 400],
  ["space before the colon", `GET / HTTP/1.1\r\n${H}X-SVC-Key : k\r\n\r\n`, 400],
  [
    "over-long header block",
    `GET / HTTP/1.1\r\n${H}X-A: ${"a".repeat(DEFAULT_MAX_HEADER_BYTES)}\r\n\r\n`,
    400,
  ],
  ["HTTP/1.1 without Host", `GET /health HTTP/1.1\r\nX-Host: svcd\r\n\r\n`, 400],
  ["two Host fields", `GET /health HTTP/1.1\r\n${H}${H}\r\n`, 400],
  ["two Host fields in HTTP/1.0", `GET /health HTTP/1.0\r\n${H}host: other\r\n\r\n`, 400],
  ["request line garbage", `GARBAGE\r\n\r\n`, 400],
  ["lower-case method", `get / HTTP/1.1\r\n${H}\r\n`, 400],
  ["two spaces in the request line", `GET  / HTTP/1.1\r\n${H}\r\n`, 400],
  ["trailing junk after the version", `GET / HTTP/1.1 x\r\n${H}\r\n`, 400],
  ["absolute-form target", `GET http://svcd/ HTTP/1.1\r\n${H}\r\n`, 400],
  ["NUL in the target", `GET /a\x00b HTTP/1.1\r\n${H}\r\n`, 400],
  ["HTTP/0.9 request", `GET /\r\n\r\n`, 400],
  ["HTTP/2 connection preface", `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`, 400],
  ["HTTP/2.0 request line", `GET / HTTP/2.0\r\n${H}\r\n`, 400],
  ["HTTP/1.2", `GET / HTTP/1.2\r\n${H}\r\n`, 400],
  ["TLS ClientHello", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", 400],
  ["Upgrade", `GET / HTTP/1.1\r\n${H}Upgrade: websocket\r\nConnection: upgrade\r\n\r\n`, 400],
  ["unknown Expect", `POST / HTTP/1.1\r\n${H}Expect: 200-ok\r\nContent-Length: 1\r\n\r\na`, 417],
  [
    "body over the limit (Content-Length)",
    `POST / HTTP/1.1\r\n${H}Content-Length: 1025\r\n\r\n`,
    413,
  ],
  [
    "body over the limit (chunked)",
    `POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n400\r\n${
      "a".repeat(1024)
    }\r\n1\r\nb\r\n0\r\n\r\n`,
    413,
  ],
];

Deno.test("malformed requests are refused with a problem body and never served", async () => {
  await withEcho(async (path, seen, l) => {
    for (const [name, request, status] of REFUSED) {
      const raw = await exchange(path, request);
      assert.ok(raw.length > 0, `${name}: expected a ${status}, the connection closed silently`);
      const res = parseRawResponse(raw);
      assert.equal(res.status, status, `${name}: status`);
      assert.equal(header(res, "content-type"), "application/problem+json", name);
      assert.equal(header(res, "connection"), "close", name);
      const doc = JSON.parse(new TextDecoder().decode(res.body));
      assert.equal(doc.status, status, name);
      assert.equal(typeof doc.title, "string", name);
      assert.equal(seen.length, 0, `${name}: the handler must not be called`);
    }
    assert.equal(l.stats().parseErrors, REFUSED.length);
  });
});

Deno.test("the largest header block allowed is served", async () => {
  await withEcho(async (path, seen) => {
    const base = `GET / HTTP/1.1\r\n${H}X-A: \r\n\r\n`;
    const request = `GET / HTTP/1.1\r\n${H}X-A: ${
      "a".repeat(DEFAULT_MAX_HEADER_BYTES - base.length)
    }\r\n\r\n`;
    assert.equal(request.length, DEFAULT_MAX_HEADER_BYTES);
    assert.equal(parseRawResponse(await exchange(path, request)).status, 200);
    assert.equal(seen.length, 1);
  });
});

Deno.test("chunked bodies are accepted and reassembled exactly", async () => {
  await withEcho(async (path, seen) => {
    const request = `POST /sign HTTP/1.1\r\n${H}Transfer-Encoding: Chunked\r\n\r\n` +
      "3;ext=1\r\nab\x00\r\n1\r\n\xff\r\nA\r\n0123456789\r\n0\r\n\r\n";
    const res = parseRawResponse(await exchange(path, request));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, bytes("ab\x00\xff0123456789"));
    assert.deepEqual(seen[0].body, bytes("ab\x00\xff0123456789"));
  });
});

Deno.test("a request arriving in many small pieces is assembled", async () => {
  await withEcho(async (path, seen) => {
    const conn = await Deno.connect({ transport: "unix", path });
    const body = "x".repeat(300);
    const request = bytes(`POST /p HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n${body}`);
    for (let i = 0; i < request.length; i += 7) {
      await writeAll(conn, request.subarray(i, i + 7));
      await new Promise((r) => setTimeout(r, 0));
    }
    const res = parseRawResponse(await readToEnd(conn));
    conn.close();
    assert.equal(res.status, 200);
    assert.equal(seen[0].body.length, 300);
  });
});

Deno.test("a body of exactly the limit is served; Expect: 100-continue gets 100 first", async () => {
  await withEcho(async (path, seen) => {
    const body = "b".repeat(1024);
    const ok = parseRawResponse(
      await exchange(path, `POST / HTTP/1.1\r\n${H}Content-Length: 1024\r\n\r\n${body}`),
    );
    assert.equal(ok.status, 200);
    // 100-continue: the interim response precedes the final one.
    const conn = await Deno.connect({ transport: "unix", path });
    await writeAll(
      conn,
      bytes(`POST / HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 2\r\n\r\n`),
    );
    const first = await readAtMost(conn, 25);
    assert.equal(new TextDecoder().decode(first), "HTTP/1.1 100 Continue\r\n\r\n");
    await writeAll(conn, bytes("hi"));
    const res = parseRawResponse(await readToEnd(conn));
    conn.close();
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, bytes("hi"));
    assert.equal(seen.length, 2);
  });
});

Deno.test("Expect: 100-continue: a request the continue check refuses gets its final answer, no 100, no body read", async () => {
  const heads: string[] = [];
  const continueCheck: ContinueCheck = (head) => {
    heads.push(`${head.method} ${head.path} ${head.headers.map(([n]) => n).join(",")}`);
    return head.path === "/no" ? problem(403, "Forbidden", "not for you") : undefined;
  };
  await withEcho(
    async (path, seen) => {
      const conn = await Deno.connect({ transport: "unix", path });
      await writeAll(
        conn,
        bytes(`POST /no?x HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 5\r\n\r\n`),
      );
      // The client never sends its body: the answer must come anyway, and then the close.
      const raw = new TextDecoder().decode(await readToEnd(conn));
      conn.close();
      assert.match(raw, /^HTTP\/1\.1 403 /, "the final status first, no 100 Continue");
      assert.doesNotMatch(raw, /100 Continue/);
      assert.equal(seen.length, 0, "the handler never ran");
      assert.deepEqual(heads, ["POST /no Host,Expect,Content-Length"]);

      const ok = await Deno.connect({ transport: "unix", path });
      await writeAll(
        ok,
        bytes(`POST /yes HTTP/1.1\r\n${H}Expect: 100-continue\r\nContent-Length: 2\r\n\r\n`),
      );
      const first = await readAtMost(ok, 25);
      assert.equal(new TextDecoder().decode(first), "HTTP/1.1 100 Continue\r\n\r\n");
      await writeAll(ok, bytes("hi"));
      const res = parseRawResponse(await readToEnd(ok));
      ok.close();
      assert.equal(res.status, 200);
      assert.equal(seen.length, 1);
      // Without Expect the continue check is not asked: the handler decides with the body.
      const plain = parseRawResponse(
        await exchange(path, `POST /no HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\nhi`),
      );
      assert.equal(plain.status, 200);
      assert.equal(heads.length, 2);
    },
    1024,
    continueCheck,
  );
});

Deno.test("a 413 for a large body is readable by a client still sending it", async () => {
  await withEcho(async (path, seen) => {
    const body = new Uint8Array(200 * 1024);
    const head = bytes(`POST / HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\n\r\n`);
    const raw = await exchange(path, new Uint8Array([...head, ...body]));
    assert.equal(parseRawResponse(raw).status, 413);
    assert.equal(seen.length, 0);
  });
});

/**
 * Sends a head announcing `bodyBytes`, then the body in chunks until the answer is complete (as a
 * proxy does), while reading to the end. Returns the answer and the first read or write error.
 */
async function sendPastTheLimit(
  path: string,
  bodyBytes: number,
): Promise<{ raw: Uint8Array; readError: unknown; writeError: unknown }> {
  const conn = await Deno.connect({ transport: "unix", path });
  let answered = false;
  let writeError: unknown = null;
  const writing = (async () => {
    try {
      await writeAll(conn, bytes(`POST / HTTP/1.1\r\n${H}Content-Length: ${bodyBytes}\r\n\r\n`));
      const chunk = new Uint8Array(64 * 1024);
      for (let sent = 0; sent < bodyBytes && !answered; sent += chunk.length) {
        await writeAll(conn, chunk);
      }
    } catch (e) {
      writeError = e;
    }
  })();
  const chunks: Uint8Array[] = [];
  let readError: unknown = null;
  const buf = new Uint8Array(64 * 1024);
  try {
    for (let n = await conn.read(buf); n !== null; n = await conn.read(buf)) {
      chunks.push(buf.slice(0, n));
    }
  } catch (e) {
    readError = e;
  }
  answered = true;
  await writing;
  conn.close();
  const raw = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  chunks.reduce((at, c) => (raw.set(c, at), at + c.length), 0);
  return { raw, readError, writeError };
}

Deno.test("a 413 from the head reaches a client still sending a body far past the limit: answer, then a clean end, never a reset", async () => {
  await withEcho(async (path, seen, l) => {
    for (let i = 0; i < 20; i++) {
      const { raw, readError, writeError } = await sendPastTheLimit(path, 4 << 20);
      assert.equal(readError, null, `run ${i}: the read failed (${readError})`);
      assert.equal(writeError, null, `run ${i}: the body's write failed (${writeError})`);
      const res = parseRawResponse(raw);
      assert.equal(res.status, 413, `run ${i}`);
      assert.equal(header(res, "content-type"), "application/problem+json");
      assert.equal(JSON.parse(new TextDecoder().decode(res.body)).status, 413);
    }
    assert.equal(seen.length, 0);
    assert.deepEqual(
      [l.stats().waiting, l.stats().reading, l.stats().active, l.stats().queued],
      [0, 0, 0, 0],
    );
  });
});

Deno.test("a lingering connection whose peer never closes is closed at the linger deadline, and does not hold close() for its whole grace", async () => {
  await withEcho(async (path, _seen, l) => {
    const conn = await Deno.connect({ transport: "unix", path });
    try {
      await writeAll(conn, bytes(`POST / HTTP/1.1\r\n${H}Content-Length: 4096\r\n\r\n`));
      // The half-close ends the answer while the connection stays open for the body.
      assert.equal(parseRawResponse(await readToEnd(conn)).status, 413);
      await writeAll(conn, new Uint8Array(1024)); // still read (and discarded), not reset
      let guard: ReturnType<typeof setTimeout> | undefined;
      const stopped = await Promise.race([
        l.close(60_000).then(() => true),
        new Promise<boolean>((resolve) => guard = setTimeout(() => resolve(false), 20_000)),
      ]);
      clearTimeout(guard);
      assert.ok(stopped, "close() still waiting for the lingering connection after 20 s");
      // Closed by the listener: the peer's next write fails.
      await assert.rejects(
        () => writeAll(conn, new Uint8Array(64 * 1024)),
        (e) => e instanceof Deno.errors.BrokenPipe || e instanceof Deno.errors.ConnectionReset,
      );
    } finally {
      conn.close();
    }
  });
});

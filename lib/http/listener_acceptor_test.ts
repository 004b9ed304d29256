// The acceptor and its deadlines over a real socket: queue depth and 503, first-byte release, body
// deadline (408), handler slots, graceful close, and a listener inside a Worker.
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { AF_UNIX, errno, libc, readFd, SO, SOCK, sockaddrUn, writeFd } from "../../ffi/libc.ts";
import { type Handler, Listener, type ListenerEvent, type ListenerOptions } from "./mod.ts";
import {
  bytes,
  exchange,
  header,
  parseRawResponse,
  readToEnd,
  until,
  writeAll,
} from "../../tests/support/raw_http.ts";

async function withListener(
  opts: Partial<ListenerOptions> & { handler: Handler },
  fn: (l: Listener, path: string) => Promise<void>,
): Promise<void> {
  const dir = moduleTempDir("svcd-acceptor-");
  const path = `${dir}/s.sock`;
  const l = Listener.open({ path, proxyUid: Deno.uid(), workers: 2, ...opts });
  const served = l.serve();
  try {
    await fn(l, path);
  } finally {
    await l.close(2000);
    await served;
    Deno.removeSync(dir, { recursive: true });
  }
}

const ok: Handler = () => Promise.resolve({ status: 200, body: "ok" });
const GET = "GET / HTTP/1.1\r\nHost: svcd\r\n\r\n";

Deno.test("300 silent connections: the 257th gets 503 Retry-After: 1, the held ones are released", async () => {
  let calls = 0;
  await withListener({ handler: () => (calls++, ok({} as never)) }, async (l, path) => {
    const conns: Deno.UnixConn[] = [];
    for (let i = 0; i < 300; i++) {
      conns.push(await Deno.connect({ transport: "unix", path }));
      // Keep accept order equal to connect order: the 257th is the first one past the depth.
      if (i === 255) await until(() => l.stats().waiting === 256, 30_000, "256 held");
    }
    await until(() => l.stats().queueFull === 44, 30_000, "44 refused");
    const answers = await Promise.all(conns.map((c) => readToEnd(c)));
    for (const c of conns) c.close();
    const refused = parseRawResponse(answers[256]);
    assert.equal(refused.status, 503);
    assert.equal(header(refused, "retry-after"), "1");
    assert.equal(header(refused, "connection"), "close");
    assert.equal(header(refused, "content-type"), "application/problem+json");
    for (let i = 257; i < 300; i++) assert.equal(parseRawResponse(answers[i]).status, 503);
    // The held ones were released at the first-byte deadline without a byte.
    for (let i = 0; i < 256; i++) assert.equal(answers[i].length, 0, `connection ${i}`);
    const s = l.stats();
    assert.equal(s.waiting, 0);
    assert.equal(s.deadlineDrops, 256);
    assert.equal(calls, 0);
    // The slots are free again.
    assert.equal(parseRawResponse(await exchange(path, GET)).status, 200);
  });
});

/**
 * A clock for the listener that stands still until the test moves it: "not before its deadline" is
 * then a fact of the deadline logic, not a measured time.
 */
function handClock() {
  const clock = { t: 0, now: () => clock.t };
  return clock;
}

Deno.test("a silent connection is released at its first-byte deadline, not before, and never takes a worker", async () => {
  let calls = 0;
  const clock = handClock();
  const events: ListenerEvent[] = [];
  await withListener({
    workers: 1,
    firstByteMs: 2000,
    now: clock.now,
    log: (e) => events.push(e),
    handler: () => (calls++, Promise.resolve({ status: 204 })),
  }, async (l, path) => {
    const silent = await Deno.connect({ transport: "unix", path });
    await until(() => l.stats().waiting === 1); // held since 0
    let released = false;
    const answer = readToEnd(silent).finally(() => (released = true));
    // One millisecond short of its deadline the single worker serves others; each exchange runs
    // the reactor's expiry at this time, and the silent one is still held.
    clock.t = 1999;
    for (let i = 0; i < 3; i++) {
      assert.equal(parseRawResponse(await exchange(path, GET)).status, 204);
    }
    assert.equal(l.stats().waiting, 1, "released before its deadline");
    assert.equal(released, false);
    assert.equal(l.stats().deadlineDrops, 0);
    clock.t = 2000;
    await until(() => released, 30_000, "the release at the deadline");
    const got = await answer;
    silent.close();
    assert.equal(got.length, 0, "released without a byte");
    assert.equal(l.stats().waiting, 0);
    assert.equal(l.stats().deadlineDrops, 1);
    assert.deepEqual(events, [{ kind: "deadline", phase: "first_byte", ms: 2000 }]);
    assert.equal(calls, 3, "the silent connection never reached the handler");
  });
});

Deno.test("a request that stalls is cut with 408 at the body deadline (default 10 s), not before", async () => {
  let calls = 0;
  const clock = handClock();
  const events: ListenerEvent[] = [];
  await withListener({
    now: clock.now,
    log: (e) => events.push(e),
    handler: () => (calls++, ok({} as never)),
  }, async (l, path) => {
    const conn = await Deno.connect({ transport: "unix", path });
    await writeAll(
      conn,
      bytes("POST /sign HTTP/1.1\r\nHost: svcd\r\nContent-Length: 10\r\n\r\nabc"),
    );
    await until(() => l.stats().reading === 1); // its first byte at 0
    let cut = false;
    const answer = readToEnd(conn).finally(() => (cut = true));
    clock.t = 9_999;
    // Another request is served meanwhile (and runs the reactor's expiry at 9 999).
    assert.equal(parseRawResponse(await exchange(path, GET)).status, 200);
    assert.equal(l.stats().reading, 1, "cut before its deadline");
    assert.equal(cut, false);
    clock.t = 10_000;
    await until(() => cut, 30_000, "the 408 at the deadline");
    const res = parseRawResponse(await answer);
    conn.close();
    assert.equal(res.status, 408);
    assert.equal(header(res, "content-type"), "application/problem+json");
    assert.equal(calls, 1, "only the other request reached the handler");
    assert.equal(l.stats().deadlineDrops, 1);
    assert.deepEqual(events, [{ kind: "deadline", phase: "request", ms: 10_000 }]);
  });
});

Deno.test("a trickling body is cut at the body deadline too, counted from the first byte", async () => {
  await withListener({ bodyMs: 400, handler: ok }, async (l, path) => {
    const conn = await Deno.connect({ transport: "unix", path });
    await writeAll(conn, bytes("POST / HTTP/1.1\r\nHost: svcd\r\nContent-Length: 1000\r\n\r\n"));
    const reader = readToEnd(conn);
    let cut = false;
    void reader.then(() => (cut = true));
    for (let i = 0; i < 200 && !cut; i++) {
      try {
        await writeAll(conn, bytes("a"));
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    const res = parseRawResponse(await reader);
    conn.close();
    assert.equal(res.status, 408);
    assert.equal(l.stats().served, 0);
  });
});

Deno.test("at most `workers` handlers run at once; the rest wait FIFO and all are served", async () => {
  let running = 0;
  let peak = 0;
  const order: number[] = [];
  const gates: Array<() => void> = [];
  await withListener({
    workers: 3,
    handler: async (req) => {
      running++;
      peak = Math.max(peak, running);
      order.push(Number(req.path.slice(1)));
      await new Promise<void>((r) => gates.push(r));
      running--;
      return { status: 200, body: req.path };
    },
  }, async (l, path) => {
    const pending: Promise<Uint8Array>[] = [];
    for (let i = 0; i < 10; i++) {
      pending.push(exchange(path, `GET /${i} HTTP/1.1\r\nHost: svcd\r\n\r\n`));
      await until(
        () => l.stats().active + l.stats().queued === i + 1,
        30_000,
        `request ${i} parsed`,
      );
    }
    assert.equal(l.stats().active, 3);
    assert.equal(l.stats().queued, 7);
    while (order.length < 10 || gates.length > 0) {
      await until(() => gates.length > 0, 30_000, "a running handler");
      gates.shift()!();
      await new Promise((r) => setTimeout(r, 0));
    }
    const bodies = (await Promise.all(pending)).map((r) =>
      new TextDecoder().decode(parseRawResponse(r).body)
    );
    assert.deepEqual(bodies, Array.from({ length: 10 }, (_, i) => `/${i}`));
    assert.equal(peak, 3);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});

Deno.test("close() stops accepting, finishes in-flight requests and removes the socket", async () => {
  const dir = moduleTempDir("svcd-acceptor-");
  const path = `${dir}/s.sock`;
  const gates: Array<() => void> = [];
  const l = Listener.open({
    path,
    proxyUid: Deno.uid(),
    workers: 2,
    handler: async (req) => {
      await new Promise<void>((r) => gates.push(r));
      return { status: 200, body: req.path };
    },
  });
  const served = l.serve();
  try {
    const pending = [0, 1, 2, 3].map((i) =>
      exchange(path, `GET /${i} HTTP/1.1\r\nHost: x\r\n\r\n`)
    );
    await until(() => l.stats().active === 2 && l.stats().queued === 2);
    const closing = l.close(30_000);
    await until(() => {
      try {
        Deno.lstatSync(path);
        return false;
      } catch {
        return true;
      }
    });
    await assert.rejects(Deno.connect({ transport: "unix", path }));
    for (let released = 0; released < 4; released++) {
      await until(() => gates.length > 0, 30_000, "a running handler");
      gates.shift()!();
    }
    const answers = await Promise.all(pending);
    await closing;
    await served;
    assert.deepEqual(
      answers.map((a) => new TextDecoder().decode(parseRawResponse(a).body)),
      ["/0", "/1", "/2", "/3"],
    );
  } finally {
    await l.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("close() is bounded: a handler that never returns does not hold the process", async () => {
  const dir = moduleTempDir("svcd-acceptor-");
  const path = `${dir}/s.sock`;
  const l = Listener.open({
    path,
    proxyUid: Deno.uid(),
    workers: 1,
    handler: () => new Promise(() => {}),
  });
  const served = l.serve();
  const pending = exchange(path, GET);
  await until(() => l.stats().active === 1);
  await l.close(200);
  await served;
  assert.equal((await pending).length, 0, "the stuck request's connection is closed");
  Deno.removeSync(dir, { recursive: true });
});

Deno.test("a listener runs inside a Worker", async () => {
  const dir = moduleTempDir("svcd-worker-");
  const path = `${dir}/public.sock`;
  const worker = new Worker(new URL("../../tests/support/listener_in_thread.ts", import.meta.url), {
    type: "module",
  });
  const next = () => new Promise<unknown>((r) => (worker.onmessage = (e) => r(e.data)));
  try {
    let msg = next();
    worker.postMessage({ path });
    assert.equal(await msg, "listening");
    const res = parseRawResponse(
      await exchange(path, "GET /certificates HTTP/1.1\r\nHost: x\r\n\r\n"),
    );
    assert.equal(res.status, 200);
    assert.equal(new TextDecoder().decode(res.body), "worker GET /certificates");
    msg = next();
    worker.postMessage("close");
    assert.equal(await msg, "closed");
  } finally {
    worker.terminate();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("parsed requests waiting for a worker count against the queue depth", async () => {
  const gates: Array<() => void> = [];
  await withListener({
    workers: 1,
    queueDepth: 2,
    handler: async () => {
      await new Promise<void>((r) => gates.push(r));
      return { status: 204 };
    },
  }, async (l, path) => {
    const pending: Promise<Uint8Array>[] = [];
    for (let i = 0; i < 3; i++) {
      // One at a time: a connection still silent also counts, and would make the next one a 503.
      pending.push(exchange(path, GET));
      await until(() => l.stats().active + l.stats().queued === i + 1);
    }
    assert.equal(l.stats().queued, 2);
    const refused = parseRawResponse(await exchange(path, GET));
    assert.equal(refused.status, 503);
    assert.equal(header(refused, "retry-after"), "1");
    for (let released = 0; released < 3; released++) {
      await until(() => gates.length > 0);
      gates.shift()!();
    }
    for (const p of await Promise.all(pending)) assert.equal(parseRawResponse(p).status, 204);
    assert.equal(l.stats().queueFull, 1);
  });
});

/** getsockopt(2) SO_ERROR: the pending socket error, cleared by reading it. */
const SO_ERROR = 4;

Deno.test("a 503 for a full queue reads the request already sent, so the peer sees no reset", async () => {
  await withListener({ queueDepth: 1, handler: ok }, async (l, path) => {
    const silent = await Deno.connect({ transport: "unix", path });
    await until(() => l.stats().waiting === 1);
    // A proxy writes right after connect: the request is in the socket before the 503 is sent.
    const c = libc();
    const fd = c.socket(AF_UNIX, SOCK.STREAM | SOCK.NONBLOCK | SOCK.CLOEXEC, 0);
    try {
      const addr = sockaddrUn(path);
      assert.equal(c.connect(fd, addr, addr.length), 0, `connect: errno ${errno()}`);
      const request = bytes(GET);
      assert.equal(writeFd(fd, request, request.length), request.length);
      await until(() => l.stats().queueFull === 1);
      // What a proxy's event loop asks on EPOLLERR (nginx: "recv() failed (104: Connection reset
      // by peer)" and a 502 instead of this 503): SO_ERROR must be clear.
      const soError = new Int32Array(1);
      const len = new Uint32Array([4]);
      const got = c.getsockopt(
        fd,
        SO.SOL_SOCKET,
        SO_ERROR,
        new Uint8Array(soError.buffer),
        new Uint8Array(len.buffer),
      );
      assert.equal(got, 0);
      assert.equal(soError[0], 0, `the peer saw errno ${soError[0]} (104 = ECONNRESET)`);
      const buf = new Uint8Array(4096);
      const n = readFd(fd, buf, buf.length);
      assert.match(new TextDecoder().decode(buf.subarray(0, Math.max(n, 0))), /^HTTP\/1\.1 503 /);
    } finally {
      c.close(fd);
      silent.close();
    }
  });
});

// The listener over a real UNIX socket: serving, peer-uid check, handler failures, socket file life.
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { type HttpRequest, Listener, type ListenerOptions } from "./mod.ts";
import {
  bytes,
  curlAsNobody,
  exchange,
  header,
  parseRawResponse,
  until,
} from "../../tests/support/raw_http.ts";

type Opts = Partial<ListenerOptions>;

async function withListener(
  opts: Opts,
  fn: (l: Listener, path: string, seen: HttpRequest[]) => Promise<void>,
): Promise<void> {
  const dir = moduleTempDir("svcd-http-");
  const path = `${dir}/auth.sock`;
  const seen: HttpRequest[] = [];
  const l = Listener.open({
    path,
    proxyUid: Deno.uid(),
    workers: 4,
    handler: (req) => {
      seen.push(req);
      return Promise.resolve({
        status: 200,
        headers: [["Content-Type", "text/plain"]],
        body: req.body,
      });
    },
    ...opts,
  });
  const served = l.serve();
  try {
    await fn(l, path, seen);
  } finally {
    await l.close(2000);
    await served;
    Deno.removeSync(dir, { recursive: true });
  }
}

/** A listener at `path` that answers every request 204, for tests of the socket's life. */
function noContentListener(path: string, workers: number): Listener {
  return Listener.open({
    path,
    proxyUid: Deno.uid(),
    workers,
    handler: () => Promise.resolve({ status: 204 }),
  });
}

Deno.test("a request is served with Content-Length and Connection: close, then closed", async () => {
  await withListener({}, async (l, path, seen) => {
    const raw = await exchange(
      path,
      "POST /sign?x=1 HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: CN=a\r\n" +
        "x-svc-client-subject: CN=b\r\nX-Latin: \xe9\x80\xff\r\nContent-Length: 5\r\n\r\nhello",
    );
    const res = parseRawResponse(raw);
    assert.equal(res.status, 200);
    assert.equal(header(res, "connection"), "close");
    assert.equal(header(res, "content-length"), "5");
    assert.deepEqual(res.body, bytes("hello"));
    assert.equal(seen.length, 1);
    const req = seen[0];
    assert.equal(req.method, "POST");
    assert.equal(req.target, "/sign?x=1");
    assert.equal(req.path, "/sign");
    // Raw list: arrival order, original case, both identity headers visible to the route.
    assert.deepEqual(req.headers, [
      ["Host", "svcd"],
      ["X-SVC-Client-Subject", "CN=a"],
      ["x-svc-client-subject", "CN=b"],
      ["X-Latin", "\xe9\x80\xff"],
      ["Content-Length", "5"],
    ]);
    assert.equal(req.peer.uid, Deno.uid());
    assert.equal(req.peer.pid, Deno.pid); // the client is this process
    assert.match(req.id, /^[0-9a-f]{16}$/);
    assert.equal(l.stats().served, 1);
  });
});

Deno.test("request ids differ from one request to the next", async () => {
  await withListener({}, async (_l, path, seen) => {
    for (let i = 0; i < 3; i++) await exchange(path, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal(new Set(seen.map((r) => r.id)).size, 3);
  });
});

Deno.test("a handler that throws gives a 500 problem and the listener keeps serving", async () => {
  let calls = 0;
  await withListener({
    handler: (req) => {
      calls++;
      if (req.path === "/boom") throw new Error("kaboom");
      if (req.path === "/reject") return Promise.reject(new Error("rejected"));
      return Promise.resolve({ status: 204 });
    },
  }, async (l, path) => {
    for (const p of ["/boom", "/reject"]) {
      const res = parseRawResponse(await exchange(path, `GET ${p} HTTP/1.1\r\nHost: x\r\n\r\n`));
      assert.equal(res.status, 500);
      assert.equal(header(res, "content-type"), "application/problem+json");
      assert.equal(JSON.parse(new TextDecoder().decode(res.body)).status, 500);
      assert.doesNotMatch(new TextDecoder().decode(res.body), /kaboom|rejected/);
    }
    const ok = parseRawResponse(await exchange(path, "GET /fine HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert.equal(ok.status, 204);
    assert.equal(calls, 3);
    assert.equal(l.stats().handlerErrors, 2);
  });
});

Deno.test("a handler response that could split the response becomes a 500", async () => {
  await withListener({
    handler: () => Promise.resolve({ status: 200, headers: [["X-Evil", "a\r\nSet-Cookie: x"]] }),
  }, async (_l, path) => {
    const res = parseRawResponse(await exchange(path, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert.equal(res.status, 500);
    assert.equal(header(res, "set-cookie"), undefined);
  });
});

Deno.test("a client running as another uid is closed without a byte and never served", async () => {
  await withListener({}, async (l, path, seen) => {
    const out = await curlAsNobody(path, "http://svcd/health");
    assert.equal(out.stdout.length, 0, "not one byte to a foreign uid");
    // 52 empty reply, 56 reset, 7 closed before curl's connect check: all mean "closed, no byte".
    assert.ok(
      [7, 52, 56].includes(out.code),
      `curl should see a closed connection: ${out.code} ${new TextDecoder().decode(out.stderr)}`,
    );
    assert.equal(seen.length, 0);
    assert.equal(l.stats().refusedUid, 1);
    // The proxy's uid is still served.
    const res = parseRawResponse(await exchange(path, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert.equal(res.status, 200);
  });
});

Deno.test("proxyUid null serves any uid", async () => {
  await withListener({ proxyUid: null }, async (l, path, seen) => {
    const out = await curlAsNobody(path, "http://svcd/x");
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    assert.equal(seen.length, 1);
    assert.equal(seen[0].peer.uid, 65534);
    assert.equal(l.stats().refusedUid, 0);
  });
});

Deno.test("the socket file is 0660, replaces a stale socket, and is removed on close", async () => {
  const dir = moduleTempDir("svcd-http-");
  const path = `${dir}/auth.sock`;
  try {
    // A stale socket: bound, then its owner went away without removing it.
    const stale = Deno.listen({ transport: "unix", path });
    stale.close();
    Deno.writeFileSync(`${dir}/marker`, new Uint8Array()); // ensure dir stays
    let exists = true;
    try {
      Deno.lstatSync(path);
    } catch {
      exists = false;
    }
    if (!exists) {
      // Deno removed it on close; make a real stale one through a second listener's file.
      const again = Deno.listen({ transport: "unix", path });
      Deno.renameSync(path, `${path}.keep`);
      again.close();
      Deno.renameSync(`${path}.keep`, path);
    }
    assert.ok(Deno.lstatSync(path).isSocket);
    const l = noContentListener(path, 1);
    const served = l.serve();
    assert.equal(Deno.lstatSync(path).mode! & 0o777, 0o660);
    const res = parseRawResponse(await exchange(path, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert.equal(res.status, 204);
    await l.close();
    await served;
    assert.throws(() => Deno.lstatSync(path), Deno.errors.NotFound);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("close answers every client that connected, under a stream of connects (none queued, then reset)", async () => {
  const ROUNDS = 100;
  const SERVED_PER_ROUND = 20;
  const dir = moduleTempDir("svcd-http-");
  const path = `${dir}/auth.sock`;
  const connector = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../../tests/support/connector.ts", import.meta.url).pathname,
      path,
      "4",
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const l = noContentListener(path, 4);
      const served = l.serve();
      await until(() => l.stats().served >= SERVED_PER_ROUND, 30_000, `${SERVED_PER_ROUND} served`);
      await l.close(2000);
      await served;
    }
  } finally {
    await connector.stdin.close();
    const out = await connector.output();
    Deno.removeSync(dir, { recursive: true });
    assert.ok(out.success, "the connector failed");
    const counts = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(counts.unanswered, 0, `connections reset unanswered: ${JSON.stringify(counts)}`);
    assert.ok(counts.answered >= ROUNDS * SERVED_PER_ROUND, JSON.stringify(counts));
    // The clients kept connecting while the socket was closed: every close happened under load.
    assert.ok(counts.refused > 0, JSON.stringify(counts));
  }
});

Deno.test("a path that is not a socket, or a live socket, is never replaced", () => {
  const dir = moduleTempDir("svcd-http-");
  try {
    const file = `${dir}/not-a-socket`;
    Deno.writeTextFileSync(file, "precious");
    const opts = { proxyUid: 0, workers: 1, handler: () => Promise.resolve({ status: 204 }) };
    assert.throws(() => Listener.open({ path: file, ...opts }), (e: Error) => {
      assert.match(e.message, /not-a-socket exists and is not a socket/);
      return true;
    });
    assert.equal(Deno.readTextFileSync(file), "precious");
    const live = Deno.listen({ transport: "unix", path: `${dir}/live.sock` });
    try {
      assert.throws(
        () => Listener.open({ path: `${dir}/live.sock`, ...opts }),
        /another process is listening on .*live\.sock/,
      );
    } finally {
      live.close();
    }
    assert.throws(
      () => Listener.open({ path: `${dir}/${"x".repeat(120)}.sock`, ...opts }),
      /choose a shorter path/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("HEAD gets the headers with the body's Content-Length and no body", async () => {
  await withListener({
    handler: () => Promise.resolve({ status: 200, body: "twelve bytes" }),
  }, async (_l, path) => {
    const res = parseRawResponse(await exchange(path, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert.equal(res.status, 200);
    assert.equal(header(res, "content-length"), "12");
    assert.equal(res.body.length, 0);
  });
});

Deno.test("a client that half-closes after its request still gets the answer", async () => {
  await withListener({}, async (_l, path) => {
    const raw = await exchange(path, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", {
      halfClose: true,
    });
    assert.deepEqual(parseRawResponse(raw).body, bytes("hi"));
  });
});

Deno.test("the operator-facing events are logged", async () => {
  const events: string[] = [];
  await withListener({
    log: (e) => events.push(e.kind),
    handler: (req) =>
      req.path === "/boom" ? Promise.reject(new Error("x")) : Promise.resolve({ status: 204 }),
  }, async (_l, path) => {
    await exchange(path, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n");
    await exchange(path, "GET / HTTP/1.1\r\nX: \x00\r\n\r\n");
    assert.deepEqual(events, ["handler_error", "parse_error"]);
  });
});

Deno.test("nofileLimit reports the process's RLIMIT_NOFILE", async () => {
  const { nofileLimit } = await import("./mod.ts");
  const out = await new Deno.Command("sh", { args: ["-c", "ulimit -Sn; ulimit -Hn"] }).output();
  const [soft, hard] = new TextDecoder().decode(out.stdout).trim().split("\n").map((v) =>
    v === "unlimited" ? Infinity : Number(v)
  );
  assert.deepEqual(nofileLimit(), { soft, hard });
});

Deno.test("othersInHand: false for a request alone, true while another is being handled", async () => {
  const inHand: boolean[] = [];
  let releaseFirst!: () => void;
  const firstHeld = new Promise<void>((resolve) => releaseFirst = resolve);
  let listener!: Listener;
  await withListener({
    handler: async (req) => {
      inHand.push(listener.othersInHand);
      if (new TextDecoder().decode(req.body) === "hold") await firstHeld;
      return { status: 204 };
    },
  }, async (l, path) => {
    listener = l;
    await exchange(path, bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nalone"));
    assert.deepEqual(inHand, [false], "one request in hand");
    const held = exchange(
      path,
      bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nhold"),
    );
    await until(() => inHand.length === 2);
    const second = exchange(
      path,
      bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nnext"),
    );
    await until(() => inHand.length === 3);
    releaseFirst();
    await Promise.all([held, second]);
    assert.deepEqual(inHand, [false, false, true], "the third arrived while the held one ran");
  });
});

// svcd's own label sets are closed: a route, listener, status, key type or event outside its set
// counts under `other`, whatever bytes a client put in its request target; the scrape of the
// whole registry (process metrics included) is `promtool check metrics` content.
import assert from "node:assert/strict";
import { exposition } from "./exposition.ts";
import {
  auditMetrics,
  countListenerEvent,
  countResponse,
  countSign,
  metrics,
  routeLabel,
} from "./svcd.ts";
import { assertPromtoolAccepts } from "../../tests/support/metrics.ts";

const ROUTES = ["/sign", "/verify", "/health", "/token", "/certificates", "/ocsp"];

/** The value of one series line of a scrape of svcd's registry, 0 when absent. */
function count(series: string): number {
  const line = exposition(metrics).split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

/** Runs `fn` and returns how much `series` grew meanwhile (the registry is this process's). */
function grew(series: string, fn: () => void): number {
  const before = count(series);
  fn();
  return count(series) - before;
}

Deno.test("svcd metrics: routeLabel keeps the known routes and gives other for any other path", () => {
  for (const r of ROUTES) assert.equal(routeLabel(r), r);
  for (const sub of ["/ocsp/", "/ocsp/MEQwQjBAMD4w", '/ocsp/"}\n', "/ocsp/\u00e4\u2028"]) {
    assert.equal(routeLabel(sub), "/ocsp", JSON.stringify(sub));
  }
  const odd = [
    "",
    "/",
    "sign",
    "/SIGN",
    "/sign/",
    "//sign",
    "/sign?x=1",
    "/sign#",
    "/sign ",
    '/sign"',
    '/sign",route="/token',
    "/sign\n",
    "/sign\r\n",
    "/sign\\",
    "/sign\x00",
    "/s\u00efgn",
    "/sign\u2028",
    "/sign\ud800",
    "/\xff\xfe",
    "/ocsp",
    "/ocspx",
    "/ocsp\n/",
    "/metrics",
    "*",
    "http://svcd/sign",
    "/" + "a".repeat(10_000),
  ];
  for (const path of odd.filter((p) => p !== "/ocsp")) {
    assert.equal(routeLabel(path), "other", JSON.stringify(path));
  }
});

Deno.test("svcd metrics: an answer's listener, route and status outside their sets count under other", () => {
  const series = (listener: string, route: string, status: string) =>
    `svcd_http_requests_total{listener="${listener}",route="${route}",status="${status}"}`;
  assert.equal(
    grew(series("authenticated", "other", "403"), () => {
      countResponse("authenticated", '/sign",status="200', 403);
      countResponse("authenticated", "/sign\n", 403);
      countResponse("authenticated", "/\u00e4", 403);
    }),
    3,
  );
  assert.equal(
    grew(series("other", "/sign", "200"), () => countResponse("evil\n", "/sign", 200)),
    1,
  );
  assert.equal(
    grew(series("authenticated", "/sign", "other"), () => {
      countResponse("authenticated", "/sign", 418);
      countResponse("authenticated", "/sign", 200.5);
      countResponse("authenticated", "/sign", NaN);
    }),
    3,
  );
  assert.equal(
    grew(series("public", "/ocsp", "other"), () => countResponse("public", "/ocsp/x", 299)),
    1,
  );
  assert.equal(
    grew(series("public", "/ocsp", "200"), () => countResponse("public", "/ocsp", 200)),
    1,
  );
});

Deno.test("svcd metrics: a key type outside the token's table counts under other", () => {
  assert.equal(
    grew('svcd_signatures_total{key_type="other",mode="digest"}', () => {
      countSign(0.001, "rsa-1024", true);
      countSign(0.001, 'ec-p256",mode="message', true);
    }),
    2,
  );
  assert.equal(
    grew('svcd_signatures_total{key_type="ec-p256",mode="message"}', () => {
      countSign(0.001, "ec-p256", false);
    }),
    1,
  );
  // No key type (the /sign was refused): timed, not counted as a signature.
  assert.equal(
    grew("svcd_sign_duration_seconds_count", () => countSign(0.002, undefined, false)),
    1,
  );
});

Deno.test("svcd metrics: listener events of an odd listener and phase count under other", () => {
  assert.equal(
    grew('svcd_acceptor_queue_full_total{listener="other"}', () => {
      countListenerEvent("nope", { kind: "queue_full", held: 1 });
    }),
    1,
  );
  assert.equal(
    grew('svcd_deadline_drops_total{listener="public",phase="other"}', () => {
      // A phase the listener does not have (the type rules it out; the label set too).
      countListenerEvent("public", { kind: "deadline", phase: "lunch", ms: 1 } as never);
    }),
    1,
  );
  assert.equal(
    grew('svcd_http_requests_total{listener="public",route="other",status="400"}', () => {
      countListenerEvent("public", { kind: "parse_error", status: 400, detail: "x" });
    }),
    1,
  );
});

Deno.test("svcd metrics: the whole registry's scrape is promtool content and carries no client bytes", async () => {
  countResponse("authenticated", "/secret-path\xff", 200);
  countSign(0.01, "secret-type", false);
  auditMetrics.groupCommitted(3, 0.0002);
  const text = exposition(metrics);
  for (const leak of ["secret", "\xff", "evil", "lunch"]) {
    assert.ok(!text.includes(leak), `the scrape carries ${JSON.stringify(leak)}`);
  }
  assert.equal(
    count('svcd_audit_group_lines_bucket{le="+Inf"}'),
    count("svcd_audit_group_lines_count"),
  );
  await assertPromtoolAccepts(text);
});

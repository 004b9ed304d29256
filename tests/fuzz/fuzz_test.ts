/**
 * The CI slice of the fuzz campaign (`make fuzz N=…` runs the long one): a fixed-seed run of
 * generated requests against a real daemon with the independent oracle of http_fuzz.ts, every
 * regression input in tests/fuzz/regressions/ replayed (`NAME.STATUS.http`: the bytes, and the
 * status the daemon must answer; `policy/*`: policy files), and the policy, index.txt, DER and OCSP request parsers fed fixed-seed inputs.
 */
import assert from "node:assert/strict";
import { parseRawResponse } from "../support/raw_http.ts";
import { judge, runCampaign, sendCase, startFuzzTarget } from "./http_fuzz.ts";
import { fuzzParsers, PARSER_FUZZERS } from "./parsers.ts";
import { runPublicCampaign } from "./public_fuzz.ts";

const SEED = 20261122;
const REGRESSIONS = new URL("./regressions/", import.meta.url).pathname;

Deno.test({
  name:
    "fuzz: 1500 generated requests, every regression input, 400 OCSP requests on the public socket (fixed seed) — no finding",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const target = await startFuzzTarget({ publicListener: true });
    try {
      await t.step("regression inputs", async () => {
        const names = [...Deno.readDirSync(REGRESSIONS)].filter((e) => e.isFile).map((e) => e.name)
          .filter((n) => n.endsWith(".http")).sort();
        assert.ok(names.length > 0);
        for (const name of names) {
          const bytes = await Deno.readFile(`${REGRESSIONS}${name}`);
          const ex = await sendCase(target.daemon.socket, {
            bytes,
            writes: [],
            halfClose: false,
            steps: [],
          });
          const j = await judge(target.fixture, bytes, ex);
          assert.equal(j.finding, undefined, `${name}: ${j.finding}`);
          const want = /\.(\d{3})\.http$/.exec(name)?.[1];
          if (want) assert.equal(parseRawResponse(ex.raw).status, Number(want), name);
        }
      });
      await t.step("generated requests", async () => {
        const r = await runCampaign(target, {
          seed: SEED,
          cases: 1500,
          concurrency: 8,
          holdOpenEvery: 0,
        });
        assert.deepEqual(
          r.findings.map((f) => `case ${f.index} [${f.steps.join(", ")}]: ${f.finding}`),
          [],
          `reproduce: deno run -A tests/fuzz/main.ts --seed ${SEED} --from N --cases 1`,
        );
        // The slice reaches the signing and verifying paths, not only the refusals.
        for (const served of ["200 /sign", "200 /verify", "422"]) {
          assert.ok(Object.keys(r.outcomes).some((o) => o.startsWith(served)), `no ${served}`);
        }
      });
      await t.step("OCSP requests over the public socket", async () => {
        const r = await runPublicCampaign(target, { seed: SEED, cases: 400, concurrency: 8 });
        assert.deepEqual(
          r.findings.map((f) => `case ${f.index} [${f.steps.join(", ")}]: ${f.finding}`),
          [],
        );
        for (const served of ["200 successful", "200 malformedRequest", "405 GET /ocsp"]) {
          assert.ok(Object.keys(r.outcomes).some((o) => o.startsWith(served)), `no ${served}`);
        }
      });
    } finally {
      assert.equal(await target.stop(), 0, target.daemon.stderr());
    }
  },
});

Deno.test("fuzz: policy, index.txt, DER and OCSP request parsers, 3000 inputs each (fixed seed) — no finding", () => {
  const policy = PARSER_FUZZERS.find((p) => p.name.startsWith("policy"))!;
  for (const e of Deno.readDirSync(`${REGRESSIONS}policy`)) {
    const bytes = Deno.readFileSync(`${REGRESSIONS}policy/${e.name}`);
    assert.equal(policy.check(bytes, false), undefined, e.name);
  }
  for (const r of fuzzParsers({ seed: SEED, cases: 3000 })) {
    assert.deepEqual(r.findings.map((f) => f.finding), [], r.name);
    assert.equal(r.cases, 3000);
  }
});

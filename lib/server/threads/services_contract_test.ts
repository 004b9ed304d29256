/**
 * One contract, every implementation of the main isolate's services
 * (../authenticated/main_services.ts): the same checks (tests/support/services_contract.ts) run
 * against the main isolate's own services over a real audit log, budget and cap; against a request
 * thread's view of them (./services_across_threads.ts, inside a Worker, answered by
 * ./request_threads.ts with the main isolate's own); and against the test double.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";
import { softwareAuditKeys } from "../../../tests/support/audit_software_keys.ts";
import {
  auditLineAt,
  CONTRACT,
  CONTRACT_DONE,
  CONTRACT_SETUP,
  contractToken,
  IDENTITIES,
  runContract,
} from "../../../tests/support/services_contract.ts";
import { servicesInMemory } from "../../../tests/support/services_in_memory.ts";
import { recordingHooks, standInSetup } from "../../../tests/support/request_threads.ts";
import { AuditLog } from "../../audit/mod.ts";
import { ConcurrencyCap, RefusalBudget } from "../../throttle/mod.ts";
import { servicesInThisThread } from "../authenticated/services_in_this_thread.ts";
import { RequestThreads } from "./request_threads.ts";

const CONTRACT_THREAD = new URL(
  "../../../tests/support/services_contract_thread.ts",
  import.meta.url,
);

/** The main isolate's parts, real ones, in fresh folders; closed by `close`. */
async function mainParts() {
  const dir = moduleTempDir("svcd-services-");
  const auditDir = `${dir}/audit`;
  Deno.mkdirSync(auditDir);
  const { keys } = await softwareAuditKeys({ synchronousMac: true });
  const audit = await AuditLog.open({ dir: auditDir, keys, login: {} });
  const budget = RefusalBudget.open({ stateDir: dir, threshold: CONTRACT_SETUP.threshold });
  const cap = new ConcurrencyCap(CONTRACT_SETUP.cap);
  return {
    auditDir,
    parts: { audit, budget, cap },
    close: async () => {
      await audit.close();
      budget.close();
    },
  };
}

function assertAllPassed(results: { name: string; error?: string }[]): void {
  assert.deepEqual(results.map((r) => r.name), Object.keys(CONTRACT), "every check ran");
  const failed = results.filter((r) => r.error !== undefined);
  if (failed.length > 0) assert.fail(failed.map((r) => `${r.name}:\n${r.error}`).join("\n\n"));
}

Deno.test("services contract: the main isolate's own services (--threads 0)", async () => {
  const main = await mainParts();
  try {
    const token = contractToken();
    const services = servicesInThisThread({ ...main.parts, token });
    assertAllPassed(
      await runContract({ services, token, lineAt: (seq) => auditLineAt(main.auditDir, seq) }),
    );
  } finally {
    await main.close();
  }
});

Deno.test("services contract: a request thread's view of the main isolate's services (--threads N)", async () => {
  const main = await mainParts();
  const { hooks, logs, failures, until } = recordingHooks();
  const threads = await RequestThreads.start(
    {
      ...standInSetup(`contract:${main.auditDir}`, 1),
      audit: { healthy: main.parts.audit.healthy, lastError: main.parts.audit.lastError },
    },
    1,
    servicesInThisThread({ ...main.parts, token: { dropRemovedKeys: () => ["k-main-only"] } }),
    hooks,
    CONTRACT_THREAD,
  );
  try {
    await until(() => logs.includes(CONTRACT_DONE) || failures.length > 0);
    assert.deepEqual(failures, []);
    assertAllPassed(logs.filter((l) => l !== CONTRACT_DONE).map((l) => JSON.parse(l)));
    // The releases came before the last report: every slot is back while the thread still runs.
    for (const who of Object.values(IDENTITIES)) {
      assert.equal(main.parts.cap.inFlight(who), 0, who);
    }
  } finally {
    assert.equal(await threads.close(1000), true);
    await main.close();
  }
});

Deno.test("services contract: the test double", async () => {
  const token = contractToken();
  const services = servicesInMemory({
    cap: new ConcurrencyCap(CONTRACT_SETUP.cap),
    threshold: CONTRACT_SETUP.threshold,
    token,
  });
  const lineAt = (seq: number) => Promise.resolve(services.lines[seq - 1]);
  assertAllPassed(await runContract({ services, token, lineAt }));
});

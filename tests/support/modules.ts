/**
 * Which PKCS#11 module a test runs against: SoftHSM2 (default) or the project's own v3.2 test
 * module, chosen by SVCD_TEST_MODULE=softhsm|svcmod. `testModule(dir)` also writes the module's
 * configuration for a token directory under `dir` and returns the environment that selects it.
 *
 * @example
 * ```ts
 * import { testModule } from "./modules.ts";
 * const mod = await testModule(await Deno.makeTempDir());
 * // mod.env: { SOFTHSM2_CONF: ".../softhsm2.conf" } or { SVCMOD_CONF: ".../svcmod.conf" }
 * ```
 */

/** The modules the suite knows. */
export type TestModuleName = "softhsm" | "svcmod";

/** A module to test against, and the environment that points it at a private token directory. */
export interface TestModule {
  name: TestModuleName;
  path: string;
  /** Environment for processes (and this process) using the module: its config file variable. */
  env: Record<string, string>;
  /** The token directory the configuration names (absent for the system's default). */
  tokenDir?: string;
}

/** Debian's SoftHSM2 2.6.1. */
export const SOFTHSM_PATH = "/usr/lib/softhsm/libsofthsm2.so";
/** The project's PKCS#11 v3.2 test module (built by `make setup`). */
export const SVCMOD_PATH = new URL("../module/build/libsvcmod.so", import.meta.url).pathname;

/** The module named by SVCD_TEST_MODULE (default softhsm). Example: `selectedModuleName()`. */
export function selectedModuleName(): TestModuleName {
  const name = Deno.env.get("SVCD_TEST_MODULE") ?? "softhsm";
  if (name !== "softhsm" && name !== "svcmod") {
    throw new Error(`SVCD_TEST_MODULE must be softhsm or svcmod, not '${name}'`);
  }
  return name;
}

/**
 * The selected module; with `dir`, writes its config (token directory `dir/tokens`) and returns
 * the variable that selects it in `env`. `secureHeapKb` applies to svcmod only (default 4096);
 * `name` picks a module regardless of SVCD_TEST_MODULE (a test of svcmod's own test hooks).
 */
export async function testModule(
  dir?: string,
  opts: { secureHeapKb?: number; name?: TestModuleName } = {},
): Promise<TestModule> {
  const name = opts.name ?? selectedModuleName();
  const path = name === "softhsm" ? SOFTHSM_PATH : SVCMOD_PATH;
  try {
    await Deno.stat(path);
  } catch {
    throw new Error(
      `${path} is missing: run 'make setup' (it installs SoftHSM2 and builds the test module)`,
    );
  }
  if (!dir) return { name, path, env: {} };
  const tokenDir = `${dir}/tokens`;
  await Deno.mkdir(tokenDir, { recursive: true });
  if (name === "softhsm") {
    const conf = `${dir}/softhsm2.conf`;
    await Deno.writeTextFile(
      conf,
      `directories.tokendir = ${tokenDir}\nobjectstore.backend = file\nlog.level = ERROR\n`,
    );
    return { name, path, env: { SOFTHSM2_CONF: conf }, tokenDir };
  }
  const conf = `${dir}/svcmod.conf`;
  await Deno.writeTextFile(
    conf,
    `tokendir = ${tokenDir}\nsecure_heap_kb = ${opts.secureHeapKb ?? 4096}\n`,
  );
  return { name, path, env: { SVCMOD_CONF: conf }, tokenDir };
}

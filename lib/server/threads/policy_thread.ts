/**
 * The module of the thread that reads and parses the policy file (./policy_reader.ts starts one for
 * each read): at the lowest priority, so that the requests served meanwhile take the cores first
 * and a reload of a large file only uses what they leave idle. The grants are one
 * SharedArrayBuffer, so the answer crosses back without a copy. Only ./policy_reader.ts talks to
 * it, in the messages of ./protocol.ts.
 */
import { setThreadNice, threadNice } from "./priority.ts";
import { PolicyError, readInThisThread } from "../../policy/mod.ts";
import type { PolicyReadMessage, PolicyReadReport } from "./protocol.ts";

/** The lowest priority: the reader takes only what the threads serving requests leave idle. */
const READ_NICE = 19;

if (threadNice() < READ_NICE) setThreadNice(READ_NICE);

// deno-lint-ignore no-explicit-any
const scope = self as any;

scope.onmessage = async (e: MessageEvent<PolicyReadMessage>) => {
  const { path, options } = e.data;
  let report: PolicyReadReport;
  try {
    report = { kind: "read", read: await readInThisThread(path, options) };
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    report = { kind: "refused", line: err.line, problems: err.problems };
  }
  scope.postMessage(report);
};

/**
 * Policy: which client subject may use which key label, decided before any PKCS#11 call. File format, one grant per
 * line: `subject<TAB>label`; `#` starts a comment line; blank lines are ignored. See parse.ts for
 * every edge case (CRLF, whitespace, BOM, control bytes, non-UTF-8, duplicates, empty file).
 *
 * @example
 * ```ts
 * const file = await PolicyFile.load("/etc/svcd/policy");
 * for (const w of file.current.warnings) console.error(w);
 * file.current.allows("CN=alice,O=Example,C=DE", "signing-key");
 * ```
 */
export { Policy, type PolicyData, PolicyError } from "./policy.ts";
export {
  POLICY_BYTES_PER_GRANT,
  policyByteLimit,
  PolicyFile,
  type PolicyRead,
  type PolicyReader,
  readInThisThread,
  type ReloadResult,
} from "./file.ts";
export {
  MAX_POLICY_GRANTS,
  type ParsedPolicy,
  type ParseOptions,
  parsePolicyText,
  type PolicyProblem,
} from "./parse.ts";
export { latin1 } from "../bytes/mod.ts";
export { legacyToRfc4514, subjectFormAdvice } from "./subject_form.ts";

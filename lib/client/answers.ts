/**
 * What an unexpected answer from svcd or its proxy means, as one line with what to do. svcd's own
 * refusals are RFC 9457 problems (application/problem+json); a 403 without one comes from the proxy,
 * which refused the client certificate before svcd saw the request.
 *
 * @example
 * ```ts
 * import { answerError } from "./answers.ts";
 * import type { Answer } from "./http.ts";
 * declare const answer: Answer;
 * if (answer.status !== 200) {
 *   throw answerError(answer, { key: "web", limit: { bytes: 1 << 20, from: "server" } });
 * }
 * ```
 */
import { ClientError } from "./errors.ts";
import type { Answer } from "./http.ts";
import { type BodyLimit, describeLimit } from "./settings.ts";

/** What the request was about, so the message can name it. */
export interface AnswerContext {
  /** The key label of a /sign or /verify. */
  key?: string;
  /** The limit the body was checked against here, named when the proxy or svcd answers 413. */
  limit?: BodyLimit;
}

/** The error for an answer the caller does not expect. */
export function answerError(answer: Answer, context: AnswerContext = {}): ClientError {
  const detail = problemDetail(answer);
  switch (answer.status) {
    case 403:
      if (detail === undefined) {
        return new ClientError(
          "the proxy refused the client certificate (403): it must be issued by the operator's " +
            "CA, current and not revoked; check --client-cert (SVCD_CLIENT_CERT) or ask the " +
            "operator for a new certificate",
        );
      }
      return new ClientError(
        context.key === undefined
          ? "svcd refused (403): your certificate's subject is granted no key; ask the operator " +
            "to grant you one in svcd's policy"
          : `svcd refused key '${context.key}' (403): it is not granted to your certificate's ` +
            "subject, or no key has that label; 'svcd client keys' lists yours",
      );
    case 413:
      return new ClientError(
        `the file is larger than the proxy or svcd takes (413)${
          context.limit ? `, though ${describeLimit(context.limit)}` : ""
        }: ${tooLargeAdvice(context.limit)}`,
      );
    default:
      return new ClientError(
        `svcd answered ${answer.status}${detail ? `: ${detail}` : ""}${
          answer.status >= 500 ? " (run again later; the operator's log says more)" : ""
        }`,
      );
  }
}

/** What to do about a 413 for a body within the limit checked before sending it. */
function tooLargeAdvice(limit: BodyLimit | undefined): string {
  switch (limit?.from) {
    case "server":
      // svcd stated this limit itself, so what refused the body is the proxy in front of it.
      return "the proxy's limit (nginx's client_max_body_size) is smaller than svcd's; set " +
        "--max-body to the proxy's limit so that such files are refused before they are sent, " +
        "or ask the operator to raise it";
    case "flag":
      return "lower --max-body to the operator's limit (the proxy's and svcd's)";
    default:
      return "set --max-body to the operator's limit (svcd's --max-body)";
  }
}

/** The title and detail of an RFC 9457 problem, or undefined when the body is not one. */
export function problemDetail(answer: Answer): string | undefined {
  const type = answer.headers.get("content-type") ?? "";
  if (!type.startsWith("application/problem+json")) return undefined;
  try {
    const doc = JSON.parse(new TextDecoder().decode(answer.body));
    const parts = [doc.title, doc.detail].filter((p) => typeof p === "string" && p.length > 0);
    return parts.join(": ") || `problem ${doc.type ?? "without a title"}`;
  } catch {
    return "an unreadable problem document";
  }
}

/**
 * Recognises subjects written in a form the proxy is unlikely to send. The subject is compared byte
 * for byte, so a policy in the wrong form does not fail loudly: it refuses every request of that
 * client with 403. Such a grant is therefore flagged when the policy is loaded.
 *
 * @example
 * ```ts
 * subjectFormAdvice("/C=DE/O=Example/CN=alice");
 * // → "… legacy slash form …; most proxies send RFC 4514: 'CN=alice,O=Example,C=DE' …"
 * ```
 */

const LEGACY_SLASH = /^\/[A-Za-z][A-Za-z0-9.-]*=/;
const OPENSSL_DISPLAY = /^[A-Za-z][A-Za-z0-9.-]* = /;
const RFC4514_SPECIAL = /[,+"\\<>;]/g;

/**
 * Says why a subject probably never matches what a proxy sends, or undefined when it looks fine.
 *
 * @example
 * ```ts
 * subjectFormAdvice("CN=alice,O=Example,C=DE"); // → undefined
 * ```
 */
export function subjectFormAdvice(subject: string): string | undefined {
  if (LEGACY_SLASH.test(subject)) {
    return `subject '${subject}' is in the legacy slash form (the CA tools' output); most proxies ` +
      `send RFC 4514: '${legacyToRfc4514(subject)}'. If yours does, every request of this client ` +
      `is refused with 403; write the subject exactly as the proxy sends it`;
  }
  if (OPENSSL_DISPLAY.test(subject)) {
    return `subject '${subject}' looks like OpenSSL's display form ('C = DE, O = ...'), which no ` +
      `proxy sends; write it as the proxy does, e.g. RFC 4514 'CN=...,O=...,C=...' without spaces`;
  }
  if (!subject.includes("=")) {
    return `subject '${subject}' does not look like a distinguished name (no '='); the proxy ` +
      `sends the certificate subject, e.g. 'CN=alice,O=Example,C=DE'`;
  }
  return undefined;
}

/**
 * Rewrites "/C=DE/O=Example/CN=alice" as "CN=alice,O=Example,C=DE" (components reversed, RFC 4514
 * escaping of the value characters that need it). A suggestion for the operator, never applied.
 *
 * @example
 * ```ts
 * legacyToRfc4514("/C=DE/O=Acme, Inc./CN=bob"); // → "CN=bob,O=Acme\\, Inc.,C=DE"
 * ```
 */
export function legacyToRfc4514(subject: string): string {
  const components = splitLegacyComponents(subject.slice(1));
  return components.reverse().map(escapeComponent).join(",");
}

/** Splits on '/' that starts a new "type=" component; a '/' inside a value stays in the value. */
function splitLegacyComponents(body: string): string[] {
  const parts: string[] = [];
  for (const piece of body.split("/")) {
    if (parts.length > 0 && !/^[A-Za-z][A-Za-z0-9.-]*=/.test(piece)) {
      parts[parts.length - 1] += "/" + piece;
    } else {
      parts.push(piece);
    }
  }
  return parts;
}

function escapeComponent(component: string): string {
  const eq = component.indexOf("=");
  if (eq < 0) return component;
  const type = component.slice(0, eq);
  let value = component.slice(eq + 1).replace(RFC4514_SPECIAL, (c) => "\\" + c);
  if (value.startsWith(" ") || value.startsWith("#")) value = "\\" + value;
  if (value.endsWith(" ")) value = value.slice(0, -1) + "\\ ";
  return `${type}=${value}`;
}

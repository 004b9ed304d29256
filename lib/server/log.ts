/**
 * The daemon's own log (stderr, which journald reads): every line goes through {@link DaemonLog},
 * which keeps a client from flooding it and from writing into it.
 *
 * - Flooding: at most `perSecond` lines of one kind (e.g. `parse_error`, `queue_full`) in a
 *   one-second window; the rest are counted, and when the window ends one line says how many were
 *   suppressed. 630 000 malformed requests in 10 s give at most `perSecond + 1` lines per second
 *   per kind, not one each.
 * - Escaping: a line can never hold a control character (C0 including CR/LF, DEL, C1 U+0080–U+009F,
 *   U+2028/U+2029, a lone surrogate); text a client sent is passed through {@link clientText}, which
 *   also escapes `"`, `\` and every byte outside printable ASCII, so it cannot pose as our own words.
 */
import type { ListenerEvent } from "../http/mod.ts";

/** Lines of one kind written per second before the rest are only counted. */
export const DEFAULT_LINES_PER_SECOND = 10;

const WINDOW_MS = 1000;

/**
 * Escapes text that came from a client for a log line and quotes it: printable ASCII stays as it
 * is except `"` and `\` (written `\"`, `\\`); every other UTF-16 unit becomes `\xHH` (below 0x100;
 * header and target text hold one char per byte, so that is the byte) or `\uHHHH`.
 *
 * @example
 * ```ts
 * clientText("/si\x85gn\"\n"); // "\"/si\\x85gn\\\"\\x0a\""
 * ```
 */
export function clientText(text: string): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) out += "\\" + text[i];
    else if (c >= 0x20 && c < 0x7f) out += text[i];
    else if (c < 0x100) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += "\\u" + c.toString(16).padStart(4, "0");
  }
  return out + '"';
}

/** Control characters and lone surrogates: never written as they are, whoever made the line. */
const UNSAFE =
  // deno-lint-ignore no-control-regex
  /[\x00-\x1f\x7f-\x9f\u2028\u2029]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Makes a whole line safe whatever its origin: each control character or lone surrogate becomes
 * `\uHHHH`; everything else (our own words, UTF-8 text) stays readable.
 *
 * @example
 * ```ts
 * safeLine("a\nb\u0085"); // "a\\u000ab\\u0085"
 * ```
 */
export function safeLine(text: string): string {
  return text.replace(UNSAFE, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** Where lines go and how time is read; tests replace all three. */
export interface DaemonLogOptions {
  /** Lines of one kind per second before suppression (default {@link DEFAULT_LINES_PER_SECOND}). */
  perSecond?: number;
  /** Writes one finished line (without its newline). Default: stderr. */
  write?: (line: string) => void;
  /** Milliseconds, monotonic. Default `performance.now`. */
  now?: () => number;
  /** Runs `fn` after `ms` without keeping the process alive. Default: an unref'd timer. */
  later?: (fn: () => void, ms: number) => void;
}

interface Window {
  start: number;
  written: number;
  suppressed: number;
  summaryDue: boolean;
}

/**
 * Writes the daemon's log lines (`svcd: <message>`), at most `perSecond` per kind per second, and
 * one `suppressed N similar message(s)` line for the rest of a window when it ends.
 *
 * @example
 * ```ts
 * const log = new DaemonLog({ perSecond: 10 });
 * for (let i = 0; i < 1000; i++) log.line("parse_error", "listener: bad request");
 * // 10 lines now, one "parse_error: 990 similar message(s) suppressed" line a second later
 * ```
 */
export class DaemonLog {
  #perSecond: number;
  #write: (line: string) => void;
  #now: () => number;
  #later: (fn: () => void, ms: number) => void;
  #windows = new Map<string, Window>();

  constructor(opts: DaemonLogOptions = {}) {
    this.#perSecond = opts.perSecond ?? DEFAULT_LINES_PER_SECOND;
    this.#write = opts.write ?? writeStderr;
    this.#now = opts.now ?? (() => performance.now());
    this.#later = opts.later ?? unrefLater;
  }

  /**
   * Logs `message` under `kind`, or counts it when that kind already had its lines this second.
   */
  line(kind: string, message: string): void {
    const now = this.#now();
    let w = this.#windows.get(kind);
    if (w && now - w.start >= WINDOW_MS) {
      this.#summarise(kind, w);
      w = undefined;
    }
    if (!w) {
      w = { start: now, written: 0, suppressed: 0, summaryDue: false };
      this.#windows.set(kind, w);
    }
    if (w.written < this.#perSecond) {
      w.written++;
      this.#emit(message);
      return;
    }
    w.suppressed++;
    if (!w.summaryDue) {
      w.summaryDue = true;
      const window = w;
      this.#later(() => this.#windowEnded(kind, window), Math.max(0, w.start + WINDOW_MS - now));
    }
  }

  /**
   * Writes the suppressed counts still pending (at stop, so none is lost).
   */
  flush(): void {
    for (const [kind, w] of this.#windows) this.#summarise(kind, w);
    this.#windows.clear();
  }

  #windowEnded(kind: string, w: Window): void {
    if (this.#windows.get(kind) !== w) return; // already summarised by a later line or a flush
    this.#summarise(kind, w);
    this.#windows.delete(kind);
  }

  #summarise(kind: string, w: Window): void {
    if (w.suppressed === 0) return;
    this.#emit(`${kind}: suppressed ${w.suppressed} similar message(s) within one second`);
    w.suppressed = 0;
  }

  #emit(message: string): void {
    this.#write(safeLine(`svcd: ${message}`));
  }
}

/**
 * One listener event as a log line: its kind, then each field as `name=value`, strings quoted and
 * escaped with {@link clientText} (a parse error's detail quotes the client's request line).
 *
 * @example
 * ```ts
 * listenerEventText({ kind: "parse_error", status: 400, detail: "bad \x85" });
 * // 'listener parse_error: status=400 detail="bad \\x85"'
 * ```
 */
export function listenerEventText(event: ListenerEvent): string {
  let text = `listener ${event.kind}:`;
  for (const [name, value] of Object.entries(event)) {
    if (name === "kind") continue;
    text += ` ${name}=${typeof value === "number" ? value : clientText(String(value))}`;
  }
  return text;
}

const encoder = new TextEncoder();

function writeStderr(line: string): void {
  const bytes = encoder.encode(line + "\n");
  try {
    for (let at = 0; at < bytes.length;) at += Deno.stderr.writeSync(bytes.subarray(at));
  } catch {
    // stderr is gone (the journal stopped reading): losing our own log must not stop the daemon
  }
}

function unrefLater(fn: () => void, ms: number): void {
  Deno.unrefTimer(setTimeout(fn, ms));
}

/**
 * The log line of a key whose signatures moved to the thread pool (Token's `onPooled`).
 *
 * @example
 * ```ts
 * import { pooledMessage } from "./log.ts";
 * pooledMessage("k1", 200); // "keys: k1 signs on the thread pool from now on: …"
 * ```
 */
export function pooledMessage(label: string, limitUs: number): string {
  return `keys: ${label} signs on the thread pool from now on: most of its last signatures held ` +
    `the thread that serves requests over ${limitUs} µs (--inline-sign-limit-us); SIGHUP ` +
    "measures it again";
}

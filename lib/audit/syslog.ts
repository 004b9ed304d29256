/**
 * Copies of the signed checkpoint lines to the system log (syslog over a UNIX datagram socket,
 * /dev/log by default), where rsyslog or journald forwards them off the host: an intruder who can
 * rewrite the audit folder cannot recall a copy already sent, so `svcd audit verify --checkpoints`
 * finds a log cut or removed behind a checkpoint.
 *
 * One datagram per checkpoint, in the local syslog form (`<PRI>Mmm dd hh:mm:ss ident[pid]: msg`),
 * facility daemon, severity notice, identifier {@link CHECKPOINT_SYSLOG_IDENT}; the message is the
 * checkpoint line exactly as written in the audit file. Sending never blocks (a full or absent
 * socket drops the copy and counts it): the audit log stays the record, this is its witness.
 *
 * @example
 * ```ts
 * const sink = new CheckpointSyslog("/dev/log");
 * sink.send('{"event":"checkpoint",…}');
 * sink.close();
 * ```
 */
import { errno, libc, sendDatagram, SOCK, sockaddrUn } from "../../ffi/libc.ts";

/** The syslog identifier (program name) of checkpoint copies: what a collector filters on. */
export const CHECKPOINT_SYSLOG_IDENT = "svcd-audit";

/** The socket the system logger reads (rsyslog imuxsock, journald). */
export const DEFAULT_SYSLOG_SOCKET = "/dev/log";

/** facility daemon (3) × 8 + severity notice (5). */
const PRIORITY = 3 * 8 + 5;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const te = new TextEncoder();

/**
 * Sends checkpoint lines to a syslog socket; `sent` and `failed` count copies (for metrics).
 *
 * @example
 * ```ts
 * const sink = new CheckpointSyslog("/dev/log", (why) => console.error(why));
 * sink.send("{}"); // false when the copy was dropped
 * ```
 */
export class CheckpointSyslog {
  #fd: number;
  #address: Uint8Array<ArrayBuffer>;
  sent = 0;
  failed = 0;

  constructor(
    readonly socketPath: string = DEFAULT_SYSLOG_SOCKET,
    private readonly onFailure: (why: string) => void = () => {},
  ) {
    this.#address = sockaddrUn(socketPath);
    this.#fd = libc().socket(1, SOCK.DGRAM | SOCK.NONBLOCK | SOCK.CLOEXEC, 0);
    if (this.#fd < 0) throw new Error(`syslog: socket() failed with errno ${errno()}`);
  }

  /** Sends one line; false (and `onFailure` told why) when the system log did not take it. */
  send(line: string): boolean {
    const datagram = te.encode(syslogMessage(line, new Date(), Deno.pid));
    const n = sendDatagram(this.#fd, datagram, {
      addr: this.#address,
      len: this.#address.length,
    });
    if (n === datagram.length) {
      this.sent++;
      return true;
    }
    this.failed++;
    this.onFailure(
      `audit: the checkpoint copy to syslog ${this.socketPath} was dropped (errno ${errno()})`,
    );
    return false;
  }

  close(): void {
    if (this.#fd >= 0) libc().close(this.#fd);
    this.#fd = -1;
  }
}

/**
 * The datagram for one line, as glibc's syslog(3) writes it to /dev/log.
 *
 * @example
 * ```ts
 * syslogMessage("x", new Date(Date.UTC(2025, 0, 2, 3, 4, 5)), 7); // "<29>Jan  2 03:04:05 svcd-audit[7]: x" (in UTC)
 * ```
 */
export function syslogMessage(line: string, at: Date, pid: number): string {
  const day = String(at.getDate()).padStart(2, " ");
  const time = [at.getHours(), at.getMinutes(), at.getSeconds()]
    .map((n) => String(n).padStart(2, "0")).join(":");
  return `<${PRIORITY}>${
    MONTHS[at.getMonth()]
  } ${day} ${time} ${CHECKPOINT_SYSLOG_IDENT}[${pid}]: ${line}`;
}

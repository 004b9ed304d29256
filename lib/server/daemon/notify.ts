/**
 * Readiness and stop notifications to the service manager (sd_notify protocol, Type=notify): one
 * datagram per state to the UNIX socket named by `$NOTIFY_SOCKET`. Without that variable (not run
 * by systemd, or Type=simple) every call does nothing.
 */
import { errno, libc, sendDatagram, SOCK, sockaddrUnRaw } from "../../../ffi/libc.ts";

const te = new TextEncoder();

/**
 * Sends sd_notify states; a failure is reported to `log` once per call and never stops the daemon
 * (the service manager then times the start out and says so itself).
 *
 * @example
 * ```ts
 * new ServiceNotifier("/run/systemd/notify", console.error).ready("up");
 * ```
 */
export class ServiceNotifier {
  constructor(
    private readonly socketPath: string | undefined,
    private readonly log: (message: string) => void = () => {},
  ) {}

  /**
   * The notifier of this process: `$NOTIFY_SOCKET`, if set.
   */
  static fromEnv(log?: (message: string) => void): ServiceNotifier {
    return new ServiceNotifier(Deno.env.get("NOTIFY_SOCKET") || undefined, log);
  }

  /** Whether a service manager listens (NOTIFY_SOCKET is set). */
  get enabled(): boolean {
    return this.socketPath !== undefined;
  }

  /** READY=1 with a status line: the sockets accept now. */
  ready(status: string): void {
    this.#send(`READY=1\nSTATUS=${oneLine(status)}\nMAINPID=${Deno.pid}\n`);
  }

  /** STOPPING=1 with a status line: the stop has begun. */
  stopping(status: string): void {
    this.#send(`STOPPING=1\nSTATUS=${oneLine(status)}\n`);
  }

  #send(message: string): void {
    if (this.socketPath === undefined) return;
    // "@name" is a socket in the abstract namespace: its address starts with a NUL byte.
    const path = te.encode(this.socketPath);
    if (path[0] === 0x40) path[0] = 0;
    const c = libc();
    const fd = c.socket(1, SOCK.DGRAM | SOCK.CLOEXEC, 0);
    if (fd < 0) {
      this.log(`notify: socket() failed with errno ${errno()}`);
      return;
    }
    try {
      const sent = sendDatagram(fd, te.encode(message), sockaddrUnRaw(path));
      if (sent < 0) {
        this.log(
          `notify: sending to NOTIFY_SOCKET ${this.socketPath} failed with errno ${errno()}`,
        );
      }
    } catch (err) {
      this.log(`notify: NOTIFY_SOCKET ${this.socketPath} unusable: ${(err as Error).message}`);
    } finally {
      c.close(fd);
    }
  }
}

function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, " ");
}

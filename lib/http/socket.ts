/**
 * The listening UNIX socket: replaces a stale socket file (never any other kind of file, never a
 * socket someone still listens on), binds, sets mode 0660 before listen() so that no connection can
 * arrive under the umask's mode, and removes the file again only if it is still ours.
 *
 * One socket can be served by several listeners, one per isolate (thread): each accepts from the
 * same file descriptor (the kernel hands every connection to exactly one accept), and the queue
 * depth bounds the connections all of them hold together. Each listener publishes how many it
 * holds in its own slot of a SharedArrayBuffer at every change; an accept adds the others' slots
 * to its own count. Two listeners accepting in the same instant can each miss the other's newest
 * connection, so the bound can be passed by at most one connection per other listener.
 *
 * @example
 * ```ts
 * const sock = openUnixListener("/run/svcd/auth.sock", 1024);
 * const shared = shareSocket(sock, 2);
 * // shared[0] to one Worker's Listener.open({ …, shared: shared[0] }), shared[1] to the other's;
 * // once every listener has closed:
 * closeUnixListener(sock);
 * ```
 */
import {
  ERRNO,
  errno,
  libc,
  O_CLOEXEC,
  rlimitNofile,
  SOCK,
  SOCKADDR_UN_SIZE,
  sockaddrUn,
} from "../../ffi/libc.ts";

/** A bound, listening socket and the identity of its file. */
export interface UnixListenerSocket {
  fd: number;
  path: string;
  dev: number;
  ino: number;
}

/** The kernel's queue of connections not yet accepted (listen(2) backlog). */
export const LISTEN_BACKLOG = 1024;

/** Mode of the socket file: the proxy's group may connect; the uid check is the authorisation. */
export const SOCKET_MODE = 0o660;

/**
 * Create, bind, chmod 0660 and listen. Throws an Error naming the path when it is taken.
 */
export function openUnixListener(path: string, backlog: number): UnixListenerSocket {
  const addr = sockaddrUn(path);
  removeStaleSocket(path);
  const c = libc();
  const fd = c.socket(1, SOCK.STREAM | SOCK.NONBLOCK | SOCK.CLOEXEC, 0);
  if (fd < 0) throw new Error(`socket(AF_UNIX) failed with errno ${errno()}`);
  try {
    if (c.bind(fd, addr, SOCKADDR_UN_SIZE) !== 0) {
      throw new Error(bindFailure(path, errno()));
    }
    Deno.chmodSync(path, SOCKET_MODE);
    const st = Deno.lstatSync(path);
    if (c.listen(fd, backlog) !== 0) {
      throw new Error(`listen(${path}) failed with errno ${errno()}`);
    }
    return { fd, path, dev: st.dev, ino: st.ino ?? 0 };
  } catch (e) {
    c.close(fd);
    throw e;
  }
}

/** What a failed bind(2) means for the operator, by errno. */
function bindFailure(path: string, e: number): string {
  const dir = dirname(path);
  switch (e) {
    case ERRNO.EADDRINUSE:
      return `socket path ${path} appeared while starting; is another svcd starting?`;
    case ERRNO.ENOENT:
      return `cannot create the socket ${path}: its folder ${dir} does not exist; create it ` +
        `(the package's tmpfiles.d/svcd.conf makes /run/svcd: systemd-tmpfiles --create svcd.conf)`;
    case ERRNO.EACCES:
    case ERRNO.EROFS:
      return `cannot create the socket ${path}: the daemon's user may not write in ${dir}; ` +
        `give it that folder (svcd:svcd-proxy 2750 for /run/svcd) or choose another --socket`;
    default:
      return `bind(${path}) failed with errno ${e}; check that ${dir} exists and is writable`;
  }
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

/**
 * Close the socket and remove its file if the file is still the one we bound.
 */
export function closeUnixListener(sock: UnixListenerSocket): void {
  libc().close(sock.fd);
  removeUnixListenerPath(sock);
}

/**
 * Removes the socket's file while it is still this socket (not one a later start made), so that
 * no new client can connect; the listening descriptor stays open, and connections the kernel has
 * already queued can still be accepted (a stop served by listeners in other isolates).
 *
 * @example
 * ```ts
 * declare const sock: UnixListenerSocket;
 * removeUnixListenerPath(sock); // then let the listeners take what is queued, then close it
 * ```
 */
export function removeUnixListenerPath(sock: UnixListenerSocket): void {
  try {
    const st = Deno.lstatSync(sock.path);
    if (st.isSocket && st.dev === sock.dev && st.ino === sock.ino) Deno.removeSync(sock.path);
  } catch {
    // Already gone: nothing to clean up.
  }
}

function removeStaleSocket(path: string): void {
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  if (!st.isSocket) {
    throw new Error(
      `${path} exists and is not a socket; refusing to replace it: remove it or choose another --socket path`,
    );
  }
  if (someoneListens(path)) {
    throw new Error(`another process is listening on ${path}; stop it before starting this one`);
  }
  Deno.removeSync(path);
}

/** A connect() that is refused means the file is stale; one that succeeds or would block is live. */
function someoneListens(path: string): boolean {
  const c = libc();
  const fd = c.socket(1, SOCK.STREAM | SOCK.NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) throw new Error(`socket(AF_UNIX) failed with errno ${errno()}`);
  try {
    if (c.connect(fd, sockaddrUn(path), SOCKADDR_UN_SIZE) === 0) return true;
    const e = errno();
    return e !== ERRNO.ECONNREFUSED && e !== ERRNO.ENOENT;
  } finally {
    c.close(fd);
  }
}

// ---- one socket, several listeners ----------------------------------------------------------

/** What one listener of a shared socket is given (crosses isolates by structured clone). */
export interface SharedSocket {
  socket: UnixListenerSocket;
  /** Connections each listener holds, one Int32 per listener, on a SharedArrayBuffer. */
  held: Int32Array;
  /** This listener's index in `held`. */
  slot: number;
}

/**
 * The shares of `socket` for `listeners` listeners; the caller keeps the socket open until every
 * listener has closed, then closes it (closeUnixListener).
 *
 * @example
 * ```ts
 * declare const path: string;
 * const [first, second] = shareSocket(openUnixListener(path, 1024), 2);
 * ```
 */
export function shareSocket(socket: UnixListenerSocket, listeners: number): SharedSocket[] {
  if (!Number.isInteger(listeners) || listeners < 1) {
    throw new Error(`a shared socket needs at least one listener, got ${listeners}`);
  }
  const held = new Int32Array(new SharedArrayBuffer(4 * listeners));
  return Array.from({ length: listeners }, (_, slot) => ({ socket, held, slot }));
}

/**
 * Records that this listener now holds `count` connections.
 */
export function publishHeld(shared: SharedSocket, count: number): void {
  Atomics.store(shared.held, shared.slot, count);
}

/**
 * Connections the other listeners of the socket hold.
 */
export function heldByOthers(shared: SharedSocket): number {
  let sum = 0;
  for (let i = 0; i < shared.held.length; i++) {
    if (i !== shared.slot) sum += Atomics.load(shared.held, i);
  }
  return sum;
}

/**
 * The process's open-file limits (getrlimit RLIMIT_NOFILE): every connection held is a file
 * descriptor, so the start-up check sets them against the connections the listeners may hold.
 *
 * @example
 * ```ts
 * const { soft } = nofileLimit();
 * ```
 */
export function nofileLimit(): { soft: number; hard: number } {
  return rlimitNofile();
}

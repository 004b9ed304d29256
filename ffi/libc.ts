/**
 * libc through FFI: the few socket, epoll and eventfd calls the connection layer needs and Deno does
 * not expose (peer credentials, holding silent connections, a first-byte deadline). Linux x86_64 and
 * aarch64 with glibc. Every function returns the raw result; a negative result comes with `errno()`.
 *
 * @example
 * ```ts
 * import { libc, SOCK } from "./libc.ts";
 * const fd = libc().socket(1, SOCK.STREAM | SOCK.NONBLOCK | SOCK.CLOEXEC, 0);
 * ```
 */

/** Address family of UNIX domain sockets. */
export const AF_UNIX = 1;
/** socket(2) type flags. */
export const SOCK = { STREAM: 1, DGRAM: 2, NONBLOCK: 0o4000, CLOEXEC: 0o2000000 } as const;
/** getsockopt(2) level and option for the peer's credentials. */
export const SO = { SOL_SOCKET: 1, PEERCRED: 17 } as const;
/** epoll_ctl(2) operations. */
export const EPOLL_CTL = { ADD: 1, DEL: 2, MOD: 3 } as const;
/** epoll event bits. */
export const EPOLL = {
  IN: 0x1,
  OUT: 0x4,
  ERR: 0x8,
  HUP: 0x10,
  RDHUP: 0x2000,
  EXCLUSIVE: 1 << 28,
  ONESHOT: 1 << 30,
} as const;
/** errno values the reactor distinguishes. */
export const ERRNO = {
  EINTR: 4,
  EAGAIN: 11,
  EACCES: 13,
  ENFILE: 23,
  EMFILE: 24,
  EPIPE: 32,
  ECONNABORTED: 103,
  ECONNRESET: 104,
  EADDRINUSE: 98,
  ECONNREFUSED: 111,
  ENOENT: 2,
  EROFS: 30,
} as const;
/** setpriority(2)'s `which` for one process or, on Linux, one thread (by its tid). */
export const PRIO_PROCESS = 0;

/** Flags shared by accept4 and eventfd (same values as SOCK.NONBLOCK / SOCK.CLOEXEC). */
export const O_NONBLOCK = 0o4000;
/** @see O_NONBLOCK */
export const O_CLOEXEC = 0o2000000;
/** send(2) flag: no SIGPIPE when the peer is gone, EPIPE instead. */
export const MSG_NOSIGNAL = 0x4000;
/** shutdown(2) how. */
export const SHUT_WR = 1;
/** getrlimit(2) resource number of the open-file limit. */
export const RLIMIT_NOFILE = 7;
/** getrusage(2)'s `who` for the calling thread only (Linux). */
export const RUSAGE_THREAD = 1;
/**
 * struct rusage on 64-bit Linux: its size and the byte offset of ru_nvcsw, the thread's voluntary
 * context switches (it blocked). Its CPU times are only as precise as the scheduler tick; use
 * CLOCK_THREAD_CPUTIME_ID for those.
 */
export const RUSAGE = { SIZE: 144, NVCSW: 128 } as const;
/** clock_gettime(2) clock of the calling thread's CPU time (ns precision). */
export const CLOCK_THREAD_CPUTIME_ID = 3;
/** Size of struct timespec on 64-bit Linux (tv_sec, tv_nsec). */
export const TIMESPEC_SIZE = 16;
/** Size of struct sockaddr_un and of its sun_path on Linux. */
export const SOCKADDR_UN_SIZE = 110;
/** Longest socket path bind(2) accepts (sun_path minus the NUL). */
export const SUN_PATH_MAX = 107;
/** Size of struct epoll_event: packed on x86_64 (u32 + u64 = 12), padded to 16 elsewhere. */
export const EPOLL_EVENT_SIZE = Deno.build.arch === "x86_64" ? 12 : 16;
/** Offset of the 64-bit data field inside struct epoll_event. */
export const EPOLL_DATA_OFFSET = Deno.build.arch === "x86_64" ? 4 : 8;

const SYMBOLS = {
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  listen: { parameters: ["i32", "i32"], result: "i32" },
  accept4: { parameters: ["i32", "pointer", "pointer", "i32"], result: "i32" },
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  epoll_create1: { parameters: ["i32"], result: "i32" },
  epoll_ctl: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  epoll_wait: { parameters: ["i32", "buffer", "i32", "i32"], result: "i32" },
  epoll_wait_async: {
    name: "epoll_wait",
    parameters: ["i32", "buffer", "i32", "i32"],
    result: "i32",
    nonblocking: true,
  },
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  send: { parameters: ["i32", "buffer", "usize", "i32"], result: "isize" },
  sendto: { parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  shutdown: { parameters: ["i32", "i32"], result: "i32" },
  getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  getrusage: { parameters: ["i32", "buffer"], result: "i32" },
  clock_gettime: { parameters: ["i32", "buffer"], result: "i32" },
  __errno_location: { parameters: [], result: "pointer" },
  getpwnam: { parameters: ["buffer"], result: "pointer" },
  getpwuid: { parameters: ["u32"], result: "pointer" },
  getgrouplist: { parameters: ["buffer", "u32", "buffer", "buffer"], result: "i32" },
  access: { parameters: ["buffer", "i32"], result: "i32" },
  statfs: { parameters: ["buffer", "buffer"], result: "i32" },
  statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32", optional: true },
  initgroups: { parameters: ["buffer", "u32"], result: "i32" },
  setgroups: { parameters: ["usize", "buffer"], result: "i32" },
  setresgid: { parameters: ["u32", "u32", "u32"], result: "i32" },
  setresuid: { parameters: ["u32", "u32", "u32"], result: "i32" },
  getuid: { parameters: [], result: "u32" },
  getgid: { parameters: [], result: "u32" },
  getgrgid: { parameters: ["u32"], result: "pointer" },
  gettid: { parameters: [], result: "i32" },
  setpriority: { parameters: ["i32", "u32", "i32"], result: "i32" },
  getpriority: { parameters: ["i32", "u32"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The bound libc symbols. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let opened: Deno.DynamicLibrary<typeof SYMBOLS> | null = null;

/**
 * The libc symbols, opened once per isolate (a Worker opens its own).
 */
export function libc(): Libc {
  if (opened === null) opened = Deno.dlopen("libc.so.6", SYMBOLS);
  return opened.symbols;
}

/**
 * errno of the last failed synchronous call on this thread (glibc keeps it thread-local, and
 * synchronous FFI calls run on the isolate's thread). Meaningless after a `nonblocking` call.
 */
export function errno(): number {
  const p = libc().__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32(0);
}

/**
 * A struct sockaddr_un for `path`; throws when the path does not fit in sun_path.
 */
export function sockaddrUn(path: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(path);
  if (bytes.length > SUN_PATH_MAX || bytes.includes(0)) {
    throw new Error(
      `socket path '${path}' is ${bytes.length} bytes; a UNIX socket path must be at most ` +
        `${SUN_PATH_MAX} bytes with no NUL: choose a shorter path`,
    );
  }
  const addr = new Uint8Array(SOCKADDR_UN_SIZE);
  new DataView(addr.buffer).setUint16(0, AF_UNIX, true);
  addr.set(bytes, 2);
  return addr;
}

/**
 * A struct sockaddr_un for raw sun_path bytes, which may start with NUL (the abstract namespace),
 * and the address length to pass with it (the bytes, not the whole struct, for abstract names).
 */
export function sockaddrUnRaw(path: Uint8Array): { addr: Uint8Array<ArrayBuffer>; len: number } {
  if (path.length === 0 || path.length > SUN_PATH_MAX) {
    throw new Error(
      `a UNIX socket address must be 1 to ${SUN_PATH_MAX} bytes (got ${path.length})`,
    );
  }
  const addr = new Uint8Array(SOCKADDR_UN_SIZE);
  new DataView(addr.buffer).setUint16(0, AF_UNIX, true);
  addr.set(path, 2);
  return { addr, len: path[0] === 0 ? 2 + path.length : SOCKADDR_UN_SIZE };
}

/**
 * sendto(2) of one datagram to a UNIX address, with MSG_NOSIGNAL: bytes sent or -1 with `errno()`.
 */
export function sendDatagram(
  fd: number,
  buf: Uint8Array,
  to: { addr: Uint8Array<ArrayBuffer>; len: number },
): number {
  return Number(libc().sendto(fd, buf, BigInt(buf.length), MSG_NOSIGNAL, to.addr, to.len));
}

/** A user of the system's user database (the fields of struct passwd svcd needs). */
export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
}

/**
 * getpwnam(3): the user named `name`, or null when there is none.
 */
export function getpwnam(name: string): PasswdEntry | null {
  return passwdEntry(libc().getpwnam(cString(name)));
}

/**
 * getpwuid(3): the user with this uid, or null when no user has it.
 */
export function getpwuid(uid: number): PasswdEntry | null {
  return passwdEntry(libc().getpwuid(uid));
}

function passwdEntry(p: Deno.PointerValue): PasswdEntry | null {
  if (p === null) return null;
  // struct passwd: char *pw_name, char *pw_passwd, uid_t pw_uid, gid_t pw_gid, … (LP64)
  const view = new Deno.UnsafePointerView(p);
  const namePtr = view.getPointer(0);
  const name = namePtr === null ? "" : new Deno.UnsafePointerView(namePtr).getCString();
  return { name, uid: view.getUint32(16), gid: view.getUint32(20) };
}

/**
 * getgrgid(3): the name of the group with this gid, or null when there is none.
 */
export function getgrgid(gid: number): string | null {
  const p = libc().getgrgid(gid);
  if (p === null) return null;
  const namePtr = new Deno.UnsafePointerView(p).getPointer(0); // struct group: char *gr_name, …
  return namePtr === null ? null : new Deno.UnsafePointerView(namePtr).getCString();
}

/**
 * getgrouplist(3): every group id of a user (primary and supplementary), as a login gets them.
 */
export function groupsOf(user: PasswdEntry): number[] {
  let groups = new Uint32Array(64);
  const count = new Int32Array([groups.length]);
  while (libc().getgrouplist(cString(user.name), user.gid, groups, count) < 0) {
    groups = new Uint32Array(count[0] + 16);
    count[0] = groups.length;
  }
  return [...groups.subarray(0, count[0])];
}

/** access(2) mode bits. */
export const ACCESS = { R: 4, W: 2, X: 1 } as const;

/**
 * access(2) with the real uid and gid: whether this process may use `path` as `mode` says.
 */
export function mayAccess(path: string, mode: number): boolean {
  return libc().access(cString(path), mode) === 0;
}

/** f_type values of statfs(2) that svcd tells apart (linux/magic.h). */
export const FS_MAGIC = { RAMFS: 0x858458f6, TMPFS: 0x01021994 } as const;

/**
 * statfs(2) f_type: the kind of file system `path` is on, or null when the call fails.
 */
export function fileSystemType(path: string): number | null {
  // struct statfs on LP64 Linux starts with __fsword_t f_type (8 bytes); the struct is 120 bytes.
  const buf = new BigInt64Array(16);
  if (libc().statfs(cString(path), buf) !== 0) return null;
  return Number(BigInt.asUintN(32, buf[0]));
}

/** A struct statx_timestamp: seconds since 1970 and nanoseconds. */
export interface StatxTimestamp {
  sec: number;
  nsec: number;
}

/** The fields of struct statx(2) read here, as the file system stores them. */
export interface Statx {
  /** File type and mode bits (`S_IFMT` masks the type). */
  mode: number;
  ino: number;
  size: number;
  mtime: StatxTimestamp;
  ctime: StatxTimestamp;
  devMajor: number;
  devMinor: number;
}

/** The file type bits of a mode, and the type of a regular file (inode(7)). */
export const S_IFMT = 0o170000, S_IFREG = 0o100000;

// struct statx (linux/stat.h; the same on every architecture): offsets of the fields read here.
const STATX = {
  SIZE: 256,
  MODE: 28,
  INO: 32,
  FILE_SIZE: 40,
  CTIME: 96,
  MTIME: 112,
  DEV_MAJOR: 136,
  DEV_MINOR: 140,
} as const;
const AT_FDCWD = -100;
const STATX_BASIC_STATS = 0x7ff;
const statxBuf = new Uint8Array(STATX.SIZE);
const statxView = new DataView(statxBuf.buffer);

/**
 * statx(2) of `path`, or null when the call fails (then `errno()`) or libc has no statx. Deno's own
 * stat gives times in milliseconds (ctime in whole seconds); this one gives what the file system
 * stores.
 */
export function statx(path: string): Statx | null {
  const call = libc().statx;
  if (call === null) return null;
  if (call(AT_FDCWD, cString(path), 0, STATX_BASIC_STATS, statxBuf) !== 0) return null;
  const v = statxView;
  const u64 = (at: number) => v.getUint32(at + 4, true) * 2 ** 32 + v.getUint32(at, true);
  const time = (at: number) => ({
    sec: Number(v.getBigInt64(at, true)),
    nsec: v.getUint32(at + 8, true),
  });
  return {
    mode: v.getUint16(STATX.MODE, true),
    ino: u64(STATX.INO),
    size: u64(STATX.FILE_SIZE),
    mtime: time(STATX.MTIME),
    ctime: time(STATX.CTIME),
    devMajor: v.getUint32(STATX.DEV_MAJOR, true),
    devMinor: v.getUint32(STATX.DEV_MINOR, true),
  };
}

/**
 * Switches the process's user and groups to `user` (its supplementary groups from the group
 * database, like a login): real and effective ids become the user's; the saved ids stay 0 so that
 * {@link restoreRoot} can switch back. glibc applies the change to every thread of the process.
 * Returns 0, or -1 with `errno()`.
 */
export function becomeUser(user: PasswdEntry): number {
  const c = libc();
  if (c.initgroups(cString(user.name), user.gid) !== 0) return -1;
  if (c.setresgid(user.gid, user.gid, 0) !== 0) return -1;
  return c.setresuid(user.uid, user.uid, 0);
}

/**
 * Switches back to root after {@link becomeUser} (the saved uid 0 allows it): uid, gid and an
 * empty supplementary group list. Returns 0, or -1 with `errno()`.
 */
export function restoreRoot(): number {
  const c = libc();
  if (c.setresuid(0, 0, 0) !== 0) return -1;
  if (c.setresgid(0, 0, 0) !== 0) return -1;
  return c.setgroups(0n, new Uint8Array(4));
}

function cString(text: string): Uint8Array<ArrayBuffer> {
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(bytes.length + 1);
  out.set(bytes);
  return out;
}

/** Credentials of a connected UNIX socket's peer (struct ucred). */
export interface PeerCred {
  pid: number;
  uid: number;
  gid: number;
}

const credBuf = new Uint8Array(12);
const credLen = new Uint32Array(1);

/**
 * SO_PEERCRED of a connected socket, or null when the call fails.
 */
export function peerCred(fd: number): PeerCred | null {
  credLen[0] = 12;
  if (libc().getsockopt(fd, SO.SOL_SOCKET, SO.PEERCRED, credBuf, credLen) !== 0) return null;
  const v = new DataView(credBuf.buffer);
  return { pid: v.getInt32(0, true), uid: v.getUint32(4, true), gid: v.getUint32(8, true) };
}

/**
 * getrlimit(RLIMIT_NOFILE): the open-file limits; RLIM_INFINITY is reported as Infinity.
 */
export function rlimitNofile(): { soft: number; hard: number } {
  const buf = new BigUint64Array(2);
  if (libc().getrlimit(RLIMIT_NOFILE, buf) !== 0) {
    throw new Error(`getrlimit(RLIMIT_NOFILE) failed with errno ${errno()}`);
  }
  const toNumber = (v: bigint) => (v === 0xffffffffffffffffn ? Infinity : Number(v));
  return { soft: toNumber(buf[0]), hard: toNumber(buf[1]) };
}

/**
 * read(2) of up to `len` bytes into `buf`: bytes read, 0 at end of stream, -1 with `errno()`.
 */
export function readFd(fd: number, buf: Uint8Array, len: number): number {
  return Number(libc().read(fd, buf, BigInt(len)));
}

/**
 * send(2) with MSG_NOSIGNAL (a vanished peer is EPIPE, not a signal): bytes sent or -1.
 */
export function sendFd(fd: number, buf: Uint8Array, len: number): number {
  return Number(libc().send(fd, buf, BigInt(len), MSG_NOSIGNAL));
}

/**
 * write(2): bytes written or -1 with `errno()`.
 */
export function writeFd(fd: number, buf: Uint8Array, len: number): number {
  return Number(libc().write(fd, buf, BigInt(len)));
}

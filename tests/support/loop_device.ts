/**
 * A real block device whose writes can be made to fail with EIO, for tests of the audit log on a
 * failing disk: an ext4 file system in a loop device over a sparse file. `failWrites()` shrinks the
 * loop device under the mounted file system (LOOP_SET_STATUS64 with a small lo_sizelimit), so the
 * kernel answers every write past the first MiB with an I/O error, and fdatasync reports EIO;
 * `heal()` gives the device its size back. Root only; `loopDeviceAvailable()` says whether this
 * machine allows it (device-mapper targets such as `error` or `dm-flakey` are not available in
 * every container, loop devices often are).
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const disk = await LoopDisk.mount(dir);
 * disk.failWrites(); // fdatasync in dir now fails with EIO
 * disk.heal();
 * await disk.unmount();
 * ```
 */

const LOOP_SET_STATUS64 = 0x4c04;
const LOOP_GET_STATUS64 = 0x4c05;
/** sizeof(struct loop_info64) on Linux; lo_sizelimit is the u64 at offset 32. */
const LOOP_INFO64_SIZE = 232;
const LO_SIZELIMIT_OFFSET = 32;
const O_RDONLY = 0;
const O_CLOEXEC = 0o2000000;
const IMAGE_BYTES = 64 * 1024 * 1024;
const FAILING_BYTES = 1024 * 1024;

const SYMBOLS = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
} as const;

async function run(cmd: string, ...args: string[]): Promise<string> {
  const r = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  if (!r.success) {
    throw new Error(`${cmd} ${args.join(" ")}: ${new TextDecoder().decode(r.stderr).trim()}`);
  }
  return new TextDecoder().decode(r.stdout).trim();
}

/**
 * Why a loop-device disk cannot be made here, or undefined when it can.
 *
 * @example
 * ```ts
 * const why = await loopDeviceUnavailable(); // e.g. "not root"
 * ```
 */
export async function loopDeviceUnavailable(): Promise<string | undefined> {
  if (Deno.uid() !== 0) return "not root (losetup and mount need it)";
  try {
    await run("losetup", "-f");
    await run("mkfs.ext4", "-V");
  } catch (err) {
    return (err as Error).message;
  }
  return undefined;
}

/** An ext4 file system on a loop device, mounted at `dir`. */
export class LoopDisk {
  private constructor(
    readonly dir: string,
    readonly device: string,
    readonly image: string,
  ) {}

  /**
   * Makes the image, the loop device and the file system, and mounts it at `dir` (created if needed).
   *
   * @example
   * ```ts
   * const disk = await LoopDisk.mount("/tmp/x/audit");
   * ```
   */
  static async mount(dir: string): Promise<LoopDisk> {
    const image = await Deno.makeTempFile({ prefix: "svcd-loopdisk-", suffix: ".img" });
    await Deno.truncate(image, IMAGE_BYTES);
    await run("mkfs.ext4", "-q", "-F", image);
    const device = await run("losetup", "-f", "--show", image);
    await Deno.mkdir(dir, { recursive: true });
    try {
      await run("mount", "-o", "errors=continue", device, dir);
    } catch (err) {
      await run("losetup", "-d", device).catch(() => {});
      await Deno.remove(image).catch(() => {});
      throw err;
    }
    return new LoopDisk(dir, device, image);
  }

  /** Writes past the first MiB of the device fail from now on (EIO at fdatasync). Example: `disk.failWrites()`. */
  failWrites(): void {
    this.#setSizeLimit(FAILING_BYTES);
  }

  /** The device has its whole size again. Example: `disk.heal()`. */
  heal(): void {
    this.#setSizeLimit(0);
  }

  /** Unmounts and mounts again: what is read next comes from the device, not the page cache. */
  async remount(): Promise<void> {
    await run("umount", this.dir);
    await run("mount", "-o", "errors=continue", this.device, this.dir);
  }

  /** Unmounts (lazily, so a file a failed test left open cannot keep it), frees the device and image. */
  async unmount(): Promise<void> {
    await run("umount", "-l", this.dir).catch(() => {});
    await run("losetup", "-d", this.device).catch(() => {});
    await Deno.remove(this.image).catch(() => {});
  }

  #setSizeLimit(bytes: number): void {
    const lib = Deno.dlopen("libc.so.6", SYMBOLS);
    try {
      const fd = lib.symbols.open(
        new TextEncoder().encode(`${this.device}\0`),
        O_RDONLY | O_CLOEXEC,
      );
      if (fd < 0) throw new Error(`open ${this.device} failed`);
      try {
        const info = new Uint8Array(LOOP_INFO64_SIZE);
        if (lib.symbols.ioctl(fd, BigInt(LOOP_GET_STATUS64), info) !== 0) {
          throw new Error(`LOOP_GET_STATUS64 on ${this.device} failed`);
        }
        new DataView(info.buffer).setBigUint64(LO_SIZELIMIT_OFFSET, BigInt(bytes), true);
        if (lib.symbols.ioctl(fd, BigInt(LOOP_SET_STATUS64), info) !== 0) {
          throw new Error(`LOOP_SET_STATUS64 on ${this.device} failed`);
        }
      } finally {
        lib.symbols.close(fd);
      }
    } finally {
      lib.close();
    }
  }
}

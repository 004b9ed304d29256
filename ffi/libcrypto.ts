/**
 * OpenSSL 3's libcrypto through FFI: only `OPENSSL_init_crypto`, the call whose first use in a
 * process decides whether OpenSSL frees its global state from an atexit handler. Linux with
 * Debian's `libcrypto.so.3`; absent on a host without it.
 *
 * @example
 * ```ts
 * import { libcrypto, OPENSSL_INIT } from "./libcrypto.ts";
 * const ok = libcrypto()?.OPENSSL_init_crypto(BigInt(OPENSSL_INIT.NO_ATEXIT), null); // 1 on success
 * ```
 */

/** `OPENSSL_init_crypto` option bits (openssl/crypto.h). */
export const OPENSSL_INIT = { NO_ATEXIT: 0x00080000 } as const;

const SYMBOLS = {
  OPENSSL_init_crypto: { parameters: ["u64", "pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The bound libcrypto symbols. */
export type Libcrypto = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let opened: Deno.DynamicLibrary<typeof SYMBOLS> | null | undefined;

/**
 * The libcrypto symbols, opened once per isolate; undefined when `libcrypto.so.3` cannot be loaded.
 */
export function libcrypto(): Libcrypto | undefined {
  if (opened === undefined) {
    try {
      opened = Deno.dlopen("libcrypto.so.3", SYMBOLS);
    } catch {
      opened = null;
    }
  }
  return opened?.symbols;
}

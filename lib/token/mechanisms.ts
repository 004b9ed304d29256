/**
 * Which mechanisms the module offers (C_GetMechanismInfo, asked once per mechanism): whether a key
 * type can be generated and signed with here, and which of a key type's signing mechanisms to use.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module, slot: number;
 * const offered = new MechanismCatalogue(mod, slot);
 * offered.keyTypes(); // ["ec-p256", "ed25519", …]
 * ```
 */
import {
  CKF_MECHANISM,
  type CkMechanismInfo,
  ckmName,
  CKR,
  decodeMechanismInfo,
  type MechanismFlag,
  Pkcs11Error,
  type Pkcs11Module,
  SIZE,
} from "../../ffi/pkcs11/mod.ts";
import { MechanismUnavailableError } from "./errors.ts";
import {
  KEY_TYPE_NAMES,
  KEY_TYPES,
  type KeyTypeName,
  type KeyTypeSpec,
  type SigningMechanism,
} from "./key_types.ts";

/**
 * The mechanisms of one slot, cached: a module's answer does not change while it is loaded.
 *
 * @example
 * ```ts
 * import { CKF_MECHANISM, CKM, type Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module, slot: number;
 * const offered = new MechanismCatalogue(mod, slot);
 * if (!offered.offers(CKM.ML_DSA, CKF_MECHANISM.SIGN)) console.log("no ML-DSA here");
 * ```
 */
export class MechanismCatalogue {
  readonly #mod: Pkcs11Module;
  readonly #slot: number;
  readonly #infos = new Map<number, CkMechanismInfo | null>();

  constructor(mod: Pkcs11Module, slot: number) {
    this.#mod = mod;
    this.#slot = slot;
  }

  /** C_GetMechanismInfo of `mechanism`, or null when the module does not know it. */
  info(mechanism: number): CkMechanismInfo | null {
    if (this.#infos.has(mechanism)) return this.#infos.get(mechanism)!;
    const buf = new Uint8Array(SIZE.CK_MECHANISM_INFO);
    const rv = this.#mod.fn.C_GetMechanismInfo(this.#slot, mechanism, buf);
    if (rv !== CKR.OK && rv !== CKR.MECHANISM_INVALID) {
      throw new Pkcs11Error("C_GetMechanismInfo", rv);
    }
    const info = rv === CKR.OK ? decodeMechanismInfo(buf) : null;
    this.#infos.set(mechanism, info);
    return info;
  }

  /** Whether the module offers `mechanism` for an operation (a CKF_ flag such as CKF_SIGN). */
  offers(mechanism: number, flag: MechanismFlag): boolean {
    const info = this.info(mechanism);
    return info !== null && (info.flags & flag) !== 0;
  }

  /** Offered, and for this key size where the module states a range (svcmod: EC 256..256 only). */
  offersFor(spec: KeyTypeSpec, mechanism: number, flag: MechanismFlag): boolean {
    if (!this.offers(mechanism, flag)) return false;
    const info = this.info(mechanism)!;
    if (spec.keySizeBits === undefined || info.maxKeySize === 0) return true;
    return info.minKeySize <= spec.keySizeBits && spec.keySizeBits <= info.maxKeySize;
  }

  /** Whether the module offers everything a key type needs: generation and signing. */
  offersKeyType(type: KeyTypeName): boolean {
    const spec = KEY_TYPES[type];
    return this.offersFor(spec, spec.keyGenMechanism, CKF_MECHANISM.GENERATE_KEY_PAIR) &&
      spec.signing.some((m) => this.offersFor(spec, m.mechanism, CKF_MECHANISM.SIGN));
  }

  /** Key types this module can generate and sign with. Example: `["ec-p256", "ed25519", …]`. */
  keyTypes(): KeyTypeName[] {
    return KEY_TYPE_NAMES.filter((t) => this.offersKeyType(t));
  }

  /**
   * The first of the key type's signing mechanisms the module offers (the table lists them in
   * order of preference); throws {@link MechanismUnavailableError} when it offers none.
   */
  signingFor(spec: KeyTypeSpec, label: string): SigningMechanism {
    const offered = spec.signing.find((m) => this.offersFor(spec, m.mechanism, CKF_MECHANISM.SIGN));
    if (!offered) {
      const names = spec.signing.map((m) => ckmName(m.mechanism)).join(" or ");
      throw new MechanismUnavailableError(
        `key '${label}' (${spec.name}) signs with ${names}, which the module does not offer ` +
          `(C_GetMechanismInfo: CKR_MECHANISM_INVALID); not attempted`,
      );
    }
    return offered;
  }
}

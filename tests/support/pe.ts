/**
 * The smallest Windows executable Authenticode tools take: a PE32+ image (x86-64, console) with
 * one code section holding `ret`, laid out by the Microsoft PE/COFF specification: the MS-DOS
 * header pointing at the PE signature, the COFF header, the optional header with its 16 data
 * directories (all empty: the certificate table, directory 4, is the signer's to fill), one
 * section header, the section at the file alignment. Made here so no binary is downloaded.
 *
 * @example
 * ```ts
 * import { minimalPe } from "./pe.ts";
 * await Deno.writeFile("/tmp/app.exe", minimalPe());
 * ```
 */

const FILE_ALIGNMENT = 0x200;
const SECTION_ALIGNMENT = 0x1000;
const PE_OFFSET = 0x40;
const COFF_HEADER = PE_OFFSET + 4;
const OPTIONAL_HEADER = COFF_HEADER + 20;
const DATA_DIRECTORIES = 16;
const OPTIONAL_HEADER_SIZE = 112 + DATA_DIRECTORIES * 8;
const SECTION_HEADER = OPTIONAL_HEADER + OPTIONAL_HEADER_SIZE;
const CODE_RVA = SECTION_ALIGNMENT;
const CODE_OFFSET = FILE_ALIGNMENT;

/** Writes little-endian fields one after the other from `offset`. */
function fields(view: DataView, offset: number, values: Array<[1 | 2 | 4 | 8, number]>): void {
  for (const [size, value] of values) {
    if (size === 1) view.setUint8(offset, value);
    else if (size === 2) view.setUint16(offset, value, true);
    else if (size === 4) view.setUint32(offset, value, true);
    else view.setBigUint64(offset, BigInt(value), true);
    offset += size;
  }
}

/** The image: headers in the first FILE_ALIGNMENT bytes, the code section in the next. */
export function minimalPe(): Uint8Array {
  const image = new Uint8Array(CODE_OFFSET + FILE_ALIGNMENT);
  const view = new DataView(image.buffer);
  image.set(new TextEncoder().encode("MZ"), 0);
  view.setUint32(0x3c, PE_OFFSET, true); // e_lfanew
  image.set(new TextEncoder().encode("PE\0\0"), PE_OFFSET);
  // Machine x86-64, one section, SizeOfOptionalHeader, EXECUTABLE_IMAGE | LARGE_ADDRESS_AWARE.
  fields(view, COFF_HEADER, [
    [2, 0x8664],
    [2, 1],
    [4, 0],
    [4, 0],
    [4, 0],
    [2, OPTIONAL_HEADER_SIZE],
    [
      2,
      0x22,
    ],
  ]);
  fields(view, OPTIONAL_HEADER, [
    [2, 0x20b], // PE32+
    [1, 0],
    [1, 0],
    [4, FILE_ALIGNMENT], // SizeOfCode
    [4, 0],
    [4, 0],
    [4, CODE_RVA], // AddressOfEntryPoint
    [4, CODE_RVA], // BaseOfCode
    [8, 0x140000000], // ImageBase
    [4, SECTION_ALIGNMENT],
    [4, FILE_ALIGNMENT],
    [2, 6], // operating system version 6.0
    [2, 0],
    [2, 0],
    [2, 0],
    [2, 6], // subsystem version 6.0
    [2, 0],
    [4, 0],
    [4, CODE_RVA + SECTION_ALIGNMENT], // SizeOfImage
    [4, CODE_OFFSET], // SizeOfHeaders
    [4, 0], // CheckSum (the signer sets it)
    [2, 3], // IMAGE_SUBSYSTEM_WINDOWS_CUI
    [2, 0],
    [8, 0x100000], // stack reserve, commit; heap reserve, commit
    [8, 0x1000],
    [8, 0x100000],
    [8, 0x1000],
    [4, 0],
    [4, DATA_DIRECTORIES],
  ]);
  image.set(new TextEncoder().encode(".text"), SECTION_HEADER);
  // VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData, …, CODE | EXECUTE | READ.
  fields(view, SECTION_HEADER + 8, [
    [4, 1],
    [4, CODE_RVA],
    [4, FILE_ALIGNMENT],
    [4, CODE_OFFSET],
    [4, 0],
    [4, 0],
    [2, 0],
    [2, 0],
    [4, 0x60000020],
  ]);
  image[CODE_OFFSET] = 0xc3; // ret
  return image;
}

/** Where the code section's bytes start in the file (a byte there changed breaks a signature). */
export const PE_CODE_OFFSET = CODE_OFFSET;

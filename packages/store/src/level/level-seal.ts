// The value envelope of the LevelDB backend: every stored value passes through sealValue on its way in and
// unsealValue on its way out (the database's value encoding, so no record type can bypass it).
import { crc32 } from "node:zlib";
import { StoreError } from "../types.js";

/**
 * A sealed value is SEAL_TAG, the CRC-32 of the record (u32 big-endian), then the record. Every value written
 * before the envelope existed is empty or starts with a byte below 0x20 (a record version, or the first byte of a
 * big-endian length or number), so the tag tells the two apart without a migration.
 */
export const SEAL_TAG = 0xc5;
export const SEAL_HEADER_BYTES = 5;

/** How the store reads values without the envelope: `legacy` (written before it) or `sealed` (every value has it). */
export interface SealMode {
  strict: boolean;
}

/** The record in its envelope; an empty value stays empty (an index entry has no bytes to damage). */
export function sealValue(record: Uint8Array): Uint8Array {
  if (record.length === 0) return record;
  const out = new Uint8Array(SEAL_HEADER_BYTES + record.length);
  const sum = crc32(record);
  out[0] = SEAL_TAG;
  out[1] = sum >>> 24;
  out[2] = (sum >>> 16) & 0xff;
  out[3] = (sum >>> 8) & 0xff;
  out[4] = sum & 0xff;
  out.set(record, SEAL_HEADER_BYTES);
  return out;
}

/**
 * The record inside a sealed value, after its checksum matched; CORRUPT when it did not. A value without the
 * envelope is returned as it is in a store that holds records from before the envelope, and is CORRUPT otherwise.
 */
export function unsealValue(value: Uint8Array, mode: SealMode): Uint8Array {
  if (value.length === 0) return value;
  if (value[0] !== SEAL_TAG) {
    if (!mode.strict) return value;
    throw new StoreError(
      "CORRUPT",
      `a stored value of ${value.length} bytes has no checksum envelope, and every value of this store is sealed`,
    );
  }
  if (value.length < SEAL_HEADER_BYTES) {
    throw new StoreError("CORRUPT", `a stored value of ${value.length} bytes is shorter than its checksum envelope`);
  }
  const stored = ((value[1]! << 24) | (value[2]! << 16) | (value[3]! << 8) | value[4]!) >>> 0;
  const record = value.subarray(SEAL_HEADER_BYTES);
  const actual = crc32(record);
  if (actual !== stored) {
    throw new StoreError(
      "CORRUPT",
      `a stored value of ${value.length} bytes failed its checksum (stored ${hex32(stored)}, computed ${hex32(actual)}): the data on disk was damaged`,
    );
  }
  return record;
}

const hex32 = (n: number) => n.toString(16).padStart(8, "0");

/** The database's value encoding: seals on write, verifies and unseals on read. */
export function sealEncoding(mode: SealMode) {
  return {
    name: "parley-sealed",
    format: "view" as const,
    encode: sealValue,
    decode: (value: Uint8Array) => unsealValue(value, mode),
  };
}

/**
 * The StoreError a failed value decode carried, if `error` is abstract-level's wrapper of one (LEVEL_DECODE_ERROR,
 * whose cause is the error unsealValue threw); else `error` unchanged.
 */
export function unwrapDecodeError(error: unknown): unknown {
  const e = error as { code?: string; cause?: unknown };
  if (e?.code === "LEVEL_DECODE_ERROR" && e.cause instanceof StoreError) return e.cause;
  return error;
}

import { idLimits, StoreError } from "../types.js";

export type IdKind = keyof typeof idLimits;

// In a `u` regex \p{Cs} only matches surrogates that are not part of a pair.
const loneSurrogate = /\p{Cs}/u;

/**
 * Refuses ids the store cannot keep byte-exact. Anything else (slashes, dots,
 * NUL, control characters, any normalisation form) is accepted verbatim: ids
 * are only ever hashed and stored as data, never used as a name or path.
 */
export function checkId(kind: IdKind, value: unknown): string {
  if (typeof value !== "string") throw new StoreError("INVALID_ID", `${kind} must be a string, got ${typeof value}`);
  if (value.length === 0) throw new StoreError("INVALID_ID", `${kind} is empty`);
  const limit = idLimits[kind];
  // Every UTF-16 unit is at most 3 UTF-8 bytes, so a cheap length check bounds huge inputs first.
  if (value.length > limit) {
    throw new StoreError("INVALID_ID", `${kind} is longer than the limit of ${limit} UTF-8 bytes`);
  }
  if (loneSurrogate.test(value)) {
    throw new StoreError("INVALID_ID", `${kind} contains a lone surrogate (not valid UTF-16)`);
  }
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes > limit) {
    throw new StoreError("INVALID_ID", `${kind} is ${bytes} UTF-8 bytes; the limit is ${limit}`);
  }
  return value;
}

// What a JSON value must be for a google.protobuf.Struct to hold it as it is, checked by the bridge's direct paths.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/** A UTF-16 surrogate on its own (with the u flag a pair is one code point): such a string has no UTF-8. */
export const loneSurrogate = /\p{Surrogate}/u;

/** An object literal's kind of object: not an array, not null, not of a class or without a prototype. */
export function isPlainObject(value: unknown): value is { readonly [key: string]: JsonValue } {
  return (
    value !== null &&
    typeof value === "object" &&
    !Array.isArray(value) &&
    Object.getPrototypeOf(value) === Object.prototype
  );
}

/**
 * A plain object holding only what a Struct holds, at every depth: null, booleans, finite numbers, strings and
 * keys with no lone surrogate, arrays and plain objects. protobuf-es refuses a number that is not finite and a
 * lone surrogate, and its copy of an object does not keep a `__proto__` key as a key: such values are left to it.
 */
export function isPlainJsonObject(value: unknown): value is JsonObject {
  return isPlainObject(value) && plainJson(value);
}

function plainJson(value: JsonValue | undefined): boolean {
  if (value === null || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (typeof value === "string") return !loneSurrogate.test(value);
  if (Array.isArray(value)) return value.every(plainJson);
  if (!isPlainObject(value)) return false;
  for (const key in value) {
    if (key === "__proto__" || loneSurrogate.test(key) || !plainJson(value[key])) return false;
  }
  return true;
}

// google.protobuf.Struct's binary encoding from its JSON form, written by hand (see structField).
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/**
 * A google.protobuf.Struct field (tag, length, fields) from its JSON form, byte for byte as toBinary writes it
 * (entries in Object.keys order, which is Object.entries order; each Value's kind always written). Written by
 * hand into a byte list: every turn's task, final event or reply carries the chain report, and toBinary (its
 * reflection, then BinaryWriter's fork/join, string and double calls) took about 10 us for that small Struct,
 * as long as the rest of the message (measured in the commit).
 */
export function structField(field: number, json: JsonObject): Uint8Array {
  const out = Buffer.allocUnsafe(structFieldSize(field, json));
  writeStructField(out, 0, field, json);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

/** The bytes of structField(field, json). */
export function structFieldSize(field: number, json: JsonObject): number {
  const size = structSize(json);
  return varintSize((field << 3) | 2) + varintSize(size) + size;
}

/** Writes structField(field, json) into `out` at `at`; returns where it ends. */
export function writeStructField(out: Buffer, at: number, field: number, json: JsonObject): number {
  at = writeVarint(out, at, (field << 3) | 2);
  at = writeVarint(out, at, structSize(json));
  return writeStruct(out, at, json);
}

// Sizes first, then one buffer written in place: a Struct field is a tree of length-delimited messages.
export const varintSize = (n: number): number =>
  n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
const delimitedSize = (length: number): number => 1 + varintSize(length) + length;

function structSize(json: JsonObject): number {
  let size = 0;
  // Object.keys, not Object.entries: the same keys in the same order without an array per entry (a send's
  // chain reports are sized and written several times).
  for (const k of Object.keys(json)) size += delimitedSize(entrySize(k, json[k]));
  return size;
}

const entrySize = (k: string, v: JsonValue | undefined): number =>
  delimitedSize(Buffer.byteLength(k, "utf8")) + delimitedSize(valueSize(v));

function valueSize(v: JsonValue | undefined): number {
  switch (typeof v) {
    case "number":
      return 9;
    case "string":
      return delimitedSize(Buffer.byteLength(v, "utf8"));
    case "boolean":
      return 2;
    case "object":
      if (v === null) return 2;
      return delimitedSize(Array.isArray(v) ? listSize(v) : structSize(v as JsonObject));
    default:
      // Not JSON (undefined): a Value without a kind, as toBinary writes it.
      return 0;
  }
}

function listSize(list: readonly JsonValue[]): number {
  let size = 0;
  for (const item of list) size += delimitedSize(valueSize(item));
  return size;
}

export function writeVarint(out: Uint8Array, at: number, n: number): number {
  while (n > 0x7f) {
    out[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  out[at++] = n;
  return at;
}

function writeString(out: Buffer, at: number, tag: number, text: string): number {
  out[at++] = tag;
  at = writeVarint(out, at, Buffer.byteLength(text, "utf8"));
  return at + out.write(text, at, "utf8");
}

function writeStruct(out: Buffer, at: number, json: JsonObject): number {
  for (const k of Object.keys(json)) {
    const v = json[k];
    // map<string, Value> fields = 1: an entry is (key = 1, value = 2).
    out[at++] = 0x0a;
    at = writeVarint(out, at, entrySize(k, v));
    at = writeString(out, at, 0x0a, k);
    out[at++] = 0x12;
    at = writeVarint(out, at, valueSize(v));
    at = writeValue(out, at, v);
  }
  return at;
}

function writeValue(out: Buffer, at: number, v: JsonValue | undefined): number {
  switch (typeof v) {
    case "number":
      out[at++] = 0x11; // number_value = 2, 64-bit
      out.writeDoubleLE(v, at);
      return at + 8;
    case "string":
      return writeString(out, at, 0x1a, v); // string_value = 3
    case "boolean":
      out[at++] = 0x20; // bool_value = 4
      out[at++] = v ? 1 : 0;
      return at;
    case "object":
      if (v === null) {
        out[at++] = 0x08; // null_value = 1
        out[at++] = 0;
        return at;
      }
      if (Array.isArray(v)) {
        out[at++] = 0x32; // list_value = 6: values = 1
        at = writeVarint(out, at, listSize(v));
        for (const item of v) {
          out[at++] = 0x0a;
          at = writeVarint(out, at, valueSize(item));
          at = writeValue(out, at, item);
        }
        return at;
      }
      out[at++] = 0x2a; // struct_value = 5
      at = writeVarint(out, at, structSize(v as JsonObject));
      return writeStruct(out, at, v as JsonObject);
    default:
      return at;
  }
}

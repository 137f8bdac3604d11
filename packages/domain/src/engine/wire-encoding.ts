// The binary encoding of the messages every turn writes (text parts, Struct metadata), by hand.
import { checkFieldLayouts, type Message, MessageSchema, type Part, PartSchema } from "@parley/proto";
import { structFieldSize, varintSize, writeStructField, writeVarint } from "./struct-encoding.js";

/**
 * Byte for byte what toBinary writes (fields in number order, defaults left out, a set oneof always written),
 * for the messages a turn carries: text parts and Struct metadata. Anything else (file or data parts,
 * extensions, unknown fields) gets undefined and goes to toBinary. Sized first (-1: not this shape), then
 * written into one buffer of that size.
 */

/**
 * The field numbers the tags below are made of (A2A v1.0's wire format), checked against the generated schemas
 * once at load: a proto that renumbers a field of these messages, or adds one the encoder would silently leave
 * out, stops the server at its start (and every test) instead of writing bytes that decode to something else.
 */
checkFieldLayouts("wire-encoding", "localName", [
  [MessageSchema, "messageId:1 contextId:2 taskId:3 role:4 parts:5 metadata:6 extensions:7 referenceTaskIds:8"],
  [PartSchema, "text:1 raw:2 url:3 data:4 metadata:5 filename:6 mediaType:7"],
]);

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");
const delimited = (length: number): number => 1 + varintSize(length) + length;
/** A proto3 string field: left out when empty. */
const stringSize = (s: string): number => (s === "" ? 0 : delimited(utf8(s)));
/** An enum or a non-negative int32 field: left out when 0. */
const varintFieldSize = (n: number): number => (n === 0 ? 0 : 1 + varintSize(n));
const plain = (m: { readonly $unknown?: readonly unknown[] }): boolean =>
  m.$unknown === undefined || m.$unknown.length === 0;

/** A tag and a varint after it: a varint field whole, or a length-delimited field's head (its bytes follow). */
function writeHead(out: Buffer, at: number, tag: number, n: number): number {
  out[at++] = tag;
  return writeVarint(out, at, n);
}

function writeString(out: Buffer, at: number, tag: number, s: string): number {
  if (s === "") return at;
  at = writeHead(out, at, tag, utf8(s));
  return at + out.write(s, at, "utf8");
}

function writeVarintField(out: Buffer, at: number, tag: number, n: number): number {
  return n === 0 ? at : writeHead(out, at, tag, n);
}

function textPartSize(part: Part): number {
  if (part.content.case !== "text" || part.metadata !== undefined || part.filename !== "" || part.mediaType !== "")
    return -1;
  if (!plain(part)) return -1;
  // text = 1 of the oneof: written even when empty.
  return delimited(utf8(part.content.value));
}

function partsSize(parts: readonly Part[]): number {
  let size = 0;
  for (const part of parts) {
    const one = textPartSize(part);
    if (one < 0) return -1;
    size += delimited(one);
  }
  return size;
}

function writeParts(out: Buffer, at: number, tag: number, parts: readonly Part[]): number {
  for (const part of parts) {
    const text = part.content.value as string;
    at = writeHead(out, at, tag, delimited(utf8(text)));
    at = writeHead(out, at, 0x0a, utf8(text));
    at += out.write(text, at, "utf8");
  }
  return at;
}

function messageSize(m: Message, metadata: boolean): number {
  if (m.extensions.length > 0 || m.referenceTaskIds.length > 0 || !plain(m) || m.role < 0) return -1;
  const parts = partsSize(m.parts);
  if (parts < 0) return -1;
  const meta = metadata && m.metadata !== undefined ? structFieldSize(6, m.metadata) : 0;
  return (
    stringSize(m.messageId) + stringSize(m.contextId) + stringSize(m.taskId) + varintFieldSize(m.role) + parts + meta
  );
}

/** lf.a2a.v1.Message, its metadata left out when `metadata` is false; undefined when not of the shape above. */
export function encodeMessageBytes(m: Message, metadata = true): Uint8Array | undefined {
  const size = messageSize(m, metadata);
  if (size < 0) return undefined;
  const out = Buffer.allocUnsafe(size);
  let at = writeString(out, 0, 0x0a, m.messageId);
  at = writeString(out, at, 0x12, m.contextId);
  at = writeString(out, at, 0x1a, m.taskId);
  at = writeVarintField(out, at, 0x20, m.role);
  at = writeParts(out, at, 0x2a, m.parts);
  if (metadata && m.metadata !== undefined) writeStructField(out, at, 6, m.metadata);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

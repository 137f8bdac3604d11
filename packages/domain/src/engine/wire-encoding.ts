// The binary encoding of the message shapes every turn writes (text parts, Struct metadata), by hand.
import type { JsonObject } from "@bufbuild/protobuf";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import {
  type Artifact,
  ArtifactSchema,
  checkFieldLayouts,
  type Message,
  MessageSchema,
  type Part,
  PartSchema,
  TaskArtifactUpdateEventSchema,
  TaskSchema,
  type TaskStatus,
  TaskStatusSchema,
  TaskStatusUpdateEventSchema,
} from "@parley/proto";
import { structFieldSize, varintSize, writeStructField, writeVarint } from "./struct-encoding.js";

/**
 * Byte for byte what toBinary writes (fields in number order, defaults left out, a set oneof always written),
 * for the shapes a turn carries: messages and artifacts of text parts, a status with its time, Struct metadata.
 * Anything else (file or data parts, extensions, unknown fields, an int64 past 32 bits) gets undefined and
 * goes to toBinary. toBinary's reflection, BinaryWriter forks and TextEncoder arrays cost 5-20 us per Message
 * and 10-40 us per task head on this machine (a loaded one); these write one buffer with two walks.
 *
 * Each encoder is `size` (-1: not this shape) then `write` into a buffer of that size.
 */

/**
 * The field numbers the tags below are made of (A2A v1.0's wire format), checked against the generated schemas
 * once at load: a proto that renumbers a field of these messages, or adds one the encoders would silently leave
 * out, stops the server at its start (and every test) instead of writing bytes that decode to something else.
 */
checkFieldLayouts("wire-encoding", "localName", [
  [MessageSchema, "messageId:1 contextId:2 taskId:3 role:4 parts:5 metadata:6 extensions:7 referenceTaskIds:8"],
  [PartSchema, "text:1 raw:2 url:3 data:4 metadata:5 filename:6 mediaType:7"],
  [ArtifactSchema, "artifactId:1 name:2 description:3 parts:4 metadata:5 extensions:6"],
  [TaskStatusSchema, "state:1 message:2 timestamp:3"],
  [TaskSchema, "id:1 contextId:2 status:3 artifacts:4 history:5 metadata:6"],
  [TaskStatusUpdateEventSchema, "taskId:1 contextId:2 status:3 metadata:4"],
  [TaskArtifactUpdateEventSchema, "taskId:1 contextId:2 artifact:3 append:4 lastChunk:5 metadata:6"],
  [TimestampSchema, "seconds:1 nanos:2"],
]);

/** Bytes that are already encoded (a message's cached encoding) and go in as one length-delimited field. */
type Encoded = Uint8Array;

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");
const delimited = (length: number): number => 1 + varintSize(length) + length;
/** A proto3 string field: left out when empty. */
const stringSize = (s: string): number => (s === "" ? 0 : delimited(utf8(s)));
/** An enum or a non-negative int32 field: left out when 0. */
const varintFieldSize = (n: number): number => (n === 0 ? 0 : 1 + varintSize(n));
const plain = (m: { readonly $unknown?: readonly unknown[] }): boolean =>
  m.$unknown === undefined || m.$unknown.length === 0;
const small = (n: number): boolean => Number.isInteger(n) && n >= 0 && n <= 0xffffffff;

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

function writeEncoded(out: Buffer, at: number, tag: number, bytes: Encoded): number {
  at = writeHead(out, at, tag, bytes.length);
  out.set(bytes, at);
  return at + bytes.length;
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

/**
 * A Message's `bytes` with context_id, task_id and role (fields 2, 3, 4) appended where given: a singular field
 * that occurs again replaces the earlier value when decoded, so the bytes decode to the message with those ids.
 */
export function withMessageIds(
  bytes: Uint8Array,
  contextId: string | undefined,
  taskId: string | undefined,
  role: number | undefined,
): Uint8Array {
  if (role !== undefined && role < 0) throw new RangeError(`role ${role} is not a role`);
  const size =
    bytes.length +
    (contextId === undefined ? 0 : delimited(utf8(contextId))) +
    (taskId === undefined ? 0 : delimited(utf8(taskId))) +
    (role === undefined ? 0 : 1 + varintSize(role));
  const out = Buffer.allocUnsafe(size);
  out.set(bytes, 0);
  let at = bytes.length;
  for (const [tag, text] of [
    [0x12, contextId],
    [0x1a, taskId],
  ] as const) {
    if (text === undefined) continue;
    at = writeHead(out, at, tag, utf8(text));
    at += out.write(text, at, "utf8");
  }
  if (role !== undefined) writeHead(out, at, 0x20, role);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

function statusSize(status: TaskStatus, message: Encoded | undefined): number {
  const time = status.timestamp;
  if (!plain(status) || status.state < 0) return -1;
  let size = varintFieldSize(status.state) + (message ? delimited(message.length) : 0);
  if (time) {
    const seconds = Number(time.seconds);
    if (!plain(time) || !small(seconds) || !small(time.nanos)) return -1;
    size += delimited(varintFieldSize(seconds) + varintFieldSize(time.nanos));
  }
  return size;
}

function writeStatus(out: Buffer, at: number, status: TaskStatus, message: Encoded | undefined): number {
  at = writeVarintField(out, at, 0x08, status.state);
  if (message) at = writeEncoded(out, at, 0x12, message);
  const time = status.timestamp;
  if (time) {
    const seconds = Number(time.seconds);
    at = writeHead(out, at, 0x1a, varintFieldSize(seconds) + varintFieldSize(time.nanos));
    at = writeVarintField(out, at, 0x08, seconds);
    at = writeVarintField(out, at, 0x10, time.nanos);
  }
  return at;
}

function artifactSize(a: Artifact): number {
  if (a.extensions.length > 0 || !plain(a)) return -1;
  const parts = partsSize(a.parts);
  if (parts < 0) return -1;
  const meta = a.metadata !== undefined ? structFieldSize(5, a.metadata) : 0;
  return stringSize(a.artifactId) + stringSize(a.name) + stringSize(a.description) + parts + meta;
}

function writeArtifact(out: Buffer, at: number, a: Artifact): number {
  at = writeString(out, at, 0x0a, a.artifactId);
  at = writeString(out, at, 0x12, a.name);
  at = writeString(out, at, 0x1a, a.description);
  at = writeParts(out, at, 0x22, a.parts);
  return a.metadata !== undefined ? writeStructField(out, at, 5, a.metadata) : at;
}

/** What a task (or a task event) holds before its history and metadata: ids, status, artifacts. */
export interface TaskHead {
  readonly id: string;
  readonly contextId: string;
  readonly status?: TaskStatus;
  readonly artifacts: readonly Artifact[];
  readonly $unknown?: readonly unknown[];
}

/**
 * lf.a2a.v1.Task's fields 1-4 (id, context_id, status, artifacts): a Task without its history and metadata,
 * which encodeTask appends. `statusMessage` is the status message's encoding. Undefined when not of the shape.
 */
export function encodeTaskHead(task: TaskHead, statusMessage: Encoded | undefined): Uint8Array | undefined {
  if (!plain(task)) return undefined;
  const status = task.status ? statusSize(task.status, statusMessage) : 0;
  if (status < 0) return undefined;
  let size = stringSize(task.id) + stringSize(task.contextId) + (task.status ? delimited(status) : 0);
  const artifacts: number[] = [];
  for (const a of task.artifacts) {
    const one = artifactSize(a);
    if (one < 0) return undefined;
    artifacts.push(one);
    size += delimited(one);
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeString(out, 0, 0x0a, task.id);
  at = writeString(out, at, 0x12, task.contextId);
  if (task.status) at = writeStatus(out, writeHead(out, at, 0x1a, status), task.status, statusMessage);
  task.artifacts.forEach((a, i) => {
    at = writeArtifact(out, writeHead(out, at, 0x22, artifacts[i]!), a);
  });
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

/** What an artifact update event holds (lf.a2a.v1.TaskArtifactUpdateEvent). */
export interface ArtifactUpdate {
  readonly taskId: string;
  readonly contextId: string;
  readonly artifact?: Artifact;
  readonly append: boolean;
  readonly lastChunk: boolean;
  readonly metadata?: JsonObject;
  readonly $unknown?: readonly unknown[];
}

/** lf.a2a.v1.TaskArtifactUpdateEvent (a streamed chunk); undefined when not of the shape above. */
export function encodeArtifactUpdate(u: ArtifactUpdate): Uint8Array | undefined {
  if (!plain(u)) return undefined;
  const artifact = u.artifact ? artifactSize(u.artifact) : 0;
  if (artifact < 0) return undefined;
  const size =
    stringSize(u.taskId) +
    stringSize(u.contextId) +
    (u.artifact ? delimited(artifact) : 0) +
    (u.append ? 2 : 0) +
    (u.lastChunk ? 2 : 0) +
    (u.metadata !== undefined ? structFieldSize(6, u.metadata) : 0);
  const out = Buffer.allocUnsafe(size);
  let at = writeString(out, 0, 0x0a, u.taskId);
  at = writeString(out, at, 0x12, u.contextId);
  if (u.artifact) at = writeArtifact(out, writeHead(out, at, 0x1a, artifact), u.artifact);
  at = writeVarintField(out, at, 0x20, u.append ? 1 : 0);
  at = writeVarintField(out, at, 0x28, u.lastChunk ? 1 : 0);
  if (u.metadata !== undefined) writeStructField(out, at, 6, u.metadata);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

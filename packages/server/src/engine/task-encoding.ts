import { type JsonObject, type JsonValue, toBinary } from "@bufbuild/protobuf";
import {
  type Message,
  MessageSchema,
  type StreamResponse,
  StreamResponseSchema,
  type Task,
  TaskSchema,
  type TaskStatusUpdateEvent,
  TaskStatusUpdateEventSchema,
} from "@parley/proto";

/** Task.history's field number in lf.a2a.v1.Task. */
const TASK_HISTORY_FIELD = 5;
/** Task.metadata's field number in lf.a2a.v1.Task: its last field. */
const TASK_METADATA_FIELD = 6;
/** Message.metadata's field number in lf.a2a.v1.Message (extensions = 7 and reference_task_ids = 8 follow it). */
const MESSAGE_METADATA_FIELD = 6;
/** StreamResponse.task's field number in lf.a2a.v1.StreamResponse. */
const STREAM_TASK_FIELD = 1;
/** StreamResponse.status_update's field number in lf.a2a.v1.StreamResponse. */
const STREAM_STATUS_FIELD = 3;
/** TaskStatusUpdateEvent.metadata's field number: its last field. */
const STATUS_METADATA_FIELD = 4;

/**
 * The binary encoding of each message object, made once. A task is rewritten
 * whole at every state change, and its reply is also appended to the thread,
 * so without this the same messages are encoded two or three times per send.
 * Sound because a message is never edited after it joins a history or is
 * stored: the engine builds it completely first.
 */
const encoded = new WeakMap<Message, Uint8Array>();

export function encodeMessage(message: Message): Uint8Array {
  let bytes = encoded.get(message);
  if (bytes === undefined) {
    bytes = encodeMessageOnce(message);
    encoded.set(message, bytes);
  }
  return bytes;
}

/**
 * Records `bytes` as the encoding of `message`, for a message whose bytes were made another way (the
 * engine's copy of an inbound message: its stored bytes with its ids appended). They must decode to it.
 */
export function rememberEncoding(message: Message, bytes: Uint8Array): void {
  encoded.set(message, bytes);
}

/**
 * A message's binary encoding, toBinary's bytes exactly (a stored message's bytes recognise its retries, also those encoded by another
 * version): metadata is written directly only where toBinary puts it last, before no later field.
 */
function encodeMessageOnce(message: Message): Uint8Array {
  const metadata = message.metadata;
  const last =
    metadata !== undefined &&
    message.extensions.length === 0 &&
    message.referenceTaskIds.length === 0 &&
    (message.$unknown === undefined || message.$unknown.length === 0);
  if (!last) return toBinary(MessageSchema, message);
  let head: Uint8Array;
  message.metadata = undefined;
  try {
    head = toBinary(MessageSchema, message);
  } finally {
    message.metadata = metadata;
  }
  return concat(head, structField(MESSAGE_METADATA_FIELD, metadata));
}

/**
 * A google.protobuf.Struct field (tag, length, fields) from its JSON form, byte for byte as toBinary writes it
 * (entries in Object.entries order, each Value's kind always written). Written by hand into a byte list:
 * every turn's task, final event or reply carries the chain report, and toBinary (its reflection, then
 * BinaryWriter's fork/join, string and double calls) took about 10 us for that small Struct, as long as the
 * rest of the message (measured in the commit).
 */
function structField(field: number, json: JsonObject): Uint8Array {
  const size = structSize(json);
  const out = Buffer.allocUnsafe(varintSize((field << 3) | 2) + varintSize(size) + size);
  let at = writeVarint(out, 0, (field << 3) | 2);
  at = writeVarint(out, at, size);
  writeStruct(out, at, json);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

// Sizes first, then one buffer written in place: a Struct field is a tree of length-delimited messages.
const varintSize = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);
const delimitedSize = (length: number): number => 1 + varintSize(length) + length;

function structSize(json: JsonObject): number {
  let size = 0;
  for (const [k, v] of Object.entries(json)) size += delimitedSize(entrySize(k, v));
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

function writeVarint(out: Uint8Array, at: number, n: number): number {
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
  for (const [k, v] of Object.entries(json)) {
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

/**
 * Encodes a task with its history appended as already encoded messages and its metadata written directly.
 * Protobuf allows fields in any order and concatenates repeated ones, so the bytes decode to exactly the task
 * that toBinary would have written (and are toBinary's own bytes when the task has no unknown fields).
 */
export function encodeTask(task: Task): Uint8Array {
  const { history, metadata } = task;
  let head: Uint8Array;
  task.history = [];
  task.metadata = undefined;
  try {
    head = toBinary(TaskSchema, task);
  } finally {
    task.history = history;
    task.metadata = metadata;
  }
  if (history.length === 0 && metadata === undefined) return head;
  const parts = [head];
  for (const message of history) parts.push(delimited(TASK_HISTORY_FIELD, encodeMessage(message)));
  if (metadata !== undefined) parts.push(structField(TASK_METADATA_FIELD, metadata));
  return concat(...parts);
}

/** A status update with its metadata written directly (see structField); the same bytes as toBinary. */
function encodeStatusUpdate(update: TaskStatusUpdateEvent): Uint8Array {
  const metadata = update.metadata!;
  let head: Uint8Array;
  update.metadata = undefined;
  try {
    head = toBinary(TaskStatusUpdateEventSchema, update);
  } finally {
    update.metadata = metadata;
  }
  return concat(head, structField(STATUS_METADATA_FIELD, metadata));
}

function concat(...parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A length-delimited field: its tag and length, then `bytes`. */
function delimited(field: number, bytes: Uint8Array): Uint8Array {
  const tag = (field << 3) | 2;
  const out = new Uint8Array(varintSize(tag) + varintSize(bytes.length) + bytes.length);
  out.set(bytes, writeVarint(out, writeVarint(out, 0, tag), bytes.length));
  return out;
}

/**
 * Encodes a published task event for the event log. A task snapshot (a
 * run's first event) shares its history's message objects with the run's
 * task (see taskSnapshot), so their encodings are the ones made when the
 * task was stored: only the snapshot's head is encoded here.
 */
export function encodeEvent(event: StreamResponse): Uint8Array {
  const payload = event.payload;
  if (payload.case === "task") {
    return delimited(STREAM_TASK_FIELD, encodeTask(payload.value));
  }
  // A run's final status carries the chain report; StreamResponse has no other field set and no unknown ones.
  if (payload.case === "statusUpdate" && payload.value.metadata !== undefined && event.$unknown === undefined) {
    return delimited(STREAM_STATUS_FIELD, encodeStatusUpdate(payload.value));
  }
  return toBinary(StreamResponseSchema, event);
}

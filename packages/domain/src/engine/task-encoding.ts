import { type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
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
import { concatBytes } from "@parley/store";
import { structField, varintSize, writeVarint } from "./struct-encoding.js";
import { encodeArtifactUpdate, encodeMessageBytes, encodeTaskHead, type TaskHead } from "./wire-encoding.js";

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
/** StreamResponse.artifact_update's field number in lf.a2a.v1.StreamResponse. */
const STREAM_ARTIFACT_FIELD = 4;
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
 * A message's binary encoding, toBinary's bytes exactly (a stored message's bytes recognise its retries, also
 * those encoded by another version): metadata is written directly only where toBinary puts it last, before no
 * later field.
 */
function encodeMessageOnce(message: Message): Uint8Array {
  const direct = encodeMessageBytes(message);
  if (direct) return direct;
  const metadata = message.metadata;
  const last =
    metadata !== undefined &&
    message.extensions.length === 0 &&
    message.referenceTaskIds.length === 0 &&
    (message.$unknown === undefined || message.$unknown.length === 0);
  if (!last) return toBinary(MessageSchema, message);
  return concatBytes([
    toBinaryWith(MessageSchema, message, { metadata: undefined }),
    structField(MESSAGE_METADATA_FIELD, metadata),
  ]);
}

/**
 * Encodes a task with its history appended as already encoded messages and its metadata written directly.
 * Protobuf allows fields in any order and concatenates repeated ones, so the bytes decode to exactly the task
 * that toBinary would have written (and are toBinary's own bytes when the task has no unknown fields).
 */
export function encodeTask(task: Task): Uint8Array {
  const parts = taskParts(task);
  return parts.length === 1 ? parts[0]! : concatBytes(parts);
}

/** The pieces of encodeTask's bytes, in order: each is copied once, into the bytes that join them. */
function taskParts(task: Task): Uint8Array[] {
  const { history, metadata } = task;
  const parts = [encodeHead(task) ?? toBinaryWith(TaskSchema, task, { history: [], metadata: undefined })];
  for (const message of history) {
    const bytes = encodeMessage(message);
    parts.push(fieldHead(TASK_HISTORY_FIELD, bytes.length), bytes);
  }
  if (metadata !== undefined) parts.push(structField(TASK_METADATA_FIELD, metadata));
  return parts;
}

/** A task's fields before its history (encodeTaskHead), its status message from its cached encoding. */
function encodeHead(task: TaskHead): Uint8Array | undefined {
  const message = task.status?.message;
  return encodeTaskHead(task, message && encodeMessage(message));
}

/**
 * The pieces of a status update with its metadata written directly (see structField); toBinary's bytes.
 * TaskStatusUpdateEvent's task_id, context_id and status are fields 1-3, as Task's id, context_id and status.
 */
function statusUpdateParts(update: TaskStatusUpdateEvent): Uint8Array[] {
  const head =
    encodeHead({
      id: update.taskId,
      contextId: update.contextId,
      status: update.status,
      artifacts: [],
      $unknown: update.$unknown,
    }) ?? toBinaryWith(TaskStatusUpdateEventSchema, update, { metadata: undefined });
  return update.metadata === undefined ? [head] : [head, structField(STATUS_METADATA_FIELD, update.metadata)];
}

/**
 * toBinary of `value` with some fields set to `blanks` for the call and restored after: the fields the caller
 * then writes by hand (already encoded messages, Struct metadata). No copy of the message is made.
 */
function toBinaryWith<Desc extends DescMessage>(
  schema: Desc,
  value: MessageShape<Desc>,
  blanks: Partial<MessageShape<Desc>>,
): Uint8Array {
  const target = value as Record<string, unknown>;
  const saved = Object.keys(blanks).map((k) => [k, target[k]] as const);
  Object.assign(target, blanks);
  try {
    return toBinary(schema, value);
  } finally {
    for (const [k, v] of saved) target[k] = v;
  }
}

/** A length-delimited field's tag and length; its `length` bytes follow as their own part. */
function fieldHead(field: number, length: number): Uint8Array {
  const tag = (field << 3) | 2;
  const out = new Uint8Array(varintSize(tag) + varintSize(length));
  writeVarint(out, writeVarint(out, 0, tag), length);
  return out;
}

/** The field `field` holding a message whose encoding is `parts`, as one copy of them. */
function delimited(field: number, parts: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  return concatBytes([fieldHead(field, length), ...parts]);
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
    return delimited(STREAM_TASK_FIELD, taskParts(payload.value));
  }
  // StreamResponse has no other field set and no unknown ones; a run's final status carries the chain report.
  if (payload.case === "statusUpdate" && event.$unknown === undefined) {
    return delimited(STREAM_STATUS_FIELD, statusUpdateParts(payload.value));
  }
  const chunk =
    payload.case === "artifactUpdate" && event.$unknown === undefined && encodeArtifactUpdate(payload.value);
  if (chunk) return delimited(STREAM_ARTIFACT_FIELD, [chunk]);
  return toBinary(StreamResponseSchema, event);
}

import { toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  type Message,
  MessageSchema,
  type StreamResponse,
  StreamResponseSchema,
  type Task,
  TaskSchema,
} from "@parley/proto";

/** Task.history's field number in lf.a2a.v1.Task. */
const TASK_HISTORY_FIELD = 5;
/** StreamResponse.task's field number in lf.a2a.v1.StreamResponse. */
const STREAM_TASK_FIELD = 1;

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
    bytes = toBinary(MessageSchema, message);
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
 * Encodes a task with its history appended as already encoded messages.
 * Protobuf allows fields in any order and concatenates repeated ones, so the
 * bytes decode to exactly the task that toBinary would have written.
 */
export function encodeTask(task: Task): Uint8Array {
  const history = task.history;
  let head: Uint8Array;
  task.history = [];
  try {
    head = toBinary(TaskSchema, task);
  } finally {
    task.history = history;
  }
  if (history.length === 0) return head;
  const writer = new BinaryWriter().raw(head);
  for (const message of history) writer.tag(TASK_HISTORY_FIELD, WireType.LengthDelimited).bytes(encodeMessage(message));
  return writer.finish();
}

/**
 * Encodes a published task event for the event log. A task snapshot (a
 * run's first event) shares its history's message objects with the run's
 * task (see taskSnapshot), so their encodings are the ones made when the
 * task was stored: only the snapshot's head is encoded here.
 */
export function encodeEvent(event: StreamResponse): Uint8Array {
  if (event.payload.case !== "task") return toBinary(StreamResponseSchema, event);
  return new BinaryWriter()
    .tag(STREAM_TASK_FIELD, WireType.LengthDelimited)
    .bytes(encodeTask(event.payload.value))
    .finish();
}

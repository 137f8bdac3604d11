import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { type StreamResponse, StreamResponseSchema } from "@parley/proto";

/**
 * The first byte of a logged event stored without its taskId and contextId: the tag of field 15 with wire type 7,
 * which no protobuf reader accepts. A reader that does not know this encoding (a replica of an older version on
 * the same PostgreSQL) fails on the event rather than serving it without the ids A2A requires. No event that
 * toBinary writes starts with it, so the two encodings tell themselves apart.
 */
const WITHOUT_IDS = 0x7f;

/**
 * A run's event as its task's event log stores it. Every status and artifact update names its task and context,
 * a large share of a small chunk's bytes, and the log is the task's own: they are left out when they are the
 * task's, and decodeLoggedEvent puts them back. Other events (the task snapshot, a Message) are stored as toBinary
 * writes them.
 */
export function encodeLoggedEvent(event: StreamResponse, taskId: string, contextId: string): Uint8Array {
  const { payload } = event;
  if (
    (payload.case !== "statusUpdate" && payload.case !== "artifactUpdate") ||
    taskId === "" ||
    payload.value.taskId !== taskId ||
    payload.value.contextId !== contextId
  ) {
    return toBinary(StreamResponseSchema, event);
  }
  // Shallow copies: the run's own event objects are shared with its live subscribers and stay as they are.
  const bare = {
    ...event,
    payload: { case: payload.case, value: { ...payload.value, taskId: "", contextId: "" } },
  } as StreamResponse;
  const bytes = toBinary(StreamResponseSchema, bare);
  const out = Buffer.allocUnsafe(1 + bytes.length);
  out[0] = WITHOUT_IDS;
  out.set(bytes, 1);
  return new Uint8Array(out.buffer, out.byteOffset, out.length);
}

/** A logged event of the task `taskId` in `contextId`, from either encoding. */
export function decodeLoggedEvent(payload: Uint8Array, taskId: string, contextId: string): StreamResponse {
  if (payload[0] !== WITHOUT_IDS) return fromBinary(StreamResponseSchema, payload);
  const event = fromBinary(StreamResponseSchema, payload.subarray(1));
  const inner = event.payload;
  if (inner.case !== "statusUpdate" && inner.case !== "artifactUpdate") {
    throw new Error(`a logged event of task ${taskId} is marked as stored without its ids but is a ${inner.case}`);
  }
  inner.value.taskId = taskId;
  inner.value.contextId = contextId;
  return event;
}

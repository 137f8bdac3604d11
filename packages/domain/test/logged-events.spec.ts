import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role, type StreamResponse, StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { decodeLoggedEvent, encodeLoggedEvent } from "../src/engine/logged-events.js";
import { statusEvent, taskSnapshot } from "../src/engine/task-model.js";
import { streamResponse, textPart } from "../src/engine/turn-messages.js";

const taskId = "9b1f0c1e-3d5a-4e7b-8c2d-1f0e9d8c7b6a";
const contextId = "ctx-7f2b61aa-283f-1ea8-d6a8-085c0d93d387";

function runEvents(): StreamResponse[] {
  const task = create(TaskSchema, {
    id: taskId,
    contextId,
    status: { state: TaskState.SUBMITTED, timestamp: timestampNow() },
    history: [
      create(MessageSchema, {
        messageId: "m-1",
        contextId,
        taskId,
        role: Role.USER,
        parts: [{ content: { case: "text", value: "hello ☃" } }],
      }),
    ],
  });
  const events = [streamResponse({ case: "task", value: taskSnapshot(task) })];
  task.status = { $typeName: "lf.a2a.v1.TaskStatus", state: TaskState.WORKING, timestamp: timestampNow() };
  events.push(statusEvent(task));
  for (const [i, chunk] of ["first ", "second", ""].entries()) {
    events.push(
      create(StreamResponseSchema, {
        payload: {
          case: "artifactUpdate",
          value: {
            taskId,
            contextId,
            artifact: { artifactId: "reply-1", name: "reply", parts: [textPart(chunk)] },
            append: i > 0,
            lastChunk: i === 2,
          },
        },
      }),
    );
  }
  task.status = { $typeName: "lf.a2a.v1.TaskStatus", state: TaskState.COMPLETED, timestamp: timestampNow() };
  const final = statusEvent(task);
  if (final.payload.case === "statusUpdate") final.payload.value.metadata = { chain: { id: "c-1", stepsLeft: 3 } };
  events.push(final);
  return events;
}

describe("logged events", () => {
  it("store a status or artifact update without its ids and read it back whole", () => {
    for (const event of runEvents().slice(1)) {
      const before = toBinary(StreamResponseSchema, event);
      const logged = encodeLoggedEvent(event, taskId, contextId);
      // The ids and their two tags and lengths are left out (the event's own length may take a byte less); one byte
      // marks the encoding.
      expect(logged.length).toBeLessThanOrEqual(before.length - (2 + taskId.length) - (2 + contextId.length) + 1);
      const decoded = decodeLoggedEvent(logged, taskId, contextId);
      expect(equals(StreamResponseSchema, decoded, event)).toBe(true);
      expect(toBinary(StreamResponseSchema, decoded)).toEqual(before);
      // The run's own event object, shared with its live subscribers, is left as it was.
      expect(toBinary(StreamResponseSchema, event)).toEqual(before);
    }
  });

  it("stores other events as toBinary writes them: a task snapshot, a Message, an update of another task", () => {
    const [snapshot] = runEvents();
    const message = streamResponse({
      case: "message",
      value: create(MessageSchema, { messageId: "m-2", contextId, role: Role.AGENT }),
    });
    const foreign = statusEvent(create(TaskSchema, { id: "other", contextId, status: { state: TaskState.WORKING } }));
    const otherContext = statusEvent(create(TaskSchema, { id: taskId, contextId: "ctx-other" }));
    for (const event of [snapshot!, message, foreign, otherContext]) {
      const logged = encodeLoggedEvent(event, taskId, contextId);
      expect(logged).toEqual(toBinary(StreamResponseSchema, event));
      expect(equals(StreamResponseSchema, decodeLoggedEvent(logged, taskId, contextId), event)).toBe(true);
    }
  });

  it("reads events logged whole, as earlier versions wrote every event", () => {
    for (const event of runEvents()) {
      const decoded = decodeLoggedEvent(toBinary(StreamResponseSchema, event), taskId, contextId);
      expect(equals(StreamResponseSchema, decoded, event)).toBe(true);
    }
  });

  it("is refused by a protobuf reader that does not know the encoding, instead of read without ids", () => {
    const update = runEvents()[1]!;
    expect(() => fromBinary(StreamResponseSchema, encodeLoggedEvent(update, taskId, contextId))).toThrow();
  });

  it("names a marked event that is not an update as what it is", () => {
    const snapshot = toBinary(StreamResponseSchema, runEvents()[0]!);
    const marked = Uint8Array.of(0x7f, ...snapshot);
    expect(() => decodeLoggedEvent(marked, taskId, contextId)).toThrow(
      /marked as stored without its ids but is a task/,
    );
  });
});

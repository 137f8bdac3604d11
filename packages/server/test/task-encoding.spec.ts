import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role, StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { encodeEvent, encodeMessage, encodeTask } from "../src/engine/task-encoding.js";
import { statusEvent, streamEvent, taskSnapshot } from "../src/engine/task-model.js";

const message = (text: string, role: Role) =>
  create(MessageSchema, {
    messageId: crypto.randomUUID(),
    contextId: "ctx",
    taskId: "task",
    role,
    parts: [{ content: { case: "text", value: text } }],
    metadata: { k: { nested: [1, "two", true] } },
  });

describe("task encoding", () => {
  it("decodes to the same task as toBinary, history order kept", () => {
    const task = create(TaskSchema, {
      id: "task",
      contextId: "ctx",
      status: { state: TaskState.COMPLETED, timestamp: timestampNow(), message: message("done", Role.AGENT) },
      artifacts: [{ artifactId: "a", name: "reply", parts: [{ content: { case: "text", value: "chunk" } }] }],
      history: [message("first", Role.USER), message("reply ☃", Role.AGENT), message("third", Role.USER)],
      metadata: { m: 1 },
    });
    const decoded = fromBinary(TaskSchema, encodeTask(task));
    expect(equals(TaskSchema, decoded, task)).toBe(true);
    expect(equals(TaskSchema, decoded, fromBinary(TaskSchema, toBinary(TaskSchema, task)))).toBe(true);
    expect(task.history.map((m) => m.parts[0]?.content.value)).toEqual(["first", "reply ☃", "third"]);
  });

  it("encodes a task without history exactly as toBinary does", () => {
    const task = create(TaskSchema, { id: "t", contextId: "c", status: { state: TaskState.SUBMITTED } });
    expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
  });

  it("encodes each message object once", () => {
    const m = message("once", Role.USER);
    expect(encodeMessage(m)).toBe(encodeMessage(m));
    expect(fromBinary(MessageSchema, encodeMessage(m))).toEqual(m);
    // A stored message's bytes recognise its retries: they are toBinary's, metadata or not, later fields or not.
    expect(encodeMessage(m)).toEqual(toBinary(MessageSchema, m));
    const later = message("later fields", Role.USER);
    later.extensions = ["https://example.com/ext"];
    later.referenceTaskIds = ["t-0"];
    expect(encodeMessage(later)).toEqual(toBinary(MessageSchema, later));
    const bare = create(MessageSchema, { messageId: "m", parts: [{ content: { case: "text", value: "x" } }] });
    expect(encodeMessage(bare)).toEqual(toBinary(MessageSchema, bare));
  });

  it("encodes a task snapshot event as toBinary does, sharing the history's messages and nothing else", () => {
    const task = create(TaskSchema, {
      id: "task",
      contextId: "ctx",
      status: { state: TaskState.WORKING, timestamp: timestampNow() },
      history: [message("first", Role.USER), message("second", Role.AGENT)],
    });
    const snapshot = taskSnapshot(task);
    expect(snapshot.history[0]).toBe(task.history[0]);
    task.history.push(message("later", Role.USER));
    task.status!.state = TaskState.COMPLETED;
    expect(snapshot.history).toHaveLength(2);
    expect(snapshot.status?.state).toBe(TaskState.WORKING);
    const event = streamEvent({ case: "task", value: snapshot });
    const decoded = fromBinary(StreamResponseSchema, encodeEvent(event));
    expect(equals(StreamResponseSchema, decoded, event)).toBe(true);
    expect(encodeEvent(statusEvent(task))).toEqual(toBinary(StreamResponseSchema, statusEvent(task)));
  });

  it("writes Struct metadata (every JSON kind) byte for byte as toBinary, in a task and in a status event", () => {
    const metadata = {
      "https://parley.dev/ext/chain/v1": { id: "c-1", stepsLeft: 0, hopCount: 2.5 },
      empty: {},
      list: [null, "", "two", true, false, -1, [], [{ deep: [1] }]],
      none: null,
      text: "☃",
    };
    const task = create(TaskSchema, {
      id: "task",
      contextId: "ctx",
      status: { state: TaskState.COMPLETED, timestamp: timestampNow() },
      metadata,
    });
    expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
    task.metadata = {};
    expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
    task.metadata = metadata;
    task.history = [message("first", Role.USER), message("second", Role.AGENT)];
    expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
    expect(task.metadata).toBe(metadata);
    const event = statusEvent(task);
    if (event.payload.case === "statusUpdate") event.payload.value.metadata = metadata;
    expect(encodeEvent(event)).toEqual(toBinary(StreamResponseSchema, event));
    expect(equals(StreamResponseSchema, fromBinary(StreamResponseSchema, encodeEvent(event)), event)).toBe(true);
  });
});

import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role, StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { appendArtifact, statusEvent, taskSnapshot } from "../src/engine/task-model.js";
import { streamResponse, textPart } from "../src/engine/turn-messages.js";
import { messageText } from "../src/thread/history.js";

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
  it("encodes a task snapshot event that shares the history's messages and nothing else", () => {
    const task = create(TaskSchema, {
      id: "task",
      contextId: "ctx",
      status: { state: TaskState.WORKING, timestamp: timestampNow() },
      history: [message("first", Role.USER), message("second ☃", Role.AGENT)],
    });
    const snapshot = taskSnapshot(task);
    expect(snapshot.history[0]).toBe(task.history[0]);
    task.history.push(message("later", Role.USER));
    task.status!.state = TaskState.COMPLETED;
    expect(snapshot.history).toHaveLength(2);
    expect(snapshot.status?.state).toBe(TaskState.WORKING);
    const event = streamResponse({ case: "task", value: snapshot });
    expect(
      equals(StreamResponseSchema, fromBinary(StreamResponseSchema, toBinary(StreamResponseSchema, event)), event),
    ).toBe(true);
  });

  it("keeps a snapshot and a status event as they were while the run changes its task in place", () => {
    const task = create(TaskSchema, {
      id: "task",
      contextId: "ctx",
      status: { state: TaskState.WORKING, timestamp: { seconds: 10n, nanos: 5 } },
      artifacts: [{ artifactId: "reply-1", name: "reply", parts: [{ content: { case: "text", value: "a" } }] }],
      metadata: { chain: { stepsLeft: 3 } },
    });
    const snapshot = taskSnapshot(task);
    const update = statusEvent(task);
    const before = toBinary(StreamResponseSchema, streamResponse({ case: "task", value: snapshot }));
    const updateBefore = toBinary(StreamResponseSchema, update);
    appendArtifact(task, "reply-1", [textPart("b")], true);
    task.status!.timestamp!.nanos = 6;
    task.status!.state = TaskState.COMPLETED;
    (task.metadata!.chain as { stepsLeft: number }).stepsLeft = 2;
    expect(messageText({ parts: task.artifacts[0]!.parts })).toBe("ab");
    expect(toBinary(StreamResponseSchema, streamResponse({ case: "task", value: snapshot }))).toEqual(before);
    expect(toBinary(StreamResponseSchema, update)).toEqual(updateBefore);
  });
});

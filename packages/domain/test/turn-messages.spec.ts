import { create, type DescMessage, equals, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { TimestampSchema, timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  ArtifactSchema,
  MessageSchema,
  PartSchema,
  Role,
  StreamResponseSchema,
  TaskArtifactUpdateEventSchema,
  TaskSchema,
  TaskState,
  TaskStatusSchema,
  TaskStatusUpdateEventSchema,
} from "@parley/proto";
import { describe, expect, it } from "vitest";
import {
  artifactUpdate,
  emptyTask,
  partCopy,
  partsArtifact,
  partsMessage,
  statusUpdate,
  streamResponse,
  taskStatus,
  textPart,
  timestampNow,
} from "../src/engine/turn-messages.js";

/** `built` is the message create() makes: equal, the same bytes, and its fields in the same order (one shape). */
function expectSame<D extends DescMessage>(schema: D, built: MessageShape<D>, made: MessageShape<D>): void {
  expect(equals(schema, built, made)).toBe(true);
  expect(toBinary(schema, built)).toEqual(toBinary(schema, made));
  expect(Object.keys(built)).toEqual(Object.keys(made));
}

describe("turn messages", () => {
  it("builds each message as create() does", () => {
    const stamp = timestampFromMs(1_764_000_000_123);
    const reply = partsMessage("m-1", "ctx", "task", Role.AGENT, [textPart("hi ☃")]);
    expectSame(
      MessageSchema,
      reply,
      create(MessageSchema, {
        messageId: "m-1",
        contextId: "ctx",
        taskId: "task",
        role: Role.AGENT,
        parts: [{ content: { case: "text", value: "hi ☃" } }],
      }),
    );
    expectSame(PartSchema, textPart(""), create(PartSchema, { content: { case: "text", value: "" } }));
    expectSame(
      ArtifactSchema,
      partsArtifact("reply-1", "reply", [textPart("a")]),
      create(ArtifactSchema, {
        artifactId: "reply-1",
        name: "reply",
        parts: [{ content: { case: "text", value: "a" } }],
      }),
    );
    expectSame(
      TaskSchema,
      emptyTask("t", "c"),
      create(TaskSchema, { id: "t", contextId: "c", history: [], artifacts: [] }),
    );
    expectSame(
      TaskStatusSchema,
      taskStatus(TaskState.WORKING, stamp),
      create(TaskStatusSchema, { state: TaskState.WORKING, timestamp: stamp }),
    );
    expectSame(
      TaskStatusSchema,
      taskStatus(TaskState.COMPLETED, stamp, reply),
      create(TaskStatusSchema, { state: TaskState.COMPLETED, timestamp: stamp, message: reply }),
    );
    const status = taskStatus(TaskState.FAILED, stamp);
    expectSame(
      TaskStatusUpdateEventSchema,
      statusUpdate("t", "c", status, { why: "x" }),
      create(TaskStatusUpdateEventSchema, { taskId: "t", contextId: "c", status, metadata: { why: "x" } }),
    );
    expectSame(
      TaskStatusUpdateEventSchema,
      statusUpdate("t", "c", undefined),
      create(TaskStatusUpdateEventSchema, { taskId: "t", contextId: "c" }),
    );
    const artifact = partsArtifact("reply-1", "", [textPart("")]);
    const update = artifactUpdate("t", "c", artifact, true, false);
    expectSame(
      TaskArtifactUpdateEventSchema,
      update,
      create(TaskArtifactUpdateEventSchema, { taskId: "t", contextId: "c", artifact, append: true, lastChunk: false }),
    );
    expectSame(
      StreamResponseSchema,
      streamResponse({ case: "artifactUpdate", value: update }),
      create(StreamResponseSchema, { payload: { case: "artifactUpdate", value: update } }),
    );
  });

  it("stamps the current time as timestampNow() does", () => {
    const before = Date.now();
    const stamp = timestampNow();
    const after = Date.now();
    expect(timestampMs(stamp)).toBeGreaterThanOrEqual(before);
    expect(timestampMs(stamp)).toBeLessThanOrEqual(after);
    expectSame(TimestampSchema, stamp, timestampFromMs(timestampMs(stamp)));
  });

  it("copies a part so that nothing is shared, text or not", () => {
    const text = textPart("a");
    const copy = partCopy(text);
    expect(copy).not.toBe(text);
    expectSame(PartSchema, copy, text);
    const rich = create(PartSchema, {
      content: { case: "data", value: { kind: { case: "stringValue", value: "x" } } },
      metadata: { k: [1] },
      mediaType: "application/json",
    });
    const richCopy = partCopy(rich);
    // Not a literal of Parley's: protobuf-es's clone(), whose key order is its own (2.17's differs from create()'s).
    expect(equals(PartSchema, richCopy, rich)).toBe(true);
    expect(toBinary(PartSchema, richCopy)).toEqual(toBinary(PartSchema, rich));
    (richCopy.metadata!.k as number[]).push(2);
    expect(rich.metadata).toEqual({ k: [1] });
    const named = create(PartSchema, { content: { case: "text", value: "a" }, filename: "a.txt" });
    expectSame(PartSchema, partCopy(named), named);
  });
});

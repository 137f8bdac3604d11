import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role, StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { encodeInbound } from "../src/engine/message-validation.js";
import { encodeMessage } from "../src/engine/task-encoding.js";
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
  it("encodes a message as toBinary does", () => {
    const m = message("once", Role.USER);
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

  it("writes the messages a turn carries byte for byte as toBinary, whatever their shape", () => {
    const long = "y".repeat(20_000);
    const texts = ["", "x", "reply ☃ 🎉", "lone \uD800 surrogate", long];
    const messages = [
      ...texts.map((text, i) =>
        create(MessageSchema, {
          messageId: i % 2 ? "" : `m-${i}`,
          contextId: i % 3 ? "ctx ☃" : "",
          taskId: i === 1 ? "" : "task",
          role: (i % 3) as Role,
          parts: [{ content: { case: "text", value: text } }, { content: { case: "text", value: "second" } }],
          ...(i % 2 ? { metadata: { k: [1, "two"], deep: { x: null } } } : {}),
        }),
      ),
      create(MessageSchema, { messageId: "no parts" }),
      // Shapes the hand encoder leaves to toBinary: other parts, later fields, unknown fields.
      create(MessageSchema, {
        messageId: "f",
        parts: [{ content: { case: "url", value: "https://x" }, filename: "a" }],
      }),
      create(MessageSchema, {
        messageId: "d",
        parts: [{ content: { case: "data", value: { kind: { case: "boolValue", value: true } } } }],
      }),
      create(MessageSchema, {
        messageId: "m",
        parts: [{ content: { case: "text", value: "t" }, mediaType: "text/plain" }],
      }),
      create(MessageSchema, { messageId: "e", extensions: ["https://example.com/ext"], metadata: { a: 1 } }),
      fromBinary(MessageSchema, Uint8Array.of(0x0a, 0x01, 0x61, 0xf8, 0x01, 0x07)),
    ];
    for (const m of messages) {
      expect(encodeMessage(m)).toEqual(toBinary(MessageSchema, m));
      expect(encodeInbound(m)).toEqual(toBinary(MessageSchema, m));
    }
  });
});

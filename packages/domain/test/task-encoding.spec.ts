import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { MessageSchema, Role, StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { encodeInbound } from "../src/engine/message-validation.js";
import { encodeEvent, encodeMessage, encodeTask } from "../src/engine/task-encoding.js";
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
    const event = streamResponse({ case: "task", value: snapshot });
    const decoded = fromBinary(StreamResponseSchema, encodeEvent(event));
    expect(equals(StreamResponseSchema, decoded, event)).toBe(true);
    expect(encodeEvent(statusEvent(task))).toEqual(toBinary(StreamResponseSchema, statusEvent(task)));
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

  it("writes the messages, statuses and artifacts a turn carries byte for byte as toBinary, whatever their shape", () => {
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
    const time = timestampNow();
    const statuses = [
      undefined,
      { state: TaskState.UNSPECIFIED },
      { state: TaskState.WORKING, timestamp: time },
      { state: TaskState.FAILED, timestamp: { seconds: 0n, nanos: 0 }, message: messages[1] },
      { state: TaskState.COMPLETED, timestamp: { seconds: 1_700_000_000n, nanos: 0 }, message: messages[7] },
      { state: TaskState.COMPLETED, timestamp: { seconds: -5n, nanos: 3 } },
    ];
    const artifacts = [
      [],
      [{ artifactId: "reply-1", name: "reply", parts: [{ content: { case: "text" as const, value: long } }] }],
      [
        { artifactId: "a", description: "d ☃", metadata: { m: true }, parts: [] },
        { artifactId: "b", parts: [{ content: { case: "raw" as const, value: Uint8Array.of(1, 2) } }] },
      ],
      [{ artifactId: "x", extensions: ["e"], parts: [{ content: { case: "text" as const, value: "t" } }] }],
    ];
    for (const status of statuses) {
      for (const list of artifacts) {
        const task = create(TaskSchema, {
          id: "t ☃",
          contextId: "c",
          status,
          artifacts: list,
          history: [messages[0]!],
        });
        expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
        task.metadata = { chain: { id: "c-1", stepsLeft: 3 } };
        expect(encodeTask(task)).toEqual(toBinary(TaskSchema, task));
        const event = statusEvent(task);
        expect(encodeEvent(event)).toEqual(toBinary(StreamResponseSchema, event));
        if (event.payload.case === "statusUpdate") event.payload.value.metadata = task.metadata;
        expect(encodeEvent(event)).toEqual(toBinary(StreamResponseSchema, event));
      }
    }
    for (const [i, artifact] of [undefined, ...artifacts.flat()].entries()) {
      const chunk = create(StreamResponseSchema, {
        payload: {
          case: "artifactUpdate",
          value: { taskId: "t", contextId: i % 2 ? "" : "c ☃", artifact, append: i % 2 === 0, lastChunk: i % 3 === 0 },
        },
      });
      expect(encodeEvent(chunk)).toEqual(toBinary(StreamResponseSchema, chunk));
      if (chunk.payload.case === "artifactUpdate") chunk.payload.value.metadata = { seq: i };
      expect(encodeEvent(chunk)).toEqual(toBinary(StreamResponseSchema, chunk));
    }
  });
});

import { create, type JsonObject, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import {
  type MessageSchema,
  Role,
  SendMessageResponseSchema,
  StreamResponseSchema,
  TaskSchema,
  TaskState,
} from "@parley/proto";
import { describe, expect, it } from "vitest";
import { turnJson } from "../src/turn-json.js";

type MessageInit = MessageInitShape<typeof MessageSchema>;
type TaskInit = MessageInitShape<typeof TaskSchema>;

const metadata: JsonObject = {
  "https://parley.dev/ext/chain/v1": { id: "c-1", stepsLeft: 0, hopCount: 2.5, refused: null },
  list: [null, "", "two", true, false, -1, -0, 1e21, [], [{ deep: [1] }]],
  "7": "an integer-like key",
  empty: {},
};

const messages: MessageInit[] = [
  {},
  { messageId: "m-1", role: Role.USER, parts: [{ content: { case: "text", value: "" } }] },
  {
    messageId: "m-2 ☃",
    contextId: "ctx",
    taskId: "task",
    role: Role.AGENT,
    parts: [
      { content: { case: "text", value: 'hello \u0000 "quoted" \ud83d\udcac' } },
      { content: { case: "url", value: "https://example.com/a.txt" }, filename: "a.txt", mediaType: "text/plain" },
      { content: { case: "text", value: "with metadata" }, metadata: { k: [1, "x"] } },
      {},
    ],
    metadata,
    extensions: ["https://example.com/ext"],
    referenceTaskIds: ["t-0", "t-1"],
  },
];

const stamps = [0, 123_000_000, 123_456_000, 123_456_789, 1].map((nanos) => ({ seconds: 1_764_000_000n, nanos }));

const tasks: TaskInit[] = [
  {},
  { id: "t", contextId: "c", status: { state: TaskState.SUBMITTED, timestamp: stamps[0] }, history: [messages[1]!] },
  ...Object.values(TaskState)
    .filter((state): state is TaskState => typeof state === "number")
    .map((state, i) => ({
      id: `t-${i}`,
      contextId: "c",
      status: { state, timestamp: stamps[i % stamps.length], ...(i % 2 ? { message: messages[2] } : {}) },
      artifacts: [
        { artifactId: "reply-1", name: "reply", parts: [{ content: { case: "text" as const, value: "a" } }] },
        {
          artifactId: "a-2",
          description: "described",
          parts: messages[2]!.parts,
          metadata: { n: i },
          extensions: ["e"],
        },
      ],
      history: messages,
      metadata,
    })),
];

function expectSame(schema: typeof SendMessageResponseSchema | typeof StreamResponseSchema, init: object): void {
  const message = create(schema as typeof StreamResponseSchema, init as never);
  const json = turnJson(schema, message);
  expect(json).toBeDefined();
  // The same text: the same fields, values and key order.
  expect(JSON.stringify(json)).toBe(JSON.stringify(toJson(schema, message)));
}

describe("turn JSON", () => {
  it("writes a SendMessage reply as toJson does", () => {
    for (const task of tasks) expectSame(SendMessageResponseSchema, { payload: { case: "task", value: task } });
    for (const message of messages)
      expectSame(SendMessageResponseSchema, { payload: { case: "message", value: message } });
    expectSame(SendMessageResponseSchema, {});
  });

  it("writes every stream event as toJson does", () => {
    for (const task of tasks) expectSame(StreamResponseSchema, { payload: { case: "task", value: task } });
    for (const message of messages) expectSame(StreamResponseSchema, { payload: { case: "message", value: message } });
    for (const [i, stamp] of stamps.entries()) {
      expectSame(StreamResponseSchema, {
        payload: {
          case: "statusUpdate",
          value: {
            taskId: "t",
            contextId: i % 2 ? "" : "c",
            status: { state: TaskState.WORKING, timestamp: stamp },
            ...(i % 2 ? { metadata } : {}),
          },
        },
      });
    }
    expectSame(StreamResponseSchema, { payload: { case: "statusUpdate", value: {} } });
    for (const [i, artifact] of [undefined, ...(tasks[2]!.artifacts ?? [])].entries()) {
      for (const append of [false, true]) {
        for (const lastChunk of [false, true]) {
          expectSame(StreamResponseSchema, {
            payload: {
              case: "artifactUpdate",
              value: { taskId: "t", contextId: "c", artifact, append, lastChunk, ...(i === 1 ? { metadata } : {}) },
            },
          });
        }
      }
    }
    expectSame(StreamResponseSchema, {});
  });

  it("leaves every other shape to toJson: raw and data parts, odd metadata, times and enums", () => {
    const odd: MessageInit[] = [
      { parts: [{ content: { case: "raw", value: new Uint8Array([1, 2]) } }] },
      { parts: [{ content: { case: "data", value: { kind: { case: "stringValue", value: "x" } } } }] },
      { metadata: { n: Number.NaN } },
      { metadata: { deep: [{ n: Number.POSITIVE_INFINITY }] } },
      { metadata: JSON.parse('{"__proto__": {"x": 1}}') as JsonObject },
      { role: 7 as Role },
    ];
    for (const message of odd) {
      const response = create(SendMessageResponseSchema, { payload: { case: "message", value: message } });
      expect(turnJson(SendMessageResponseSchema, response)).toBeUndefined();
    }
    for (const timestamp of [
      { seconds: -62_135_596_801n, nanos: 0 },
      { seconds: 253_402_300_800n, nanos: 0 },
      { seconds: 0n, nanos: -1 },
      { seconds: 0n, nanos: 1_000_000_000 },
    ]) {
      const task = create(TaskSchema, { status: { state: TaskState.WORKING, timestamp } });
      const response = create(SendMessageResponseSchema, { payload: { case: "task", value: task } });
      expect(turnJson(SendMessageResponseSchema, response)).toBeUndefined();
      expect(() => toJson(SendMessageResponseSchema, response)).toThrow();
    }
  });

  it("answers only for the types it knows", () => {
    const task = create(TaskSchema, { id: "t" });
    expect(turnJson(TaskSchema, task)).toBeUndefined();
  });
});

// Proves that Parley's lf.a2a.v1 schemas and the official A2A SDK's own
// proto-generated codecs agree on the wire, in both directions, before any
// server exists.

import * as sdk from "@a2a-js/sdk";
import { A2AService as sdkGrpc } from "@a2a-js/sdk/server/grpc";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import {
  AgentCardSchema,
  Role,
  SendMessageRequestSchema,
  StreamResponseSchema,
  TaskPushNotificationConfigSchema,
  TaskSchema,
  TaskState,
} from "../src/index.js";

// The SDK's binary codecs are the ones its gRPC service definition uses.
const codec = {
  SendMessageRequest: {
    encode: sdkGrpc.sendMessage.requestSerialize,
    decode: (b: Uint8Array) => sdkGrpc.sendMessage.requestDeserialize(Buffer.from(b)),
  },
  Task: {
    encode: sdkGrpc.getTask.responseSerialize,
    decode: (b: Uint8Array) => sdkGrpc.getTask.responseDeserialize(Buffer.from(b)),
  },
  StreamResponse: {
    encode: sdkGrpc.sendStreamingMessage.responseSerialize,
    decode: (b: Uint8Array) => sdkGrpc.sendStreamingMessage.responseDeserialize(Buffer.from(b)),
  },
  AgentCard: {
    encode: sdkGrpc.getExtendedAgentCard.responseSerialize,
    decode: (b: Uint8Array) => sdkGrpc.getExtendedAgentCard.responseDeserialize(Buffer.from(b)),
  },
  TaskPushNotificationConfig: {
    encode: sdkGrpc.createTaskPushNotificationConfig.requestSerialize,
    decode: (b: Uint8Array) => sdkGrpc.createTaskPushNotificationConfig.requestDeserialize(Buffer.from(b)),
  },
};

const richMessage = {
  messageId: "m-1",
  contextId: "ctx-λ/tenant",
  taskId: "t-9",
  role: "ROLE_USER",
  parts: [
    { text: "hello ☃", mediaType: "text/plain", metadata: { lang: "en" } },
    { raw: Buffer.from([0, 1, 2, 255]).toString("base64"), filename: "a.bin", mediaType: "application/octet-stream" },
    { url: "https://example.com/a.pdf", filename: "a.pdf", mediaType: "application/pdf" },
    { data: { nested: { list: [1, "two", true, null], n: 1.5 } }, mediaType: "application/json" },
  ],
  metadata: { trace: ["a", "b"], depth: 3 },
  extensions: ["urn:x:ext"],
  referenceTaskIds: ["t-1", "t-2"],
};

describe("lf.a2a.v1 wire compatibility with @a2a-js/sdk", () => {
  it("decodes an SDK-encoded SendMessageRequest field by field", () => {
    const original = sdk.SendMessageRequest.fromJSON({
      tenant: "acme",
      message: richMessage,
      configuration: {
        acceptedOutputModes: ["text/plain"],
        historyLength: 0,
        returnImmediately: true,
        taskPushNotificationConfig: {
          url: "http://127.0.0.1:9/hook",
          token: "tok",
          authentication: { scheme: "Bearer", credentials: "secret" },
        },
      },
      metadata: { k: "v" },
    });
    const bytes = codec.SendMessageRequest.encode(original);
    const decoded = fromBinary(SendMessageRequestSchema, bytes);

    expect(decoded.tenant).toBe("acme");
    const m = decoded.message!;
    expect(m.messageId).toBe("m-1");
    expect(m.contextId).toBe("ctx-λ/tenant");
    expect(m.taskId).toBe("t-9");
    expect(m.role).toBe(Role.USER);
    expect(m.metadata).toEqual({ trace: ["a", "b"], depth: 3 });
    expect(m.extensions).toEqual(["urn:x:ext"]);
    expect(m.referenceTaskIds).toEqual(["t-1", "t-2"]);
    expect(m.parts).toHaveLength(4);
    expect(m.parts[0]!.content).toEqual({ case: "text", value: "hello ☃" });
    expect(m.parts[0]!.metadata).toEqual({ lang: "en" });
    expect(m.parts[1]!.content.case).toBe("raw");
    expect(Array.from(m.parts[1]!.content.value as Uint8Array)).toEqual([0, 1, 2, 255]);
    expect(m.parts[1]!.filename).toBe("a.bin");
    expect(m.parts[2]!.content).toEqual({ case: "url", value: "https://example.com/a.pdf" });
    expect(m.parts[2]!.mediaType).toBe("application/pdf");
    const data = m.parts[3]!.content;
    expect(data.case).toBe("data");
    expect(decoded.configuration?.historyLength).toBe(0);
    expect(decoded.configuration?.returnImmediately).toBe(true);
    expect(decoded.configuration?.acceptedOutputModes).toEqual(["text/plain"]);
    expect(decoded.configuration?.taskPushNotificationConfig?.authentication?.credentials).toBe("secret");
    expect(decoded.metadata).toEqual({ k: "v" });

    // Re-encoding with Parley and decoding with the SDK gives back the same value.
    const back = codec.SendMessageRequest.decode(toBinary(SendMessageRequestSchema, decoded));
    expect(sdk.SendMessageRequest.toJSON(back)).toEqual(sdk.SendMessageRequest.toJSON(original));
  });

  it("distinguishes an unset historyLength from zero", () => {
    const unset = sdk.SendMessageRequest.fromJSON({ message: richMessage, configuration: {} });
    const decoded = fromBinary(SendMessageRequestSchema, codec.SendMessageRequest.encode(unset));
    expect(decoded.configuration?.historyLength).toBeUndefined();
  });

  it("encodes a Parley Task the SDK reads back exactly", () => {
    const ms = Date.UTC(2026, 10, 30, 12, 0, 0, 123);
    const task = create(TaskSchema, {
      id: "task-1",
      contextId: "ctx-1",
      status: {
        state: TaskState.INPUT_REQUIRED,
        timestamp: timestampFromMs(ms),
        message: { messageId: "s-1", role: Role.AGENT, parts: [{ content: { case: "text", value: "more?" } }] },
      },
      artifacts: [
        {
          artifactId: "a-1",
          name: "reply",
          description: "d",
          parts: [{ content: { case: "text", value: "chunk" }, mediaType: "text/plain" }],
          metadata: { x: 1 },
          extensions: ["urn:e"],
        },
      ],
      history: [{ messageId: "h-1", role: Role.USER, parts: [{ content: { case: "text", value: "hi" } }] }],
      metadata: { owner: "parley" },
    });
    const read = codec.Task.decode(toBinary(TaskSchema, task));
    expect(read.id).toBe("task-1");
    expect(read.contextId).toBe("ctx-1");
    expect(read.status?.state).toBe(sdk.TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(read.status?.timestamp).toBe(new Date(ms).toISOString());
    expect(read.status?.message?.role).toBe(sdk.Role.ROLE_AGENT);
    expect(read.artifacts[0]?.artifactId).toBe("a-1");
    expect(read.artifacts[0]?.parts[0]?.content).toEqual({ $case: "text", value: "chunk" });
    expect(read.artifacts[0]?.metadata).toEqual({ x: 1 });
    expect(read.history[0]?.messageId).toBe("h-1");
    expect(read.metadata).toEqual({ owner: "parley" });
    // And the reverse direction keeps the timestamp to the millisecond.
    const again = fromBinary(TaskSchema, codec.Task.encode(read));
    expect(timestampMs(again.status!.timestamp!)).toBe(ms);
  });

  it("round-trips every StreamResponse payload case", () => {
    const events = [
      { task: { id: "t", contextId: "c", status: { state: "TASK_STATE_SUBMITTED" } } },
      { message: richMessage },
      { statusUpdate: { taskId: "t", contextId: "c", status: { state: "TASK_STATE_COMPLETED" }, metadata: { a: 1 } } },
      {
        artifactUpdate: {
          taskId: "t",
          contextId: "c",
          artifact: { artifactId: "a", parts: [{ text: "x" }] },
          append: true,
          lastChunk: true,
        },
      },
    ];
    const cases = ["task", "message", "statusUpdate", "artifactUpdate"];
    events.forEach((json, i) => {
      const original = sdk.StreamResponse.fromJSON(json);
      const decoded = fromBinary(StreamResponseSchema, codec.StreamResponse.encode(original));
      expect(decoded.payload.case).toBe(cases[i]);
      const back = codec.StreamResponse.decode(toBinary(StreamResponseSchema, decoded));
      expect(sdk.StreamResponse.toJSON(back)).toEqual(sdk.StreamResponse.toJSON(original));
    });
  });

  it("round-trips an AgentCard with maps, oneofs and optional fields", () => {
    const original = sdk.AgentCard.fromJSON({
      name: "Parley",
      description: "d",
      version: "1.0.0",
      supportedInterfaces: [
        { url: "http://127.0.0.1:8080/", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
        { url: "127.0.0.1:8081", protocolBinding: "GRPC", protocolVersion: "1.0", tenant: "t" },
      ],
      provider: { url: "https://example.com", organization: "Parley" },
      documentationUrl: "https://example.com/docs",
      capabilities: {
        streaming: true,
        pushNotifications: false,
        extendedAgentCard: true,
        extensions: [{ uri: "urn:a2a:tck:required-extension", required: true, params: { p: 1 } }],
      },
      securitySchemes: {
        bearer: { httpAuthSecurityScheme: { scheme: "Bearer", bearerFormat: "opaque" } },
        oauth: {
          oauth2SecurityScheme: {
            flows: {
              authorizationCode: { authorizationUrl: "a", tokenUrl: "t", scopes: { read: "r" }, pkceRequired: true },
            },
          },
        },
      },
      securityRequirements: [{ schemes: { bearer: { list: ["read"] } } }],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [{ id: "echo", name: "Echo", description: "e", tags: ["t"], examples: ["x"] }],
      signatures: [{ protected: "p", signature: "s", header: { kid: "1" } }],
      iconUrl: "https://example.com/i.png",
    });
    const decoded = fromBinary(AgentCardSchema, codec.AgentCard.encode(original));
    expect(decoded.supportedInterfaces[1]?.url).toBe("127.0.0.1:8081");
    expect(decoded.securitySchemes.bearer?.scheme.case).toBe("httpAuthSecurityScheme");
    expect(decoded.securityRequirements[0]?.schemes.bearer?.list).toEqual(["read"]);
    expect(decoded.capabilities?.extensions[0]?.required).toBe(true);
    expect(decoded.capabilities?.pushNotifications).toBe(false);
    expect(decoded.documentationUrl).toBe("https://example.com/docs");
    const back = codec.AgentCard.decode(toBinary(AgentCardSchema, decoded));
    expect(sdk.AgentCard.toJSON(back)).toEqual(sdk.AgentCard.toJSON(original));
  });

  it("round-trips a push notification config", () => {
    const original = sdk.TaskPushNotificationConfig.fromJSON({
      tenant: "t",
      id: "cfg",
      taskId: "task",
      url: "http://127.0.0.1/hook",
      token: "tok",
      authentication: { scheme: "Bearer", credentials: "c" },
    });
    const decoded = fromBinary(TaskPushNotificationConfigSchema, codec.TaskPushNotificationConfig.encode(original));
    expect(decoded).toMatchObject({
      tenant: "t",
      id: "cfg",
      taskId: "task",
      url: "http://127.0.0.1/hook",
      token: "tok",
    });
    const back = codec.TaskPushNotificationConfig.decode(toBinary(TaskPushNotificationConfigSchema, decoded));
    expect(back).toEqual(original);
  });
});

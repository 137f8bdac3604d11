import {
  create,
  type DescMessage,
  type DescMethodStreaming,
  type DescMethodUnary,
  fromJson,
  type JsonValue,
  type Message,
  toJson,
} from "@bufbuild/protobuf";
import type { ContextValues, Transport } from "@connectrpc/connect";
import {
  A2AService,
  type GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequestSchema,
  type ListTaskPushNotificationConfigsResponse,
  ListTasksResponseSchema,
  SendMessageRequestSchema,
} from "@parley/proto";
import type { z } from "zod";
import { JsonRpcCode, JsonRpcError, toJsonRpcError } from "./json-rpc-error.js";
import { sendRequestOf } from "./send-params.js";
import { turnJson } from "./turn-json.js";
import { withoutUnknownFields } from "./unknown-fields.js";
import { agentCardToV03 } from "./v03/agent-card.js";
import { v03Params } from "./v03/params.js";
import * as toV1 from "./v03/to-v1.js";
import * as toV03 from "./v03/to-v03.js";

export type ProtocolVersion = "0.3" | "1.0";
export const supportedVersions: readonly ProtocolVersion[] = ["0.3", "1.0"];

/** One JSON-RPC method: how its params become an upstream request and its answers become results. */
export interface MethodSpec {
  readonly name: string;
  readonly version: ProtocolVersion;
  readonly streaming: boolean;
  /** Validates params and builds the upstream request; throws JsonRpcError -32602 naming the bad field. */
  parse(params: unknown): Message;
  /** Sends the request upstream: one result for unary methods, an event stream otherwise. */
  call(
    transport: Transport,
    input: Message,
    signal: AbortSignal,
    headers: Record<string, string>,
    /** The call's context values (the client's address, for the server's authentication throttle). */
    contextValues?: ContextValues,
  ): Promise<Message> | Promise<UpstreamStream>;
  render(output: Message): JsonValue;
}

/** A streaming call's events, with the response headers that came before them (parley-stream-start). */
export interface UpstreamStream {
  readonly header: Headers;
  readonly events: AsyncIterable<Message>;
}

type AnyUnary = DescMethodUnary<DescMessage, DescMessage>;
type AnyStreaming = DescMethodStreaming<DescMessage, DescMessage>;

async function callUnary(
  method: AnyUnary,
  transport: Transport,
  input: Message,
  signal: AbortSignal,
  headers: Record<string, string>,
  contextValues?: ContextValues,
) {
  const response = await transport.unary(method, signal, undefined, headers, input, contextValues);
  return response.message;
}

const sent: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * A streaming call's one request message. A class, not a one-line generator: a generator object and its
 * promises per call, kept as long as the stream by the request that holds it.
 */
class OneMessage<T> implements AsyncIterableIterator<T> {
  constructor(private value: T | undefined) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  next(): Promise<IteratorResult<T>> {
    const value = this.value;
    if (value === undefined) return Promise.resolve(sent);
    this.value = undefined;
    return Promise.resolve({ done: false, value });
  }

  return(): Promise<IteratorResult<T>> {
    this.value = undefined;
    return Promise.resolve(sent);
  }

  /** connect's transports pipe a request through iterators that require throw(). */
  throw(error: unknown): Promise<IteratorResult<T>> {
    this.value = undefined;
    return Promise.reject(error);
  }
}

async function callStream(
  method: AnyStreaming,
  transport: Transport,
  input: Message,
  signal: AbortSignal,
  headers: Record<string, string>,
  contextValues?: ContextValues,
): Promise<UpstreamStream> {
  const response = await transport.stream(method, signal, undefined, headers, new OneMessage(input), contextValues);
  return { header: response.header, events: response.message };
}

function invalidParams(method: string, detail: string): JsonRpcError {
  return new JsonRpcError(JsonRpcCode.InvalidParams, `invalid params for ${method}: ${detail}`);
}

function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "params do not match the expected shape";
  const path = issue.path.length > 0 ? issue.path.map(String).join(".") : "params";
  return `${path}: ${issue.message}`;
}

function decodes(desc: DescMessage, json: JsonValue): boolean {
  try {
    fromJson(desc, json);
    return true;
  } catch {
    return false;
  }
}

/**
 * The JSON path (message.parts.0.text) of the field that fails to decode,
 * found by decoding each field on its own and descending into the one that
 * fails; undefined when no single field is to blame.
 */
function failingFieldPath(desc: DescMessage, json: unknown, prefix: string): string | undefined {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return undefined;
  const object = json as Record<string, JsonValue>;
  for (const field of desc.fields) {
    const key = field.jsonName in object ? field.jsonName : field.name;
    const value = object[key];
    if (value === undefined || decodes(desc, { [key]: value })) continue;
    const path = prefix === "" ? field.jsonName : `${prefix}.${field.jsonName}`;
    // Well-known types (Struct, Timestamp) have JSON forms of their own: the field itself is the answer.
    const nested = field.message && !field.message.typeName.startsWith("google.protobuf.") ? field.message : undefined;
    if (nested && field.fieldKind === "message") return failingFieldPath(nested, value, path) ?? path;
    if (nested && field.fieldKind === "list" && Array.isArray(value)) {
      const i = value.findIndex((item) => !decodes(nested, item));
      if (i >= 0) return failingFieldPath(nested, value[i], `${path}.${i}`) ?? `${path}.${i}`;
    }
    return path;
  }
  return undefined;
}

function v1Method(method: AnyUnary | AnyStreaming): MethodSpec {
  const streaming = method.methodKind === "server_streaming";
  return {
    name: method.name,
    version: "1.0",
    streaming,
    parse(params) {
      if (params !== undefined && params !== null && (typeof params !== "object" || Array.isArray(params))) {
        throw invalidParams(method.name, `params must be a JSON object (by-name), got ${describeType(params)}`);
      }
      // The common shape of a send, read directly (send-params.ts); every other request as below.
      const common = method.input === SendMessageRequestSchema ? sendRequestOf(params) : undefined;
      if (common) return common;
      // Fields this version does not know are dropped first (forward compatibility); the rest is decoded strictly.
      const known = withoutUnknownFields(method.input, params ?? {});
      try {
        return fromJson(method.input, known as JsonValue);
      } catch (error) {
        const message = (error as Error).message;
        // protobuf-es names a type, not where it sits ("cannot decode enum lf.a2a.v1.TaskState",
        // "cannot decode message google.protobuf.Struct"), which leaves a caller guessing which field was wrong.
        const path = failingFieldPath(method.input, known, "");
        throw invalidParams(method.name, path === undefined ? message : `${path}: ${message}`);
      }
    },
    call: streaming
      ? (t, i, s, h, c) => callStream(method as AnyStreaming, t, i, s, h, c)
      : (t, i, s, h, c) => callUnary(method as AnyUnary, t, i, s, h, c),
    // The shapes a turn answers with are written directly (turn-json.ts); anything else by toJson.
    render:
      method.output === ListTasksResponseSchema
        ? listTasksJson
        : (output) => turnJson(method.output, output) ?? toJson(method.output, output),
  };
}

/**
 * ListTasksResponse with its four REQUIRED fields always present (section 3.1.4: nextPageToken is "" on the last
 * page), which ProtoJSON leaves out at their defaults; the tasks keep toJson's rules (no empty artifacts).
 */
function listTasksJson(output: Message): JsonValue {
  const json = toJson(ListTasksResponseSchema, output as never) as Record<string, JsonValue>;
  return { tasks: [], nextPageToken: "", pageSize: 0, totalSize: 0, ...json };
}

function v03Method<S extends z.ZodType>(
  name: string,
  schema: S,
  upstream: AnyUnary | AnyStreaming,
  toRequest: (params: z.infer<S>) => Message,
  render: (output: never) => JsonValue,
): MethodSpec {
  const streaming = upstream.methodKind === "server_streaming";
  return {
    name,
    version: "0.3",
    streaming,
    parse(params) {
      if (Array.isArray(params)) {
        throw invalidParams(name, "params must be a JSON object (by-name), got an array");
      }
      const parsed = schema.safeParse(params);
      if (!parsed.success) throw invalidParams(name, describeZodError(parsed.error));
      return toRequest(parsed.data);
    },
    call: streaming
      ? (t, i, s, h, c) => callStream(upstream as AnyStreaming, t, i, s, h, c)
      : (t, i, s, h, c) => callUnary(upstream as AnyUnary, t, i, s, h, c),
    render: render as (output: Message) => JsonValue,
  };
}

export function describeType(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value;
}

const m = A2AService.method;

/** A method spec whose upstream call is `call` instead of its one RPC. */
function withCall(spec: MethodSpec, call: MethodSpec["call"]): MethodSpec {
  return { ...spec, call };
}

/**
 * 0.3's tasks/pushNotificationConfig/get takes the config id as optional: without one it answers the task's
 * config whose id is the task id (what a 0.3 set without an id makes, as a2a-js does), else its first one.
 */
async function getPushConfigV03(
  transport: Transport,
  input: Message,
  signal: AbortSignal,
  headers: Record<string, string>,
  contextValues?: ContextValues,
): Promise<Message> {
  const request = input as GetTaskPushNotificationConfigRequest;
  if (request.id !== "")
    return callUnary(m.getTaskPushNotificationConfig, transport, input, signal, headers, contextValues);
  const list = create(ListTaskPushNotificationConfigsRequestSchema, { taskId: request.taskId, pageSize: 100 });
  const { configs } = (await callUnary(
    m.listTaskPushNotificationConfigs,
    transport,
    list,
    signal,
    headers,
    contextValues,
  )) as ListTaskPushNotificationConfigsResponse;
  const config = configs.find((c) => c.id === request.taskId) ?? configs[0];
  if (config) return config;
  throw new JsonRpcError(
    JsonRpcCode.InvalidParams,
    `task ${JSON.stringify(request.taskId)} has no push notification config; set one with tasks/pushNotificationConfig/set`,
  );
}

/** 0.3 names an agent without the extended card AuthenticatedExtendedCardNotConfiguredError (-32007). */
async function extendedCardV03(
  transport: Transport,
  input: Message,
  signal: AbortSignal,
  headers: Record<string, string>,
  contextValues?: ContextValues,
): Promise<Message> {
  try {
    return await callUnary(m.getExtendedAgentCard, transport, input, signal, headers, contextValues);
  } catch (error) {
    const rpcError = toJsonRpcError(error);
    if (rpcError.code !== JsonRpcCode.UnsupportedOperation) throw error;
    throw new JsonRpcError(JsonRpcCode.ExtendedAgentCardNotConfigured, rpcError.message, rpcError.options);
  }
}

const v03Methods: MethodSpec[] = [
  v03Method("message/send", v03Params.messageSend, m.sendMessage, toV1.sendParamsToV1, toV03.sendResponseToV03),
  v03Method(
    "message/stream",
    v03Params.messageSend,
    m.sendStreamingMessage,
    toV1.sendParamsToV1,
    toV03.streamResponseToV03,
  ),
  v03Method("tasks/get", v03Params.taskQuery, m.getTask, toV1.taskQueryToV1, toV03.taskToV03),
  v03Method("tasks/cancel", v03Params.taskId, m.cancelTask, toV1.cancelParamsToV1, toV03.taskToV03),
  v03Method(
    "tasks/resubscribe",
    v03Params.taskId,
    m.subscribeToTask,
    toV1.resubscribeParamsToV1,
    toV03.streamResponseToV03,
  ),
  v03Method(
    "tasks/pushNotificationConfig/set",
    v03Params.taskPushConfig,
    m.createTaskPushNotificationConfig,
    toV1.setPushConfigToV1,
    toV03.pushConfigToV03,
  ),
  withCall(
    v03Method(
      "tasks/pushNotificationConfig/get",
      v03Params.getPushConfig,
      m.getTaskPushNotificationConfig,
      toV1.getPushConfigToV1,
      toV03.pushConfigToV03,
    ),
    getPushConfigV03,
  ),
  v03Method(
    "tasks/pushNotificationConfig/list",
    v03Params.taskId,
    m.listTaskPushNotificationConfigs,
    toV1.listPushConfigsToV1,
    toV03.pushConfigListToV03,
  ),
  v03Method(
    "tasks/pushNotificationConfig/delete",
    v03Params.deletePushConfig,
    m.deleteTaskPushNotificationConfig,
    toV1.deletePushConfigToV1,
    () => null,
  ),
  withCall(
    v03Method(
      "agent/getAuthenticatedExtendedCard",
      v03Params.none,
      m.getExtendedAgentCard,
      toV1.extendedCardRequestToV1,
      agentCardToV03,
    ),
    extendedCardV03,
  ),
];

const byVersion: Readonly<Record<ProtocolVersion, ReadonlyMap<string, MethodSpec>>> = {
  "1.0": new Map(A2AService.methods.map((d) => [d.name, v1Method(d as AnyUnary | AnyStreaming)])),
  "0.3": new Map(v03Methods.map((s) => [s.name, s])),
};

/**
 * Finds a method for the negotiated version. A name that only exists in the
 * other version gets an answer saying which header to send, because that
 * mix-up (a 1.0 client forgetting A2A-Version) is the common one.
 */
export function findMethod(version: ProtocolVersion, name: string): MethodSpec {
  const spec = byVersion[version].get(name);
  if (spec) return spec;
  const other: ProtocolVersion = version === "1.0" ? "0.3" : "1.0";
  if (byVersion[other].has(name)) {
    throw new JsonRpcError(
      JsonRpcCode.MethodNotFound,
      `method ${JSON.stringify(name)} belongs to A2A ${other}, but this request was read as A2A ${version}; ` +
        `send the header "A2A-Version: ${other}"`,
    );
  }
  throw new JsonRpcError(
    JsonRpcCode.MethodNotFound,
    `method ${JSON.stringify(name)} does not exist in A2A ${version}; known methods: ${[...byVersion[version].keys()].join(", ")}`,
  );
}

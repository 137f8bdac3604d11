/**
 * The one translation layer between A2A 0.3 JSON and the 1.0 protobuf
 * messages Parley speaks. Everything 0.3-shaped the bridge reads or writes
 * goes through here, so the legacy protocol's quirks (kind discriminators,
 * kebab-case states, `final`, FilePart, inverted `blocking`) live in one place.
 */
import { create, fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type AgentCard,
  type Artifact,
  CancelTaskRequestSchema,
  DeleteTaskPushNotificationConfigRequestSchema,
  GetExtendedAgentCardRequestSchema,
  GetTaskPushNotificationConfigRequestSchema,
  GetTaskRequestSchema,
  ListTaskPushNotificationConfigsRequestSchema,
  type ListTaskPushNotificationConfigsResponse,
  type Message,
  MessageSchema,
  OAuthFlowsSchema,
  type Part,
  PartSchema,
  Role,
  type SecurityRequirement,
  type SecurityScheme,
  SendMessageRequestSchema,
  type SendMessageResponse,
  type StreamResponse,
  SubscribeToTaskRequestSchema,
  type Task,
  type TaskArtifactUpdateEvent,
  type TaskPushNotificationConfig,
  TaskPushNotificationConfigSchema,
  TaskState,
  type TaskStatus,
  type TaskStatusUpdateEvent,
} from "@parley/proto";
import { z } from "zod";

// ---------------------------------------------------------------------------
// 0.3 request shapes (from a2aproject/A2A v0.3.0 types/src/types.ts)
// ---------------------------------------------------------------------------

const metadata = z.record(z.string(), z.unknown()).optional();
const fileBase = { name: z.string().optional(), mimeType: z.string().optional() };
const part = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("text"), text: z.string(), metadata }),
  z.object({
    kind: z.literal("file"),
    file: z.union([z.object({ ...fileBase, bytes: z.base64() }), z.object({ ...fileBase, uri: z.string().min(1) })]),
    metadata,
  }),
  z.object({ kind: z.literal("data"), data: z.record(z.string(), z.unknown()), metadata }),
]);
const message = z.object({
  kind: z.literal("message").optional(),
  messageId: z.string().min(1),
  role: z.enum(["user", "agent"]),
  parts: z.array(part).min(1),
  contextId: z.string().optional(),
  taskId: z.string().optional(),
  metadata,
  extensions: z.array(z.string()).optional(),
  referenceTaskIds: z.array(z.string()).optional(),
});
const pushNotificationConfig = z.object({
  id: z.string().optional(),
  url: z.string().min(1),
  token: z.string().optional(),
  authentication: z.object({ schemes: z.array(z.string()), credentials: z.string().optional() }).optional(),
});
const int32 = z.number().int().min(0).max(2_147_483_647);

export const v03Params = {
  messageSend: z.object({
    message,
    configuration: z
      .object({
        acceptedOutputModes: z.array(z.string()).optional(),
        historyLength: int32.optional(),
        pushNotificationConfig: pushNotificationConfig.optional(),
        blocking: z.boolean().optional(),
      })
      .optional(),
    metadata,
  }),
  taskQuery: z.object({ id: z.string().min(1), historyLength: int32.optional(), metadata }),
  taskId: z.object({ id: z.string().min(1), metadata }),
  taskPushConfig: z.object({ taskId: z.string().min(1), pushNotificationConfig }),
  getPushConfig: z.object({ id: z.string().min(1), pushNotificationConfigId: z.string().optional(), metadata }),
  deletePushConfig: z.object({ id: z.string().min(1), pushNotificationConfigId: z.string().min(1), metadata }),
  none: z.union([z.object({}).loose(), z.undefined(), z.null()]),
};

type V03Part = z.infer<typeof part>;
type V03Message = z.infer<typeof message>;
type V03PushConfig = z.infer<typeof pushNotificationConfig>;

/** Marks a 0.3 DataPart that wraps a non-object 1.0 value, the same flag a2a-js uses, so both sides round-trip. */
const dataPartCompatFlag = "data_part_compat";

// ---------------------------------------------------------------------------
// 0.3 -> 1.0
// ---------------------------------------------------------------------------

function partToV1(p: V03Part): Part {
  const meta = p.metadata as JsonObject | undefined;
  switch (p.kind) {
    case "text":
      return create(PartSchema, { content: { case: "text", value: p.text }, metadata: meta });
    case "file": {
      const common = { filename: p.file.name ?? "", mediaType: p.file.mimeType ?? "", metadata: meta };
      return "bytes" in p.file
        ? create(PartSchema, { ...common, content: { case: "raw", value: Buffer.from(p.file.bytes, "base64") } })
        : create(PartSchema, { ...common, content: { case: "url", value: p.file.uri } });
    }
    case "data": {
      let value: unknown = p.data;
      let partMeta = meta;
      if (meta?.[dataPartCompatFlag] === true) {
        value = p.data.value ?? null;
        const { [dataPartCompatFlag]: _flag, ...rest } = meta;
        partMeta = Object.keys(rest).length > 0 ? rest : undefined;
      }
      return create(PartSchema, {
        content: { case: "data", value: fromJson(ValueSchema, value as JsonValue) },
        metadata: partMeta,
      });
    }
  }
}

function messageToV1(m: V03Message): Message {
  return create(MessageSchema, {
    messageId: m.messageId,
    contextId: m.contextId ?? "",
    taskId: m.taskId ?? "",
    role: m.role === "user" ? Role.USER : Role.AGENT,
    parts: m.parts.map(partToV1),
    metadata: m.metadata as JsonObject | undefined,
    extensions: m.extensions ?? [],
    referenceTaskIds: m.referenceTaskIds ?? [],
  });
}

function pushConfigToV1(taskId: string, c: V03PushConfig): TaskPushNotificationConfig {
  return create(TaskPushNotificationConfigSchema, {
    id: c.id ?? "",
    taskId,
    url: c.url,
    token: c.token ?? "",
    // 1.0 carries one scheme; 0.3 listed alternatives, of which the first is the one a sender would use.
    authentication: c.authentication
      ? { scheme: c.authentication.schemes[0] ?? "", credentials: c.authentication.credentials ?? "" }
      : undefined,
  });
}

export function sendParamsToV1(params: z.infer<typeof v03Params.messageSend>) {
  const cfg = params.configuration;
  return create(SendMessageRequestSchema, {
    message: messageToV1(params.message),
    metadata: params.metadata as JsonObject | undefined,
    configuration: cfg
      ? {
          acceptedOutputModes: cfg.acceptedOutputModes ?? [],
          historyLength: cfg.historyLength,
          // 0.3 defaulted to blocking; 1.0 expresses the opposite flag.
          returnImmediately: cfg.blocking === false,
          taskPushNotificationConfig: cfg.pushNotificationConfig
            ? pushConfigToV1(params.message.taskId ?? "", cfg.pushNotificationConfig)
            : undefined,
        }
      : undefined,
  });
}

export function taskQueryToV1(params: z.infer<typeof v03Params.taskQuery>) {
  return create(GetTaskRequestSchema, { id: params.id, historyLength: params.historyLength });
}

export function cancelParamsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(CancelTaskRequestSchema, { id: params.id, metadata: params.metadata as JsonObject | undefined });
}

export function resubscribeParamsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(SubscribeToTaskRequestSchema, { id: params.id });
}

export function setPushConfigToV1(params: z.infer<typeof v03Params.taskPushConfig>) {
  return pushConfigToV1(params.taskId, params.pushNotificationConfig);
}

export function getPushConfigToV1(params: z.infer<typeof v03Params.getPushConfig>) {
  return create(GetTaskPushNotificationConfigRequestSchema, {
    taskId: params.id,
    id: params.pushNotificationConfigId ?? "",
  });
}

export function listPushConfigsToV1(params: z.infer<typeof v03Params.taskId>) {
  return create(ListTaskPushNotificationConfigsRequestSchema, { taskId: params.id });
}

export function deletePushConfigToV1(params: z.infer<typeof v03Params.deletePushConfig>) {
  return create(DeleteTaskPushNotificationConfigRequestSchema, {
    taskId: params.id,
    id: params.pushNotificationConfigId,
  });
}

export function extendedCardRequestToV1() {
  return create(GetExtendedAgentCardRequestSchema, {});
}

// ---------------------------------------------------------------------------
// 1.0 -> 0.3
// ---------------------------------------------------------------------------

const stateNames: Readonly<Record<TaskState, string>> = {
  [TaskState.UNSPECIFIED]: "unknown",
  [TaskState.SUBMITTED]: "submitted",
  [TaskState.WORKING]: "working",
  [TaskState.COMPLETED]: "completed",
  [TaskState.FAILED]: "failed",
  [TaskState.CANCELED]: "canceled",
  [TaskState.INPUT_REQUIRED]: "input-required",
  [TaskState.REJECTED]: "rejected",
  [TaskState.AUTH_REQUIRED]: "auth-required",
};

export function stateToV03(state: TaskState): string {
  return stateNames[state] ?? "unknown";
}

/** States after which a 0.3 stream is over: terminal ones and the interrupted ones Parley closes streams on. */
const finalStates = new Set<TaskState>([
  TaskState.COMPLETED,
  TaskState.FAILED,
  TaskState.CANCELED,
  TaskState.REJECTED,
  TaskState.INPUT_REQUIRED,
  TaskState.AUTH_REQUIRED,
]);

function withOptional(target: JsonObject, key: string, value: JsonValue | undefined): JsonObject {
  if (value !== undefined && value !== "" && !(Array.isArray(value) && value.length === 0)) target[key] = value;
  return target;
}

export function partToV03(p: Part): JsonObject {
  const out: JsonObject = {};
  switch (p.content.case) {
    case "text":
      Object.assign(out, { kind: "text", text: p.content.value });
      break;
    case "raw":
    case "url": {
      const file: JsonObject =
        p.content.case === "raw"
          ? { bytes: Buffer.from(p.content.value).toString("base64") }
          : { uri: p.content.value };
      withOptional(file, "name", p.filename);
      withOptional(file, "mimeType", p.mediaType);
      Object.assign(out, { kind: "file", file });
      break;
    }
    case "data": {
      const value = toJson(ValueSchema, p.content.value);
      if (value !== null && typeof value === "object" && !Array.isArray(value)) {
        Object.assign(out, { kind: "data", data: value });
      } else {
        out.kind = "data";
        out.data = { value };
        out.metadata = { ...(p.metadata ?? {}), [dataPartCompatFlag]: true };
        return out;
      }
      break;
    }
    default:
      // A part without content has no 0.3 form; an empty text part keeps the message readable.
      Object.assign(out, { kind: "text", text: "" });
  }
  if (p.metadata) out.metadata = p.metadata;
  return out;
}

export function messageToV03(m: Message): JsonObject {
  const out: JsonObject = {
    kind: "message",
    messageId: m.messageId,
    role: m.role === Role.USER ? "user" : "agent",
    parts: m.parts.map(partToV03),
  };
  withOptional(out, "contextId", m.contextId);
  withOptional(out, "taskId", m.taskId);
  withOptional(out, "metadata", m.metadata);
  withOptional(out, "extensions", m.extensions);
  withOptional(out, "referenceTaskIds", m.referenceTaskIds);
  return out;
}

function statusToV03(s: TaskStatus | undefined): JsonObject {
  const out: JsonObject = { state: stateToV03(s?.state ?? TaskState.UNSPECIFIED) };
  if (s?.message) out.message = messageToV03(s.message);
  if (s?.timestamp) out.timestamp = timestampDate(s.timestamp).toISOString();
  return out;
}

function artifactToV03(a: Artifact): JsonObject {
  const out: JsonObject = { artifactId: a.artifactId, parts: a.parts.map(partToV03) };
  withOptional(out, "name", a.name);
  withOptional(out, "description", a.description);
  withOptional(out, "metadata", a.metadata);
  withOptional(out, "extensions", a.extensions);
  return out;
}

export function taskToV03(t: Task): JsonObject {
  const out: JsonObject = { kind: "task", id: t.id, contextId: t.contextId, status: statusToV03(t.status) };
  if (t.history.length > 0) out.history = t.history.map(messageToV03);
  if (t.artifacts.length > 0) out.artifacts = t.artifacts.map(artifactToV03);
  withOptional(out, "metadata", t.metadata);
  return out;
}

function statusUpdateToV03(e: TaskStatusUpdateEvent): JsonObject {
  const out: JsonObject = {
    kind: "status-update",
    taskId: e.taskId,
    contextId: e.contextId,
    status: statusToV03(e.status),
    final: finalStates.has(e.status?.state ?? TaskState.UNSPECIFIED),
  };
  withOptional(out, "metadata", e.metadata);
  return out;
}

function artifactUpdateToV03(e: TaskArtifactUpdateEvent): JsonObject {
  const out: JsonObject = {
    kind: "artifact-update",
    taskId: e.taskId,
    contextId: e.contextId,
    artifact: e.artifact ? artifactToV03(e.artifact) : { artifactId: "", parts: [] },
    append: e.append,
    lastChunk: e.lastChunk,
  };
  withOptional(out, "metadata", e.metadata);
  return out;
}

/** A 0.3 `message/send` result is the bare Task or Message, told apart by `kind`. */
export function sendResponseToV03(r: SendMessageResponse): JsonObject {
  switch (r.payload.case) {
    case "task":
      return taskToV03(r.payload.value);
    case "message":
      return messageToV03(r.payload.value);
    default:
      throw new Error("the upstream SendMessageResponse carried neither a task nor a message");
  }
}

export function streamResponseToV03(r: StreamResponse): JsonObject {
  switch (r.payload.case) {
    case "task":
      return taskToV03(r.payload.value);
    case "message":
      return messageToV03(r.payload.value);
    case "statusUpdate":
      return statusUpdateToV03(r.payload.value);
    case "artifactUpdate":
      return artifactUpdateToV03(r.payload.value);
    default:
      throw new Error("the upstream StreamResponse carried no payload");
  }
}

export function pushConfigToV03(c: TaskPushNotificationConfig): JsonObject {
  const config: JsonObject = { url: c.url };
  withOptional(config, "id", c.id);
  withOptional(config, "token", c.token);
  if (c.authentication) {
    const auth: JsonObject = { schemes: c.authentication.scheme ? [c.authentication.scheme] : [] };
    withOptional(auth, "credentials", c.authentication.credentials);
    config.authentication = auth;
  }
  return { taskId: c.taskId, pushNotificationConfig: config };
}

export function pushConfigListToV03(r: ListTaskPushNotificationConfigsResponse): JsonValue {
  return r.configs.map(pushConfigToV03);
}

function securitySchemeToV03(s: SecurityScheme): JsonObject {
  const v = s.scheme;
  switch (v.case) {
    case "apiKeySecurityScheme":
      return withOptional(
        { type: "apiKey", name: v.value.name, in: v.value.location },
        "description",
        v.value.description,
      );
    case "httpAuthSecurityScheme": {
      const out: JsonObject = { type: "http", scheme: v.value.scheme };
      withOptional(out, "bearerFormat", v.value.bearerFormat);
      return withOptional(out, "description", v.value.description);
    }
    case "oauth2SecurityScheme": {
      const out: JsonObject = { type: "oauth2", flows: v.value.flows ? toJson(OAuthFlowsSchema, v.value.flows) : {} };
      withOptional(out, "oauth2MetadataUrl", v.value.oauth2MetadataUrl);
      return withOptional(out, "description", v.value.description);
    }
    case "openIdConnectSecurityScheme":
      return withOptional(
        { type: "openIdConnect", openIdConnectUrl: v.value.openIdConnectUrl },
        "description",
        v.value.description,
      );
    case "mtlsSecurityScheme":
      return withOptional({ type: "mutualTLS" }, "description", v.value.description);
    default:
      return { type: "http", scheme: "bearer" };
  }
}

function securityToV03(requirements: SecurityRequirement[]): JsonValue {
  return requirements.map((r) => Object.fromEntries(Object.entries(r.schemes).map(([k, v]) => [k, v.list])));
}

/**
 * The 0.3 card: one primary `url` (the 0.3 JSON-RPC endpoint) and the other
 * interfaces as `additionalInterfaces`, as 0.3 clients expect.
 */
export function agentCardToV03(card: AgentCard): JsonObject {
  const jsonRpc =
    card.supportedInterfaces.find((i) => i.protocolBinding === "JSONRPC" && i.protocolVersion.startsWith("0.3")) ??
    card.supportedInterfaces.find((i) => i.protocolBinding === "JSONRPC") ??
    card.supportedInterfaces[0];
  const seen = new Set<string>();
  const additionalInterfaces: JsonObject[] = [];
  for (const i of card.supportedInterfaces) {
    const key = `${i.protocolBinding} ${i.url}`;
    if (seen.has(key)) continue;
    seen.add(key);
    additionalInterfaces.push({ url: i.url, transport: i.protocolBinding });
  }
  const capabilities: JsonObject = {
    streaming: card.capabilities?.streaming ?? false,
    pushNotifications: card.capabilities?.pushNotifications ?? false,
    stateTransitionHistory: false,
  };
  const extensions = (card.capabilities?.extensions ?? []).map((e) =>
    withOptional(withOptional({ uri: e.uri, required: e.required }, "description", e.description), "params", e.params),
  );
  if (extensions.length > 0) capabilities.extensions = extensions;
  const out: JsonObject = {
    protocolVersion: "0.3.0",
    name: card.name,
    description: card.description,
    url: jsonRpc?.url ?? "",
    preferredTransport: jsonRpc?.protocolBinding ?? "JSONRPC",
    additionalInterfaces,
    version: card.version,
    capabilities,
    securitySchemes: Object.fromEntries(
      Object.entries(card.securitySchemes).map(([name, s]) => [name, securitySchemeToV03(s)]),
    ),
    defaultInputModes: card.defaultInputModes,
    defaultOutputModes: card.defaultOutputModes,
    skills: card.skills.map((s) => {
      const skill: JsonObject = { id: s.id, name: s.name, description: s.description, tags: s.tags };
      withOptional(skill, "examples", s.examples);
      withOptional(skill, "inputModes", s.inputModes);
      withOptional(skill, "outputModes", s.outputModes);
      if (s.securityRequirements.length > 0) skill.security = securityToV03(s.securityRequirements);
      return skill;
    }),
    supportsAuthenticatedExtendedCard: card.capabilities?.extendedAgentCard ?? false,
  };
  if (card.securityRequirements.length > 0) out.security = securityToV03(card.securityRequirements);
  if (card.provider) out.provider = { url: card.provider.url, organization: card.provider.organization };
  withOptional(out, "documentationUrl", card.documentationUrl);
  withOptional(out, "iconUrl", card.iconUrl);
  return out;
}

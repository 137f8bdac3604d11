/** The 1.0 answers of the upstream as the A2A 0.3 JSON a 0.3 client parses. */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type Artifact,
  endsTurn,
  type ListTaskPushNotificationConfigsResponse,
  type Message,
  type Part,
  Role,
  type SendMessageResponse,
  type StreamResponse,
  type Task,
  type TaskArtifactUpdateEvent,
  type TaskPushNotificationConfig,
  TaskState,
  type TaskStatus,
  type TaskStatusUpdateEvent,
} from "@parley/proto";
import { dataPartCompatFlag } from "./params.js";

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

/** Sets `key` unless the value is absent, empty or an empty list: 0.3 leaves such fields out. */
export function withOptional(target: JsonObject, key: string, value: JsonValue | undefined): JsonObject {
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

/** A task event's common fields (kind, taskId, contextId, then `fields`, then metadata) in 0.3 form. */
function taskEventToV03(kind: string, e: TaskStatusUpdateEvent | TaskArtifactUpdateEvent, fields: JsonObject) {
  const out: JsonObject = { kind, taskId: e.taskId, contextId: e.contextId, ...fields };
  withOptional(out, "metadata", e.metadata);
  return out;
}

function statusUpdateToV03(e: TaskStatusUpdateEvent): JsonObject {
  return taskEventToV03("status-update", e, {
    status: statusToV03(e.status),
    // A 0.3 stream is over once the turn ends: terminal states and the interrupted ones Parley closes streams on.
    final: endsTurn(e.status?.state ?? TaskState.UNSPECIFIED),
  });
}

function artifactUpdateToV03(e: TaskArtifactUpdateEvent): JsonObject {
  return taskEventToV03("artifact-update", e, {
    artifact: e.artifact ? artifactToV03(e.artifact) : { artifactId: "", parts: [] },
    append: e.append,
    lastChunk: e.lastChunk,
  });
}

/** A send's or a stream's payload in 0.3 form, told apart by `kind`; undefined for an empty payload. */
function payloadToV03(p: SendMessageResponse["payload"] | StreamResponse["payload"]): JsonObject | undefined {
  switch (p.case) {
    case "task":
      return taskToV03(p.value);
    case "message":
      return messageToV03(p.value);
    case "statusUpdate":
      return statusUpdateToV03(p.value);
    case "artifactUpdate":
      return artifactUpdateToV03(p.value);
    default:
      return undefined;
  }
}

/** A 0.3 `message/send` result is the bare Task or Message. */
export function sendResponseToV03(r: SendMessageResponse): JsonObject {
  const out = payloadToV03(r.payload);
  if (!out) throw new Error("the upstream SendMessageResponse carried neither a task nor a message");
  return out;
}

export function streamResponseToV03(r: StreamResponse): JsonObject {
  const out = payloadToV03(r.payload);
  if (!out) throw new Error("the upstream StreamResponse carried no payload");
  return out;
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

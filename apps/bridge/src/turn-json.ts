// ProtoJSON of what a turn answers with (a SendMessage reply, a stream event), written directly for its shapes.
import type { DescEnum, DescMessage, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import {
  type Message as A2AMessage,
  type Artifact,
  ArtifactSchema,
  checkFieldLayouts,
  MessageSchema,
  type Part,
  PartSchema,
  RoleSchema,
  type SendMessageResponse,
  SendMessageResponseSchema,
  type StreamResponse,
  StreamResponseSchema,
  type Task,
  type TaskArtifactUpdateEvent,
  TaskArtifactUpdateEventSchema,
  TaskSchema,
  TaskStateSchema,
  type TaskStatus,
  TaskStatusSchema,
  type TaskStatusUpdateEvent,
  TaskStatusUpdateEventSchema,
} from "@parley/proto";
import { isPlainJsonObject } from "./plain-json.js";

/*
 * What toJson gives (default options: JSON names, fields in number order, defaults left out, enums by name), for
 * the shapes the engine answers with: tasks, messages, statuses, artifacts and their events, of text and URL
 * parts, with Struct metadata. Anything else (raw or data parts, a timestamp outside toJson's range, an enum
 * value the schema does not name, metadata that is not plain JSON) gets undefined, and the caller uses toJson.
 * toJson walks every field through reflection, costly even for a one-artifact task reply, and a stream renders
 * every event. turn-json.spec compares the two on every shape.
 *
 * The field numbers and JSON names these functions write, checked against the generated schemas at load: a
 * proto that adds, renames or renumbers a field stops the bridge at its start (and every test), instead of
 * answering without it.
 */
checkFieldLayouts("turn-json", "jsonName", [
  [SendMessageResponseSchema, "task:1 message:2"],
  [StreamResponseSchema, "task:1 message:2 statusUpdate:3 artifactUpdate:4"],
  [TaskSchema, "id:1 contextId:2 status:3 artifacts:4 history:5 metadata:6"],
  [TaskStatusSchema, "state:1 message:2 timestamp:3"],
  [MessageSchema, "messageId:1 contextId:2 taskId:3 role:4 parts:5 metadata:6 extensions:7 referenceTaskIds:8"],
  [PartSchema, "text:1 raw:2 url:3 data:4 metadata:5 filename:6 mediaType:7"],
  [ArtifactSchema, "artifactId:1 name:2 description:3 parts:4 metadata:5 extensions:6"],
  [TaskStatusUpdateEventSchema, "taskId:1 contextId:2 status:3 metadata:4"],
  [TaskArtifactUpdateEventSchema, "taskId:1 contextId:2 artifact:3 append:4 lastChunk:5 metadata:6"],
]);

type Json = { [key: string]: JsonValue };

const enumNames = (desc: DescEnum): ReadonlyMap<number, string> => new Map(desc.values.map((v) => [v.number, v.name]));
const taskStates = enumNames(TaskStateSchema);
const roles = enumNames(RoleSchema);

/** Thrown inside the walk when a value is not of the shapes above; turnJson answers undefined. */
const notThisShape = Symbol("not this shape");

function fail(): never {
  throw notThisShape;
}

/** The JSON of `message` of type `desc` as toJson writes it, or undefined when not of the shapes above. */
export function turnJson(desc: DescMessage, message: Message): JsonValue | undefined {
  try {
    if (desc.typeName === SendMessageResponseSchema.typeName) return sendResponse(message as SendMessageResponse);
    if (desc.typeName === StreamResponseSchema.typeName) return streamResponse(message as StreamResponse);
    return undefined;
  } catch (error) {
    if (error === notThisShape) return undefined;
    throw error;
  }
}

function sendResponse(response: SendMessageResponse): Json {
  const { payload } = response;
  if (payload.case === "task") return { task: task(payload.value) };
  if (payload.case === "message") return { message: message(payload.value) };
  return {};
}

function streamResponse(response: StreamResponse): Json {
  const { payload } = response;
  switch (payload.case) {
    case "task":
      return { task: task(payload.value) };
    case "message":
      return { message: message(payload.value) };
    case "statusUpdate":
      return { statusUpdate: statusUpdate(payload.value) };
    case "artifactUpdate":
      return { artifactUpdate: artifactUpdate(payload.value) };
    default:
      return {};
  }
}

function task(t: Task): Json {
  const json: Json = {};
  if (t.id !== "") json.id = t.id;
  if (t.contextId !== "") json.contextId = t.contextId;
  if (t.status !== undefined) json.status = status(t.status);
  if (t.artifacts.length > 0) json.artifacts = t.artifacts.map(artifact);
  if (t.history.length > 0) json.history = t.history.map(message);
  if (t.metadata !== undefined) json.metadata = struct(t.metadata);
  return json;
}

function status(s: TaskStatus): Json {
  const json: Json = {};
  if (s.state !== 0) json.state = taskStates.get(s.state) ?? fail();
  if (s.message !== undefined) json.message = message(s.message);
  if (s.timestamp !== undefined) json.timestamp = timestamp(s.timestamp);
  return json;
}

function message(m: A2AMessage): Json {
  const json: Json = {};
  if (m.messageId !== "") json.messageId = m.messageId;
  if (m.contextId !== "") json.contextId = m.contextId;
  if (m.taskId !== "") json.taskId = m.taskId;
  if (m.role !== 0) json.role = roles.get(m.role) ?? fail();
  if (m.parts.length > 0) json.parts = m.parts.map(part);
  if (m.metadata !== undefined) json.metadata = struct(m.metadata);
  if (m.extensions.length > 0) json.extensions = m.extensions.slice();
  if (m.referenceTaskIds.length > 0) json.referenceTaskIds = m.referenceTaskIds.slice();
  return json;
}

function part(p: Part): Json {
  const json: Json = {};
  // A set oneof member is written even when it holds its default (an empty text).
  if (p.content.case === "text") json.text = p.content.value;
  else if (p.content.case === "url") json.url = p.content.value;
  else if (p.content.case !== undefined) fail();
  if (p.metadata !== undefined) json.metadata = struct(p.metadata);
  if (p.filename !== "") json.filename = p.filename;
  if (p.mediaType !== "") json.mediaType = p.mediaType;
  return json;
}

function artifact(a: Artifact): Json {
  const json: Json = {};
  if (a.artifactId !== "") json.artifactId = a.artifactId;
  if (a.name !== "") json.name = a.name;
  if (a.description !== "") json.description = a.description;
  if (a.parts.length > 0) json.parts = a.parts.map(part);
  if (a.metadata !== undefined) json.metadata = struct(a.metadata);
  if (a.extensions.length > 0) json.extensions = a.extensions.slice();
  return json;
}

function statusUpdate(u: TaskStatusUpdateEvent): Json {
  const json: Json = {};
  if (u.taskId !== "") json.taskId = u.taskId;
  if (u.contextId !== "") json.contextId = u.contextId;
  if (u.status !== undefined) json.status = status(u.status);
  if (u.metadata !== undefined) json.metadata = struct(u.metadata);
  return json;
}

function artifactUpdate(u: TaskArtifactUpdateEvent): Json {
  const json: Json = {};
  if (u.taskId !== "") json.taskId = u.taskId;
  if (u.contextId !== "") json.contextId = u.contextId;
  if (u.artifact !== undefined) json.artifact = artifact(u.artifact);
  if (u.append) json.append = true;
  if (u.lastChunk) json.lastChunk = true;
  if (u.metadata !== undefined) json.metadata = struct(u.metadata);
  return json;
}

const MIN_TIME_MS = Date.parse("0001-01-01T00:00:00Z");
const MAX_TIME_MS = Date.parse("9999-12-31T23:59:59Z");

/** RFC 3339 in UTC, with 0, 3, 6 or 9 digits of fraction as toJson writes it; its range, or undefined. */
function timestamp(t: Timestamp): string {
  const ms = Number(t.seconds) * 1000;
  if (!(ms >= MIN_TIME_MS && ms <= MAX_TIME_MS) || !(t.nanos >= 0 && t.nanos <= 999_999_999)) fail();
  let z = "Z";
  if (t.nanos > 0) {
    const digits = (t.nanos + 1_000_000_000).toString().substring(1);
    if (digits.endsWith("000000")) z = `.${digits.substring(0, 3)}Z`;
    else if (digits.endsWith("000")) z = `.${digits.substring(0, 6)}Z`;
    else z = `.${digits}Z`;
  }
  return new Date(ms).toISOString().replace(".000Z", z);
}

/**
 * A Struct field's JSON: its JsonObject itself (never changed by the caller: the JSON goes to JSON.stringify),
 * once it holds only plain JSON (isPlainJsonObject: toJson throws on a number that is not finite, and its copy
 * does not keep a `__proto__` key as a key).
 */
function struct(object: JsonObject): JsonObject {
  return isPlainJsonObject(object) ? object : fail();
}

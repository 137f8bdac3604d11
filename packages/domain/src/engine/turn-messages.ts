// The protobuf messages every turn makes (its statuses and their times, the agent's reply, text parts and
// artifacts, the stream events), written as object literals of the generated types.
import { clone, type JsonObject, protoInt64 } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import {
  type Artifact,
  type Message,
  type Part,
  PartSchema,
  type Role,
  type StreamResponse,
  type Task,
  type TaskArtifactUpdateEvent,
  type TaskState,
  type TaskStatus,
  type TaskStatusUpdateEvent,
} from "@parley/proto";

/*
 * Why literals and not create(): create() walks the schema for every field it sets and for every nested init
 * object (a status event is three messages), and a one-artifact task reply makes about a dozen of them. A protobuf-es message is a plain object with its
 * $typeName, and the generated types list every field, so the compiler rejects a literal that misses one when
 * the proto changes; turn-messages.spec checks each builder against create() (equals and toBinary). Every
 * builder adds its fields in create()'s order (the fields of a zero message in the schema's order, then the
 * message fields it was given), so both make objects of one shape for V8, and leaves an unset message field out.
 */

/** The current time, as timestampNow() makes it. */
export function timestampNow(): Timestamp {
  const ms = Date.now();
  const seconds = Math.floor(ms / 1000);
  return {
    $typeName: "google.protobuf.Timestamp",
    seconds: protoInt64.parse(seconds),
    nanos: (ms - seconds * 1000) * 1e6,
  };
}

export function taskStatus(state: TaskState, timestamp: Timestamp, message?: Message): TaskStatus {
  return message === undefined
    ? { $typeName: "lf.a2a.v1.TaskStatus", state, timestamp }
    : { $typeName: "lf.a2a.v1.TaskStatus", state, message, timestamp };
}

export function textPart(text: string): Part {
  return { $typeName: "lf.a2a.v1.Part", content: { case: "text", value: text }, filename: "", mediaType: "" };
}

/** A copy of `part` that shares nothing with it (a plain text part without reflection). */
export function partCopy(part: Part): Part {
  const { content } = part;
  return content.case === "text" &&
    part.metadata === undefined &&
    part.filename === "" &&
    part.mediaType === "" &&
    (part.$unknown === undefined || part.$unknown.length === 0)
    ? textPart(content.value)
    : clone(PartSchema, part);
}

/** A message of `parts` (not copied), with no metadata, extensions or referenced tasks. */
export function partsMessage(messageId: string, contextId: string, taskId: string, role: Role, parts: Part[]): Message {
  return {
    $typeName: "lf.a2a.v1.Message",
    messageId,
    contextId,
    taskId,
    role,
    parts,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** An artifact of `parts` (not copied), with no description, metadata or extensions. */
export function partsArtifact(artifactId: string, name: string, parts: Part[]): Artifact {
  return { $typeName: "lf.a2a.v1.Artifact", artifactId, name, description: "", parts, extensions: [] };
}

/** A task with nothing in it yet but its ids. */
export function emptyTask(id: string, contextId: string): Task {
  return { $typeName: "lf.a2a.v1.Task", id, contextId, artifacts: [], history: [] };
}

export function statusUpdate(
  taskId: string,
  contextId: string,
  status: TaskStatus | undefined,
  metadata?: JsonObject,
): TaskStatusUpdateEvent {
  const update: TaskStatusUpdateEvent = { $typeName: "lf.a2a.v1.TaskStatusUpdateEvent", taskId, contextId };
  if (status !== undefined) update.status = status;
  if (metadata !== undefined) update.metadata = metadata;
  return update;
}

export function artifactUpdate(
  taskId: string,
  contextId: string,
  artifact: Artifact,
  append: boolean,
  lastChunk: boolean,
): TaskArtifactUpdateEvent {
  return { $typeName: "lf.a2a.v1.TaskArtifactUpdateEvent", taskId, contextId, artifact, append, lastChunk };
}

/** A stream event of `payload` (a message of its case's type). */
export function streamResponse(payload: StreamResponse["payload"]): StreamResponse {
  return { $typeName: "lf.a2a.v1.StreamResponse", payload };
}

import { toBinary } from "@bufbuild/protobuf";
import type { Struct, Value } from "@bufbuild/protobuf/wkt";
import { type Message, MessageSchema, Role } from "@parley/proto";
import { idLimits } from "@parley/store";
import { createTypedError, invalidArgument } from "../errors.js";
import type { MessageLimits } from "./engine-config.js";

/** Checks an inbound message against the protocol's rules and the configured limits; throws what was wrong. */
export function validateMessage(message: Message, limits: MessageLimits): void {
  if (message.messageId === "") throw invalidArgument("message.messageId is required");
  // Role is REQUIRED (sections 3.3.2, 5.7) and an open enum: binary and ProtoJSON callers can send any number.
  const role = message.role;
  if (role === Role.UNSPECIFIED) {
    throw invalidArgument("message.role is required: send ROLE_USER (1) or ROLE_AGENT (2)");
  }
  if (role !== Role.USER && role !== Role.AGENT) {
    throw invalidArgument(`message.role ${role} is not a role; send ROLE_USER (1) or ROLE_AGENT (2)`);
  }
  if (message.parts.length === 0) throw invalidArgument("message.parts must hold at least one part");
  if (message.parts.length > limits.maxPartsPerMessage) {
    throw createTypedError(
      "LIMIT_EXCEEDED",
      `message has ${message.parts.length} parts; the limit is ${limits.maxPartsPerMessage}`,
      { limit: "maxPartsPerMessage" },
    );
  }
  const parts = message.parts;
  for (let i = 0; i < parts.length; i++) {
    const content = parts[i]!.content;
    if (content.case === undefined)
      throw invalidArgument(`message.parts[${i}] has no content (text, raw, url or data)`);
    if (content.case === "data") requireJsonValue(content.value, `message.parts[${i}].data`);
    else if (content.case === "text" && content.value.length > limits.maxTextChars) {
      throw createTypedError(
        "LIMIT_EXCEEDED",
        `message.parts[${i}].text has ${content.value.length} characters; the limit is ${limits.maxTextChars}`,
        { limit: "maxTextChars" },
      );
    }
  }
  checkIdBytes("messageId", message.messageId);
  checkIdBytes("contextId", message.contextId);
  checkIdBytes("taskId", message.taskId);
}

function checkIdBytes(name: "messageId" | "contextId" | "taskId", value: string): void {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most ids are far below their limit and need no count.
  if (value.length * 3 <= idLimits[name]) return;
  const bytes = Buffer.byteLength(value);
  if (bytes > idLimits[name])
    throw invalidArgument(`message.${name} is ${bytes} bytes; the limit is ${idLimits[name]}`);
}

/**
 * A google.protobuf.Value with no kind set has no JSON form (binary and in-process callers can send one in a data
 * part), so a stored message holding it could never be read back over JSON-RPC or exported: it is refused where it
 * arrives. Metadata needs no check: protobuf-es holds a Struct field as a plain JSON object.
 */
function requireJsonValue(value: Value, path: string): void {
  const kind = value.kind;
  if (kind.case === undefined) throw invalidArgument(`${path} is a google.protobuf.Value with no kind set`);
  if (kind.case === "structValue") requireJsonStruct(kind.value, path);
  else if (kind.case === "listValue") {
    for (const [i, item] of kind.value.values.entries()) requireJsonValue(item, `${path}[${i}]`);
  }
}

function requireJsonStruct(struct: Struct, path: string): void {
  for (const [key, value] of Object.entries(struct.fields)) requireJsonValue(value, `${path}.${key}`);
}

/**
 * The inbound message as its task's history holds it: the caller's message with the ids it belongs to filled
 * in. A copy of the message object and of its lists, not of the parts, metadata and other values they hold
 * (protobuf's clone copies all of them, at a cost on every send): nothing in Parley edits a part or metadata
 * of a message it was sent, and the caller's own object keeps its ids.
 */
export function storedInbound(message: Message, contextId: string, taskId: string): Message {
  return {
    ...message,
    contextId,
    taskId,
    role: message.role === Role.UNSPECIFIED ? Role.USER : message.role,
    parts: message.parts.slice(),
    referenceTaskIds: message.referenceTaskIds.slice(),
    extensions: message.extensions.slice(),
  };
}

/** The inbound message's bytes as they will be stored. */
export function encodeInbound(message: Message): Uint8Array {
  try {
    return toBinary(MessageSchema, message);
  } catch (error) {
    // A string with a lone surrogate (JSON and in-process callers can carry one; protobuf cannot store it).
    throw invalidArgument(`message cannot be stored: ${error instanceof Error ? error.message : String(error)}`);
  }
}

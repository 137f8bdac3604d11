// SendMessage params of the shape most sends have, read straight into the request message.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { type Message, type Part, RoleSchema, type SendMessageRequest, SendMessageRequestSchema } from "@parley/proto";
import { isPlainJsonObject, isPlainObject, loneSurrogate } from "./plain-json.js";

/*
 * What fromJson(SendMessageRequestSchema, params) makes, for params of the common shape: a message of text and
 * URL parts, its ids, its role by name, Struct metadata, extensions and referenced tasks, and the request's tenant
 * and metadata, every key under its JSON name. Anything else (a configuration, a raw or data part, a proto field
 * name, a key this version does not know, a role by number, a null, a wrong type, a lone surrogate) gets
 * undefined and goes to withoutUnknownFields and fromJson, which also name what is wrong. Those two walk the
 * schema by reflection, most of the bridge's parse of a send. send-params.spec compares both on every shape.
 * Each message is built with its fields in create()'s order (one shape for V8).
 */

const roles: ReadonlyMap<string, number> = new Map(RoleSchema.values.map((v) => [v.name, v.number]));

/** fromJson refuses a string with a lone surrogate (it has no UTF-8). */
const isText = (value: unknown): value is string => typeof value === "string" && !loneSurrogate.test(value);

/** The request fromJson would make of `params`, or undefined when they are not of the common shape. */
export function sendRequestOf(params: unknown): SendMessageRequest | undefined {
  if (!isPlainObject(params)) return undefined;
  const request: SendMessageRequest = { $typeName: SendMessageRequestSchema.typeName, tenant: "" };
  let message: Message | undefined;
  let metadata: JsonObject | undefined;
  for (const key in params) {
    const value = params[key];
    if (key === "message") message = messageOf(value);
    else if (key === "metadata") metadata = structOf(value);
    else if (key === "tenant" && isText(value)) request.tenant = value;
    else return undefined;
    if ((key === "message" && !message) || (key === "metadata" && !metadata)) return undefined;
  }
  if (message) request.message = message;
  if (metadata) request.metadata = metadata;
  return request;
}

function messageOf(value: JsonValue): Message | undefined {
  if (!isPlainObject(value)) return undefined;
  const message: Message = {
    $typeName: "lf.a2a.v1.Message",
    messageId: "",
    contextId: "",
    taskId: "",
    role: 0,
    parts: [],
    extensions: [],
    referenceTaskIds: [],
  };
  for (const key in value) {
    const field = value[key];
    switch (key) {
      case "messageId":
      case "contextId":
      case "taskId":
        if (!isText(field)) return undefined;
        message[key] = field;
        break;
      case "role": {
        const role = typeof field === "string" ? roles.get(field) : undefined;
        if (role === undefined) return undefined;
        message.role = role;
        break;
      }
      case "parts": {
        if (!Array.isArray(field)) return undefined;
        for (const item of field) {
          const part = partOf(item);
          if (!part) return undefined;
          message.parts.push(part);
        }
        break;
      }
      case "metadata": {
        const metadata = structOf(field);
        if (!metadata) return undefined;
        message.metadata = metadata;
        break;
      }
      case "extensions":
      case "referenceTaskIds": {
        if (!Array.isArray(field) || !field.every(isText)) return undefined;
        message[key] = field.slice() as string[];
        break;
      }
      default:
        return undefined;
    }
  }
  return message;
}

function partOf(value: JsonValue): Part | undefined {
  if (!isPlainObject(value)) return undefined;
  let content: Part["content"] | undefined;
  let metadata: JsonObject | undefined;
  let filename = "";
  let mediaType = "";
  for (const key in value) {
    const field = value[key];
    if ((key === "text" || key === "url") && isText(field)) {
      // Two members of the oneof: fromJson refuses it, and says so.
      if (content) return undefined;
      content = { case: key, value: field };
    } else if (key === "metadata") {
      metadata = structOf(field);
      if (!metadata) return undefined;
    } else if (key === "filename" && isText(field)) filename = field;
    else if (key === "mediaType" && isText(field)) mediaType = field;
    else return undefined;
  }
  if (!content) return undefined;
  const part: Part = { $typeName: "lf.a2a.v1.Part", content, filename, mediaType };
  if (metadata) part.metadata = metadata;
  return part;
}

/**
 * A Struct field's value: the parsed JSON object itself (it belongs to this request alone), once it holds only
 * plain JSON (isPlainJsonObject; anything else, a `__proto__` key say, goes to fromJson).
 */
function structOf(value: JsonValue): JsonObject | undefined {
  return isPlainJsonObject(value) ? value : undefined;
}

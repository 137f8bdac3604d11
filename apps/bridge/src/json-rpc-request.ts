import type { IncomingMessage } from "node:http";
import { parleyErrorDomain } from "@parley/proto";
import { readBodyOf } from "@parley/serving";
import { z } from "zod";
import { errorInfoData, JsonRpcCode, JsonRpcError } from "./json-rpc-error.js";
import { describeType } from "./methods.js";
import { loneSurrogate } from "./plain-json.js";

export type JsonRpcId = string | number | null;

export interface JsonRpcEnvelope {
  readonly id: JsonRpcId;
  readonly method: string;
  readonly params: unknown;
  /** No `id` member: a notification, which JSON-RPC 2.0 processes without any reply. */
  readonly notification: boolean;
}

/**
 * The body, up to `maxBytes`; a longer one is refused with 413. The bridge's
 * port reads every body before routing (@parley/server's createBodyReader,
 * in bridge.ts), and throws away the rest of a long one, so the 413 reaches
 * the client on a connection that can stay open.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Buffer {
  const read = readBodyOf(req);
  if (!read) throw new Error("the JSON-RPC handler runs behind the bridge's body reader (createBodyReader)");
  if (!read.tooLarge && read.bytes.length <= maxBytes) return read.bytes;
  throw tooLarge(maxBytes, declaredLength(req) ?? read.receivedBytes);
}

function declaredLength(req: IncomingMessage): number | undefined {
  const declared = Number(req.headers["content-length"]);
  return req.headers["content-length"] !== undefined && Number.isFinite(declared) ? declared : undefined;
}

/** The 413, naming the limit (the body reader has read, or cut, the rest of the body). */
function tooLarge(maxBytes: number, got: number): JsonRpcError {
  return new JsonRpcError(
    JsonRpcCode.InvalidRequest,
    `request body too large: ${got} bytes, the limit is ${maxBytes} bytes per request body`,
    {
      httpStatus: 413,
      data: errorInfoData("LIMIT_EXCEEDED", parleyErrorDomain, { limit: "maxBodyBytes", max: String(maxBytes) }),
    },
  );
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Decodes and parses the body. Nesting is measured on the raw text first so a
 * hostile document is refused before JSON.parse builds it.
 */
export function parseJsonBody(body: Buffer, maxDepth: number): unknown {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new JsonRpcError(JsonRpcCode.ParseError, "parse error: the request body is not valid UTF-8");
  }
  const depth = jsonDepth(text);
  if (depth > maxDepth) {
    throw new JsonRpcError(
      JsonRpcCode.InvalidRequest,
      `invalid request: JSON nesting depth ${depth} exceeds the limit of ${maxDepth}`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new JsonRpcError(JsonRpcCode.ParseError, `parse error: ${(error as Error).message}`);
  }
  // JSON's \uXXXX escapes can spell half a surrogate pair, which is not Unicode: protobuf cannot encode it
  // as UTF-8 later, so it is refused here, like invalid UTF-8, rather than failing deep inside a call.
  // Text decoded from valid UTF-8 holds no surrogate of its own, so only an escape of one (\uD800-\uDFFF)
  // can bring one in: without such an escape in the body the walk over every key and string is skipped.
  const broken = surrogateEscape.test(text) ? loneSurrogatePath(value, "") : undefined;
  if (broken !== undefined) {
    throw new JsonRpcError(
      JsonRpcCode.ParseError,
      `parse error: ${broken || "the body"} contains an unpaired UTF-16 surrogate escape; strings must be valid Unicode`,
    );
  }
  return value;
}

/** A \u escape of a UTF-16 surrogate (an escaped backslash before "uD8.." matches too: the walk then finds nothing). */
const surrogateEscape = /\\u[dD][89a-fA-F]/;

/** The path of the first string (key or value) holding an unpaired surrogate, "" for the root itself. */
function loneSurrogatePath(value: unknown, path: string): string | undefined {
  if (typeof value === "string") return loneSurrogate.test(value) ? path : undefined;
  if (value === null || typeof value !== "object") return undefined;
  for (const [key, child] of Object.entries(value)) {
    const at = path === "" ? key : `${path}.${key}`;
    if (loneSurrogate.test(key)) return at;
    const found = loneSurrogatePath(child, at);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** The deepest bracket nesting outside string literals. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) max = depth;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return max;
}

const envelopeSchema = z.object({
  jsonrpc: z.literal("2.0", { error: 'jsonrpc must be exactly "2.0"' }),
  method: z.string({ error: "method must be a string" }).min(1, { error: "method must not be empty" }),
  id: z.union([z.string(), z.number(), z.null()], { error: "id must be a string, a number or null" }),
  params: z.unknown().optional(),
});

/** The id to answer with even when the rest of the envelope is wrong, as JSON-RPC asks. */
export function salvageId(value: unknown): JsonRpcId {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const id = (value as Record<string, unknown>).id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/** A well-formed envelope, checked by hand: the common case, without building zod's result objects. */
function wellFormed(value: Record<string, unknown>): JsonRpcEnvelope | undefined {
  const { jsonrpc, method, id, params } = value;
  if (jsonrpc !== "2.0" || typeof method !== "string" || method === "") return undefined;
  if (id !== null && typeof id !== "string" && typeof id !== "number") return undefined;
  return { id, method, params, notification: false };
}

export function parseEnvelope(value: unknown): JsonRpcEnvelope {
  if (Array.isArray(value)) {
    throw new JsonRpcError(JsonRpcCode.InvalidRequest, "invalid request: batch requests are not supported");
  }
  if (value === null || typeof value !== "object") {
    throw new JsonRpcError(
      JsonRpcCode.InvalidRequest,
      `invalid request: the body must be a JSON-RPC request object, got ${describeType(value)}`,
    );
  }
  // A request without an id member is a notification: processed, never answered (JSON-RPC 2.0 section 4.1).
  const notification = !("id" in value);
  const record = notification
    ? { ...(value as Record<string, unknown>), id: null }
    : (value as Record<string, unknown>);
  const envelope = wellFormed(record);
  if (envelope) return notification ? { ...envelope, notification } : envelope;
  // Something is wrong: zod names it.
  const parsed = envelopeSchema.safeParse(record);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new JsonRpcError(JsonRpcCode.InvalidRequest, `invalid request: ${issue?.message ?? "malformed envelope"}`);
  }
  return { id: parsed.data.id, method: parsed.data.method, params: parsed.data.params, notification };
}

import { type DescField, type DescMessage, type JsonValue, ScalarType } from "@bufbuild/protobuf";
import { JsonRpcCode, JsonRpcError } from "../json-rpc-error.js";
import { parseJsonBody } from "../json-rpc-request.js";
import { describeType } from "../methods.js";
import type { RestRoute } from "./rest-routes.js";

/** Query parameters that are service parameters (section 3.2.6), not request fields. */
const serviceParameters = new Set(["a2a-version", "a2a-extensions"]);

function invalid(method: string, detail: string): JsonRpcError {
  return new JsonRpcError(JsonRpcCode.InvalidParams, `invalid request for ${method}: ${detail}`);
}

/**
 * The ProtoJSON request of an HTTP+JSON call, before methods.ts decodes it as it decodes JSON-RPC params: the body
 * of a POST (an object, or nothing), or the query of a GET or DELETE (section 11.5: camelCase names, enums by name
 * or by their short lower-case form, booleans as true/false, repeated fields repeated or comma separated), with the
 * fields the path binds (the ids, the tenant) put in. A body or query value that contradicts the path is refused.
 */
export function restRequestJson(
  route: RestRoute,
  input: DescMessage,
  body: Buffer,
  query: URLSearchParams,
  maxDepth: number,
): Record<string, JsonValue> {
  const request = route.body ? bodyObject(route.method, body, maxDepth) : queryObject(route.method, input, query);
  const bound: Record<string, string> = { ...route.pathFields };
  if (route.tenant !== undefined) bound.tenant = route.tenant;
  for (const [name, value] of Object.entries(bound)) {
    const given = request[name];
    if (given !== undefined && given !== value) {
      throw invalid(
        route.method,
        `${name} is ${JSON.stringify(given)} in the request but ${JSON.stringify(value)} in the path`,
      );
    }
    request[name] = value;
  }
  return request;
}

function bodyObject(method: string, body: Buffer, maxDepth: number): Record<string, JsonValue> {
  if (body.length === 0) return {};
  const value = parseJsonBody(body, maxDepth);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalid(method, `the body must be a JSON object (the ProtoJSON request), got ${describeType(value)}`);
  }
  return value as Record<string, JsonValue>;
}

function queryObject(method: string, input: DescMessage, query: URLSearchParams): Record<string, JsonValue> {
  const request: Record<string, JsonValue> = {};
  for (const name of new Set(query.keys())) {
    if (serviceParameters.has(name.toLowerCase())) continue;
    const field = input.fields.find((f) => f.jsonName === name || f.name === name);
    // Parameters this version does not know are ignored, as unknown JSON fields are (methods.ts).
    if (!field) continue;
    const values = query.getAll(name).flatMap((v) => (field.fieldKind === "list" ? v.split(",") : [v]));
    if (field.fieldKind === "list") request[field.jsonName] = values.map((v) => scalarValue(field, v));
    else if (field.fieldKind === "scalar" || field.fieldKind === "enum") {
      if (values.length > 1) throw invalid(method, `query parameter ${name} is given ${values.length} times`);
      request[field.jsonName] = scalarValue(field, values[0]!);
    } else if (field.fieldKind === "message" && field.message.typeName.startsWith("google.protobuf.")) {
      // Well-known types with a string JSON form (Timestamp, Duration) pass as they are.
      request[field.jsonName] = values[0]!;
    } else {
      throw invalid(method, `${name} is an object; it cannot be given as a query parameter`);
    }
  }
  return request;
}

/** A query value as the JSON value fromJson expects; a value that fits nothing is passed on for fromJson to name. */
function scalarValue(field: DescField, value: string): JsonValue {
  const trimmed = value.trim();
  if (field.enum) {
    const upper = trimmed.toUpperCase().replace(/-/g, "_");
    const named = field.enum.values.find((v) => v.name === trimmed || v.name === upper || v.name.endsWith(`_${upper}`));
    return named ? named.name : trimmed;
  }
  const scalar = field.scalar;
  if (scalar === undefined) return trimmed;
  if (scalar === ScalarType.BOOL) return trimmed === "true" ? true : trimmed === "false" ? false : trimmed;
  if (scalar === ScalarType.STRING || scalar === ScalarType.BYTES) return value;
  // Numbers: ProtoJSON takes them as numbers or decimal strings (64-bit ones beyond 2^53 only as strings).
  return /^-?\d+$/.test(trimmed) && Number.isSafeInteger(Number(trimmed)) ? Number(trimmed) : trimmed;
}

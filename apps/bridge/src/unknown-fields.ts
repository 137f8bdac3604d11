import type { DescField, DescMessage, JsonValue } from "@bufbuild/protobuf";

/**
 * A copy of a ProtoJSON value without the keys that `desc` does not define, at
 * every depth. The A2A specification asks implementations to ignore fields they
 * do not recognise, so that a peer one minor version ahead is still served; what
 * is dropped here is never stored or echoed back. Known fields are left exactly
 * as sent, so the strict decode that follows still checks their types, enum
 * names and shapes and reports them by name. Well-known types (Struct, Value,
 * Timestamp, ...) carry their own JSON forms: a Struct's keys are data, not fields.
 */
export function withoutUnknownFields(desc: DescMessage, json: unknown): unknown {
  // The common case, a request of this version: nothing to drop, so no copy is made.
  return hasUnknownFields(desc, json) ? pruned(desc, json) : json;
}

/** Whether a ProtoJSON value has a key that `desc` (at any depth) does not define. */
function hasUnknownFields(desc: DescMessage, json: unknown): boolean {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return false;
  const object = json as Record<string, JsonValue>;
  let known = 0;
  for (const field of desc.fields) {
    const key = field.jsonName in object ? field.jsonName : field.name in object ? field.name : undefined;
    if (key === undefined) continue;
    // A field given under both of its names: the copy keeps one of them, so there is something to drop.
    if (field.jsonName !== field.name && key === field.jsonName && field.name in object) return true;
    known++;
    if (fieldHasUnknown(field, object[key]!)) return true;
  }
  return Object.keys(object).length !== known;
}

function fieldHasUnknown(field: DescField, value: JsonValue): boolean {
  switch (field.fieldKind) {
    case "message":
      return nestedHasUnknown(field.message, value);
    case "list":
      return field.listKind === "message" && Array.isArray(value)
        ? value.some((item) => nestedHasUnknown(field.message, item))
        : false;
    case "map":
      if (field.mapKind !== "message" || value === null || typeof value !== "object" || Array.isArray(value)) {
        return false;
      }
      return Object.values(value).some((v) => nestedHasUnknown(field.message, v as JsonValue));
    default:
      return false;
  }
}

function nestedHasUnknown(desc: DescMessage, value: JsonValue): boolean {
  return !desc.file.name.startsWith("google/protobuf/") && hasUnknownFields(desc, value);
}

function pruned(desc: DescMessage, json: unknown): unknown {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return json;
  const object = json as Record<string, JsonValue>;
  const known: Record<string, JsonValue> = {};
  for (const field of desc.fields) {
    const key = field.jsonName in object ? field.jsonName : field.name in object ? field.name : undefined;
    if (key === undefined) continue;
    known[key] = fieldValue(field, object[key]!);
  }
  return known;
}

function fieldValue(field: DescField, value: JsonValue): JsonValue {
  switch (field.fieldKind) {
    case "message":
      return nested(field.message, value);
    case "list":
      return field.listKind === "message" && Array.isArray(value)
        ? value.map((item) => nested(field.message, item))
        : value;
    case "map":
      if (field.mapKind !== "message" || value === null || typeof value !== "object" || Array.isArray(value)) {
        return value;
      }
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, nested(field.message, v as JsonValue)]));
    default:
      return value;
  }
}

function nested(desc: DescMessage, value: JsonValue): JsonValue {
  if (desc.file.name.startsWith("google/protobuf/")) return value;
  return pruned(desc, value) as JsonValue;
}

import { z } from "zod";
import { defaultConfig, parleyConfigSchema, type SettingMeta, settings } from "./schema.js";

/** What kind of value a setting holds; decides how environment and flag text is read. */
export type SettingKind = "number" | "boolean" | "string" | "list" | "map" | "other";

/** One setting of the schema, found by walking it: the source of the help text, the configuration doc table and the loader. */
export interface SettingInfo {
  /** Dotted path in the config file, e.g. "limits.maxMessageBytes". */
  readonly path: string;
  readonly meta: SettingMeta;
  readonly kind: SettingKind;
  /** The default, or undefined when the setting is unset by default. */
  readonly defaultValue: unknown;
  /** What values are allowed, in words. */
  readonly allowed: string;
}

type AnySchema = z.core.$ZodType;

/** Strips default, prefault and optional wrappers. */
export function unwrap(schema: AnySchema): AnySchema {
  let current = schema;
  for (;;) {
    const def = current._zod.def as { type: string; innerType?: AnySchema };
    if ((def.type === "default" || def.type === "prefault" || def.type === "optional") && def.innerType) {
      current = def.innerType;
    } else return current;
  }
}

function kindOf(schema: AnySchema): SettingKind {
  const type = (schema._zod.def as { type: string }).type;
  if (type === "number" || type === "int") return "number";
  if (type === "boolean") return "boolean";
  if (type === "string" || type === "enum") return "string";
  if (type === "array") return "list";
  if (type === "record") return "map";
  return "other";
}

interface JsonSchemaSlice {
  type?: string;
  minimum?: number;
  maximum?: number;
  enum?: unknown[];
  minLength?: number;
  format?: string;
  items?: { type?: string };
}

/** "What is allowed", derived from the schema's own constraints (via its JSON Schema form). */
function describeAllowed(schema: AnySchema, kind: SettingKind): string {
  const json = z.toJSONSchema(schema as z.ZodType, { unrepresentable: "any" }) as JsonSchemaSlice;
  if (json.enum) return `one of ${json.enum.join(", ")}`;
  if (json.type === "integer") {
    const { minimum: min, maximum: max } = json;
    const isSafeMax = max === undefined || max >= Number.MAX_SAFE_INTEGER;
    if (min !== undefined && !isSafeMax) return `a whole number from ${min} to ${max}`;
    if (min !== undefined) return `a whole number, at least ${min}`;
    return "a whole number";
  }
  if (kind === "boolean") return "true or false (environment: on/off)";
  if (json.format === "uri") return "an http(s) URL";
  if (kind === "list") {
    return json.items?.type === "string" ? "a list of strings (environment: comma-separated)" : "a list";
  }
  if (json.type === "string") return json.minLength ? "a non-empty string" : "a string";
  if (json.type === "number") {
    const { minimum: min, maximum: max } = json;
    return min !== undefined && max !== undefined ? `a number from ${min} to ${max}` : "a number";
  }
  return "see the description";
}

/** What a schema inside a setting allows (an agent's option), in the words of the settings' own "allowed". */
export function allowedOf(schema: AnySchema): string {
  const inner = unwrap(schema);
  return describeAllowed(inner, kindOf(inner));
}

function pathOf(keys: readonly string[]): string {
  return keys.join(".");
}

/** The value at a path of keys (object keys and list indexes), or undefined. */
export function valueAt(root: unknown, keys: readonly (string | number)[]): unknown {
  let current = root;
  for (const key of keys) {
    if (typeof current !== "object" || current === null) return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

function walk(schema: AnySchema, keys: string[], out: SettingInfo[]): void {
  const meta = settings.get(schema as z.ZodType);
  const inner = unwrap(schema);
  if (meta) {
    const kind = kindOf(inner);
    out.push({
      path: pathOf(keys),
      meta,
      kind,
      defaultValue: valueAt(defaultConfig, keys),
      allowed: meta.allowed ?? describeAllowed(inner, kind),
    });
    return;
  }
  const def = inner._zod.def as { type: string; shape?: Record<string, AnySchema> };
  if (def.type === "object" && def.shape) {
    for (const [key, child] of Object.entries(def.shape)) walk(child, [...keys, key], out);
    return;
  }
  if (def.type === "pipe" || def.type === "transform") return;
  throw new Error(`config schema: ${pathOf(keys) || "(root)"} has no setting() description`);
}

function collect(): readonly SettingInfo[] {
  const out: SettingInfo[] = [];
  // superRefine keeps the object schema as it is; walk() reads through to its shape.
  walk(parleyConfigSchema, [], out);
  return out;
}

/** Every setting, in schema order. */
export const settingList: readonly SettingInfo[] = collect();

const byPath = new Map(settingList.map((s) => [s.path, s]));

export function settingAt(path: string): SettingInfo | undefined {
  return byPath.get(path);
}

/**
 * Turns environment or flag text into the setting's type. Text that does not
 * fit is passed on unchanged, so the schema refuses it with the value quoted.
 */
export function fromText(kind: SettingKind, text: string): unknown {
  switch (kind) {
    case "number":
      return /^[+-]?\d+$/.test(text.trim()) ? Number(text) : text;
    case "boolean":
      if (/^(on|true|1|yes)$/i.test(text)) return true;
      if (/^(off|false|0|no)$/i.test(text)) return false;
      return text;
    case "list":
      return text
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    case "map": {
      const map: Record<string, string> = {};
      for (const pair of text.split(",").filter((s) => s.trim() !== "")) {
        const at = pair.indexOf("=");
        if (at <= 0 || at === pair.length - 1) return text;
        map[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
      }
      return map;
    }
    default:
      return text;
  }
}

/** Renders a default for people: "" and absent values say so. */
export function formatDefault(value: unknown): string {
  if (value === undefined) return "unset";
  if (value === "") return '""';
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join(",") || "none";
  return JSON.stringify(value);
}

import { resolve } from "node:path";
import type { z } from "zod";
import { displayPath, issueKeys, type PathKey } from "../options/issue-path.js";
import { type ParleyConfig, parleyConfigSchema, parleySettingsSchema } from "./schema.js";
import { allowedOf, settingAt, unwrap, valueAt } from "./settings.js";
import {
  applyAgentShortcuts,
  ConfigError,
  type ConfigProblem,
  type Env,
  envLayer,
  fileLayer,
  flagLayer,
  type Layer,
  mergeLayers,
  type Program,
} from "./sources.js";

export interface LoadConfigOptions {
  readonly argv?: readonly string[];
  /** Default: process.env. */
  readonly env?: Env;
  /** Which binary's flags to accept; default parley-server. */
  readonly program?: Program;
}

export type LoadedConfig = ParleyConfig & {
  /** --help was given: nothing else was read or checked. */
  readonly help: boolean;
  /** Things the operator should know that do not stop the start (an old flag spelling). */
  readonly notices: readonly string[];
  /** Setting paths given as flags (parley-bridge refuses server settings in remote mode). */
  readonly setByFlag: readonly string[];
};

/**
 * Builds the configuration from the schema's defaults, a JSON file
 * (--config or PARLEY_CONFIG), the environment and flags, later ones winning.
 * Anything the schema does not allow, from any source, throws a ConfigError
 * that lists every problem with its full path, value, source and what is
 * allowed; nothing is dropped or ignored. Each source is checked on its own
 * before they are merged, so a bad value is reported even where a later
 * source overrides it.
 */
export function loadConfig(options: LoadConfigOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const program = options.program ?? "parley-server";
  const flags = flagLayer(options.argv ?? [], program);
  if (flags.help) return { ...parleyConfigSchema.parse({}), help: true, notices: [], setByFlag: [] };

  const file = flags.config ?? (env.PARLEY_CONFIG || undefined);
  const layers = [...(file ? [fileLayer(file)] : []), envLayer(env), flags.layer];
  // Before the merge hides them: a typo in the file is one whether or not the environment overrides it.
  const problems = layers.flatMap(layerProblems);
  const merged = mergeLayers(layers);
  problems.push(...applyAgentShortcuts(merged, env, flags.agent));
  // The merged configuration adds the rules across settings (and what the agent shortcuts set).
  const result = parleyConfigSchema.safeParse(merged.values);
  if (!result.success) problems.push(...result.error.issues.flatMap((issue) => problemsOf(issue, merged)));
  if (problems.length > 0 || !result.success) throw new ConfigError(distinct(problems));
  return {
    ...result.data,
    dataDir: resolve(result.data.dataDir),
    help: false,
    notices: flags.notices,
    setByFlag: [...flags.layer.origins.keys()],
  };
}

/**
 * One source's values against every setting's type and range (the rules across settings need them all).
 * Only the values it gives: what must be there at all (an openai agent's model, which PARLEY_OPENAI_MODEL
 * may give) is checked once the sources are merged.
 */
function layerProblems(layer: Layer): ConfigProblem[] {
  const result = parleySettingsSchema.safeParse(layer.values);
  if (result.success) return [];
  return result.error.issues
    .filter((issue) => valueAt(layer.values, issueKeys(issue)) !== undefined)
    .flatMap((issue) => problemsOf(issue, layer));
}

/** A bad value the merged configuration kept was already reported by its own source's check. */
function distinct(problems: readonly ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = JSON.stringify([p.path, p.source, p.message, p.value]);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function sourceOf(keys: readonly PathKey[], origins: ReadonlyMap<string, string>): string {
  for (let n = keys.length; n > 0; n--) {
    const source = origins.get(keys.slice(0, n).join("."));
    if (source) return source;
  }
  return "default";
}

type AnySchema = z.core.$ZodType;

/** The option of a union that a value is meant for: by its discriminator (an agent's type), else by its kind. */
function branchOf(schema: AnySchema, value: unknown): AnySchema | undefined {
  const def = schema._zod.def as { type: string; options?: AnySchema[]; discriminator?: string };
  if (def.type !== "union" || !def.options) return schema;
  const kind = Array.isArray(value) ? "array" : value === null ? "null" : typeof value;
  const sameKind = def.options.map(unwrap).filter((o) => (o._zod.def as { type: string }).type === kind);
  const tagKey = def.discriminator;
  if (tagKey === undefined) return sameKind[0];
  const tag = (value as Record<string, unknown>)[tagKey];
  return sameKind.find((o) => {
    const field = (o._zod.def as { shape?: Record<string, AnySchema> }).shape?.[tagKey];
    return field !== undefined && (field as z.ZodType).safeParse(tag).success;
  });
}

/** The schema of the value at `keys` of `root` (a setting, or an object or item inside one). */
function schemaAt(keys: readonly PathKey[], root: unknown): AnySchema | undefined {
  let schema: AnySchema | undefined = branchOf(unwrap(parleyConfigSchema), root);
  for (let n = 0; n < keys.length && schema; n++) {
    const def = schema._zod.def as {
      type: string;
      shape?: Record<string, AnySchema>;
      element?: AnySchema;
      valueType?: AnySchema;
    };
    const next = def.type === "array" ? def.element : def.type === "record" ? def.valueType : def.shape?.[keys[n]!];
    schema = next && branchOf(unwrap(next), valueAt(root, keys.slice(0, n + 1)));
  }
  return schema;
}

/** The object keys the schema allows at `keys` (an object inside the config, or an item of a list). */
function allowedKeysAt(keys: readonly PathKey[], root: unknown): string[] {
  const def = schemaAt(keys, root)?._zod.def as { shape?: Record<string, unknown> } | undefined;
  return Object.keys(def?.shape ?? {});
}

/** What is allowed at a path that is no setting of its own (an agent's option), when its schema says more than "a string". */
function allowedInside(keys: readonly PathKey[], root: unknown): string | undefined {
  const schema = schemaAt(keys, root);
  const allowed = schema && allowedOf(schema);
  return allowed === undefined || allowed === "a string" || allowed === "see the description" ? undefined : allowed;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

function problemsOf(issue: z.core.$ZodIssue, layer: Layer): ConfigProblem[] {
  const at = issueKeys(issue);
  if (issue.code === "unrecognized_keys") {
    const known = allowedKeysAt(at, layer.values);
    return issue.keys.map((key) => {
      const keys = [...at, key];
      const near = known.find((k) => k.toLowerCase() === key.toLowerCase() || editDistance(k, key) <= 2);
      return {
        path: displayPath(keys),
        source: sourceOf(keys, layer.origins),
        value: valueAt(layer.values, keys),
        message: `unknown key${near ? ` (did you mean ${JSON.stringify(near)}?)` : ""}`,
        allowed: `the keys ${known.join(", ")}`,
      };
    });
  }
  // A rule's message says what it wants; the type and range of a value inside a setting are the schema's.
  const allowed =
    settingAt(at.join("."))?.allowed ?? (issue.code === "custom" ? undefined : allowedInside(at, layer.values));
  return [
    {
      path: displayPath(at),
      source: sourceOf(at, layer.origins),
      value: valueAt(layer.values, at),
      message: issue.message,
      ...(allowed ? { allowed } : {}),
    },
  ];
}

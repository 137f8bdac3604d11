import { resolve } from "node:path";
import type { z } from "zod";
import { type ParleyConfig, parleyConfigSchema, parleySettingsSchema } from "./schema.js";
import { settingAt, unwrap, valueAt } from "./settings.js";
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

type Key = string | number;

/** One source's values against every setting's type and range (the rules across settings need them all). */
function layerProblems(layer: Layer): ConfigProblem[] {
  const result = parleySettingsSchema.safeParse(layer.values);
  return result.success ? [] : result.error.issues.flatMap((issue) => problemsOf(issue, layer));
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

function displayPath(keys: readonly Key[]): string {
  return keys.reduce<string>((out, k) => (typeof k === "number" ? `${out}[${k}]` : out === "" ? k : `${out}.${k}`), "");
}

function sourceOf(keys: readonly Key[], origins: ReadonlyMap<string, string>): string {
  for (let n = keys.length; n > 0; n--) {
    const source = origins.get(keys.slice(0, n).join("."));
    if (source) return source;
  }
  return "default";
}

/** The object keys the schema allows at `keys` (an object inside the config, or an item of a list). */
function allowedKeysAt(keys: readonly Key[]): string[] {
  let schema: z.core.$ZodType = parleyConfigSchema;
  for (const key of keys) {
    const def = unwrap(schema)._zod.def as {
      type: string;
      shape?: Record<string, z.core.$ZodType>;
      element?: z.core.$ZodType;
    };
    const next = def.type === "array" ? def.element : def.shape?.[String(key)];
    if (!next) return [];
    schema = next;
  }
  const def = unwrap(schema)._zod.def as { shape?: Record<string, unknown> };
  return Object.keys(def.shape ?? {});
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
  const at = issue.path.filter((k): k is Key => typeof k !== "symbol");
  if (issue.code === "unrecognized_keys") {
    const known = allowedKeysAt(at);
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
  const setting = settingAt(at.join("."));
  return [
    {
      path: displayPath(at),
      source: sourceOf(at, layer.origins),
      value: valueAt(layer.values, at),
      message: issue.message,
      ...(setting ? { allowed: setting.allowed } : {}),
    },
  ];
}

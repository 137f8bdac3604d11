import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { z } from "zod";
import { echoInputs, echoReplies } from "../agents/echo-options.js";
import { type AgentConfig, defaultAgent } from "./schema.js";
import { fromText, type SettingInfo, settingList, valueAt } from "./settings.js";

export type Env = Readonly<Record<string, string | undefined>>;
export type Program = "parley-server" | "parley-bridge";

/** One thing wrong with the configuration, with where it came from. */
export interface ConfigProblem {
  /** Dotted path of the setting ("limits.maxMessageBytes", "agents[0].name"), or the flag/variable itself. */
  readonly path: string;
  /** "config file /etc/parley.json", "environment PARLEY_RATE_LIMIT", "flag --grpc-port", "default". */
  readonly source: string;
  readonly message: string;
  readonly value?: unknown;
  readonly allowed?: string;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly ConfigProblem[]) {
    super(
      `invalid configuration (${problems.length} ${problems.length === 1 ? "problem" : "problems"}):\n${problems
        .map(formatProblem)
        .join("\n")}`,
    );
    this.name = "ConfigError";
  }
}

function formatProblem(p: ConfigProblem): string {
  const value = "value" in p && p.value !== undefined ? ` = ${JSON.stringify(p.value)}` : "";
  const allowed = p.allowed ? `; allowed: ${p.allowed}` : "";
  return `  - ${p.path}${value} (${p.source}): ${p.message}${allowed}`;
}

/** A partial configuration from one source, and where each of its paths came from. */
export interface Layer {
  readonly values: Record<string, unknown>;
  /** Dotted path -> source label, for every path this layer sets. */
  readonly origins: ReadonlyMap<string, string>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function setAt(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let current = target;
  for (const key of keys.slice(0, -1)) {
    if (!isRecord(current[key])) current[key] = {};
    current = current[key] as Record<string, unknown>;
  }
  current[keys.at(-1)!] = value;
}

function recordOrigins(value: unknown, path: string, source: string, origins: Map<string, string>): void {
  origins.set(path, source);
  if (isRecord(value)) {
    for (const [k, v] of Object.entries(value)) recordOrigins(v, path === "" ? k : `${path}.${k}`, source, origins);
  }
}

export function fileLayer(file: string): Layer {
  const source = `config file ${file}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new ConfigError([{ path: file, source, message: `cannot read it: ${(error as Error).message}` }]);
  }
  if (!isRecord(parsed)) {
    throw new ConfigError([{ path: file, source, message: "must hold a JSON object", value: parsed }]);
  }
  const origins = new Map<string, string>();
  recordOrigins(parsed, "", source, origins);
  return { values: parsed, origins };
}

export function envLayer(env: Env): Layer {
  const values: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  for (const s of settingList) {
    const text = s.meta.env ? env[s.meta.env] : undefined;
    if (text === undefined || text === "") continue;
    setAt(values, s.path, fromText(s.kind, text));
    origins.set(s.path, `environment ${s.meta.env}`);
  }
  return { values, origins };
}

/** Flags that are not settings of the schema. */
const controlFlags = {
  config: { type: "string" },
  agent: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** parley-server's spellings from before --grpc-host/--grpc-port; it has no JSON-RPC port they could be confused with. */
const serverOldSpellings: Readonly<Record<string, string>> = { host: "grpc-host", port: "grpc-port" };

export function flagSettings(program: Program): SettingInfo[] {
  return settingList.filter((s) => s.meta.flag && (program === "parley-bridge" || !s.meta.bridgeOnly));
}

export interface ParsedFlags {
  readonly layer: Layer;
  readonly config?: string;
  readonly agent?: string;
  readonly help: boolean;
  /** Notes for the operator, e.g. an old flag spelling. */
  readonly notices: string[];
}

export function flagLayer(argv: readonly string[], program: Program): ParsedFlags {
  const flagged = flagSettings(program);
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = { ...controlFlags };
  for (const s of flagged) options[s.meta.flag!] = { type: "string" };
  if (program === "parley-server") for (const old of Object.keys(serverOldSpellings)) options[old] = { type: "string" };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as typeof values;
  } catch (error) {
    const message = (error as Error).message;
    throw new ConfigError([{ path: "command line", source: "flags", message: `${message} (see ${program} --help)` }]);
  }
  const notices: string[] = [];
  const layer: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  for (const s of flagged) {
    let flag = s.meta.flag!;
    let text = values[flag];
    const old = Object.entries(serverOldSpellings).find(([, now]) => now === flag)?.[0];
    if (program === "parley-server" && old && typeof values[old] === "string") {
      if (text === undefined) {
        text = values[old];
        flag = old;
      }
      notices.push(`--${old} is the old spelling of --${s.meta.flag} on parley-server; it keeps working`);
    }
    if (typeof text !== "string") continue;
    setAt(layer, s.path, fromText(s.kind, text));
    origins.set(s.path, `flag --${flag}`);
  }
  return {
    layer: { values: layer, origins },
    ...(typeof values.config === "string" ? { config: values.config } : {}),
    ...(typeof values.agent === "string" ? { agent: values.agent } : {}),
    help: values.help === true,
    notices,
  };
}

/** Deep-merges plain objects; arrays and scalars of `top` replace those of `base`. */
export function mergeLayers(layers: readonly Layer[]): Layer {
  const merge = (base: unknown, top: unknown): unknown => {
    if (!isRecord(base) || !isRecord(top)) return top === undefined ? base : top;
    const out: Record<string, unknown> = { ...base };
    for (const [k, v] of Object.entries(top)) out[k] = merge(out[k], v);
    return out;
  };
  let values: Record<string, unknown> = {};
  const origins = new Map<string, string>();
  for (const layer of layers) {
    values = merge(values, layer.values) as Record<string, unknown>;
    for (const [path, source] of layer.origins) {
      // A replaced array or value takes its children's origins with it; an object is merged into what is
      // there, so only the keys it sets change hands (the API keys of the file and the environment together).
      const value = valueAt(layer.values, path.split("."));
      const replaced = isRecord(value) ? Object.keys(value).map((k) => `${path}.${k}`) : [path];
      for (const known of [...origins.keys()]) {
        if (replaced.some((p) => known === p || known.startsWith(`${p}.`))) origins.delete(known);
      }
      origins.set(path, source);
    }
  }
  return { values, origins };
}

/**
 * Environment variables that are not one setting each: they pick the hosted
 * agent or fill in options of every agent of one type. Listed here so the help
 * text and docs/configuration.md are generated from the same entries the loader reads.
 */
export interface AgentShortcut {
  readonly env: string;
  readonly description: string;
  /** Validates the variable's text. */
  readonly schema: z.ZodType;
  /** The agent type whose options it sets, and the option's name. */
  readonly option?: { readonly agentType: AgentConfig["type"]; readonly key: string };
}

const agentShortcutTypes = ["echo", "openai", "conformance"] as const;

export const agentShortcuts: readonly AgentShortcut[] = [
  {
    env: "PARLEY_AGENT",
    description: "host one agent of this type instead of the agents setting (flag --agent)",
    schema: z.enum(agentShortcutTypes),
  },
  {
    env: "PARLEY_ECHO_DELAY_MS",
    description: "echo agents: delay per streamed chunk",
    schema: z.coerce.number().int().min(0),
    option: { agentType: "echo", key: "delayMs" },
  },
  {
    env: "PARLEY_ECHO_CHUNKS",
    description: "echo agents: how many artifact chunks a task reply streams in (default 8)",
    schema: z.coerce.number().int().min(1).max(10_000),
    option: { agentType: "echo", key: "chunks" },
  },
  {
    env: "PARLEY_ECHO_REPLY",
    description: "echo agents: task, message, or auto (a message unless the caller streams)",
    schema: z.enum(echoReplies),
    option: { agentType: "echo", key: "reply" },
  },
  {
    env: "PARLEY_ECHO_INPUT",
    description:
      "echo agents: summary (turn, earlier messages by sender, new text; default), framed (history block + new message) or text (the new message only)",
    schema: z.enum(echoInputs),
    option: { agentType: "echo", key: "input" },
  },
  {
    env: "PARLEY_OPENAI_BASE_URL",
    description: "openai agents: chat-completions base URL (default https://api.openai.com/v1)",
    schema: z.url(),
    option: { agentType: "openai", key: "baseUrl" },
  },
  {
    env: "PARLEY_OPENAI_MODEL",
    description: "openai agents: model name (default gpt-4o-mini)",
    schema: z.string().min(1),
    option: { agentType: "openai", key: "model" },
  },
  {
    env: "PARLEY_OPENAI_API_KEY",
    description: "openai agents: API key (or OPENAI_API_KEY)",
    schema: z.string().min(1),
    option: { agentType: "openai", key: "apiKey" },
  },
];

function agentOfType(type: (typeof agentShortcutTypes)[number]): AgentConfig {
  switch (type) {
    case "echo":
      return { ...defaultAgent };
    case "openai":
      return {
        name: "openai",
        type: "openai",
        description: "An OpenAI-compatible chat-completions model",
        options: { baseUrl: "https://api.openai.com/v1", model: "gpt-4o-mini" },
      };
    case "conformance":
      return {
        name: "conformance",
        type: "conformance",
        description: "Acts on the messageId prefixes of the A2A conformance kit (TCK)",
      };
  }
}

/**
 * Applies the agent shortcuts to the merged configuration: PARLEY_AGENT (or
 * --agent, which wins) replaces the agents, then each option shortcut is set
 * on every agent of its type. Returns the problems instead of throwing, so
 * they are reported together with the schema's.
 */
export function applyAgentShortcuts(merged: Layer, env: Env, flagAgent: string | undefined): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const values = merged.values;
  const origins = merged.origins as Map<string, string>;
  const parse = (shortcut: AgentShortcut, text: string, source: string): unknown => {
    const result = shortcut.schema.safeParse(text);
    if (result.success) return result.data;
    const allowed = shortcut.schema instanceof z.ZodEnum ? `one of ${shortcut.schema.options.join(", ")}` : undefined;
    problems.push({
      path: shortcut.env,
      source,
      value: text,
      message: result.error.issues[0]?.message ?? "invalid",
      ...(allowed ? { allowed } : {}),
    });
    return undefined;
  };
  const [agentShortcut, ...optionShortcuts] = agentShortcuts;
  const agentText = flagAgent ?? (env.PARLEY_AGENT || undefined);
  if (agentText !== undefined) {
    const source = flagAgent !== undefined ? "flag --agent" : "environment PARLEY_AGENT";
    const type = parse(agentShortcut!, agentText, source) as (typeof agentShortcutTypes)[number] | undefined;
    if (type) {
      values.agents = [agentOfType(type)];
      origins.set("agents", source);
    }
  }
  // The shortcuts configure the default agent too when no source named agents.
  values.agents ??= [defaultAgent];
  for (const shortcut of optionShortcuts) {
    let text = env[shortcut.env] || undefined;
    // The ambient OPENAI_API_KEY only fills in a key no setting gave; PARLEY_OPENAI_API_KEY overrides.
    const fillOnly = text === undefined && shortcut.env === "PARLEY_OPENAI_API_KEY";
    if (fillOnly) text = env.OPENAI_API_KEY || undefined;
    if (text === undefined) continue;
    const source = `environment ${fillOnly ? "OPENAI_API_KEY" : shortcut.env}`;
    const value = parse(shortcut, text, source);
    if (value === undefined) continue;
    const { agentType, key } = shortcut.option!;
    // Not a list: the schema reports it.
    if (!Array.isArray(values.agents)) continue;
    values.agents = values.agents.map((agent: unknown, i) => {
      if (!isRecord(agent) || agent.type !== agentType) return agent;
      const options = isRecord(agent.options) ? agent.options : {};
      if (fillOnly && options[key] !== undefined) return agent;
      // So a value the agent's options refuse is reported as the variable's.
      origins.set(`agents.${i}.options.${key}`, source);
      return { ...agent, options: { ...options, [key]: value } };
    });
  }
  return problems;
}

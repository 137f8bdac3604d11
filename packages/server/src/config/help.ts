import { formatDefault, type SettingInfo, settingList } from "./settings.js";
import { agentShortcuts, flagSettings, type Program } from "./sources.js";

const intros: Readonly<Record<Program, string>> = {
  "parley-server": `parley-server: serves A2A (gRPC, Connect, gRPC-Web) and Parley's thread, session and target
services on one h2c port (default 127.0.0.1:8081).

Usage: parley-server [flags]`,
  "parley-bridge": `parley-bridge: A2A JSON-RPC 2.0 + SSE (A2A 1.0 and 0.3) in front of Parley.

By default it runs the Parley server in the same process (embedded mode): JSON-RPC on the bridge
port (--port, PORT; default 127.0.0.1:8080) and gRPC, Connect and gRPC-Web on the server's h2c port
(--grpc-port, PARLEY_GRPC_PORT; default 127.0.0.1:8081). With --upstream URL it forwards to a
running parley-server instead and takes only the bridge.* settings and the log level.

Usage: parley-bridge [--upstream URL] [flags]`,
};

const precedence = `Every setting below can be given in a JSON config file (--config FILE or PARLEY_CONFIG), nested
by its dotted key ({"limits": {"maxMessageBytes": 2097152}}); some also by environment variable
or flag. Flags win over the environment, which wins over the file. An unknown key, a wrong type or
a value out of range, from any source, stops the start with a message naming the key, the value,
where it came from and what is allowed; each source is checked on its own, so a bad value in the
file counts even where the environment or a flag overrides it.`;

function placeholder(s: SettingInfo): string {
  if (s.kind === "number") return "N";
  return s.allowed.includes("URL") ? "URL" : "VALUE";
}

function forProgram(program: Program): SettingInfo[] {
  return settingList.filter((s) => program === "parley-bridge" || !s.meta.bridgeOnly);
}

function flagLines(program: Program): string[] {
  const rows: [string, string][] = [
    ["--config FILE", "PARLEY_CONFIG: the JSON config file"],
    ...flagSettings(program).map((s): [string, string] => [
      `--${s.meta.flag} ${placeholder(s)}`,
      `${s.path}${s.meta.env ? ` (${s.meta.env})` : ""}`,
    ]),
    ["--agent TYPE", "PARLEY_AGENT: host one agent of this type (see the agent shortcuts)"],
    ["--help, -h", "this text"],
  ];
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  const lines = rows.map(([flag, what]) => `  ${flag.padEnd(width)}${what}`);
  if (program === "parley-server") {
    lines.push("  --host, --port are the old spellings of --grpc-host, --grpc-port; they keep working here.");
  }
  return lines;
}

/** The --help text of parley-server or parley-bridge, generated from the schema. */
export function renderHelp(program: Program): string {
  const settingLines = forProgram(program).flatMap((s) => {
    const names = [s.meta.env, s.meta.flag ? `--${s.meta.flag}` : undefined].filter(Boolean).join("  ");
    return [
      `  ${s.path}${names ? `  ${names}` : ""}  (default ${formatDefault(s.defaultValue)})`,
      `      ${s.meta.description}. Allowed: ${s.allowed}`,
    ];
  });
  const shortcutLines = agentShortcuts.map((a) => `  ${a.env.padEnd(24)}${a.description}`);
  return [
    intros[program],
    "",
    "Flags:",
    ...flagLines(program),
    "",
    precedence,
    "",
    "Settings (config key, environment variable, flag):",
    ...settingLines,
    "",
    "Agent shortcuts (environment):",
    ...shortcutLines,
  ].join("\n");
}

function cell(text: string): string {
  return text.replaceAll("|", "\\|");
}

/** The configuration tables of docs/configuration.md (markdown), generated from the schema like the help text. */
export function renderConfigTable(): string {
  const code = (text: string | undefined) => (text ? `\`${cell(text)}\`` : "");
  const rows = settingList.map((s) =>
    [
      code(s.path),
      code(s.meta.env),
      s.meta.flag ? code(`--${s.meta.flag}`) : "",
      code(formatDefault(s.defaultValue)),
      cell(s.allowed),
      cell(`${s.meta.bridgeOnly ? "parley-bridge only: " : ""}${s.meta.description}`),
    ].join(" | "),
  );
  const shortcuts = agentShortcuts.map((a) => `${code(a.env)} | ${cell(a.description)}`);
  return [
    "| key | environment | flag | default | allowed | what it does |",
    "|---|---|---|---|---|---|",
    ...rows.map((r) => `| ${r} |`),
    "",
    "| agent shortcut (environment) | what it does |",
    "|---|---|",
    ...shortcuts.map((r) => `| ${r} |`),
  ].join("\n");
}

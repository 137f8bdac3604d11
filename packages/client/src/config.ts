import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { baseUrlProblem, type HttpVersion, httpVersions, type ParleyProtocol, parleyProtocols } from "./client.js";

/** How a peer is spoken to: A2A JSON-RPC or HTTP+JSON ("rest"; e.g. through a bridge) or one of Parley's own protocols. */
export type PeerProtocol = "jsonrpc" | "rest" | ParleyProtocol;

export const peerProtocols: readonly PeerProtocol[] = ["jsonrpc", "rest", ...parleyProtocols];

/**
 * What --protocol takes: the server's protocols, and "rest", A2A's HTTP+JSON binding, which URL targets and the
 * sends of `parley send` speak then (the thread commands need one of the server's own protocols).
 */
export type CliProtocol = ParleyProtocol | "rest";

export const cliProtocols: readonly CliProtocol[] = [...parleyProtocols, "rest"];

export interface PeerEntry {
  readonly url: string;
  readonly protocol: PeerProtocol;
  readonly token?: string;
  readonly description?: string;
}

export interface ClientConfig {
  /** The file it was read from; undefined when no file exists. */
  readonly path: string | undefined;
  readonly server: string;
  readonly protocol: ParleyProtocol;
  /** Of every Connect and gRPC-Web client (the server, URL targets, peers); gRPC is always HTTP/2. */
  readonly httpVersion: HttpVersion;
  readonly token: string | undefined;
  readonly peers: Readonly<Record<string, PeerEntry>>;
}

export const defaultServer = "http://127.0.0.1:8081";

export interface LoadClientConfigOptions {
  /** An explicit file (--config); it must exist. */
  readonly path?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Flags that win over the environment and the file. */
  readonly overrides?: { server?: string; protocol?: string; httpVersion?: string; token?: string };
}

/** ~/.config/parley/config.json, honouring XDG_CONFIG_HOME. */
export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(base, "parley", "config.json");
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optionalString(file: string, where: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value === "") {
    throw new ConfigError(`${file}: ${where} must be a non-empty string, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** `value` when it is one of `allowed`, else a ConfigError naming where it came from and what `kind` of value it is. */
function checkChoice<T extends string>(where: string, kind: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(`${where}: unknown ${kind} ${JSON.stringify(value)}; expected one of ${allowed.join(", ")}`);
  }
  return value as T;
}

export function checkProtocol<T extends string>(where: string, value: string, allowed: readonly T[]): T {
  return checkChoice(where, "protocol", value, allowed);
}

/** A URL the CLI will connect to, checked when the config is read: a bad one is a usage error, not the server's. */
function checkUrl(where: string, url: string): string {
  const problem = baseUrlProblem(url);
  if (problem) throw new ConfigError(`${where}: invalid URL ${JSON.stringify(url)}: ${problem}`);
  return url;
}

function parsePeers(file: string, value: unknown): Record<string, PeerEntry> {
  if (value === undefined) return {};
  if (!isRecord(value)) throw new ConfigError(`${file}: "peers" must be an object of name -> { url, protocol }`);
  const peers: Record<string, PeerEntry> = {};
  for (const [name, raw] of Object.entries(value)) {
    const where = `peers.${name}`;
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(name)) {
      throw new ConfigError(`${file}: peer name ${JSON.stringify(name)} must be letters, digits, ".", "_" or "-"`);
    }
    // ctx- is how threads are addressed; a peer of that name could never be reached unambiguously.
    if (name.startsWith("ctx-"))
      throw new ConfigError(`${file}: peer name ${JSON.stringify(name)} must not start with "ctx-"`);
    if (!isRecord(raw)) throw new ConfigError(`${file}: ${where} must be an object with "url" and "protocol"`);
    const url = optionalString(file, `${where}.url`, raw.url);
    if (!url) throw new ConfigError(`${file}: ${where}.url is missing`);
    const protocol = optionalString(file, `${where}.protocol`, raw.protocol) ?? "jsonrpc";
    const checkedProtocol = checkProtocol(`${file}: ${where}.protocol`, protocol, peerProtocols);
    peers[name] = {
      url: checkUrl(`${file}: ${where}.url`, url),
      protocol: checkedProtocol,
      token: optionalString(file, `${where}.token`, raw.token),
      description: optionalString(file, `${where}.description`, raw.description),
    };
  }
  return peers;
}

function readConfigFile(path: string, mustExist: boolean): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (!mustExist && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new ConfigError(`cannot read the client config ${path}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(`the client config ${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (!isRecord(parsed)) throw new ConfigError(`the client config ${path} must hold a JSON object`);
  return parsed;
}

/**
 * Reads the client config: --config FILE, else PARLEY_CLIENT_CONFIG, else
 * ~/.config/parley/config.json (which may be absent). Flags win over
 * PARLEY_SERVER / PARLEY_TOKEN, which win over the file.
 */
export function loadClientConfig(options: LoadClientConfigOptions = {}): ClientConfig {
  const env = options.env ?? process.env;
  const explicit = options.path ?? (env.PARLEY_CLIENT_CONFIG || undefined);
  const path = resolve(explicit ?? defaultConfigPath(env));
  const found = readConfigFile(path, explicit !== undefined);
  const raw = found ?? {};
  const file = path;
  const server =
    options.overrides?.server ?? (env.PARLEY_SERVER || optionalString(file, "server", raw.server) || defaultServer);
  const serverWhere =
    options.overrides?.server !== undefined ? "--server" : env.PARLEY_SERVER ? "PARLEY_SERVER" : `${file}: server`;
  const protocol = checkProtocol(
    options.overrides?.protocol ? "--protocol" : `${file}: protocol`,
    options.overrides?.protocol ?? optionalString(file, "protocol", raw.protocol) ?? "connect",
    parleyProtocols,
  );
  const httpVersionWhere = options.overrides?.httpVersion ? "--http-version" : `${file}: httpVersion`;
  const httpVersion = checkChoice(
    httpVersionWhere,
    "HTTP version",
    options.overrides?.httpVersion ?? optionalString(file, "httpVersion", raw.httpVersion) ?? "2",
    httpVersions,
  );
  // Said at once rather than quietly using HTTP/2 for the server, which the caller asked not to.
  if (httpVersion === "1.1" && protocol === "grpc") {
    throw new ConfigError(
      `${httpVersionWhere} 1.1 needs protocol connect or grpc-web (--protocol): gRPC runs only over HTTP/2`,
    );
  }
  return {
    path: found ? path : undefined,
    server: checkUrl(serverWhere, server),
    protocol,
    httpVersion,
    token: options.overrides?.token ?? (env.PARLEY_TOKEN || optionalString(file, "token", raw.token)),
    peers: parsePeers(file, raw.peers),
  };
}

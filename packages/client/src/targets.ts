import { Code, ConnectError } from "@connectrpc/connect";
import { TargetKind } from "@parley/proto";
import { alignedRows } from "./aligned-rows.js";
import type { ParleyClient, ParleyProtocol } from "./client.js";
import type { ClientConfig, CliProtocol, PeerProtocol } from "./config.js";
import { UsageError } from "./errors.js";
import { terminalId, terminalText } from "./terminal-text.js";

/** The prefix of server-generated contextIds: such a reference is always a thread. */
export const threadPrefix = "ctx-";
/** Names any live thread by its contextId, whatever it looks like (`thread:demo`). */
export const threadRefPrefix = "thread:";
export const peerPrefix = "a2a:";
export const agentPrefix = "agent:";

/** A target reference as written, before anything is looked up. */
export type ParsedTarget =
  | { readonly kind: "url"; readonly url: string; readonly protocol: PeerProtocol }
  | { readonly kind: "peer"; readonly name: string }
  | { readonly kind: "agent"; readonly name: string }
  | { readonly kind: "thread"; readonly contextId: string }
  | { readonly kind: "name"; readonly name: string };

/** Where a send goes. */
export type ResolvedTarget =
  /** An A2A agent reached directly: a URL, or a peer from the client config. */
  | {
      readonly kind: "endpoint";
      readonly ref: string;
      readonly peer: string | undefined;
      readonly url: string;
      readonly protocol: PeerProtocol;
      readonly token: string | undefined;
    }
  /** One of the agents the Parley server hosts. */
  | { readonly kind: "agent"; readonly ref: string; readonly agent: string }
  /** A peer configured on the Parley server, reached through it (its agent "a2a:<peer>"). */
  | { readonly kind: "server-peer"; readonly ref: string; readonly peer: string }
  /** A live thread on the Parley server, continued with its contextId. */
  | { readonly kind: "thread"; readonly ref: string; readonly contextId: string };

export interface KnownTarget {
  readonly ref: string;
  readonly kind: "peer" | "agent" | "thread";
  readonly description: string;
}

/** No rule matched, or more than one did; the message lists every rule tried and the known targets. */
export class TargetNotFoundError extends Error {
  override readonly name = "TargetNotFoundError";
  constructor(
    readonly target: string,
    readonly tried: readonly string[],
    readonly known: readonly KnownTarget[],
    readonly ambiguous: boolean,
    readonly listingProblem?: string,
  ) {
    super(
      [
        ambiguous
          ? `target ${JSON.stringify(target)} is ambiguous:`
          : `target ${JSON.stringify(target)} not found. Tried:`,
        ...tried.map((t) => `  - ${t}`),
        known.length > 0 ? "Known targets:" : "Known targets: none",
        ...formatKnownTargets(known).map((line) => `  ${line}`),
        ...(listingProblem ? [`(the server's agents and threads could not be listed: ${listingProblem})`] : []),
      ].join("\n"),
    );
  }
}

/** One line per target, for a terminal: refs are thread ids and server-side names, anyone's choice. */
export function formatKnownTargets(known: readonly KnownTarget[]): string[] {
  const rows = known.map((k) => [terminalId(k.ref), k.kind, terminalText(k.description)]);
  return rows.length === 0 ? [] : alignedRows(rows, ["left", "left", "left"]).trimEnd().split("\n");
}

const urlSchemes: Readonly<Record<string, { base: string; protocol?: ParleyProtocol }>> = {
  "http:": { base: "http:" },
  "https:": { base: "https:" },
  "grpc:": { base: "http:", protocol: "grpc" },
  "grpcs:": { base: "https:", protocol: "grpc" },
};

/**
 * Classifies a reference without looking anything up. `protocol` is an
 * explicit --protocol: it turns an http(s) URL into a gRPC/Connect or an
 * HTTP+JSON endpoint instead of JSON-RPC.
 */
export function parseTarget(ref: string, options: { protocol?: CliProtocol } = {}): ParsedTarget {
  const target = ref.trim();
  if (target === "") throw new UsageError("the target is empty: pass --to NAME, a2a:NAME, ctx-ID or a URL");
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(target)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    const known = urlSchemes[`${scheme}:`];
    if (!known) {
      throw new UsageError(
        `target ${JSON.stringify(target)} has the unsupported URL scheme "${scheme}://"; use http(s):// for JSON-RPC or grpc://host:port for gRPC`,
      );
    }
    let url: URL;
    try {
      url = new URL(`${known.base}${target.slice(scheme.length + 1)}`);
    } catch {
      throw new UsageError(`target ${JSON.stringify(target)} is not a valid URL`);
    }
    if (url.host === "") throw new UsageError(`target ${JSON.stringify(target)} has no host`);
    const protocol = known.protocol ?? options.protocol ?? "jsonrpc";
    // Connect, gRPC and HTTP+JSON clients want a base URL; "/" alone would double up in the path.
    const text = protocol === "jsonrpc" ? url.toString() : url.toString().replace(/\/$/, "");
    return { kind: "url", url: text, protocol };
  }
  if (target.startsWith(peerPrefix)) {
    const name = target.slice(peerPrefix.length);
    if (name === "") throw new UsageError(`target ${JSON.stringify(target)} names no peer after "${peerPrefix}"`);
    // `hermes send --list` style references put threads behind the a2a: prefix too.
    if (name.startsWith(threadPrefix)) return { kind: "thread", contextId: name };
    return { kind: "peer", name };
  }
  if (target.startsWith(threadRefPrefix)) {
    const contextId = target.slice(threadRefPrefix.length);
    if (contextId === "")
      throw new UsageError(`target ${JSON.stringify(target)} names no thread after "${threadRefPrefix}"`);
    return { kind: "thread", contextId };
  }
  if (target.startsWith(agentPrefix)) {
    const name = target.slice(agentPrefix.length);
    if (name === "") throw new UsageError(`target ${JSON.stringify(target)} names no agent after "${agentPrefix}"`);
    return { kind: "agent", name };
  }
  if (target.startsWith(threadPrefix)) return { kind: "thread", contextId: target };
  return { kind: "name", name: target };
}

/** The peers of the client config as targets. */
export function configuredPeers(config: ClientConfig): KnownTarget[] {
  return Object.entries(config.peers).map(([name, peer]) => ({
    ref: `${peerPrefix}${name}`,
    kind: "peer" as const,
    description: `${peer.url} (${peer.protocol})${peer.description ? ` ${peer.description}` : ""}`,
  }));
}

export interface TargetListing {
  readonly targets: KnownTarget[];
  /** Why the server's part is missing, when it could not be listed. */
  readonly problem?: string;
}

/** What the server offers (ListTargets): its agents, its peers (by name) and the caller's live threads. */
interface ServerTargets {
  readonly agents: { readonly name: string; readonly description: string }[];
  readonly peers: { readonly name: string; readonly description: string; readonly url: string }[];
  readonly threads: { readonly contextId: string; readonly description: string }[];
  readonly problem?: string;
}

async function serverTargets(server: ParleyClient | undefined, threadLimit: number): Promise<ServerTargets> {
  const none = { agents: [], peers: [], threads: [] };
  if (!server) return { ...none, problem: "no Parley server is configured" };
  try {
    const response = await server.targets.listTargets({ threadLimit });
    const of = (kind: TargetKind) => response.targets.filter((t) => t.kind === kind);
    return {
      agents: of(TargetKind.AGENT).map((t) => ({ name: t.ref, description: t.description })),
      peers: of(TargetKind.PEER).map((t) => ({
        name: t.ref.startsWith(peerPrefix) ? t.ref.slice(peerPrefix.length) : t.ref,
        description: t.description,
        url: t.url,
      })),
      threads: of(TargetKind.THREAD).map((t) => ({ contextId: t.ref, description: t.description })),
    };
  } catch (error) {
    return { ...none, problem: `${server.baseUrl}: ${ConnectError.from(error).message}` };
  }
}

/**
 * Configured peers, then the server's agents, the server's peers and the
 * caller's live threads. A server peer whose name a client-config peer also
 * has is listed as shadowed: `a2a:NAME` means the client's.
 */
export async function listTargets(config: ClientConfig, server: ParleyClient | undefined): Promise<TargetListing> {
  const targets = configuredPeers(config);
  if (!server) return { targets };
  const offered = await serverTargets(server, 100);
  for (const a of offered.agents) targets.push({ ref: a.name, kind: "agent", description: a.description });
  for (const p of offered.peers) {
    const shadowed = config.peers[p.name] !== undefined;
    targets.push({
      ref: `${peerPrefix}${p.name}`,
      kind: "peer",
      description: `on the server: ${p.url} ${p.description}${shadowed ? " (shadowed by the client config's peer of that name)" : ""}`,
    });
  }
  for (const t of offered.threads) {
    const ref = t.contextId.startsWith(threadPrefix) ? t.contextId : `${threadRefPrefix}${t.contextId}`;
    targets.push({ ref, kind: "thread", description: t.description });
  }
  return offered.problem ? { targets, problem: offered.problem } : { targets };
}

async function threadExists(server: ParleyClient, contextId: string): Promise<boolean> {
  try {
    await server.threads.getThreadHistory({ contextId, pageSize: 1 });
    return true;
  } catch (error) {
    const connectError = ConnectError.from(error);
    if (connectError.code === Code.NotFound) return false;
    throw new ConnectError(
      `cannot check whether thread ${contextId} exists on ${server.baseUrl}: ${connectError.rawMessage}`,
      connectError.code,
    );
  }
}

/**
 * Resolves a reference by trying each rule in turn: URL, a2a:PEER (the
 * client config's peer, else the server's), agent:NAME, ctx-ID or thread:ID
 * (a live thread of this tenant), then a bare name as a client-config peer, a
 * hosted agent, a server peer or the contextId of a live thread. Nothing
 * matching, or a bare name matching more than one, fails with every rule
 * tried and the known targets; an ambiguous name is made exact with a2a:,
 * agent: or thread:.
 */
export async function resolveTarget(
  ref: string,
  options: { config: ClientConfig; server: ParleyClient | undefined; protocol?: CliProtocol },
): Promise<ResolvedTarget> {
  const { config, server } = options;
  const parsed = parseTarget(ref, { protocol: options.protocol });
  const peerFile = config.path ?? "no client config file";
  const fail = async (tried: string[], ambiguous = false): Promise<never> => {
    const listing = await listTargets(config, server);
    throw new TargetNotFoundError(ref, tried, listing.targets, ambiguous, listing.problem);
  };
  const endpointOf = (name: string): ResolvedTarget => {
    const peer = config.peers[name]!;
    return { kind: "endpoint", ref, peer: name, url: peer.url, protocol: peer.protocol, token: peer.token };
  };
  const where = server?.baseUrl ?? "no server";

  switch (parsed.kind) {
    case "url":
      return { kind: "endpoint", ref, peer: undefined, url: parsed.url, protocol: parsed.protocol, token: undefined };
    case "peer": {
      if (config.peers[parsed.name]) return endpointOf(parsed.name);
      const offered = await serverTargets(server, 1);
      if (offered.peers.some((p) => p.name === parsed.name)) return { kind: "server-peer", ref, peer: parsed.name };
      return fail([
        `a2a:NAME: no peer named ${JSON.stringify(parsed.name)} in the client config (${peerFile})`,
        `a2a:NAME: ${offered.problem ?? `no peer named ${JSON.stringify(parsed.name)} on the server ${where}`}`,
      ]);
    }
    case "agent": {
      const offered = await serverTargets(server, 1);
      if (offered.agents.some((a) => a.name === parsed.name)) return { kind: "agent", ref, agent: parsed.name };
      return fail([
        `agent:NAME: ${offered.problem ?? `the server hosts no agent named ${JSON.stringify(parsed.name)}`}`,
      ]);
    }
    case "thread": {
      if (!server) return fail([`thread: no Parley server is configured to hold thread ${parsed.contextId}`]);
      if (await threadExists(server, parsed.contextId)) return { kind: "thread", ref, contextId: parsed.contextId };
      return fail([`thread: no live thread ${parsed.contextId} for this tenant on ${where}`]);
    }
    case "name": {
      const name = parsed.name;
      const offered = await serverTargets(server, 1);
      const matches: { readonly rule: string; readonly target: ResolvedTarget }[] = [];
      if (config.peers[name]) {
        matches.push({ rule: `a peer in ${peerFile}; say a2a:${name}`, target: endpointOf(name) });
      }
      if (offered.agents.some((a) => a.name === name)) {
        matches.push({ rule: `an agent on ${where}; say agent:${name}`, target: { kind: "agent", ref, agent: name } });
      } else if (offered.peers.some((p) => p.name === name)) {
        matches.push({
          rule: `a peer of the server ${where}; say a2a:${name}${config.peers[name] ? " (only when the client config has none)" : ""}`,
          target: { kind: "server-peer", ref, peer: name },
        });
      }
      if (server && !offered.problem && (await threadExists(server, name))) {
        matches.push({
          rule: `a live thread on ${where}; say thread:${name}`,
          target: { kind: "thread", ref, contextId: name },
        });
      }
      if (matches.length === 1) return matches[0]!.target;
      if (matches.length > 1) {
        return fail(
          matches.map((m) => `${JSON.stringify(name)} is ${m.rule}`),
          true,
        );
      }
      return fail([
        "URL: not an http://, https:// or grpc:// URL",
        `configured peer: no peer named ${JSON.stringify(name)} in the client config (${peerFile})`,
        `hosted agent: ${offered.problem ?? `the server hosts no agent named ${JSON.stringify(name)}`}`,
        `server peer: ${offered.problem ?? `the server has no peer named ${JSON.stringify(name)}`}`,
        `thread: no live thread ${JSON.stringify(name)} for this tenant${server ? ` on ${where}` : ""}`,
      ]);
    }
  }
}

import { Code, ConnectError } from "@connectrpc/connect";
import { TargetKind } from "@parley/proto";
import type { ParleyClient, ParleyProtocol } from "./client.js";
import type { ClientConfig, PeerProtocol } from "./config.js";
import { UsageError } from "./errors.js";

/** The prefix of server-generated contextIds, which makes a thread addressable as a target. */
export const threadPrefix = "ctx-";
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

export function formatKnownTargets(known: readonly KnownTarget[]): string[] {
  const width = Math.max(0, ...known.map((k) => k.ref.length));
  return known.map((k) => `${k.ref.padEnd(width)}  ${k.kind.padEnd(6)}  ${k.description}`);
}

const urlSchemes: Readonly<Record<string, { base: string; protocol?: ParleyProtocol }>> = {
  "http:": { base: "http:" },
  "https:": { base: "https:" },
  "grpc:": { base: "http:", protocol: "grpc" },
  "grpcs:": { base: "https:", protocol: "grpc" },
};

/**
 * Classifies a reference without looking anything up. `protocol` is an
 * explicit --protocol: it turns an http(s) URL into a gRPC/Connect endpoint
 * instead of JSON-RPC.
 */
export function parseTarget(ref: string, options: { protocol?: ParleyProtocol } = {}): ParsedTarget {
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
    // Connect and gRPC clients want a base URL; "/" alone would double up in the RPC path.
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

/** Configured peers, then the server's agents and the caller's live threads. */
export async function listTargets(config: ClientConfig, server: ParleyClient | undefined): Promise<TargetListing> {
  const targets = configuredPeers(config);
  if (!server) return { targets };
  try {
    const response = await server.targets.listTargets({ threadLimit: 100 });
    for (const t of response.targets) {
      if (t.kind === TargetKind.AGENT) targets.push({ ref: t.ref, kind: "agent", description: t.description });
      if (t.kind === TargetKind.THREAD) targets.push({ ref: t.ref, kind: "thread", description: t.description });
    }
    return { targets };
  } catch (error) {
    return { targets, problem: `${server.baseUrl}: ${ConnectError.from(error).message}` };
  }
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
 * Resolves a reference by trying each rule in turn: URL, a2a:PEER, agent:NAME,
 * ctx- thread of this tenant, then a bare name as a configured peer or a
 * hosted agent. Nothing matching, or a bare name matching both a peer and an
 * agent, fails with every rule tried and the known targets.
 */
export async function resolveTarget(
  ref: string,
  options: { config: ClientConfig; server: ParleyClient | undefined; protocol?: ParleyProtocol },
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
  const agentsOf = async (): Promise<{ names: string[]; problem?: string }> => {
    if (!server) return { names: [], problem: "no Parley server is configured" };
    try {
      const response = await server.targets.listTargets({ threadLimit: 1 });
      return { names: response.targets.filter((t) => t.kind === TargetKind.AGENT).map((t) => t.ref) };
    } catch (error) {
      return { names: [], problem: `${server.baseUrl}: ${ConnectError.from(error).message}` };
    }
  };

  switch (parsed.kind) {
    case "url":
      return { kind: "endpoint", ref, peer: undefined, url: parsed.url, protocol: parsed.protocol, token: undefined };
    case "peer":
      if (config.peers[parsed.name]) return endpointOf(parsed.name);
      return fail([`a2a:NAME: no peer named ${JSON.stringify(parsed.name)} in the client config (${peerFile})`]);
    case "agent": {
      const agents = await agentsOf();
      if (agents.names.includes(parsed.name)) return { kind: "agent", ref, agent: parsed.name };
      return fail([
        `agent:NAME: ${agents.problem ?? `the server hosts no agent named ${JSON.stringify(parsed.name)}`}`,
      ]);
    }
    case "thread": {
      if (!server) return fail([`ctx-ID: no Parley server is configured to hold thread ${parsed.contextId}`]);
      if (await threadExists(server, parsed.contextId)) return { kind: "thread", ref, contextId: parsed.contextId };
      return fail([`ctx-ID: no live thread ${parsed.contextId} for this tenant on ${server.baseUrl}`]);
    }
    case "name": {
      const isPeer = config.peers[parsed.name] !== undefined;
      const agents = await agentsOf();
      const isAgent = agents.names.includes(parsed.name);
      if (isPeer && isAgent) {
        return fail(
          [
            `configured peer: ${JSON.stringify(parsed.name)} is a peer in ${peerFile}; say a2a:${parsed.name}`,
            `hosted agent: ${JSON.stringify(parsed.name)} is an agent on ${server!.baseUrl}; say agent:${parsed.name}`,
          ],
          true,
        );
      }
      if (isPeer) return endpointOf(parsed.name);
      if (isAgent) return { kind: "agent", ref, agent: parsed.name };
      return fail([
        "URL: not an http://, https:// or grpc:// URL",
        `thread: does not start with "${threadPrefix}"`,
        `configured peer: no peer named ${JSON.stringify(parsed.name)} in the client config (${peerFile})`,
        `hosted agent: ${agents.problem ?? `the server hosts no agent named ${JSON.stringify(parsed.name)}`}`,
      ]);
    }
  }
}

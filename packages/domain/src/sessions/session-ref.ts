import { randomUUID } from "node:crypto";
import { headers, type SessionRef } from "@parley/proto";
import { invalidArgument } from "../errors.js";
import type { SessionPeer } from "./session-peer.js";

/** Request header carrying the hop trace of a Converse that an agent started while answering a step. */
export const hopsHeader = headers.hops;

/** A session the server can talk to: a hosted agent's thread, or a thread of a remote A2A peer. */
export type ResolvedSession =
  | { readonly kind: "local"; readonly agent: string; readonly contextId: string; readonly id: string }
  | { readonly kind: "peer"; readonly peer: SessionPeer; readonly contextId: string; readonly id: string };

/**
 * A peer by configured name, or by URL: http(s)://… is JSON-RPC,
 * grpc+http(s)://… is gRPC.
 */
export function resolvePeer(spec: string, peers: readonly SessionPeer[]): SessionPeer | undefined {
  const named = peers.find((p) => p.name === spec);
  if (named) return named;
  const grpc = /^grpc\+(https?:\/\/.+)$/i.exec(spec);
  if (grpc) return { name: spec, url: grpc[1]!, protocol: "grpc" };
  if (/^https?:\/\/./i.test(spec)) return { name: spec, url: spec, protocol: "jsonrpc" };
  return undefined;
}

/**
 * Resolves a SessionRef. An empty contextId is replaced by a fresh one here,
 * before anything runs, so the session has its final id for the hop trace
 * and both context ids can be reported in the first event.
 */
export function resolveSession(
  ref: SessionRef | undefined,
  field: "requester" | "target",
  deps: { readonly agentNames: readonly string[]; readonly peers: readonly SessionPeer[]; readonly self: string },
): ResolvedSession {
  if (!ref) throw invalidArgument(`${field} is required`);
  const contextId = ref.contextId !== "" ? ref.contextId : `ctx-${randomUUID()}`;
  if (ref.endpoint.case === "peer") {
    const peer = resolvePeer(ref.endpoint.value, deps.peers);
    if (!peer) {
      throw invalidArgument(
        `${field}.peer ${JSON.stringify(ref.endpoint.value)} is neither a configured peer (${deps.peers.map((p) => p.name).join(", ") || "none configured"}) nor an http(s):// or grpc+http(s):// URL`,
      );
    }
    return { kind: "peer", peer, contextId, id: `a2a:${peer.url}/${contextId}` };
  }
  const agent = ref.endpoint.case === "agent" && ref.endpoint.value !== "" ? ref.endpoint.value : deps.agentNames[0]!;
  if (!deps.agentNames.includes(agent)) {
    throw invalidArgument(
      `${field}.agent ${JSON.stringify(agent)} is not hosted here; this server hosts: ${deps.agentNames.join(", ")}`,
    );
  }
  return { kind: "local", agent, contextId, id: `${deps.self}/${agent}/${contextId}` };
}

export function encodeHops(hops: readonly string[]): string {
  return hops.map(encodeURIComponent).join(",");
}

export function decodeHops(header: string | null | undefined): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean)
    .map((h) => {
      try {
        return decodeURIComponent(h);
      } catch {
        throw invalidArgument(`${hopsHeader} holds a malformed entry ${JSON.stringify(h)}`);
      }
    });
}

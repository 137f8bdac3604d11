/**
 * Where the bridge serves what: JSON-RPC at / and /agents/<name>/, agent cards below each. /healthz, /readyz
 * and /metrics are answered before routing, by the HTTP front both ports share.
 */

export const agentCardPath = "/.well-known/agent-card.json";
const agentPathPattern = /^\/agents\/([^/]+)(\/.*)?$/;

export interface Route {
  readonly kind: "rpc" | "card";
  /** The named agent of /agents/<name>/...; absent for the default agent. */
  readonly agent?: string;
}

/** The paths a 404 tells a client about. */
export const knownPaths = `JSON-RPC is served at / and /agents/<name>/, agent cards at ${agentCardPath}`;

export function matchRoute(pathname: string): Route | undefined {
  if (pathname === "/") return { kind: "rpc" };
  if (pathname === agentCardPath) return { kind: "card" };
  const match = agentPathPattern.exec(pathname);
  if (!match) return undefined;
  let agent: string;
  try {
    agent = decodeURIComponent(match[1]!);
  } catch {
    return undefined;
  }
  const rest = match[2] ?? "/";
  if (rest === "/") return { kind: "rpc", agent };
  if (rest === agentCardPath) return { kind: "card", agent };
  return undefined;
}

/** The JSON-RPC path of an agent (the default agent's is "/"). */
export function jsonRpcPath(agent: string | undefined): string {
  return agent === undefined ? "/" : `/agents/${encodeURIComponent(agent)}/`;
}

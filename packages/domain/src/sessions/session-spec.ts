// The SESSION syntax alone, in its own module: the script agent's option schema (loaded by the config) checks
// sessions with it, and session-ref.ts imports from the config, which would close a circle.
/**
 * Parses the SESSION syntax of the CLI and of script agents:
 * `agent[/contextId]`, `a2a:peer[/contextId]`, or `a2a:URL[#contextId]`.
 */
export function parseSessionSpec(spec: string): { agent?: string; peer?: string; contextId: string } {
  const trimmed = spec.trim();
  if (trimmed === "") throw new Error("a session must not be empty: use agent[/contextId] or a2a:peer[/contextId]");
  if (trimmed.startsWith("a2a:")) {
    const rest = trimmed.slice(4);
    if (rest.includes("://")) {
      const hash = rest.indexOf("#");
      return hash < 0 ? { peer: rest, contextId: "" } : { peer: rest.slice(0, hash), contextId: rest.slice(hash + 1) };
    }
    const slash = rest.indexOf("/");
    const peer = slash < 0 ? rest : rest.slice(0, slash);
    if (peer === "") throw new Error(`session ${JSON.stringify(spec)} names no peer after a2a:`);
    return { peer, contextId: slash < 0 ? "" : rest.slice(slash + 1) };
  }
  const slash = trimmed.indexOf("/");
  return slash < 0
    ? { agent: trimmed, contextId: "" }
    : { agent: trimmed.slice(0, slash), contextId: trimmed.slice(slash + 1) };
}

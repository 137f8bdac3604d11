import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * A handler the bridge serves beside JSON-RPC, for the paths it claims (the
 * Connect RPCs, the console). The bridge asks each route in order before its
 * own routing, so a route sees every request of its paths, shutdown refusals
 * excepted.
 */
export interface HttpRoute {
  /** Says whether this route serves the path (already parsed, not decoded). */
  matches(pathname: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** The longest request body this route takes, when longer than the bridge's own limit (bodies are read before routing). */
  readonly maxBodyBytes?: number;
  /** Called when the bridge closes: end what is still open. */
  close?(): void;
}

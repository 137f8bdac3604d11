import { headers } from "@parley/proto";
import type { PeerConfig } from "./peer-options.js";

/** The headers of every request to a remote A2A peer: the protocol version spoken and the peer's token. */
export function peerRequestHeaders(peer: PeerConfig): Record<string, string> {
  return {
    [headers.a2aVersion]: "1.0",
    ...(peer.token ? { authorization: `Bearer ${peer.token}` } : {}),
  };
}

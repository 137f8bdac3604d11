import { z } from "zod";

/** A remote A2A peer: the `peers` settings, and what the a2a agent and sessions call. */
export const peerSchema = z.strictObject({
  name: z.string().min(1),
  /** JSON-RPC: an http(s) URL; HTTP+JSON ("rest"): the base URL of its paths; gRPC: http://host:port with protocol "grpc". */
  url: z.url({ protocol: /^https?$/ }),
  protocol: z.enum(["jsonrpc", "rest", "grpc"]).default("jsonrpc"),
  /** JSON-RPC peers: the A2A version to speak, "1.0" (SendMessage, default) or "0.3" (message/send). */
  a2aVersion: z.enum(["1.0", "0.3"]).optional(),
  /** gRPC peers: the remote server's agent to address (the parley-agent header); default: its default agent. */
  agent: z.string().min(1).optional(),
  token: z.string().optional(),
  description: z.string().optional(),
});

export type PeerConfig = z.output<typeof peerSchema>;

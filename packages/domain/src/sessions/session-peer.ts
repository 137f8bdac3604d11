import type { Message, Task } from "@parley/proto";

/** A remote A2A peer a session can talk to; the server's `peers` settings satisfy it. */
export interface SessionPeer {
  readonly name: string;
  /** JSON-RPC: an http(s) URL; HTTP+JSON: the base URL of its paths; gRPC: http(s)://host:port. */
  readonly url: string;
  readonly protocol: "jsonrpc" | "rest" | "grpc";
  /** JSON-RPC peers: the A2A version to speak. */
  readonly a2aVersion?: "1.0" | "0.3" | undefined;
  /** gRPC peers: the remote server's agent to address. */
  readonly agent?: string | undefined;
  readonly token?: string | undefined;
  readonly description?: string | undefined;
}

/** What a peer answered to one message. */
export type PeerAnswer =
  | { readonly kind: "message"; readonly message: Message }
  | { readonly kind: "task"; readonly task: Task };

/** Sends one message to a peer and waits for its answer; throws a ChainRefusedError when the peer refused the chain. */
export type CallPeer = (peer: SessionPeer, message: Message, signal: AbortSignal) => Promise<PeerAnswer>;

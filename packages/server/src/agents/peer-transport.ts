import type { PeerAnswer } from "@parley/domain";
import type { Message, StreamResponse } from "@parley/proto";
import { callPeer } from "./peer-call.js";
import { createGrpcPeerStream } from "./peer-grpc.js";
import { createJsonRpcPeerStream } from "./peer-jsonrpc.js";
import type { PeerConfig } from "./peer-options.js";
import { createRestPeerStream } from "./peer-rest.js";

/**
 * How the a2a agent reaches its peer, one binding behind it: a whole answer
 * to one message, the peer's events as they come, and a cancel of the peer's
 * task. A binding without a stream (or a peer that does not stream) answers
 * `stream` with undefined, and the agent sends once instead.
 */
export interface PeerTransport {
  /** SendMessage: the peer's whole answer. */
  send(message: Message, signal: AbortSignal): Promise<PeerAnswer>;
  /**
   * SendStreamingMessage: the peer's events in order, or undefined when the peer does not stream (its card
   * says so, or it refused the stream before taking the message). A failure mid-stream throws a PeerError
   * naming the peer's URL and the cause.
   */
  stream(message: Message, signal: AbortSignal): Promise<AsyncIterable<StreamResponse> | undefined>;
  /** CancelTask of the peer's task `taskId`. */
  cancel(taskId: string, signal: AbortSignal): Promise<void>;
}

/** The transport of a configured peer, by its protocol. */
export function createPeerTransport(peer: PeerConfig): PeerTransport {
  const streaming =
    peer.protocol === "grpc"
      ? createGrpcPeerStream(peer)
      : peer.protocol === "rest"
        ? createRestPeerStream(peer)
        : createJsonRpcPeerStream(peer);
  return {
    send: (message, signal) => callPeer(peer, message, signal),
    stream: (message, signal) => streaming.stream(message, signal),
    cancel: (taskId, signal) => streaming.cancel(taskId, signal),
  };
}

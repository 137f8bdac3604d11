import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  A2AService,
  ErrorInfoSchema,
  type Message,
  SendMessageRequestSchema,
  type StreamResponse,
} from "@parley/proto";
import { describePeerFailure, PeerError, peerCallHeaders } from "./peer-call.js";
import type { PeerConfig } from "./peer-options.js";

/** A gRPC peer's refusal of a stream before it took the message: it does not stream, one send does instead. */
function refusedStream(error: unknown): boolean {
  if (!(error instanceof ConnectError)) return false;
  if (error.code === Code.Unimplemented) return true;
  return error.findDetails(ErrorInfoSchema).some((info) => info.reason === "UNSUPPORTED_OPERATION");
}

/** SendStreamingMessage and CancelTask on a gRPC peer (the binding always has a stream; a peer may refuse it). */
export function createGrpcPeerStream(peer: PeerConfig) {
  const clientOf = () => createClient(A2AService, createGrpcTransport({ baseUrl: peer.url }));
  return {
    async stream(message: Message, signal: AbortSignal): Promise<AsyncIterable<StreamResponse> | undefined> {
      const request = create(SendMessageRequestSchema, { message });
      const call = clientOf().sendStreamingMessage(request, { signal, headers: peerCallHeaders(peer) });
      const events = call[Symbol.asyncIterator]();
      let first: IteratorResult<StreamResponse>;
      try {
        first = await events.next();
      } catch (error) {
        if (!signal.aborted && refusedStream(error)) return undefined;
        throw describePeerFailure(peer, error, signal);
      }
      return (async function* () {
        let received = 0;
        try {
          for (let next = first; !next.done; next = await events.next()) {
            received++;
            yield next.value;
          }
        } catch (error) {
          const failure = describePeerFailure(peer, error, signal);
          if (signal.aborted || !(failure instanceof PeerError)) throw failure;
          const cause = error instanceof ConnectError ? `${Code[error.code]}: ${error.rawMessage}` : failure.message;
          throw new PeerError(
            `peer ${peer.name} (${peer.url}) broke off its stream after ${received} events: ${cause}`,
          );
        } finally {
          await events.return?.();
        }
      })();
    },

    async cancel(taskId: string, signal: AbortSignal): Promise<void> {
      try {
        await clientOf().cancelTask({ id: taskId }, { signal, headers: peerCallHeaders(peer) });
      } catch (error) {
        throw describePeerFailure(peer, error, signal);
      }
    },
  };
}

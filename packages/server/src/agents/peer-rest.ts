import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Message, SendMessageRequestSchema, type StreamResponse, StreamResponseSchema } from "@parley/proto";
import {
  describePeerFailure,
  PeerError,
  peerCallHeaders,
  restFailure,
  restReasonOf,
  socketCauseOf,
  summary,
} from "./peer-call.js";
import { cardSaysStreaming } from "./peer-jsonrpc.js";
import type { PeerConfig } from "./peer-options.js";
import { sseEvents } from "./sse-events.js";

/** How long a peer's card is trusted before it is read again (a peer may switch streaming on or off). */
const cardTtlMs = 60_000;
/** The longest SSE event taken from a peer: a reply chunk, never a whole history. */
const maxEventChars = 16 * 1024 * 1024;

/** The `google.rpc.Status` of an HTTP+JSON error body, if `raw` is one. */
function statusOf(raw: string): object | undefined {
  try {
    const error = (JSON.parse(raw) as { error?: unknown } | null)?.error;
    return typeof error === "object" && error !== null ? error : undefined;
  } catch {
    return undefined;
  }
}

/**
 * SendStreamingMessage and CancelTask on an HTTP+JSON peer (A2A 1.0 section 11): `POST <url>/message:stream`,
 * whose SSE events are bare StreamResponse JSON (an `error` event a google.rpc.Status), and
 * `POST <url>/tasks/{id}:cancel`. A peer whose card does not say it streams is sent to once.
 */
export function createRestPeerStream(peer: PeerConfig) {
  const base = peer.url.replace(/\/+$/, "");
  let card: { readonly at: number; readonly streams: Promise<boolean> } | undefined;
  const streams = (): Promise<boolean> => {
    if (card === undefined || Date.now() - card.at > cardTtlMs)
      card = { at: Date.now(), streams: cardSaysStreaming(peer) };
    return card.streams;
  };
  const post = (path: string, body: JsonValue, signal: AbortSignal, accept: string) =>
    fetch(`${base}${path}`, {
      method: "POST",
      signal,
      headers: { "content-type": "application/json", accept, ...peerCallHeaders(peer) },
      body: JSON.stringify(body),
    });

  return {
    async stream(message: Message, signal: AbortSignal): Promise<AsyncIterable<StreamResponse> | undefined> {
      if (!(await streams())) return undefined;
      const url = `${base}/message:stream`;
      const request = toJson(SendMessageRequestSchema, create(SendMessageRequestSchema, { message }));
      let response: Response;
      try {
        response = await post("/message:stream", request, signal, "text/event-stream");
      } catch (error) {
        throw describePeerFailure(peer, error, signal);
      }
      if (!(response.headers.get("content-type") ?? "").includes("text/event-stream") || !response.body) {
        // A refusal before the stream started is a plain HTTP+JSON error.
        const raw = await response.text().catch((error: unknown) => {
          throw describePeerFailure(peer, error, signal);
        });
        if (response.ok) {
          throw new PeerError(`peer ${peer.name} (${url}) answered HTTP ${response.status} without an event stream`);
        }
        // A peer that refuses the stream itself is sent to once.
        const status = statusOf(raw);
        if (status !== undefined && restReasonOf(status) === "UNSUPPORTED_OPERATION") return undefined;
        throw restFailure(peer, url, response, raw);
      }
      const body = response.body;
      return (async function* () {
        let received = 0;
        try {
          for await (const event of sseEvents(body, maxEventChars)) {
            let parsed: unknown;
            try {
              parsed = JSON.parse(event.data);
            } catch {
              parsed = undefined;
            }
            if (typeof parsed !== "object" || parsed === null) {
              throw new PeerError(
                `peer ${peer.name} (${url}) sent an SSE event that is no JSON object after ${received} events: ${summary(event.data)}`,
              );
            }
            const error = (parsed as { error?: unknown }).error;
            if (event.event === "error" || (typeof error === "object" && error !== null)) {
              const status = typeof error === "object" && error !== null ? error : parsed;
              const reason = restReasonOf(status);
              const text = (status as { message?: unknown }).message;
              throw new PeerError(
                `peer ${peer.name} (${url}) ended its stream with an error after ${received} events${reason ? ` (${reason})` : ""}: ${typeof text === "string" ? text : summary(event.data)}`,
              );
            }
            received++;
            yield fromJson(StreamResponseSchema, parsed as JsonValue, { ignoreUnknownFields: true });
          }
        } catch (error) {
          if (error instanceof PeerError || signal.aborted) throw describePeerFailure(peer, error, signal);
          const cause = socketCauseOf(error) ?? (error instanceof Error ? error.message : String(error));
          throw new PeerError(`peer ${peer.name} (${url}) broke off its stream after ${received} events: ${cause}`);
        } finally {
          // Stopped early (the turn was stopped): the connection goes too.
          await body.cancel().catch(() => undefined);
        }
      })();
    },

    async cancel(taskId: string, signal: AbortSignal): Promise<void> {
      const path = `/tasks/${encodeURIComponent(taskId)}:cancel`;
      let response: Response;
      let raw: string;
      try {
        response = await post(path, {}, signal, "application/json");
        raw = await response.text();
      } catch (error) {
        throw describePeerFailure(peer, error, signal);
      }
      if (!response.ok) throw restFailure(peer, `${base}${path}`, response, raw);
    },
  };
}

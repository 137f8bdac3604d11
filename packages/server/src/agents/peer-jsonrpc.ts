import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import {
  createDeadline,
  type Message,
  SendMessageRequestSchema,
  type StreamResponse,
  StreamResponseSchema,
} from "@parley/proto";
import {
  describePeerFailure,
  jsonRpcFailure,
  messageToV03,
  PeerError,
  peerCallHeaders,
  socketCauseOf,
  summary,
} from "./peer-call.js";
import type { PeerConfig } from "./peer-options.js";
import { streamEventFromV03 } from "./peer-v03-events.js";
import { sseEvents } from "./sse-events.js";

/** How long a peer's card is trusted before it is read again (a peer may switch streaming on or off). */
const cardTtlMs = 60_000;
/** How long reading a peer's card may take before the agent sends without a stream. */
const cardTimeoutMs = 5_000;
/** The longest SSE event taken from a peer: a reply chunk, never a whole history. */
const maxEventChars = 16 * 1024 * 1024;
/** JSON-RPC code of UnsupportedOperationError: a peer that refuses the stream itself. */
const unsupportedOperation = -32004;

/** A URL compared with another: trailing slashes aside. */
const sameUrl = (a: string, b: string) => a.replace(/\/+$/, "") === b.replace(/\/+$/, "");

type CardJson = {
  capabilities?: { streaming?: unknown };
  supportedInterfaces?: { url?: unknown }[];
  url?: unknown;
};

/**
 * Whether the peer's card says it streams (capabilities.streaming). The card beside the peer's URL is its own
 * (a Parley bridge's /agents/NAME/); the one at its origin only when it lists that URL among its interfaces, since
 * it may describe another agent of the server. False when neither is there.
 */
export async function cardSaysStreaming(peer: PeerConfig): Promise<boolean> {
  const headers = peerCallHeaders(peer);
  const beside = new URL(".well-known/agent-card.json", peer.url).href;
  const atOrigin = new URL("/.well-known/agent-card.json", peer.url).href;
  for (const url of beside === atOrigin ? [beside] : [beside, atOrigin]) {
    const deadline = createDeadline(cardTimeoutMs);
    try {
      const response = await fetch(url, { headers, signal: deadline.signal });
      if (!response.ok) continue;
      const card = (await response.json()) as CardJson | null;
      if (!card || typeof card !== "object") continue;
      const urls = [
        card.url,
        ...(Array.isArray(card.supportedInterfaces) ? card.supportedInterfaces.map((i) => i?.url) : []),
      ];
      const own = url === beside || urls.some((u) => typeof u === "string" && sameUrl(u, peer.url));
      if (own) return card.capabilities?.streaming === true;
    } catch {
      // No card here (or none that parses): the next place, then one send.
    } finally {
      deadline.clear();
    }
  }
  return false;
}

type JsonRpcBody = { jsonrpc?: unknown; result?: JsonValue; error?: unknown };

/** A JSON-RPC response body, or undefined when `raw` is not one. */
function jsonRpcBody(raw: string): JsonRpcBody | undefined {
  let body: JsonRpcBody | undefined;
  try {
    body = JSON.parse(raw) as JsonRpcBody;
  } catch {
    return undefined;
  }
  if (!body || typeof body !== "object" || body.jsonrpc !== "2.0") return undefined;
  if (body.result === undefined && (typeof body.error !== "object" || body.error === null)) return undefined;
  return body;
}

/**
 * SendStreamingMessage over SSE and CancelTask on a JSON-RPC peer whose card
 * says it streams (message/stream and tasks/cancel for a 0.3 peer, its events
 * read into the 1.0 form); one without a streaming card is sent to once (the
 * card is read again after cardTtlMs).
 */
export function createJsonRpcPeerStream(peer: PeerConfig) {
  let card: { readonly at: number; readonly streams: Promise<boolean> } | undefined;
  const streams = (): Promise<boolean> => {
    if (card === undefined || Date.now() - card.at > cardTtlMs)
      card = { at: Date.now(), streams: cardSaysStreaming(peer) };
    return card.streams;
  };
  const v03 = peer.a2aVersion === "0.3";
  const eventOf = (result: JsonValue | undefined): StreamResponse =>
    v03
      ? streamEventFromV03(peer, result)
      : fromJson(StreamResponseSchema, result ?? null, { ignoreUnknownFields: true });
  const post = (method: string, params: JsonValue, signal: AbortSignal, accept: string) =>
    fetch(peer.url, {
      method: "POST",
      signal,
      headers: { "content-type": "application/json", accept, ...peerCallHeaders(peer) },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    });

  return {
    async stream(message: Message, signal: AbortSignal): Promise<AsyncIterable<StreamResponse> | undefined> {
      if (!(await streams())) return undefined;
      const params = v03
        ? { message: messageToV03(message) }
        : toJson(SendMessageRequestSchema, create(SendMessageRequestSchema, { message }));
      let response: Response;
      try {
        response = await post(v03 ? "message/stream" : "SendStreamingMessage", params, signal, "text/event-stream");
      } catch (error) {
        throw describePeerFailure(peer, error, signal);
      }
      const status = response.status;
      if (!(response.headers.get("content-type") ?? "").includes("text/event-stream") || !response.body) {
        // A refusal before the stream started is a plain JSON-RPC answer.
        const raw = await response.text().catch((error: unknown) => {
          throw describePeerFailure(peer, error, signal);
        });
        const body = jsonRpcBody(raw);
        if (!body) {
          throw new PeerError(
            `peer ${peer.name} (${peer.url}) answered ${v03 ? "message/stream" : "SendStreamingMessage"} with HTTP ${status}${response.statusText ? ` ${response.statusText}` : ""} and no event stream: ${summary(raw)}`,
          );
        }
        if (body.error !== undefined) {
          if ((body.error as { code?: unknown }).code === unsupportedOperation) return undefined;
          throw jsonRpcFailure(peer, status, body.error);
        }
        const only = eventOf(body.result);
        return (async function* () {
          yield only;
        })();
      }
      const body = response.body;
      return (async function* () {
        let received = 0;
        try {
          for await (const event of sseEvents(body, maxEventChars)) {
            const parsed = jsonRpcBody(event.data);
            if (!parsed) {
              throw new PeerError(
                `peer ${peer.name} (${peer.url}) sent an SSE event that is no JSON-RPC response after ${received} events: ${summary(event.data)}`,
              );
            }
            if (parsed.error !== undefined) throw jsonRpcFailure(peer, status, parsed.error);
            received++;
            yield eventOf(parsed.result);
          }
        } catch (error) {
          if (error instanceof PeerError || signal.aborted) throw describePeerFailure(peer, error, signal);
          const cause = socketCauseOf(error) ?? (error instanceof Error ? error.message : String(error));
          throw new PeerError(
            `peer ${peer.name} (${peer.url}) broke off its stream after ${received} events: ${cause}`,
          );
        } finally {
          // Stopped early (the turn was stopped): the connection goes too.
          await body.cancel().catch(() => undefined);
        }
      })();
    },

    async cancel(taskId: string, signal: AbortSignal): Promise<void> {
      let response: Response;
      let raw: string;
      try {
        response = await post(v03 ? "tasks/cancel" : "CancelTask", { id: taskId }, signal, "application/json");
        raw = await response.text();
      } catch (error) {
        throw describePeerFailure(peer, error, signal);
      }
      const body = jsonRpcBody(raw);
      if (!body) {
        throw new PeerError(
          `peer ${peer.name} (${peer.url}) answered CancelTask with HTTP ${response.status} without a JSON-RPC response: ${summary(raw)}`,
        );
      }
      if (body.error !== undefined) throw jsonRpcFailure(peer, response.status, body.error);
    },
  };
}

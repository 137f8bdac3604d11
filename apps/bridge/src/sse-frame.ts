import type { JsonValue } from "@bufbuild/protobuf";
import type { JsonRpcErrorObject } from "./json-rpc-error.js";
import type { JsonRpcId } from "./json-rpc-request.js";

/** The head of every SSE answer; X-Accel-Buffering stops nginx-style proxies from holding events back. */
export const sseHeaders = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
};

/** A comment: readers skip it, intermediaries see traffic. It carries no id, so event numbering is untouched. */
export const keepAliveComment = ": keep-alive\n\n";

/** One SSE event before framing. */
export interface SseEvent {
  readonly data: string;
  /** The event type; absent: a reader's default, "message". */
  readonly event?: string;
  /** What a reader sends back as Last-Event-ID. */
  readonly id?: string;
}

const lineBreaks = /\r\n|\r|\n/;
/** What would end a field early, plus NUL, which makes readers ignore an id. */
const notOneLine = /[\r\n\0]/;

/**
 * Frames one event: `event:` and `id:` lines when given, each line of `data`
 * on its own `data:` line (readers join them with LF), a blank line after. A
 * type or id that cannot be one line is left out rather than split into fields.
 */
export function formatSseEvent({ data, event, id }: SseEvent): string {
  const head =
    (event && !notOneLine.test(event) ? `event: ${event}\n` : "") + (id && !notOneLine.test(id) ? `id: ${id}\n` : "");
  // JSON data is always one line: the split only runs for text that has breaks.
  const body = lineBreaks.test(data) ? data.split(lineBreaks).join("\ndata: ") : data;
  return `${head}data: ${body}\n\n`;
}

/** The data of a stream's events: JSON-RPC wraps each result and error in a response, HTTP+JSON sends its own. */
export interface SseFrames {
  result(result: JsonValue): unknown;
  error(error: JsonRpcErrorObject): unknown;
}

/** JSON-RPC responses answering `id`, the data of a JSON-RPC stream's events. */
export function jsonRpcFrames(id: JsonRpcId): SseFrames {
  return {
    result: (result) => ({ jsonrpc: "2.0", id, result }),
    error: (error) => ({ jsonrpc: "2.0", id, error }),
  };
}

// Holds SendStreamingMessage SSE streams open over JSON-RPC: the clients of the memory figures of bench/load.mjs
// (the "streams" scaling part of bench/run.mjs) and of bench/held-streams.mjs.
import { Agent, request } from "node:http";

/** The headers of an A2A v1.0 JSON-RPC POST of `body`; `streaming` asks for SSE. bench/load.mjs sends the same. */
export function jsonRpcHeaders(body, streaming) {
  return {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "a2a-version": "1.0",
    ...(streaming ? { accept: "text/event-stream" } : {}),
  };
}

/**
 * Opens `count` streams at `url`, each with the JSON-RPC request body `bodyOf()` gives. `firstEvents` resolves
 * once every stream has its first event; `opened()` counts those that have; `ended()` waits for every stream to
 * end and counts those that ended well (HTTP 200, an event, no error event).
 */
export function openSseStreams(url, count, bodyOf) {
  const agent = new Agent({ keepAlive: true, maxSockets: count });
  let seen = 0;
  let allSeen;
  const firstEvents = new Promise((r) => (allSeen = r));
  const ends = Array.from(
    { length: count },
    () =>
      new Promise((done) => {
        const body = bodyOf();
        const req = request(
          url,
          {
            method: "POST",
            agent,
            headers: jsonRpcHeaders(body, true),
          },
          (res) => {
            let text = "";
            let first = false;
            res.setEncoding("utf8");
            res.on("data", (c) => {
              text += c;
              if (!first && text.includes("\n\n")) {
                first = true;
                if (++seen === count) allSeen();
              }
            });
            res.on("end", () => done(res.statusCode === 200 && !text.includes("event: error") && first));
            res.on("error", () => done(false));
          },
        );
        req.on("error", () => done(false));
        req.end(body);
      }),
  );
  return {
    firstEvents,
    opened: () => seen,
    async ended() {
      const results = await Promise.all(ends);
      agent.destroy();
      const ok = results.filter(Boolean).length;
      return { ok, failed: results.length - ok };
    },
  };
}

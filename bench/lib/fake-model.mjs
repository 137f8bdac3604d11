// An OpenAI-compatible streaming chat-completions endpoint on loopback for the bench scripts: each reply waits
// delayMs, then sends `chunks` chunks intervalMs apart, and the model stamps (performance.now() of this process)
// when each reply's first and last chunk went out.
import http from "node:http";

/** Starts the model; `calls` lists each reply with its send times, newest last. */
export async function startFakeModel({ delayMs, chunks, intervalMs }) {
  const calls = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const call = { receivedAt: performance.now(), firstChunkAt: undefined, lastChunkAt: undefined, sent: 0 };
      calls.push(call);
      res.writeHead(200, { "content-type": "text/event-stream" });
      let timer;
      const next = () => {
        if (res.destroyed) return;
        if (call.sent === chunks) {
          res.end("data: [DONE]\n\n");
          return;
        }
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: `c${call.sent}.` } }] })}\n\n`);
        call.lastChunkAt = performance.now();
        call.firstChunkAt ??= call.lastChunkAt;
        call.sent++;
        timer = setTimeout(next, intervalMs);
      };
      res.on("close", () => clearTimeout(timer));
      timer = setTimeout(next, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    baseUrl: `http://127.0.0.1:${server.address().port}/v1`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

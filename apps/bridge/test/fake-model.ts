import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One chat-completions request the model answered, with when (performance.now() of this process) it sent what. */
export interface ModelCall {
  readonly model: string;
  readonly receivedAt: number;
  firstChunkAt: number | undefined;
  lastChunkAt: number | undefined;
  readonly chunks: string[];
}

export interface FakeModel {
  /** The OpenAI-compatible API root (…/v1) for an openai agent's baseUrl. */
  readonly baseUrl: string;
  readonly calls: ModelCall[];
  close(): Promise<void>;
}

/** The model name an openai agent passes to this fake: wait `delayMs`, then `chunks` chunks `intervalMs` apart. */
export function modelName(delayMs: number, chunks: number, intervalMs: number): string {
  return `fake-${delayMs}-${chunks}-${intervalMs}`;
}

/**
 * An OpenAI-compatible streaming chat-completions endpoint on loopback. The
 * request's model name says how it streams (modelName); chunk i of a reply is
 * `c<i>.` so the whole reply says which chunks it holds and in what order. A
 * client that goes away ends the reply.
 */
export async function startFakeModel(): Promise<FakeModel> {
  const calls: ModelCall[] = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    req.on("end", () => {
      if (req.url !== "/v1/chat/completions") {
        res.writeHead(404).end();
        return;
      }
      const model = String((JSON.parse(body) as { model?: unknown }).model);
      const match = /^fake-(\d+)-(\d+)-(\d+)$/.exec(model);
      if (!match) {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `unknown model ${model}` } }));
        return;
      }
      const [delayMs, count, intervalMs] = match.slice(1).map(Number) as [number, number, number];
      const call: ModelCall = {
        model,
        receivedAt: performance.now(),
        firstChunkAt: undefined,
        lastChunkAt: undefined,
        chunks: [],
      };
      calls.push(call);
      res.writeHead(200, { "content-type": "text/event-stream" });
      let sent = 0;
      let timer: NodeJS.Timeout | undefined;
      const next = () => {
        if (res.destroyed) return;
        if (sent === count) {
          res.end("data: [DONE]\n\n");
          return;
        }
        const text = `c${sent}.`;
        res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`);
        const now = performance.now();
        call.firstChunkAt ??= now;
        call.lastChunkAt = now;
        call.chunks.push(text);
        sent++;
        timer = setTimeout(next, intervalMs);
      };
      res.on("close", () => clearTimeout(timer));
      timer = setTimeout(next, delayMs);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    calls,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createParley, loadConfig, type Parley, type ParleyConfig } from "@parley/server";
import { type Bridge, type BridgeOptions, createBridge } from "../src/bridge.js";
import { createConnectRoutes } from "../src/connect-routes.js";
import { createBridgeLogger } from "../src/logger.js";

export interface TestStack {
  readonly parley: Parley;
  readonly bridge: Bridge;
  readonly grpcAddress: string;
  close(): Promise<void>;
}

/**
 * A real embedded Parley (own LevelDB directory) behind a real bridge on a
 * loopback port. "echo" answers at once; "slow" streams its reply in 10 chunks
 * 200 ms apart, long enough to cancel, resubscribe or disconnect mid-task.
 * `connectRoutes`: the port also serves Parley's Connect services, as parley-bridge does.
 */
export async function startStack(
  configOverrides: Partial<ParleyConfig> = {},
  bridgeOptions: Partial<BridgeOptions> = {},
  { connectRoutes = false } = {},
): Promise<TestStack> {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bridge-"));
  const base = loadConfig({ argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "silent"], env: {} });
  const config: ParleyConfig = {
    ...base,
    agents: [
      { name: "echo", type: "echo" },
      { name: "slow", type: "echo", options: { delayMs: 200, chunks: 10 } },
    ],
    ...configOverrides,
  };
  const logger = createBridgeLogger("silent");
  const parley = await createParley(config, { logger });
  const { address } = await parley.listen();
  const bridge = await createBridge({
    upstream: parley.inProcessTransport(),
    cards: parley,
    port: 0,
    grpcAddress: address,
    logger,
    ...(connectRoutes
      ? {
          routes: [
            createConnectRoutes({ upstream: parley.inProcessTransport(), maxBodyBytes: config.limits.maxMessageBytes }),
          ],
        }
      : {}),
    ...bridgeOptions,
  });
  return {
    parley,
    bridge,
    grpcAddress: address,
    async close() {
      await bridge.close();
      await parley.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** POSTs a JSON-RPC body as-is (string or bytes), so malformed input reaches the bridge untouched. */
export async function postRaw(
  url: string,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : {} };
}

export function rpc(method: string, params?: unknown, id: string | number = 1): string {
  return JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
}

/** One SSE event: its `event:` name ("message" when absent), its `id:` line, and the parsed JSON of its data. */
export interface SseEvent {
  readonly event: string;
  readonly id: string | undefined;
  readonly data: Record<string, unknown>;
}

/** Reads an SSE body event by event; comment lines (keep-alives) go to `onComment`. */
export async function* sseEvents(
  body: ReadableStream<Uint8Array>,
  onComment?: (line: string) => void,
): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      let id: string | undefined;
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) onComment?.(line);
        else if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) yield { event, id, data: JSON.parse(data) };
      end = buffer.indexOf("\n\n");
    }
  }
}

/** Every item of a stream (an SDK client's events, an SSE reader's), in order. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of stream) items.push(item);
  return items;
}

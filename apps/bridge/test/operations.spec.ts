import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHealthMonitor, createObservability, createParley, loadConfig } from "@parley/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memoryLogger } from "../../../packages/server/test/fixtures/memory-logger.js";
import { createBridge } from "../src/bridge.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream } from "../src/upstream.js";
import { postRaw, rpc, startStack, type TestStack } from "./harness.js";

const allowedOrigin = "http://console.parley.test";

function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

const send = (text: string) =>
  rpc("SendMessage", { message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] } });

describe("metrics, request logs, readiness and CORS on the bridge's JSON-RPC port", () => {
  let stack: TestStack;
  const log = memoryLogger();
  beforeAll(async () => {
    // One observability for the process, as parley-bridge's embedded mode has it.
    const observability = createObservability(log.logger, { corsOrigins: [allowedOrigin] });
    stack = await startStack({}, { observability });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("counts JSON-RPC requests by method and code on /metrics and logs one line each, with the request id", async () => {
    const metrics = async () => (await fetch(`${stack.bridge.url}metrics`)).text();
    const before = await metrics();
    const ok = await postRaw(stack.bridge.url, send("hello"), { "a2a-version": "1.0" });
    expect(ok.status).toBe(200);
    const requestId = ok.headers.get("parley-request-id");
    expect(requestId).toBeTruthy();
    const unknown = await postRaw(stack.bridge.url, rpc("NoSuchMethod", {}), { "a2a-version": "1.0" });
    expect((unknown.json.error as { code: number }).code).toBe(-32601);
    const after = await metrics();
    const labels = { protocol: "jsonrpc", method: "SendMessage", code: "ok" };
    expect(sample(after, "parley_requests_total", labels) - sample(before, "parley_requests_total", labels)).toBe(1);
    expect(sample(after, "parley_requests_total", { protocol: "jsonrpc", code: "-32601" })).toBeGreaterThanOrEqual(1);
    expect(log.lines.filter((l) => l.requestId === requestId)).toEqual([
      expect.objectContaining({ msg: "request finished", protocol: "jsonrpc", method: "SendMessage", code: "ok" }),
    ]);
    expect(log.lines.some((l) => l.code === "-32601" && l.protocol === "jsonrpc")).toBe(true);
  });

  it("answers /healthz and /readyz", async () => {
    expect((await fetch(`${stack.bridge.url}healthz`)).status).toBe(200);
    const ready = await fetch(`${stack.bridge.url}readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready" });
  });

  it("lets an allowed origin call JSON-RPC from a browser and refuses any other", async () => {
    const preflight = await fetch(stack.bridge.url, {
      method: "OPTIONS",
      headers: {
        origin: allowedOrigin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type,a2a-version",
      },
    });
    expect(preflight.status).toBe(204);
    const allowed = await postRaw(stack.bridge.url, send("from a page"), {
      "a2a-version": "1.0",
      origin: allowedOrigin,
    });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe(allowedOrigin);
    const refused = await fetch(stack.bridge.url, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", origin: "http://elsewhere.test" },
      body: send("not from here"),
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("readiness of a bridge in remote mode", () => {
  it("follows the upstream server's grpc.health.v1 status", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-remote-ready-"));
    const config = loadConfig({ argv: ["--port", "0", "--data-dir", dataDir, "--log-level", "silent"], env: {} });
    const logger = createBridgeLogger("silent");
    const parley = await createParley(config, { logger });
    const { address } = await parley.listen();
    const remote = createRemoteUpstream(`http://${address}`);
    const bridge = await createBridge({
      upstream: remote.transport,
      cards: remote.cards,
      port: 0,
      logger,
      health: createHealthMonitor({ probe: (signal) => remote.readiness(signal) }),
    });
    try {
      const ready = await fetch(`${bridge.url}readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ checks: { upstream: "ok" } });
      // The server starts draining: the bridge in front of it stops being ready too.
      parley.health.drain();
      const draining = await fetch(`${bridge.url}readyz`);
      expect(draining.status).toBe(503);
      expect(await draining.json()).toMatchObject({ checks: { upstream: "upstream is NOT_SERVING" } });
    } finally {
      await bridge.close();
      remote.close();
      await parley.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

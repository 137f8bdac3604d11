import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { A2AService, Role, ThreadService } from "@parley/proto";
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
    stack = await startStack({}, { observability }, { connectRoutes: true });
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

  it("names Connect and gRPC-Web calls on its port by protocol, RPC and code, in the log and on /metrics", async () => {
    const connect = createConnectTransport({ baseUrl: stack.bridge.url, httpVersion: "1.1" });
    const grpcWeb = createGrpcWebTransport({ baseUrl: stack.bridge.url, httpVersion: "1.1" });
    const withId = (id: string) => ({ headers: { "parley-request-id": id, "a2a-version": "1.0" } });
    await createClient(ThreadService, connect).listThreads({}, withId("log-connect-list"));
    const refused = await createClient(ThreadService, connect)
      .getThreadHistory({ contextId: "" }, withId("log-connect-refused"))
      .then(
        () => undefined,
        (error: unknown) => ConnectError.from(error),
      );
    if (!refused) throw new Error("GetThreadHistory of an empty contextId was not refused");
    const stream = createClient(A2AService, grpcWeb).sendStreamingMessage(
      {
        message: {
          messageId: crypto.randomUUID(),
          role: Role.USER,
          parts: [{ content: { case: "text", value: "hi" } }],
        },
      },
      withId("log-grpc-web-stream"),
    );
    for await (const _ of stream) {
      // Read to the end: the line is written when the stream finishes.
    }
    const unknownPath = await fetch(`${stack.bridge.url}parley.v1.ThreadService/NoSuchMethod`, {
      method: "POST",
      headers: { "content-type": "application/json", "parley-request-id": "log-connect-unknown" },
      body: "{}",
    });
    expect(unknownPath.status).toBe(404);
    // The lines are written when each response closes: wait for the last one.
    for (let i = 0; i < 100 && !log.lines.some((l) => l.requestId === "log-connect-unknown"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const lineOf = (id: string) => log.lines.filter((l) => l.requestId === id && l.msg === "request finished");
    expect(lineOf("log-connect-list")).toEqual([
      expect.objectContaining({ protocol: "connect", method: "parley.v1.ThreadService/ListThreads", code: "ok" }),
    ]);
    expect(lineOf("log-connect-refused")).toEqual([
      expect.objectContaining({
        protocol: "connect",
        method: "parley.v1.ThreadService/GetThreadHistory",
        code: Code[refused.code]!.replace(/[A-Z]/g, (c, i) => (i === 0 ? c : `_${c}`)).toLowerCase(),
        error: refused.rawMessage,
      }),
    ]);
    expect(lineOf("log-grpc-web-stream")).toEqual([
      expect.objectContaining({
        protocol: "grpc-web",
        method: "lf.a2a.v1.A2AService/SendStreamingMessage",
        code: "ok",
      }),
    ]);
    // A path that names no RPC is not a label: it counts as "http".
    expect(lineOf("log-connect-unknown")).toEqual([expect.objectContaining({ protocol: "connect", method: "http" })]);
    const metrics = await (await fetch(`${stack.bridge.url}metrics`)).text();
    expect(
      sample(metrics, "parley_requests_total", {
        protocol: "connect",
        method: "parley.v1.ThreadService/ListThreads",
        code: "ok",
      }),
    ).toBeGreaterThanOrEqual(1);
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

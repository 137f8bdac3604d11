import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { A2AService } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./fixtures/otlp-receiver.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { sendRequest } from "./harness.js";

// Two Parley servers, each its own process with its own OpenTelemetry SDK, exporting to one
// receiver: A's agent is the a2a peer agent, which forwards every turn to B over gRPC.
describe("one trace across two Parley servers", () => {
  let receiver: OtlpReceiver;
  /** Stands in for an OpenAI-compatible model and for a push receiver: records each request's headers. */
  let outside: Server;
  const outsideRequests: { path: string; headers: IncomingHttpHeaders }[] = [];
  let serverA: SpawnedServer;
  let serverB: SpawnedServer;
  const dirs: string[] = [];
  const tracingEnv = (service: string, endpoint: string) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: service,
    // Export within 100 ms of a span's end rather than the default 5 s.
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-trace-"));
    dirs.push(dir);
    return dir;
  };

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    outside = createServer((req, res) => {
      outsideRequests.push({ path: req.url ?? "", headers: req.headers });
      req.resume();
      req.on("end", () => {
        if (req.url === "/v1/chat/completions") {
          res.writeHead(200, { "content-type": "text/event-stream" });
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: "model says hi" } }] })}\n\n`);
          res.end("data: [DONE]\n\n");
        } else res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => outside.listen(0, "127.0.0.1", resolve));
    const outsideUrl = `http://127.0.0.1:${(outside.address() as AddressInfo).port}`;
    serverB = await spawnServer({ dataDir: tempDir(), env: tracingEnv("parley-b", receiver.endpoint) });
    const configFile = join(tempDir(), "a.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        agents: [
          { name: "relay", type: "a2a", options: { peer: "b" } },
          { name: "model", type: "openai", options: { baseUrl: `${outsideUrl}/v1`, model: "test-model" } },
        ],
        peers: [{ name: "b", url: serverB.baseUrl, protocol: "grpc" }],
        capabilities: { pushNotifications: true },
        // The push receiver listens on loopback, which push notifications may not reach by default.
        push: { allowedAddresses: ["127.0.0.1"] },
      }),
    );
    serverA = await spawnServer({
      dataDir: tempDir(),
      args: ["--config", configFile],
      env: tracingEnv("parley-a", receiver.endpoint),
    });
  }, 60_000);
  afterAll(async () => {
    for (const server of [serverA, serverB]) {
      server?.closeClients();
      server?.child.kill("SIGTERM");
      await server?.exited;
    }
    await receiver?.close();
    await new Promise((resolve) => outside?.close(resolve));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("continues the caller's traceparent through A's RPC, turn, agent step and store, into B's spans", async () => {
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    // A Connect call (HTTP/2) into A, carrying the caller's W3C trace context.
    const client = createClient(A2AService, createConnectTransport({ baseUrl: serverA.baseUrl, httpVersion: "2" }));
    const reply = await client.sendMessage(sendRequest("traced-ctx", "across two servers"), {
      headers: { "a2a-version": "1.0", traceparent: `00-${traceId}-${callerSpanId}-01` },
    });
    expect(reply.payload.case).toBe("task");

    const inTrace = (spans: readonly ReceivedSpan[], service: string) =>
      spans.filter((s) => s.traceId === traceId && s.service === service);
    await receiver.waitFor((spans) => {
      const b = inTrace(spans, "parley-b");
      return b.some((s) => s.name === "agent.step") && inTrace(spans, "parley-a").some((s) => s.name === "parley.turn");
    });
    const a = inTrace(receiver.spans, "parley-a");
    const b = inTrace(receiver.spans, "parley-b");
    const named = (spans: readonly ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

    // A: the RPC span is the caller's child; the turn, the agent step and the store appends hang below it.
    const rpcA = named(a, "lf.a2a.v1.A2AService/SendMessage");
    expect(rpcA).toHaveLength(1);
    expect(rpcA[0]!.parentSpanId).toBe(callerSpanId);
    expect(rpcA[0]!.attributes["parley.protocol"]).toBe("connect");
    const turnA = named(a, "parley.turn")[0]!;
    const stepA = named(a, "agent.step")[0]!;
    expect(stepA.parentSpanId).toBe(turnA.spanId);
    expect(named(a, "store.append").length).toBeGreaterThanOrEqual(2);

    // B: its RPC span (the peer agent streams over gRPC) is a child of A's agent step: one trace, A -> B.
    const rpcB = named(b, "lf.a2a.v1.A2AService/SendStreamingMessage");
    expect(rpcB).toHaveLength(1);
    expect(rpcB[0]!.parentSpanId).toBe(stepA.spanId);
    expect(rpcB[0]!.attributes["parley.protocol"]).toBe("grpc");
    expect(named(b, "agent.step")).toHaveLength(1);
    expect(named(b, "store.append").length).toBeGreaterThanOrEqual(2);
  });

  it("propagates the trace to the model endpoint and to push receivers", async () => {
    const traceId = randomBytes(16).toString("hex");
    const client = createClient(A2AService, createConnectTransport({ baseUrl: serverA.baseUrl, httpVersion: "2" }));
    const pushUrl = `http://127.0.0.1:${(outside.address() as AddressInfo).port}/push`;
    await client.sendMessage(
      {
        ...sendRequest("traced-model-ctx", "ask the model"),
        configuration: { taskPushNotificationConfig: { url: pushUrl, token: "t" } },
      },
      {
        headers: {
          "a2a-version": "1.0",
          "parley-agent": "model",
          traceparent: `00-${traceId}-${randomBytes(8).toString("hex")}-01`,
        },
      },
    );
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "agent.step"));
    const deadline = Date.now() + 10_000;
    while (!outsideRequests.some((r) => r.path === "/push") && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const traceOf = (r: { headers: IncomingHttpHeaders }) => String(r.headers.traceparent ?? "").split("-")[1];
    const model = outsideRequests.filter((r) => r.path === "/v1/chat/completions");
    expect(model).toHaveLength(1);
    expect(traceOf(model[0]!)).toBe(traceId);
    const pushes = outsideRequests.filter((r) => r.path === "/push");
    expect(pushes.length).toBeGreaterThan(0);
    for (const push of pushes) expect(traceOf(push)).toBe(traceId);
  });
});

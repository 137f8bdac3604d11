import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OtlpReceiver, startOtlpReceiver } from "../../../packages/server/test/fixtures/otlp-receiver.js";
import { postRaw, rpc } from "./harness.js";

const bridgeBinary = fileURLToPath(new URL("../dist/main.js", import.meta.url));

// parley-bridge in embedded mode, as `npm start` runs it, with tracing switched on by OTEL_* alone.
describe("a traceparent on JSON-RPC", () => {
  let receiver: OtlpReceiver;
  let child: ReturnType<typeof spawn>;
  let url: string;
  const dataDir = mkdtempSync(join(tmpdir(), "parley-bridge-trace-"));
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    child = spawn(process.execPath, [bridgeBinary, "--port", "0", "--grpc-port", "0", "--data-dir", dataDir], {
      env: {
        PATH: process.env.PATH ?? "",
        PORT: "0",
        PARLEY_LOG_LEVEL: "warn",
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_BSP_SCHEDULE_DELAY: "100",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => {
      stderr += c;
    });
    url = await new Promise<string>((resolve, reject) => {
      child.stdout!.on("data", (c: Buffer) => {
        stdout += c;
        const match = /JSON-RPC\s+(\S+)/.exec(stdout);
        if (match) resolve(match[1]!);
      });
      child.once("exit", (code) => reject(new Error(`parley-bridge exited ${code} before listening: ${stderr}`)));
    });
  }, 30_000);
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
    await receiver?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }, 30_000);

  it("becomes the parent of the bridge's span, which is the parent of the server's RPC, turn and agent step", async () => {
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    const res = await postRaw(
      url,
      rpc("SendMessage", {
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "traced over JSON-RPC" }] },
      }),
      { "a2a-version": "1.0", traceparent: `00-${traceId}-${callerSpanId}-01` },
    );
    expect(res.status).toBe(200);
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "agent.step"));
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "SendMessage"));
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    // One process, one pipeline: the embedded server's spans carry the bridge's service name.
    expect(new Set(spans.map((s) => s.service))).toEqual(new Set(["parley-bridge"]));
    const jsonRpc = spans.find((s) => s.name === "SendMessage")!;
    expect(jsonRpc.parentSpanId).toBe(callerSpanId);
    expect(jsonRpc.attributes["rpc.system"]).toBe("jsonrpc");
    const rpcSpan = spans.find((s) => s.name === "lf.a2a.v1.A2AService/SendMessage")!;
    expect(rpcSpan.parentSpanId).toBe(jsonRpc.spanId);
    expect(rpcSpan.attributes["parley.protocol"]).toBe("in-process");
    const turn = spans.find((s) => s.name === "parley.turn")!;
    expect(spans.find((s) => s.name === "agent.step")!.parentSpanId).toBe(turn.spanId);
  });

  it("traces an HTTP+JSON request the same way, its span marked rest", async () => {
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    const res = await postRaw(
      `${url}message:send`,
      JSON.stringify({
        message: { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text: "traced over HTTP+JSON" }] },
      }),
      { "a2a-version": "1.0", traceparent: `00-${traceId}-${callerSpanId}-01` },
    );
    expect(res.status).toBe(200);
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "agent.step"));
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === traceId && s.name === "SendMessage"));
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    const rest = spans.find((s) => s.name === "SendMessage")!;
    expect(rest.parentSpanId).toBe(callerSpanId);
    expect(rest.attributes["parley.protocol"]).toBe("rest");
    const rpcSpan = spans.find((s) => s.name === "lf.a2a.v1.A2AService/SendMessage")!;
    expect(rpcSpan.parentSpanId).toBe(rest.spanId);
  });
});

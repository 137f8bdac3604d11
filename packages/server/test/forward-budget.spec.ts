// Loops that leave no trace: server A's a2a agent points at a plain A2A JSON-RPC relay that drops contextId and
// all metadata (Parley's chain context with it) and forwards to A again. A's agent bounds its own forwards.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { messageText } from "@parley/domain";
import { createForwardBudget } from "@parley/domain/internal";
import { SendMessageRequestSchema, SendMessageResponseSchema, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config/load-config.js";
import { ConfigError } from "../src/config/sources.js";
import { freePort } from "./fixtures/free-port.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

/** A relay that knows nothing of Parley: each SendMessage goes on as a fresh message with the text alone. */
function startStrippingRelay(target: () => TestServer) {
  let forwarded = 0;
  const server: Server = createServer((req, res) => {
    // Only JSON-RPC posts are relayed; a peer's card read (GET) finds none, so the agent sends without a stream.
    if (req.method !== "POST") {
      res.writeHead(404).end();
      return;
    }
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      body += c;
    });
    req.on("end", async () => {
      const rpc = JSON.parse(body) as { id: number; params: unknown };
      const request = fromJson(SendMessageRequestSchema, rpc.params as never, { ignoreUnknownFields: true });
      const text = messageText(request.message!);
      forwarded++;
      const answer = await target()
        .a2a("grpc")
        .sendMessage({ message: userMessage(text) });
      // The answer goes back without Parley's metadata either.
      if (answer.payload.case === "task") answer.payload.value.metadata = undefined;
      else if (answer.payload.case === "message") answer.payload.value.metadata = undefined;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: rpc.id, result: toJson(SendMessageResponseSchema, answer) }));
    });
  });
  return {
    server,
    forwarded: () => forwarded,
    listen: (port: number) => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve)),
  };
}

describe("an a2a agent's forward budget", () => {
  let a: TestServer;
  const relay = startStrippingRelay(() => a);

  beforeAll(async () => {
    const port = await freePort();
    await relay.listen(port);
    a = await startTestServer({
      peers: [{ name: "relay", url: `http://127.0.0.1:${port}/`, protocol: "jsonrpc" }],
      agents: [{ name: "forwarder", type: "a2a", options: { peer: "relay" } }],
    });
  });
  afterAll(async () => {
    await a?.close();
    await new Promise<void>((resolve) => relay.server.close(() => resolve()));
  });

  it("stops a loop through a metadata-stripping relay after maxRepeats forwards, with LOOP_SUSPECTED", async () => {
    const reply = await a.a2a("grpc").sendMessage({ message: userMessage("round and round") });
    expect(reply.payload.case).toBe("task");
    const task = reply.payload.value as Task;
    expect(task.status?.state).toBe(TaskState.FAILED);
    const status = messageText(task.status!.message!);
    expect(status).toContain("LOOP_SUSPECTED: agent forwarder -> peer relay");
    expect(status).toContain("already forwarded this same text 5 times within 10000 ms (forwardBudget.maxRepeats 5)");
    // The default bound: five forwards, then the sixth pass through A refuses.
    expect(relay.forwarded()).toBe(5);
  }, 60_000);
});

describe("a configured forward budget", () => {
  let b: TestServer;
  const relay = startStrippingRelay(() => b);
  let relayUrl = "";

  beforeAll(async () => {
    const port = await freePort();
    await relay.listen(port);
    relayUrl = `http://127.0.0.1:${port}/`;
    b = await startTestServer({
      peers: [{ name: "relay", url: relayUrl, protocol: "jsonrpc" }],
      agents: [
        {
          name: "tight",
          type: "a2a",
          options: { peer: "relay", forwardBudget: { windowMs: 10_000, maxRepeats: 2, maxForwards: 1000 } },
        },
      ],
    });
  });
  afterAll(async () => {
    await b?.close();
    await new Promise<void>((resolve) => relay.server.close(() => resolve()));
  });

  it("takes its bound from agents[].options.forwardBudget", async () => {
    const reply = await b.a2a("grpc").sendMessage({ message: userMessage("again and again") });
    const task = reply.payload.value as Task;
    expect(messageText(task.status!.message!)).toContain(
      "already forwarded this same text 2 times within 10000 ms (forwardBudget.maxRepeats 2)",
    );
    expect(relay.forwarded()).toBe(2);
  }, 60_000);

  it("refuses a bound that is not a whole number of at least 0, at its full path", () => {
    const config = JSON.stringify({
      peers: [{ name: "relay", url: "http://127.0.0.1:9/", protocol: "jsonrpc" }],
      agents: [{ name: "x", type: "a2a", options: { peer: "relay", forwardBudget: { maxRepeats: -1, windw: 5 } } }],
    });
    const dir = mkdtempSync(join(tmpdir(), "parley-forward-budget-"));
    const path = join(dir, "config.json");
    writeFileSync(path, config);
    let problems: string[] = [];
    try {
      loadConfig({ argv: ["--config", path], env: {} });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems = error.problems.map((p) => `${p.path}: ${p.message}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^agents\[0\]\.options\.forwardBudget\.maxRepeats: Too small/),
        expect.stringMatching(/^agents\[0\]\.options\.forwardBudget\.windw: unknown key/),
      ]),
    );
  });
});

describe("createForwardBudget", () => {
  it("counts repeats and all forwards per window, and forgets them once the window has passed", () => {
    let now = 0;
    const charge = createForwardBudget(
      "a",
      { name: "p", url: "http://p" },
      { windowMs: 1000, maxRepeats: 2, maxForwards: 3 },
      () => now,
    );
    charge("x");
    charge("x");
    expect(() => charge("x")).toThrow(/^LOOP_SUSPECTED: agent a -> peer p \(http:\/\/p\) already forwarded/);
    charge("y");
    expect(() => charge("z")).toThrow(/^forward budget used up: .* 3 messages within 1000 ms/);
    now = 1000;
    charge("x");
    charge("x");
  });

  it("is off where its bounds are 0", () => {
    const charge = createForwardBudget("a", { name: "p", url: "u" }, { windowMs: 1000, maxRepeats: 0, maxForwards: 0 });
    for (let i = 0; i < 50; i++) charge("same");
  });
});

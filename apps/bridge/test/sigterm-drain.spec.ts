// Issue 20, item 2: SIGTERM drains the JSON-RPC port as the gRPC port: both stop accepting at once, health turns
// NOT_SERVING, running tasks get PARLEY_SHUTDOWN_GRACE_MS, and what is still running then ends FAILED
// (interrupted), never CANCELED; every waiting caller gets its answer and every stream a final event.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { grpcHealthV1 } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpc } from "./harness.js";
import { metric, postOwnConnection, type SpawnedBridge, spawnBridge } from "./spawn-bridge.js";

const { HealthCheckResponse_ServingStatus: ServingStatus } = grpcHealthV1;
const unaryClients = 200;
const streamClients = 50;
/** Half of the unary calls go to "quick" (done well within the grace), the rest and the streams to "slow". */
const graceMs = 15_000;

const dir = mkdtempSync(join(tmpdir(), "parley-sigterm-"));
let bridge: SpawnedBridge;

beforeAll(async () => {
  bridge = await spawnBridge({
    dir,
    config: {
      agents: [
        // 20 chunks 300 ms apart: about 6 s, inside the grace period.
        { name: "quick", type: "echo", options: { delayMs: 300, chunks: 20, input: "text" } },
        // 100 chunks 1 s apart: still running when the grace period ends.
        { name: "slow", type: "echo", options: { delayMs: 1_000, chunks: 100, input: "text" } },
      ],
      limits: { agentStepTimeoutMs: 600_000 },
    },
    env: { PARLEY_SHUTDOWN_GRACE_MS: String(graceMs) },
  });
}, 120_000);

afterAll(async () => {
  bridge?.child.kill("SIGKILL");
  await bridge?.exited;
  rmSync(dir, { recursive: true, force: true });
});

/** Whether a new TCP connection to host:port is refused (the listener is closed). */
function refused(address: string): Promise<boolean> {
  const url = new URL(`http://${address}`);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

const send = (method: string, agent: string) =>
  postOwnConnection(
    `${bridge.url}agents/${agent}/`,
    rpc(method, {
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "0123456789".repeat(10) }] },
    }),
  );

async function bodyOf(res: import("node:http").IncomingMessage): Promise<string> {
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) text += chunk;
  return text;
}

/** What the test reads of an SSE event's JSON-RPC payload. */
interface StreamEvent {
  readonly result?: {
    readonly statusUpdate?: {
      readonly status: { readonly state: string; readonly message: { readonly parts: { readonly text: string }[] } };
    };
  };
}

/** The SSE events of a stream, as parsed JSON with their event name. */
async function eventsOf(res: import("node:http").IncomingMessage) {
  const text = await bodyOf(res);
  return text
    .split("\n\n")
    .filter((block) => block.includes("data: "))
    .map((block) => ({
      event: /^event: (.*)$/m.exec(block)?.[1] ?? "message",
      data: JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as StreamEvent,
    }));
}

describe("SIGTERM with 200 JSON-RPC requests and 50 SSE streams in flight", () => {
  it("refuses new connections on both ports at once, answers every call, ends every stream with a final event, cancels nothing", async () => {
    const health = createClient(
      grpcHealthV1.Health,
      createGrpcTransport({ baseUrl: `http://${bridge.grpcAddress}` }),
    ).watch({ service: "" });
    const healthIt = health[Symbol.asyncIterator]();
    expect((await healthIt.next()).value?.status).toBe(ServingStatus.SERVING);

    const unary = Array.from({ length: unaryClients }, (_, i) =>
      send("SendMessage", i % 2 === 0 ? "quick" : "slow").then(async (res) => ({
        status: res.statusCode,
        body: JSON.parse(await bodyOf(res)),
      })),
    );
    const streams = await Promise.all(
      Array.from({ length: streamClients }, () => send("SendStreamingMessage", "slow")),
    );
    const streamEvents = streams.map((res) => eventsOf(res));
    // Every call is in flight: its task runs (the gauge counts the unary calls' tasks and the streams').
    while ((await metric(bridge.url, "parley_running_tasks")) < unaryClients + streamClients) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    bridge.child.kill("SIGTERM");
    const notServing = healthIt.next();
    // Both ports refuse new connections while the slow tasks still run (they run far longer than the grace).
    let bothRefused = false;
    while (!bothRefused) {
      bothRefused = (await refused(new URL(bridge.url).host)) && (await refused(bridge.grpcAddress));
    }
    expect((await notServing).value?.status).toBe(ServingStatus.NOT_SERVING);

    const answers = await Promise.all(unary);
    const states: Record<string, number> = {};
    for (const { status, body } of answers) {
      expect(status).toBe(200);
      const task = body.result?.task;
      expect(task, JSON.stringify(body).slice(0, 300)).toBeDefined();
      const state = task.status.state as string;
      states[state] = (states[state] ?? 0) + 1;
      if (state === "TASK_STATE_FAILED") expect(task.status.message.parts[0].text).toMatch(/^interrupted: /);
      else expect(state).toBe("TASK_STATE_COMPLETED");
    }
    // The quick half finished within the grace; the slow half was cut at its end.
    expect(states).toEqual({ TASK_STATE_COMPLETED: unaryClients / 2, TASK_STATE_FAILED: unaryClients / 2 });

    for (const events of await Promise.all(streamEvents)) {
      const last = events.at(-1)!;
      expect(last.event).toBe("message");
      const update = last.data.result?.statusUpdate;
      expect(update?.status.state).toBe("TASK_STATE_FAILED");
      expect(update?.status.message.parts[0]?.text).toMatch(/^interrupted: the server shut down/);
      for (const e of events) expect(JSON.stringify(e.data)).not.toContain("TASK_STATE_CANCELED");
    }
    expect(await bridge.exited).toEqual({ code: 0, signal: null });
  }, 180_000);
});

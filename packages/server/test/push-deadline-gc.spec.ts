// Push deadlines under forced garbage collection, made for real: a parley-server process started with
// --expose-gc and a preload that collects every 5 ms posts to a receiver that accepts every connection and request
// and never answers. Every connection must be closed by Parley within push.timeoutMs (plus scheduling slack).
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { userMessage } from "./harness.js";

const pushTimeoutMs = 1_000;
/** A socket closed this long after the deadline still counts as held past it (a loaded machine's timer lag). */
const slackMs = 1_500;
const tasks = 12;
const gcLoop = fileURLToPath(new URL("./fixtures/gc-loop.mjs", import.meta.url));

interface Held {
  readonly openedAt: number;
  closedAt?: number;
}

describe("a push receiver that never answers, under forced garbage collection", () => {
  const dir = mkdtempSync(join(tmpdir(), "parley-push-gc-"));
  let receiver: Server;
  let port = 0;
  const held: Held[] = [];
  let server: SpawnedServer;

  beforeAll(async () => {
    // Reads every request and never writes a byte back.
    receiver = createServer((socket: Socket) => {
      const entry: Held = { openedAt: Date.now() };
      held.push(entry);
      socket.on("data", () => {});
      socket.on("error", () => {});
      socket.on("close", () => {
        entry.closedAt = Date.now();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    port = (receiver.address() as { port: number }).port;
    const config = join(dir, "parley.json");
    writeFileSync(
      config,
      JSON.stringify({
        capabilities: { pushNotifications: true },
        push: {
          allowedHosts: ["localhost"],
          allowedAddresses: ["127.0.0.1", "::1"],
          timeoutMs: pushTimeoutMs,
          maxAttempts: 1,
        },
      }),
    );
    server = await spawnServer({
      dataDir: join(dir, "data"),
      args: ["--config", config],
      nodeArgs: ["--expose-gc", "--import", gcLoop],
      env: { PARLEY_RATE_LIMIT: "0" },
    });
  }, 60_000);

  afterAll(async () => {
    server?.child.kill("SIGKILL");
    server?.closeClients();
    await server?.exited;
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("closes every POST's connection within push.timeoutMs", async () => {
    const client = server.a2a();
    for (let i = 0; i < tasks; i++) {
      const answer = await client.sendMessage({
        message: userMessage(`push through the collector ${i}`, { contextId: `ctx-${randomUUID()}` }),
        configuration: {
          taskPushNotificationConfig: { url: `http://localhost:${port}/hook`, token: `t${i}` },
        },
      });
      expect(answer.payload.case === "task" && answer.payload.value.status?.state).toBe(TaskState.COMPLETED);
    }
    // Every task's events are posted one after another (each POST cut at the deadline, never retried): wait until
    // the receiver has seen at least one connection per task and every connection it saw is closed.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const open = held.filter((h) => h.closedAt === undefined);
      if (held.length >= tasks && open.length === 0) break;
      // A connection open longer than the deadline allows already fails the test: no need to wait it out.
      if (open.some((h) => Date.now() - h.openedAt > pushTimeoutMs + slackMs)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const now = Date.now();
    const lifetimes = held.map((h) => (h.closedAt ?? now) - h.openedAt);
    expect(held.length).toBeGreaterThanOrEqual(tasks);
    expect(Math.max(...lifetimes), `connection lifetimes (ms): ${lifetimes.join(", ")}`).toBeLessThan(
      pushTimeoutMs + slackMs,
    );
    expect(held.filter((h) => h.closedAt === undefined)).toHaveLength(0);
    // The deadline's cut is logged as a dropped notification naming the setting.
    expect(server.stderr()).toMatch(/did not answer within 1000 ms \(push\.timeoutMs\)/);
  }, 90_000);
});

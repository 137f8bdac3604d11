// The retention policy, run by the sweeper of a real server on both backends, with an injected clock: idle threads
// go with their tasks, push configs and event logs; active threads and a tenant whose policy is off stay.
import { randomBytes } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { failure, sendRequest, startTestServer, type TestServer } from "./harness.js";

const day = 86_400_000;
let database: TestDatabase;
let dbUrl: string;

beforeAll(async () => {
  database = await createTestDatabase();
  dbUrl = database.url;
});

afterAll(async () => {
  await database?.drop();
});

const alpha = { authorization: "Bearer key-alpha", "a2a-version": "1.0" };
const beta = { authorization: "Bearer key-beta", "a2a-version": "1.0" };

/** Reads a metric's value from the server's Prometheus text. */
async function metric(server: TestServer, name: string): Promise<number> {
  const text = await server.parley.observability.metrics!.render();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : Number.NaN;
}

/** Waits (bounded) until `check` holds: the sweeper runs on its own timer. */
async function until(what: string, check: () => Promise<boolean>) {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

for (const backend of ["LevelDB", "PostgreSQL"] as const) {
  describe(`retention on ${backend}`, () => {
    it("the sweeper deletes idle threads with their tasks, push configs and event logs, and keeps the rest", async () => {
      let now = Date.now();
      const server = await startTestServer(
        {
          ...(backend === "PostgreSQL" ? { storeUrl: dbUrl } : {}),
          apiKeys: { "key-alpha": "alpha", "key-beta": "beta" },
          retention: { threadIdleDays: 7, tenants: { beta: "off" }, intervalMs: 60_000 },
          capabilities: { pushNotifications: true },
          // The stored config points at loopback (nothing is delivered to it), which is refused unless listed.
          push: { allowedAddresses: ["127.0.0.1"] },
          scaleOut: { sweepIntervalMs: 20 },
        },
        { now: () => now },
      );
      try {
        const a = server.a2a("grpc", alpha);
        const b = server.a2a("grpc", beta);
        const suffix = randomBytes(4).toString("hex");
        const idle = [`idle-1-${suffix}`, `idle-2-${suffix}`];
        const idleTasks: string[] = [];
        for (const contextId of idle) {
          for (const text of ["one", "two"]) {
            const reply = await a.sendMessage(sendRequest(contextId, text));
            if (reply.payload.case !== "task") throw new Error("expected a task reply");
            idleTasks.push(reply.payload.value.id);
          }
        }
        await a.createTaskPushNotificationConfig({ taskId: idleTasks[0]!, id: "hook", url: "http://127.0.0.1:9/hook" });
        const kept = `beta-${suffix}`;
        await b.sendMessage(sendRequest(kept, "kept by the off policy"));
        // A week and a day later one alpha thread is used again.
        now += 8 * day;
        const active = `active-${suffix}`;
        const activeReply = await a.sendMessage(sendRequest(active, "still here"));
        if (activeReply.payload.case !== "task") throw new Error("expected a task reply");
        const activeTask = activeReply.payload.value.id;
        await a.createTaskPushNotificationConfig({ taskId: activeTask, id: "hook", url: "http://127.0.0.1:9/hook" });

        // The sweeper's next tick runs the pass: nothing here calls it.
        await until(
          "the retention pass",
          async () => (await metric(server, "parley_retention_threads_purged_total")) >= 2,
        );
        expect(await metric(server, "parley_retention_threads_purged_total")).toBe(2);
        expect(await metric(server, "parley_retention_tasks_purged_total")).toBe(4);
        expect(await metric(server, "parley_retention_messages_purged_total")).toBe(8);
        expect(await metric(server, "parley_retention_last_success_timestamp_seconds")).toBeCloseTo(now / 1000, -1);
        expect(await metric(server, "parley_retention_errors_total")).toBe(0);

        const threads = server.threads(alpha);
        for (const contextId of idle) {
          expect((await failure(threads.getThreadHistory({ contextId }))).code).toBe(Code.NotFound);
        }
        for (const id of idleTasks) expect((await failure(a.getTask({ id }))).code).toBe(Code.NotFound);
        expect((await failure(a.getTaskPushNotificationConfig({ taskId: idleTasks[0]!, id: "hook" }))).code).toBe(
          Code.NotFound,
        );
        // The event log went too: a subscription to the deleted task finds nothing to replay.
        expect(
          (
            await failure(async () => {
              for await (const _ of a.subscribeToTask({ id: idleTasks[1]! })) {
                // no event may arrive
              }
            })
          ).code,
        ).toBe(Code.NotFound);
        const listed = (await threads.listThreads({ pageSize: 100 })).threads.map((t) => t.contextId);
        expect(listed).toEqual([active]);

        expect((await threads.getThreadHistory({ contextId: active })).messages).toHaveLength(2);
        expect((await a.getTask({ id: activeTask })).id).toBe(activeTask);
        expect((await a.getTaskPushNotificationConfig({ taskId: activeTask, id: "hook" })).url).toContain("/hook");
        expect((await server.threads(beta).getThreadHistory({ contextId: kept })).messages).toHaveLength(2);

        // Nothing is due any more: a pass run now deletes nothing.
        expect(await server.parley.retention.run()).toEqual({ threads: 0, messages: 0, tasks: 0, skipped: 0 });
      } finally {
        await server.close();
      }
    });
  });
}

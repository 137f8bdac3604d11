// A task that GetTask shows ended takes its context's next message at once: the run that ended may still be
// writing its outcome, and a send that arrives meanwhile waits for that write instead of failing CONTEXT_BUSY.
import { TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kitId } from "./fixtures/kit-requests.js";
import { startTestServer, type TestServer, userMessage } from "./harness.js";

describe("a send right after GetTask shows the context's task ended", () => {
  let server: TestServer;
  beforeAll(async () => {
    // Synced durability: each outcome write waits for an fsync, so the end is visible well before it is written.
    server = await startTestServer({ durability: "synced" });
  });
  afterAll(async () => server.close());

  it("is taken, not refused busy, turn after turn", async () => {
    const client = server.a2a("grpc");
    const contextId = `after-end-${crypto.randomUUID()}`;
    const outcomes: string[] = [];
    for (let turn = 0; turn < 25; turn++) {
      const sent = await client.sendMessage({
        message: userMessage(`turn ${turn}`, { contextId }),
        configuration: { returnImmediately: true },
      });
      expect(sent.payload.case).toBe("task");
      const taskId = sent.payload.case === "task" ? sent.payload.value.id : "";
      let state = TaskState.UNSPECIFIED;
      while (state !== TaskState.COMPLETED) state = (await client.getTask({ id: taskId })).status?.state ?? state;
      // The next send goes out the moment the end is seen.
      const next = client.sendMessage({ message: userMessage(`after ${turn}`, { contextId }) });
      outcomes.push(
        await next.then(
          (r) => r.payload.case ?? "none",
          (e: Error) => e.message,
        ),
      );
    }
    expect(outcomes).toEqual(Array(25).fill("task"));
  }, 60_000);
});

describe("a follow-up right after GetTask shows the task waiting for input", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ durability: "synced", agents: [{ name: "conformance", type: "conformance" }] });
  });
  afterAll(async () => server.close());

  it("continues the task, not refused busy, turn after turn", async () => {
    const client = server.a2a("grpc");
    // The conformance agent answers every message of this scenario with INPUT_REQUIRED.
    const ask = (taskId?: string) =>
      client.sendMessage({
        message: userMessage("more", { messageId: kitId("tck-input-required"), ...(taskId ? { taskId } : {}) }),
        configuration: { returnImmediately: true },
      });
    const first = await ask();
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    const outcomes: string[] = [];
    for (let turn = 0; turn < 25; turn++) {
      let state = TaskState.UNSPECIFIED;
      while (state !== TaskState.INPUT_REQUIRED) state = (await client.getTask({ id: taskId })).status?.state ?? state;
      outcomes.push(
        await ask(taskId).then(
          (r) => r.payload.case ?? "none",
          (e: Error) => e.message,
        ),
      );
    }
    expect(outcomes).toEqual(Array(25).fill("task"));
  }, 60_000);
});

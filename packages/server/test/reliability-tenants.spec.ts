import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, type ConnectError } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { ErrorInfoSchema, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "./fixtures/spawn-server.js";
import { failure, startTestServer, type TestServer, userMessage } from "./harness.js";

function reasonOf(error: ConnectError): string | undefined {
  return error.findDetails(ErrorInfoSchema)[0]?.reason;
}

const alice = { authorization: "Bearer key-alice" };
const bob = { authorization: "Bearer key-bob" };

describe.each(["grpc", "connect", "grpc-web"] as const)("tenant isolation over %s", (protocol) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({
      apiKeys: { "key-alice": "alice", "key-bob": "bob" },
      // A slow agent keeps alice's task running while bob probes it.
      agents: [
        { name: "echo", type: "echo" },
        { name: "slow", type: "echo", options: { delayMs: 500, chunks: 8 } },
      ],
    });
  });
  afterAll(async () => {
    await server.close();
  });

  it("refuses missing, malformed and unknown credentials as Unauthenticated with a message naming the problem", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{}, /missing credentials.*authorization: Bearer/],
      [{ authorization: "Basic a2V5LWFsaWNl" }, /malformed authorization header/],
      [{ authorization: "Bearer key-alice-not" }, /unknown API key/],
    ];
    for (const [headers, message] of cases) {
      const error = await failure(server.a2a(protocol, headers).getTask({ id: "whatever" }));
      expect(error.code, JSON.stringify(headers)).toBe(Code.Unauthenticated);
      expect(error.rawMessage).toMatch(message);
    }
  });

  it("shows one tenant's tasks and threads to no other: NOT FOUND, never forbidden", async () => {
    const a = server.a2a(protocol, alice);
    const b = server.a2a(protocol, bob);
    const contextId = `shared-${protocol}`;
    const done = (await a.sendMessage({ message: userMessage("alice's secret", { contextId }) })).payload.value as Task;
    expect(done.status?.state).toBe(TaskState.COMPLETED);
    const running = (
      await server.a2a(protocol, { ...alice, "parley-agent": "slow" }).sendMessage({
        message: userMessage("alice is still talking", { contextId }),
        configuration: { returnImmediately: true },
      })
    ).payload.value as Task;

    for (const task of [done, running]) {
      const get = await failure(b.getTask({ id: task.id }));
      expect([get.code, reasonOf(get)]).toEqual([Code.NotFound, "TASK_NOT_FOUND"]);
      const cancel = await failure(b.cancelTask({ id: task.id }));
      expect([cancel.code, reasonOf(cancel)]).toEqual([Code.NotFound, "TASK_NOT_FOUND"]);
      const subscribe = await failure(async () => {
        for await (const _ of b.subscribeToTask({ id: task.id })) {
          // Any event at all would be a leak.
          throw new Error(`bob received an event of alice's task ${task.id}`);
        }
      });
      expect([subscribe.code, reasonOf(subscribe)]).toEqual([Code.NotFound, "TASK_NOT_FOUND"]);
      // Continuing someone else's task by id must not find it either.
      const resume = await failure(b.sendMessage({ message: userMessage("let me in", { taskId: task.id }) }));
      expect([resume.code, reasonOf(resume)]).toEqual([Code.NotFound, "TASK_NOT_FOUND"]);
    }
    expect((await b.listTasks({})).tasks.map((t) => t.id)).not.toContain(done.id);
    expect((await b.listTasks({ contextId })).tasks).toEqual([]);

    const bobThreads = server.threads(bob);
    const history = await failure(bobThreads.getThreadHistory({ contextId }));
    expect(history.code).toBe(Code.NotFound);
    expect((await bobThreads.listThreads({})).threads.map((t) => t.contextId)).not.toContain(contextId);
    expect((await bobThreads.deleteThread({ contextId })).deleted).toBe(false);

    // The same contextId is a separate conversation for bob: not busy with alice's
    // running task, and none of alice's words in the history bob's agent is shown.
    const mine = (await b.sendMessage({ message: userMessage("bob here", { contextId }) })).payload.value as Task;
    expect(mine.status?.state).toBe(TaskState.COMPLETED);
    expect(mine.artifacts.map((x) => messageText(x)).join("")).toBe("bob here");
    const bobHistory = await bobThreads.getThreadHistory({ contextId });
    expect(bobHistory.messages.map((m) => messageText(m.message!))).toEqual(["bob here", "bob here"]);

    // Alice's data is untouched by all of bob's attempts.
    const aliceThreads = server.threads(alice);
    const aliceHistory = await aliceThreads.getThreadHistory({ contextId });
    expect(aliceHistory.messages.map((m) => messageText(m.message!))).toContain("alice's secret");
    expect(aliceHistory.messages.some((m) => messageText(m.message!).includes("bob here"))).toBe(false);
    const stillRunning = await a.getTask({ id: running.id });
    expect(stillRunning.status?.state).not.toBe(TaskState.CANCELED);
    await a.cancelTask({ id: running.id }).catch(() => undefined);
  });
});

describe("the server binary", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("says at start that it runs in open mode when no API keys are set, and serves tenant 'default'", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-open-"));
    dirs.push(dataDir);
    const server = await spawnServer({ dataDir });
    try {
      const res = await server.a2a().sendMessage({ message: userMessage("anyone") });
      expect((res.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
      expect(server.stderr()).toMatch(/open mode: no API keys configured, every caller is tenant 'default'/);
    } finally {
      server.closeClients();
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });

  it("does not claim open mode when PARLEY_API_KEYS is set, and refuses callers without a key", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-keys-"));
    dirs.push(dataDir);
    const server = await spawnServer({ dataDir, env: { PARLEY_API_KEYS: "key-alice=alice" } });
    try {
      const error = await failure(server.a2a().getTask({ id: "t" }));
      expect(error.code).toBe(Code.Unauthenticated);
      const found = await failure(server.a2a(alice).getTask({ id: "t" }));
      expect(found.code).toBe(Code.NotFound);
      expect(server.stderr()).not.toMatch(/open mode/);
    } finally {
      server.closeClients();
      server.child.kill("SIGTERM");
      await server.exited;
    }
  });
});

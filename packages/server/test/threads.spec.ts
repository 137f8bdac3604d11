import { Code, ConnectError } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { ErrorInfoSchema, HistoryOrder, Provenance, TargetKind, type Task, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collect, startTestServer, type TestServer, userMessage } from "./harness.js";

describe("ThreadService and TargetService", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ apiKeys: { "key-a": "tenant-a", "key-b": "tenant-b" } });
  });
  afterAll(async () => {
    await server.close();
  });
  const as = (key: string) => ({ authorization: `Bearer ${key}` });

  it("lists a tenant's conversations with their original contextIds, newest first", async () => {
    const a2a = server.a2a("connect", as("key-a"));
    await a2a.sendMessage({ message: userMessage("one", { contextId: "tenant/a" }) });
    await a2a.sendMessage({ message: userMessage("two", { contextId: "tenanta" }) });
    const { threads } = await server.threads(as("key-a")).listThreads({});
    expect(threads.map((t) => t.contextId)).toEqual(["tenanta", "tenant/a"]);
    expect(threads[0]?.messageCount).toBe(2n);
    expect((await server.threads(as("key-b")).listThreads({})).threads).toEqual([]);
  });

  it("pages history newest or oldest first with provenance", async () => {
    const a2a = server.a2a("connect", as("key-a"));
    for (const t of ["h1", "h2", "h3"]) await a2a.sendMessage({ message: userMessage(t, { contextId: "paged" }) });
    const threads = server.threads(as("key-a"));
    const newest = await threads.getThreadHistory({ contextId: "paged", pageSize: 4 });
    expect(newest.messages.map((m) => Number(m.sequence))).toEqual([6, 5, 4, 3]);
    expect(newest.messages[1]?.provenance).toBe(Provenance.USER);
    expect(newest.messages[0]?.provenance).toBe(Provenance.AGENT);
    const rest = await threads.getThreadHistory({ contextId: "paged", pageSize: 4, pageToken: newest.nextPageToken });
    expect(rest.messages.map((m) => Number(m.sequence))).toEqual([2, 1]);
    expect(rest.nextPageToken).toBe("");
    const oldest = await threads.getThreadHistory({
      contextId: "paged",
      order: HistoryOrder.OLDEST_FIRST,
      pageSize: 2,
    });
    expect(oldest.messages.map((m) => messageText(m.message!))).toEqual(["h1", "h1"]);
    expect(oldest.messages[0]?.message?.contextId).toBe("paged");
  });

  it("never lets one tenant read, reuse or delete another's thread", async () => {
    await server
      .a2a("connect", as("key-a"))
      .sendMessage({ message: userMessage("secret", { contextId: "shared-name" }) });
    const other = server.threads(as("key-b"));
    await expect(other.getThreadHistory({ contextId: "shared-name" })).rejects.toSatisfy(
      (e) => ConnectError.from(e).code === Code.NotFound,
    );
    const reuse = await server
      .a2a("connect", as("key-b"))
      .sendMessage({ message: userMessage("hi", { contextId: "shared-name" }) });
    const text = (reuse.payload.value as Task).artifacts.map((a) => messageText(a)).join("");
    expect(text).toBe("hi");
    expect((await other.deleteThread({ contextId: "shared-name" })).deleted).toBe(true);
    const mine = await server.threads(as("key-a")).getThreadHistory({ contextId: "shared-name" });
    expect(mine.thread?.messageCount).toBe(2n);
  });

  it("deletes a conversation and lists targets", async () => {
    const a2a = server.a2a("connect", as("key-a"));
    const created = await a2a.sendMessage({ message: userMessage("target me") });
    const contextId = (created.payload.value as { contextId: string }).contextId;
    const { targets } = await server.targets(as("key-a")).listTargets({});
    expect(targets[0]).toMatchObject({ kind: TargetKind.AGENT, ref: "echo" });
    expect(targets.some((t) => t.kind === TargetKind.THREAD && t.ref === contextId)).toBe(true);
    const removed = await server.threads(as("key-a")).deleteThread({ contextId });
    expect(removed).toMatchObject({ deleted: true, deletedMessageCount: 2n });
    expect((await server.threads(as("key-a")).deleteThread({ contextId })).deleted).toBe(false);
  });

  it("refuses missing and wrong credentials with Unauthenticated", async () => {
    await expect(server.threads().listThreads({})).rejects.toThrow(/missing credentials/);
    await expect(server.threads(as("nope")).listThreads({})).rejects.toSatisfy(
      (e) => ConnectError.from(e).code === Code.Unauthenticated,
    );
  });
});

describe("DeleteThread while a task runs", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ agents: [{ name: "echo", type: "echo", options: { delayMs: 40, chunks: 6 } }] });
  });
  afterAll(async () => {
    await server.close();
  });

  it("refuses with CONTEXT_BUSY naming the task, keeps the thread, and deletes once the task ended", async () => {
    const a2a = server.a2a("connect");
    const threads = server.threads();
    const sent = await a2a.sendMessage({
      message: userMessage("still talking", { contextId: "busy-delete" }),
      configuration: { returnImmediately: true },
    });
    const running = sent.payload.value as Task;
    const refused = await threads.deleteThread({ contextId: "busy-delete" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(refused?.code).toBe(Code.Aborted);
    const info = refused?.findDetails(ErrorInfoSchema)[0];
    expect(info?.reason).toBe("CONTEXT_BUSY");
    expect(info?.metadata.taskId).toBe(running.id);
    expect(refused?.rawMessage).toMatch(/busy/);
    // Follow the task to its end (it may already have ended, then the subscribe is refused).
    await collect(a2a.subscribeToTask({ id: running.id })).catch(() => []);
    for (let i = 0; i < 500 && (await a2a.getTask({ id: running.id })).status?.state !== TaskState.COMPLETED; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect((await a2a.getTask({ id: running.id })).status?.state).toBe(TaskState.COMPLETED);
    const history = await threads.getThreadHistory({ contextId: "busy-delete" });
    expect(history.thread?.messageCount).toBe(2n);
    expect(await threads.deleteThread({ contextId: "busy-delete" })).toMatchObject({ deleted: true });
  });
});

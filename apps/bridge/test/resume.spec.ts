import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "../../../packages/server/test/fixtures/spawn-server.js";
import { createTestDatabase } from "../../../packages/store/test/pg-helpers.js";
import { type Bridge, createBridge } from "../src/bridge.js";
import { createBridgeLogger } from "../src/logger.js";
import { createRemoteUpstream, type RemoteUpstream } from "../src/upstream.js";
import { postRaw, rpc, type SseEvent, sseEvents, startStack, type TestStack } from "./harness.js";

// Real replicas (`node dist/main.js`) sharing one PostgreSQL database, each behind its own bridge in remote mode.

async function openStream(
  url: string,
  body: string,
  headers: Record<string, string>,
  signal?: AbortSignal,
): Promise<AsyncGenerator<SseEvent>> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    signal,
  });
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  return sseEvents(res.body!);
}

/** Collects events until the stream ends, errors, or the connection is dropped under it. */
async function drain(events: AsyncGenerator<SseEvent>, into: SseEvent[]): Promise<void> {
  try {
    for await (const e of events) into.push(e);
  } catch {
    // A killed replica or a dropped connection ends the read; what arrived before stays in `into`.
  }
}

/** The text of artifact chunks, in both the 1.0 (`artifactUpdate`) and 0.3 (`artifact-update`) shapes. */
function chunkText(events: readonly SseEvent[]): string {
  return events
    .map((e) => {
      const result = e.data.result as Record<string, unknown> | undefined;
      const update = (result?.artifactUpdate ?? (result?.kind === "artifact-update" ? result : undefined)) as
        | { artifact?: { parts?: { text?: string }[] } }
        | undefined;
      return update?.artifact?.parts?.map((p) => p.text ?? "").join("") ?? "";
    })
    .join("");
}

function storedText(task: Record<string, unknown>): string {
  const artifacts = (task.artifacts ?? []) as { parts?: { text?: string }[] }[];
  return artifacts.map((a) => a.parts?.map((p) => p.text ?? "").join("") ?? "").join("");
}

/** Asserts the ids are `<taskId>:<n>` for n = first, first+1, ...: no gap and no duplicate across reconnects. */
function expectContiguous(events: readonly SseEvent[], taskId: string, first: number): void {
  const ids = events.filter((e) => e.event === "message").map((e) => e.id);
  expect(ids).toEqual(ids.map((_, i) => `${taskId}:${first + i}`));
}

const v1 = { "A2A-Version": "1.0" };

const sendParams = (contextId: string, text: string, returnImmediately: boolean) => ({
  message: { messageId: randomUUID(), contextId, role: "ROLE_USER", parts: [{ text }] },
  configuration: { returnImmediately },
});

async function startTask(url: string, text: string): Promise<string> {
  const sent = await postRaw(url, rpc("SendMessage", sendParams(`ctx-${randomUUID()}`, text, true)), v1);
  const task = (sent.json.result as { task: { id: string } }).task;
  return task.id;
}

async function getTask(url: string, taskId: string): Promise<Record<string, unknown>> {
  const got = await postRaw(url, rpc("GetTask", { id: taskId }), v1);
  return got.json.result as Record<string, unknown>;
}

interface Replica {
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  readonly upstream: RemoteUpstream;
  readonly bridge: Bridge;
}

describe("resumable SSE across PostgreSQL replicas, one bridge each", () => {
  const replicas: Replica[] = [];
  const dirs: string[] = [];
  let db: Awaited<ReturnType<typeof createTestDatabase>>;

  async function startReplica(): Promise<Replica> {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-resume-"));
    dirs.push(dataDir);
    const server = await spawnServer({
      dataDir,
      env: {
        PARLEY_STORE_URL: db.url,
        PARLEY_LEASE_TTL_MS: "1500",
        PARLEY_SWEEP_MS: "250",
        PARLEY_ECHO_DELAY_MS: "150",
        PARLEY_RATE_LIMIT: "0",
      },
    });
    const { child, address, exited } = server;
    const upstream = createRemoteUpstream(`http://${address}`);
    const bridge = await createBridge({
      upstream: upstream.transport,
      cards: upstream.cards,
      port: 0,
      logger: createBridgeLogger("silent"),
    });
    const replica = { child, exited, upstream, bridge };
    replicas.push(replica);
    return replica;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    // The first replica migrates alone so the other two start on a ready schema.
    await startReplica();
    await Promise.all([startReplica(), startReplica()]);
  }, 30_000);

  afterAll(async () => {
    for (const r of replicas) r.child.kill("SIGKILL");
    await Promise.all(replicas.map((r) => r.exited));
    for (const r of replicas) {
      r.upstream.close();
      await r.bridge.close();
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  });

  it("numbers SendStreamingMessage events from parley-stream-start and resumes them on another bridge (0.3)", async () => {
    const [, b, c] = replicas as [Replica, Replica, Replica];
    const text = "streamed through one bridge, resumed through another";
    const first: SseEvent[] = [];
    await drain(
      await openStream(b.bridge.url, rpc("SendStreamingMessage", sendParams(`ctx-${randomUUID()}`, text, false)), v1),
      first,
    );
    const taskId = (first[0]!.data.result as { task: { id: string } }).task.id;
    expect(first.every((e) => e.event === "message")).toBe(true);
    expectContiguous(first, taskId, 1);

    const resumed: SseEvent[] = [];
    await drain(
      await openStream(c.bridge.url, rpc("tasks/resubscribe", { id: taskId }), {
        "A2A-Version": "0.3",
        "Last-Event-ID": `${taskId}:3`,
      }),
      resumed,
    );
    expect(resumed.map((e) => e.id)).toEqual(first.slice(3).map((e) => e.id));
    expect(chunkText(first.slice(0, 3)) + chunkText(resumed)).toBe(storedText(await getTask(c.bridge.url, taskId)));
  });

  it("gives exactly the missed events on another bridge after the first replica is killed mid-stream", async () => {
    const [a, b, c] = replicas as [Replica, Replica, Replica];
    // The task runs on replica C, so killing A only cuts the subscriber's stream, not the task.
    const taskId = await startTask(c.bridge.url, "a reply long enough to be cut in the middle of its stream");
    const before: SseEvent[] = [];
    const stream = await openStream(a.bridge.url, rpc("SubscribeToTask", { id: taskId }), v1);
    for await (const e of stream) {
      before.push(e);
      if (before.length === 3) break;
    }
    a.child.kill("SIGKILL");
    await a.exited;
    await drain(stream, before);
    const received = before.filter((e) => e.event === "message");
    const lastId = received[received.length - 1]!.id!;

    const after: SseEvent[] = [];
    await drain(
      await openStream(b.bridge.url, rpc("SubscribeToTask", { id: taskId }), { ...v1, "Last-Event-ID": lastId }),
      after,
    );
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((e) => e.event === "message")).toBe(true);
    const all = [...received, ...after];
    expectContiguous(all, taskId, 1);
    const final = all[all.length - 1]!.data.result as { statusUpdate?: { status?: { state?: string } } };
    expect(final.statusUpdate?.status?.state).toBe("TASK_STATE_COMPLETED");
    const stored = await getTask(b.bridge.url, taskId);
    expect(chunkText(all)).toBe(storedText(stored));
    expect(storedText(stored)).not.toBe("");
  });

  it("keeps a task running when its stream is dropped on one replica, and resumes it after its end on another", async () => {
    // Replica A was killed by the test before; B runs the task, C serves the resume.
    const [, b, c] = replicas as [Replica, Replica, Replica];
    const text = "dropped on one replica, finished there, picked up on another";
    const before = await readThenDrop(
      b.bridge.url,
      rpc("SendStreamingMessage", sendParams(`ctx-${randomUUID()}`, text, false)),
      v1,
      3,
    );
    const taskId = (before[0]!.data.result as { task: { id: string } }).task.id;
    const stored = await waitForEnd(c.bridge.url, taskId);
    expect((stored.status as { state: string }).state).toBe("TASK_STATE_COMPLETED");
    const after: SseEvent[] = [];
    await drain(
      await openStream(b.bridge.url, rpc("SubscribeToTask", { id: taskId }), {
        ...v1,
        "Last-Event-ID": before[2]!.id!,
      }),
      after,
    );
    const all = [...before, ...after];
    expectContiguous(all, taskId, 1);
    const final = all[all.length - 1]!.data.result as { statusUpdate?: { status?: { state?: string } } };
    expect(final.statusUpdate?.status?.state).toBe("TASK_STATE_COMPLETED");
    expect(chunkText(all)).toBe(storedText(stored));
    expect(storedText(stored)).toContain(text);
  });

  it("refuses a malformed Last-Event-ID, or one naming another task, as -32602 naming the header", async () => {
    const [, b] = replicas as [Replica, Replica, Replica];
    const taskId = await startTask(b.bridge.url, "short");
    for (const lastEventId of ["no-seq-here", `${taskId}:`, `${taskId}:-1`, ":4"]) {
      const res = await postRaw(b.bridge.url, rpc("SubscribeToTask", { id: taskId }), {
        ...v1,
        "Last-Event-ID": lastEventId,
      });
      expect((res.json.error as { code: number }).code).toBe(-32602);
      expect((res.json.error as { message: string }).message).toContain("Last-Event-ID");
    }
    const other = await postRaw(b.bridge.url, rpc("SubscribeToTask", { id: taskId }), {
      ...v1,
      "Last-Event-ID": "some-other-task:2",
    });
    expect((other.json.error as { code: number }).code).toBe(-32602);
    expect((other.json.error as { message: string }).message).toContain("names task");
  });
});

/** Reads a stream's first `count` events, then drops the connection, as a client on a bad network would. */
async function readThenDrop(url: string, body: string, headers: Record<string, string>, count: number) {
  const drop = new AbortController();
  const got: SseEvent[] = [];
  const stream = await openStream(url, body, headers, drop.signal);
  for await (const e of stream) {
    got.push(e);
    if (got.length === count) break;
  }
  drop.abort();
  return got;
}

async function waitForEnd(url: string, taskId: string): Promise<Record<string, unknown>> {
  for (;;) {
    const task = await getTask(url, taskId);
    const state = (task.status as { state?: string } | undefined)?.state;
    if (state !== "TASK_STATE_SUBMITTED" && state !== "TASK_STATE_WORKING") return task;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("resumable SSE on one LevelDB-backed bridge (its durable event log)", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("numbers from the event log and resumes a dropped subscription without gap or duplicate", async () => {
    const url = `${stack.bridge.url}agents/slow/`;
    const taskId = await startTask(url, "dropped and picked up again on the same bridge");
    const before: SseEvent[] = [];
    const drop = new AbortController();
    const stream = await openStream(url, rpc("SubscribeToTask", { id: taskId }), v1, drop.signal);
    for await (const e of stream) {
      before.push(e);
      if (before.length === 4) break;
    }
    drop.abort();

    const after: SseEvent[] = [];
    await drain(
      await openStream(url, rpc("SubscribeToTask", { id: taskId }), { ...v1, "Last-Event-ID": before[3]!.id! }),
      after,
    );
    expect(after.length).toBeGreaterThan(0);
    const all = [...before, ...after];
    expectContiguous(all, taskId, 1);
    expect(chunkText(all)).toBe(storedText(await getTask(url, taskId)));
  });
  it("keeps a task running when its SendStreamingMessage is dropped, and resumes it by Last-Event-ID while it runs and after it ended", async () => {
    const url = `${stack.bridge.url}agents/slow/`;
    const text = "a reply dropped in the middle of its stream";
    const before = await readThenDrop(
      url,
      rpc("SendStreamingMessage", sendParams(`ctx-${randomUUID()}`, text, false)),
      v1,
      3,
    );
    const taskId = (before[0]!.data.result as { task: { id: string } }).task.id;
    expectContiguous(before, taskId, 1);

    const running: SseEvent[] = [];
    await drain(
      await openStream(url, rpc("SubscribeToTask", { id: taskId }), { ...v1, "Last-Event-ID": before[2]!.id! }),
      running,
    );
    expectContiguous([...before, ...running], taskId, 1);
    const final = running[running.length - 1]!.data.result as { statusUpdate?: { status?: { state?: string } } };
    expect(final.statusUpdate?.status?.state).toBe("TASK_STATE_COMPLETED");
    const stored = await waitForEnd(url, taskId);
    expect((stored.status as { state: string }).state).toBe("TASK_STATE_COMPLETED");
    expect(chunkText([...before, ...running])).toBe(storedText(stored));
    expect(storedText(stored)).toContain(text);

    // After the end, the same Last-Event-ID gives the same missing events (v1.0 and v0.3), and nothing is doubled.
    const ended: SseEvent[] = [];
    await drain(
      await openStream(url, rpc("SubscribeToTask", { id: taskId }), { ...v1, "Last-Event-ID": before[2]!.id! }),
      ended,
    );
    expect(ended.map((e) => e.id)).toEqual(running.map((e) => e.id));
    expect(ended.map((e) => e.data)).toEqual(running.map((e) => e.data));
    const legacy: SseEvent[] = [];
    await drain(
      await openStream(url, rpc("tasks/resubscribe", { id: taskId }), {
        "A2A-Version": "0.3",
        "Last-Event-ID": before[2]!.id!,
      }),
      legacy,
    );
    expect(legacy.map((e) => e.id)).toEqual(running.map((e) => e.id));
    // A plain subscribe to the finished task keeps the specification's error.
    const plain = await postRaw(url, rpc("SubscribeToTask", { id: taskId }), v1);
    expect((plain.json.error as { code: number }).code).toBe(-32004);
  });
});

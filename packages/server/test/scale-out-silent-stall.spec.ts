// A silent PostgreSQL stall as two replicas see it, made for real: both `parley-server` processes reach the
// database through one TCP relay that the test pauses (connections stay open, no byte moves, nothing is reset)
// while tasks run on both. Whatever the stall did to each run, every task ends terminal, and every stream that
// followed a task gets its final event, within the documented bound after the database answers again.
import { randomUUID } from "node:crypto";
import { type StreamResponse, TaskState } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { createReplicaSet, type Replica } from "./fixtures/replica-set.js";
import { startTcpProxy, type TcpProxy } from "./fixtures/tcp-proxy.js";
import { sendRequest } from "./harness.js";

const leaseTtlMs = 3_000;
const dbTimeoutMs = 2_000;
const sweepMs = 250;
/** The stall of the issue: longer than the lease and than a statement's timeout, shorter than the outage tolerance. */
const stallMs = 10_000;
/** Each reply streams in 8 chunks this far apart: runs that span the stall. */
const echoDelayMs = 1_500;
/**
 * The documented bound (docs: scaling) on how long after the database answers again every task is terminal and
 * its log ends: leaseTtlMs + 3 x sweepIntervalMs + 2 x dbTimeoutMs + 1 s. The test allows 10 s more for a
 * loaded machine, and that is still far under the 60 s the issue asks for.
 */
const documentedBoundMs = leaseTtlMs + 3 * sweepMs + 2 * dbTimeoutMs + 1_000;
const boundMs = documentedBoundMs + 10_000;
const tasksPerReplica = 4;

const terminal = (state: TaskState | undefined) =>
  state === TaskState.COMPLETED ||
  state === TaskState.FAILED ||
  state === TaskState.CANCELED ||
  state === TaskState.REJECTED;

const lastState = (events: readonly StreamResponse[]): TaskState | undefined => {
  const last = events[events.length - 1];
  if (last?.payload.case === "statusUpdate") return last.payload.value.status?.state;
  if (last?.payload.case === "message") return TaskState.COMPLETED;
  return undefined;
};

let database: TestDatabase;
let proxy: TcpProxy;
const replicaSet = createReplicaSet({
  PARLEY_LEASE_TTL_MS: String(leaseTtlMs),
  PARLEY_DB_TIMEOUT_MS: String(dbTimeoutMs),
  PARLEY_SWEEP_MS: String(sweepMs),
  PARLEY_ECHO_DELAY_MS: String(echoDelayMs),
});

beforeAll(async () => {
  database = await createTestDatabase();
  const target = new URL(database.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  await replicaSet.start(proxy.url(database.url));
  await replicaSet.start(proxy.url(database.url));
}, 60_000);

afterAll(async () => {
  proxy?.resume();
  await replicaSet.stopAll();
  await proxy?.close();
  await database?.drop();
}, 30_000);

interface Followed {
  readonly replica: Replica;
  readonly taskId: string;
  /** The sender's own stream. */
  readonly sent: StreamResponse[];
  readonly sending: Promise<unknown>;
  /** SubscribeToTask on the other replica. */
  readonly watched: StreamResponse[];
  readonly watching: Promise<unknown>;
  /** How either stream failed, if it did. */
  readonly errors: string[];
}

async function startTask(replica: Replica, other: Replica): Promise<Followed> {
  const errors: string[] = [];
  const stream = replica.client
    .sendStreamingMessage(sendRequest(`ctx-${randomUUID()}`, "a reply through a stall"))
    [Symbol.asyncIterator]();
  const head = (await stream.next()).value as StreamResponse;
  const taskId = head.payload.case === "task" ? head.payload.value.id : "";
  expect(taskId).not.toBe("");
  const sent: StreamResponse[] = [head];
  const sending = (async () => {
    for (let next = await stream.next(); !next.done; next = await stream.next()) sent.push(next.value);
  })().catch((e: unknown) => errors.push(`sent: ${String(e)}`));
  // The subscription is under way (its first event is here) before the stall: one that starts during it is
  // refused UNAVAILABLE, which is a different case.
  const watched: StreamResponse[] = [];
  const subscription = other.client.subscribeToTask({ id: taskId })[Symbol.asyncIterator]();
  const first = await subscription.next();
  if (!first.done) watched.push(first.value);
  const watching = (async () => {
    for (let next = await subscription.next(); !next.done; next = await subscription.next()) watched.push(next.value);
  })().catch((e: unknown) => errors.push(`watched: ${String(e)}`));
  return { replica, taskId, sent, sending, watched, watching, errors };
}

describe("two replicas through a 10 s silent PostgreSQL stall", () => {
  it("ends every task terminal, with a final event on every stream, within the documented bound", async () => {
    const [a, b] = [replicaSet.replicas[0]!, replicaSet.replicas[1]!];
    // Read through the replica that does not run the task: it answers from the store, not from a run.
    const other = (r: Replica) => (r === a ? b : a);
    const tasks: Followed[] = [];
    for (let i = 0; i < tasksPerReplica; i++) {
      tasks.push(await startTask(a, b), await startTask(b, a));
    }
    proxy.pause();
    await new Promise((resolve) => setTimeout(resolve, stallMs));
    proxy.resume();
    const answered = Date.now();

    const pending = new Set(tasks);
    while (pending.size > 0 && Date.now() - answered < boundMs) {
      for (const task of [...pending]) {
        const stored = await other(task.replica)
          .client.getTask({ id: task.taskId }, { timeoutMs: 2 * dbTimeoutMs })
          .catch(() => undefined);
        if (terminal(stored?.status?.state)) pending.delete(task);
      }
      if (pending.size > 0) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const stuck = await Promise.all(
      [...pending].map(async (t) => {
        const stored = await other(t.replica)
          .client.getTask({ id: t.taskId }, { timeoutMs: 2 * dbTimeoutMs })
          .catch((e: unknown) => String(e));
        return `${t.taskId}: ${typeof stored === "string" ? stored : TaskState[stored.status?.state ?? 0]}`;
      }),
    );
    const logText = () =>
      replicaSet.replicas
        .flatMap((r, i) =>
          r
            .stderr()
            .split("\n")
            .map((line) => [i, line] as const),
        )
        .flatMap(([i, line]) => {
          try {
            const entry = JSON.parse(line) as {
              time: number;
              msg: string;
              taskId?: string;
              err?: { message?: string };
            };
            return [`#${i} ${entry.time - answered} ${entry.taskId ?? ""} ${entry.msg} ${entry.err?.message ?? ""}`];
          } catch {
            return [];
          }
        })
        .join("\n");
    expect(stuck.join("\n"), logText()).toBe("");
    const allTerminalMs = Date.now() - answered;

    // Every stream ends (within the rest of the bound), and its last event is the task's final status.
    const endedStreams = new Set<Promise<unknown>>();
    const streams = tasks.flatMap((t) => [t.sending, t.watching]).map((p) => p.then(() => endedStreams.add(p)));
    await Promise.race([
      Promise.all(streams),
      new Promise((resolve) => setTimeout(resolve, Math.max(1_000, boundMs - (Date.now() - answered)))),
    ]);
    const open: string[] = [];
    for (const t of tasks) {
      if (!endedStreams.has(t.sending)) open.push(`${t.taskId} sent: ${t.sent.map((e) => e.payload.case).join()}`);
      if (!endedStreams.has(t.watching))
        open.push(`${t.taskId} watched: ${t.watched.map((e) => e.payload.case).join()}`);
    }
    expect(open, "streams still open").toEqual([]);
    for (const t of tasks) {
      const stored = await t.replica.client.getTask({ id: t.taskId });
      expect(TaskState[lastState(t.sent) ?? 0], `the sender's stream of ${t.taskId} ${t.errors.join()}`).toBe(
        TaskState[stored.status?.state ?? 0],
      );
      expect(TaskState[lastState(t.watched) ?? 0], `the subscriber's stream of ${t.taskId} ${t.errors.join()}`).toBe(
        TaskState[stored.status?.state ?? 0],
      );
    }
    expect(allTerminalMs).toBeLessThan(boundMs);
    console.info(
      `every task terminal ${allTerminalMs} ms after the database answered again (documented bound ${documentedBoundMs} ms)`,
    );
  }, 120_000);
});

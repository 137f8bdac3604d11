import { randomUUID } from "node:crypto";
import { ConnectError } from "@connectrpc/connect";
import { type StreamResponse, type Task, TaskState } from "@parley/proto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createReplicaSet, type Replica } from "./fixtures/replica-set.js";
import { sendRequest, streamedText } from "./harness.js";
import { type PrivatePostgres, startPrivatePostgres } from "./private-postgres.js";

// Two real replicas (`node dist/main.js`) on a PostgreSQL instance of this file's own, which the
// test restarts under them: the machine's shared cluster, used by other tests, is never touched.
// Longer than any `pg_ctl restart -m fast` of this tiny instance: a lease renewed just before
// the restart is still live when the database is back, so an outage this short costs no task.
const leaseTtlMs = 6000;
// Each reply streams in 8 chunks of this delay, so a reply started before the restart is still running during it.
const echoDelayMs = 300;

let postgres: PrivatePostgres | undefined;
const replicaSet = createReplicaSet({
  PARLEY_LEASE_TTL_MS: String(leaseTtlMs),
  PARLEY_ECHO_DELAY_MS: String(echoDelayMs),
  // The framed echo: a reply shows the history block the turn arrived with.
  PARLEY_ECHO_INPUT: "framed",
});
const { replicas } = replicaSet;
const startReplica = (storeUrl: string) => replicaSet.start(storeUrl);

const replyText = (task: Task) =>
  task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content.case === "text" ? p.content.value : ""))
    .join("");

const statusText = (task: Task) =>
  task.status?.message?.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join("") ?? "";

async function completedTask(replica: Replica, contextId: string, text: string): Promise<Task> {
  const res = await replica.client.sendMessage(sendRequest(contextId, text));
  expect(res.payload.case).toBe("task");
  const task = res.payload.value as Task;
  expect(task.status?.state, statusText(task)).toBe(TaskState.COMPLETED);
  return task;
}

/**
 * Sends on a fresh context until a replica answers, as a client would retry
 * while the database comes back; bounded, so a replica that never recovers
 * fails the test. Returns the completed task and how many tries failed.
 */
async function sendUntilServed(replica: Replica, text: string): Promise<{ task: Task; failures: string[] }> {
  const failures: string[] = [];
  for (let i = 0; i < 200; i++) {
    try {
      return { task: await completedTask(replica, `ctx-${randomUUID()}`, text), failures };
    } catch (error) {
      if (!(error instanceof ConnectError)) throw error;
      failures.push(error.message);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`the replica never served again after the restart; its errors:\n${failures.join("\n")}`);
}

/** Splits an echoed turn into its guard block (the history the agent saw) and the new message. */
function framing(text: string): { history: string; after: string } {
  const match = /^<<<PARLEY_HISTORY ([0-9a-f]+)>>>\n/.exec(text);
  expect(match, `the agent's input starts with the guard block:\n${text.slice(0, 200)}`).not.toBeNull();
  const close = `<<<END_PARLEY_HISTORY ${match![1]}>>>`;
  const closeAt = text.indexOf(close);
  expect(closeAt).toBeGreaterThan(0);
  return { history: text.slice(match![0].length, closeAt), after: text.slice(closeAt + close.length) };
}

async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: postgres!.url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  postgres = await startPrivatePostgres();
  // The first replica migrates alone so the second starts on a ready schema.
  await startReplica(postgres.url);
  await startReplica(postgres.url);
}, 60_000);

afterAll(async () => {
  await replicaSet.stopAll();
  await postgres?.destroy();
}, 30_000);

describe("two replicas while their PostgreSQL restarts", () => {
  it("serve again afterwards with history intact, re-LISTEN, and leave no task running", async () => {
    const [a, b] = [replicas[0]!, replicas[1]!];

    // Before: one conversation turn, and a reply that is still streaming when the database goes away.
    const oldContext = `ctx-${randomUUID()}`;
    const firstTurn = "first turn: remember the word pelican";
    expect(replyText(await completedTask(a, oldContext, firstTurn))).toBe(firstTurn);

    const spanning = a.client.sendStreamingMessage(
      sendRequest(`ctx-${randomUUID()}`, "a reply that is streaming while PostgreSQL restarts"),
    );
    const iterator = spanning[Symbol.asyncIterator]();
    const head = (await iterator.next()).value as StreamResponse;
    const spanningId = head.payload.case === "task" ? head.payload.value.id : "";
    expect(spanningId).not.toBe("");
    const spanningEvents: StreamResponse[] = [head];
    const spanningDone = (async () => {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) spanningEvents.push(next.value);
    })();

    await postgres!.restart();

    // Both replicas serve again on a new context (failed tries while the pools reconnect are allowed).
    const served = await Promise.all([a, b].map((r) => sendUntilServed(r, "after the restart")));
    for (const { task } of served) expect(replyText(task)).toBe("after the restart");

    // The old context, through each replica: every turn sees the earlier ones inside the guard block.
    const secondTurn = "second turn, through the other replica";
    const second = framing(replyText(await completedTask(b, oldContext, secondTurn)));
    expect(second.history).toContain(`user: ${firstTurn}`);
    expect(second.history).toContain(`agent: ${firstTurn}`);
    expect(second.after).toBe(`\n\n${secondTurn}`);
    const thirdTurn = "third turn, back on the first replica";
    const third = framing(replyText(await completedTask(a, oldContext, thirdTurn)));
    expect(third.history).toContain(`user: ${firstTurn}`);
    expect(third.history).toContain(`user: ${secondTurn}`);
    expect(third.after).toBe(`\n\n${thirdTurn}`);

    // Both replicas hold a LISTEN connection on the restarted server again.
    const listeners = await query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'parley-listener'",
    );
    expect(Number(listeners[0]!.n)).toBe(2);

    // A task started after the restart on one replica, followed from the other: every event arrives.
    const stream = a.client.sendStreamingMessage(sendRequest(`ctx-${randomUUID()}`, "followed across replicas"));
    const first = (await stream[Symbol.asyncIterator]().next()).value as StreamResponse;
    const taskId = first.payload.case === "task" ? first.payload.value.id : "";
    const followed: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of b.client.subscribeToTask({ id: taskId })) followed.push(event);
    })();
    const sent: StreamResponse[] = [first];
    for await (const event of stream) sent.push(event);
    await following;
    expect(followed.map((e) => e.payload.case)).toEqual(sent.map((e) => e.payload.case));
    expect(streamedText(followed)).toBe(streamedText(sent));
    const last = followed[followed.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);

    await spanningDone;
    // A reply that was streaming while the database restarted COMPLETES: the outage is shorter
    // than the lease, so the executor's lease is still live when PostgreSQL is back; its events
    // wait in memory and land in order, and nothing of the run is lost or failed.
    const spanningText = "a reply that is streaming while PostgreSQL restarts";
    const spanningLast = spanningEvents[spanningEvents.length - 1]!;
    expect(spanningLast.payload.case === "statusUpdate" && spanningLast.payload.value.status?.state).toBe(
      TaskState.COMPLETED,
    );
    expect(streamedText(spanningEvents)).toBe(spanningText);
    const spanningTask = await b.client.getTask({ id: spanningId });
    expect(spanningTask.status?.state, statusText(spanningTask)).toBe(TaskState.COMPLETED);
    expect(replyText(spanningTask)).toBe(spanningText);
    // The shared log (what a subscriber on any replica reads) holds the whole run.
    const replayed: StreamResponse[] = [];
    for await (const event of b.client.subscribeToTask({ id: spanningId }, { headers: { "parley-resume-after": "0" } }))
      replayed.push(event);
    expect(replayed.map((e) => e.payload.case)).toEqual(spanningEvents.map((e) => e.payload.case));

    // Once things settle no task is SUBMITTED or WORKING.
    let open: { n: string }[] = [];
    for (let i = 0; i < 200; i++) {
      open = await query<{ n: string }>("SELECT count(*) AS n FROM parley_tasks WHERE state IN ($1, $2)", [
        TaskState.SUBMITTED,
        TaskState.WORKING,
      ]);
      if (Number(open[0]!.n) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(Number(open[0]!.n)).toBe(0);
  }, 60_000);

  it("completes a reply whose database was away for longer than the executor's retries used to last", async () => {
    const [executor, observer] = [replicas[0]!, replicas[1]!];
    const text = "a reply that outlives a stopped database";
    const stream = executor.client.sendStreamingMessage(sendRequest(`ctx-${randomUUID()}`, text));
    const iterator = stream[Symbol.asyncIterator]();
    const head = (await iterator.next()).value as StreamResponse;
    const taskId = head.payload.case === "task" ? head.payload.value.id : "";
    const sent: StreamResponse[] = [head];
    const sending = (async () => {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) sent.push(next.value);
    })();
    const followed: StreamResponse[] = [];
    const following = (async () => {
      for await (const event of observer.client.subscribeToTask({ id: taskId })) followed.push(event);
    })();
    // The follower is past its setup reads (it has events) before the database goes away.
    for (let i = 0; i < 200 && followed.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    expect(followed.length).toBeGreaterThan(0);
    // Down for longer than the executor's flush used to retry (about half a second) but well inside
    // the lease, and back before the reply ends: the run goes on in memory meanwhile.
    await postgres!.stop();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await postgres!.start();
    await Promise.all([sending, following]);
    const last = sent[sent.length - 1]!;
    expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);
    expect(streamedText(sent)).toBe(text);
    // The follower on the other replica saw the same run through the shared log, to its end.
    expect(followed.map((e) => e.payload.case)).toEqual(sent.map((e) => e.payload.case));
    expect(streamedText(followed)).toBe(text);
    const task = await observer.client.getTask({ id: taskId });
    expect(task.status?.state, statusText(task)).toBe(TaskState.COMPLETED);
  }, 30_000);
});

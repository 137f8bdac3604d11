import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { LeaseCoordinator } from "@parley/domain";
import { endsRun } from "@parley/domain/internal";
import { StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { createStore } from "@parley/store";
import pg from "pg";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startTestServer } from "./harness.js";

// The local cluster `npm test`'s pretest step starts, unless PARLEY_TEST_PG_URL names another.
const adminUrl = process.env.PARLEY_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/postgres";

async function adminQuery(sql: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** The states a run can leave a task in when its process dies, each in its own context. */
const cutOff = [TaskState.SUBMITTED, TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED] as const;

function taskRecordOf(tenant: string, state: TaskState) {
  const id = `task-${TaskState[state]}`;
  const task = create(TaskSchema, { id, contextId: `ctx-${TaskState[state]}`, status: { state } });
  return {
    tenant,
    taskId: id,
    contextId: task.contextId,
    state,
    updatedAt: Date.now(),
    payload: toBinary(TaskSchema, task),
  };
}

const statusUpdate = (state: TaskState) =>
  create(StreamResponseSchema, { payload: { case: "statusUpdate", value: { taskId: "t", status: { state } } } });

describe("what a lost run leaves behind", () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it("ends a run's shared event stream on every state that ends the turn, interrupted ones included", () => {
    expect(endsRun(statusUpdate(TaskState.AUTH_REQUIRED))).toBe(true);
    expect(endsRun(statusUpdate(TaskState.INPUT_REQUIRED))).toBe(true);
    expect(endsRun(statusUpdate(TaskState.COMPLETED))).toBe(true);
    expect(endsRun(statusUpdate(TaskState.WORKING))).toBe(false);
    expect(endsRun(create(StreamResponseSchema, { payload: { case: "message", value: {} } }))).toBe(true);
  });

  it("at a restart fails the tasks a crash cut off and spares both interrupted states", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "parley-recovery-"));
    cleanup.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const first = await startTestServer({}, { dataDir, keepData: true });
    for (const state of cutOff) await first.parley.store.putTask(taskRecordOf("default", state));
    await first.close();
    const second = await startTestServer({}, { dataDir, keepData: true });
    cleanup.push(() => second.close());
    const stateOf = async (state: TaskState) =>
      (await second.a2a("connect").getTask({ id: `task-${TaskState[state]}` })).status?.state;
    expect(await stateOf(TaskState.SUBMITTED)).toBe(TaskState.FAILED);
    expect(await stateOf(TaskState.WORKING)).toBe(TaskState.FAILED);
    expect(await stateOf(TaskState.INPUT_REQUIRED)).toBe(TaskState.INPUT_REQUIRED);
    expect(await stateOf(TaskState.AUTH_REQUIRED)).toBe(TaskState.AUTH_REQUIRED);
  });

  it("when a replica's lease expires, fails its working task and spares both interrupted states", async () => {
    // A real PostgreSQL backend (leases only exist where replicas share a database), in a database of its own.
    const dbName = `parley_sweep_${randomBytes(6).toString("hex")}`;
    await adminQuery(`CREATE DATABASE ${dbName}`);
    const url = new URL(adminUrl);
    url.pathname = `/${dbName}`;
    const backend = await createStore({ url: url.toString() });
    if (backend.kind !== "postgres") throw new Error("a postgres:// URL must open the PostgreSQL backend");
    const coordinator = new LeaseCoordinator({
      store: backend.store,
      leases: backend.leases,
      events: backend.events,
      logger: pino({ level: "silent" }),
      leaseTtlMs: 300,
      sweepIntervalMs: 60_000,
      eventRetentionMs: 600_000,
    });
    cleanup.push(async () => {
      await coordinator.close();
      await backend.close();
      await adminQuery(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    });
    // A replica took each context's lease for its task, then died without releasing any of them.
    for (const state of cutOff) {
      const record = taskRecordOf("t1", state);
      await backend.store.putTask(record);
      expect(
        await backend.leases.tryAcquire({ tenant: "t1", contextId: record.contextId }, record.taskId, 20),
      ).toBeTruthy();
    }
    await new Promise((resolve) => setTimeout(resolve, 60));
    await coordinator.sweep();
    const stateOf = async (state: TaskState) => {
      const record = await backend.store.getTask("t1", `task-${TaskState[state]}`);
      return fromBinary(TaskSchema, record!.payload).status?.state;
    };
    expect(await stateOf(TaskState.SUBMITTED)).toBe(TaskState.FAILED);
    expect(await stateOf(TaskState.WORKING)).toBe(TaskState.FAILED);
    expect(await stateOf(TaskState.INPUT_REQUIRED)).toBe(TaskState.INPUT_REQUIRED);
    expect(await stateOf(TaskState.AUTH_REQUIRED)).toBe(TaskState.AUTH_REQUIRED);
    // Every context is free again.
    for (const state of cutOff) {
      const key = { tenant: "t1", contextId: `ctx-${TaskState[state]}` };
      expect(await backend.leases.tryAcquire(key, "next", 1_000)).toBeTruthy();
    }
  });
});

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { StreamResponseSchema, TaskSchema, TaskState } from "@parley/proto";
import { createStore, type StoreBackend } from "@parley/store";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { endsRun, LeaseCoordinator } from "../src/index.js";
import { startTestServer } from "./harness.js";

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
    const dataDir = mkdtempSync(join(tmpdir(), "parley-lease-sweep-"));
    // The LevelDB backend of createStore: real in-process leases and event log, the same contracts as PostgreSQL's.
    const backend: StoreBackend = await createStore({ url: dataDir });
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
      rmSync(dataDir, { recursive: true, force: true });
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

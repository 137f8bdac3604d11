// Every way a send ends frees its context (the busy guard and the lease): the next send on the same contextId is
// accepted and runs. Through the real Engine on a real LevelDB store in a tmp dir, with faults injected around it.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { Role, SendMessageRequestSchema, TaskState } from "@parley/proto";
import { createStore, type LevelBackend, StoreError } from "@parley/store";
import type { FencedThreadStore } from "@parley/store/backends";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Agent, sleep } from "../src/agent/agent.js";
import { createChainGuard } from "../src/chain/chain-guard.js";
import { Engine, type EngineOptions, type SendOptions, type SendOutcome } from "../src/engine/engine.js";
import type { EngineConfig } from "../src/engine/engine-config.js";
import { LeaseCoordinator } from "../src/replicas/lease-coordinator.js";
import { createSilentRequestCheck } from "../src/sessions/silent-request.js";

/** The server's defaults for what the engine reads. */
const config: EngineConfig = {
  card: { inputModes: ["text/plain", "application/json"] },
  history: { maxMessages: 20, maxChars: 12_000 },
  limits: { maxPartsPerMessage: 64, maxTextChars: 256 * 1024, agentStepTimeoutMs: 120_000 },
};

const tenant = "t";
const caller = { tenant, agent: "scripted" };

/** Answers by the message's text: "fail" throws, "wait" runs until stopped, "slow" takes a moment; all else echoes. */
const scripted: Agent = {
  name: "scripted",
  description: "answers as its message says",
  async *run(turn) {
    if (turn.text === "fail") throw new Error("the agent broke");
    if (turn.text === "wait") await sleep(60_000, turn.signal);
    if (turn.text === "slow") await sleep(50, turn.signal);
    yield { type: "text", text: `ok: ${turn.text}` };
  },
};

/** The real store, each named method made to fail for its next `times` calls. */
function faultable(store: FencedThreadStore) {
  const faults = new Map<PropertyKey, number>();
  const wrapped = new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        const left = faults.get(prop) ?? 0;
        if (left === 0) return value.apply(target, args);
        faults.set(prop, left - 1);
        return Promise.reject(new StoreError("CORRUPT", `injected ${String(prop)} failure`));
      };
    },
  });
  return { store: wrapped, fail: (method: keyof FencedThreadStore, times = 1) => faults.set(method, times) };
}

function request(text: string, contextId: string, fields: { messageId?: string; taskId?: string } = {}) {
  return create(SendMessageRequestSchema, {
    message: {
      messageId: fields.messageId ?? randomUUID(),
      contextId,
      ...(fields.taskId ? { taskId: fields.taskId } : {}),
      role: Role.USER,
      parts: [{ content: { case: "text", value: text } }],
    },
  });
}

/** The state a send's turn ended in. */
async function ended(outcome: SendOutcome): Promise<TaskState> {
  if (outcome.kind !== "run") throw new Error(`expected a run, got ${outcome.kind}`);
  await outcome.run.settled;
  return outcome.run.task.status?.state ?? TaskState.UNSPECIFIED;
}

/** Rejects when `work` takes longer than the context needs to come free. */
function soon<T>(work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: the context stayed taken`)), 5_000);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** The error a send was refused with. */
async function refused(send: Promise<unknown>): Promise<ConnectError> {
  const error = await send.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof Error)) throw new Error("the send was expected to fail");
  return ConnectError.from(error);
}

describe("engine.send releases its context whichever way it ends", () => {
  let dir: string;
  let backend: LevelBackend;
  let coordinator: LeaseCoordinator;
  let faults: ReturnType<typeof faultable>;
  let engine: Engine;
  let contextId: string;

  async function open(extra: Partial<EngineOptions> = {}): Promise<Engine> {
    const logger = pino({ level: "silent" });
    const tokens = ["REPLY_SKIP", "ANNOUNCE_SKIP", "NO_REPLY", "HEARTBEAT_OK"];
    return new Engine({
      store: faults.store,
      agents: new Map([[scripted.name, scripted]]),
      config,
      logger,
      coordinator,
      chains: createChainGuard({ serverId: "s", limits: { maxHops: 8, stepBudget: 20, deadlineMs: 60_000 } }),
      refuseSilentRequest: createSilentRequestCheck(tokens),
      ...extra,
    });
  }

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "parley-release-"));
    const opened = await createStore({ url: dir });
    if (opened.kind !== "level") throw new Error("a directory must open the LevelDB backend");
    backend = opened;
    coordinator = new LeaseCoordinator({
      store: backend.store,
      leases: backend.leases,
      events: backend.events,
      logger: pino({ level: "silent" }),
      leaseTtlMs: 15_000,
      sweepIntervalMs: 60_000,
      eventRetentionMs: 600_000,
      ownsUnfinishedTasks: true,
    });
    faults = faultable(backend.store);
    engine = await open();
    contextId = `ctx-${randomUUID()}`;
  });

  afterEach(async () => {
    await engine.shutdown(0);
    await coordinator.close();
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The context is free: a new send on it is accepted, runs to COMPLETED, and leaves no lease behind. */
  async function expectFree(what: string, on: Engine = engine): Promise<void> {
    const outcome = await soon(on.send(caller, request("next", contextId)), what);
    expect(await soon(ended(outcome), what)).toBe(TaskState.COMPLETED);
    expect(on.busyRun(tenant, contextId)).toBeUndefined();
    expect(await backend.leases.holder({ tenant, contextId })).toBeUndefined();
  }

  it("after a send that succeeds", async () => {
    expect(await ended(await engine.send(caller, request("hello", contextId)))).toBe(TaskState.COMPLETED);
    await expectFree("success");
  });

  it("after a message that fails validation", async () => {
    expect((await refused(engine.send(caller, request("NO_REPLY", contextId)))).code).toBe(Code.InvalidArgument);
    await expectFree("validation");
  });

  it("after the lease was refused", async () => {
    const key = { tenant, contextId };
    const grant = await backend.leases.tryAcquire(key, "outsider", 15_000);
    if (!grant) throw new Error("the outsider should get the lease");
    expect((await refused(engine.send(caller, request("hello", contextId)))).rawMessage).toContain("busy");
    expect(engine.busyRun(tenant, contextId)).toBeUndefined();
    await backend.leases.release({ key, taskId: "outsider", token: grant.token });
    await expectFree("lease refusal");
  });

  it("after the inbound message could not be stored", async () => {
    faults.fail("append");
    expect((await refused(engine.send(caller, request("hello", contextId)))).rawMessage).toContain("injected");
    await expectFree("append failure");
  });

  it("after a retry answered from the store", async () => {
    const first = request("hello", contextId);
    await ended(await engine.send(caller, first));
    const retry = await engine.send(caller, first);
    expect(retry.kind).not.toBe("run");
    await expectFree("retry");
  });

  it("after the setup before the agent threw", async () => {
    const options: SendOptions = {
      beforeRun: async () => {
        throw new Error("no push config");
      },
    };
    expect((await refused(engine.send(caller, request("hello", contextId), options))).message).toContain("push");
    await expectFree("beforeRun failure");
  });

  it("after the history could not be read", async () => {
    await ended(await engine.send(caller, request("first", contextId)));
    faults.fail("tail");
    expect((await refused(engine.send(caller, request("second", contextId)))).rawMessage).toContain("injected");
    await expectFree("history failure");
  });

  it("after the agent failed", async () => {
    expect(await ended(await engine.send(caller, request("fail", contextId)))).toBe(TaskState.FAILED);
    await expectFree("agent failure");
  });

  it("after a cancel", async () => {
    const outcome = await engine.send(caller, request("wait", contextId));
    if (outcome.kind !== "run") throw new Error("expected a run");
    const canceled = await engine.cancel(tenant, outcome.run.taskId);
    expect(canceled.status?.state).toBe(TaskState.CANCELED);
    await expectFree("cancel");
  });

  it("after the outcome could not be stored", async () => {
    const outcome = await engine.send(caller, request("slow", contextId));
    faults.fail("putTask", 10);
    faults.fail("append", 10);
    expect(await ended(outcome)).toBe(TaskState.FAILED);
    faults.fail("putTask", 0);
    faults.fail("append", 0);
    await expectFree("outcome failure");
  });

  it("after the turn's wrapper threw before the turn ran", async () => {
    let throws = true;
    const wrapped = await open({
      wrapTurn: (_run, _agent, work) => {
        if (!throws) return work();
        throws = false;
        throw new Error("the tracer broke");
      },
    });
    try {
      expect((await refused(wrapped.send(caller, request("hello", contextId)))).message).toContain("tracer");
      await expectFree("wrapper failure", wrapped);
    } finally {
      await wrapped.shutdown(0);
    }
  });
});

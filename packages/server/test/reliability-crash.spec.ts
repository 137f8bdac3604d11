import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@connectrpc/connect";
import { ConnectError } from "@connectrpc/connect";
import { messageText } from "@parley/domain";
import { type A2AService, ErrorInfoSchema, HistoryOrder, Provenance, type Task, TaskState } from "@parley/proto";
import { afterAll, describe, expect, it } from "vitest";
import { createRng, type Rng, seedFrom } from "./fixtures/prng.js";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { userMessage } from "./harness.js";

// The CI run is short; scripts/crash-loop.mjs sets PARLEY_CRASH_CYCLES for the long one.
const cycles = Number(process.env.PARLEY_CRASH_CYCLES ?? 5);
const contexts = Array.from({ length: 6 }, (_, i) => `crash-ctx-${i}`);
/** Acknowledgements to wait for in a cycle before the kill, so the kill lands in the middle of load. */
const acksBeforeKill = 8;

interface Figures {
  seed: number;
  cycles: number;
  requests: number;
  acknowledged: number;
  lost: number;
  duplicated: number;
  interruptedTasksFailed: number;
  tasksChecked: number;
}

type A2A = Client<typeof A2AService>;

interface Load {
  stopped: boolean;
  acksThisCycle: number;
  onAck: () => void;
  /** Unexpected errors while the server was up: any one fails the test. */
  readonly errors: string[];
}

function reasonOf(error: unknown): string | undefined {
  return ConnectError.from(error).findDetails(ErrorInfoSchema)[0]?.reason;
}

describe("crash safety", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-crash-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it(
    `keeps every acknowledged message exactly once across ${cycles} SIGKILLs under mixed load`,
    async () => {
      const rng = createRng(seedFrom("PARLEY_CRASH_SEED"));
      const figures: Figures = {
        seed: rng.seed,
        cycles: 0,
        requests: 0,
        acknowledged: 0,
        lost: 0,
        duplicated: 0,
        interruptedTasksFailed: 0,
        tasksChecked: 0,
      };
      /** contextId -> messageIds whose send was acknowledged. */
      const acked = new Map<string, Set<string>>(contexts.map((c) => [c, new Set()]));
      /** Tasks started but not seen to finish before the kill. */
      const unfinished = new Set<string>();
      /** Tasks already seen terminal after a restart: a terminal record is never rewritten, so once is enough. */
      const settled = new Set<string>();
      let sequence = 0;

      const ack = (load: Load, contextId: string, messageId: string) => {
        acked.get(contextId)!.add(messageId);
        figures.acknowledged++;
        load.acksThisCycle++;
        load.onAck();
      };

      const worker = async (client: A2A, contextId: string, load: Load, workerRng: Rng) => {
        while (!load.stopped) {
          const messageId = `m-${++sequence}`;
          const message = userMessage(`turn ${messageId} in ${contextId}`, { contextId, messageId });
          const kind = workerRng.pick(["unary", "stream", "cancel"] as const);
          figures.requests++;
          try {
            if (kind === "unary") {
              await client.sendMessage({ message });
              ack(load, contextId, messageId);
            } else if (kind === "stream") {
              let taskId = "";
              let finished = false;
              for await (const event of client.sendStreamingMessage({ message })) {
                if (taskId === "") {
                  // Any event means the engine persisted the message first.
                  taskId = event.payload.case === "task" ? event.payload.value.id : "(direct)";
                  ack(load, contextId, messageId);
                  unfinished.add(taskId);
                }
                if (event.payload.case === "statusUpdate") {
                  const state = event.payload.value.status?.state ?? TaskState.UNSPECIFIED;
                  finished = [TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED].includes(state);
                }
              }
              if (finished) unfinished.delete(taskId);
            } else {
              const res = await client.sendMessage({ message, configuration: { returnImmediately: true } });
              ack(load, contextId, messageId);
              const task = res.payload.value as Task;
              unfinished.add(task.id);
              figures.requests++;
              await client.cancelTask({ id: task.id }).catch((error: unknown) => {
                // The task may have finished before the cancel arrived.
                if (reasonOf(error) !== "TASK_NOT_CANCELABLE") throw error;
              });
              unfinished.delete(task.id);
            }
          } catch (error) {
            if (load.stopped) return;
            load.errors.push(`${kind} ${messageId} in ${contextId}: ${ConnectError.from(error).message}`);
            return;
          }
        }
      };

      /** Every check the brief names, against a freshly restarted server. */
      const verify = async (server: SpawnedServer, load: Load) => {
        const a2a = server.a2a();
        const threads = server.threads();
        for (const contextId of contexts) {
          const seen = new Map<string, number>();
          let read = 0;
          let count: bigint | undefined;
          let pageToken = "";
          const taskIds = new Set<string>();
          do {
            const page = await threads.getThreadHistory({
              contextId,
              order: HistoryOrder.OLDEST_FIRST,
              pageSize: 500,
              pageToken,
            });
            count ??= page.thread?.messageCount;
            read += page.messages.length;
            for (const m of page.messages) {
              if (m.provenance === Provenance.USER) {
                const id = m.message!.messageId;
                seen.set(id, (seen.get(id) ?? 0) + 1);
              }
              if (m.message!.taskId !== "") taskIds.add(m.message!.taskId);
            }
            pageToken = page.nextPageToken;
          } while (pageToken !== "");
          expect(Number(count), `messageCount of ${contextId} against messages read`).toBe(read);
          for (const id of acked.get(contextId)!) {
            const n = seen.get(id) ?? 0;
            if (n === 0) figures.lost++;
            if (n > 1) figures.duplicated++;
          }
          for (const [id, n] of seen) if (n > 1 && !acked.get(contextId)!.has(id)) figures.duplicated++;
          for (const taskId of taskIds) {
            if (settled.has(taskId)) continue;
            const task = await a2a.getTask({ id: taskId, historyLength: 0 });
            figures.tasksChecked++;
            expect(task.status?.state, `task ${taskId}`).not.toBe(TaskState.SUBMITTED);
            expect(task.status?.state, `task ${taskId}`).not.toBe(TaskState.WORKING);
            if (unfinished.has(taskId)) {
              if (task.status?.state === TaskState.FAILED) {
                expect(messageText(task.status.message!)).toMatch(/interrupted/);
                figures.interruptedTasksFailed++;
              } else {
                expect([TaskState.COMPLETED, TaskState.CANCELED]).toContain(task.status?.state);
              }
              unfinished.delete(taskId);
            }
            settled.add(taskId);
          }
        }
        for (const status of [TaskState.SUBMITTED, TaskState.WORKING]) {
          const left = await a2a.listTasks({ status, pageSize: 100 });
          expect(left.tasks.map((t) => `${t.id} ${TaskState[status]}`)).toEqual([]);
        }
        expect(figures.lost, `lost messages (seed ${figures.seed})`).toBe(0);
        expect(figures.duplicated, `duplicated messages (seed ${figures.seed})`).toBe(0);
        // The contexts of interrupted tasks take new messages at once.
        await Promise.all(
          contexts.map(async (contextId) => {
            const messageId = `m-${++sequence}`;
            figures.requests++;
            const res = await a2a.sendMessage({
              message: userMessage(`after restart ${messageId}`, { contextId, messageId }),
            });
            expect((res.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
            ack(load, contextId, messageId);
          }),
        );
      };

      const env = { PARLEY_ECHO_DELAY_MS: "15", PARLEY_RATE_LIMIT: "0", PARLEY_LOG_LEVEL: "error" };
      try {
        for (let cycle = 0; cycle < cycles; cycle++) {
          const server = await spawnServer({ dataDir, env });
          const load: Load = { stopped: false, acksThisCycle: 0, onAck: () => {}, errors: [] };
          if (cycle > 0) await verify(server, load);
          load.acksThisCycle = 0;
          const enough = new Promise<void>((resolve) => {
            load.onAck = () => {
              if (load.acksThisCycle >= acksBeforeKill + rng.int(0, 6)) resolve();
            };
          });
          const workers = contexts.map((contextId) =>
            worker(server.a2a(), contextId, load, createRng(rng.int(0, 2 ** 31))),
          );
          await Promise.race([enough, Promise.all(workers)]);
          expect(load.errors, `seed ${figures.seed}`).toEqual([]);
          load.stopped = true;
          server.child.kill("SIGKILL");
          await server.exited;
          server.closeClients();
          await Promise.all(workers);
          figures.cycles++;
        }
        const last = await spawnServer({ dataDir, env });
        try {
          await verify(last, { stopped: false, acksThisCycle: 0, onAck: () => {}, errors: [] });
        } finally {
          last.closeClients();
          last.child.kill("SIGTERM");
          await last.exited;
        }
      } catch (error) {
        process.stderr.write(`crash test failed; replay with PARLEY_CRASH_SEED=${figures.seed}\n`);
        throw error;
      } finally {
        if (process.env.PARLEY_CRASH_FIGURES) writeFileSync(process.env.PARLEY_CRASH_FIGURES, JSON.stringify(figures));
      }
      expect(figures.cycles).toBe(cycles);
      expect(figures.interruptedTasksFailed, "no kill landed on a running task").toBeGreaterThan(0);
    },
    20_000 + cycles * 8_000,
  );
});

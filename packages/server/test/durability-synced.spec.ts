// PARLEY_DURABILITY=synced: every acknowledged turn is fsynced before the acknowledgement (so it also survives an OS
// crash or a power cut, which a test cannot cause: the SIGKILL below shows nothing acknowledged is held back in the
// process), and concurrent turns share fsyncs through the group commit, counted on /metrics.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { messageText } from "@parley/domain";
import { HistoryOrder, Provenance, type Task, TaskState } from "@parley/proto";
import { afterAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { userMessage } from "./harness.js";

// PARLEY_ECHO_INPUT=framed: the resumed turn's reply shows the cut-off message in its history block.
const env = { PARLEY_RATE_LIMIT: "0", PARLEY_LOG_LEVEL: "error", PARLEY_ECHO_INPUT: "framed" };

/** The group commit's counters from the server's /metrics. */
async function commits(server: SpawnedServer) {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const read = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? Number.NaN);
  return {
    writes: read(/^parley_store_writes_total (\d+)$/m),
    synced: read(/^parley_store_commits_total\{synced="true"\} (\d+)$/m),
    unsynced: read(/^parley_store_commits_total\{synced="false"\} (\d+)$/m),
  };
}

/** `count` sends at once, each on its own context; resolves to the acknowledged (contextId, messageId, task). */
async function concurrentSends(server: SpawnedServer, count: number, tag: string) {
  const a2a = server.a2a();
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const contextId = `${tag}-ctx-${i}`;
      const messageId = `${tag}-m-${i}`;
      const res = await a2a.sendMessage({ message: userMessage(`turn ${i} of ${tag}`, { contextId, messageId }) });
      return { contextId, messageId, task: res.payload.value as Task };
    }),
  );
}

describe("durability", () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-durability-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("synced: every turn acknowledged right before a SIGKILL is there after the restart", async () => {
    const dir = dataDir();
    const server = await spawnServer({ dataDir: dir, env: { ...env, PARLEY_DURABILITY: "synced" } });
    let acked: Awaited<ReturnType<typeof concurrentSends>>;
    try {
      acked = await concurrentSends(server, 40, "kill");
    } finally {
      // At once after the last acknowledgement: nothing gets the time to reach the disk on its own.
      server.child.kill("SIGKILL");
      server.closeClients();
    }
    expect((await server.exited).signal).toBe("SIGKILL");
    for (const { task } of acked) expect(task.status?.state).toBe(TaskState.COMPLETED);

    const restarted = await spawnServer({ dataDir: dir, env: { ...env, PARLEY_DURABILITY: "synced" } });
    try {
      const threads = restarted.threads();
      const a2a = restarted.a2a();
      for (const { contextId, messageId, task } of acked) {
        const page = await threads.getThreadHistory({ contextId, order: HistoryOrder.OLDEST_FIRST, pageSize: 10 });
        const user = page.messages.filter((m) => m.provenance === Provenance.USER).map((m) => m.message!.messageId);
        expect(user, `the acknowledged message of ${contextId}`).toEqual([messageId]);
        const replies = page.messages.filter((m) => m.provenance === Provenance.AGENT);
        expect(replies.length, `the acknowledged reply in ${contextId}`).toBe(1);
        expect(messageText(replies[0]!.message!)).toContain(`turn ${contextId.split("-").pop()} of kill`);
        const stored = await a2a.getTask({ id: task.id });
        expect(stored.status?.state, `task ${task.id}`).toBe(TaskState.COMPLETED);
      }
    } finally {
      restarted.child.kill("SIGTERM");
      restarted.closeClients();
      await restarted.exited;
    }
  }, 120_000);

  it("an interrupted turn: its messageId answers the FAILED task, which says how to resume; a new messageId does", async () => {
    const dir = dataDir();
    const slow = { ...env, PARLEY_ECHO_DELAY_MS: "2000" };
    const server = await spawnServer({ dataDir: dir, env: slow });
    const contextId = "resume-ctx";
    const message = userMessage("the turn the crash cut off", { contextId, messageId: "resume-m-1" });
    let taskId: string;
    try {
      const res = await server.a2a().sendMessage({ message, configuration: { returnImmediately: true } });
      taskId = (res.payload.value as Task).id;
    } finally {
      server.child.kill("SIGKILL");
      server.closeClients();
    }
    await server.exited;
    const restarted = await spawnServer({ dataDir: dir, env });
    try {
      const a2a = restarted.a2a();
      const retry = (await a2a.sendMessage({ message })).payload.value as Task;
      expect(retry.id).toBe(taskId);
      expect(retry.status?.state).toBe(TaskState.FAILED);
      const why = messageText(retry.status!.message!);
      expect(why).toMatch(/^interrupted: the server process ended \(a crash or a kill\) while this task was running/);
      expect(why).toContain(`send it as a new message (a new messageId) with contextId "${contextId}"`);
      // What the status says works: a new messageId in the same context runs, with the cut-off turn in its history.
      const resumed = (
        await a2a.sendMessage({ message: userMessage("once more", { contextId, messageId: "resume-m-2" }) })
      ).payload.value as Task;
      expect(resumed.status?.state).toBe(TaskState.COMPLETED);
      const reply = resumed.artifacts
        .flatMap((a) => a.parts)
        .map((p) => (p.content.case === "text" ? p.content.value : ""))
        .join("");
      expect(reply).toContain("user: the turn the crash cut off");
    } finally {
      restarted.child.kill("SIGTERM");
      restarted.closeClients();
      await restarted.exited;
    }
  }, 120_000);

  it("synced: concurrent sends share fsyncs (group commit); the default mode makes none", async () => {
    const synced = await spawnServer({ dataDir: dataDir(), env: { ...env, PARLEY_DURABILITY: "synced" } });
    try {
      expect(synced.stdout()).toMatch(/store: LevelDB in \S+, durability synced \(every write fsynced/);
      const before = await commits(synced);
      const acked = await concurrentSends(synced, 64, "share");
      expect(acked).toHaveLength(64);
      const after = await commits(synced);
      const writes = after.writes - before.writes;
      const fsyncs = after.synced - before.synced;
      // Each send writes at least its inbound message and its reply, each acknowledged only after an fsync.
      expect(writes).toBeGreaterThanOrEqual(2 * 64);
      expect(after.unsynced - before.unsynced, "every batch of a synced store is synced").toBe(0);
      expect(fsyncs).toBeGreaterThan(0);
      // 64 turns in flight at once: a synced batch carries every write queued while the previous one was written.
      expect(fsyncs, `${writes} writes in ${fsyncs} fsynced batches`).toBeLessThan(writes);
    } finally {
      synced.child.kill("SIGTERM");
      synced.closeClients();
      await synced.exited;
    }

    const plain = await spawnServer({ dataDir: dataDir(), env });
    try {
      expect(plain.stdout()).toMatch(/durability process-crash \(survives a crash of this process, not an OS crash/);
      await concurrentSends(plain, 20, "plain");
      const counts = await commits(plain);
      expect(counts.writes).toBeGreaterThanOrEqual(40);
      expect(counts.synced, "process-crash durability makes no fsync").toBe(0);
    } finally {
      plain.child.kill("SIGTERM");
      plain.closeClients();
      await plain.exited;
    }
  }, 120_000);
});

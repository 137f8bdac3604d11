// What a turn writes on LevelDB, counted on /metrics: a task reply's events are logged in its final write (the
// final task with its reply), so a turn is two atomic writes (inbound, outcome), and the stream, the stored
// task and a streamed turn's gathered events stay whole.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Task, TaskState } from "@parley/proto";
import { afterAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { collect, streamedText, userMessage } from "./harness.js";

async function writes(server: SpawnedServer): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  return Number(/^parley_store_writes_total (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

describe("the writes of a turn (LevelDB)", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("a task reply is two writes: its events go with the final task and reply, and the log ends the run", async () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-turn-writes-"));
    dirs.push(dir);
    const server = await spawnServer({
      dataDir: dir,
      env: { PARLEY_RATE_LIMIT: "0", PARLEY_LOG_LEVEL: "error", PARLEY_ECHO_REPLY: "task" },
    });
    try {
      const a2a = server.a2a();
      // A first turn, so the counts below are of steady turns.
      await a2a.sendMessage({ message: userMessage("warm up") });
      const before = await writes(server);
      const sends = 5;
      for (let i = 0; i < sends; i++) {
        const res = await a2a.sendMessage({ message: userMessage(`turn ${i}`, { contextId: "writes" }) });
        expect((res.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
      }
      expect(await writes(server)).toBe(before + 2 * sends);
      // A streamed turn still streams every event and ends; its stored task holds the whole reply.
      const events = await collect(a2a.sendStreamingMessage({ message: userMessage("stream this reply please") }));
      expect(streamedText(events)).toBe("stream this reply please");
      const last = events[events.length - 1]!;
      expect(last.payload.case === "statusUpdate" && last.payload.value.status?.state).toBe(TaskState.COMPLETED);
      const taskId = events[0]!.payload.case === "task" ? events[0]!.payload.value.id : "";
      const stored = await a2a.getTask({ id: taskId });
      expect(stored.status?.state).toBe(TaskState.COMPLETED);
      expect(stored.artifacts.flatMap((a) => a.parts).map((p) => p.content.value)).toEqual([
        "stream this reply please",
      ]);
    } finally {
      server.child.kill("SIGTERM");
      server.closeClients();
      await server.exited;
    }
  }, 60_000);
});

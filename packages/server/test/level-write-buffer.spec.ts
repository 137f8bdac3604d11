// PARLEY_WRITE_BUFFER_MB reaches LevelDB: the same turns stay in memory under the default buffer and are written
// out as table files under a 1 MiB one, and the thread reads back whole after a restart either way.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Task, TaskState } from "@parley/proto";
import { afterAll, describe, expect, it } from "vitest";
import { type SpawnedServer, spawnServer } from "./fixtures/spawn-server.js";
import { userMessage } from "./harness.js";

const env = { PARLEY_RATE_LIMIT: "0", PARLEY_LOG_LEVEL: "error", PARLEY_ECHO_REPLY: "task" };
/** Eight turns of a 200 KB message, each echoed back: about 3.2 MB written, past 1 MiB and within the default. */
const turns = 8;
const big = (i: number) => `${i} ${"y".repeat(200_000)}`;

const tableFiles = (dir: string) => readdirSync(dir).filter((name) => name.endsWith(".ldb")).length;

/** Runs `use` against a server on `dir`, then stops it (SIGTERM: LevelDB closes, after the flushes it started). */
async function withServer<T>(
  dir: string,
  extraEnv: Record<string, string>,
  use: (server: SpawnedServer) => Promise<T>,
) {
  const server = await spawnServer({ dataDir: dir, env: { ...env, ...extraEnv } });
  try {
    return await use(server);
  } finally {
    server.child.kill("SIGTERM");
    server.closeClients();
    await server.exited;
  }
}

/** Sends the turns and counts the table files LevelDB wrote by the time the server stopped. */
async function runTurns(dir: string, extraEnv: Record<string, string>): Promise<number> {
  await withServer(dir, extraEnv, async (server) => {
    const a2a = server.a2a();
    for (let i = 0; i < turns; i++) {
      const res = await a2a.sendMessage({ message: userMessage(big(i), { contextId: "big" }) });
      expect((res.payload.value as Task).status?.state).toBe(TaskState.COMPLETED);
    }
  });
  return tableFiles(dir);
}

/** How many messages the thread holds after a restart, every one of them read back. */
function threadLength(dir: string, extraEnv: Record<string, string>): Promise<number> {
  return withServer(dir, extraEnv, async (server) => {
    const history = await server.threads().getThreadHistory({ contextId: "big", pageSize: 500 });
    expect(history.messages).toHaveLength(Number(history.thread?.messageCount));
    return Number(history.thread?.messageCount);
  });
}

describe("the LevelDB write buffer (PARLEY_WRITE_BUFFER_MB)", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "parley-write-buffer-"));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("holds the turns in memory by default, writes tables at 1 MiB, and keeps every message both ways", async () => {
    const small = tempDir();
    const byDefault = tempDir();
    expect(await runTurns(small, { PARLEY_WRITE_BUFFER_MB: "1" })).toBeGreaterThan(0);
    expect(await runTurns(byDefault, {})).toBe(0);
    expect(await threadLength(small, { PARLEY_WRITE_BUFFER_MB: "1" })).toBe(2 * turns);
    expect(await threadLength(byDefault, {})).toBe(2 * turns);
  }, 60_000);
});

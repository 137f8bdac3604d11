// DeleteThread cut by SIGKILL in the middle: the real server process on LevelDB is killed while it deletes a thread
// of thousands of tasks. What it left is never half-visible (the thread's meta and listing entry are gone, and
// whatever of it is left is covered by its durable deletion marker), and the restarted server finishes the delete
// before it answers: every id of the thread answers NotFound, and no row of it is left in the directory.
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { MessageSchema, Role, TaskSchema, TaskState } from "@parley/proto";
import { createStore, threadDigest } from "@parley/store";
import { Level } from "level";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { spawnServer } from "./fixtures/spawn-server.js";

const tenant = "acme";
const doomed = "ctx-doomed";
const kept = "ctx-kept";
const tasks = 3_000;
const env = { PARLEY_API_KEYS: "crash-key=acme" };
const headers = { authorization: "Bearer crash-key", "a2a-version": "1.0" };

function message(id: string, text: string): Uint8Array {
  return toBinary(
    MessageSchema,
    create(MessageSchema, { messageId: id, role: Role.USER, parts: [{ content: { case: "text", value: text } }] }),
  );
}

/** A thread of `count` completed tasks, each with its two messages, a push config and an event log. */
async function populate(url: string, contextId: string, count: number, withSession = false): Promise<void> {
  const backend = await createStore({ url });
  const key = { tenant, contextId };
  try {
    for (let i = 0; i < count; i++) {
      const taskId = `${contextId}-t${i}`;
      const task = create(TaskSchema, { id: taskId, contextId, status: { state: TaskState.COMPLETED } });
      await backend.store.append(
        key,
        { messageId: `${taskId}-in`, provenance: "user", taskId, payload: message(`${taskId}-in`, "card 4111") },
        {
          tenant,
          taskId,
          contextId,
          state: TaskState.COMPLETED,
          updatedAt: Date.now(),
          payload: toBinary(TaskSchema, task),
        },
      );
      await backend.store.append(key, {
        messageId: `${taskId}-out`,
        provenance: "agent",
        taskId,
        payload: message(`${taskId}-out`, "noted"),
      });
      await backend.store.putPushConfig({ tenant, taskId, configId: "hook", payload: new Uint8Array([1]) });
      const fence = await backend.leases.tryAcquire(key, taskId, 60_000);
      await backend.events.append(tenant, taskId, [{ seq: 1, payload: new Uint8Array([2]), final: true }], fence!);
      await backend.leases.release(fence!);
    }
    if (withSession) {
      await backend.conversations.saveConversation(
        {
          tenant,
          conversationId: `${contextId}-session`,
          state: 2,
          createdAt: Date.now(),
          updatedAt: Date.now(),
          agents: ["a", "b"],
          contextIds: [contextId, `${contextId}-peer`],
          eventCount: 1,
          payload: new Uint8Array(0),
        },
        [{ seq: 1, payload: new Uint8Array([3]) }],
      );
    }
  } finally {
    await backend.close();
  }
}

/**
 * Reads the directory key by key (without opening a store, which would finish the delete): the rows left of the
 * doomed thread and its tasks by table, and whether its deletion marker is there.
 */
async function inspect(dir: string) {
  const th = Buffer.from(threadDigest(tenant, doomed), "hex");
  const keptTh = Buffer.from(threadDigest(tenant, kept), "hex");
  const taskKeys = new Set(
    Array.from({ length: tasks }, (_, i) => digest("parley.task.v1", [tenant, `${doomed}-t${i}`])),
  );
  const db = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  const left: Record<string, number> = {};
  let marker = false;
  let keptMeta = false;
  try {
    for await (const k of db.keys()) {
      const table = Buffer.from(k.subarray(10, 11)).toString("latin1");
      const rest = Buffer.from(k.subarray(12));
      const hex = (from: number) => rest.subarray(from, from + 32).toString("hex");
      if (table === "y" && rest.equals(th)) marker = true;
      if (table === "t" && rest.equals(keptTh)) keptMeta = true;
      const ofThread = rest.includes(th);
      const ofTask =
        (["k", "r", "p", "e", "g"].includes(table) && taskKeys.has(hex(0))) ||
        (table === "f" && taskKeys.has(hex(8))) ||
        (table === "d" && rest.subarray(40).toString("utf8").startsWith(`${doomed}-t`));
      if ((ofThread || ofTask) && table !== "y") left[table] = (left[table] ?? 0) + 1;
    }
  } finally {
    await db.close();
  }
  return { left, marker, keptMeta };
}

/** The store's digest (core/digests.ts): SHA-256 over the tag and fields, each after its u32 UTF-8 length. */
function digest(tag: string, fields: readonly string[]): string {
  const hash = createHash("sha256");
  for (const field of [tag, ...fields]) {
    const bytes = Buffer.from(field, "utf8");
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length).update(bytes);
  }
  return hash.digest("hex");
}

describe("DeleteThread across a crash (LevelDB)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-delete-crash-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("computes the store's digests the way the store does", () => {
    expect(digest("parley.thread.v1", [tenant, doomed])).toBe(threadDigest(tenant, doomed));
  });

  it("a SIGKILL in the middle of a large delete leaves nothing half-visible, and the restart finishes it", async () => {
    await populate(dataDir, doomed, tasks);
    await populate(dataDir, kept, 2);

    const first = await spawnServer({ dataDir, env });
    const threads = first.threads(headers);
    const deleting = threads.deleteThread({ contextId: doomed }).then(
      () => "answered",
      () => "cut",
    );
    // The thread leaves the listing with the delete's first batch; the kill follows at once.
    for (;;) {
      const listed = (await threads.listThreads({ pageSize: 100 })).threads.map((t) => t.contextId);
      if (!listed.includes(doomed)) break;
    }
    first.child.kill("SIGKILL");
    first.closeClients();
    expect((await first.exited).signal).toBe("SIGKILL");
    const answer = await deleting;

    const cut = await inspect(dataDir);
    console.log(
      `delete crash: the delete was ${answer}; left ${JSON.stringify(cut.left)} rows of the thread, marker ${cut.marker}`,
    );
    // Never half-visible: no meta or listing entry, and every row left is covered by the durable marker.
    expect(cut.left.t ?? 0).toBe(0);
    expect(cut.left.l ?? 0).toBe(0);
    expect(cut.keptMeta).toBe(true);
    if (Object.keys(cut.left).length > 0) expect(cut.marker).toBe(true);
    // The kill landed in the middle: tasks were left for the restart to finish.
    expect(answer).toBe("cut");
    expect(cut.left.k ?? 0).toBeGreaterThan(0);

    const second = await spawnServer({ dataDir, env });
    try {
      const a2a = second.a2a(headers);
      for (const i of [0, Math.floor(tasks / 2), tasks - 1]) {
        const error = await a2a.getTask({ id: `${doomed}-t${i}` }).then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
        expect(error?.code).toBe(Code.NotFound);
      }
      expect((await a2a.listTasks({ contextId: doomed, pageSize: 100 })).tasks).toEqual([]);
      expect((await a2a.listTasks({ pageSize: 100 })).tasks.map((t) => t.id).sort()).toEqual([
        `${kept}-t0`,
        `${kept}-t1`,
      ]);
      const history = await second
        .threads(headers)
        .getThreadHistory({ contextId: doomed })
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(history?.code).toBe(Code.NotFound);
      expect((await second.threads(headers).listThreads({})).threads.map((t) => t.contextId)).toEqual([kept]);
    } finally {
      second.closeClients();
      second.child.kill("SIGTERM");
      await second.exited;
    }
    const done = await inspect(dataDir);
    expect(done).toEqual({ left: {}, marker: false, keptMeta: true });
  }, 300_000);
});

// PostgreSQL deletes a thread in one transaction. The test holds a lock on the thread's session row, so the delete's
// transaction stops after it deleted the tasks and before it commits; the server is killed right then. The
// transaction is rolled back whole: the thread, its tasks and its session are all still there, and a delete after
// the restart removes everything.
describe("DeleteThread across a crash (PostgreSQL)", () => {
  let database: TestDatabase;
  const dataDir = mkdtempSync(join(tmpdir(), "parley-delete-crash-pg-"));
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  });

  it("a SIGKILL inside the delete's transaction rolls it back whole; the next delete removes everything", async () => {
    const count = 50;
    await populate(database.url, doomed, count, true);
    await populate(database.url, kept, 2);
    const sql = new pg.Client({ connectionString: database.url });
    await sql.connect();
    const counts = async () => {
      const one = async (q: string) => Number((await sql.query<{ n: string }>(q)).rows[0]!.n);
      return {
        threads: await one("SELECT count(*) AS n FROM parley_threads"),
        messages: await one("SELECT count(*) AS n FROM parley_messages"),
        tasks: await one("SELECT count(*) AS n FROM parley_tasks"),
        push: await one("SELECT count(*) AS n FROM parley_push_configs"),
        events: await one("SELECT count(*) AS n FROM parley_task_events"),
        sessions: await one("SELECT count(*) AS n FROM parley_conversations"),
      };
    };
    const whole = {
      threads: 2,
      messages: 2 * (count + 2),
      tasks: count + 2,
      push: count + 2,
      events: count + 2,
      sessions: 1,
    };
    try {
      expect(await counts()).toEqual(whole);
      const pgEnv = { ...env, PARLEY_STORE_URL: database.url };
      const first = await spawnServer({ dataDir, env: pgEnv });
      await sql.query("BEGIN");
      await sql.query("SELECT 1 FROM parley_conversations FOR UPDATE");
      const deleting = first
        .threads(headers)
        .deleteThread({ contextId: doomed })
        .then(
          () => "answered",
          () => "cut",
        );
      // The delete's transaction waits for the session row's lock: it has deleted the tasks by then.
      while ((await waitingDeletes(database.url)) === 0) {
        if (first.child.exitCode !== null) throw new Error(`the server exited: ${first.stderr()}`);
      }
      first.child.kill("SIGKILL");
      first.closeClients();
      expect((await first.exited).signal).toBe("SIGKILL");
      await sql.query("COMMIT");
      expect(await deleting).toBe("cut");
      // Rolled back whole: nothing of the thread is missing.
      await expect.poll(counts, { timeout: 10_000 }).toEqual(whole);

      const second = await spawnServer({ dataDir, env: pgEnv });
      try {
        expect((await second.a2a(headers).getTask({ id: `${doomed}-t0` })).id).toBe(`${doomed}-t0`);
        const deleted = await second.threads(headers).deleteThread({ contextId: doomed });
        expect(deleted).toMatchObject({ deleted: true, deletedTaskCount: BigInt(count), deletedSessionCount: 1n });
        const error = await second
          .a2a(headers)
          .getTask({ id: `${doomed}-t0` })
          .then(
            () => undefined,
            (e: unknown) => ConnectError.from(e),
          );
        expect(error?.code).toBe(Code.NotFound);
      } finally {
        second.closeClients();
        second.child.kill("SIGTERM");
        await second.exited;
      }
      expect(await counts()).toEqual({ threads: 1, messages: 4, tasks: 2, push: 2, events: 2, sessions: 0 });
    } finally {
      await sql.end();
    }
  }, 180_000);
});

/** Server connections whose statement waits for a lock while deleting a thread's sessions. */
async function waitingDeletes(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity
       WHERE application_name = 'parley' AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM parley_conversations%'`,
    );
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

// Threads as data through real servers and the real CLI: lossless export and import (LevelDB -> PostgreSQL ->
// LevelDB, byte-identical apart from the export time), idempotent re-import, explicit legacy log import, whole
// tenants, refusals with line numbers, --append and the busy guard.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Role } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../store/test/pg-helpers.js";
import { createParleyClient } from "../src/index.js";
import { type CliResult, runCli, startServer, type TestServer, tempDir } from "./harness.js";

// The round trips carry every kind of part (raw bytes, a URL to an image): these servers accept any media type.
const anyPart = { PARLEY_INPUT_MODES: "*/*" };

const home = tempDir("parley-transfer-");
const file = (name: string) => join(home.path, name);
let levelA: TestServer;
let postgresB: TestServer;
let levelC: TestServer;
let slow: TestServer;
let pgUrl: string;
/** The PostgreSQL database of the server in the middle of the round trip (dropped at the end). */
let database: TestDatabase;

function parley(server: TestServer, args: string[]): Promise<CliResult> {
  return runCli(["--server", server.baseUrl, "--protocol", "grpc", ...args], {
    env: { PATH: process.env.PATH, HOME: home.path, PARLEY_CLIENT_CONFIG: file("none.json") },
  });
}

/** The file with its export times (the documented varying field) blanked. */
function withoutExportTimes(path: string): string {
  return readFileSync(path, "utf8").replace(/"exportTime":"[^"]*"/g, '"exportTime":"-"');
}

const legacyLog = [
  JSON.stringify({ role: "user", content: "my name is Ada", timestamp: "2026-07-01T10:00:00.123Z" }),
  JSON.stringify({ role: "assistant", content: "hello Ada", timestamp: 1_782_900_001.5, model: "old-adapter" }),
  "",
  JSON.stringify({ role: "user", content: "no time on this one" }),
].join("\n");

beforeAll(async () => {
  writeFileSync(file("none.json"), "{}");
  writeFileSync(file("legacy.jsonl"), `${legacyLog}\n`);
  levelA = await startServer({ PARLEY_ECHO_INPUT: "framed", ...anyPart });
  database = await createTestDatabase();
  pgUrl = database.url;
  postgresB = await startServer({ PARLEY_STORE_URL: pgUrl, ...anyPart });
  levelC = await startServer(anyPart);
  slow = await startServer({ PARLEY_ECHO_DELAY_MS: "2000", ...anyPart });
}, 60_000);

afterAll(async () => {
  for (const s of [levelA, postgresB, levelC, slow]) await s?.close();
  await database?.drop();
  home.remove();
});

/** Sends one message with every part type (text, raw bytes, url, data) and metadata; waits for the reply. */
async function sendRich(server: TestServer, contextId: string) {
  const client = createParleyClient({ baseUrl: server.baseUrl, protocol: "grpc" });
  try {
    return await client.a2a.sendMessage({
      message: {
        messageId: `rich-${contextId}`,
        contextId,
        role: Role.USER,
        parts: [
          { content: { case: "text", value: "what is my name?" } },
          {
            content: { case: "raw", value: new Uint8Array([0, 1, 2, 250, 255]) },
            filename: "blob.bin",
            mediaType: "application/octet-stream",
          },
          { content: { case: "url", value: "https://example.com/a.png" }, filename: "a.png", mediaType: "image/png" },
          {
            content: {
              case: "data",
              value: fromJson(ValueSchema, { nested: { n: 1.5, ok: true, list: ["x", null] } }),
            },
          },
        ],
        metadata: { "https://example.com/ext": { trace: "t-1" } },
      },
    });
  } finally {
    client.close();
  }
}

describe("parley threads export / import", () => {
  it("imports a legacy log only into the named context, marks it imported in history, and re-imports nothing", async () => {
    const first = await parley(levelA, ["threads", "import-legacy", file("legacy.jsonl"), "--context", "trip"]);
    expect(first).toMatchObject({ code: 0, stderr: "" });
    expect(first.stdout).toBe(
      "imported into trip: 3 messages added, 0 already there; 0 tasks added, 0 already there\n",
    );
    const again = await parley(levelA, [
      "threads",
      "import-legacy",
      file("legacy.jsonl"),
      "--context",
      "trip",
      "--json",
    ]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ type: "imported", addedMessages: 0, skippedMessages: 3 });

    const shown = await parley(levelA, ["threads", "show", "trip", "--oldest-first"]);
    expect(shown.stdout).toBe(
      "[1] user (imported): my name is Ada\n[2] agent (imported): hello Ada\n[3] user (imported): no time on this one\n",
    );
    // The history block the agent sees labels them as imported.
    const reply = await sendRich(levelA, "trip");
    const echoed = reply.payload.case === "task" ? reply.payload.value.artifacts.flatMap((a) => a.parts) : [];
    const text = echoed.map((p) => (p.content.case === "text" ? p.content.value : "")).join("");
    expect(text).toContain("imported message (user): my name is Ada");
    expect(text).toContain("imported message (agent): hello Ada");
    expect(text).toContain("[file blob.bin (application/octet-stream), 5 bytes]");
  });

  it("exports every stored field and round-trips LevelDB -> PostgreSQL -> LevelDB byte for byte", async () => {
    const out = await parley(levelA, ["threads", "export", "trip", "--out", file("a.jsonl")]);
    expect(out).toMatchObject({ code: 0, stdout: "", stderr: "" });
    const lines = readFileSync(file("a.jsonl"), "utf8")
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0].header).toMatchObject({
      format: "parley.thread",
      version: 1,
      source: { software: "parley", messageSchema: "lf.a2a.v1.Message" },
      contextId: "trip",
    });
    const messages = lines.filter((l) => l.message).map((l) => l.message);
    expect(messages.map((m) => [m.sequence, m.provenance])).toEqual([
      ["1", "PROVENANCE_IMPORTED"],
      ["2", "PROVENANCE_IMPORTED"],
      ["3", "PROVENANCE_IMPORTED"],
      ["4", "PROVENANCE_USER"],
      ["5", "PROVENANCE_AGENT"],
    ]);
    expect(messages[0].createTime).toBe("2026-07-01T10:00:00.123Z");
    expect(messages[1].createTime).toBe("2026-07-01T10:00:01.500Z");
    expect(messages[1].message.metadata["https://parley.dev/extensions/import/v1"]).toEqual({
      format: "legacy-jsonl",
      line: 2,
      original: { role: "assistant", content: "hello Ada", timestamp: 1_782_900_001.5, model: "old-adapter" },
    });
    const rich = messages[3];
    expect(rich.messageId).toBe("rich-trip");
    expect(rich.taskId).not.toBe("");
    expect(rich.message.parts).toEqual([
      { text: "what is my name?" },
      { raw: "AAEC+v8=", filename: "blob.bin", mediaType: "application/octet-stream" },
      { url: "https://example.com/a.png", filename: "a.png", mediaType: "image/png" },
      { data: { nested: { n: 1.5, ok: true, list: ["x", null] } } },
    ]);
    expect(rich.message.metadata).toEqual({ "https://example.com/ext": { trace: "t-1" } });
    const tasks = lines.filter((l) => l.task).map((l) => l.task);
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ taskId: rich.taskId, state: "TASK_STATE_COMPLETED" });
    expect(lines.at(-1)).toEqual({ end: { messageCount: "5", taskCount: "1" } });

    const intoPg = await parley(postgresB, ["threads", "import", file("a.jsonl")]);
    expect(intoPg.stdout).toBe(
      "imported into trip: 5 messages added, 0 already there; 1 tasks added, 0 already there\n",
    );
    const twice = await parley(postgresB, ["threads", "import", file("a.jsonl")]);
    expect(twice.stdout).toBe(
      "imported into trip: 0 messages added, 5 already there; 0 tasks added, 1 already there\n",
    );
    expect((await parley(postgresB, ["threads", "export", "trip", "--out", file("b.jsonl")])).code).toBe(0);
    expect(withoutExportTimes(file("b.jsonl"))).toBe(withoutExportTimes(file("a.jsonl")));

    expect((await parley(levelC, ["threads", "import", file("b.jsonl")])).code).toBe(0);
    expect((await parley(levelC, ["threads", "export", "trip", "--out", file("c.jsonl")])).code).toBe(0);
    expect(withoutExportTimes(file("c.jsonl"))).toBe(withoutExportTimes(file("a.jsonl")));
    // The task came along too: the imported thread's task is readable on the new server.
    const client = createParleyClient({ baseUrl: levelC.baseUrl, protocol: "grpc" });
    const task = await client.a2a.getTask({ id: rich.taskId });
    client.close();
    expect(task.contextId).toBe("trip");
  });

  it("moves a whole tenant LevelDB -> PostgreSQL -> LevelDB and exports it again byte for byte", async () => {
    await sendRich(levelA, "second-thread");
    const out = await parley(levelA, ["export", "--all", "--out", file("tenant-a.jsonl")]);
    expect(out).toMatchObject({ code: 0, stderr: "" });
    const text = readFileSync(file("tenant-a.jsonl"), "utf8");
    expect(JSON.parse(text.split("\n")[0]!)).toMatchObject({ format: "parley.tenant", version: 1, threadCount: 2 });
    const moved = await parley(postgresB, ["import", file("tenant-a.jsonl"), "--json"]);
    expect(moved.code).toBe(0);
    expect(
      moved.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l)),
    ).toMatchObject([
      { contextId: "second-thread", addedMessages: 2, skippedMessages: 0 },
      { contextId: "trip", addedMessages: 0, skippedMessages: 5 },
    ]);
    expect((await parley(postgresB, ["export", "--all", "--out", file("tenant-b.jsonl")])).code).toBe(0);
    expect(withoutExportTimes(file("tenant-b.jsonl"))).toBe(withoutExportTimes(file("tenant-a.jsonl")));
    // And back from PostgreSQL into a fresh LevelDB server.
    const fresh = await startServer(anyPart);
    try {
      expect((await parley(fresh, ["import", file("tenant-b.jsonl")])).code).toBe(0);
      expect((await parley(fresh, ["export", "--all", "--out", file("tenant-c.jsonl")])).code).toBe(0);
      expect(withoutExportTimes(file("tenant-c.jsonl"))).toBe(withoutExportTimes(file("tenant-a.jsonl")));
    } finally {
      await fresh.close();
    }
    const noAll = await parley(postgresB, ["export"]);
    expect(noAll.code).toBe(2);
    expect(noAll.stderr).toContain("--all");
  });

  it("refuses a file it cannot read, naming the line and the reason, and writes nothing", async () => {
    const a = readFileSync(file("a.jsonl"), "utf8").split("\n");
    const cases: [string, string[], RegExp][] = [
      [
        "v2.jsonl",
        [a[0]!.replace('"version":1', '"version":2'), ...a.slice(1)],
        /v2\.jsonl:1: unknown format "parley\.thread" version 2/,
      ],
      ["other.jsonl", ['{"format":"hermes.log"}', ...a.slice(1)], /other\.jsonl:1: not a parley\.thread header/],
      ["broken.jsonl", [a[0]!, a[1]!, "{oops", ...a.slice(3)], /broken\.jsonl:3: not JSON/],
      [
        "field.jsonl",
        [a[0]!, a[1]!.replace('{"message":{', '{"message":{"colour":"red",'), ...a.slice(2)],
        /field\.jsonl:2: .*colour/,
      ],
      ["cut.jsonl", a.slice(0, 4), /cut\.jsonl:5: the file ends before the end line/],
    ];
    for (const [name, lines, reason] of cases) {
      writeFileSync(file(name), lines.join("\n"));
      const result = await parley(levelC, ["threads", "import", file(name), "--context", `refused-${name}`]);
      expect(result.code, name).toBe(2);
      expect(result.stderr, name).toMatch(reason);
      expect((await parley(levelC, ["threads", "show", `refused-${name}`])).code, name).toBe(3);
    }
    writeFileSync(file("bad-legacy.jsonl"), `${legacyLog}\n{"role":"system","content":"x"}\n`);
    const legacy = await parley(levelC, ["threads", "import-legacy", file("bad-legacy.jsonl"), "--context", "x"]);
    expect(legacy.code).toBe(2);
    expect(legacy.stderr).toMatch(/bad-legacy\.jsonl:5: role: role must be one of user, assistant, agent/);
    const unnamed = await parley(levelC, ["threads", "import-legacy", file("legacy.jsonl")]);
    expect(unnamed.code).toBe(2);
    expect(unnamed.stderr).toContain("--context");
  });

  it("merges into a thread with other messages only with --append, and never takes another thread's task", async () => {
    const client = createParleyClient({ baseUrl: levelC.baseUrl, protocol: "grpc" });
    await client.a2a.sendMessage({
      message: {
        messageId: "own-1",
        contextId: "own",
        role: Role.USER,
        parts: [{ content: { case: "text", value: "mine" } }],
      },
    });
    client.close();
    const refused = await parley(levelC, ["threads", "import-legacy", file("legacy.jsonl"), "--context", "own"]);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toContain('thread "own" already holds 2 messages the import does not carry');
    const appended = await parley(levelC, [
      "threads",
      "import-legacy",
      file("legacy.jsonl"),
      "--context",
      "own",
      "--append",
    ]);
    expect(appended.code).toBe(0);
    const shown = await parley(levelC, ["threads", "show", "own", "--oldest-first"]);
    expect(shown.stdout.split("\n").slice(0, 3)).toEqual([
      "[1] user: mine",
      expect.stringMatching(/^\[2\] agent: /),
      "[3] user (imported): my name is Ada",
    ]);
    // The same export into another contextId of the same tenant: its task id is trip's.
    const copy = await parley(levelC, ["threads", "import", file("a.jsonl"), "--context", "copy"]);
    expect(copy.code).toBe(4);
    expect(copy.stderr).toContain('already belongs to another thread of this tenant (contextId "trip")');
  });

  it("refuses to export or import a context while a task runs in it (CONTEXT_BUSY)", async () => {
    const client = createParleyClient({ baseUrl: slow.baseUrl, protocol: "grpc" });
    const stream = client.a2a.sendStreamingMessage({
      message: {
        messageId: "slow-1",
        contextId: "busy",
        role: Role.USER,
        parts: [{ content: { case: "text", value: "slowly" } }],
      },
    });
    const iterator = stream[Symbol.asyncIterator]();
    const started = await iterator.next(); // the task exists and runs (8 chunks, 2 s each, canceled below)
    const taskId = started.value?.payload.case === "task" ? started.value.payload.value.id : "";
    expect(taskId).not.toBe("");
    const imported = await parley(slow, [
      "threads",
      "import-legacy",
      file("legacy.jsonl"),
      "--context",
      "busy",
      "--append",
    ]);
    expect(imported.code).toBe(4);
    expect(imported.stderr).toMatch(/context "busy" is busy: task \S+ is still running.*import into it/);
    const exported = await parley(slow, ["threads", "export", "busy"]);
    expect(exported.code).toBe(4);
    expect(exported.stderr).toContain("export it");
    await client.a2a.cancelTask({ id: taskId });
    while (!(await iterator.next()).done) {}
    client.close();
    expect((await parley(slow, ["threads", "export", "busy"])).code).toBe(0);
  });

  it("sees a task running on another PostgreSQL replica as busy too (its lease)", async () => {
    const replica = await startServer({ PARLEY_STORE_URL: pgUrl, PARLEY_ECHO_DELAY_MS: "2000", ...anyPart });
    const client = createParleyClient({ baseUrl: replica.baseUrl, protocol: "grpc" });
    try {
      const stream = client.a2a.sendStreamingMessage({
        message: {
          messageId: "slow-pg",
          contextId: "busy-pg",
          role: Role.USER,
          parts: [{ content: { case: "text", value: "slowly" } }],
        },
      });
      const iterator = stream[Symbol.asyncIterator]();
      const started = await iterator.next();
      const taskId = started.value?.payload.case === "task" ? started.value.payload.value.id : "";
      const imported = await parley(postgresB, [
        "threads",
        "import-legacy",
        file("legacy.jsonl"),
        "--context",
        "busy-pg",
        "--append",
      ]);
      expect(imported.code).toBe(4);
      expect(imported.stderr).toContain(`context "busy-pg" is busy: task ${taskId} is still running`);
      await client.a2a.cancelTask({ id: taskId });
      while (!(await iterator.next()).done) {}
    } finally {
      client.close();
      await replica.close();
    }
  });

  it("imports an export larger than one request in several, with the same result", async () => {
    const result = await parley(slow, ["threads", "import", file("a.jsonl"), "--batch-bytes", "1024", "--json"]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ contextId: "trip", addedMessages: 5, addedTasks: 1 });
    expect((await parley(slow, ["threads", "export", "trip", "--out", file("d.jsonl")])).code).toBe(0);
    expect(withoutExportTimes(file("d.jsonl"))).toBe(withoutExportTimes(file("a.jsonl")));
    const again = await parley(slow, ["threads", "import", file("a.jsonl"), "--batch-bytes", "1024", "--json"]);
    expect(JSON.parse(again.stdout)).toMatchObject({ addedMessages: 0, skippedMessages: 5, skippedTasks: 1 });
  });
});

// The embedded LevelDB store under faults, through the real parley-bridge process: a disk that fills while sends
// run (a 20 MiB tmpfs, needs root), and files damaged while the process is stopped. Nothing acknowledged is lost
// without a word, readiness says NOT_SERVING while writes fail or damage was found, and no altered text is served.
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { grpcHealthV1 } from "@parley/proto";
import { afterEach, describe, expect, it } from "vitest";
import { rpc } from "./harness.js";
import { type SpawnedBridge, spawnBridge } from "./spawn-bridge.js";

const { HealthCheckResponse_ServingStatus: ServingStatus } = grpcHealthV1;
const config = { agents: [{ name: "echo", type: "echo", options: { chunks: 1 } }] };

const dirs: string[] = [];
const mounts: string[] = [];
const running: SpawnedBridge[] = [];
afterEach(async () => {
  for (const bridge of running.splice(0)) {
    bridge.child.kill("SIGKILL");
    await bridge.exited;
  }
  // A lazy unmount when the plain one finds it busy (a child's files closing as it exits).
  for (const mount of mounts.splice(0)) {
    try {
      execFileSync("umount", [mount], { stdio: "ignore" });
    } catch {
      execFileSync("umount", ["-l", mount], { stdio: "ignore" });
    }
  }
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function newDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "parley-store-faults-"));
  dirs.push(dir);
  return dir;
}

async function start(dir: string, env: Record<string, string> = {}): Promise<SpawnedBridge> {
  const bridge = await spawnBridge({ dir, config, env });
  running.push(bridge);
  return bridge;
}

/** SIGTERM and wait for a clean exit. */
async function stop(bridge: SpawnedBridge): Promise<void> {
  bridge.child.kill("SIGTERM");
  expect(await bridge.exited).toEqual({ code: 0, signal: null });
  running.splice(running.indexOf(bridge), 1);
}

interface Answer {
  readonly result?: { task?: Task } & Partial<Task>;
  readonly error?: { code: number; message: string };
}
interface Task {
  readonly id: string;
  readonly contextId: string;
  readonly status: { readonly state: string };
  readonly history?: { parts: { text?: string }[] }[];
}

async function call(bridge: SpawnedBridge, method: string, params: unknown): Promise<{ text: string; body: Answer }> {
  const res = await fetch(bridge.url, {
    method: "POST",
    headers: { "content-type": "application/json", "A2A-Version": "1.0" },
    body: rpc(method, params),
  });
  const text = await res.text();
  return { text, body: JSON.parse(text) as Answer };
}

const send = (bridge: SpawnedBridge, text: string, contextId: string) =>
  call(bridge, "SendMessage", {
    message: { messageId: randomUUID(), role: "ROLE_USER", contextId, parts: [{ text }] },
  });

async function readiness(bridge: SpawnedBridge): Promise<{ status: number; text: string }> {
  const res = await fetch(new URL("/readyz", bridge.url));
  return { status: res.status, text: await res.text() };
}

async function grpcHealth(bridge: SpawnedBridge) {
  const client = createClient(grpcHealthV1.Health, createGrpcTransport({ baseUrl: `http://${bridge.grpcAddress}` }));
  return (await client.check({ service: "" })).status;
}

/** Polls until `check` holds (the event waited for), failing after `ms`. */
async function until(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Sends `count` turns over a few conversations and returns the ones acknowledged COMPLETED, with their texts. */
async function sendMany(bridge: SpawnedBridge, count: number, tag: string) {
  const acked: { id: string; text: string }[] = [];
  const failed: string[] = [];
  for (let i = 0; i < count; i++) {
    const text = `${tag} turn ${i} ${randomUUID()} ${"x".repeat(2000)}`;
    const { text: raw, body } = await send(bridge, text, `${tag}-${i % 5}`);
    const task = body.result?.task;
    if (task?.status.state === "TASK_STATE_COMPLETED") acked.push({ id: task.id, text });
    else failed.push(raw);
  }
  return { acked, failed };
}

/** Every acknowledged turn is there, COMPLETED, with the text that was sent. */
async function expectAllThere(bridge: SpawnedBridge, acked: readonly { id: string; text: string }[]) {
  for (const { id, text } of acked) {
    const { body } = await call(bridge, "GetTask", { id });
    expect(body.error, `task ${id}`).toBeUndefined();
    expect(body.result?.status?.state, JSON.stringify(body.result?.status)).toBe("TASK_STATE_COMPLETED");
    expect(body.result?.history?.[0]?.parts[0]?.text).toBe(text);
  }
}

/** Fills the file system of `dir` with a file until it refuses more (ENOSPC). */
function fill(file: string): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(64 * 1024, 7);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
}

/** Mounts a 20 MiB tmpfs on dir/data; false (and the test skips) when this process may not mount. */
function smallDisk(dir: string): boolean {
  const data = join(dir, "data");
  mkdirSync(data);
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=20m", "tmpfs", data], { stdio: "ignore" });
  } catch {
    return false;
  }
  mounts.push(data);
  return true;
}

describe.each([
  ["default", {}],
  ["synced", { PARLEY_DURABILITY: "synced" }],
])("a disk that fills while sends run (durability %s)", (_mode, env: Record<string, string>) => {
  it("answers a clear error, is NOT_SERVING while writes fail, writes again once space returns, and keeps every acknowledged send", async (test) => {
    const dir = newDir();
    if (!smallDisk(dir)) {
      test.skip("the disk-full test needs root to mount a 20 MiB tmpfs (mount -t tmpfs -o size=20m); skipped");
      return;
    }
    const data = join(dir, "data");
    let bridge = await start(dir, env);
    const before = await sendMany(bridge, 20, "before");
    expect(before.failed).toEqual([]);

    const filler = join(data, "filler");
    fill(filler);
    const during = await sendMany(bridge, 20, "during");
    expect(during.failed.length).toBeGreaterThan(0);
    for (const answer of during.failed) {
      expect(answer).toContain("the disk is full");
      expect(answer).not.toContain(dir);
    }
    const notReady = await readiness(bridge);
    expect(notReady.status).toBe(503);
    expect(notReady.text).toContain("the disk is full");
    expect(await grpcHealth(bridge)).toBe(ServingStatus.NOT_SERVING);
    expect(bridge.stderr()).toContain("the store cannot write");

    rmSync(filler);
    await until("readiness after space returned", async () => (await readiness(bridge)).status === 200);
    expect(await grpcHealth(bridge)).toBe(ServingStatus.SERVING);
    const after = await sendMany(bridge, 50, "after");
    expect(after.failed).toEqual([]);
    await stop(bridge);

    bridge = await start(dir, env);
    expect((await readiness(bridge)).status).toBe(200);
    await expectAllThere(bridge, [...before.acked, ...during.acked, ...after.acked]);
  }, 180_000);
});

/** Runs a bridge on a fresh directory, sends turns with distinctive texts, stops it cleanly, and returns them. */
async function storeWithTurns(count: number, opens = 1) {
  const dir = newDir();
  let bridge = await start(dir);
  const { acked, failed } = await sendMany(bridge, count, "kept");
  expect(failed).toEqual([]);
  await stop(bridge);
  // Each open turns what the log holds into a table file.
  for (let i = 1; i < opens; i++) {
    bridge = await start(dir);
    await stop(bridge);
  }
  return { dir, data: join(dir, "data"), acked };
}

const filesOf = (data: string, suffix: string) =>
  readdirSync(data)
    .filter((name) => name.endsWith(suffix))
    .map((name) => join(data, name));

/** Starts a bridge that must refuse to start; returns what it printed. */
async function refusesToStart(dir: string): Promise<string> {
  const failure = await start(dir).then(
    () => undefined,
    (error: Error) => error.message,
  );
  expect(failure, "the bridge started").toBeDefined();
  return failure!;
}

/** No answer of the bridge for these tasks carries a text other than the one sent (an error is fine). */
async function expectNothingAltered(bridge: SpawnedBridge, acked: readonly { id: string; text: string }[]) {
  for (const { id, text } of acked) {
    const { body } = await call(bridge, "GetTask", { id });
    if (body.error) continue;
    for (const m of body.result?.history ?? []) {
      const got = m.parts[0]?.text ?? "";
      if (got.startsWith("kept turn")) expect(got).toBe(text);
    }
  }
}

describe("damaged store files", () => {
  it("a write-ahead log cut to half: refuses to start, saying how many batches are missing, until the operator acts", async () => {
    const { dir, data, acked } = await storeWithTurns(40);
    const [log] = filesOf(data, ".log");
    truncateSync(log!, Math.floor(statSync(log!).size / 2));
    const printed = await refusesToStart(dir);
    expect(printed).toMatch(/\d+ of the \d+ write batches the store held at its last clean close are missing/);
    expect(printed).toContain(join(data, "PARLEY-DAMAGE"));
    expect(printed).toContain("restore the store from an export");
    // The finding is kept: a second start refuses too.
    expect(await refusesToStart(dir)).toContain("write batches the store held at its last clean close are missing");
    // The operator accepts the store as it is (after exporting it, say): what is left is served, unaltered.
    rmSync(join(data, "PARLEY-DAMAGE"));
    const bridge = await start(dir);
    expect((await readiness(bridge)).status).toBe(200);
    await expectNothingAltered(bridge, acked);
  }, 120_000);

  it("a zeroed write-ahead log: refuses to start rather than serve an empty store", async () => {
    const { dir, data } = await storeWithTurns(40);
    const [log] = filesOf(data, ".log");
    writeFileSync(log!, Buffer.alloc(statSync(log!).size));
    expect(await refusesToStart(dir)).toMatch(/write batches the store held at its last clean close are missing/);
  }, 120_000);

  it("one byte changed inside a stored text in a table file: the text is never served, readiness turns NOT_SERVING", async () => {
    const { dir, data, acked } = await storeWithTurns(10, 2);
    const tables = filesOf(data, ".ldb");
    expect(tables.length).toBeGreaterThan(0);
    // The uuid in the text: unique, so LevelDB's compression keeps it as written (the rest repeats).
    const needle = Buffer.from(acked[3]!.text.split(" ")[3]!);
    let changed = 0;
    for (const table of tables) {
      const bytes = readFileSync(table);
      for (let at = bytes.indexOf(needle); at >= 0; at = bytes.indexOf(needle, at + 1)) {
        bytes[at + 20] ^= 0x01;
        changed++;
      }
      writeFileSync(table, bytes);
    }
    expect(changed).toBeGreaterThan(0);
    const bridge = await start(dir);
    await until("readiness to report the damage", async () => (await readiness(bridge)).status === 503);
    expect((await readiness(bridge)).text).toContain("failed its checksum");
    expect(bridge.stderr()).toContain("the store is damaged");
    await expectNothingAltered(bridge, acked);
  }, 120_000);

  it("a missing table file: refuses to start, naming the file and LevelDB's reason", async () => {
    const { dir, data } = await storeWithTurns(10, 2);
    const [table] = filesOf(data, ".ldb");
    rmSync(table!);
    const printed = await refusesToStart(dir);
    expect(printed).toContain("missing files");
    expect(printed).toContain(table!.slice(table!.lastIndexOf("/") + 1));
    expect(printed).toContain("restore the store from an export");
  }, 120_000);

  it("a damaged MANIFEST: refuses to start, naming the file and the corruption", async () => {
    const { dir, data } = await storeWithTurns(10, 2);
    const [manifest] = readdirSync(data)
      .filter((name) => name.startsWith("MANIFEST-"))
      .map((name) => join(data, name));
    const bytes = readFileSync(manifest!);
    for (let i = 8; i < bytes.length; i += 3) bytes[i] ^= 0x5a;
    writeFileSync(manifest!, bytes);
    const printed = await refusesToStart(dir);
    expect(printed).toMatch(/Corruption/);
    expect(printed).toContain(manifest!.slice(manifest!.lastIndexOf("/") + 1));
  }, 120_000);
});

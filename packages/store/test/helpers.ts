import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClassicLevel } from "classic-level";
import { afterEach } from "vitest";
import { createLevelThreadStore, type LevelThreadStoreOptions } from "../src/backends.js";
import type { LevelThreadStore, TaskRecord } from "../src/index.js";
import { SEAL_TAG } from "../src/level/level-seal.js";

const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

/** A fresh directory under the OS temp dir, removed after the test. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "parley-store-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Opens a store on a fresh directory; it is closed (if still open) after the test. */
export async function openStore(
  options: Partial<LevelThreadStoreOptions> = {},
): Promise<{ store: LevelThreadStore; dir: string }> {
  const dir = options.path ?? (await tempDir());
  const store = await createLevelThreadStore({ ...options, path: dir });
  cleanups.push(() => store.close());
  return { store, dir };
}

export const bytes = (...values: number[]) => new Uint8Array(values);
export const text = (value: string) => new TextEncoder().encode(value);

// lf.a2a.v1.TaskState: 1 SUBMITTED, 2 WORKING, 3 COMPLETED, 4 FAILED, 5 CANCELED, 6 INPUT_REQUIRED, 7 REJECTED.
export const task = (taskId: string, over: Partial<TaskRecord> = {}): TaskRecord => ({
  tenant: "acme",
  taskId,
  contextId: "ctx",
  state: 2,
  updatedAt: 1000,
  payload: text(taskId),
  ...over,
});

/** A settable clock, so time-dependent behaviour is tested without waiting. */
export function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

/** Point reads LevelDB makes while `work` runs (classic-level's synchronous get, which appends and heads use). */
export async function readsDuring(work: () => Promise<unknown>): Promise<number> {
  const original = ClassicLevel.prototype.getSync;
  let reads = 0;
  ClassicLevel.prototype.getSync = function (this: ClassicLevel, ...args: Parameters<typeof original>) {
    reads++;
    return original.apply(this, args);
  } as typeof original;
  try {
    await work();
  } finally {
    ClassicLevel.prototype.getSync = original;
  }
  return reads;
}

/**
 * Turns a closed store's directory into what a build from before the checksum envelope left: every value without
 * the envelope (level-seal.ts) and no marker saying that all values are sealed.
 */
export async function unsealStore(dir: string): Promise<void> {
  const db = new ClassicLevel<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await db.open();
  try {
    const ops: ({ type: "put"; key: Uint8Array; value: Uint8Array } | { type: "del"; key: Uint8Array })[] = [];
    for await (const [k, v] of db.iterator()) {
      if (Buffer.from(k).toString("latin1") === "parley:v1:a:") ops.push({ type: "del", key: k });
      else if (v.length > 0 && v[0] === SEAL_TAG) ops.push({ type: "put", key: k, value: v.subarray(5) });
    }
    await db.batch(ops);
  } finally {
    await db.close();
  }
}

// What the LevelDB store checks when it opens, beyond LevelDB's own recovery: what LevelDB dropped from its log
// (it only says so in its LOG file), writes lost since the last clean close, and each thread's count and sequence.
import { open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { compareBytes, readU64, toHex } from "../core/bytes.js";
import { HASH_BYTES } from "../core/digests.js";
import { StoreError } from "../types.js";
import type { LevelContext } from "./level-context.js";
import { COMMIT_KEY, KEYSPACE, prefixEnd, T_MESSAGE, T_META } from "./level-keys.js";
import { decodeMeta, type LevelMeta } from "./level-records.js";
import { type SealMode, unsealValue } from "./level-seal.js";

/** Written at each clean close: how many batches the store held then. Removed when the store opens again. */
export const CLOSE_FILE = "PARLEY-CLOSED";
/** Written when the store is found damaged; while it exists the store refuses to open (damagedStore). */
export const DAMAGE_FILE = "PARLEY-DAMAGE";

/**
 * The error of a failed open, naming LevelDB's own reason (abstract-level keeps it in `cause`: "Corruption: 1
 * missing files; e.g. .../000017.ldb") and, when that names no file, the MANIFEST that CURRENT points to (what
 * LevelDB reads while opening: its "checksum mismatch" says nothing of where), and what the operator does next.
 */
export async function openFailure(path: string, error: unknown): Promise<StoreError> {
  const causes: string[] = [];
  for (let e = error as { message?: string; cause?: unknown } | undefined; e && causes.length < 4; ) {
    if (typeof e.message === "string" && e.message !== "" && !causes.includes(e.message)) causes.push(e.message);
    e = e.cause as typeof e;
  }
  let reason = causes.length > 1 ? causes.slice(1).join(": ") : (causes[0] ?? String(error));
  if (!reason.includes("/")) {
    const manifest = await readFile(join(path, "CURRENT"), "utf8").then(
      (name) => name.trim(),
      () => undefined,
    );
    if (manifest) reason = `${reason} (reading ${join(path, manifest)}, the MANIFEST that CURRENT names)`;
  }
  return new StoreError(
    "CORRUPT",
    `the LevelDB store at ${path} cannot be opened: ${reason}. Nothing was changed; restore the store from an ` +
      "export into an empty data directory (see docs/store-faults.md)",
    { cause: error },
  );
}

/** The error of an open that found damage: what DAMAGE_FILE says, and the operator's two ways on. */
export function damagedStore(path: string, report: string): StoreError {
  const file = join(path, DAMAGE_FILE);
  return new StoreError(
    "CORRUPT",
    `the LevelDB store at ${path} was found damaged: ${report.split("\n").join("; ")}. The report is kept in ${file}; ` +
      "restore the store from an export into an empty data directory, or remove that file to start on the store " +
      "as it is (see docs/store-faults.md)",
  );
}

/**
 * The lines of LevelDB's LOG (written anew by each open) that report log records it dropped while recovering:
 * "(ignoring error) .../000005.log: dropping 32768 bytes; Corruption: checksum mismatch", "Ignoring error ...".
 */
export async function droppedAtOpen(path: string): Promise<string[]> {
  let text: string;
  try {
    text = await readFile(join(path, "LOG"), "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter((line) => /dropping \d+ bytes|Ignoring error/.test(line))
    .map((line) => line.replace(/^\S+ \S+ \S+ /, "").trim());
}

/** The commit counter the store holds (0 for a store from before it). */
export function storedCommits(ctx: LevelContext): number {
  const raw = ctx.db.getSync(COMMIT_KEY);
  return raw !== undefined && raw.length === 8 ? readU64(raw, 0) : 0;
}

/** The count recorded at the last clean close; `removeCloseRecord` once it was compared (a crash then leaves none). */
export async function readCloseRecord(path: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(join(path, CLOSE_FILE), "utf8");
  } catch {
    return undefined;
  }
  try {
    const commits = (JSON.parse(text) as { commits?: unknown }).commits;
    return typeof commits === "number" && Number.isSafeInteger(commits) ? commits : undefined;
  } catch {
    return undefined;
  }
}

export async function removeCloseRecord(path: string): Promise<void> {
  await rm(join(path, CLOSE_FILE), { force: true });
}

/** Records the commit count at a clean close (after the handle closed), written whole or not at all. */
export async function writeCloseRecord(path: string, commits: number): Promise<void> {
  const file = join(path, CLOSE_FILE);
  await writeDurably(file, `${JSON.stringify({ commits, closedAt: new Date().toISOString() })}\n`);
}

/** The damage report of an earlier open, if the operator has not removed it. */
export async function readDamageFile(path: string): Promise<string | undefined> {
  try {
    return (await readFile(join(path, DAMAGE_FILE), "utf8")).trim();
  } catch {
    return undefined;
  }
}

/** Keeps a damage report beside the store, so the next start refuses writes too until the operator removes it. */
export async function writeDamageFile(path: string, report: string): Promise<void> {
  const earlier = await readDamageFile(path);
  const line = `${new Date().toISOString()} ${report}`;
  await writeDurably(join(path, DAMAGE_FILE), `${earlier ? `${earlier}\n` : ""}${line}\n`);
}

async function writeDurably(file: string, text: string): Promise<void> {
  const tmp = `${file}.tmp`;
  await writeFile(tmp, text);
  const handle = await open(tmp, "r+");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, file);
}

/**
 * Reads every value of the store once, raw, and verifies its checksum (level-seal.ts), and walks every thread
 * meta beside its messages (both ordered by thread digest): returns what is wrong, each finding naming the record
 * or the thread. Stops early (returning what it found so far) once `stop()`.
 */
export async function checkValues(ctx: LevelContext, mode: SealMode, stop: () => boolean): Promise<string[]> {
  const found: string[] = [];
  const verify = (k: Uint8Array, v: Uint8Array): Uint8Array | undefined => {
    try {
      return unsealValue(v, mode);
    } catch (error) {
      if (found.length < MAX_FINDINGS) found.push(`${describeKey(k)}: ${(error as Error).message}`);
      return undefined;
    }
  };
  const raw = { valueEncoding: "view" } as const;
  // The tables other than messages and metas: checksums only.
  for (const [gte, lt] of [
    [KEYSPACE, T_MESSAGE],
    [prefixEnd(T_MESSAGE), T_META],
    [prefixEnd(T_META), prefixEnd(KEYSPACE)],
  ] as const) {
    const it = ctx.db.iterator({ gte, lt, ...raw });
    try {
      for (;;) {
        if (stop()) return found;
        const chunk = await it.nextv(CHECK_CHUNK);
        if (chunk.length === 0) break;
        for (const [k, v] of chunk) verify(k, v);
      }
    } finally {
      await it.close();
    }
  }
  const metas = ctx.db.iterator({ gte: T_META, lt: prefixEnd(T_META), ...raw });
  const messages = ctx.db.iterator({ gte: T_MESSAGE, lt: prefixEnd(T_MESSAGE), ...raw });
  let pending: [Uint8Array, Uint8Array][] = [];
  let at = 0;
  const nextMessage = async (): Promise<[Uint8Array, Uint8Array] | undefined> => {
    if (at < pending.length) return pending[at++];
    pending = await messages.nextv(CHECK_CHUNK);
    at = 0;
    return pending.length === 0 ? undefined : pending[at++];
  };
  const threadOf = (entry: [Uint8Array, Uint8Array]) =>
    entry[0].subarray(T_MESSAGE.length, T_MESSAGE.length + HASH_BYTES);
  try {
    let held = await nextMessage();
    for (;;) {
      if (stop()) return found;
      const chunk = await metas.nextv(CHECK_CHUNK);
      if (chunk.length === 0) break;
      for (const [k, v] of chunk) {
        const th = k.subarray(T_META.length);
        // Messages of a thread without a meta (a purge a crash interrupted, finished on open) are checksummed only.
        while (held && compareBytes(threadOf(held), th) < 0) {
          verify(held[0], held[1]);
          held = await nextMessage();
        }
        let stored = 0;
        let highest = 0;
        let damaged = 0;
        while (held && compareBytes(threadOf(held), th) === 0) {
          stored++;
          highest = Math.max(highest, readU64(held[0], T_MESSAGE.length + HASH_BYTES));
          if (verify(held[0], held[1]) === undefined) damaged++;
          held = await nextMessage();
        }
        const record = verify(k, v);
        if (record === undefined) continue;
        let meta: LevelMeta;
        try {
          meta = decodeMeta(record);
        } catch (error) {
          found.push(`${describeKey(k)}: ${(error as Error).message}`);
          continue;
        }
        const who = `thread ${JSON.stringify(meta.contextId)} of tenant ${JSON.stringify(meta.tenant)}`;
        if (damaged > 0) found.push(`${who}: ${damaged} of its ${stored} stored messages are damaged`);
        if (meta.messageCount !== stored || meta.lastSequence !== highest) {
          found.push(
            `${who}: its record says ${meta.messageCount} messages up to sequence ${meta.lastSequence}, ` +
              `the store holds ${stored} up to sequence ${highest}`,
          );
        }
        if (found.length >= MAX_FINDINGS) return found;
      }
    }
    while (held) {
      verify(held[0], held[1]);
      held = await nextMessage();
    }
    return found;
  } finally {
    await Promise.allSettled([metas.close(), messages.close()]);
  }
}

/** Findings kept per check: enough to tell the operator what was lost without a log line of megabytes. */
const MAX_FINDINGS = 50;
const CHECK_CHUNK = 1_000;

/** The record a key names, for a finding: its table and key bytes. */
function describeKey(k: Uint8Array): string {
  const table = k.length > KEYSPACE.length ? String.fromCharCode(k[KEYSPACE.length]!) : "?";
  return `record ${TABLE_NAMES[table] ?? `in table ${table}`} at key ${toHex(k)}`;
}

const TABLE_NAMES: Record<string, string> = {
  t: "thread meta",
  m: "message",
  i: "messageId index",
  k: "task",
  p: "push config",
  e: "task events",
  g: "task event log head",
  r: "unfinished task",
  d: "tenant task index",
  c: "context task index",
  s: "conversation",
  v: "conversation event",
};

import { Level } from "level";
import { describe, expect, it } from "vitest";
import { createLevelThreadStore } from "../src/backends.js";
import { type StoredMessage, threadDigest } from "../src/index.js";
import { spawnFixture } from "./child.js";
import { tempDir } from "./helpers.js";

interface Ack {
  contextId: string;
  messageId: string;
  sequence: number;
  payloadHex: string;
}

const CYCLES = 3;
const ACKS_BEFORE_KILL = 300;

async function countKeys(dir: string, prefix: Buffer): Promise<number> {
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1;
  const raw = new Level<Uint8Array, Uint8Array>(dir, { keyEncoding: "view", valueEncoding: "view" });
  await raw.open();
  try {
    return (await raw.keys({ gte: prefix, lt: end }).all()).length;
  } finally {
    await raw.close();
  }
}

describe("durability", () => {
  it("keeps every acknowledged append, complete and exactly once, across SIGKILLs mid-burst", async () => {
    const dir = await tempDir();
    const acks: Ack[] = [];
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      const burst = spawnFixture("append-burst.mjs", [dir, String(cycle)]);
      try {
        await burst.waitFor((lines) => lines.length > ACKS_BEFORE_KILL);
      } finally {
        burst.child.kill("SIGKILL");
      }
      expect((await burst.exited).signal).toBe("SIGKILL");
      for (const line of burst.lines) {
        const [word, contextId, messageId, sequence, payloadHex] = line.split(" ");
        if (word !== "ack") continue;
        acks.push({
          contextId: contextId!,
          messageId: messageId!,
          sequence: Number(sequence),
          payloadHex: payloadHex!,
        });
      }

      const store = await createLevelThreadStore({ path: dir });
      const contexts = new Map<string, { count: number; last: number }>();
      try {
        const byContext = new Map<string, Map<string, StoredMessage[]>>();
        for (const contextId of new Set(acks.map((a) => a.contextId))) {
          const all = await store.readMessages({ tenant: "dur", contextId }, { order: "oldest-first", limit: 100_000 });
          const byId = new Map<string, StoredMessage[]>();
          for (const m of all.messages) byId.set(m.messageId, [...(byId.get(m.messageId) ?? []), m]);
          byContext.set(contextId, byId);
        }
        for (const ack of acks) {
          const matching = byContext.get(ack.contextId)?.get(ack.messageId) ?? [];
          expect(matching).toHaveLength(1);
          expect(matching[0]!.sequence).toBe(ack.sequence);
          expect(Buffer.from(matching[0]!.payload).toString("hex")).toBe(ack.payloadHex);
        }
        const threads = (await store.listThreads("dur", { limit: 100 })).threads;
        expect(new Set(threads.map((t) => t.contextId)).size).toBe(threads.length);
        for (const meta of threads) {
          const all = await store.readMessages(meta, { order: "oldest-first", limit: 100_000 });
          expect(meta.messageCount).toBe(all.messages.length);
          expect(meta.lastSequence).toBe(Math.max(...all.messages.map((m) => m.sequence)));
          expect(all.messages.map((m) => m.sequence)).toEqual(all.messages.map((_, i) => i + 1));
          expect(new Set(all.messages.map((m) => m.messageId)).size).toBe(all.messages.length);
          contexts.set(meta.contextId, { count: meta.messageCount, last: meta.lastSequence });
        }
        for (const task of await store.listUnfinishedTasks()) expect([3, 4, 5, 7]).not.toContain(task.state);
      } finally {
        await store.close();
      }
      // The indexes, read raw: one listing entry per thread, one messageId list per (here unique) messageId.
      expect(await countKeys(dir, Buffer.from("parley:v1:l:"))).toBe(contexts.size);
      for (const [contextId, { count }] of contexts) {
        const prefix = Buffer.concat([Buffer.from("parley:v1:i:"), Buffer.from(threadDigest("dur", contextId), "hex")]);
        expect(await countKeys(dir, prefix)).toBe(count);
      }
    }
    expect(acks.length).toBeGreaterThanOrEqual(CYCLES * ACKS_BEFORE_KILL);
  });
});

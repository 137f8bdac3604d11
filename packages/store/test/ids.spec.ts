import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { longLivedFromHex, toHex } from "../src/core/bytes.js";
import { digest, HASH_BYTES, taskHash, tenantHash, threadHash } from "../src/core/digests.js";
import { idLimits, StoreError, threadDigest } from "../src/index.js";
import { openStore, text } from "./helpers.js";

const hostileContextIds = [
  "tenant/a",
  "tenanta",
  "caf\u00e9", // NFC
  "cafe\u0301", // NFD of the same word
  "Cafe\u0301",
  "CAFE\u0301",
  "../x",
  "..\\x",
  "x/../../etc/passwd",
  "a\u0000b",
  "a\u0000",
  "\u0001\u001f\u007f\n\t",
  "💬 thread",
  ".",
  " ",
  "x".repeat(idLimits.contextId),
];

describe("hostile ids", () => {
  it("keeps every distinct contextId distinct and returns it byte-exact", async () => {
    const { store, dir } = await openStore();
    for (const [i, contextId] of hostileContextIds.entries()) {
      await store.append({ tenant: "t", contextId }, { messageId: "m", provenance: "user", payload: text(`#${i}`) });
    }
    for (const [i, contextId] of hostileContextIds.entries()) {
      const [only, ...rest] = await store.tail({ tenant: "t", contextId }, 10);
      expect(rest).toEqual([]);
      expect(new TextDecoder().decode(only!.payload)).toBe(`#${i}`);
      const meta = await store.getThread({ tenant: "t", contextId });
      expect(meta?.contextId).toBe(contextId);
      expect(meta?.messageCount).toBe(1);
    }
    const listed = (await store.listThreads("t", { limit: 100 })).threads.map((t) => t.contextId);
    expect(listed.sort()).toEqual([...hostileContextIds].sort());
    expect(dir).not.toContain("..");
  });

  it("separates tenant from contextId unambiguously", async () => {
    const { store } = await openStore();
    const pairs = [
      { tenant: "tenant/a", contextId: "b" },
      { tenant: "tenant", contextId: "/ab" },
      { tenant: "tenant/", contextId: "ab" },
      { tenant: "Tenant", contextId: "/ab" },
    ];
    const digests = new Set(pairs.map((p) => threadDigest(p.tenant, p.contextId)));
    expect(digests.size).toBe(pairs.length);
    for (const d of digests) expect(d).toMatch(/^[0-9a-f]{64}$/);
    for (const [i, pair] of pairs.entries()) {
      await store.append(pair, { messageId: "m", provenance: "user", payload: text(String(i)) });
    }
    for (const [i, pair] of pairs.entries()) {
      const messages = await store.tail(pair, 5);
      expect(messages.map((m) => new TextDecoder().decode(m.payload))).toEqual([String(i)]);
      expect((await store.listThreads(pair.tenant, { limit: 10 })).threads).toEqual([await store.getThread(pair)]);
    }
  });

  it("is stable: the digest does not depend on the process or call", () => {
    expect(threadDigest("t", "c")).toBe(threadDigest("t", "c"));
    expect(threadDigest("t", "c")).not.toBe(threadDigest("t", "C"));
  });

  it("is SHA-256 over the tag and the fields, each as u32 big-endian length + UTF-8 (what stored keys are made of)", () => {
    const independent = (fields: string[]) => {
      const parts = fields.flatMap((field) => {
        const bytes = new TextEncoder().encode(field);
        const length = Buffer.alloc(4);
        length.writeUInt32BE(bytes.length);
        return [length, bytes];
      });
      return createHash("sha256").update(Buffer.concat(parts)).digest("hex");
    };
    for (const contextId of hostileContextIds) {
      expect(threadDigest("t\u00e9", contextId)).toBe(independent(["parley.thread.v1", "t\u00e9", contextId]));
    }
    // Around 128 UTF-8 bytes, where a length prefix stops being ASCII, and lone surrogates (written as U+FFFD).
    const edges = ["x".repeat(127), "x".repeat(128), "\u00e9".repeat(63), "\u00e9".repeat(64), "\ud83d", "a\udcac"];
    for (const field of edges) {
      for (const fields of [[field], [field, "c"], ["t", field]]) {
        expect(toHex(digest("parley.thread.v1", fields))).toBe(independent(["parley.thread.v1", ...fields]));
      }
    }
  });

  it("refuses empty, oversized and ill-formed ids with INVALID_ID naming the id and the limit", async () => {
    const { store } = await openStore();
    const payload = text("p");
    const expectInvalid = async (promise: Promise<unknown>, pattern: RegExp) => {
      const err = await promise.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StoreError);
      expect((err as StoreError).code).toBe("INVALID_ID");
      expect((err as StoreError).message).toMatch(pattern);
    };
    await expectInvalid(
      store.append({ tenant: "", contextId: "c" }, { messageId: "m", provenance: "user", payload }),
      /tenant is empty/,
    );
    await expectInvalid(store.getThread({ tenant: "t", contextId: "" }), /contextId is empty/);
    await expectInvalid(
      store.append({ tenant: "t", contextId: "x".repeat(100_000) }, { messageId: "m", provenance: "user", payload }),
      /contextId .*1024/,
    );
    // 86 three-byte characters are 258 UTF-8 bytes: under the limit in UTF-16 units, over it in bytes.
    await expectInvalid(
      store.getThread({ tenant: "\u20ac".repeat(86), contextId: "c" }),
      /tenant is 258 UTF-8 bytes; the limit is 256/,
    );
    await expectInvalid(
      store.append({ tenant: "t", contextId: "c" }, { messageId: "m".repeat(1025), provenance: "user", payload }),
      /messageId .*1024/,
    );
    await expectInvalid(store.getThread({ tenant: "t", contextId: "a\ud800b" }), /contextId .*surrogate/);
    await expectInvalid(store.getThread({ tenant: "t\udfff", contextId: "c" }), /tenant .*surrogate/);
    await expectInvalid(store.getTask("t", ""), /taskId is empty/);
    await expectInvalid(store.getPushConfig("t", "task", "c".repeat(2000)), /configId .*1024/);
    expect(() => threadDigest("t", "")).toThrow(StoreError);
    // Nothing was written by the refused calls.
    expect(await store.listThreads("t", { limit: 10 })).toEqual({ threads: [] });
  });

  it("accepts ids exactly at the byte limit, multi-byte included", async () => {
    const { store } = await openStore();
    const tenant = `${"\u20ac".repeat(85)}x`; // 256 bytes
    const contextId = "😀".repeat(256); // 1024 bytes
    await store.append({ tenant, contextId }, { messageId: "m", provenance: "user", payload: text("p") });
    expect((await store.getThread({ tenant, contextId }))?.contextId).toBe(contextId);
  });
});

describe("cached digests", () => {
  it("are cut from slabs of their own, never from Node's buffer pool (a pool slice keeps its whole slab alive)", () => {
    const made: Uint8Array[] = [];
    const pooled: Buffer[] = [];
    // Enough to fill several slabs, each digest made between two short-lived pool allocations, as on a send.
    for (let i = 0; i < 300; i++) {
      pooled.push(Buffer.from(`before ${i}`));
      made.push(i % 2 === 0 ? threadHash("t", `c${i}`) : taskHash("t", `k${i}`));
      pooled.push(Buffer.from(`after ${i}`));
    }
    const pools = new Set(pooled.map((b) => b.buffer));
    for (const [i, bytes] of made.entries()) {
      expect(pools.has(bytes.buffer as ArrayBuffer)).toBe(false);
      expect(bytes.length).toBe(HASH_BYTES);
      const tag = i % 2 === 0 ? "parley.thread.v1" : "parley.task.v1";
      expect(toHex(bytes)).toBe(toHex(digest(tag, ["t", i % 2 === 0 ? `c${i}` : `k${i}`])));
    }
    // One after the other: 128 digests to a 4 KB slab, so 300 of them take three (four when the first was begun).
    expect(new Set(made.map((b) => b.buffer)).size).toBeLessThanOrEqual(4);
    expect(tenantHash("a tenant").buffer.byteLength).toBe(4096);
  });

  it("refuses text that is not hex of whole bytes rather than keep a short digest", () => {
    expect(() => longLivedFromHex("abc")).toThrow(RangeError);
    expect(() => longLivedFromHex("zz")).toThrow(RangeError);
    expect(toHex(longLivedFromHex("00ff10"))).toBe("00ff10");
  });
});

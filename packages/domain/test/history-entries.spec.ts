// The history entry of a message this process appended is made from the message it appended; it must be the
// entry a decode of the stored bytes makes (another process, or this one after the cache let go of it).
import { create, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@parley/proto";
import type { StoredMessage } from "@parley/store";
import { describe, expect, it } from "vitest";
import { readHistory, rememberAppended } from "../src/engine/history-read.js";

const messages = [
  create(MessageSchema, { messageId: "a", role: Role.USER, parts: [{ content: { case: "text", value: "hello" } }] }),
  create(MessageSchema, {
    messageId: "b",
    role: Role.AGENT,
    parts: [
      { content: { case: "text", value: "one" } },
      { content: { case: "url", value: "http://x" }, filename: "f" },
    ],
    metadata: { "urn:chain": { id: "c", stepsLeft: 3, hopCount: 1 }, parley: { source: "session-a", hops: ["x"] } },
  }),
  create(MessageSchema, {
    messageId: "c",
    role: Role.AGENT,
    parts: [{ content: { case: "text", value: "imported" } }],
    metadata: { parley: { source: 7 } },
  }),
];
const provenances = ["user", "inter-session", "imported"] as const;

function storedOf(): StoredMessage[] {
  return messages.map((m, i) => ({
    sequence: i + 3,
    messageId: m.messageId,
    provenance: provenances[i]!,
    taskId: "t",
    payload: toBinary(MessageSchema, m),
    createdAt: 0,
  }));
}

/** A store whose tail hands out the given objects, as LevelDB's tail cache does. */
function storeOf(stored: StoredMessage[]) {
  return { tail: async () => stored } as unknown as Parameters<typeof readHistory>[0];
}

describe("history entries of appended messages", () => {
  it("are the entries a decode of the stored bytes makes", async () => {
    const decoded = await readHistory(storeOf(storedOf()), { tenant: "", contextId: "c" }, 20, 20);
    const appended = storedOf();
    for (const [i, stored] of appended.entries()) rememberAppended(stored, messages[i]!);
    const remembered = await readHistory(storeOf(appended), { tenant: "", contextId: "c" }, 20, 20);
    expect(remembered).toEqual(decoded);
    expect(decoded.map((e) => e.source)).toEqual([undefined, "session-a", undefined]);
    expect(decoded[2]!.role).toBe("agent");
  });
});

import { describe, expect, it } from "vitest";
import { contextIdOfNewConversation } from "../src/engine/retry-context.js";

// A retry of a message sent without contextId finds its first send's conversation only if the derived id
// never changes: these values were made by the first version (a hash per field, before the one-buffer digest),
// so a store written by it still answers retries sent to this one.
describe("contextId of a new conversation", () => {
  it("is the one earlier versions derived", () => {
    expect(contextIdOfNewConversation("acme", "msg-1", new Uint8Array([10, 5, 109, 115, 103, 45, 49]))).toBe(
      "ctx-d64b90ef-ad95-11f9-ff8f-17708831f1d1",
    );
    expect(contextIdOfNewConversation("", "é-ü", new Uint8Array(0))).toBe("ctx-1a6fea33-87b8-ce40-414e-61852317faef");
    expect(contextIdOfNewConversation("t".repeat(300), "x", new Uint8Array(200).fill(7))).toBe(
      "ctx-4b43fca6-90ee-ab6b-42fd-923f9d05fc4c",
    );
  });

  it("differs when tenant, messageId or bytes differ, also where their concatenations agree", () => {
    const bytes = new Uint8Array([1, 2, 3]);
    const base = contextIdOfNewConversation("ab", "c", bytes);
    expect(contextIdOfNewConversation("a", "bc", bytes)).not.toBe(base);
    expect(contextIdOfNewConversation("ab", "d", bytes)).not.toBe(base);
    expect(contextIdOfNewConversation("ab", "c", new Uint8Array([1, 2, 4]))).not.toBe(base);
  });
});

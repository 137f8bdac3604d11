import { create, toBinary } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { storedInbound } from "../src/engine/message-validation.js";

const inbounds = {
  fresh: create(MessageSchema, {
    messageId: "m1",
    role: Role.USER,
    parts: [{ content: { case: "text", value: "hi" } }],
  }),
  "no role, metadata and lists": create(MessageSchema, {
    messageId: "m2",
    parts: [{ content: { case: "text", value: "ü☃" }, filename: "f" }, { content: { case: "url", value: "http://x" } }],
    metadata: { k: { nested: [1, "two", true, null] } },
    extensions: ["urn:x"],
    referenceTaskIds: ["t0"],
  }),
  "same context": create(MessageSchema, {
    messageId: "m3",
    contextId: "ctx",
    role: Role.AGENT,
    parts: [{ content: { case: "text", value: "again" } }],
  }),
  "other ids": create(MessageSchema, {
    messageId: "m4",
    contextId: "ctx-old",
    taskId: "task-old",
    role: Role.USER,
    parts: [{ content: { case: "text", value: "x" } }],
  }),
};

describe("the task's copy of an inbound message", () => {
  for (const [name, inbound] of Object.entries(inbounds)) {
    it(`${name}: the copy takes the task's ids and a role, and the inbound message is unchanged`, () => {
      const before = toBinary(MessageSchema, inbound);
      for (const [contextId, taskId] of [
        ["ctx", "task"],
        [inbound.contextId || "ctx-new", inbound.taskId || "task-new"],
      ] as const) {
        const stored = storedInbound(inbound, contextId, taskId);
        expect(stored.contextId).toBe(contextId);
        expect(stored.taskId).toBe(taskId);
        expect(stored.role).toBe(inbound.role === Role.UNSPECIFIED ? Role.USER : inbound.role);
        // The copy's lists are its own: the task's history may be changed without touching the caller's message.
        expect(stored.parts).not.toBe(inbound.parts);
        expect(stored.parts).toEqual(inbound.parts);
      }
      expect(toBinary(MessageSchema, inbound)).toEqual(before);
    });
  }
});

import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { MessageSchema, Role } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { encodeInbound, encodeStoredInbound, storedInbound } from "../src/engine/message-validation.js";

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
    it(`${name}: its bytes from the inbound bytes decode to the copy, and the inbound message is unchanged`, () => {
      const before = toBinary(MessageSchema, inbound);
      for (const [contextId, taskId] of [
        ["ctx", "task"],
        [inbound.contextId || "ctx-new", inbound.taskId || "task-new"],
      ] as const) {
        const stored = storedInbound(inbound, contextId, taskId);
        expect(stored.contextId).toBe(contextId);
        expect(stored.taskId).toBe(taskId);
        expect(stored.role).toBe(inbound.role === Role.UNSPECIFIED ? Role.USER : inbound.role);
        const decoded = fromBinary(MessageSchema, encodeStoredInbound(encodeInbound(inbound), inbound, stored));
        expect(equals(MessageSchema, decoded, stored)).toBe(true);
        expect(equals(MessageSchema, decoded, fromBinary(MessageSchema, toBinary(MessageSchema, stored)))).toBe(true);
        // The ids that differ appended as fields, as protobuf's own writer appends them.
        const writer = new BinaryWriter().raw(encodeInbound(inbound));
        if (contextId !== inbound.contextId) writer.tag(2, WireType.LengthDelimited).string(contextId);
        if (taskId !== inbound.taskId) writer.tag(3, WireType.LengthDelimited).string(taskId);
        if (stored.role !== inbound.role) writer.tag(4, WireType.Varint).int32(stored.role);
        expect(encodeStoredInbound(encodeInbound(inbound), inbound, stored)).toEqual(writer.finish());
      }
      expect(toBinary(MessageSchema, inbound)).toEqual(before);
    });
  }
});

import { describe, expect, it } from "vitest";
import { ByteWriter, lengthPrefixedUtf8, toHex, u64 } from "../src/core/bytes.js";
import { key, messageKey, T_MESSAGE } from "../src/level/level-keys.js";
import {
  decodeMessage,
  decodeMessageIdEntries,
  decodeMeta,
  decodeTask,
  encodeMessage,
  encodeMessageIdEntries,
  encodeMeta,
  encodeTask,
} from "../src/level/level-records.js";

// The bytes every stored record has had since its version was introduced: records on disk are read by these
// decoders forever, so an encoder rewritten for speed must write them byte for byte.
const meta = {
  tenant: "tenant/a",
  contextId: "caf\u00e9 \u{1f4ac}",
  createdAt: 1_700_000_000_123,
  updatedAt: 1_700_000_000_456,
  messageCount: 3,
  lastSequence: 2 ** 40 + 7,
  listedAt: 1_700_000_000_400,
};
const payload = Uint8Array.of(1, 2, 3, 250);

describe("LevelDB record encodings", () => {
  it("write a thread meta (version 2) byte for byte and read it back", () => {
    const bytes = encodeMeta(meta);
    expect(toHex(bytes)).toBe(
      "020000018bcfe5687b0000018bcfe569c8000000000000000300000100000000070000018bcfe56990" +
        "0000000874656e616e742f610000000a636166c3a920f09f92ac",
    );
    expect(decodeMeta(bytes)).toEqual(meta);
  });

  it("write a message with and without its task byte for byte and read them back", () => {
    const withTask = {
      sequence: 9,
      messageId: "m-1",
      provenance: "inter-session" as const,
      taskId: "t\u00e9",
      payload,
      createdAt: 2 ** 45 + 1,
    };
    expect(toHex(encodeMessage(withTask))).toBe("01030000200000000001000000036d2d31010000000374c3a9010203fa");
    expect(decodeMessage(9, encodeMessage(withTask))).toEqual(withTask);
    const plain = { sequence: 9, messageId: "", provenance: "user" as const, payload, createdAt: 0 };
    expect(toHex(encodeMessage(plain))).toBe("010100000000000000000000000000010203fa");
    expect(decodeMessage(9, encodeMessage(plain))).toEqual(plain);
  });

  it("write a task record byte for byte and read it back", () => {
    const task = {
      tenant: "",
      taskId: "task-1",
      contextId: "ctx",
      state: 7,
      updatedAt: Number.MAX_SAFE_INTEGER,
      payload,
    };
    expect(toHex(encodeTask(task))).toBe(
      "0100000007001fffffffffffff00000000000000067461736b2d3100000003637478010203fa",
    );
    expect(decodeTask(encodeTask(task))).toEqual(task);
  });

  it("write message-id entries as sequence and digest pairs", () => {
    const entries = [
      { sequence: 1, digest: new Uint8Array(32).fill(0xab) },
      { sequence: 2 ** 33, digest: new Uint8Array(32).fill(0x01) },
    ];
    const bytes = encodeMessageIdEntries(entries);
    expect(toHex(bytes)).toBe(`0000000000000001${"ab".repeat(32)}0000000200000000${"01".repeat(32)}`);
    expect(decodeMessageIdEntries(Uint8Array.of(), bytes, 2 ** 33)).toEqual(entries);
  });

  it("build a message key as the concatenation of its table, thread and sequence", () => {
    const th = new Uint8Array(32).fill(7);
    for (const sequence of [0, 1, 255, 2 ** 32 + 1, Number.MAX_SAFE_INTEGER]) {
      expect(toHex(messageKey(th, sequence))).toBe(toHex(key(T_MESSAGE, th, u64(sequence))));
    }
  });
});

describe("ByteWriter", () => {
  it("writes length-prefixed UTF-8 as lengthPrefixedUtf8, lone surrogates as U+FFFD", () => {
    const fields = ["a", "", "\u{1f4ac}", "\ud800"];
    expect(toHex(lengthPrefixedUtf8(fields))).toBe("00000001610000000000000004f09f92ac00000003efbfbd");
  });

  it("refuses a number that is not a u64 and a record not written to its length", () => {
    expect(() => new ByteWriter(8).u64(-1)).toThrow(/not a u64: -1/);
    expect(() => new ByteWriter(8).u64(1.5)).toThrow(/not a u64/);
    expect(() => new ByteWriter(9).u64(1).done()).toThrow(/wrote 8 of 9 bytes/);
    expect(() => new ByteWriter(2).bytes(Uint8Array.of(1, 2, 3))).toThrow(/past the record's length/);
  });
});

import { equals, fromJson, type JsonValue, toBinary } from "@bufbuild/protobuf";
import { SendMessageRequestSchema } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { sendRequestOf } from "../src/send-params.js";

const metadata = {
  chain: { id: "c-1", stepsLeft: 3, hops: 2.5 },
  list: [null, "", true, -1, -0, [], [{ d: [1] }]],
  "7": {},
};

/** Params as a client sends them (parsed from JSON text, as the handler hands them over). */
const parsed = (value: unknown) => JSON.parse(JSON.stringify(value)) as JsonValue;

const common: unknown[] = [
  {},
  { message: {} },
  { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "hi" }] } },
  { message: { messageId: "m", role: "ROLE_UNSPECIFIED", parts: [{ text: "" }], contextId: "c", taskId: "t" } },
  {
    tenant: "acme",
    metadata,
    message: {
      metadata,
      messageId: "m ☃ \ud83d\udcac",
      contextId: "c",
      role: "ROLE_AGENT",
      parts: [
        { text: 'a \u0000 "b"' },
        { url: "https://example.com/f.txt", filename: "f.txt", mediaType: "text/plain" },
        { metadata: { k: [1] }, text: "with metadata" },
      ],
      extensions: ["https://example.com/ext"],
      referenceTaskIds: ["t-0", "t-1"],
    },
  },
];

/** Params fromJson reads (or refuses) itself: each gets undefined here. */
const other: unknown[] = [
  null,
  [],
  "text",
  { configuration: { returnImmediately: true }, message: { messageId: "m", parts: [{ text: "x" }] } },
  { message: { message_id: "m" } },
  { message: { messageId: "m", kind: "message" } },
  { message: { messageId: "m", role: 1 } },
  { message: { messageId: "m", role: "ROLE_NOBODY" } },
  { message: { messageId: null } },
  { message: { messageId: 7 } },
  { message: { parts: [{ raw: "AQI=" }] } },
  { message: { parts: [{ data: { a: 1 } }] } },
  { message: { parts: [{ text: "a", url: "https://example.com" }] } },
  { message: { parts: [{}] } },
  { message: { parts: [{ text: "a", extra: 1 }] } },
  { message: { parts: {} } },
  { message: { extensions: [1] } },
  { message: { metadata: [] } },
  { message: { metadata: "x" } },
  { message: { messageId: "a\ud800" } },
  { message: { metadata: { "a\udc00": 1 } } },
  { tenant: 3 },
  { metadata: { n: null }, unknown: true },
];

describe("SendMessage params of the common shape", () => {
  it("make the request fromJson makes", () => {
    for (const params of common.map(parsed)) {
      const fast = sendRequestOf(params);
      expect(fast, JSON.stringify(params)).toBeDefined();
      const strict = fromJson(SendMessageRequestSchema, params);
      expect(equals(SendMessageRequestSchema, fast!, strict)).toBe(true);
      expect(toBinary(SendMessageRequestSchema, fast!)).toEqual(toBinary(SendMessageRequestSchema, strict));
      // One shape for V8 with fromJson's own messages.
      if (strict.message) {
        expect(Object.keys(fast!.message!)).toEqual(Object.keys(strict.message));
        for (const [i, part] of strict.message.parts.entries()) {
          expect(Object.keys(fast!.message!.parts[i]!)).toEqual(Object.keys(part));
        }
      }
    }
  });

  it("leave every other request to fromJson", () => {
    for (const params of other) expect(sendRequestOf(params), JSON.stringify(params)).toBeUndefined();
    // A __proto__ key (JSON.parse keeps it as a key) and a number JSON cannot spell.
    expect(sendRequestOf(JSON.parse('{"message": {"metadata": {"__proto__": {"x": 1}}}}'))).toBeUndefined();
    expect(sendRequestOf({ message: { metadata: { n: Number.NaN } } })).toBeUndefined();
    expect(sendRequestOf({ message: Object.create(null) })).toBeUndefined();
  });
});

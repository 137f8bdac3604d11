import { describe, expect, it } from "vitest";
import { JsonRpcCode, JsonRpcError } from "../src/json-rpc-error.js";
import { jsonDepth, parseEnvelope, parseJsonBody, salvageId } from "../src/json-rpc-request.js";

function codeOf(fn: () => unknown): number | undefined {
  try {
    fn();
  } catch (error) {
    return error instanceof JsonRpcError ? error.code : undefined;
  }
  return undefined;
}

describe("JSON-RPC request parsing", () => {
  it("measures nesting outside string literals only", () => {
    expect(jsonDepth('{"a":[1,{"b":"[[[{{{"}]}')).toBe(3);
    expect(jsonDepth('"\\"[["')).toBe(0);
  });

  it("refuses invalid UTF-8, bad JSON and deep nesting with distinct codes", () => {
    expect(codeOf(() => parseJsonBody(Buffer.from([0x7b, 0xff, 0x7d]), 64))).toBe(JsonRpcCode.ParseError);
    expect(codeOf(() => parseJsonBody(Buffer.from("{nope"), 64))).toBe(JsonRpcCode.ParseError);
    expect(codeOf(() => parseJsonBody(Buffer.from("[".repeat(65) + "]".repeat(65)), 64))).toBe(
      JsonRpcCode.InvalidRequest,
    );
  });

  it("validates the envelope and keeps a usable id for the error reply", () => {
    expect(parseEnvelope({ jsonrpc: "2.0", id: 7, method: "GetTask", params: { id: "t" } })).toEqual({
      id: 7,
      method: "GetTask",
      params: { id: "t" },
      notification: false,
    });
    // No id member: a notification (answered with nothing); an id of null is a request.
    expect(parseEnvelope({ jsonrpc: "2.0", method: "GetTask", params: { id: "t" } })).toEqual({
      id: null,
      method: "GetTask",
      params: { id: "t" },
      notification: true,
    });
    expect(parseEnvelope({ jsonrpc: "2.0", id: null, method: "GetTask" }).notification).toBe(false);
    expect(codeOf(() => parseEnvelope([]))).toBe(JsonRpcCode.InvalidRequest);
    expect(codeOf(() => parseEnvelope({ jsonrpc: "1.0", id: 1, method: "x" }))).toBe(JsonRpcCode.InvalidRequest);
    expect(codeOf(() => parseEnvelope({ jsonrpc: "2.0", id: {}, method: "x" }))).toBe(JsonRpcCode.InvalidRequest);
    expect(salvageId({ jsonrpc: "1.0", id: "keep" })).toBe("keep");
    expect(salvageId({ id: { no: 1 } })).toBeNull();
  });

  it("refuses a lone surrogate escape in any case and at any depth, keys included, and takes escaped pairs", () => {
    const message = (raw: string) => {
      try {
        parseJsonBody(Buffer.from(raw), 64);
      } catch (error) {
        return (error as Error).message;
      }
      return "accepted";
    };
    expect(message('{"params":{"message":{"parts":[{"text":"a\\uD800"}]}}}')).toMatch(
      /params\.message\.parts\.0\.text contains an unpaired UTF-16 surrogate/,
    );
    expect(message('{"a":{"\\udfff":1}}')).toMatch(/a\.\udfff contains an unpaired/);
    expect(message('{"text":"\\ud83d\\ude00 and \\\\ud800"}')).toBe("accepted");
    expect(message('{"text":"\\u00e9"}')).toBe("accepted");
  });

  it("names what is wrong with an envelope the quick check does not pass", () => {
    const messageOf = (value: unknown) => {
      try {
        parseEnvelope(value);
      } catch (error) {
        return (error as Error).message;
      }
      return "accepted";
    };
    expect(messageOf({ jsonrpc: "2.0", id: null, method: "SendMessage" })).toBe("accepted");
    expect(messageOf({ jsonrpc: "2.0", id: "a", method: "" })).toMatch(/method must not be empty/);
    expect(messageOf({ jsonrpc: "2.0", id: 1, method: 5 })).toMatch(/method must be a string/);
    expect(messageOf({ jsonrpc: 2, id: 1, method: "x" })).toMatch(/jsonrpc must be exactly "2.0"/);
    expect(messageOf({ jsonrpc: "2.0", id: true, method: "x" })).toMatch(/id must be a string, a number or null/);
  });
});

// One negotiation for every route: the A2A-Version query parameter, else the header, else 0.3.
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JsonRpcCode } from "../src/json-rpc-error.js";
import { postRaw, rpc, startStack, type TestStack } from "./harness.js";

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

const v1Send = () =>
  rpc("SendMessage", { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "v1" }] } });
const v03Send = () =>
  rpc("message/send", { message: { messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: "v03" }] } });

describe("A2A version negotiation", () => {
  it("reads a JSON-RPC request's version from the query parameter, else the header, else 0.3", async () => {
    const url = stack.bridge.url;
    const [byQuery, byHeader, byDefault, emptyQuery, wrongVersion] = await Promise.all([
      postRaw(`${url}?A2A-Version=1.0`, v1Send(), { "A2A-Version": "0.3" }),
      postRaw(url, v1Send(), { "A2A-Version": " 1.0 " }),
      postRaw(url, v03Send()),
      postRaw(`${url}?A2A-Version=`, v1Send(), { "A2A-Version": "1.0" }),
      postRaw(url, v1Send(), { "A2A-Version": "0.3" }),
    ]);
    expect(Object.keys(byQuery.json.result as object)).toEqual(["task"]);
    expect(Object.keys(byHeader.json.result as object)).toEqual(["task"]);
    expect((byDefault.json.result as { kind: string }).kind).toBe("task");
    expect(Object.keys(emptyQuery.json.result as object)).toEqual(["task"]);
    expect(wrongVersion.json.error).toMatchObject({
      code: JsonRpcCode.MethodNotFound,
      message: expect.stringContaining('send the header "A2A-Version: 1.0"'),
    });
  });

  it("serves the 0.3 card only to a request that names 0.3; naming nothing gets the 1.0 card", async () => {
    const cardUrl = `${stack.bridge.url}.well-known/agent-card.json`;
    const card = async (query: string, headers: Record<string, string> = {}) =>
      (await (await fetch(`${cardUrl}${query}`, { headers })).json()) as Record<string, unknown>;
    const [unnamed, byHeader, byQuery, queryWins] = await Promise.all([
      card(""),
      card("", { "A2A-Version": "0.3" }),
      card("?A2A-Version=0.3"),
      card("?A2A-Version=1.0", { "A2A-Version": "0.3" }),
    ]);
    for (const v1Card of [unnamed, queryWins]) {
      expect(v1Card.supportedInterfaces).toEqual(
        expect.arrayContaining([expect.objectContaining({ protocolBinding: "JSONRPC", protocolVersion: "0.3" })]),
      );
      expect(v1Card.protocolVersion).toBeUndefined();
    }
    for (const v03Card of [byHeader, byQuery]) {
      expect(v03Card).toMatchObject({ protocolVersion: "0.3.0", preferredTransport: "JSONRPC" });
    }
  });
});

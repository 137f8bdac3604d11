import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { postRaw, rpc, sseEvents, startStack, type TestStack } from "./harness.js";

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

it("closing the bridge ends open SSE streams with an error event, then refuses new work", async () => {
  const res = await fetch(`${stack.bridge.url}agents/slow/`, {
    method: "POST",
    headers: { "content-type": "application/json", "A2A-Version": "1.0" },
    body: rpc("SendStreamingMessage", {
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "interrupted" }] },
    }),
  });
  const events: Array<{ event: string; data: Record<string, unknown> }> = [];
  let closing: Promise<void> | undefined;
  for await (const e of sseEvents(res.body!)) {
    events.push(e);
    closing ??= stack.bridge.close();
  }
  await closing;
  expect(Object.keys(events[0]!.data.result as object)).toEqual(["task"]);
  const last = events.at(-1)!;
  expect(last.event).toBe("error");
  expect((last.data.error as { message: string }).message).toMatch(/shutting down; resubscribe/);
  await expect(postRaw(stack.bridge.url, rpc("GetTask", { id: "x" }), { "A2A-Version": "1.0" })).rejects.toThrow();
});

import { describe, expect, it } from "vitest";
import { type SseEvent, sseEvents } from "../src/agents/sse-events.js";

/** The events of a body that arrives in the given chunks. */
async function read(chunks: string[], maxEventChars = 1024): Promise<SseEvent[]> {
  async function* body() {
    for (const chunk of chunks) yield new TextEncoder().encode(chunk);
  }
  const events: SseEvent[] = [];
  for await (const event of sseEvents(body(), maxEventChars)) events.push(event);
  return events;
}

describe("sseEvents (a peer's SSE body)", () => {
  it("reads events split anywhere, skips comments and ids, and joins data lines", async () => {
    const text = ': keep-alive\n\nid: t:1\ndata: {"a":1}\n\nevent: error\ndata: line one\ndata: line two\n\n';
    const split = [...text];
    const expected = [
      { event: "", data: '{"a":1}' },
      { event: "error", data: "line one\nline two" },
    ];
    expect(await read([text])).toEqual(expected);
    expect(await read(split)).toEqual(expected);
  });

  it("takes CRLF and CR line ends, a CRLF split between two chunks included", async () => {
    expect(await read(["data: a\r", "\n\r", "\ndata: b\r\r"])).toEqual([
      { event: "", data: "a" },
      { event: "", data: "b" },
    ]);
  });

  it("yields a last event that the body ends without a blank line after", async () => {
    expect(await read(["data: last"])).toEqual([{ event: "", data: "last" }]);
  });

  it("refuses an event longer than the limit, also one still without a line end", async () => {
    await expect(read([`data: ${"x".repeat(20)}\n\n`], 10)).rejects.toThrow("an event longer than 10 characters");
    await expect(read(["data: ", "x".repeat(30)], 10)).rejects.toThrow("an event longer than 10 characters");
  });
});

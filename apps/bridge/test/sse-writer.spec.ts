// The SSE writer and its parts through a real loopback server and a real HTTP client reading the stream.
import { describe, expect, it } from "vitest";
import type { SseLimits } from "../src/sse-budget.js";
import { formatSseEvent, sseHeaders } from "../src/sse-frame.js";
import { createSseWriter, type SseFrames } from "../src/sse-writer.js";
import {
  heldBack,
  readSse,
  recordingLogger,
  type SseReading,
  serve,
  serveSse,
  until,
  watchStats,
} from "./sse-fixture.js";

const taskId = "task-1";
/** Long enough that no keep-alive comment comes between the events of tests about something else. */
const quiet = 60_000;
const MiB = 1024 * 1024;
const bigText = "x".repeat(32 * 1024);
/** More events than the sockets' kernel buffers take, so a reader that reads nothing holds its stream back. */
const plenty = 4_000;
/** An event as big as its text, near enough: what the budget tests reason in. */
const eventBytes = bigText.length + 100;

const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `${taskId}:${from + i}`);
const comments = (reading: SseReading) => reading.blocks.filter((b) => b.data === undefined);
const limits = (overrides: Partial<SseLimits>): SseLimits => ({
  streamBufferBytes: MiB,
  bufferBytes: 64 * MiB,
  stallMs: 30_000,
  ...overrides,
});

describe("framing", () => {
  it("sends each event with its id and one JSON-RPC response on one data line", async () => {
    const writer = createSseWriter(quiet);
    const text = (n: number) => (n === 1 ? "two\nlines\r\n" : `event ${n}`);
    const server = await serveSse(writer, { taskId, count: 3, start: 10, text });
    const reading = await readSse(server.url);
    expect(await reading.done).toBe("end");
    expect(reading.res.statusCode).toBe(200);
    expect(reading.res.headers["content-type"]).toBe(sseHeaders["Content-Type"]);
    expect(reading.blocks.map((b) => b.lines)).toEqual([
      ["id: task-1:11", 'data: {"jsonrpc":"2.0","id":7,"result":{"text":"event 0"}}'],
      ["id: task-1:12", 'data: {"jsonrpc":"2.0","id":7,"result":{"text":"two\\nlines\\r\\n"}}'],
      ["id: task-1:13", 'data: {"jsonrpc":"2.0","id":7,"result":{"text":"event 2"}}'],
    ]);
    expect(reading.json()[1]?.data.result).toEqual({ text: "two\nlines\r\n" });
    expect(writer.stats()).toEqual({ streams: 0, heldBytes: 0 });
  });

  it("sends a binding's own frames, numbered from 0 when the upstream names no start", async () => {
    const frames: SseFrames = { result: (result) => result, error: (error) => ({ error }) };
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 2, failAt: 1 }, frames);
    const reading = await readSse(server.url);
    expect(await reading.done).toBe("end");
    expect(reading.json()).toEqual([
      { event: "message", id: "task-1:1", data: { text: "event 0" } },
      { event: "error", id: undefined, data: { error: { code: -32603, message: "upstream broke at event 1" } } },
    ]);
  });

  it("writes each line of data on a data line of its own and leaves out an id that is not one line", async () => {
    const url = await serve((_, res) => {
      res.writeHead(200, sseHeaders);
      res.write(formatSseEvent({ event: "note", id: "a:1", data: "one\ntwo\r\nthree\rfour" }));
      res.end(formatSseEvent({ id: "b:2\nevent: forged", data: "{}" }));
    });
    const reading = await readSse(url);
    expect(await reading.done).toBe("end");
    expect(reading.text()).toBe("event: note\nid: a:1\ndata: one\ndata: two\ndata: three\ndata: four\n\ndata: {}\n\n");
    expect(reading.blocks.map(({ event, id, data }) => ({ event, id, data }))).toEqual([
      { event: "note", id: "a:1", data: "one\ntwo\nthree\nfour" },
      { event: "message", id: undefined, data: "{}" },
    ]);
  });

  it("rejects a failure before any byte, so the caller answers it as a plain error", async () => {
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 3, failAt: 0 });
    const reading = await readSse(server.url);
    expect(await reading.done).toBe("end");
    expect(reading.res.statusCode).toBe(502);
    expect(reading.text()).toContain("upstream broke at event 0");
  });

  it("answers a failure after the first event with an error event and ends the stream", async () => {
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 5, failAt: 2 });
    const reading = await readSse(server.url);
    expect(await reading.done).toBe("end");
    expect(reading.json().map((e) => [e.event, e.id])).toEqual([
      ["message", "task-1:1"],
      ["message", "task-1:2"],
      ["error", undefined],
    ]);
    expect(reading.json()[2]?.data).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: { code: -32603, message: "upstream broke at event 2" },
    });
    expect(server.streams[0]?.upstream.finished).toBe(true);
  });
});

describe("resume", () => {
  it("skips the events up to Last-Event-ID of an upstream that replays from its start", async () => {
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 5, start: 10 });
    const reading = await readSse(server.url, { "Last-Event-ID": "task-1:12" });
    expect(await reading.done).toBe("end");
    expect(reading.json().map((e) => e.id)).toEqual(ids(13, 15));
    expect(reading.json().map((e) => e.data.result)).toEqual([
      { text: "event 2" },
      { text: "event 3" },
      { text: "event 4" },
    ]);
  });

  it("numbers on from the stream start of an upstream that resumed itself", async () => {
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 2, start: 12 });
    const reading = await readSse(server.url, { "Last-Event-ID": "task-1:12" });
    expect(await reading.done).toBe("end");
    expect(reading.json().map((e) => [e.id, e.data.result])).toEqual([
      ["task-1:13", { text: "event 0" }],
      ["task-1:14", { text: "event 1" }],
    ]);
  });

  it("answers a resume point past every event with the headers alone", async () => {
    const server = await serveSse(createSseWriter(quiet), { taskId, count: 3, start: 0 });
    const reading = await readSse(server.url, { "Last-Event-ID": "task-1:3" });
    expect(await reading.done).toBe("end");
    expect(reading.res.statusCode).toBe(200);
    expect(reading.text()).toBe("");
    expect(server.streams[0]?.upstream.pulled).toBe(3);
  });
});

describe("keep-alive", () => {
  it("sends the headers and comments without ids while the first event is slow to come", async () => {
    const server = await serveSse(createSseWriter(100), { taskId, count: 2, start: 4, firstDelayMs: 450 });
    const asked = Date.now();
    const reading = await readSse(server.url);
    const headersAt = Date.now();
    expect(await reading.done).toBe("end");
    const first = reading.blocks.findIndex((b) => b.data !== undefined);
    expect(first).toBeGreaterThanOrEqual(2);
    expect(headersAt - asked).toBeLessThan(reading.blocks[first]!.at - asked);
    for (const block of reading.blocks.slice(0, first)) expect(block.lines).toEqual([": keep-alive"]);
    expect(reading.json().map((e) => e.id)).toEqual(ids(5, 6));
  });

  it("sends comments on a stream that goes quiet, none while it writes", async () => {
    const server = await serveSse(createSseWriter(100), { taskId, count: 3, gapMs: 0, hang: true });
    const reading = await readSse(server.url);
    await until(() => comments(reading).length >= 3, 5_000, "three comments");
    const events = reading.blocks.filter((b) => b.data !== undefined);
    expect(events.map((b) => b.id)).toEqual(ids(1, 3));
    expect(reading.blocks.indexOf(comments(reading)[0]!)).toBe(3);
    for (const block of comments(reading)) expect(block.lines).toEqual([": keep-alive"]);
    reading.res.destroy();
  });
});

describe("budgets", () => {
  it("holds the upstream of a reader that reads nothing and cuts it after stallMs, naming the stream's limit", async () => {
    const { logger, warnings } = recordingLogger();
    const streamBufferBytes = 128 * 1024;
    const writer = createSseWriter(quiet, limits({ streamBufferBytes, stallMs: 300 }), logger);
    const stats = watchStats(writer);
    const server = await serveSse(writer, { taskId, count: plenty, text: () => bigText });
    const reading = await readSse(server.url, {}, true);
    await until(() => warnings.length > 0, 10_000, "the cut");
    stats.stop();
    expect(stats.most.streams).toBe(1);
    expect(stats.most.heldBytes).toBeLessThan(streamBufferBytes + eventBytes);
    const upstream = server.streams[0]!.upstream;
    // The upstream was left alone for stallMs before the cut: held, not drained into memory.
    expect(warnings[0]!.at - upstream.lastPullAt).toBeGreaterThanOrEqual(300);
    expect(warnings[0]).toMatchObject({ msg: "cut a slow SSE stream" });
    expect(warnings[0]!.reason).toContain("bridge.sseStreamBufferBytes");
    expect(writer.stats()).toEqual({ streams: 0, heldBytes: 0 });

    reading.res.resume();
    expect(await reading.done).toBe("end");
    const events = reading.json();
    expect(events.slice(0, -1).map((e) => e.id)).toEqual(ids(1, upstream.pulled));
    expect(events.at(-1)).toMatchObject({
      event: "error",
      data: { error: { code: -32052, message: expect.stringContaining("resubscribe with Last-Event-ID") } },
    });
    expect(upstream.finished).toBe(true);
  });

  it("holds all streams together under the shared budget and cuts them naming it", async () => {
    const { logger, warnings } = recordingLogger();
    const bufferBytes = 256 * 1024;
    const writer = createSseWriter(quiet, limits({ streamBufferBytes: 64 * MiB, bufferBytes, stallMs: 300 }), logger);
    const stats = watchStats(writer);
    const server = await serveSse(writer, { taskId, count: plenty, text: () => bigText });
    const readings = [await readSse(server.url, {}, true), await readSse(server.url, {}, true)];
    await until(() => warnings.length === 2, 10_000, "both cuts");
    stats.stop();
    expect(stats.most.streams).toBe(2);
    expect(stats.most.heldBytes).toBeLessThan(bufferBytes + 2 * eventBytes);
    for (const warning of warnings) expect(warning.reason).toContain("bridge.sseBufferBytes");
    for (const [i, reading] of readings.entries()) {
      expect(warnings[1]!.at - server.streams[i]!.upstream.lastPullAt).toBeGreaterThanOrEqual(300);
      reading.res.resume();
      expect(await reading.done).toBe("end");
      expect(reading.json().at(-1)?.data).toMatchObject({ error: { code: -32052 } });
    }
  });

  it("holds a slow reader that keeps reading without cutting it", async () => {
    const { logger, warnings } = recordingLogger();
    const writer = createSseWriter(quiet, limits({ streamBufferBytes: 64 * 1024, stallMs: 1_000 }), logger);
    const server = await serveSse(writer, { taskId, count: plenty, text: () => bigText });
    const reading = await readSse(server.url, {}, true);
    const upstream = server.streams[0]!.upstream;
    // Reads in short bursts, the pauses between them under stallMs: the stream is held again before each.
    let held = 0;
    for (let burst = 0; burst < 12; burst++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      if (Date.now() - upstream.lastPullAt >= 100) held++;
      reading.res.resume();
      await new Promise((resolve) => setTimeout(resolve, 5));
      reading.res.pause();
    }
    expect(held).toBeGreaterThanOrEqual(6);
    expect(warnings).toEqual([]);
    const received = reading.json().map((e) => e.id);
    expect(received).toEqual(ids(1, received.length));
    reading.res.destroy();
  });

  it("destroys the socket of a cut reader that reads nothing of its last bytes either", async () => {
    const { logger, warnings } = recordingLogger();
    const writer = createSseWriter(quiet, limits({ streamBufferBytes: 64 * 1024, stallMs: 300 }), logger);
    const server = await serveSse(writer, { taskId, count: plenty, text: () => bigText });
    const reading = await readSse(server.url, {}, true);
    const stream = server.streams[0]!;
    await until(() => stream.closedAt() !== undefined, 10_000, "the socket to go");
    expect(warnings).toHaveLength(1);
    expect(stream.closedAt()! - warnings[0]!.at).toBeGreaterThanOrEqual(300);
    expect(stream.upstream.finished).toBe(true);
    // A client that reads on after that gets what the kernel held, then a body cut short.
    reading.res.resume();
    expect(await reading.done).toBe("closed");
    expect(reading.json().at(-1)?.event).toBe("message");
  });
});

describe("shutdown", () => {
  it("ends an open stream with an error event naming the reason, delivered last", async () => {
    const writer = createSseWriter(quiet);
    const server = await serveSse(writer, { taskId, count: 2, hang: true });
    const reading = await readSse(server.url);
    await until(() => reading.blocks.length === 2, 5_000, "both events");
    await writer.closeAll("the bridge is shutting down");
    expect(await reading.done).toBe("end");
    expect(reading.json().map((e) => [e.event, e.id])).toEqual([
      ["message", "task-1:1"],
      ["message", "task-1:2"],
      ["error", undefined],
    ]);
    expect(reading.json()[2]?.data).toEqual({
      jsonrpc: "2.0",
      id: 7,
      error: { code: -32603, message: "the bridge is shutting down" },
    });
    const { upstream, upstreamAbort } = server.streams[0]!;
    expect(upstreamAbort.signal.aborted).toBe(true);
    expect(upstream.finished).toBe(true);
    expect(writer.stats()).toEqual({ streams: 0, heldBytes: 0 });
  });

  it("wakes a held stream, whose client then gets every event and the shutdown last", async () => {
    const writer = createSseWriter(quiet, limits({ streamBufferBytes: 64 * 1024 }));
    const server = await serveSse(writer, { taskId, count: plenty, text: () => bigText });
    const reading = await readSse(server.url, {}, true);
    await heldBack(server.streams[0]!.upstream);
    const closed = writer.closeAll("closing");
    reading.res.resume();
    await closed;
    expect(await reading.done).toBe("end");
    const events = reading.json();
    const upstream = server.streams[0]!.upstream;
    expect(events.slice(0, -1).map((e) => e.id)).toEqual(ids(1, upstream.pulled));
    expect(events.at(-1)).toMatchObject({ event: "error", data: { error: { code: -32603, message: "closing" } } });
  });
});

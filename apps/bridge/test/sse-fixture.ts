import { createServer, get, type IncomingMessage, type OutgoingHttpHeaders, type RequestListener } from "node:http";
import type { AddressInfo } from "node:net";
import { create, isMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import { StreamResponseSchema, SubscribeToTaskRequestSchema, headers as wire } from "@parley/proto";
import { pino } from "pino";
import { afterEach } from "vitest";
import type { Logger } from "../src/logger.js";
import type { UpstreamStream } from "../src/methods.js";
import { resumePointOf } from "../src/sse-resume.js";
import type { SseFrames, SseWriter } from "../src/sse-writer.js";

/** One artifact chunk of a task, the kind of event a live task streams. */
export function chunk(taskId: string, text: string): Message {
  return create(StreamResponseSchema, {
    payload: {
      case: "artifactUpdate",
      value: { taskId, artifact: { artifactId: "a", parts: [{ content: { case: "text", value: text } }] } },
    },
  });
}

/** The result an event is rendered as: its chunk's text. */
export function renderText(output: Message): JsonValue {
  if (!isMessage(output, StreamResponseSchema) || output.payload.case !== "artifactUpdate") return null;
  const content = output.payload.value.artifact?.parts[0]?.content;
  return { text: content?.case === "text" ? content.value : "" };
}

export interface UpstreamPlan {
  readonly taskId: string;
  /** How many events there are; they are numbered from 0 and their text names their number. */
  readonly count: number;
  /** The parley-stream-start header; absent: none sent. */
  readonly start?: number;
  readonly text?: (n: number) => string;
  readonly firstDelayMs?: number;
  readonly gapMs?: number;
  /** Throws instead of yielding event `failAt`. */
  readonly failAt?: number;
  /** After the last event: waits until aborted, as a live task's follower does. */
  readonly hang?: boolean;
}

/** An upstream as methods.ts gives it, which counts what the writer read of it. */
export interface FakeUpstream extends UpstreamStream {
  readonly pulled: number;
  /** Date.now() when the writer last got an event. */
  readonly lastPullAt: number;
  /** Whether the generator ran its finally (ended, or returned by the writer). */
  readonly finished: boolean;
}

const aborted = (signal: AbortSignal) =>
  new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });

/** Waits `ms`, or rejects when `signal` aborts first, as a pending upstream read does. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), aborted(signal)]).finally(
    () => clearTimeout(timer),
  );
}

/** Events an upstream hands over without waiting for I/O. */
const batch = 64;

export function fakeUpstream(plan: UpstreamPlan, signal: AbortSignal): FakeUpstream {
  const state = { pulled: 0, lastPullAt: 0, finished: false };
  const text = plan.text ?? ((n: number) => `event ${n}`);
  async function* events(): AsyncGenerator<Message> {
    try {
      for (let n = 0; n < plan.count; n++) {
        const delay = n === 0 ? plan.firstDelayMs : plan.gapMs;
        if (delay) await pause(delay, signal);
        // Reads its log in batches, as the event log does: between them the event loop runs.
        else if (n > 0 && n % batch === 0) await new Promise(setImmediate);
        if (n === plan.failAt) throw new Error(`upstream broke at event ${n}`);
        state.pulled++;
        state.lastPullAt = Date.now();
        yield chunk(plan.taskId, text(n));
      }
      if (plan.hang) await aborted(signal);
    } finally {
      state.finished = true;
    }
  }
  const header = new Headers(plan.start === undefined ? {} : { [wire.streamStart]: String(plan.start) });
  return Object.assign(state, { header, events: events() });
}

export interface ServedStream {
  readonly upstream: FakeUpstream;
  readonly upstreamAbort: AbortController;
  /** Settles when the writer is done with the stream. */
  readonly written: Promise<void>;
  /** Date.now() when the server's response closed (finished, or its socket went). */
  readonly closedAt: () => number | undefined;
}

export interface SseServer {
  readonly url: string;
  readonly streams: ServedStream[];
}

const servers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

/** Serves `handler` on loopback until the test ends; returns its URL. */
export async function serve(handler: RequestListener): Promise<string> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/**
 * A server that answers every request as the bridge's handlers do: a stream
 * through `writer` (resumable with Last-Event-ID), a JSON error when the
 * writer rejects, the upstream aborted when the client goes away.
 */
export async function serveSse(writer: SseWriter, plan: UpstreamPlan, frames?: SseFrames): Promise<SseServer> {
  const streams: ServedStream[] = [];
  const url = await serve((req, res) => {
    const upstreamAbort = new AbortController();
    let closedAt: number | undefined;
    res.on("close", () => {
      closedAt = Date.now();
      if (!res.writableFinished) upstreamAbort.abort();
    });
    const upstream = fakeUpstream(plan, upstreamAbort.signal);
    const input = create(SubscribeToTaskRequestSchema, { id: plan.taskId });
    const written = (async () => {
      try {
        const resume = resumePointOf(input, req.headers["last-event-id"] as string | undefined);
        await writer.write(res, {
          upstream,
          render: renderText,
          id: 7,
          resume,
          upstreamAbort,
          frames,
          failure: (error) => ({ code: -32603, message: (error as Error).message }),
        });
      } catch (error) {
        res.writeHead(502, { "Content-Type": "application/json" }).end(JSON.stringify({ error: String(error) }));
      }
    })();
    streams.push({ upstream, upstreamAbort, written, closedAt: () => closedAt });
  });
  return { url, streams };
}

/** One blank-line-delimited block of an SSE body, read as the HTML standard's parser does. */
export interface SseBlock {
  readonly lines: readonly string[];
  /** Absent when the block has no data (a comment): readers dispatch no event for it. */
  readonly data: string | undefined;
  readonly event: string;
  readonly id: string | undefined;
  /** Date.now() when it was complete. */
  readonly at: number;
}

export interface SseReading {
  readonly res: IncomingMessage;
  readonly blocks: SseBlock[];
  /** Resolves when the body ended ("end") or the connection went before it ("closed"). */
  readonly done: Promise<"end" | "closed">;
  /** The body as received so far. */
  text(): string;
  /** The JSON data of the blocks that are events. */
  json(): Array<{ readonly event: string; readonly id: string | undefined; readonly data: Record<string, unknown> }>;
}

/** GETs `url` and collects its SSE blocks; `paused` leaves the body unread until res.resume(). */
export function readSse(url: string, headers: OutgoingHttpHeaders = {}, paused = false): Promise<SseReading> {
  return new Promise((resolve, reject) => {
    get(url, { headers }, (res) => {
      if (paused) res.pause();
      const blocks: SseBlock[] = [];
      let buffer = "";
      let body = "";
      let lines: string[] = [];
      const done = new Promise<"end" | "closed">((settle) => {
        res.setEncoding("utf8");
        res.on("data", (text: string) => {
          buffer += text;
          body += text;
          for (let eol = buffer.search(/\r\n|\r|\n/); eol >= 0; eol = buffer.search(/\r\n|\r|\n/)) {
            const line = buffer.slice(0, eol);
            buffer = buffer.slice(buffer.startsWith("\r\n", eol) ? eol + 2 : eol + 1);
            if (line !== "") lines.push(line);
            else if (lines.length > 0) {
              blocks.push(blockOf(lines));
              lines = [];
            }
          }
        });
        res.on("end", () => settle("end"));
        res.on("close", () => settle(res.complete ? "end" : "closed"));
        res.on("error", () => settle("closed"));
      });
      resolve({
        res,
        blocks,
        done,
        text: () => body,
        json: () =>
          blocks
            .filter((b) => b.data !== undefined)
            .map((b) => ({ event: b.event, id: b.id, data: JSON.parse(b.data!) as Record<string, unknown> })),
      });
    }).on("error", reject);
  });
}

function blockOf(lines: readonly string[]): SseBlock {
  const data: string[] = [];
  let event = "message";
  let id: string | undefined;
  for (const line of lines) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + (line[colon + 1] === " " ? 2 : 1));
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
    else if (field === "id") id = value;
  }
  return { lines, data: data.length > 0 ? data.join("\n") : undefined, event, id, at: Date.now() };
}

export interface Warning {
  readonly msg: string;
  readonly reason?: string;
  /** Date.now() when it was written. */
  readonly at: number;
}

/** A pino logger like the bridge's, whose warnings land in `warnings` instead of on stderr. */
export function recordingLogger(): { logger: Logger; warnings: Warning[] } {
  const warnings: Warning[] = [];
  const destination = { write: (line: string) => warnings.push({ ...JSON.parse(line), at: Date.now() }) };
  return { logger: pino({ level: "warn" }, destination), warnings };
}

/** Polls `check` until it holds; fails after `ms`. */
export async function until(check: () => boolean, ms = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Waits until the writer has held `upstream` back: read from, then left alone for `quietMs`. */
export function heldBack(upstream: FakeUpstream, quietMs = 100): Promise<void> {
  return until(() => upstream.pulled > 0 && Date.now() - upstream.lastPullAt >= quietMs, 10_000, "the upstream held");
}

/** Samples the writer's stats until stopped: the most streams and unsent bytes it had at once. */
export function watchStats(writer: SseWriter): { readonly most: { streams: number; heldBytes: number }; stop(): void } {
  const most = { streams: 0, heldBytes: 0 };
  const timer = setInterval(() => {
    const now = writer.stats();
    most.streams = Math.max(most.streams, now.streams);
    most.heldBytes = Math.max(most.heldBytes, now.heldBytes);
  }, 2);
  return { most, stop: () => clearInterval(timer) };
}

import type { ServerResponse } from "node:http";
import type { JsonValue, Message } from "@bufbuild/protobuf";
import { JsonRpcCode, type JsonRpcErrorObject } from "./json-rpc-error.js";
import type { JsonRpcId } from "./json-rpc-request.js";
import type { Logger } from "./logger.js";
import type { UpstreamStream } from "./methods.js";
import { createSseBudget, defaultSseLimits, type SseLimits, type StreamBudget } from "./sse-budget.js";
import { formatSseEvent, jsonRpcFrames, type SseFrames, sseHeaders } from "./sse-frame.js";
import { createKeepAlive, type KeepAliveWatch, keepAliveUntilFirst } from "./sse-keep-alive.js";
import type { ResumePoint } from "./sse-resume.js";
import { createResumeFilter } from "./sse-resume-filter.js";

export { defaultSseLimits, type SseLimits } from "./sse-budget.js";
export type { SseFrames } from "./sse-frame.js";

export interface SseStream {
  readonly upstream: UpstreamStream;
  /** The JSON-RPC result of one upstream event. */
  readonly render: (output: Message) => JsonValue;
  /** The JSON-RPC id every event answers. */
  readonly id: JsonRpcId;
  /** Where a resubscribe picks up; events up to it are not sent again. */
  readonly resume: ResumePoint | undefined;
  /** Aborts the upstream call; aborted by the caller when the client goes away, here when the bridge closes. */
  readonly upstreamAbort: AbortController;
  /** The error event a failure mid-stream is answered with (the caller logs it). */
  readonly failure: (error: unknown) => JsonRpcErrorObject;
  /** What each event's data is; absent: JSON-RPC responses answering `id`. */
  readonly frames?: SseFrames;
}

/** Writes upstream event streams as SSE and keeps track of the open ones, so closing the bridge can end them. */
export interface SseWriter {
  /**
   * Streams `stream.upstream` to `res`. The first event is awaited before any
   * byte is written (for up to one keep-alive interval), so a failure before it
   * rejects and is still answered as a plain JSON-RPC error; later failures
   * become an `event: error`.
   */
  write(res: ServerResponse, stream: SseStream): Promise<void>;
  /** Ends every open stream with an error event naming `reason`; resolves once their last bytes are out. */
  closeAll(reason: string): Promise<void>;
  /** How many streams are open and the unsent bytes they held at their last write (an upper bound). */
  stats(): { readonly streams: number; readonly heldBytes: number };
}

/** A stream past its first event, as closing the bridge sees it. */
interface OpenStream {
  readonly abort: (reason: string) => void;
  readonly ended: Promise<void>;
}

/**
 * Composes the parts: the resume filter decides what is sent, the frames and
 * formatSseEvent what it looks like, the budget when the next upstream event
 * may be read and when a client that reads nothing is cut (an `event: error`
 * naming the limit goes after what it has not read, and its socket goes when
 * it reads nothing of that either for another stallMs, so its memory returns).
 */
export function createSseWriter(keepAliveMs: number, limits: SseLimits = defaultSseLimits, logger?: Logger): SseWriter {
  const openStreams = new Set<OpenStream>();
  const budget = createSseBudget(limits);
  const keepAlive = createKeepAlive(keepAliveMs);

  async function write(res: ServerResponse, stream: SseStream): Promise<void> {
    const { upstream, upstreamAbort } = stream;
    const frames = stream.frames ?? jsonRpcFrames(stream.id);
    const filter = createResumeFilter(upstream.header, stream.resume);
    const iterator = upstream.events[Symbol.asyncIterator]();
    const stopEarly = keepAliveUntilFirst(res, keepAliveMs);

    // Set at the first event sent (or the end, if none comes): from then on the stream is counted and closable.
    let room: StreamBudget | undefined;
    let watch: KeepAliveWatch | undefined;
    let shutdownReason: string | undefined;
    let markEnded = () => {};
    let open: OpenStream | undefined;
    let corked = false;
    /** Hands what the tick corked to the socket; also before end(), which drops corked bytes on Node 24. */
    const uncork = () => {
      if (!corked) return;
      corked = false;
      res.uncork();
    };
    const send = (payload: unknown, event?: string, id?: string) => {
      if (res.destroyed) return;
      watch?.wrote();
      // Events that arrive in one tick (a fast agent's chunks) leave in one socket write, not one each.
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(uncork);
      }
      // Handed to the kernel: a wait for room re-checks at once.
      res.write(formatSseEvent({ data: JSON.stringify(payload), event, id }), () => room?.wake());
    };
    const begin = (): StreamBudget => {
      stopEarly();
      // The headers go out with the first event, in one packet.
      if (!res.headersSent) res.writeHead(200, sseHeaders);
      watch = keepAlive.watch(res);
      // Closing the bridge aborts the upstream too, so its signal tells the budget when to stop holding.
      const joined = budget.join(res, upstreamAbort.signal);
      open = {
        abort(reason) {
          shutdownReason = reason;
          upstreamAbort.abort();
          joined.wake();
        },
        ended: new Promise<void>((resolve) => {
          markEnded = resolve;
        }),
      };
      openStreams.add(open);
      // 'finish' when the last bytes are out, 'close' when the socket went first (destroyed, or the client left).
      res.once("close", () => markEnded());
      return joined;
    };

    let cutReason: string | undefined;
    let failed: { readonly error: unknown } | undefined;
    try {
      // The one pull loop. next() is awaited in place, not in an async helper: a held stream waits in this frame,
      // and an event costs no promise beyond the upstream's own.
      for (;;) {
        const next = await iterator.next();
        if (next.done) break;
        const seq = filter.admit();
        if (seq === undefined) continue;
        room ??= begin();
        send(frames.result(stream.render(next.value)), undefined, filter.idOf(next.value, seq));
        cutReason = await room.backpressure();
        if (cutReason !== undefined || shutdownReason !== undefined || res.destroyed) break;
      }
    } catch (error) {
      failed = { error };
    }

    if (room === undefined && failed !== undefined) {
      stopEarly();
      // Before any byte a failure is a plain error answer (the caller gives it); after a comment, an error event.
      if (!res.headersSent) throw failed.error;
      if (!upstreamAbort.signal.aborted && !res.destroyed) {
        res.end(formatSseEvent({ event: "error", data: JSON.stringify(frames.error(stream.failure(failed.error))) }));
      }
      return;
    }
    // No event to send (none came, or the resume point had them all): the headers alone, then the end.
    room ??= begin();

    if (shutdownReason !== undefined) {
      send(frames.error({ code: JsonRpcCode.InternalError, message: shutdownReason }), "error");
    } else if (failed !== undefined && !upstreamAbort.signal.aborted) {
      send(frames.error(stream.failure(failed.error)), "error");
    }
    if (open) openStreams.delete(open);
    watch?.stop();
    room.leave();
    if (cutReason !== undefined) {
      logger?.warn({ taskId: filter.taskId, reason: cutReason }, "cut a slow SSE stream");
      const message = `stream cut: ${cutReason}; resubscribe with Last-Event-ID to catch up`;
      send(frames.error({ code: JsonRpcCode.LimitExceeded, message }), "error");
    }
    // A pending next() ends with the abort; a generator paused at a yield (held back above) needs return().
    await Promise.resolve(iterator.return?.()).catch(() => undefined);
    if (res.destroyed) markEnded();
    else {
      uncork();
      res.end(markEnded);
      // A client that reads nothing of its last bytes either, for stallMs: its socket goes, and those bytes with it.
      if (!res.writableFinished) void room.roomFor(0).then((drained) => drained || res.destroy());
    }
  }

  return {
    write,
    closeAll(reason) {
      const streams = [...openStreams];
      for (const stream of streams) stream.abort(reason);
      return Promise.all(streams.map((s) => s.ended)).then(() => {});
    },
    stats: () => budget.stats(),
  };
}

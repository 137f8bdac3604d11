import type { ServerResponse } from "node:http";
import type { JsonValue, Message } from "@bufbuild/protobuf";
import { JsonRpcCode, type JsonRpcErrorObject } from "./json-rpc-error.js";
import type { JsonRpcId } from "./json-rpc-request.js";
import type { Logger } from "./logger.js";
import type { UpstreamStream } from "./methods.js";
import { type ResumePoint, streamStartOf, taskIdOfEvent } from "./sse-resume.js";

const sseHeaders = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
};

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

/** The data of a stream's events: JSON-RPC wraps each result and error in a response, HTTP+JSON sends its own. */
export interface SseFrames {
  result(result: JsonValue): unknown;
  error(error: JsonRpcErrorObject): unknown;
}

function jsonRpcFrames(id: JsonRpcId): SseFrames {
  return {
    result: (result) => ({ jsonrpc: "2.0", id, result }),
    error: (error) => ({ jsonrpc: "2.0", id, error }),
  };
}

/** How much a slow SSE reader may make the bridge hold (bridge.sse* settings). */
export interface SseLimits {
  /** Unsent bytes of one stream past which the bridge stops reading its upstream until the client catches up. */
  readonly streamBufferBytes: number;
  /** Unsent bytes of all streams together past which each stream only gets more once its socket has drained. */
  readonly bufferBytes: number;
  /** A stream held back this long while its client reads nothing is cut with an error event naming the limit. */
  readonly stallMs: number;
}

export const defaultSseLimits: SseLimits = {
  streamBufferBytes: 1024 * 1024,
  bufferBytes: 64 * 1024 * 1024,
  stallMs: 30_000,
};

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

interface OpenStream {
  readonly res: ServerResponse;
  /** Unsent bytes of this stream when it last wrote or was recounted; `total` is the sum over open streams. */
  held: number;
  readonly abort: (reason: string) => void;
  readonly ended: Promise<void>;
  /** Called at every tick of the writer's keep-alive timer: a comment when the stream wrote nothing since the last. */
  readonly keepAlive: () => void;
}

/**
 * SSE with backpressure: the writer reads the next upstream event only while
 * the response holds fewer unsent bytes than its limits allow, so a client
 * that reads slowly slows its upstream (a log read pauses; a live task's
 * follower falls behind and is cut by limits.subscriberBufferEvents), instead
 * of the bridge buffering the whole task in memory. A client that reads
 * nothing for `stallMs` while held back is cut: an `event: error` naming the
 * limit goes after what it has not read, and its socket is destroyed when it
 * reads nothing of that either for another `stallMs`, so its memory returns.
 */
export function createSseWriter(keepAliveMs: number, limits: SseLimits = defaultSseLimits, logger?: Logger): SseWriter {
  const openStreams = new Set<OpenStream>();
  let total = 0;
  // One keep-alive timer for all open streams (not one per stream), running while there is one. It ticks at half
  // the interval and a stream that wrote nothing for a whole tick gets a comment, so an idle stream still hears
  // something at least every keepAliveMs.
  let keepAliveTimer: NodeJS.Timeout | undefined;
  const opened = (open: OpenStream) => {
    openStreams.add(open);
    keepAliveTimer ??= setInterval(
      () => {
        for (const stream of openStreams) stream.keepAlive();
      },
      Math.max(1, Math.floor(keepAliveMs / 2)),
    ).unref();
  };
  const closed = (open: OpenStream) => {
    openStreams.delete(open);
    if (openStreams.size === 0 && keepAliveTimer !== undefined) {
      clearInterval(keepAliveTimer);
      keepAliveTimer = undefined;
    }
  };

  const recount = (open: OpenStream) => {
    const now = open.res.destroyed ? 0 : open.res.writableLength;
    total += now - open.held;
    open.held = now;
  };
  /** Bytes left the sockets since the streams wrote, so the running total only ever overstates: recounted when over. */
  const overBudget = () => {
    if (total < limits.bufferBytes) return false;
    for (const open of openStreams) recount(open);
    return total >= limits.bufferBytes;
  };

  async function write(res: ServerResponse, stream: SseStream): Promise<void> {
    const { upstream, render, resume, upstreamAbort } = stream;
    const frames = stream.frames ?? jsonRpcFrames(stream.id);
    const iterator = upstream.events[Symbol.asyncIterator]();
    // The n-th event of the stream has seq start + n, the number the task's event log gave it. The header is
    // read once the first event is there: an in-process upstream sets it when its handler starts running.
    let start: number | undefined;
    let index = 0;
    let taskId = resume?.taskId;
    // Whether an iterator.next() is outstanding: a generator suspended at a yield needs return() to run its finally.
    let pulling = false;
    // The seq of the event `pull` read last. `pull` is awaited in place, not wrapped in an async helper: a held
    // stream waits in this one frame, and an event costs no promise beyond the upstream's own.
    let seq = 0;
    const pull = (): Promise<IteratorResult<Message>> => {
      pulling = true;
      return iterator.next();
    };
    /** After a read: false for an event to send, true for one a resume already has (read on). */
    const skip = (): boolean => {
      start ??= streamStartOf(upstream.header);
      seq = start + ++index;
      // An upstream that ignored parley-resume-after replays from its start: drop what the client already has.
      return resume !== undefined && seq <= resume.afterSeq;
    };
    // A first event that is slow to come (a resubscribe waiting for the task's next event; an upstream that sends
    // the task late): the headers go out after keepAliveMs with a comment, and a comment every keepAliveMs after,
    // so no intermediary cuts a silent response. Comments carry no id: event numbering is untouched.
    const early = setInterval(() => {
      if (res.destroyed) return;
      if (!res.headersSent) res.writeHead(200, sseHeaders);
      res.write(": keep-alive\n\n");
    }, keepAliveMs);
    let first: IteratorResult<Message>;
    try {
      do {
        try {
          first = await pull();
        } finally {
          pulling = false;
        }
      } while (!first.done && skip());
    } catch (error) {
      clearInterval(early);
      // Before any byte a failure is a plain error answer (the caller gives it); after a comment, an error event.
      if (!res.headersSent) throw error;
      if (!upstreamAbort.signal.aborted && !res.destroyed) {
        res.end(`event: error\ndata: ${JSON.stringify(frames.error(stream.failure(error)))}\n\n`);
      }
      return;
    }
    clearInterval(early);
    // The headers go out with the first event (written right below), in one packet.
    if (!res.headersSent) res.writeHead(200, sseHeaders);
    let corked = false;
    let wrote = true;
    /** Hands what the tick corked to the socket; also before end(), which drops corked bytes on Node 24. */
    const uncork = () => {
      if (!corked) return;
      corked = false;
      res.uncork();
    };
    const send = (payload: unknown, event?: string, eventId?: string) => {
      if (res.destroyed) return;
      wrote = true;
      // Events that arrive in one tick (a fast agent's chunks) leave in one socket write, not one each.
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(uncork);
      }
      res.write(
        `${event ? `event: ${event}\n` : ""}${eventId ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(payload)}\n\n`,
        // Handed to the kernel: a wait for room re-checks at once ('drain' only follows a write that returned false).
        () => wake(),
      );
    };
    const sendEvent = (output: Message, eventSeq: number) => {
      taskId ??= taskIdOfEvent(output);
      const eventId = taskId !== undefined ? `${taskId}:${eventSeq}` : undefined;
      send(frames.result(render(output)), undefined, eventId);
    };
    let shutdownReason: string | undefined;
    let markEnded = () => {};
    let wake = () => {};
    const open: OpenStream = {
      res,
      held: 0,
      abort(reason: string) {
        shutdownReason = reason;
        upstreamAbort.abort();
        wake();
      },
      ended: new Promise<void>((resolve) => {
        markEnded = resolve;
      }),
      keepAlive() {
        // A stream with bytes still waiting needs no keep-alive, and a stalled one must not grow.
        const idle = !wrote;
        wrote = false;
        if (idle && !res.destroyed && res.writableLength === 0) {
          res.write(": keep-alive\n\n");
          // Counts as a write: the next comment comes a whole interval later.
          wrote = true;
        }
      },
    };
    opened(open);
    // 'finish' when the last bytes are out, 'close' when the socket went first (destroyed, or the client left).
    res.once("close", () => markEnded());

    /**
     * Waits until the unsent bytes fall to `target`: true then (or when the
     * response is gone or the stream is being closed), false when the client
     * read nothing at all for stallMs. Polled as well as woken by 'drain',
     * which a response only emits after a write that returned false.
     */
    const roomFor = (target: number) =>
      new Promise<boolean>((resolve) => {
        let last = res.writableLength;
        let since = Date.now();
        const finish = (ok: boolean) => {
          clearInterval(poll);
          res.off("drain", check);
          res.off("close", check);
          wake = () => {};
          resolve(ok);
        };
        function check() {
          const now = res.destroyed ? 0 : res.writableLength;
          if (now <= target || shutdownReason !== undefined || upstreamAbort.signal.aborted) return finish(true);
          if (now < last) {
            last = now;
            since = Date.now();
          } else if (Date.now() - since >= limits.stallMs) finish(false);
        }
        const poll = setInterval(check, Math.max(10, Math.min(250, limits.stallMs / 4)));
        res.on("drain", check);
        res.once("close", check);
        wake = check;
      });

    /** After each event: hold the upstream while this stream, or all of them, hold too much. Returns why it was cut. */
    const backpressure = async (): Promise<string | undefined> => {
      recount(open);
      const floor = res.writableHighWaterMark;
      for (;;) {
        if (open.held >= limits.streamBufferBytes) {
          if (await roomFor(Math.floor(limits.streamBufferBytes / 2))) return undefined;
          return `the client read nothing for ${limits.stallMs} ms while ${res.writableLength} bytes of this stream waited (limit ${limits.streamBufferBytes} bytes per stream, bridge.sseStreamBufferBytes; bridge.sseStallMs)`;
        }
        // Past the process-wide budget a stream gets more only once its socket took what it has (the floor).
        if (open.held < floor || !overBudget()) return undefined;
        if (!(await roomFor(0))) {
          return `the client read nothing for ${limits.stallMs} ms while the bridge held ${total} bytes for slow streams (limit ${limits.bufferBytes} bytes, bridge.sseBufferBytes; bridge.sseStallMs)`;
        }
        recount(open);
        if (res.destroyed || shutdownReason !== undefined || upstreamAbort.signal.aborted) return undefined;
      }
    };

    let cutReason: string | undefined;
    try {
      if (!first.done) {
        sendEvent(first.value, seq);
        cutReason = await backpressure();
      }
      read: while (cutReason === undefined && shutdownReason === undefined && !res.destroyed) {
        let event: IteratorResult<Message>;
        do {
          try {
            event = await pull();
          } finally {
            pulling = false;
          }
          if (event.done) break read;
        } while (skip());
        sendEvent(event.value, seq);
        cutReason = await backpressure();
      }
      if (shutdownReason !== undefined) throw new Error(shutdownReason);
    } catch (error) {
      if (shutdownReason !== undefined) {
        send(frames.error({ code: JsonRpcCode.InternalError, message: shutdownReason }), "error");
      } else if (!upstreamAbort.signal.aborted) {
        send(frames.error(stream.failure(error)), "error");
      }
    } finally {
      closed(open);
      total -= open.held;
      open.held = 0;
      if (cutReason !== undefined) {
        logger?.warn({ taskId, reason: cutReason }, "cut a slow SSE stream");
        send(
          frames.error({
            code: JsonRpcCode.LimitExceeded,
            message: `stream cut: ${cutReason}; resubscribe with Last-Event-ID to catch up`,
          }),
          "error",
        );
      }
      // A pending next() ends with the abort; a generator paused at a yield (held back above) needs return().
      if (!pulling) await Promise.resolve(iterator.return?.()).catch(() => undefined);
      if (res.destroyed) markEnded();
      else {
        uncork();
        res.end(markEnded);
        // A client that reads nothing of its last bytes either, for stallMs: its socket goes, and those bytes with it.
        if (!res.writableFinished) void roomFor(0).then((drained) => drained || res.destroy());
      }
    }
  }

  return {
    write,
    closeAll(reason) {
      const streams = [...openStreams];
      for (const stream of streams) stream.abort(reason);
      return Promise.all(streams.map((s) => s.ended)).then(() => {});
    },
    stats() {
      for (const open of openStreams) recount(open);
      return { streams: openStreams.size, heldBytes: total };
    },
  };
}

import type { ServerResponse } from "node:http";
import type { JsonValue, Message } from "@bufbuild/protobuf";
import { JsonRpcCode, type JsonRpcErrorObject } from "./json-rpc-error.js";
import type { JsonRpcId } from "./json-rpc-request.js";
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
}

/** Writes upstream event streams as SSE and keeps track of the open ones, so closing the bridge can end them. */
export interface SseWriter {
  /**
   * Streams `stream.upstream` to `res`. The first event is awaited before any
   * byte is written, so a failure before it rejects and is still answered as a
   * plain JSON-RPC error; later failures become an `event: error`.
   */
  write(res: ServerResponse, stream: SseStream): Promise<void>;
  /** Ends every open stream with an error event naming `reason`; resolves once their last bytes are out. */
  closeAll(reason: string): Promise<void>;
}

interface OpenStream {
  readonly abort: (reason: string) => void;
  readonly ended: Promise<void>;
}

export function createSseWriter(keepAliveMs: number): SseWriter {
  const openStreams = new Set<OpenStream>();

  async function write(res: ServerResponse, stream: SseStream): Promise<void> {
    const { upstream, render, id, resume, upstreamAbort } = stream;
    const iterator = upstream.events[Symbol.asyncIterator]();
    // The n-th event of the stream has seq start + n, the number the task's event log gave it. The header is
    // read once the first event is there: an in-process upstream sets it when its handler starts running.
    let start: number | undefined;
    let index = 0;
    let taskId = resume?.taskId;
    const next = async (): Promise<IteratorResult<Message> & { seq?: number }> => {
      for (;;) {
        const result = await iterator.next();
        if (result.done) return result;
        start ??= streamStartOf(upstream.header);
        const seq = start + ++index;
        // An upstream that ignored parley-resume-after replays from its start: drop what the client already has.
        if (resume && seq <= resume.afterSeq) continue;
        return { ...result, seq };
      }
    };
    const first = await next();
    // The headers go out with the first event (written right below), in one packet.
    res.writeHead(200, sseHeaders);
    let corked = false;
    const send = (payload: unknown, event?: string, eventId?: string) => {
      if (res.destroyed) return;
      // Events that arrive in one tick (a fast agent's chunks) leave in one socket write, not one each.
      if (!corked) {
        corked = true;
        res.cork();
        process.nextTick(() => {
          corked = false;
          res.uncork();
        });
      }
      res.write(
        `${event ? `event: ${event}\n` : ""}${eventId ? `id: ${eventId}\n` : ""}data: ${JSON.stringify(payload)}\n\n`,
      );
    };
    const sendEvent = (output: Message, seq: number | undefined) => {
      taskId ??= taskIdOfEvent(output);
      const eventId = taskId !== undefined && seq !== undefined ? `${taskId}:${seq}` : undefined;
      send({ jsonrpc: "2.0", id, result: render(output) }, undefined, eventId);
    };
    let shutdownReason: string | undefined;
    let markEnded = () => {};
    const open: OpenStream = {
      abort(reason: string) {
        shutdownReason = reason;
        upstreamAbort.abort();
      },
      ended: new Promise<void>((resolve) => {
        markEnded = resolve;
      }),
    };
    openStreams.add(open);
    const keepAlive = setInterval(() => {
      if (!res.destroyed) res.write(": keep-alive\n\n");
    }, keepAliveMs);
    try {
      if (!first.done) sendEvent(first.value, first.seq);
      for (;;) {
        const event = await next();
        if (event.done) break;
        sendEvent(event.value, event.seq);
      }
    } catch (error) {
      if (shutdownReason !== undefined) {
        send({ jsonrpc: "2.0", id, error: { code: JsonRpcCode.InternalError, message: shutdownReason } }, "error");
      } else if (!upstreamAbort.signal.aborted) {
        send({ jsonrpc: "2.0", id, error: stream.failure(error) }, "error");
      }
    } finally {
      clearInterval(keepAlive);
      openStreams.delete(open);
      if (!upstreamAbort.signal.aborted) await iterator.return?.();
      if (res.destroyed) markEnded();
      else res.end(markEnded);
    }
  }

  return {
    write,
    closeAll(reason) {
      const streams = [...openStreams];
      for (const stream of streams) stream.abort(reason);
      return Promise.all(streams.map((s) => s.ended)).then(() => {});
    },
  };
}

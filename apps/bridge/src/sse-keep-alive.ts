import type { ServerResponse } from "node:http";
import { keepAliveComment, sseHeaders } from "./sse-frame.js";

/** Keep-alive comments for streams that have started, so no intermediary cuts a quiet one. */
export interface KeepAlive {
  /** Starts watching `res`; the stream marks its writes on the watch, so a busy one gets no comments. */
  watch(res: ServerResponse): KeepAliveWatch;
}

export interface KeepAliveWatch {
  /** The stream wrote: the next comment is due a whole interval later at the earliest. */
  wrote(): void;
  stop(): void;
}

/**
 * One timer for all watched streams (not one per stream), running while there
 * is one. It ticks at half the interval, and a stream that wrote nothing for a
 * whole tick gets a comment, so an idle stream hears something at least every
 * `intervalMs`.
 */
export function createKeepAlive(intervalMs: number): KeepAlive {
  const watched = new Set<Watch>();
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    for (const watch of watched) watch.tick();
  };
  const unwatch = (watch: Watch) => {
    watched.delete(watch);
    if (watched.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };
  return {
    watch(res) {
      const watch = new Watch(res, unwatch);
      watched.add(watch);
      timer ??= setInterval(tick, Math.max(1, Math.floor(intervalMs / 2))).unref();
      return watch;
    },
  };
}

// A class, not closures: every held stream keeps one, and its methods are shared.
class Watch implements KeepAliveWatch {
  private busy = true;

  constructor(
    private readonly res: ServerResponse,
    private readonly unwatch: (watch: Watch) => void,
  ) {}

  wrote(): void {
    this.busy = true;
  }

  stop(): void {
    this.unwatch(this);
  }

  /** A comment when the stream wrote nothing since the last tick. */
  tick(): void {
    const idle = !this.busy;
    this.busy = false;
    // A stream with bytes still waiting needs no comment, and a stalled one must not grow.
    if (idle && !this.res.destroyed && this.res.writableLength === 0) {
      this.res.write(keepAliveComment);
      this.busy = true;
    }
  }
}

/**
 * Before a stream's first event (a resubscribe waiting for the task's next
 * one; an upstream that sends the task late): the headers go out after
 * `intervalMs` with a comment, and a comment every `intervalMs` after. Returns
 * the stop, called when the first event or a failure comes.
 */
export function keepAliveUntilFirst(res: ServerResponse, intervalMs: number): () => void {
  const timer = setInterval(() => {
    if (res.destroyed) return;
    if (!res.headersSent) res.writeHead(200, sseHeaders);
    res.write(keepAliveComment);
  }, intervalMs);
  return () => clearInterval(timer);
}

import type { ServerResponse } from "node:http";

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

/** The unsent bytes of all open streams, and the waits that keep them under the limits. */
export interface SseBudget {
  /** Counts `res` in until it leaves. Once `stop` aborts (the client left, the bridge closes), no wait holds it. */
  join(res: ServerResponse, stop: AbortSignal): StreamBudget;
  /** How many streams are in and the unsent bytes they hold, recounted now. */
  stats(): { readonly streams: number; readonly heldBytes: number };
}

/** One stream's share of the budget. */
export interface StreamBudget {
  /**
   * After each event: waits while this stream, or all of them, hold too much.
   * Resolves undefined to read on, or why the stream is to be cut: its client
   * read nothing for stallMs meanwhile.
   */
  backpressure(): Promise<string | undefined>;
  /**
   * Waits until the unsent bytes fall to `target`: true then (or when the
   * response is gone or `stop` aborted), false when the client read
   * nothing at all for stallMs.
   */
  roomFor(target: number): Promise<boolean>;
  /** Re-checks a wait now: a write reached the kernel, or `stop` aborted ('drain' only follows a full buffer). */
  wake(): void;
  /** Stops counting the stream; its last bytes (an error event, say) are its own affair. */
  leave(): void;
}

/**
 * Backpressure: a stream reads its next upstream event only while its response
 * holds fewer unsent bytes than the limits allow, so a slow client slows its
 * upstream instead of the bridge buffering the whole task in memory.
 */
export function createSseBudget(limits: SseLimits): SseBudget {
  return new Budget(limits);
}

class Budget implements SseBudget {
  readonly shares = new Set<Share>();
  /** The sum of the shares' `held`. */
  total = 0;

  constructor(readonly limits: SseLimits) {}

  join(res: ServerResponse, stop: AbortSignal): StreamBudget {
    const share = new Share(res, this, stop);
    this.shares.add(share);
    return share;
  }

  stats() {
    for (const share of this.shares) this.recount(share);
    return { streams: this.shares.size, heldBytes: this.total };
  }

  recount(share: Share): void {
    const now = share.res.destroyed ? 0 : share.res.writableLength;
    this.total += now - share.held;
    share.held = now;
  }

  /** Bytes left the sockets since the streams wrote, so the running total only ever overstates: recounted when over. */
  overBudget(): boolean {
    if (this.total < this.limits.bufferBytes) return false;
    for (const share of this.shares) this.recount(share);
    return this.total >= this.limits.bufferBytes;
  }
}

// A class, not closures: every held stream keeps one, and its methods are shared.
class Share implements StreamBudget {
  /** Unsent bytes when the stream last wrote or was recounted. */
  held = 0;
  /** The check of the wait in progress, if any. */
  private check: (() => void) | undefined;

  constructor(
    readonly res: ServerResponse,
    private readonly budget: Budget,
    private readonly stop: AbortSignal,
  ) {}

  async backpressure(): Promise<string | undefined> {
    const { res, budget } = this;
    const { streamBufferBytes, bufferBytes, stallMs } = budget.limits;
    budget.recount(this);
    const floor = res.writableHighWaterMark;
    for (;;) {
      if (this.held >= streamBufferBytes) {
        if (await this.roomFor(Math.floor(streamBufferBytes / 2))) return undefined;
        return `the client read nothing for ${stallMs} ms while ${res.writableLength} bytes of this stream waited (limit ${streamBufferBytes} bytes per stream, bridge.sseStreamBufferBytes; bridge.sseStallMs)`;
      }
      // Past the process-wide budget a stream gets more only once its socket took what it has (the floor).
      if (this.held < floor || !budget.overBudget()) return undefined;
      if (!(await this.roomFor(0))) {
        return `the client read nothing for ${stallMs} ms while the bridge held ${budget.total} bytes for slow streams (limit ${bufferBytes} bytes, bridge.sseBufferBytes; bridge.sseStallMs)`;
      }
      budget.recount(this);
      if (res.destroyed || this.stop.aborted) return undefined;
    }
  }

  roomFor(target: number): Promise<boolean> {
    const { res, stop } = this;
    const { stallMs } = this.budget.limits;
    return new Promise<boolean>((resolve) => {
      let last = res.writableLength;
      let since = Date.now();
      const finish = (ok: boolean) => {
        clearInterval(poll);
        res.off("drain", check);
        res.off("close", check);
        this.check = undefined;
        resolve(ok);
      };
      const check = () => {
        const now = res.destroyed ? 0 : res.writableLength;
        if (now <= target || stop.aborted) return finish(true);
        if (now < last) {
          last = now;
          since = Date.now();
        } else if (Date.now() - since >= stallMs) finish(false);
      };
      // Polled as well: 'drain' only follows a write that returned false, and a stall has no event at all.
      const poll = setInterval(check, Math.max(10, Math.min(250, stallMs / 4)));
      res.on("drain", check);
      res.once("close", check);
      this.check = check;
    });
  }

  wake(): void {
    this.check?.();
  }

  leave(): void {
    if (!this.budget.shares.delete(this)) return;
    this.budget.total -= this.held;
    this.held = 0;
  }
}

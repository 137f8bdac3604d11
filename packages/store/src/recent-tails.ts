import type { StoredMessage } from "./types.js";

/**
 * The newest messages of recently used threads, so the history read at the
 * start of each turn needs no LevelDB range read and no decoding. Sound only
 * for a single-owner store: every append goes through this process, which
 * extends a thread's cached tail as it writes, and every other change to a
 * thread (delete, purge, import, a failed write) drops it. A tail is also
 * checked against the thread's last sequence on each read: messages are
 * numbered without gaps, so a tail that does not end at the last one is stale.
 *
 * The cached messages are shared with every caller; they are never modified.
 */
export class RecentTails {
  /** By thread digest, oldest message first; Map order is least recently used first. */
  private readonly tails = new Map<string, StoredMessage[]>();
  private bytes = 0;

  constructor(
    /** Messages kept per thread; a request for more misses unless the tail is the whole thread. */
    private readonly perThread: number,
    /** Payload bytes kept across all threads. */
    private readonly maxBytes: number,
  ) {}

  /** The last `count` messages of a thread whose last sequence is `lastSequence`, when cached. */
  get(thread: string, lastSequence: number, count: number): StoredMessage[] | undefined {
    const tail = this.tails.get(thread);
    if (!tail) return undefined;
    if (tail[tail.length - 1]?.sequence !== lastSequence) {
      this.drop(thread);
      return undefined;
    }
    if (tail.length < count && tail[0]?.sequence !== 1) return undefined;
    this.tails.delete(thread);
    this.tails.set(thread, tail);
    return tail.slice(-count);
  }

  /** Caches the newest messages of a thread, as just read from the database (oldest first). */
  put(thread: string, newest: readonly StoredMessage[]): void {
    this.drop(thread);
    if (newest.length === 0) return;
    this.store(thread, newest.slice(-this.perThread));
  }

  /** Extends a cached tail by the message just appended after `previousLast`. */
  appended(thread: string, previousLast: number, message: StoredMessage): void {
    const tail = this.tails.get(thread);
    if (!tail) return;
    this.drop(thread);
    if (tail[tail.length - 1]?.sequence !== previousLast) return;
    tail.push(message);
    this.store(thread, tail.length > this.perThread ? tail.slice(-this.perThread) : tail);
  }

  drop(thread: string): void {
    const tail = this.tails.get(thread);
    if (!tail) return;
    this.tails.delete(thread);
    this.bytes -= sizeOf(tail);
  }

  private store(thread: string, tail: StoredMessage[]): void {
    const size = sizeOf(tail);
    if (size > this.maxBytes) return;
    this.tails.set(thread, tail);
    this.bytes += size;
    for (const [oldest] of this.tails) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }
}

function sizeOf(tail: readonly StoredMessage[]): number {
  let size = 0;
  for (const m of tail) size += m.payload.byteLength;
  return size;
}

import type { StoredMessage } from "../types.js";

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
  /** By thread digest, oldest message first, with the tail's payload bytes; Map order is least recently used first. */
  private readonly tails = new Map<string, { messages: StoredMessage[]; bytes: number }>();
  private bytes = 0;

  constructor(
    /** Messages kept per thread; a request for more misses unless the tail is the whole thread. */
    private readonly perThread: number,
    /** Payload bytes kept across all threads. */
    private readonly maxBytes: number,
  ) {}

  /** The last `count` messages of a thread whose last sequence is `lastSequence`, when cached. */
  get(thread: string, lastSequence: number, count: number): StoredMessage[] | undefined {
    const entry = this.tails.get(thread);
    if (!entry) return undefined;
    const tail = entry.messages;
    if (tail[tail.length - 1]?.sequence !== lastSequence) {
      this.drop(thread);
      return undefined;
    }
    if (tail.length < count && tail[0]?.sequence !== 1) return undefined;
    this.tails.delete(thread);
    this.tails.set(thread, entry);
    return tail.slice(-count);
  }

  /** Caches the newest messages of a thread, as just read from the database (oldest first). */
  put(thread: string, newest: readonly StoredMessage[]): void {
    this.drop(thread);
    const messages = newest.slice(-this.perThread);
    let bytes = 0;
    for (const m of messages) bytes += m.payload.byteLength;
    if (messages.length > 0) this.store(thread, { messages, bytes });
  }

  /** Extends a cached tail by the message just appended after `previousLast`. */
  appended(thread: string, previousLast: number, message: StoredMessage): void {
    const entry = this.tails.get(thread);
    if (!entry) return;
    this.drop(thread);
    const tail = entry.messages;
    if (tail[tail.length - 1]?.sequence !== previousLast) return;
    tail.push(message);
    let bytes = entry.bytes + message.payload.byteLength;
    // One message in, so at most one falls out at the front.
    if (tail.length > this.perThread) bytes -= tail.shift()!.payload.byteLength;
    this.store(thread, { messages: tail, bytes });
  }

  drop(thread: string): void {
    const entry = this.tails.get(thread);
    if (!entry) return;
    this.tails.delete(thread);
    this.bytes -= entry.bytes;
  }

  private store(thread: string, entry: { messages: StoredMessage[]; bytes: number }): void {
    if (entry.bytes > this.maxBytes) return;
    this.tails.set(thread, entry);
    this.bytes += entry.bytes;
    for (const [oldest] of this.tails) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(oldest);
    }
  }
}

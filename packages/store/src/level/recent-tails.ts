import type { StoredMessage } from "../types.js";

type Tail = { messages: StoredMessage[]; bytes: number };

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
  /**
   * By thread digest, oldest message first, with the tail's payload bytes, in two generations of at most
   * half the budget each: a tail that does not fit the newer one turns the newer into the older and drops
   * the older whole, and a tail read or extended from the older moves into the newer. Evicting the least
   * recently used tail from one Map instead starts an iterator per store, which walks every hole that
   * deleted entries leave in a V8 Map (see RecentMap).
   */
  private newer = new Map<string, Tail>();
  private older = new Map<string, Tail>();
  private newerBytes = 0;
  private olderBytes = 0;

  constructor(
    /** Messages kept per thread; a request for more misses unless the tail is the whole thread. */
    private readonly perThread: number,
    /** Payload bytes kept across all threads; a thread's tail of more than half of it is not kept. */
    private readonly maxBytes: number,
  ) {}

  /** The last `count` messages of a thread whose last sequence is `lastSequence`, when cached. */
  get(thread: string, lastSequence: number, count: number): StoredMessage[] | undefined {
    let entry = this.newer.get(thread);
    if (!entry) {
      entry = this.older.get(thread);
      if (!entry) return undefined;
      this.drop(thread);
      this.store(thread, entry);
    }
    const tail = entry.messages;
    if (tail[tail.length - 1]?.sequence !== lastSequence) {
      this.drop(thread);
      return undefined;
    }
    if (tail.length < count && tail[0]?.sequence !== 1) return undefined;
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
    const entry = this.newer.get(thread) ?? this.older.get(thread);
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
    const newer = this.newer.get(thread);
    if (newer) {
      this.newer.delete(thread);
      this.newerBytes -= newer.bytes;
    }
    const older = this.older.get(thread);
    if (older) {
      this.older.delete(thread);
      this.olderBytes -= older.bytes;
    }
  }

  private store(thread: string, entry: Tail): void {
    const half = this.maxBytes / 2;
    if (entry.bytes > half) return;
    if (this.newerBytes + entry.bytes > half) {
      this.older = this.newer;
      this.olderBytes = this.newerBytes;
      this.newer = new Map();
      this.newerBytes = 0;
    }
    this.newer.set(thread, entry);
    this.newerBytes += entry.bytes;
  }
}

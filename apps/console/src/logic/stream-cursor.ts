/**
 * Where a followed task stream stands, so a reconnect resumes it instead of
 * starting over. A server with resumable streams names the sequence number of
 * a stream's first event (the parley-stream-start header), and a resubscribe
 * with parley-resume-after gets exactly the later events. A single LevelDB
 * server sends no such header and replays a live task's run from its first
 * event, so the cursor drops the events already shown. Either way each event
 * is shown once (see docs/protocols.md, "Resumable streams").
 */
export interface StreamCursor {
  /** The highest sequence number shown; 0 before any. */
  readonly lastSeq: number;
  /** Whether the server numbers its events (sent parley-stream-start). */
  readonly resumable: boolean;
}

export const freshCursor: StreamCursor = { lastSeq: 0, resumable: false };

/** One (re)subscription's view of its own events. */
export interface StreamAttempt {
  /** The stream's first sequence number minus one, from parley-stream-start; 0 without it. */
  readonly start: number;
  /** Events received on this stream. */
  readonly received: number;
}

/** The parley-stream-start header's value as a number, or undefined when absent or malformed. */
export function streamStartOf(header: string | null): number | undefined {
  if (header === null || !/^\d+$/.test(header.trim())) return undefined;
  return Number(header.trim());
}

/** What to ask of the next subscription: resume after the last shown event when the server numbers them. */
export function resumeAfterOf(cursor: StreamCursor): number | undefined {
  return cursor.resumable && cursor.lastSeq > 0 ? cursor.lastSeq : undefined;
}

/** Starts an attempt once its response headers are in. */
export function beginAttempt(cursor: StreamCursor, startHeader: string | null): [StreamCursor, StreamAttempt] {
  const start = streamStartOf(startHeader);
  return [
    { ...cursor, resumable: cursor.resumable || start !== undefined },
    { start: start ?? 0, received: 0 },
  ];
}

/**
 * Takes one event of an attempt: says whether it is new (to be shown) and
 * moves the cursor. A replay from the first event numbers from 1 again, so
 * everything at or below lastSeq was shown already.
 */
export function takeEvent(
  cursor: StreamCursor,
  attempt: StreamAttempt,
): { readonly fresh: boolean; readonly cursor: StreamCursor; readonly attempt: StreamAttempt } {
  const next = { ...attempt, received: attempt.received + 1 };
  const seq = next.start + next.received;
  if (seq <= cursor.lastSeq) return { fresh: false, cursor, attempt: next };
  return { fresh: true, cursor: { ...cursor, lastSeq: seq }, attempt: next };
}

/** Wait before the n-th reconnect (1-based): 250 ms doubling to at most 4 s. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(4000, 250 * 2 ** Math.max(0, attempt - 1));
}

import type { Thread } from "@parley/proto";
import { timestampMs } from "./format.js";

/** Newest first, by the time of the last message; the server already sends them so, this keeps merges honest. */
export function newestFirst(threads: readonly Thread[]): Thread[] {
  return [...threads].sort((a, b) => (timestampMs(b.updateTime) ?? 0) - (timestampMs(a.updateTime) ?? 0));
}

/** The threads whose contextId contains the query (case-insensitive); all of them for an empty query. */
export function matchThreads(threads: readonly Thread[], query: string): Thread[] {
  const q = query.trim().toLowerCase();
  return q === "" ? [...threads] : threads.filter((t) => t.contextId.toLowerCase().includes(q));
}

import { describe, expect, it } from "vitest";
import {
  beginAttempt,
  freshCursor,
  reconnectDelayMs,
  resumeAfterOf,
  type StreamCursor,
  streamStartOf,
  takeEvent,
} from "../src/logic/stream-cursor.js";

/** Runs one (re)subscription that delivers `count` events; returns the cursor and which were new. */
function run(cursor: StreamCursor, startHeader: string | null, count: number) {
  let [c, attempt] = beginAttempt(cursor, startHeader);
  const fresh: boolean[] = [];
  for (let i = 0; i < count; i++) {
    const taken = takeEvent(c, attempt);
    c = taken.cursor;
    attempt = taken.attempt;
    fresh.push(taken.fresh);
  }
  return { cursor: c, fresh };
}

describe("stream cursor", () => {
  it("on a server without numbered events, a replay from the first event shows only what is new", () => {
    const first = run(freshCursor, null, 3);
    expect(first.fresh).toEqual([true, true, true]);
    expect(resumeAfterOf(first.cursor)).toBeUndefined();
    // The resubscribe replays the run from its first event: 3 known, 2 new.
    const second = run(first.cursor, null, 5);
    expect(second.fresh).toEqual([false, false, false, true, true]);
    expect(second.cursor.lastSeq).toBe(5);
  });

  it("on a resumable server, asks to resume after the last event and numbers from the header", () => {
    const first = run(freshCursor, "40", 3);
    expect(first.cursor).toEqual({ lastSeq: 43, resumable: true });
    expect(resumeAfterOf(first.cursor)).toBe(43);
    const resumed = run(first.cursor, "43", 2);
    expect(resumed.fresh).toEqual([true, true]);
    expect(resumed.cursor.lastSeq).toBe(45);
  });

  it("reads only well-formed start headers", () => {
    expect(streamStartOf("12")).toBe(12);
    expect(streamStartOf(" 7 ")).toBe(7);
    expect(streamStartOf("-1")).toBeUndefined();
    expect(streamStartOf("x")).toBeUndefined();
    expect(streamStartOf(null)).toBeUndefined();
  });

  it("backs off from 250 ms to at most 4 s", () => {
    expect([1, 2, 3, 4, 5, 6, 10].map(reconnectDelayMs)).toEqual([250, 500, 1000, 2000, 4000, 4000, 4000]);
  });
});

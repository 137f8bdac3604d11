import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { type StreamResponse, StreamResponseSchema, TaskState } from "@parley/proto";
import { describe, expect, it } from "vitest";
import { cancelable, emptyReply, reduceReply, replyEnded, replyText } from "../src/logic/reply-stream.js";

const text = (value: string) => [{ content: { case: "text" as const, value } }];

function status(state: TaskState, at: number, note = ""): StreamResponse {
  return create(StreamResponseSchema, {
    payload: {
      case: "statusUpdate",
      value: {
        taskId: "t1",
        contextId: "c1",
        status: { state, timestamp: timestampFromMs(at), ...(note ? { message: { parts: text(note) } } : {}) },
      },
    },
  });
}

function chunk(artifactId: string, value: string, append: boolean, lastChunk: boolean): StreamResponse {
  return create(StreamResponseSchema, {
    payload: {
      case: "artifactUpdate",
      value: { taskId: "t1", artifact: { artifactId, parts: text(value) }, append, lastChunk },
    },
  });
}

const snapshot = create(StreamResponseSchema, {
  payload: { case: "task", value: { id: "t1", contextId: "c1", status: { state: TaskState.SUBMITTED } } },
});

describe("reduceReply", () => {
  it("reads a reply given as the COMPLETED status's message when no artifact came", () => {
    const events = [snapshot, status(TaskState.WORKING, 1000), status(TaskState.COMPLETED, 1100, "whole answer")];
    expect(replyText(events.reduce(reduceReply, emptyReply))).toBe("whole answer");
  });

  it("grows the reply chunk by chunk and records each state once, in order", () => {
    const events = [
      snapshot,
      status(TaskState.WORKING, 1000),
      chunk("a", "Hel", false, false),
      chunk("a", "lo", true, false),
      status(TaskState.WORKING, 1100),
      chunk("a", "!", true, true),
      status(TaskState.COMPLETED, 1200),
    ];
    const seen: string[] = [];
    let reply = emptyReply;
    for (const e of events) {
      reply = reduceReply(reply, e);
      seen.push(replyText(reply));
    }
    expect(seen).toEqual(["", "", "Hel", "Hello", "Hello", "Hello!", "Hello!"]);
    expect(reply.steps.map((s) => s.state)).toEqual([TaskState.SUBMITTED, TaskState.WORKING, TaskState.COMPLETED]);
    expect(reply.taskId).toBe("t1");
    expect(reply.events).toBe(7);
    expect(reply.artifacts[0]?.complete).toBe(true);
    expect(replyEnded(reply)).toBe(true);
    expect(cancelable(reply)).toBe(false);
  });

  it("replaces an artifact on a non-append chunk and keeps artifacts in first-seen order", () => {
    let reply = emptyReply;
    for (const e of [chunk("a", "one", false, false), chunk("b", "two", false, true), chunk("a", "ONE", false, true)])
      reply = reduceReply(reply, e);
    expect(replyText(reply)).toBe("ONE\ntwo");
  });

  it("is cancelable while working, ends on input-required and keeps the failure note", () => {
    let reply = reduceReply(reduceReply(emptyReply, snapshot), status(TaskState.WORKING, 1));
    expect(cancelable(reply)).toBe(true);
    expect(replyEnded(reply)).toBe(false);
    const asked = reduceReply(reply, status(TaskState.INPUT_REQUIRED, 2, "which file?"));
    expect(replyEnded(asked)).toBe(true);
    expect(asked.steps.at(-1)?.note).toBe("which file?");
    reply = reduceReply(reply, status(TaskState.FAILED, 3, "agent crashed"));
    expect(reply.state).toBe(TaskState.FAILED);
    expect(reply.steps.at(-1)?.note).toBe("agent crashed");
  });

  it("takes a direct Message reply as the whole, completed reply", () => {
    const reply = reduceReply(
      emptyReply,
      create(StreamResponseSchema, { payload: { case: "message", value: { contextId: "c9", parts: text("hi") } } }),
    );
    expect(replyText(reply)).toBe("hi");
    expect(reply.contextId).toBe("c9");
    expect(replyEnded(reply)).toBe(true);
  });
});

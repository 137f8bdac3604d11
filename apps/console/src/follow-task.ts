import { headers, Role, type StreamResponse, type Task } from "@parley/proto";
import type { Connection } from "./connection.js";
import { describeError, isNetworkError, type ShownError } from "./logic/errors.js";
import { applyTask, emptyReply, type ReplyState, reduceReply, replyEnded } from "./logic/reply-stream.js";
import {
  beginAttempt,
  freshCursor,
  reconnectDelayMs,
  resumeAfterOf,
  type StreamAttempt,
  type StreamCursor,
  takeEvent,
} from "./logic/stream-cursor.js";

/** The live state of a followed reply: the reply itself and how the stream stands. */
export interface LiveReply {
  readonly reply: ReplyState;
  /** "streaming", "reconnecting" (after a network blip), or "ended". */
  readonly link: "streaming" | "reconnecting" | "ended";
  /** How many times the stream was resumed. */
  readonly resumes: number;
  readonly error?: ShownError;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Follows a task with SubscribeToTask until its turn ends. A network failure
 * resubscribes (with parley-resume-after where the server numbers events) and
 * drops what was shown already, so a blip resumes the reply instead of
 * starting it over. A task that finished while the link was down is read
 * back with GetTask.
 */
export async function followTask(
  conn: Connection,
  start: ReplyState,
  onUpdate: (live: LiveReply) => void,
  signal: AbortSignal,
): Promise<LiveReply> {
  let reply = start;
  let cursor: StreamCursor = freshCursor;
  let resumes = 0;
  let failures = 0;
  const emit = (link: LiveReply["link"], error?: ShownError): LiveReply => {
    const live: LiveReply = { reply, link, resumes, ...(error ? { error } : {}) };
    onUpdate(live);
    return live;
  };
  while (!signal.aborted && !replyEnded(reply)) {
    let attempt: StreamAttempt | undefined;
    let startHeader: string | null = null;
    const resumeAfter = resumeAfterOf(cursor);
    try {
      const stream = conn.a2a.subscribeToTask(
        { id: reply.taskId },
        {
          signal,
          headers: resumeAfter === undefined ? {} : { [headers.resumeAfter]: String(resumeAfter) },
          onHeader: (h) => {
            startHeader = h.get(headers.streamStart);
          },
        },
      );
      for await (const event of stream) {
        if (!attempt) [cursor, attempt] = beginAttempt(cursor, startHeader);
        const taken = takeEvent(cursor, attempt);
        cursor = taken.cursor;
        attempt = taken.attempt;
        failures = 0;
        if (!taken.fresh) continue;
        reply = reduceReply(reply, event as StreamResponse);
        emit("streaming");
      }
      if (!replyEnded(reply)) reply = applyTask(reply, await conn.a2a.getTask({ id: reply.taskId, historyLength: 0 }));
    } catch (error) {
      if (signal.aborted) break;
      if (isNetworkError(error)) {
        failures += 1;
        resumes += 1;
        emit("reconnecting", describeError(error));
        await sleep(reconnectDelayMs(failures), signal);
        continue;
      }
      // Refused (a finished task cannot be subscribed to): read where it ended.
      try {
        reply = applyTask(reply, (await conn.a2a.getTask({ id: reply.taskId, historyLength: 0 })) as Task);
      } catch (readError) {
        return emit("ended", describeError(readError));
      }
    }
  }
  return emit("ended");
}

/**
 * Sends a message and follows its reply. The send returns at once
 * (returnImmediately), so the task keeps running on the server whatever
 * happens to this page's connection, and SubscribeToTask follows it.
 */
export async function sendAndFollow(
  conn: Connection,
  request: { readonly agent: string; readonly contextId: string; readonly text: string },
  onUpdate: (live: LiveReply) => void,
  signal: AbortSignal,
): Promise<LiveReply> {
  const response = await conn.a2a.sendMessage(
    {
      message: {
        messageId: crypto.randomUUID(),
        contextId: request.contextId,
        role: Role.USER,
        parts: [{ content: { case: "text", value: request.text } }],
      },
      configuration: { returnImmediately: true, historyLength: 0 },
    },
    { headers: request.agent === "" ? {} : { [headers.agent]: request.agent }, signal },
  );
  let reply = emptyReply;
  if (response.payload.case === "task") reply = applyTask(reply, response.payload.value);
  else if (response.payload.case === "message") {
    reply = reduceReply(reply, { payload: response.payload } as StreamResponse);
    return { reply, link: "ended", resumes: 0 };
  }
  onUpdate({ reply, link: "streaming", resumes: 0 });
  return followTask(conn, reply, onUpdate, signal);
}

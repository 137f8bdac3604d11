// Tasks outlive the streams that watch them, on one LevelDB server: a dropped SendStreamingMessage leaves
// the task running to its end, and parley-resume-after gives exactly the missing events, while the task runs,
// after it ended, and after a crash and restart of the process.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallOptions } from "@connectrpc/connect";
import { type StreamResponse, type Task, TaskState, headers as wire } from "@parley/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnServer } from "./fixtures/spawn-server.js";
import { collect, startTestServer, streamedText, type TestServer, userMessage } from "./harness.js";

const text = "a reply that is streamed in ten chunks, so the stream can be dropped in its middle";

/** Reads `count` events of a stream, then drops it (the client goes away). */
async function readThenDrop(
  open: (options: CallOptions) => AsyncIterable<StreamResponse>,
  count: number,
): Promise<{ events: StreamResponse[]; start: number }> {
  const abort = new AbortController();
  const events: StreamResponse[] = [];
  let start = -1;
  try {
    for await (const event of open({
      signal: abort.signal,
      onHeader: (h) => {
        start = Number(h.get(wire.streamStart));
      },
    })) {
      events.push(event);
      if (events.length === count) abort.abort();
    }
  } catch {
    // The abort ends the read; what arrived stays in `events`.
  }
  return { events, start };
}

function taskIdOf(events: readonly StreamResponse[]): string {
  const first = events[0]?.payload;
  if (first?.case !== "task") throw new Error(`the first event is not a Task: ${first?.case}`);
  return first.value.id;
}

function finalState(events: readonly StreamResponse[]): TaskState | undefined {
  const last = events[events.length - 1]?.payload;
  return last?.case === "statusUpdate" ? last.value.status?.state : undefined;
}

function storedText(task: Task): string {
  return task.artifacts
    .map((a) => a.parts.map((p) => (p.content.case === "text" ? p.content.value : "")).join(""))
    .join("");
}

async function settled(server: TestServer, taskId: string): Promise<Task> {
  const client = server.a2a("connect");
  for (;;) {
    const task = await client.getTask({ id: taskId });
    const state = task.status?.state ?? TaskState.UNSPECIFIED;
    if (state !== TaskState.SUBMITTED && state !== TaskState.WORKING) return task;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(["grpc", "connect"] as const)("a task outlives its stream over %s (LevelDB)", (protocol) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ agents: [{ name: "slow", type: "echo", options: { delayMs: 80, chunks: 10 } }] });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("completes a task whose stream was dropped mid-reply, and resumes exactly after the last event seen", async () => {
    const client = server.a2a(protocol);
    const contextId = `drop-${crypto.randomUUID()}`;
    const dropped = await readThenDrop(
      (options) => client.sendStreamingMessage({ message: userMessage(text, { contextId }) }, options),
      4,
    );
    expect(dropped.events).toHaveLength(4);
    expect(dropped.start).toBe(0);
    const taskId = taskIdOf(dropped.events);

    // While it runs: resume after the 4th event (seq start + 4).
    const whileRunning = server.a2a(protocol, { [wire.resumeAfter]: String(dropped.start + 4) });
    let resumedStart = -1;
    const rest = await collect(
      whileRunning.subscribeToTask(
        { id: taskId },
        {
          onHeader: (h) => {
            resumedStart = Number(h.get(wire.streamStart));
          },
        },
      ),
    );
    expect(resumedStart).toBe(4);
    expect(finalState(rest)).toBe(TaskState.COMPLETED);
    const whole = [...dropped.events, ...rest];
    const task = await settled(server, taskId);
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    expect(streamedText(whole)).toBe(storedText(task));
    expect(storedText(task)).toContain(text);

    // After it ended: the same resume point gives the same events again, then the stream ends.
    const afterEnd = await collect(server.a2a(protocol, { [wire.resumeAfter]: "4" }).subscribeToTask({ id: taskId }));
    expect(afterEnd).toEqual(rest);
    // Resuming after the last event: nothing is missing, the stream ends at once.
    const nothing = await collect(
      server.a2a(protocol, { [wire.resumeAfter]: String(whole.length) }).subscribeToTask({ id: taskId }),
    );
    expect(nothing).toEqual([]);
    // A plain subscribe to the finished task keeps the specification's error.
    await expect(collect(client.subscribeToTask({ id: taskId }))).rejects.toThrow(/terminal/);
  });

  it("keeps a SendMessage running when its caller goes away", async () => {
    const client = server.a2a(protocol);
    const contextId = `gone-${crypto.randomUUID()}`;
    const abort = new AbortController();
    const sent = client.sendMessage({ message: userMessage(text, { contextId }) }, { signal: abort.signal });
    setTimeout(() => abort.abort(), 200);
    await expect(sent).rejects.toThrow();
    const listed = await client.listTasks({ contextId });
    expect(listed.tasks).toHaveLength(1);
    const task = await settled(server, listed.tasks[0]!.id);
    expect(task.status?.state).toBe(TaskState.COMPLETED);
    expect(storedText(task)).toContain(text);
  });

  it("logs a SendMessage's events from its start once someone looks its task up while it runs", async () => {
    const client = server.a2a(protocol);
    const contextId = `looked-up-${crypto.randomUUID()}`;
    const sent = client.sendMessage({ message: userMessage(text, { contextId }) });
    // Three chunks in: the run was hidden (a blocking send may end with a Message) until this listing showed it.
    await new Promise((resolve) => setTimeout(resolve, 250));
    const [listed] = (await client.listTasks({ contextId })).tasks;
    const followed = await collect(client.subscribeToTask({ id: listed!.id }));
    const done = (await sent).payload.value as Task;
    expect(followed[0]?.payload.case).toBe("task");
    expect(streamedText(followed)).toBe(text);
    expect(finalState(followed)).toBe(TaskState.COMPLETED);
    // The same events by seq, from the log, after the end.
    const replay = await collect(server.a2a(protocol, { [wire.resumeAfter]: "0" }).subscribeToTask({ id: done.id }));
    expect(replay).toEqual(followed);
  });

  it("resumes a stream that attached to a running SendMessage of the same message (a retry)", async () => {
    const client = server.a2a(protocol);
    const message = userMessage(text, { messageId: `retried-${crypto.randomUUID()}` });
    const sent = client.sendMessage({ message });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const dropped = await readThenDrop((options) => client.sendStreamingMessage({ message }, options), 3);
    const taskId = taskIdOf(dropped.events);
    // Resumed after the end: the log has the run, the stream's events by their seqs.
    expect(((await sent).payload.value as Task).id).toBe(taskId);
    const rest = await collect(
      server.a2a(protocol, { [wire.resumeAfter]: String(dropped.start + 3) }).subscribeToTask({ id: taskId }),
    );
    expect(streamedText([...dropped.events, ...rest])).toBe(text);
    expect(finalState(rest)).toBe(TaskState.COMPLETED);
  });

  it("keeps no event log of a SendMessage that nobody followed while it ran: the answer has the task", async () => {
    const client = server.a2a(protocol);
    const done = (await client.sendMessage({ message: userMessage(text) })).payload.value as Task;
    expect(done.status?.state).toBe(TaskState.COMPLETED);
    expect(storedText(await client.getTask({ id: done.id }))).toBe(text);
    // Nobody has a seq of its events, and a terminal task takes no SubscribeToTask without one.
    await expect(
      collect(server.a2a(protocol, { [wire.resumeAfter]: "0" }).subscribeToTask({ id: done.id })),
    ).rejects.toThrow(/no longer kept/);
  });

  it("follows an INPUT_REQUIRED task through its follow-up turn to COMPLETED", async () => {
    const conformance = await startTestServer({ agents: [{ name: "conformance", type: "conformance" }] });
    try {
      const client = conformance.a2a(protocol);
      const waiting = (
        await client.sendMessage({ message: userMessage("wait", { messageId: "tck-input-required-1" }) })
      ).payload.value as Task;
      expect(waiting.status?.state).toBe(TaskState.INPUT_REQUIRED);
      const seen: StreamResponse[] = [];
      let opened!: () => void;
      const first = new Promise<void>((resolve) => {
        opened = resolve;
      });
      const following = (async () => {
        for await (const event of client.subscribeToTask({ id: waiting.id })) {
          seen.push(event);
          opened();
        }
      })();
      await first;
      const done = (
        await client.sendMessage({
          message: userMessage("done", { messageId: "tck-complete-task-1", taskId: waiting.id }),
        })
      ).payload.value as Task;
      expect(done.status?.state).toBe(TaskState.COMPLETED);
      await following;
      expect(seen[0]?.payload.case).toBe("task");
      expect(finalState(seen)).toBe(TaskState.COMPLETED);
    } finally {
      await conformance.close();
    }
  });
});

describe("after a crash (LevelDB, a real process SIGKILLed mid-reply)", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "parley-crash-resume-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it("ends the interrupted task FAILED at the next start and still replays its events up to the crash", async () => {
    const env = { PARLEY_ECHO_DELAY_MS: "150", PARLEY_RATE_LIMIT: "0" };
    const first = await spawnServer({ dataDir, env });
    const dropped = await readThenDrop(
      (options) => first.a2a().sendStreamingMessage({ message: userMessage(text) }, options),
      4,
    );
    const taskId = taskIdOf(dropped.events);
    // Let the four events reach the log (group commit), then kill the process with the task still running.
    await new Promise((resolve) => setTimeout(resolve, 300));
    first.closeClients();
    first.child.kill("SIGKILL");
    await first.exited;

    const second = await spawnServer({ dataDir, env });
    try {
      const task = await second.a2a().getTask({ id: taskId });
      expect(task.status?.state).toBe(TaskState.FAILED);
      const replay = await collect(second.a2a({ [wire.resumeAfter]: "0" }).subscribeToTask({ id: taskId }));
      // Every event logged before the crash, in order, then the FAILED status the restart appended.
      expect(replay.slice(0, 4)).toEqual(dropped.events);
      expect(finalState(replay)).toBe(TaskState.FAILED);
      const afterCrash = await collect(second.a2a({ [wire.resumeAfter]: "2" }).subscribeToTask({ id: taskId }));
      expect(afterCrash).toEqual(replay.slice(2));
    } finally {
      second.closeClients();
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });
});

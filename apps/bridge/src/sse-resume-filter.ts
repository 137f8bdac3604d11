import type { Message } from "@bufbuild/protobuf";
import { type ResumePoint, streamStartOf, taskIdOfEvent } from "./sse-resume.js";

/** Numbers a stream's events as the task's event log did, and drops those a resubscribe already has. */
export interface ResumeFilter {
  /** Called once per upstream event, in order: its seq, or undefined when the client has it already. */
  admit(): number | undefined;
  /** The Last-Event-ID of an admitted event: `<taskId>:<seq>`, none while the stream's task is unknown. */
  idOf(event: Message, seq: number): string | undefined;
  /** The stream's task, once the resume point or an event named it. */
  readonly taskId: string | undefined;
}

/**
 * The n-th event of a stream has seq start + n, start being the stream's
 * parley-stream-start header. The header is read at the first event: an
 * in-process upstream sets it only once its handler runs. An upstream that
 * ignored parley-resume-after replays from its start; this drops the replay.
 */
export function createResumeFilter(header: Headers, resume: ResumePoint | undefined): ResumeFilter {
  return new Filter(header, resume);
}

// A class, not closures: every held stream keeps one, and its methods are shared.
class Filter implements ResumeFilter {
  taskId: string | undefined;
  private start: number | undefined;
  private index = 0;

  constructor(
    private readonly header: Headers,
    private readonly resume: ResumePoint | undefined,
  ) {
    this.taskId = resume?.taskId;
  }

  admit(): number | undefined {
    this.start ??= streamStartOf(this.header);
    const seq = this.start + ++this.index;
    return this.resume !== undefined && seq <= this.resume.afterSeq ? undefined : seq;
  }

  idOf(event: Message, seq: number): string | undefined {
    this.taskId ??= taskIdOfEvent(event);
    return this.taskId !== undefined ? `${this.taskId}:${seq}` : undefined;
  }
}

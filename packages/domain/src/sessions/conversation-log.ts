import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { ConversationState, type ConverseEvent, ConverseEventSchema } from "@parley/proto";
import type { ChainLedger } from "../chain/chain-budget.js";

/** The fields of an event its producer chooses; ids, sequence and time are filled in. */
export type EventInit = Pick<
  MessageInitShape<typeof ConverseEventSchema>,
  "phase" | "turn" | "maxTurns" | "speaker" | "text" | "silent" | "stopReason" | "announcedText" | "detail"
>;

/**
 * One conversation's events, in order, with live followers. Events are
 * append-only; a follower replays from the first and then waits for more
 * until the conversation is done.
 */
export class ConversationLog {
  readonly events: ConverseEvent[] = [];
  private done = false;
  private wake: () => void = () => undefined;
  private changed: Promise<void>;
  private observer: ((log: ConversationLog) => void) | undefined;

  constructor(
    readonly id: string,
    readonly tenant: string,
    /** What the request asked for, to tell a true retry (same request_id) from a reuse of the id. */
    readonly fingerprint: string,
    /** The chain the conversation draws its budget from. */
    readonly chain: ChainLedger,
    readonly contexts: { readonly requester: string; readonly target: string },
  ) {
    this.changed = this.nextChange();
  }

  private nextChange(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  /** Called after every appended event (the recorder that makes the log durable). */
  observe(observer: (log: ConversationLog) => void): void {
    this.observer = observer;
  }

  get state(): ConversationState {
    return this.done ? ConversationState.DONE : ConversationState.RUNNING;
  }

  get finished(): boolean {
    return this.done;
  }

  append(init: EventInit): void {
    this.push(init);
    this.observer?.(this);
  }

  private push(init: EventInit): void {
    if (this.done) throw new Error(`conversation ${this.id} got an event after it ended`);
    this.events.push(
      create(ConverseEventSchema, {
        ...init,
        conversationId: this.id,
        sequence: BigInt(this.events.length + 1),
        time: timestampNow(),
        requesterContextId: this.contexts.requester,
        targetContextId: this.contexts.target,
      }),
    );
    this.notify();
  }

  /** Appends the last event and ends the log. */
  finish(init: EventInit): void {
    this.push(init);
    this.done = true;
    this.notify();
    this.observer?.(this);
  }

  private notify(): void {
    const wake = this.wake;
    this.changed = this.nextChange();
    wake();
  }

  /** Every event from the first, then live ones, until the end or until `signal` fires. */
  async *follow(signal?: AbortSignal): AsyncIterable<ConverseEvent> {
    let next = 0;
    const aborted = signal
      ? new Promise<void>((resolve) => {
          if (signal.aborted) resolve();
          else signal.addEventListener("abort", () => resolve(), { once: true });
        })
      : undefined;
    for (;;) {
      while (next < this.events.length) yield this.events[next++]!;
      if (this.done || signal?.aborted) return;
      await (aborted ? Promise.race([this.changed, aborted]) : this.changed);
    }
  }
}

/**
 * Running conversations, plus the most recent finished ones in a bounded
 * LRU; every conversation is also stored (conversation-records.ts), so one
 * that aged out of memory, ran on another replica or before a restart is
 * read from the store.
 */
export class ConversationRegistry {
  private readonly running = new Map<string, ConversationLog>();
  private readonly finished = new Map<string, ConversationLog>();
  private readonly byRequest = new Map<string, string>();
  private readonly requestOf = new Map<string, string>();

  constructor(private readonly capacity: number) {}

  get(tenant: string, id: string): ConversationLog | undefined {
    const log = this.running.get(id) ?? this.finished.get(id);
    if (!log || log.tenant !== tenant) return undefined;
    if (this.finished.has(id)) {
      this.finished.delete(id);
      this.finished.set(id, log);
    }
    return log;
  }

  byRequestId(tenant: string, requestId: string): ConversationLog | undefined {
    const id = this.byRequest.get(requestKey(tenant, requestId));
    return id === undefined ? undefined : this.get(tenant, id);
  }

  add(log: ConversationLog, requestId: string): void {
    this.running.set(log.id, log);
    if (requestId === "") return;
    const key = requestKey(log.tenant, requestId);
    this.byRequest.set(key, log.id);
    this.requestOf.set(log.id, key);
  }

  /** Moves a conversation that ended into the LRU, evicting the oldest beyond capacity. */
  retire(log: ConversationLog): void {
    this.running.delete(log.id);
    this.finished.set(log.id, log);
    while (this.finished.size > this.capacity) {
      const oldest = this.finished.keys().next().value as string;
      this.finished.delete(oldest);
      const key = this.requestOf.get(oldest);
      if (key !== undefined) this.byRequest.delete(key);
      this.requestOf.delete(oldest);
    }
  }
}

function requestKey(tenant: string, requestId: string): string {
  return `${tenant}\u0000${requestId}`;
}

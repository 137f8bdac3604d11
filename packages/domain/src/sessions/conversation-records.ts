// Makes conversations durable: every event a ConversationLog gets is saved to the backend's ConversationStore
// (both backends, every replica reads them), and a stored conversation is read back as the API shows it.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampDate, timestampFromMs, timestampMs, timestampNow } from "@bufbuild/protobuf/wkt";
import {
  ConversationState,
  type ConversationSummary,
  ConversationSummarySchema,
  type ConverseEvent,
  ConverseEventSchema,
  Phase,
  StopReason,
} from "@parley/proto";
import type { ConversationRecord, ConversationStore } from "@parley/store";
import type { Logger } from "pino";
import type { ConversationLog } from "./conversation-log.js";

/** Characters of the request text a summary keeps. */
const SUMMARY_TEXT_CHARS = 200;
/** Events read per store call when a stored conversation is loaded. */
const EVENT_PAGE = 500;

/** Who takes part: the requester's and the target's agent (a hosted agent's name, or the peer as named). */
export interface ConversationParties {
  readonly agents: readonly [string, string];
  readonly text: string;
}

function eventTime(event: ConverseEvent | undefined): number {
  return event?.time ? Math.floor(timestampMs(event.time)) : Date.now();
}

function recordOf(
  log: ConversationLog,
  parties: ConversationParties,
  summary: ConversationSummary,
): ConversationRecord {
  return {
    tenant: log.tenant,
    conversationId: log.id,
    state: log.state,
    createdAt: eventTime(log.events[0]),
    updatedAt: eventTime(log.events[log.events.length - 1]),
    agents: [parties.agents[0], parties.agents[1]],
    contextIds: [log.contexts.requester, log.contexts.target],
    eventCount: log.events.length,
    payload: toBinary(ConversationSummarySchema, summary),
  };
}

function summaryOf(log: ConversationLog, parties: ConversationParties): ConversationSummary {
  const first = log.events[0];
  const last = log.events[log.events.length - 1];
  return create(ConversationSummarySchema, {
    conversationId: log.id,
    state: log.state,
    ...(first?.time ? { createTime: first.time } : {}),
    ...(last?.time ? { updateTime: last.time } : {}),
    requesterAgent: parties.agents[0],
    targetAgent: parties.agents[1],
    requesterContextId: log.contexts.requester,
    targetContextId: log.contexts.target,
    eventCount: BigInt(log.events.length),
    stopReason: log.finished ? (last?.stopReason ?? StopReason.UNSPECIFIED) : StopReason.UNSPECIFIED,
    text: [...parties.text].slice(0, SUMMARY_TEXT_CHARS).join(""),
  });
}

export interface ConversationRecorder {
  /** Saves the log's events as they come, in order, one write at a time. */
  track(log: ConversationLog, parties: ConversationParties): void;
  /** Resolves once every event appended so far is saved (or saving it failed and was logged). */
  settled(log: ConversationLog): Promise<void>;
}

export function createConversationRecorder(deps: {
  readonly store: ConversationStore;
  readonly logger: Logger;
}): ConversationRecorder {
  const chains = new WeakMap<ConversationLog, Promise<void>>();
  return {
    track(log, parties) {
      let saved = 0;
      let failed = false;
      const flush = async () => {
        if (failed || saved === log.events.length) return;
        const events = log.events.slice(saved);
        const first = saved + 1;
        const record = recordOf(log, parties, summaryOf(log, parties));
        try {
          await deps.store.saveConversation(
            record,
            events.map((event, i) => ({ seq: first + i, payload: toBinary(ConverseEventSchema, event) })),
          );
          saved = record.eventCount;
        } catch (error) {
          // The conversation runs on; what it does from here is in memory only (a CONFLICT: its thread was deleted).
          failed = true;
          deps.logger.warn(
            { conversationId: log.id, err: error },
            "conversation steps could not be stored; later steps are not stored either",
          );
        }
      };
      log.observe(() => {
        const next = (chains.get(log) ?? Promise.resolve()).then(flush);
        chains.set(log, next);
      });
      // Events appended before tracking started (the accepted event).
      chains.set(log, Promise.resolve().then(flush));
    },
    settled: (log) => chains.get(log) ?? Promise.resolve(),
  };
}

/** A stored conversation as the API shows it. */
export interface StoredConversation {
  readonly summary: ConversationSummary;
  readonly state: ConversationState;
  readonly events: ConverseEvent[];
}

export function summaryOfRecord(record: ConversationRecord): ConversationSummary {
  const summary = fromBinary(ConversationSummarySchema, record.payload);
  summary.state = record.state as ConversationState;
  summary.eventCount = BigInt(record.eventCount);
  summary.updateTime = timestampFromMs(record.updatedAt);
  return summary;
}

/** Events of a stored conversation with seq > afterSeq, all of them, in order. */
export async function readStoredEvents(
  store: ConversationStore,
  tenant: string,
  conversationId: string,
  afterSeq: number,
): Promise<ConverseEvent[]> {
  const events: ConverseEvent[] = [];
  for (;;) {
    const page = await store.readConversationEvents(tenant, conversationId, afterSeq + events.length, EVENT_PAGE);
    for (const e of page) events.push(fromBinary(ConverseEventSchema, e.payload));
    if (page.length < EVENT_PAGE) return events;
  }
}

export async function loadConversation(
  store: ConversationStore,
  tenant: string,
  conversationId: string,
): Promise<StoredConversation | undefined> {
  const record = await store.getConversation(tenant, conversationId);
  if (!record) return undefined;
  const events = await readStoredEvents(store, tenant, conversationId, 0);
  return { summary: summaryOfRecord(record), state: record.state as ConversationState, events };
}

/**
 * Ends the stored conversations that no process runs any more: with LevelDB (one owning process) every one still
 * recorded as running when the server starts; with PostgreSQL those not updated for longer than `staleMs` (a
 * running conversation stores a step at least once per step timeout). Each gets a last event that says so.
 */
export async function recoverConversations(
  store: ConversationStore,
  options: { readonly staleMs?: number; readonly logger: Logger; readonly now?: () => number },
): Promise<number> {
  const now = options.now ?? Date.now;
  let ended = 0;
  for (const record of await store.listRunningConversations(1_000)) {
    if (options.staleMs !== undefined && now() - record.updatedAt < options.staleMs) continue;
    const summary = fromBinary(ConversationSummarySchema, record.payload);
    const time = timestampNow();
    const last = create(ConverseEventSchema, {
      conversationId: record.conversationId,
      sequence: BigInt(record.eventCount + 1),
      phase: Phase.DONE,
      stopReason: StopReason.CANCELED,
      detail:
        "the server that ran this conversation stopped before it ended; it was ended when the store was opened again",
      time,
      requesterContextId: record.contextIds[0],
      targetContextId: record.contextIds[1],
    });
    summary.state = ConversationState.DONE;
    summary.stopReason = StopReason.CANCELED;
    summary.updateTime = time;
    summary.eventCount = BigInt(record.eventCount + 1);
    try {
      await store.saveConversation(
        {
          ...record,
          state: ConversationState.DONE,
          updatedAt: Math.floor(timestampDate(time).getTime()),
          eventCount: record.eventCount + 1,
          payload: toBinary(ConversationSummarySchema, summary),
        },
        [{ seq: record.eventCount + 1, payload: toBinary(ConverseEventSchema, last) }],
      );
      ended += 1;
    } catch (error) {
      options.logger.warn(
        { conversationId: record.conversationId, err: error },
        "could not end an interrupted conversation",
      );
    }
  }
  return ended;
}

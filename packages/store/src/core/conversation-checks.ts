// Checks of the ConversationStore's inputs, its digests, and the record codec both backends share.
import type { ConversationEvent, ConversationRecord, ListConversationsQuery } from "../conversation-types.js";
import { StoreError } from "../types.js";
import { ByteReader, ByteWriter, utf8FieldsLength } from "./bytes.js";
import { checkLimit, checkPayload, checkTime } from "./checks.js";
import { cursorKinds, cursorTag, decodeCursor } from "./cursors.js";
import { digest } from "./digests.js";
import { checkId } from "./ids.js";

/** Longest agent name a conversation record keeps (a hosted agent's name, or a peer's name or URL). */
export const MAX_AGENT_BYTES = 2048;

export const conversationHash = (tenant: string, conversationId: string) =>
  digest("parley.conversation.v1", [tenant, conversationId]);

export function checkConversationIds(tenant: string, conversationId: string): void {
  checkId("tenant", tenant);
  checkId("conversationId", conversationId);
}

function checkAgent(name: string, value: unknown): string {
  if (typeof value !== "string" || Buffer.byteLength(value, "utf8") > MAX_AGENT_BYTES) {
    throw new RangeError(`${name} must be a string of at most ${MAX_AGENT_BYTES} UTF-8 bytes`);
  }
  return value;
}

export function checkConversationState(value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0x7fffffff) {
    throw new RangeError(`state must be a ConversationState number, got ${String(value)}`);
  }
  return value;
}

/** Checks a save: the record's fields, and events that end at record.eventCount with consecutive seqs. */
export function checkSave(record: ConversationRecord, events: readonly ConversationEvent[]): void {
  checkConversationIds(record?.tenant, record.conversationId);
  checkConversationState(record.state);
  checkTime("createdAt", record.createdAt);
  checkTime("updatedAt", record.updatedAt);
  checkAgent("agents[0]", record.agents?.[0]);
  checkAgent("agents[1]", record.agents[1]);
  checkId("contextId", record.contextIds?.[0]);
  checkId("contextId", record.contextIds[1]);
  checkLimit("eventCount", record.eventCount, true);
  checkPayload("payload", record.payload);
  if (!Array.isArray(events)) throw new TypeError("events must be an array");
  const first = record.eventCount - events.length + 1;
  events.forEach((event, i) => {
    checkPayload("event payload", event?.payload);
    if (event.seq !== first + i) {
      throw new RangeError(
        `event seqs must run from ${first} to ${record.eventCount} (record.eventCount), got ${String(event.seq)} at ${i}`,
      );
    }
  });
}

/** The refusal of a save whose events do not follow the stored ones. */
export function outOfOrder(record: ConversationRecord, events: number, stored: number | undefined): StoreError {
  const first = record.eventCount - events + 1;
  return new StoreError(
    "CONFLICT",
    stored === undefined
      ? `conversation ${JSON.stringify(record.conversationId)} is not stored (deleted with its thread?) and events from seq ${first} cannot start it`
      : `conversation ${JSON.stringify(record.conversationId)} holds ${stored} events; events from seq ${first} do not follow them`,
  );
}

/** A listConversations query, checked, with a cursor bound to exactly these filters. */
export function checkListConversations(tenant: string, query: ListConversationsQuery) {
  checkId("tenant", tenant);
  const limit = checkLimit("limit", query?.limit);
  if (query.state !== undefined) checkConversationState(query.state);
  if (query.agent !== undefined) checkAgent("agent", query.agent);
  const tag = cursorTag("conversations", [
    tenant,
    query.state === undefined ? "" : `s${query.state}`,
    query.agent === undefined ? "" : `a${query.agent}`,
  ]);
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, cursorKinds.conversations, tag);
  return { limit, tag, after, state: query.state, agent: query.agent };
}

/** True when the record passes the query's filters. */
export function matchesQuery(record: ConversationRecord, state?: number, agent?: string): boolean {
  if (state !== undefined && record.state !== state) return false;
  return agent === undefined || record.agents[0] === agent || record.agents[1] === agent;
}

const RECORD_VERSION = 1;

/** [version u8, state u32, createdAt u64, updatedAt u64, eventCount u64, 6 length-prefixed strings, payload]. */
export function encodeConversation(r: ConversationRecord): Uint8Array {
  const fields = [r.tenant, r.conversationId, r.agents[0], r.agents[1], r.contextIds[0], r.contextIds[1]];
  return new ByteWriter(1 + 4 + 24 + utf8FieldsLength(fields) + r.payload.length)
    .u8(RECORD_VERSION)
    .u32(r.state)
    .u64(r.createdAt)
    .u64(r.updatedAt)
    .u64(r.eventCount)
    .utf8Fields(fields)
    .bytes(r.payload)
    .done();
}

export function decodeConversation(raw: Uint8Array): ConversationRecord {
  const reader = new ByteReader(raw);
  const version = reader.u8();
  if (version !== RECORD_VERSION) throw new RangeError(`unknown conversation record version ${version}`);
  const state = reader.u32();
  const createdAt = reader.u64();
  const updatedAt = reader.u64();
  const eventCount = reader.u64();
  const [tenant, conversationId, requester, target, requesterContext, targetContext] = [
    reader.string(),
    reader.string(),
    reader.string(),
    reader.string(),
    reader.string(),
    reader.string(),
  ];
  return {
    tenant,
    conversationId,
    state,
    createdAt,
    updatedAt,
    eventCount,
    agents: [requester, target],
    contextIds: [requesterContext, targetContext],
    payload: reader.rest().slice(),
  };
}

// Conversations (sessions) in the PostgreSQL backend: one row each (parley_conversations) and its events
// (parley_conversation_events), written in one transaction per save, read by every replica.

import type {
  ConversationEvent,
  ConversationPage,
  ConversationRecord,
  ConversationStore,
  ListConversationsQuery,
} from "../conversation-types.js";
import { concatBytes, readU64, u64 } from "../core/bytes.js";
import { checkLimit, MAX_TIME } from "../core/checks.js";
import {
  checkConversationIds,
  checkListConversations,
  checkSave,
  conversationHash,
  matchesQuery,
  outOfOrder,
} from "../core/conversation-checks.js";
import { cursorKinds, encodeCursor } from "../core/cursors.js";
import { StoreError } from "../types.js";
import { asBuffer, asBytes, idBytes, idText, tenantKeyOf, threadKeyOf } from "./pg-keys.js";
import type { PgPool } from "./pg-pipeline.js";
import { transaction } from "./pg-transaction.js";

interface Row {
  conversation_key: Buffer;
  tenant: Buffer;
  conversation_id: Buffer;
  state: number;
  created_at: string;
  updated_at: string;
  requester_agent: Buffer;
  target_agent: Buffer;
  requester_context: Buffer;
  target_context: Buffer;
  event_count: string;
  payload: Buffer;
}

const COLUMNS = `conversation_key, tenant, conversation_id, state, created_at, updated_at, requester_agent,
  target_agent, requester_context, target_context, event_count, payload`;

function recordOf(row: Row): ConversationRecord {
  return {
    tenant: idText(row.tenant, "tenant"),
    conversationId: idText(row.conversation_id, "conversationId"),
    state: row.state,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    agents: [idText(row.requester_agent, "agent"), idText(row.target_agent, "agent")],
    contextIds: [idText(row.requester_context, "contextId"), idText(row.target_context, "contextId")],
    eventCount: Number(row.event_count),
    payload: asBytes(row.payload),
  };
}

const INSERT_SQL = `
  INSERT INTO parley_conversations (conversation_key, tenant_key, tenant, conversation_id, state, created_at,
    updated_at, requester_agent, target_agent, requester_context, target_context, requester_thread, target_thread,
    event_count, payload)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`;

// What never changes (tenant, id, createdAt, agents, contexts) is kept as first stored.
const UPDATE_SQL = `
  UPDATE parley_conversations SET state = $2, updated_at = $3, event_count = $4, payload = $5
  WHERE conversation_key = $1`;

export function createPgConversations(options: {
  readonly pool: PgPool;
  readonly open: (name: string) => void;
}): ConversationStore {
  const { pool } = options;
  return {
    async saveConversation(record: ConversationRecord, events: readonly ConversationEvent[]): Promise<void> {
      options.open("saveConversation");
      checkSave(record, events);
      const ck = asBuffer(conversationHash(record.tenant, record.conversationId));
      await transaction(pool, async (client) => {
        const { rows } = await client.query<{ event_count: string; tenant: Buffer; conversation_id: Buffer }>(
          "SELECT event_count, tenant, conversation_id FROM parley_conversations WHERE conversation_key = $1 FOR UPDATE",
          [ck],
        );
        const stored = rows[0];
        const storedCount = stored ? Number(stored.event_count) : undefined;
        const before = record.eventCount - events.length;
        if ((storedCount ?? 0) !== before || (stored === undefined && before !== 0)) {
          throw outOfOrder(record, events.length, storedCount);
        }
        if (
          stored &&
          (idText(stored.tenant, "tenant") !== record.tenant ||
            idText(stored.conversation_id, "conversationId") !== record.conversationId)
        ) {
          throw new StoreError("CORRUPT", `conversation row ${ck.toString("hex")} belongs to another conversation`);
        }
        if (stored) {
          await client.query(UPDATE_SQL, [
            ck,
            record.state,
            record.updatedAt,
            record.eventCount,
            asBuffer(record.payload),
          ]);
        } else {
          await client.query(INSERT_SQL, [
            ck,
            tenantKeyOf(record.tenant),
            idBytes(record.tenant),
            idBytes(record.conversationId),
            record.state,
            record.createdAt,
            record.updatedAt,
            idBytes(record.agents[0]),
            idBytes(record.agents[1]),
            idBytes(record.contextIds[0]),
            idBytes(record.contextIds[1]),
            threadKeyOf(record.tenant, record.contextIds[0]),
            threadKeyOf(record.tenant, record.contextIds[1]),
            record.eventCount,
            asBuffer(record.payload),
          ]);
        }
        if (events.length > 0) {
          await client.query(
            `INSERT INTO parley_conversation_events (conversation_key, seq, payload)
             SELECT $1, s, p FROM unnest($2::bigint[], $3::bytea[]) AS e(s, p)`,
            [ck, events.map((e) => e.seq), events.map((e) => asBuffer(e.payload))],
          );
        }
      });
    },

    async getConversation(tenant: string, conversationId: string): Promise<ConversationRecord | undefined> {
      options.open("getConversation");
      checkConversationIds(tenant, conversationId);
      const { rows } = await pool.query<Row>(
        `SELECT ${COLUMNS} FROM parley_conversations WHERE conversation_key = $1`,
        [asBuffer(conversationHash(tenant, conversationId))],
      );
      const record = rows[0] && recordOf(rows[0]);
      return record && record.tenant === tenant && record.conversationId === conversationId ? record : undefined;
    },

    async readConversationEvents(tenant, conversationId, afterSeq, limit): Promise<ConversationEvent[]> {
      options.open("readConversationEvents");
      checkConversationIds(tenant, conversationId);
      checkLimit("afterSeq", afterSeq, true);
      checkLimit("limit", limit);
      const { rows } = await pool.query<{ seq: string; payload: Buffer }>(
        `SELECT seq, payload FROM parley_conversation_events
         WHERE conversation_key = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
        [asBuffer(conversationHash(tenant, conversationId)), afterSeq, limit],
      );
      return rows.map((r) => ({ seq: Number(r.seq), payload: asBytes(r.payload) }));
    },

    async listConversations(tenant: string, query: ListConversationsQuery): Promise<ConversationPage> {
      options.open("listConversations");
      const { limit, tag, after, state, agent } = checkListConversations(tenant, query);
      const params: unknown[] = [tenantKeyOf(tenant), limit + 1];
      const where = ["tenant_key = $1"];
      if (after) {
        params.push(MAX_TIME - readU64(after, 0), asBuffer(after.subarray(8)));
        where.push("(created_at < $3 OR (created_at = $3 AND conversation_key > $4))");
      }
      if (state !== undefined) {
        params.push(state);
        where.push(`state = $${params.length}`);
      }
      if (agent !== undefined) {
        params.push(idBytes(agent));
        where.push(`(requester_agent = $${params.length} OR target_agent = $${params.length})`);
      }
      const { rows } = await pool.query<Row>(
        `SELECT ${COLUMNS} FROM parley_conversations WHERE ${where.join(" AND ")}
         ORDER BY created_at DESC, conversation_key LIMIT $2`,
        params,
      );
      const records = rows.map(recordOf).filter((r) => r.tenant === tenant && matchesQuery(r, state, agent));
      if (rows.length <= limit) return { conversations: records };
      const page = records.slice(0, limit);
      const last = rows[limit - 1]!;
      const position = concatBytes([u64(MAX_TIME - Number(last.created_at)), last.conversation_key]);
      return { conversations: page, nextCursor: encodeCursor(cursorKinds.conversations, tag, position) };
    },

    async listRunningConversations(limit: number): Promise<ConversationRecord[]> {
      options.open("listRunningConversations");
      checkLimit("limit", limit);
      const { rows } = await pool.query<Row>(
        `SELECT ${COLUMNS} FROM parley_conversations WHERE state = 1 ORDER BY created_at LIMIT $1`,
        [limit],
      );
      return rows.map(recordOf);
    },
  };
}

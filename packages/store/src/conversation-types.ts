// The backend-neutral contract of stored sessions (conversations between two agent sessions). As with threads,
// payloads are opaque bytes: the server stores encoded parley.v1 messages, the store knows nothing of them.

/** A conversation's record: what a listing shows and filters on, plus the server's own summary bytes. */
export interface ConversationRecord {
  readonly tenant: string;
  readonly conversationId: string;
  /** The numeric parley.v1.ConversationState (1 running, 2 done). */
  readonly state: number;
  /** When it was accepted, in epoch milliseconds; listings sort on it, newest first. Never changes. */
  readonly createdAt: number;
  readonly updatedAt: number;
  /** The requester's and the target's agent (a hosted agent's name, or a peer); never change. */
  readonly agents: readonly [requester: string, target: string];
  /**
   * The requester's and the target's contextId, in the conversation's tenant; never change. Deleting either
   * thread (DeleteThread or retention) deletes the conversation: its steps quote both threads.
   */
  readonly contextIds: readonly [requester: string, target: string];
  /** Events stored so far, their seqs 1..eventCount. */
  readonly eventCount: number;
  /** The server's summary of the conversation (opaque). */
  readonly payload: Uint8Array;
}

/** One step of a conversation; `seq` is 1 for the first and grows by one. */
export interface ConversationEvent {
  readonly seq: number;
  readonly payload: Uint8Array;
}

export interface ListConversationsQuery {
  /** Only conversations in this state. */
  readonly state?: number;
  /** Only conversations with this agent on either side. */
  readonly agent?: string;
  readonly limit: number;
  readonly cursor?: string;
}

export interface ConversationPage {
  /** Newest first (createdAt, then a digest of the id). */
  readonly conversations: ConversationRecord[];
  /** Absent on the last page. */
  readonly nextCursor?: string;
}

/**
 * Durable conversations, shared by every replica of a backend. Every write is one atomic batch; a conversation
 * is deleted with either of its threads (ThreadStore.deleteThread, ThreadRetention), never on its own.
 */
export interface ConversationStore {
  /**
   * Writes `record` and appends `events` in one atomic write. The events must carry the seqs after the stored
   * ones (the first write: from 1) and end at record.eventCount; anything else fails with CONFLICT and writes
   * nothing (a conversation deleted while it ran is not brought back by its next step).
   */
  saveConversation(record: ConversationRecord, events: readonly ConversationEvent[]): Promise<void>;
  getConversation(tenant: string, conversationId: string): Promise<ConversationRecord | undefined>;
  /** Events with seq > afterSeq, in order, at most `limit`. */
  readConversationEvents(
    tenant: string,
    conversationId: string,
    afterSeq: number,
    limit: number,
  ): Promise<ConversationEvent[]>;
  /** A tenant's conversations, newest first; the cursor is opaque and bound to the query's filters. */
  listConversations(tenant: string, query: ListConversationsQuery): Promise<ConversationPage>;
  /** Conversations of every tenant still recorded as running, oldest first, at most `limit` (for recovery). */
  listRunningConversations(limit: number): Promise<ConversationRecord[]>;
}

import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { ChainGuard, Engine } from "@parley/domain";
import {
  type ConversationPlan,
  ConversationRunner,
  invalidArgument,
  type ResolvedSession,
  resolveSession,
  silenceTokenSet,
} from "@parley/domain";
import {
  ConversationLog,
  ConversationRegistry,
  createConversationRecorder,
  decodeHops,
  encodeChainReportTrailer,
  fromStore,
  hopsHeader,
  loadConversation,
  readStoredEvents,
  summaryOfRecord,
} from "@parley/domain/internal";
import {
  ConversationState,
  type ConverseEvent,
  type ConverseRequest,
  createDeadline,
  headers,
  Phase,
  type SessionRef,
  type SessionService,
} from "@parley/proto";
import type { ConversationStore, ThreadStore } from "@parley/store";
import type { Logger } from "pino";
import { callPeer } from "../agents/peer-call.js";
import type { ParleyConfig } from "../config.js";
import { callerOf } from "../interceptors/caller-interceptor.js";

/** How many finished conversations stay in memory (every one stays readable from the store). */
export const finishedConversationCapacity = 1_000;
/** How often WatchConversation reads the store for new steps of a conversation another replica runs. */
const storedFollowMs = 250;

/** The agent a listing shows and filters on: a hosted agent's name, or the peer as the request named it. */
function agentOf(session: ResolvedSession): string {
  return session.kind === "local" ? session.agent : session.peer.name;
}

/** Waits `ms`, or less when `signal` aborts; true when it aborted. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(true);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(false);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function refKey(ref: SessionRef | undefined): unknown {
  return ref ? [ref.endpoint.case ?? "", ref.endpoint.value ?? "", ref.contextId] : null;
}

function fingerprintOf(req: ConverseRequest): string {
  return JSON.stringify([refKey(req.requester), refKey(req.target), req.text, req.maxTurns ?? null]);
}

function nonNegative(value: number | undefined, field: string): void {
  if (value !== undefined && value < 0) throw invalidArgument(`${field} must not be negative, got ${value}`);
}

/**
 * parley.v1.SessionService: agent-to-agent conversations between two
 * sessions, streamed step by step. Conversations run independently of the
 * call that started them, so fire-and-forget callers and watchers all see
 * the same event log.
 */
export function createSessionServiceImpl(deps: {
  readonly engine: Engine;
  readonly store: ThreadStore;
  /** Where conversations are recorded, readable by every replica and after restarts. */
  readonly conversations: ConversationStore;
  readonly config: ParleyConfig;
  readonly logger: Logger;
  readonly chains: ChainGuard;
  readonly agentNames: readonly string[];
  /** This server's identity in session ids, e.g. parley@127.0.0.1:8081 (known only once it listens). */
  readonly self: () => string;
}): ServiceImpl<typeof SessionService> {
  const { config } = deps;
  const registry = new ConversationRegistry(finishedConversationCapacity);
  const recorder = createConversationRecorder({ store: deps.conversations, logger: deps.logger });
  const runner = new ConversationRunner({
    engine: deps.engine,
    store: deps.store,
    tokens: silenceTokenSet(config.sessions.silenceTokens),
    logger: deps.logger,
    callPeer,
  });

  function start(
    tenant: string,
    req: ConverseRequest,
    hopHeader: string | null,
    chainHeader: string | null,
  ): ConversationLog {
    // A conversation started from inside an agent belongs to that agent's chain and draws from its budget.
    const chain = deps.chains.admitConversation(chainHeader);
    const sessions = { agentNames: deps.agentNames, peers: config.peers, self: deps.self() };
    const requester = resolveSession(req.requester, "requester", sessions);
    const target = resolveSession(req.target, "target", sessions);
    if (requester.id === target.id) {
      throw invalidArgument(
        `requester and target are the same session (${requester.id}); a session cannot converse with itself`,
      );
    }
    if (requester.kind === "local" && target.kind === "local" && requester.contextId === target.contextId) {
      // Threads are keyed by contextId alone, so two local agents on one contextId would share one thread.
      throw invalidArgument(
        `requester and target both use contextId ${JSON.stringify(target.contextId)}, which would make them one thread; give each session its own contextId`,
      );
    }
    const limits = config.sessions;
    const notes: string[] = [];
    let maxTurns = req.maxTurns ?? limits.defaultTurns;
    if (maxTurns > limits.maxTurns) {
      notes.push(`max_turns ${maxTurns} is above this server's limit and was clamped to ${limits.maxTurns}`);
      maxTurns = limits.maxTurns;
    }
    const stepLimit = config.limits.agentStepTimeoutMs;
    let stepTimeoutMs = req.stepTimeoutMs || stepLimit;
    if (stepTimeoutMs > stepLimit) {
      notes.push(`step_timeout_ms ${stepTimeoutMs} is above this server's limit and was clamped to ${stepLimit}`);
      stepTimeoutMs = stepLimit;
    }

    const incoming = decodeHops(hopHeader);
    const trace = incoming[incoming.length - 1] === requester.id ? incoming : [...incoming, requester.id];
    let hopViolation: string | undefined;
    if (incoming.length >= limits.maxHops) {
      hopViolation = `the request already passed through ${incoming.length} sessions (${incoming.join(" → ")}); the hop limit is ${limits.maxHops}`;
    } else if (trace.includes(target.id)) {
      hopViolation = `the target session ${target.id} already took part in this chain (${[...trace, target.id].join(" → ")}): a loop`;
    }

    const log = new ConversationLog(`conv-${randomUUID()}`, tenant, fingerprintOf(req), chain, {
      requester: requester.contextId,
      target: target.contextId,
    });
    log.append({
      phase: Phase.ACCEPTED,
      maxTurns,
      detail: [`${requester.id} → ${target.id}, up to ${maxTurns} ping-pong turns`, ...notes].join("; "),
    });
    registry.add(log, req.requestId);
    recorder.track(log, { agents: [agentOf(requester), agentOf(target)], text: req.text });
    const plan: ConversationPlan = {
      log,
      tenant,
      requester,
      target,
      text: req.text,
      maxTurns,
      stepTimeoutMs,
      stepBudget: limits.stepBudget,
      trace,
      chain,
      ...(hopViolation !== undefined ? { hopViolation } : {}),
    };
    void runner.run(plan).finally(() => registry.retire(log));
    return log;
  }

  function notFound(id: string): ConnectError {
    return new ConnectError(
      `no conversation ${JSON.stringify(id)}: it never existed for this tenant, or one of its threads was deleted (by DeleteThread or retention)`,
      Code.NotFound,
    );
  }

  function requireId(id: string): string {
    if (id === "") throw invalidArgument("conversation_id is required");
    return id;
  }

  /**
   * Streams the log; its last event is sent once the log is stored, so a caller that saw the end can read the
   * conversation from any replica and after a restart.
   */
  async function* stream(log: ConversationLog, waitMs: number | undefined, ctx: HandlerContext) {
    if (waitMs === 0) {
      await recorder.settled(log);
      yield { event: log.events[0]! };
      return;
    }
    const deadline = waitMs === undefined ? undefined : createDeadline(waitMs, ctx.signal);
    try {
      yield* followStored(log, deadline?.signal ?? ctx.signal);
    } finally {
      deadline?.clear();
    }
  }

  async function* followStored(log: ConversationLog, signal: AbortSignal) {
    for await (const event of log.follow(signal)) {
      if (log.finished && event === log.events[log.events.length - 1]) await recorder.settled(log);
      yield { event };
    }
  }

  return {
    async *converse(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      if (req.text.trim() === "") throw invalidArgument("text must not be empty");
      nonNegative(req.maxTurns, "max_turns");
      nonNegative(req.waitMs, "wait_ms");
      nonNegative(req.stepTimeoutMs, "step_timeout_ms");
      let log = req.requestId !== "" ? registry.byRequestId(tenant, req.requestId) : undefined;
      if (log?.finished) {
        // A retry of a conversation deleted since (with one of its threads) is a new request, not a replay of it.
        await recorder.settled(log);
        if (!(await fromStore(deps.conversations.getConversation(tenant, log.id)))) log = undefined;
      }
      if (log && log.fingerprint !== fingerprintOf(req)) {
        throw invalidArgument(
          `request_id ${JSON.stringify(req.requestId)} was already used for a different request (conversation ${log.id}); choose a new request_id`,
        );
      }
      log ??= start(tenant, req, ctx.requestHeader.get(hopsHeader), ctx.requestHeader.get(headers.chain));
      yield* stream(log, req.waitMs, ctx);
      // Only a finished conversation reports its chain's budget: the caller charges what it used.
      if (log.finished) ctx.responseTrailer.set(headers.chain, encodeChainReportTrailer(log.chain));
    },
    async *watchConversation(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      const id = requireId(req.conversationId);
      // A running conversation of this replica is followed live; every other one is read from the store, which
      // knows whether its thread was deleted since.
      const log = registry.get(tenant, id);
      if (log && !log.finished) {
        yield* followStored(log, ctx.signal);
        return;
      }
      if (log) await recorder.settled(log);
      // Stored: ran before a restart, or runs on another replica (its steps are read as they are stored).
      let seen = 0;
      for (;;) {
        const record = await fromStore(deps.conversations.getConversation(tenant, id));
        if (!record) {
          if (seen === 0) throw notFound(id);
          return;
        }
        for (const event of await fromStore(readStoredEvents(deps.conversations, tenant, id, seen))) {
          seen += 1;
          yield { event };
        }
        if (record.state !== ConversationState.RUNNING && seen >= record.eventCount) return;
        if (await pause(storedFollowMs, ctx.signal)) return;
      }
    },
    async getConversation(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      const id = requireId(req.conversationId);
      const log = registry.get(tenant, id);
      if (log?.finished) await recorder.settled(log);
      if (log && !log.finished) {
        return {
          conversation: { conversationId: log.id, state: log.state, events: [...log.events] as ConverseEvent[] },
        };
      }
      const stored = await fromStore(loadConversation(deps.conversations, tenant, id));
      if (!stored) throw notFound(id);
      return { conversation: { conversationId: id, state: stored.state, events: stored.events } };
    },
    async listConversations(req, ctx) {
      const tenant = callerOf(ctx).tenant;
      if (req.pageSize < 0 || req.pageSize > 100) {
        throw invalidArgument(
          `ListConversations page_size must be between 1 and 100 (the server's maximum page size; 0 = 20), got ${req.pageSize}: ask for at most 100 and follow next_page_token`,
        );
      }
      if (ConversationState[req.state] === undefined) {
        throw invalidArgument(`state must be a ConversationState, got ${req.state}`);
      }
      const page = await fromStore(
        deps.conversations.listConversations(tenant, {
          limit: req.pageSize === 0 ? 20 : req.pageSize,
          ...(req.state !== ConversationState.UNSPECIFIED ? { state: req.state } : {}),
          ...(req.agent !== "" ? { agent: req.agent } : {}),
          ...(req.pageToken !== "" ? { cursor: req.pageToken } : {}),
        }),
      );
      return { conversations: page.conversations.map(summaryOfRecord), nextPageToken: page.nextCursor ?? "" };
    },
  };
}
